//! The host boundary: the [`Host`] trait (the handful of operations the adapter needs)
//! and [`ProxyWasmHost`], its implementation over proxy-wasm, the only code that calls
//! the proxy-wasm host.
//!
//! It calls the ABI through `abi.rs`, where every status the host returns is an `Err`:
//! never the SDK's context helpers (they `unwrap`) nor its `hostcalls` (they `panic!`
//! on a status they do not expect, e.g. `BadArgument` for a header set after the
//! headers went out). Header values are read as bytes and decoded lossily. Each call
//! is still made only in the phase where its map or buffer exists (`adapter.rs` makes
//! them so, and the tests' `MockHost` enforces it); a slip is a handled error:
//! request headers and body in request callbacks, response headers, body and trailers
//! in response callbacks, the body only from a body (or trailers) callback.

use proxy_wasm::types::{BufferType, MapType, MetricType, Status};

use crate::header_map::HeaderMap;

/// A header map the filter uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Map {
    RequestHeaders,
    ResponseHeaders,
    ResponseTrailers,
}

/// A body buffer the filter uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Body {
    Request,
    Response,
}

/// A body length that means "all of it" (the host clamps reads; a replacement whose
/// length covers the buffer replaces it whole).
pub(crate) const WHOLE_BODY: usize = usize::MAX;

/// What the adapter asks of the host. Every operation names the map or buffer it acts
/// on and returns the host's status on failure.
pub(crate) trait Host {
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
    /// From the root context: the stream `context` is the one later calls act on
    /// (`NotFound` when it is gone).
    fn enter_stream(&mut self, context: u32) -> Result<(), Status>;
    /// Lets the entered stream's held request headers go on.
    fn resume_request(&mut self) -> Result<(), Status>;
}

/// The proxy-wasm host (Envoy), through the SDK's `hostcalls`.
pub(crate) struct ProxyWasmHost;

fn map_type(map: Map) -> MapType {
    match map {
        Map::RequestHeaders => MapType::HttpRequestHeaders,
        Map::ResponseHeaders => MapType::HttpResponseHeaders,
        Map::ResponseTrailers => MapType::HttpResponseTrailers,
    }
}

fn buffer_type(body: Body) -> BufferType {
    match body {
        Body::Request => BufferType::HttpRequestBody,
        Body::Response => BufferType::HttpResponseBody,
    }
}

impl Host for ProxyWasmHost {
    fn headers(&mut self, map: Map) -> Result<HeaderMap, Status> {
        crate::abi::header_map(map_type(map))
    }

    fn set_header(&mut self, map: Map, name: &str, value: &str) -> Result<(), Status> {
        crate::abi::set_header(map_type(map), name, value)
    }

    fn remove_header(&mut self, map: Map, name: &str) -> Result<(), Status> {
        crate::abi::remove_header(map_type(map), name)
    }

    fn add_header(&mut self, map: Map, name: &str, value: &str) -> Result<(), Status> {
        crate::abi::add_header(map_type(map), name, value)
    }

    fn body(&mut self, body: Body, start: usize, max: usize) -> Result<Option<Vec<u8>>, Status> {
        crate::abi::buffer(buffer_type(body), start, max)
    }

    fn set_body(
        &mut self,
        body: Body,
        start: usize,
        size: usize,
        bytes: &[u8],
    ) -> Result<(), Status> {
        crate::abi::set_buffer(buffer_type(body), start, size, bytes)
    }

    fn send_reply(
        &mut self,
        status: u32,
        headers: &[(&str, &str)],
        body: Option<&[u8]>,
    ) -> Result<(), Status> {
        crate::abi::send_local_response(status, headers, body)
    }

    fn reset_response(&mut self) -> Result<(), Status> {
        crate::abi::reset_response()
    }

    fn plugin_configuration(&mut self) -> Result<Option<Vec<u8>>, Status> {
        crate::abi::buffer(BufferType::PluginConfiguration, 0, WHOLE_BODY)
    }

    fn property(&mut self, path: &[&str]) -> Result<Option<Vec<u8>>, Status> {
        crate::abi::property(path)
    }

    fn now_nanos(&mut self) -> Result<u64, Status> {
        crate::abi::now_nanos()
    }

    // Envoy 1.40 answers `define_metric` with an error only for an unknown metric type
    // (the SDK aborts on it); ours are counters and histograms.
    fn define_metric(&mut self, kind: MetricType, name: &str) -> Result<u32, Status> {
        crate::abi::define_metric(kind, name)
    }

    fn increment_metric(&mut self, id: u32, offset: i64) -> Result<(), Status> {
        crate::abi::increment_metric(id, offset)
    }

    fn record_metric(&mut self, id: u32, value: u64) -> Result<(), Status> {
        crate::abi::record_metric(id, value)
    }

    fn set_tick_period(&mut self, millis: u32) -> Result<(), Status> {
        crate::abi::set_tick_period(millis)
    }

    fn enter_stream(&mut self, context: u32) -> Result<(), Status> {
        crate::abi::set_effective_context(context)
    }

    // Envoy defers it until the VM call returns (a re-entrant continue).
    fn resume_request(&mut self) -> Result<(), Status> {
        crate::abi::continue_request()
    }
}
