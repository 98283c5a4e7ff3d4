//! The proxy-wasm ABI (v0.2.1) calls the filter makes, bound directly so that every
//! status the host returns comes back as an `Err`.
//!
//! The SDK's `hostcalls` wrappers `panic!` on any status they do not expect (Envoy's
//! `BadArgument` for a response header set after the headers went out, `NotFound`
//! for a map that does not exist in this phase...), and a panic kills the VM with
//! every request on it. Here such a call is an error the adapter handles like any
//! other. Buffers the host returns are allocated through the SDK's
//! `proxy_on_memory_allocate` (a boxed slice of exactly `size` bytes), so they are
//! taken back as a `Vec` of that capacity.

use proxy_wasm::types::{BufferType, MapType, StreamType};

use ferry_filter_adapter::header_map::{serialize, HeaderMap};
use ferry_filter_adapter::host::{MetricType, Status};

#[link(wasm_import_module = "env")]
extern "C" {
    fn proxy_get_header_map_pairs(map: u32, data: *mut *mut u8, size: *mut usize) -> u32;
    fn proxy_replace_header_map_value(
        map: u32,
        key: *const u8,
        key_size: usize,
        value: *const u8,
        value_size: usize,
    ) -> u32;
    fn proxy_remove_header_map_value(map: u32, key: *const u8, key_size: usize) -> u32;
    fn proxy_add_header_map_value(
        map: u32,
        key: *const u8,
        key_size: usize,
        value: *const u8,
        value_size: usize,
    ) -> u32;
    fn proxy_get_buffer_bytes(
        buffer: u32,
        start: usize,
        max_size: usize,
        data: *mut *mut u8,
        size: *mut usize,
    ) -> u32;
    fn proxy_set_buffer_bytes(
        buffer: u32,
        start: usize,
        size: usize,
        data: *const u8,
        data_size: usize,
    ) -> u32;
    fn proxy_send_local_response(
        status_code: u32,
        details: *const u8,
        details_size: usize,
        body: *const u8,
        body_size: usize,
        headers: *const u8,
        headers_size: usize,
        grpc_status: i32,
    ) -> u32;
    fn proxy_close_stream(stream: u32) -> u32;
    fn proxy_get_property(
        path: *const u8,
        path_size: usize,
        value: *mut *mut u8,
        value_size: *mut usize,
    ) -> u32;
    fn proxy_get_current_time_nanoseconds(time: *mut u64) -> u32;
    fn proxy_define_metric(kind: u32, name: *const u8, name_size: usize, id: *mut u32) -> u32;
    fn proxy_increment_metric(id: u32, offset: i64) -> u32;
    fn proxy_record_metric(id: u32, value: u64) -> u32;
    fn proxy_set_tick_period_milliseconds(period: u32) -> u32;
    fn proxy_set_effective_context(context_id: u32) -> u32;
    fn proxy_continue_stream(stream: u32) -> u32;
}

/// The host's status word; a value this ABI does not define is an internal failure.
fn status(code: u32) -> Result<(), Status> {
    match code {
        0 => Ok(()),
        1 => Err(Status::NotFound),
        2 => Err(Status::BadArgument),
        3 => Err(Status::SerializationFailure),
        4 => Err(Status::ParseFailure),
        7 => Err(Status::Empty),
        8 => Err(Status::CasMismatch),
        _ => Err(Status::InternalFailure),
    }
}

/// Takes ownership of a buffer the host allocated in this VM (`None`: it gave none).
///
/// # Safety
/// `data` is null or came from `proxy_on_memory_allocate(size)` for this call.
unsafe fn take(data: *mut u8, size: usize) -> Option<Vec<u8>> {
    if data.is_null() {
        None
    } else {
        Some(Vec::from_raw_parts(data, size, size))
    }
}

