//! [`ProxyWasmHost`]: the adapter's [`Host`] over proxy-wasm, the only code that calls
//! the proxy-wasm host.
//!
//! It calls the ABI through `abi.rs`, where every status the host returns is an `Err`:
//! never the SDK's context helpers (they `unwrap`) nor its `hostcalls` (they `panic!`
//! on a status they do not expect, e.g. `BadArgument` for a header set after the
//! headers went out). Header values are read as bytes and decoded lossily.

use proxy_wasm::types::{BufferType, MapType};

use ferry_filter_adapter::header_map::HeaderMap;
use ferry_filter_adapter::host::{Body, Host, Map, MetricType, Status, WHOLE_BODY};

/// The proxy-wasm host (Envoy), through `abi.rs`.
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
