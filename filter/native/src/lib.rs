//! Ferry's filter as an Envoy dynamic module: the HTTP filter of
//! `envoy.extensions.filters.http.dynamic_modules` (Envoy 1.40), a second thin host
//! next to the proxy-wasm one (`ferry-filter`), over the same adapter
//! (`ferry-filter-adapter`) and core. Envoy loads `libferry_filter_native.so` by name
//! (`dynamic_module_config: {name: ferry_filter_native}`, searched in
//! `ENVOY_DYNAMIC_MODULES_SEARCH_PATH`) and hands the filter the same JSON
//! configuration the wasm plugin gets (`filter_config`).
//!
//! - [`abi`]: our own declarations of the few ABI types, event hooks and callbacks we
//!   use (Envoy's `source/extensions/dynamic_modules/abi/abi.h`).
//! - `hooks`: the event hooks Envoy calls (config, filter, callbacks per phase).
//! - `host`: `NativeHost`, the adapter's `Host` over the callbacks.
//! - [`body`], [`series`], [`attributes`]: the pure parts of that mapping (proxy-wasm's
//!   body semantics over Envoy's received/buffered bodies; metric names to labelled
//!   metrics; properties to attributes), tested here.
//!
//! The module runs inside Envoy: a panic aborts Envoy (panic = "abort"), so the lints
//! below deny every panicking shortcut, as in the other filter crates.

#![deny(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::unreachable,
    clippy::todo,
    clippy::unimplemented
)]

pub mod abi;
pub mod attributes;
pub mod body;
pub mod series;

// The parts that call Envoy: its symbols exist only inside Envoy, so unit tests
// (linked without it) leave them out.
#[cfg(not(test))]
mod hooks;
#[cfg(not(test))]
mod host;
#[cfg(not(test))]
mod logger;
