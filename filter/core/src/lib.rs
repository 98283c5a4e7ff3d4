//! The logic of Ferry's filter, apart from its host: it serves `psdb.v1alpha1.Database`
//! to Connect (JSON, proto) and gRPC (proto, JSON) clients and talks one canonical form
//! to the shim (Connect, `application/proto`, uncompressed).
//!
//! This crate does not depend on proxy-wasm: the wasm adapter (`ferry-filter`) reads
//! headers and body bytes from Envoy, hands them to an [`exchange::Exchange`], and
//! applies the steps it returns. Everything here has native unit tests.
//!
//! It must never panic (a panic traps the filter's VM): the lints below deny every
//! panicking shortcut; `clippy.toml` allows them in `#[cfg(test)]` code only.

#![deny(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::unreachable,
    clippy::todo,
    clippy::unimplemented
)]

pub mod affinity;
mod auth;
pub mod codec;
mod compression;
pub mod config;
mod connect_get;
pub mod distance;
mod early_data;
pub mod envelope;
pub mod errors;
pub mod exchange;
pub mod header_hold;
pub mod http;
pub mod limits;
pub mod lost;
pub mod metrics;
mod protocol;
pub mod route_class;
mod rpc;
pub mod server_timing;
