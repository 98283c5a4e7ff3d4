//! The event hooks Envoy calls (`envoy_dynamic_module_on_*`, declared in the ABI
//! header; signatures here are ours, matching it).
//!
//! Threads: a filter config is made (and destroyed) on the main thread and shared by
//! every worker; its filters live on one worker each. The adapter's plugin state is
//! single-threaded (`Rc`, as in a wasm VM, one per worker), so each worker builds its
//! own [`Plugin`] from the config's bytes at its first stream (like one wasm VM per
//! worker) and keeps it in a thread-local table. What the config itself holds is
//! immutable: the configuration bytes and the metric ids.

use std::cell::{Cell, RefCell};
use std::ffi::{c_char, c_void};
use std::rc::Rc;

use ferry_filter_adapter::host::{Action, Body};
use ferry_filter_adapter::{Filter, HeaderHold, Plugin};
use ferry_filter_core::metrics::{DURATION, LABELS, REQUESTS};

use crate::abi::{self, status, ConfigEnvoyPtr, EnvoyBuffer, FilterEnvoyPtr, ModuleBuffer};
use crate::host::{MetricIds, NativeHost, SeriesTable};

/// The in-module filter config (`envoy_dynamic_module_type_http_filter_config_module_ptr`).
struct Config {
    configuration: Vec<u8>,
    metrics: MetricIds,
}

/// A worker's plugin for one config.
struct Worker {
    plugin: Plugin,
    series: SeriesTable,
}

thread_local! {
    /// The plugins of this worker, by config address.
    static WORKERS: RefCell<Vec<(usize, Rc<Worker>)>> = const { RefCell::new(Vec::new()) };
    /// Context ids of this worker's streams (the adapter's names for them).
    static NEXT_CONTEXT: Cell<u32> = const { Cell::new(1) };
}

/// The in-module filter (`envoy_dynamic_module_type_http_filter_module_ptr`).
struct Stream {
    filter: Filter<NativeHost>,
    /// Keeps the worker's plugin (and its series table) alive.
    _worker: Rc<Worker>,
}

fn worker(config: &Config) -> Option<Rc<Worker>> {
    let key = config as *const Config as usize;
    WORKERS.with(|workers| {
        let mut workers = workers.try_borrow_mut().ok()?;
        if let Some((_, w)) = workers.iter().find(|(k, _)| *k == key) {
            return Some(Rc::clone(w));
        }
        let mut host = NativeHost::for_configuration(config.configuration.clone());
        let plugin = Plugin::configure(&mut host, HeaderHold::Native)?;
        let w = Rc::new(Worker {
            plugin,
            series: SeriesTable::default(),
        });
        workers.push((key, Rc::clone(&w)));
        Some(w)
    })
}

