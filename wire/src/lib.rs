//! What Ferry's filter and shim must agree on, written once: the statement classifier,
//! placeholders, the message envelope, the RPC list, the status table, Basic
//! credentials and the headers Envoy sets for both.
//! The shim uses it to keep pooled connections clean; the filter uses it to decide what
//! may run in HTTP/3 early data (0-RTT). It builds natively and for `wasm32-wasip1`.
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

pub mod basic_auth;
pub mod bearer;
pub mod envelope;
pub mod headers;
pub mod lexer;
pub mod placeholder;
pub mod replay;
pub mod rpc;
pub mod session_state;
pub mod statement;
pub mod status;
