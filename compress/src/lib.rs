//! Message compression for Ferry's filter: identity, gzip, zstd, snappy and S2, with
//! bounded decompression (a bomb stops at the limit, nothing past it is allocated).
//! It builds natively and for `wasm32-wasip1`.
//!
//! Like the filter, it must never panic (a panic traps the filter's VM): the lints
//! below deny every panicking shortcut; `clippy.toml` allows them in tests only.

#![deny(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::unreachable,
    clippy::todo,
    clippy::unimplemented
)]

mod error;
pub mod s2;

pub use error::DecompressError;
