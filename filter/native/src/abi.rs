//! Our declarations of the part of Envoy's dynamic-module ABI this module uses:
//! the C header `source/extensions/dynamic_modules/abi/abi.h` of Envoy (read at the
//! version whose `ENVOY_DYNAMIC_MODULES_ABI_VERSION` is "v0.1.0", the 1.38/1.39 line;
//! the ABI promises v0.1.y modules work with v0.2.x, and every callback used here is
//! exported by the Envoy 1.40.0 binary, `nm -D`). Only what is used is declared; the
//! names keep the header's (without its `envoy_dynamic_module_` prefixes) so each can
//! be looked up there.
//!
//! C enums are passed as `u32` (their values are small and non-negative); `bool` is
//! C's `_Bool` (Rust's `bool` has the same ABI).

use std::ffi::{c_char, c_void};

/// The ABI version this module was written against (returned by `on_program_init`;
/// Envoy only logs a warning when it differs from its own).
pub const ABI_VERSION: &[u8] = b"v0.1.0\0";

/// `envoy_dynamic_module_type_envoy_buffer`: bytes owned by Envoy.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct EnvoyBuffer {
    pub ptr: *const c_char,
    pub length: usize,
}

impl EnvoyBuffer {
    pub const fn null() -> Self {
        EnvoyBuffer {
            ptr: std::ptr::null(),
            length: 0,
        }
    }

    /// The bytes, valid for as long as Envoy says (the current hook).
    ///
    /// # Safety
    /// `ptr` is null or points to `length` readable bytes for the lifetime `'a`.
    pub unsafe fn bytes<'a>(self) -> &'a [u8] {
        if self.ptr.is_null() || self.length == 0 {
            &[]
        } else {
            std::slice::from_raw_parts(self.ptr.cast::<u8>(), self.length)
        }
    }
}

/// `envoy_dynamic_module_type_module_buffer`: bytes owned by the module.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ModuleBuffer {
    pub ptr: *const c_char,
    pub length: usize,
}

impl ModuleBuffer {
    pub fn of(bytes: &[u8]) -> Self {
        ModuleBuffer {
            ptr: bytes.as_ptr().cast::<c_char>(),
            length: bytes.len(),
        }
    }

    /// A null buffer (a header value that removes the header).
    pub const fn null() -> Self {
        ModuleBuffer {
            ptr: std::ptr::null(),
            length: 0,
        }
    }
}

/// `envoy_dynamic_module_type_envoy_http_header` (and `_module_http_header`, the same
/// layout with module-owned pointers).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct HttpHeader {
    pub key_ptr: *const c_char,
    pub key_length: usize,
    pub value_ptr: *const c_char,
    pub value_length: usize,
}

impl HttpHeader {
    pub const fn null() -> Self {
        HttpHeader {
            key_ptr: std::ptr::null(),
            key_length: 0,
            value_ptr: std::ptr::null(),
            value_length: 0,
        }
    }
}

/// `envoy_dynamic_module_type_http_header_type`.
pub mod header_type {
    pub const REQUEST_HEADER: u32 = 0;
    pub const RESPONSE_HEADER: u32 = 2;
    pub const RESPONSE_TRAILER: u32 = 3;
}

/// `envoy_dynamic_module_type_http_body_type`.
pub mod body_type {
    pub const RECEIVED_REQUEST: u32 = 0;
    pub const BUFFERED_REQUEST: u32 = 1;
    pub const RECEIVED_RESPONSE: u32 = 2;
    pub const BUFFERED_RESPONSE: u32 = 3;
}

/// `envoy_dynamic_module_type_log_level`.
pub mod log_level {
    pub const TRACE: u32 = 0;
    pub const DEBUG: u32 = 1;
    pub const INFO: u32 = 2;
    pub const WARN: u32 = 3;
    pub const ERROR: u32 = 4;
}

/// The `on_http_filter_*` hooks' statuses (Envoy's `FilterHeadersStatus`,
/// `FilterDataStatus`, `FilterTrailersStatus`): the two each direction uses.
pub mod status {
    /// `..._headers_status_Continue`, `..._body_status_Continue`, `..._trailers_status_Continue`.
    pub const CONTINUE: u32 = 0;
    /// `..._headers_status_StopIteration`, `..._trailers_status_StopIteration`.
    pub const STOP_ITERATION: u32 = 1;
    /// `..._body_status_StopIterationAndBuffer`.
    pub const STOP_ITERATION_AND_BUFFER: u32 = 1;
}

/// `envoy_dynamic_module_type_metrics_result_Success`.
pub const METRICS_SUCCESS: u32 = 0;

