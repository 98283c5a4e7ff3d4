//! `NativeHost`: the adapter's `Host` over Envoy's dynamic-module callbacks, for one
//! HTTP stream (`filter` is Envoy's `DynamicModuleHttpFilter`, valid until the
//! stream's filter is destroyed). Every callback's failure is a `Status`, never a
//! panic. Where the ABI lacks what proxy-wasm has, the host says `Unimplemented` and
//! the adapter goes on without it (the header hold's timer: the native filter needs
//! none).

use std::cell::RefCell;
use std::rc::Rc;
use std::time::{SystemTime, UNIX_EPOCH};

use ferry_filter_adapter::header_map::HeaderMap;
use ferry_filter_adapter::host::{Body, Host, Map, MetricType, Status};

use crate::abi::{self, body_type, header_type, EnvoyBuffer, FilterEnvoyPtr, HttpHeader};
use crate::abi::{ModuleBuffer, METRICS_SUCCESS, RESET_LOCAL};
use crate::attributes::{self, Attribute};
use crate::body::{Part, Parts, View};
use crate::series::{self, Metric, Series};

/// The labelled metrics a filter config defined (`None`: Envoy refused them).
#[derive(Clone, Copy, Debug, Default)]
pub struct MetricIds {
    pub requests: Option<usize>,
    pub duration: Option<usize>,
}

/// The series the adapter defined on this worker: its metric ids index this table.
pub type SeriesTable = Rc<RefCell<Vec<Series>>>;

pub struct NativeHost {
    filter: FilterEnvoyPtr,
    metrics: MetricIds,
    series: SeriesTable,
    /// The plugin configuration (a host made for `configure` only).
    configuration: Option<Vec<u8>>,
    /// The last request (response) body callback paused: Envoy buffered for the filter.
    pub request_paused: bool,
    pub response_paused: bool,
}

impl NativeHost {
    pub fn new(filter: FilterEnvoyPtr, metrics: MetricIds, series: SeriesTable) -> Self {
        NativeHost {
            filter,
            metrics,
            series,
            configuration: None,
            request_paused: false,
            response_paused: false,
        }
    }

    /// A host that only answers the configuration.
    pub fn for_configuration(configuration: Vec<u8>) -> Self {
        NativeHost {
            configuration: Some(configuration),
            ..NativeHost::new(
                std::ptr::null_mut(),
                MetricIds::default(),
                SeriesTable::default(),
            )
        }
    }

    fn stream(&self) -> Result<FilterEnvoyPtr, Status> {
        if self.filter.is_null() {
            Err(Status::NotFound)
        } else {
            Ok(self.filter)
        }
    }

    fn view(&self, body: Body) -> View {
        View {
            paused: match body {
                Body::Request => self.request_paused,
                Body::Response => self.response_paused,
            },
        }
    }

    /// The body's length as a body callback reports it.
    pub fn body_len(&self, body: Body) -> usize {
        match self.parts(body) {
            Ok(mut parts) => self.view(body).len(&mut parts),
            Err(_) => 0,
        }
    }

    fn parts(&self, body: Body) -> Result<EnvoyParts, Status> {
        Ok(EnvoyParts {
            filter: self.stream()?,
            body,
        })
    }
}

fn header_type(map: Map) -> u32 {
    match map {
        Map::RequestHeaders => header_type::REQUEST_HEADER,
        Map::ResponseHeaders => header_type::RESPONSE_HEADER,
        Map::ResponseTrailers => header_type::RESPONSE_TRAILER,
    }
}

fn ok(done: bool) -> Result<(), Status> {
    if done {
        Ok(())
    } else {
        Err(Status::BadArgument)
    }
}

/// One direction's body parts, through the callbacks.
struct EnvoyParts {
    filter: FilterEnvoyPtr,
    body: Body,
}

impl EnvoyParts {
    fn body_type(&self, part: Part) -> u32 {
        match (self.body, part) {
            (Body::Request, Part::Received) => body_type::RECEIVED_REQUEST,
            (Body::Request, Part::Buffered) => body_type::BUFFERED_REQUEST,
            (Body::Response, Part::Received) => body_type::RECEIVED_RESPONSE,
            (Body::Response, Part::Buffered) => body_type::BUFFERED_RESPONSE,
        }
    }
}

