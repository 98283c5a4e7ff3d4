//! The host boundary: the [`Host`] trait (the handful of operations the adapter needs)
//! and [`ProxyWasmHost`], its implementation over proxy-wasm, the only code that calls
//! the proxy-wasm host.
//!
//! It uses the SDK's `hostcalls` functions, which return `Result`, never the context
//! trait helpers (those `unwrap`). Header values are read as bytes (the SDK's string
//! getters `unwrap` UTF-8 decoding of client-controlled values) and decoded lossily.
//! The SDK still aborts on a status it does not expect from a call (e.g. `BadArgument`
//! for a header map that does not exist in the current phase); each call must be made
//! only in the phase where its map or buffer exists (`adapter.rs` makes them so, and
//! the tests' `MockHost` enforces it):
//! request headers and body in request callbacks, response headers, body and trailers
//! in response callbacks, the body only from a body (or trailers) callback.

use proxy_wasm::hostcalls;
use proxy_wasm::types::{BufferType, MapType, Status};

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
    /// The first value of header `name` (decoded lossily), `None` if absent.
    fn header(&mut self, map: Map, name: &str) -> Result<Option<String>, Status>;
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
    fn header(&mut self, map: Map, name: &str) -> Result<Option<String>, Status> {
        hostcalls::get_map_value_bytes(map_type(map), name)
            .map(|value| value.map(|bytes| String::from_utf8_lossy(&bytes).into_owned()))
    }

    fn set_header(&mut self, map: Map, name: &str, value: &str) -> Result<(), Status> {
        hostcalls::set_map_value(map_type(map), name, Some(value))
    }

    fn remove_header(&mut self, map: Map, name: &str) -> Result<(), Status> {
        hostcalls::remove_map_value(map_type(map), name)
    }

    fn add_header(&mut self, map: Map, name: &str, value: &str) -> Result<(), Status> {
        hostcalls::add_map_value(map_type(map), name, value)
    }

    fn body(&mut self, body: Body, start: usize, max: usize) -> Result<Option<Vec<u8>>, Status> {
        hostcalls::get_buffer(buffer_type(body), start, max)
    }

    fn set_body(
        &mut self,
        body: Body,
        start: usize,
        size: usize,
        bytes: &[u8],
    ) -> Result<(), Status> {
        hostcalls::set_buffer(buffer_type(body), start, size, bytes)
    }

    fn send_reply(
        &mut self,
        status: u32,
        headers: &[(&str, &str)],
        body: Option<&[u8]>,
    ) -> Result<(), Status> {
        hostcalls::send_http_response(status, headers.to_vec(), body)
    }

    fn reset_response(&mut self) -> Result<(), Status> {
        hostcalls::reset_http_response()
    }

    fn plugin_configuration(&mut self) -> Result<Option<Vec<u8>>, Status> {
        hostcalls::get_buffer(BufferType::PluginConfiguration, 0, WHOLE_BODY)
    }
}
