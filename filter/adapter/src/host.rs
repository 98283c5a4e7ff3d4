//! The host boundary: the [`Host`] trait (the handful of operations the adapter needs)
//! and the small types it speaks in ([`Status`], [`MetricType`], [`Action`]), so that
//! the adapter depends on no host SDK. Its implementations live in the host crates:
//! `ProxyWasmHost` in `ferry-filter` (proxy-wasm, the .wasm) and `NativeHost` in
//! `ferry-filter-native` (Envoy's dynamic-module ABI, a .so); the tests' `MockHost`
//! answers as Envoy answers a proxy-wasm filter.
//!
//! The semantics are proxy-wasm's (the first host): a body callback sees what Envoy
//! buffered for the filter plus the new chunk, a body edit is a prepend, a whole
//! replacement or an append. Each call is made only in the phase where its map or
//! buffer exists (`adapter.rs` makes them so, and `MockHost` enforces it); a slip is a
//! handled error: request headers and body in request callbacks, response headers,
//! body and trailers in response callbacks, the body only from a body (or trailers)
//! callback.

use crate::header_map::HeaderMap;
pub use crate::status::Status;

/// A header map the filter uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Map {
    RequestHeaders,
    ResponseHeaders,
    ResponseTrailers,
}

/// A body buffer the filter uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Body {
    Request,
    Response,
}

/// A body length that means "all of it" (the host clamps reads; a replacement whose
/// length covers the buffer replaces it whole).
pub const WHOLE_BODY: usize = usize::MAX;

/// What the adapter asks of the host. Every operation names the map or buffer it acts
/// on and returns the host's status on failure.
pub trait Host {
    /// Every header of the map: one call, which the adapter then looks headers up in.
    fn headers(&mut self, map: Map) -> Result<HeaderMap, Status>;
    /// Replaces (or adds) header `name`.
    fn set_header(&mut self, map: Map, name: &str, value: &str) -> Result<(), Status>;
    /// Removes every value of header `name`.
    fn remove_header(&mut self, map: Map, name: &str) -> Result<(), Status>;
    /// Adds a value of header `name` (a response trailer: Envoy creates the trailer map
    /// at the end of the body if the upstream sent none).
    fn add_header(&mut self, map: Map, name: &str, value: &str) -> Result<(), Status>;
    /// Up to `max` bytes of the body from `start`; `None` if there are none.
    fn body(&mut self, body: Body, start: usize, max: usize) -> Result<Option<Vec<u8>>, Status>;
    /// Replaces `size` bytes of the body from `start` with `bytes`. Envoy accepts only
    /// `(0, 0)` (prepend), `(0, size >= len)` (replace all) and `start >= len` (append).
    fn set_body(
        &mut self,
        body: Body,
        start: usize,
        size: usize,
        bytes: &[u8],
    ) -> Result<(), Status>;
    /// Sends a local reply (Envoy's `sendLocalReply`, after the callback returns).
    fn send_reply(
        &mut self,
        status: u32,
        headers: &[(&str, &str)],
        body: Option<&[u8]>,
    ) -> Result<(), Status>;
    /// Resets the stream (the response cannot be completed).
    fn reset_response(&mut self) -> Result<(), Status>;
    /// The plugin configuration bytes, if any (only in `on_configure`).
    fn plugin_configuration(&mut self) -> Result<Option<Vec<u8>>, Status>;
    /// A stream property (Envoy's attributes, e.g. `request.protocol`), `None` if absent.
    fn property(&mut self, path: &[&str]) -> Result<Option<Vec<u8>>, Status>;
    /// The host's clock, in nanoseconds since the epoch.
    fn now_nanos(&mut self) -> Result<u64, Status>;
    /// Defines (or finds) a metric; its id.
    fn define_metric(&mut self, kind: MetricType, name: &str) -> Result<u32, Status>;
    /// Adds to a counter.
    fn increment_metric(&mut self, id: u32, offset: i64) -> Result<(), Status>;
    /// Records a histogram value.
    fn record_metric(&mut self, id: u32, value: u64) -> Result<(), Status>;
    /// The root context's timer period (0: off).
    fn set_tick_period(&mut self, millis: u32) -> Result<(), Status>;
    /// The host can add response trailers the upstream did not send, at the end of the
    /// body (proxy-wasm: yes; Envoy 1.40's dynamic modules: no). Without, the adapter
    /// refuses the calls whose answers need them (gRPC) at their request headers.
    fn adds_trailers(&self) -> bool {
        true
    }
    /// From the root context: the stream `context` is the one later calls act on
    /// (`NotFound` when it is gone).
    fn enter_stream(&mut self, context: u32) -> Result<(), Status>;
    /// Lets the entered stream's held request headers go on.
    fn resume_request(&mut self) -> Result<(), Status>;
}

/// The kind of a metric.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetricType {
    Counter,
    Gauge,
    Histogram,
}

/// What a callback tells the host: go on, or stop here (buffering a body, holding
/// headers) until a later callback (or the root's resume) continues.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Continue,
    Pause,
}