impl Parts for EnvoyParts {
    fn read(&mut self, part: Part) -> Option<Vec<u8>> {
        let kind = self.body_type(part);
        // SAFETY: `filter` is the live stream's; Envoy fills `count` slices, which stay
        // valid until this hook returns (we copy them now).
        unsafe {
            let count =
                abi::envoy_dynamic_module_callback_http_get_body_chunks_size(self.filter, kind);
            let mut chunks = vec![EnvoyBuffer::null(); count];
            if !abi::envoy_dynamic_module_callback_http_get_body_chunks(
                self.filter,
                kind,
                chunks.as_mut_ptr(),
            ) {
                return None;
            }
            let mut out = Vec::with_capacity(chunks.iter().map(|c| c.length).sum());
            for chunk in chunks {
                out.extend_from_slice(chunk.bytes());
            }
            Some(out)
        }
    }

    fn drain(&mut self, part: Part, n: usize) -> bool {
        // SAFETY: the live stream's pointer; no buffers.
        unsafe {
            abi::envoy_dynamic_module_callback_http_drain_body(self.filter, self.body_type(part), n)
        }
    }

    fn append(&mut self, part: Part, bytes: &[u8]) -> bool {
        // SAFETY: `bytes` outlives the call; Envoy copies it.
        unsafe {
            abi::envoy_dynamic_module_callback_http_append_body(
                self.filter,
                self.body_type(part),
                ModuleBuffer::of(bytes),
            )
        }
    }

    fn len(&mut self, part: Part) -> usize {
        // SAFETY: the live stream's pointer.
        unsafe {
            abi::envoy_dynamic_module_callback_http_get_body_size(self.filter, self.body_type(part))
        }
    }

    fn received_is_buffered(&mut self) -> bool {
        // SAFETY: the live stream's pointer.
        unsafe {
            match self.body {
                Body::Request => {
                    abi::envoy_dynamic_module_callback_http_received_buffered_request_body(
                        self.filter,
                    )
                }
                Body::Response => {
                    abi::envoy_dynamic_module_callback_http_received_buffered_response_body(
                        self.filter,
                    )
                }
            }
        }
    }
}

impl Host for NativeHost {
    fn headers(&mut self, map: Map) -> Result<HeaderMap, Status> {
        let filter = self.stream()?;
        let kind = header_type(map);
        // SAFETY: Envoy fills `count` entries whose bytes stay valid until this hook
        // returns or a header is set; they are copied before either.
        unsafe {
            let count = abi::envoy_dynamic_module_callback_http_get_headers_size(filter, kind);
            let mut entries = vec![HttpHeader::null(); count];
            if !abi::envoy_dynamic_module_callback_http_get_headers(
                filter,
                kind,
                entries.as_mut_ptr(),
            ) {
                return Err(Status::NotFound);
            }
            Ok(HeaderMap::from_pairs(entries.iter().map(|h| {
                (
                    EnvoyBuffer {
                        ptr: h.key_ptr,
                        length: h.key_length,
                    }
                    .bytes(),
                    EnvoyBuffer {
                        ptr: h.value_ptr,
                        length: h.value_length,
                    }
                    .bytes(),
                )
            })))
        }
    }

    // Envoy's set_header removes the header for an empty value (the ABI cannot set an
    // empty one). A request header edit clears the route cache: the route is chosen
    // again with the filter's routing headers (proxy-wasm's host does the same).
    fn set_header(&mut self, map: Map, name: &str, value: &str) -> Result<(), Status> {
        let filter = self.stream()?;
        // SAFETY: the slices outlive the call; Envoy copies them.
        let done = unsafe {
            abi::envoy_dynamic_module_callback_http_set_header(
                filter,
                header_type(map),
                ModuleBuffer::of(name.as_bytes()),
                ModuleBuffer::of(value.as_bytes()),
            )
        };
        ok(done)?;
        if map == Map::RequestHeaders {
            // SAFETY: the live stream's pointer.
            unsafe { abi::envoy_dynamic_module_callback_http_clear_route_cache(filter) };
        }
        Ok(())
    }

