//! The host-independent half of Ferry's filter adapter: drives a
//! `ferry_filter_core::exchange::Exchange` through a [`host::Host`], one function per
//! filter callback ([`adapter`]), with the plugin and stream state
//! ([`stream::Plugin`], [`stream::Filter`]) every host shares. The hosts are thin
//! crates around it: `ferry-filter` (proxy-wasm, the .wasm Envoy loads by default) and
//! `ferry-filter-native` (an Envoy dynamic module, a .so). The tests drive the adapter
//! over `mock_host::MockHost`, which refuses what Envoy refuses in each phase.
//!
//! The adapter must never panic (a panic traps the wasm VM, and aborts Envoy in a
//! dynamic module): the lints below deny every panicking shortcut; `clippy.toml`
//! allows them in `#[cfg(test)]` code only.

#![deny(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::unreachable,
    clippy::todo,
    clippy::unimplemented
)]

mod adapter;
pub mod header_map;
mod hold;
pub mod host;
#[cfg(test)]
mod mock_host;
pub mod status;
pub mod stream;
#[cfg(test)]
mod tests;

pub use stream::{Filter, HeaderHold, Plugin};