/// `envoy_dynamic_module_type_http_filter_stream_reset_reason_LocalReset`.
pub const RESET_LOCAL: u32 = 0;

/// `envoy_dynamic_module_type_http_filter_config_envoy_ptr`.
pub type ConfigEnvoyPtr = *mut c_void;
/// `envoy_dynamic_module_type_http_filter_envoy_ptr`.
pub type FilterEnvoyPtr = *mut c_void;

#[cfg(not(test))]
extern "C" {
    pub fn envoy_dynamic_module_callback_log(level: u32, message: ModuleBuffer);
    pub fn envoy_dynamic_module_callback_log_enabled(level: u32) -> bool;

    pub fn envoy_dynamic_module_callback_http_filter_config_define_counter(
        config: ConfigEnvoyPtr,
        name: ModuleBuffer,
        label_names: *mut ModuleBuffer,
        label_names_length: usize,
        counter_id: *mut usize,
    ) -> u32;
    pub fn envoy_dynamic_module_callback_http_filter_config_define_histogram(
        config: ConfigEnvoyPtr,
        name: ModuleBuffer,
        label_names: *mut ModuleBuffer,
        label_names_length: usize,
        histogram_id: *mut usize,
    ) -> u32;
    pub fn envoy_dynamic_module_callback_http_filter_increment_counter(
        filter: FilterEnvoyPtr,
        id: usize,
        label_values: *mut ModuleBuffer,
        label_values_length: usize,
        value: u64,
    ) -> u32;
    pub fn envoy_dynamic_module_callback_http_filter_record_histogram_value(
        filter: FilterEnvoyPtr,
        id: usize,
        label_values: *mut ModuleBuffer,
        label_values_length: usize,
        value: u64,
    ) -> u32;

    pub fn envoy_dynamic_module_callback_http_get_headers_size(
        filter: FilterEnvoyPtr,
        header_type: u32,
    ) -> usize;
    pub fn envoy_dynamic_module_callback_http_get_headers(
        filter: FilterEnvoyPtr,
        header_type: u32,
        result_headers: *mut HttpHeader,
    ) -> bool;
    pub fn envoy_dynamic_module_callback_http_set_header(
        filter: FilterEnvoyPtr,
        header_type: u32,
        key: ModuleBuffer,
        value: ModuleBuffer,
    ) -> bool;
    pub fn envoy_dynamic_module_callback_http_add_header(
        filter: FilterEnvoyPtr,
        header_type: u32,
        key: ModuleBuffer,
        value: ModuleBuffer,
    ) -> bool;

    pub fn envoy_dynamic_module_callback_http_send_response(
        filter: FilterEnvoyPtr,
        status_code: u32,
        headers: *mut HttpHeader,
        headers_size: usize,
        body: ModuleBuffer,
        details: ModuleBuffer,
    );

    pub fn envoy_dynamic_module_callback_http_get_body_size(
        filter: FilterEnvoyPtr,
        body_type: u32,
    ) -> usize;
    pub fn envoy_dynamic_module_callback_http_get_body_chunks_size(
        filter: FilterEnvoyPtr,
        body_type: u32,
    ) -> usize;
    pub fn envoy_dynamic_module_callback_http_get_body_chunks(
        filter: FilterEnvoyPtr,
        body_type: u32,
        result: *mut EnvoyBuffer,
    ) -> bool;
    pub fn envoy_dynamic_module_callback_http_append_body(
        filter: FilterEnvoyPtr,
        body_type: u32,
        data: ModuleBuffer,
    ) -> bool;
    pub fn envoy_dynamic_module_callback_http_drain_body(
        filter: FilterEnvoyPtr,
        body_type: u32,
        number_of_bytes: usize,
    ) -> bool;
    pub fn envoy_dynamic_module_callback_http_received_buffered_request_body(
        filter: FilterEnvoyPtr,
    ) -> bool;
    pub fn envoy_dynamic_module_callback_http_received_buffered_response_body(
        filter: FilterEnvoyPtr,
    ) -> bool;

    pub fn envoy_dynamic_module_callback_http_clear_route_cache(filter: FilterEnvoyPtr);
    pub fn envoy_dynamic_module_callback_http_filter_get_attribute_string(
        filter: FilterEnvoyPtr,
        attribute_id: u32,
        result: *mut EnvoyBuffer,
    ) -> bool;
    pub fn envoy_dynamic_module_callback_http_filter_get_attribute_int(
        filter: FilterEnvoyPtr,
        attribute_id: u32,
        result: *mut u64,
    ) -> bool;
    pub fn envoy_dynamic_module_callback_http_filter_reset_stream(
        filter: FilterEnvoyPtr,
        reason: u32,
        details: ModuleBuffer,
    );
}