    fn remove_header(&mut self, map: Map, name: &str) -> Result<(), Status> {
        let filter = self.stream()?;
        // SAFETY: as above; a null value removes the header.
        let done = unsafe {
            abi::envoy_dynamic_module_callback_http_set_header(
                filter,
                header_type(map),
                ModuleBuffer::of(name.as_bytes()),
                ModuleBuffer::null(),
            )
        };
        ok(done)?;
        if map == Map::RequestHeaders {
            // SAFETY: the live stream's pointer.
            unsafe { abi::envoy_dynamic_module_callback_http_clear_route_cache(filter) };
        }
        Ok(())
    }

    // Envoy 1.40's dynamic modules add to an existing map only: response trailers the
    // upstream did not send cannot be created (proxy-wasm's host creates them at the end
    // of the body; the ABI has no `addEncodedTrailers`). Hence `adds_trailers` is false,
    // and should a trailer still be added, this fails (NotFound) and the adapter handles
    // it.
    fn adds_trailers(&self) -> bool {
        false
    }

    fn add_header(&mut self, map: Map, name: &str, value: &str) -> Result<(), Status> {
        let filter = self.stream()?;
        // SAFETY: the slices outlive the call; Envoy copies them.
        let done = unsafe {
            abi::envoy_dynamic_module_callback_http_add_header(
                filter,
                header_type(map),
                ModuleBuffer::of(name.as_bytes()),
                ModuleBuffer::of(value.as_bytes()),
            )
        };
        if done {
            Ok(())
        } else {
            Err(Status::NotFound)
        }
    }

    fn body(&mut self, body: Body, start: usize, max: usize) -> Result<Option<Vec<u8>>, Status> {
        let view = self.view(body);
        Ok(view.slice(&mut self.parts(body)?, start, max))
    }

    fn set_body(
        &mut self,
        body: Body,
        start: usize,
        size: usize,
        bytes: &[u8],
    ) -> Result<(), Status> {
        let view = self.view(body);
        view.edit(&mut self.parts(body)?, start, size, bytes)
            .map_err(|_| Status::BadArgument)
    }

    fn send_reply(
        &mut self,
        status: u32,
        headers: &[(&str, &str)],
        body: Option<&[u8]>,
    ) -> Result<(), Status> {
        let filter = self.stream()?;
        let mut entries: Vec<HttpHeader> = headers
            .iter()
            .map(|(name, value)| HttpHeader {
                key_ptr: name.as_ptr().cast(),
                key_length: name.len(),
                value_ptr: value.as_ptr().cast(),
                value_length: value.len(),
            })
            .collect();
        let body = body.unwrap_or_default();
        // SAFETY: every slice outlives the call; Envoy copies them (sendLocalReply).
        unsafe {
            abi::envoy_dynamic_module_callback_http_send_response(
                filter,
                status,
                entries.as_mut_ptr(),
                entries.len(),
                ModuleBuffer::of(body),
                ModuleBuffer::of(b"ferry"),
            );
        }
        Ok(())
    }

    fn reset_response(&mut self) -> Result<(), Status> {
        let filter = self.stream()?;
        // SAFETY: the live stream's pointer and a static string.
        unsafe {
            abi::envoy_dynamic_module_callback_http_filter_reset_stream(
                filter,
                RESET_LOCAL,
                ModuleBuffer::of(b"ferry_incomplete_answer"),
            );
        }
        Ok(())
    }

    fn plugin_configuration(&mut self) -> Result<Option<Vec<u8>>, Status> {
        Ok(self.configuration.clone())
    }