/// A lookup that answers a buffer: `Ok(None)` when there is nothing (NotFound, Empty).
fn returned(code: u32, data: *mut u8, size: usize) -> Result<Option<Vec<u8>>, Status> {
    // SAFETY: the host set `data`/`size` (or left them null/0) in the call that
    // returned `code`; a buffer it allocated is ours whatever the status.
    let bytes = unsafe { take(data, size) };
    match status(code) {
        Ok(()) => Ok(bytes),
        Err(Status::NotFound | Status::Empty) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Every header of a map in one call (a lookup per name costs a VM exit each).
pub(crate) fn header_map(map: MapType) -> Result<HeaderMap, Status> {
    let (mut data, mut size) = (std::ptr::null_mut(), 0);
    // SAFETY: pointers to live locals.
    let code = unsafe { proxy_get_header_map_pairs(map as u32, &mut data, &mut size) };
    HeaderMap::parse(returned(code, data, size)?.unwrap_or_default())
        .ok_or(Status::SerializationFailure)
}

pub(crate) fn set_header(map: MapType, name: &str, value: &str) -> Result<(), Status> {
    // SAFETY: the slices outlive the call; the host copies them.
    status(unsafe {
        proxy_replace_header_map_value(
            map as u32,
            name.as_ptr(),
            name.len(),
            value.as_ptr(),
            value.len(),
        )
    })
}

pub(crate) fn remove_header(map: MapType, name: &str) -> Result<(), Status> {
    // SAFETY: as above.
    status(unsafe { proxy_remove_header_map_value(map as u32, name.as_ptr(), name.len()) })
}

pub(crate) fn add_header(map: MapType, name: &str, value: &str) -> Result<(), Status> {
    // SAFETY: as above.
    status(unsafe {
        proxy_add_header_map_value(
            map as u32,
            name.as_ptr(),
            name.len(),
            value.as_ptr(),
            value.len(),
        )
    })
}

pub(crate) fn buffer(
    buffer: BufferType,
    start: usize,
    max: usize,
) -> Result<Option<Vec<u8>>, Status> {
    let (mut data, mut size) = (std::ptr::null_mut(), 0);
    // SAFETY: pointers to live locals.
    let code = unsafe { proxy_get_buffer_bytes(buffer as u32, start, max, &mut data, &mut size) };
    returned(code, data, size)
}

pub(crate) fn set_buffer(
    buffer: BufferType,
    start: usize,
    size: usize,
    bytes: &[u8],
) -> Result<(), Status> {
    // SAFETY: `bytes` outlives the call; the host copies it.
    status(unsafe {
        proxy_set_buffer_bytes(buffer as u32, start, size, bytes.as_ptr(), bytes.len())
    })
}

pub(crate) fn send_local_response(
    status_code: u32,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
) -> Result<(), Status> {
    let headers = serialize(headers)?;
    let body = body.unwrap_or_default();
    // SAFETY: every slice outlives the call; the host copies them. No details, and
    // grpc_status -1 (none: the filter writes gRPC statuses itself).
    status(unsafe {
        proxy_send_local_response(
            status_code,
            std::ptr::null(),
            0,
            body.as_ptr(),
            body.len(),
            headers.as_ptr(),
            headers.len(),
            -1,
        )
    })
}

pub(crate) fn reset_response() -> Result<(), Status> {
    // SAFETY: no pointers.
    status(unsafe { proxy_close_stream(StreamType::HttpResponse as u32) })
}

pub(crate) fn property(path: &[&str]) -> Result<Option<Vec<u8>>, Status> {
    // The path's segments, NUL-separated.
    let path = path.join("\0");
    let (mut data, mut size) = (std::ptr::null_mut(), 0);
    // SAFETY: pointers to live locals and to `path`'s bytes.
    let code = unsafe { proxy_get_property(path.as_ptr(), path.len(), &mut data, &mut size) };
    returned(code, data, size)
}

pub(crate) fn now_nanos() -> Result<u64, Status> {
    let mut now = 0;
    // SAFETY: a pointer to a live local.
    status(unsafe { proxy_get_current_time_nanoseconds(&mut now) })?;
    Ok(now)
}

pub(crate) fn define_metric(kind: MetricType, name: &str) -> Result<u32, Status> {
    let mut id = 0;
    let kind = match kind {
        MetricType::Counter => proxy_wasm::types::MetricType::Counter,
        MetricType::Gauge => proxy_wasm::types::MetricType::Gauge,
        MetricType::Histogram => proxy_wasm::types::MetricType::Histogram,
    };
    // SAFETY: pointers to a live local and to `name`'s bytes.
    status(unsafe { proxy_define_metric(kind as u32, name.as_ptr(), name.len(), &mut id) })?;
    Ok(id)
}

pub(crate) fn increment_metric(id: u32, offset: i64) -> Result<(), Status> {
    // SAFETY: no pointers.
    status(unsafe { proxy_increment_metric(id, offset) })
}

pub(crate) fn record_metric(id: u32, value: u64) -> Result<(), Status> {
    // SAFETY: no pointers.
    status(unsafe { proxy_record_metric(id, value) })
}

pub(crate) fn set_tick_period(millis: u32) -> Result<(), Status> {
    // SAFETY: no pointers.
    status(unsafe { proxy_set_tick_period_milliseconds(millis) })
}

pub(crate) fn set_effective_context(context: u32) -> Result<(), Status> {
    // SAFETY: no pointers.
    status(unsafe { proxy_set_effective_context(context) })
}

pub(crate) fn continue_request() -> Result<(), Status> {
    // SAFETY: no pointers.
    status(unsafe { proxy_continue_stream(StreamType::HttpRequest as u32) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_is_an_error_not_a_panic() {
        assert_eq!(status(0), Ok(()));
        assert_eq!(status(2), Err(Status::BadArgument));
        assert_eq!(status(99), Err(Status::InternalFailure));
    }
}