fn define(config: ConfigEnvoyPtr, name: &str, histogram: bool) -> Option<usize> {
    let mut labels: Vec<ModuleBuffer> = LABELS
        .iter()
        .map(|l| ModuleBuffer::of(l.as_bytes()))
        .collect();
    let mut id = 0usize;
    // SAFETY: Envoy's config pointer from this hook; the names outlive the call.
    let result = unsafe {
        if histogram {
            abi::envoy_dynamic_module_callback_http_filter_config_define_histogram(
                config,
                ModuleBuffer::of(name.as_bytes()),
                labels.as_mut_ptr(),
                labels.len(),
                &mut id,
            )
        } else {
            abi::envoy_dynamic_module_callback_http_filter_config_define_counter(
                config,
                ModuleBuffer::of(name.as_bytes()),
                labels.as_mut_ptr(),
                labels.len(),
                &mut id,
            )
        }
    };
    if result == abi::METRICS_SUCCESS {
        Some(id)
    } else {
        log::warn!("metrics: Envoy refused to define {name} ({result}): no metrics");
        None
    }
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_program_init() -> *const c_char {
    crate::logger::install();
    abi::ABI_VERSION.as_ptr().cast()
}

/// The filter's configuration: the same JSON the wasm plugin gets. A configuration
/// the adapter refuses fails the filter config (null).
///
/// # Safety
/// Envoy's pointers, valid for this call.
#[no_mangle]
pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_config_new(
    config_envoy: ConfigEnvoyPtr,
    _name: EnvoyBuffer,
    config: EnvoyBuffer,
) -> *const c_void {
    let configuration = config.bytes().to_vec();
    // Validate now (and log the settings once), so a bad config is refused at load.
    let mut host = NativeHost::for_configuration(configuration.clone());
    if Plugin::configure(&mut host, HeaderHold::Native).is_none() {
        return std::ptr::null();
    }
    let metrics = MetricIds {
        requests: define(config_envoy, REQUESTS, false),
        duration: define(config_envoy, DURATION, true),
    };
    Box::into_raw(Box::new(Config {
        configuration,
        metrics,
    }))
    .cast_const()
    .cast()
}

/// # Safety
/// `config` came from `on_http_filter_config_new`.
#[no_mangle]
pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_config_destroy(config: *const c_void) {
    if config.is_null() {
        return;
    }
    let key = config as usize;
    let _ = WORKERS.try_with(|w| {
        if let Ok(mut w) = w.try_borrow_mut() {
            w.retain(|(k, _)| *k != key);
        }
    });
    drop(Box::from_raw(config.cast_mut().cast::<Config>()));
}

/// # Safety
/// `config` came from `on_http_filter_config_new` and is alive.
#[no_mangle]
pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_new(
    config: *const c_void,
    filter_envoy: FilterEnvoyPtr,
) -> *const c_void {
    let Some(config) = config.cast::<Config>().as_ref() else {
        return std::ptr::null();
    };
    let Some(worker) = worker(config) else {
        return std::ptr::null();
    };
    let context = NEXT_CONTEXT.with(|n| {
        let id = n.get();
        n.set(id.wrapping_add(1).max(1));
        id
    });
    let host = NativeHost::new(filter_envoy, config.metrics, Rc::clone(&worker.series));
    let filter = worker.plugin.stream(host, context);
    Box::into_raw(Box::new(Stream {
        filter,
        _worker: worker,
    }))
    .cast_const()
    .cast()
}

/// The in-module filter of a hook.
///
/// # Safety
/// `filter` came from `on_http_filter_new` and is not destroyed; Envoy calls a
/// stream's hooks one at a time on its worker.
unsafe fn stream<'a>(filter: *const c_void) -> Option<&'a mut Stream> {
    filter.cast_mut().cast::<Stream>().as_mut()
}

fn headers_status(action: Action) -> u32 {
    match action {
        Action::Continue => status::CONTINUE,
        Action::Pause => status::STOP_ITERATION,
    }
}

fn body_status(action: Action) -> u32 {
    match action {
        Action::Continue => status::CONTINUE,
        Action::Pause => status::STOP_ITERATION_AND_BUFFER,
    }
}

/// # Safety
/// As [`stream`].
#[no_mangle]
pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_request_headers(
    _filter_envoy: FilterEnvoyPtr,
    filter: *const c_void,
    end_of_stream: bool,
) -> u32 {
    let Some(s) = stream(filter) else {
        return status::CONTINUE;
    };
    headers_status(s.filter.on_request_headers(end_of_stream))
}

/// # Safety
/// As [`stream`].
#[no_mangle]
pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_request_body(
    _filter_envoy: FilterEnvoyPtr,
    filter: *const c_void,
    end_of_stream: bool,
) -> u32 {
    let Some(s) = stream(filter) else {
        return status::CONTINUE;
    };
    let size = s.filter.host().body_len(Body::Request);
    let action = s.filter.on_request_body(size, end_of_stream);
    s.filter.host_mut().request_paused = action == Action::Pause;
    body_status(action)
}

/// # Safety
/// As [`stream`].
#[no_mangle]
pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_request_trailers(
    _filter_envoy: FilterEnvoyPtr,
    filter: *const c_void,
) -> u32 {
    let Some(s) = stream(filter) else {
        return status::CONTINUE;
    };
    headers_status(s.filter.on_request_trailers())
}

/// # Safety
/// As [`stream`].
#[no_mangle]
pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_response_headers(
    _filter_envoy: FilterEnvoyPtr,
    filter: *const c_void,
    end_of_stream: bool,
) -> u32 {
    let Some(s) = stream(filter) else {
        return status::CONTINUE;
    };
    headers_status(s.filter.on_response_headers(end_of_stream))
}

/// # Safety
/// As [`stream`].
#[no_mangle]
pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_response_body(
    _filter_envoy: FilterEnvoyPtr,
    filter: *const c_void,
    end_of_stream: bool,
) -> u32 {
    let Some(s) = stream(filter) else {
        return status::CONTINUE;
    };
    let size = s.filter.host().body_len(Body::Response);
    let action = s.filter.on_response_body(size, end_of_stream);
    s.filter.host_mut().response_paused = action == Action::Pause;
    body_status(action)
}

/// # Safety
/// As [`stream`].
#[no_mangle]
pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_response_trailers(
    _filter_envoy: FilterEnvoyPtr,
    filter: *const c_void,
) -> u32 {
    let Some(s) = stream(filter) else {
        return status::CONTINUE;
    };
    headers_status(s.filter.on_response_trailers())
}

/// The stream is complete (before access logs): its metrics are recorded.
///
/// # Safety
/// As [`stream`].
#[no_mangle]
pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_stream_complete(
    _filter_envoy: FilterEnvoyPtr,
    filter: *const c_void,
) {
    if let Some(s) = stream(filter) {
        s.filter.on_done();
    }
}

/// # Safety
/// `filter` came from `on_http_filter_new`; Envoy calls this once.
#[no_mangle]
pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_destroy(filter: *const c_void) {
    if !filter.is_null() {
        drop(Box::from_raw(filter.cast_mut().cast::<Stream>()));
    }
}

// ----- hooks Envoy requires and the filter does not use (callouts, scheduling,
// watermarks): their signatures as the header's, bodies empty. -----

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_per_route_config_new(
    _name: EnvoyBuffer,
    _config: EnvoyBuffer,
) -> *const c_void {
    std::ptr::null()
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_per_route_config_destroy(
    _config: *const c_void,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_http_callout_done(
    _filter_envoy: FilterEnvoyPtr,
    _filter: *const c_void,
    _callout_id: u64,
    _result: u32,
    _headers: *mut c_void,
    _headers_size: usize,
    _body_chunks: *mut c_void,
    _body_chunks_size: usize,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_http_stream_headers(
    _filter_envoy: FilterEnvoyPtr,
    _filter: *const c_void,
    _stream_id: u64,
    _headers: *mut c_void,
    _headers_size: usize,
    _end_stream: bool,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_http_stream_data(
    _filter_envoy: FilterEnvoyPtr,
    _filter: *const c_void,
    _stream_id: u64,
    _data: *const c_void,
    _data_count: usize,
    _end_stream: bool,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_http_stream_trailers(
    _filter_envoy: FilterEnvoyPtr,
    _filter: *const c_void,
    _stream_id: u64,
    _trailers: *mut c_void,
    _trailers_size: usize,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_http_stream_complete(
    _filter_envoy: FilterEnvoyPtr,
    _filter: *const c_void,
    _stream_id: u64,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_http_stream_reset(
    _filter_envoy: FilterEnvoyPtr,
    _filter: *const c_void,
    _stream_id: u64,
    _reason: u32,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_scheduled(
    _filter_envoy: FilterEnvoyPtr,
    _filter: *const c_void,
    _event_id: u64,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_downstream_above_write_buffer_high_watermark(
    _filter_envoy: FilterEnvoyPtr,
    _filter: *const c_void,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_downstream_below_write_buffer_low_watermark(
    _filter_envoy: FilterEnvoyPtr,
    _filter: *const c_void,
) {
}