    fn property(&mut self, path: &[&str]) -> Result<Option<Vec<u8>>, Status> {
        let filter = self.stream()?;
        let Some(attribute) = attributes::of(path) else {
            return Ok(None);
        };
        match attribute {
            Attribute::String(id) => {
                let mut value = EnvoyBuffer::null();
                // SAFETY: Envoy's bytes stay valid until the hook returns; copied now.
                unsafe {
                    if !abi::envoy_dynamic_module_callback_http_filter_get_attribute_string(
                        filter, id, &mut value,
                    ) {
                        return Ok(None);
                    }
                    Ok(Some(value.bytes().to_vec()))
                }
            }
            Attribute::Int(id) => {
                let mut value = 0u64;
                // SAFETY: a pointer to a live local.
                let found = unsafe {
                    abi::envoy_dynamic_module_callback_http_filter_get_attribute_int(
                        filter, id, &mut value,
                    )
                };
                Ok(found.then(|| attributes::int_bytes(value)))
            }
        }
    }

    fn now_nanos(&mut self) -> Result<u64, Status> {
        let since = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_err(|_| Status::InternalFailure)?;
        u64::try_from(since.as_nanos()).map_err(|_| Status::InternalFailure)
    }

    fn define_metric(&mut self, kind: MetricType, name: &str) -> Result<u32, Status> {
        let series = series::parse(name).ok_or(Status::BadArgument)?;
        let expected = match series.metric {
            Metric::Requests => MetricType::Counter,
            Metric::Duration => MetricType::Histogram,
        };
        if kind != expected {
            return Err(Status::BadArgument);
        }
        let mut table = self
            .series
            .try_borrow_mut()
            .map_err(|_| Status::InternalFailure)?;
        let id = u32::try_from(table.len()).map_err(|_| Status::InternalFailure)?;
        table.push(series);
        Ok(id)
    }

    fn increment_metric(&mut self, id: u32, offset: i64) -> Result<(), Status> {
        let value = u64::try_from(offset).map_err(|_| Status::BadArgument)?;
        self.emit(id, Metric::Requests, value)
    }

    fn record_metric(&mut self, id: u32, value: u64) -> Result<(), Status> {
        self.emit(id, Metric::Duration, value)
    }

    // The header hold needs no timer here (Envoy holds natively); nothing to enter.
    fn set_tick_period(&mut self, _millis: u32) -> Result<(), Status> {
        Err(Status::Unimplemented)
    }

    fn enter_stream(&mut self, _context: u32) -> Result<(), Status> {
        Err(Status::Unimplemented)
    }

    fn resume_request(&mut self) -> Result<(), Status> {
        Err(Status::Unimplemented)
    }
}

impl NativeHost {
    /// Adds to (records in) series `id` of `metric`.
    fn emit(&mut self, id: u32, metric: Metric, value: u64) -> Result<(), Status> {
        let filter = self.stream()?;
        let table = self
            .series
            .try_borrow()
            .map_err(|_| Status::InternalFailure)?;
        let series = usize::try_from(id)
            .ok()
            .and_then(|i| table.get(i))
            .filter(|s| s.metric == metric)
            .ok_or(Status::NotFound)?;
        let envoy_id = match metric {
            Metric::Requests => self.metrics.requests,
            Metric::Duration => self.metrics.duration,
        }
        .ok_or(Status::Unimplemented)?;
        let mut values: Vec<ModuleBuffer> = series
            .values
            .iter()
            .map(|v| ModuleBuffer::of(v.as_bytes()))
            .collect();
        // SAFETY: the label values outlive the call; Envoy copies them.
        let result = unsafe {
            match metric {
                Metric::Requests => {
                    abi::envoy_dynamic_module_callback_http_filter_increment_counter(
                        filter,
                        envoy_id,
                        values.as_mut_ptr(),
                        values.len(),
                        value,
                    )
                }
                Metric::Duration => {
                    abi::envoy_dynamic_module_callback_http_filter_record_histogram_value(
                        filter,
                        envoy_id,
                        values.as_mut_ptr(),
                        values.len(),
                        value,
                    )
                }
            }
        };
        if result == METRICS_SUCCESS {
            Ok(())
        } else {
            Err(Status::BadArgument)
        }
    }
}
