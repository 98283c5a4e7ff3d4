//! Why a host call failed: the adapter's own words for the hosts' statuses.

/// Why a host call failed (proxy-wasm's status words, which the other hosts map to).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    NotFound,
    BadArgument,
    SerializationFailure,
    ParseFailure,
    Empty,
    CasMismatch,
    InternalFailure,
    /// The host has no such operation (e.g. a timer in a host that needs none).
    Unimplemented,
}
