//! Drives an [`Exchange`] through a [`Host`]: one function per filter callback,
//! each reading what the exchange needs and applying the step it returns.
//!
//! Each function makes only the host calls Envoy accepts in its callback (the SDK
//! aborts the VM on any other status):
//!
//! | callback | may touch |
//! |---|---|
//! | request headers | request headers; a local reply |
//! | request body, trailers | the request body (in trailers: only if the last body callback paused); request headers only while they are held; a local reply |
//! | response headers | response headers; a local reply (the answer's headers have not gone out) |
//! | response body | the response body; response trailers only at its end (Envoy creates them); response headers and a local reply only while the headers are held; a reset |
//! | response trailers | the response body (if the last body callback paused), response trailers; response headers and a local reply only while held; a reset |
//!
//! Headers are never touched after they continued: the exchange edits request headers
//! from a body callback only when it held them ([`RequestHeadersStep::Hold`]), and
//! response headers only when it held them ([`ResponseHeadersStep::Hold`]).

use std::collections::HashMap;
use std::fmt;

use ferry_filter_core::config::Config;
use ferry_filter_core::exchange::{
    BodyEdit, Exchange, RequestBodyStep, RequestHead, RequestHeadersStep, Reset, ResponseBodyStep,
    ResponseEdit, ResponseHead, ResponseHeadersStep,
};
use ferry_filter_core::http::{HeaderEdits, Reply};
use ferry_filter_core::lost::EnvoyAnswer;
use ferry_filter_core::{distance, metrics, server_timing};

use crate::header_map::HeaderMap;
use crate::host::{Action, Body, Host, Map, MetricType, Status, WHOLE_BODY};

/// A host call that failed.
#[derive(Debug)]
pub(crate) struct HostError {
    call: &'static str,
    status: Status,
}

impl fmt::Display for HostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "host call {} failed: {:?}", self.call, self.status)
    }
}

pub(crate) type Result<T> = std::result::Result<T, HostError>;

/// Names a failed call: `host_call().map_err(failed("what"))`.
fn failed(call: &'static str) -> impl Fn(Status) -> HostError {
    move |status| HostError { call, status }
}

// ----- plugin -----

/// The plugin configuration (`on_configure`); `None` (logged) if it is unreadable or
/// invalid, so the plugin does not start.
pub(crate) fn configure<H: Host>(host: &mut H) -> Option<Config> {
    let parsed = host
        .plugin_configuration()
        .map_err(failed("get_buffer(plugin configuration)"))
        .map_err(|e| e.to_string())
        .and_then(|raw| Config::parse(raw.as_deref()).map_err(|e| e.to_string()));
    match parsed {
        Ok(config) => {
            log::info!(
                "{:?}, session affinity {}, header hold {}",
                config.limits,
                if config.session_affinity { "on" } else { "off" },
                config.header_hold.name()
            );
            Some(config)
        }
        Err(e) => {
            log::error!("refusing to start: {e}");
            None
        }
    }
}

// ----- per-stream observation (metrics, server-timing) -----

/// What one stream's metrics and `server-timing` need from the host.
#[derive(Debug, Default)]
pub(crate) struct Timing {
    /// The host's clock at the request headers (ns).
    started: Option<u64>,
    /// The `http` label (`request.protocol`).
    http: &'static str,
}

/// The metric ids of each label set, defined once per plugin (shared by its streams).
#[derive(Debug, Default)]
pub(crate) struct MetricIds {
    ids: HashMap<String, (u32, u32)>,
}

impl MetricIds {
    /// The (counter, histogram) ids of a label set, defined at first use.
    fn ids<H: Host>(&mut self, host: &mut H, series: String) -> Result<(u32, u32)> {
        if let Some(ids) = self.ids.get(&series) {
            return Ok(*ids);
        }
        let counter = host
            .define_metric(
                MetricType::Counter,
                &format!("{}{series}", metrics::REQUESTS),
            )
            .map_err(failed("define_metric(counter)"))?;
        let histogram = host
            .define_metric(
                MetricType::Histogram,
                &format!("{}{series}", metrics::DURATION),
            )
            .map_err(failed("define_metric(histogram)"))?;
        self.ids.insert(series, (counter, histogram));
        Ok((counter, histogram))
    }
}

/// Nanoseconds since the request headers (0 if the clock was not read).
fn elapsed<H: Host>(host: &mut H, timing: &Timing) -> u64 {
    match (timing.started, host.now_nanos()) {
        (Some(start), Ok(now)) => now.saturating_sub(start),
        _ => 0,
    }
}

/// The stream is over (`on_done`, or `on_log`; lib.rs records once): one count and
/// one latency for a served RPC. A failure is logged, never an answer (the stream
/// is gone).
pub(crate) fn record_metrics<H: Host>(
    host: &mut H,
    exchange: &Exchange,
    timing: &Timing,
    ids: &mut MetricIds,
) {
    let Some(labels) = exchange.metric_labels(timing.http) else {
        return;
    };
    let millis = elapsed(host, timing) / 1_000_000;
    let recorded = ids
        .ids(host, labels.series())
        .and_then(|(counter, histogram)| {
            host.increment_metric(counter, 1)
                .map_err(failed("increment_metric"))?;
            host.record_metric(histogram, millis)
                .map_err(failed("record_metric"))
        });
    if let Err(e) = recorded {
        log::warn!("metrics: {e}");
    }
}

// ----- request callbacks -----

/// Why a gRPC call is refused on a host that cannot add response trailers.
pub(crate) const NO_TRAILERS: &str = "gRPC is not served by this gateway's native filter \
    (Envoy's dynamic modules cannot add response trailers); use Connect";

/// `on_http_request_headers`.
pub(crate) fn on_request_headers<H: Host>(
    host: &mut H,
    exchange: &mut Exchange,
    end_of_stream: bool,
    timing: &mut Timing,
) -> Result<Action> {
    timing.started = host.now_nanos().ok();
    let protocol = host
        .property(&["request", "protocol"])
        .ok()
        .flatten()
        .map(|b| String::from_utf8_lossy(&b).into_owned());
    timing.http = metrics::http_version(protocol.as_deref());
    let headers = Snapshot::read(host, Map::RequestHeaders)?;
    let mut head = RequestHead::read(|name| Ok::<_, HostError>(headers.get(name)))?;
    if exchange.wants_peer_address() {
        // `client_address: "peer"`: Envoy's downstream address, never the client's word.
        head.client_addr = host
            .property(&["source", "address"])
            .ok()
            .flatten()
            .and_then(|b| String::from_utf8(b).ok())
            .and_then(|a| distance::peer_ip(&a));
    }
    let mut step = exchange.on_request_headers(&head, end_of_stream);
    if !host.adds_trailers() && !matches!(step, RequestHeadersStep::Reply(_)) {
        if let Some(reply) = exchange.refuse_without_trailers(NO_TRAILERS) {
            step = RequestHeadersStep::Reply(reply);
        }
    }
    if let RequestHeadersStep::Reply(reply) = &step {
        exchange.note_reply(reply);
    }
    apply_request_headers(host, step, &headers)
}

/// `on_http_request_body`; `body_size` is what Envoy reports: the buffered total after
/// a paused body callback, else this chunk's.
pub(crate) fn on_request_body<H: Host>(
    host: &mut H,
    exchange: &mut Exchange,
    body_size: usize,
    end_of_stream: bool,
) -> Result<Action> {
    let step = exchange.on_request_body(body_size, end_of_stream);
    if let RequestBodyStep::Reply(reply) = &step {
        exchange.note_reply(reply);
    }
    apply_request_body(host, step, body_size, exchange)
}

/// `on_http_request_trailers`: they end the body, whose size is then unknown.
pub(crate) fn on_request_trailers<H: Host>(
    host: &mut H,
    exchange: &mut Exchange,
) -> Result<Action> {
    let step = exchange.on_request_trailers();
    if let RequestBodyStep::Reply(reply) = &step {
        exchange.note_reply(reply);
    }
    apply_request_body(host, step, WHOLE_BODY, exchange)
}

// ----- response callbacks -----

/// `on_http_response_headers`. Every answer that goes out through here (the shim's,
/// Envoy's, the filter's own local replies) gets the gateway's `server-timing` entry.
pub(crate) fn on_response_headers<H: Host>(
    host: &mut H,
    exchange: &mut Exchange,
    end_of_stream: bool,
    timing: &Timing,
) -> Result<Action> {
    let headers = Snapshot::read(host, Map::ResponseHeaders)?;
    let mut head = ResponseHead::read(|name| Ok::<_, HostError>(headers.get(name)))?;
    if head.shim_instance.is_none() {
        // Envoy's own answer: why no shim answered (Envoy 1.40 properties).
        head.envoy = envoy_answer(host);
    }
    let timing_value = server_timing::with_gateway(
        headers.get(server_timing::HEADER).as_deref(),
        elapsed(host, timing),
    );
    let step = match exchange.on_response_headers(&head, end_of_stream) {
        ResponseHeadersStep::Forward(mut edits) => {
            edits.set.push((server_timing::HEADER, timing_value));
            ResponseHeadersStep::Forward(edits)
        }
        ResponseHeadersStep::Hold(mut edits) => {
            edits.set.push((server_timing::HEADER, timing_value));
            ResponseHeadersStep::Hold(edits)
        }
        reply => reply,
    };
    apply_response_headers(host, step, &headers)
}

/// `response.flags` (an int64, little-endian) and `response.code_details`.
fn envoy_answer<H: Host>(host: &mut H) -> EnvoyAnswer {
    let flags = int_property(host, &["response", "flags"]).unwrap_or(0);
    let details = host
        .property(&["response", "code_details"])
        .ok()
        .flatten()
        .map(|b| String::from_utf8_lossy(&b).into_owned());
    EnvoyAnswer { flags, details }
}

/// An int64 property (Envoy hands it over little-endian); `None` if absent or not one.
pub(crate) fn int_property<H: Host>(host: &mut H, path: &[&str]) -> Option<u64> {
    host.property(path)
        .ok()
        .flatten()
        .and_then(|b| <[u8; 8]>::try_from(b.as_slice()).ok())
        .map(u64::from_le_bytes)
}

/// `on_http_response_body`; `body_size` as for requests.
pub(crate) fn on_response_body<H: Host>(
    host: &mut H,
    exchange: &mut Exchange,
    body_size: usize,
    end_of_stream: bool,
) -> Result<Action> {
    let step = exchange.on_response_body(body_size, end_of_stream);
    if let ResponseBodyStep::Reply(reply) = &step {
        exchange.note_reply(reply);
    }
    apply_response_body(host, step, body_size, exchange)
}

/// `on_http_response_trailers`: they end the body, whose size is then unknown.
pub(crate) fn on_response_trailers<H: Host>(
    host: &mut H,
    exchange: &mut Exchange,
) -> Result<Action> {
    let step = exchange.on_response_trailers();
    if let ResponseBodyStep::Reply(reply) = &step {
        exchange.note_reply(reply);
    }
    apply_response_body(host, step, WHOLE_BODY, exchange)
}

// ----- request -----

/// Applies a request headers step. `Hold` pauses the headers until the body callback
/// that routes the request continues it; this needs the wasm filter's
/// `allow_on_headers_stop_iteration` (otherwise proxy-wasm's pause is Envoy's
/// `StopAllIterationAndWatermark`, which stops the body callbacks too: a hang).
fn apply_request_headers<H: Host>(
    host: &mut H,
    step: RequestHeadersStep,
    present: &Snapshot,
) -> Result<Action> {
    match step {
        RequestHeadersStep::Forward(edits) => {
            edit_headers(host, Map::RequestHeaders, &edits, Some(present))?;
            Ok(Action::Continue)
        }
        RequestHeadersStep::Hold(edits) => {
            edit_headers(host, Map::RequestHeaders, &edits, Some(present))?;
            Ok(Action::Pause)
        }
        RequestHeadersStep::Reply(reply) => send_reply(host, &reply),
    }
}

/// Applies a request body step (from the body or the trailers callback);
/// `body_size` is the buffered body's length ([`WHOLE_BODY`] when unknown).
fn apply_request_body<H: Host>(
    host: &mut H,
    step: RequestBodyStep,
    body_size: usize,
    exchange: &mut Exchange,
) -> Result<Action> {
    match step {
        RequestBodyStep::Continue => Ok(Action::Continue),
        RequestBodyStep::Wait => Ok(Action::Pause),
        RequestBodyStep::Reply(reply) => send_reply(host, &reply),
        // The chunk moves into the VM, and Envoy's is emptied (Envoy accepts an empty
        // replacement): passed on (the upstream gets an empty chunk), or, with the
        // headers held, kept in Envoy's buffer, which stays empty.
        RequestBodyStep::Keep { pause } => {
            if body_size > 0 {
                let chunk = read_body(host, Body::Request, body_size)?;
                host.set_body(Body::Request, 0, body_size, &[])
                    .map_err(failed("set_buffer(empty request chunk)"))?;
                exchange.keep_request(chunk);
            }
            Ok(if pause {
                Action::Pause
            } else {
                Action::Continue
            })
        }
        RequestBodyStep::Read => {
            let body = read_body(host, Body::Request, body_size)?;
            match exchange.finish_request(body) {
                Ok(payload) => {
                    let message = payload.as_slice();
                    host.set_body(Body::Request, 0, body_size, message)
                        .map_err(failed("set_buffer(request body)"))?;
                    // Empty unless the headers are held (they still are: this callback
                    // has not continued yet).
                    let edits = exchange.route_request(
                        |offset, max| {
                            let end = offset.saturating_add(max).min(message.len());
                            message.get(offset..end).map(<[u8]>::to_vec)
                        },
                        message.len(),
                    );
                    edit_headers(host, Map::RequestHeaders, &edits, None)?;
                    Ok(Action::Continue)
                }
                Err(reply) => {
                    exchange.note_reply(&reply);
                    send_reply(host, &reply)
                }
            }
        }
        RequestBodyStep::Replace(message) => {
            host.set_body(Body::Request, 0, body_size, &message)
                .map_err(failed("set_buffer(request body)"))?;
            Ok(Action::Continue)
        }
        // The body stays in the host; only the session's bytes are read.
        RequestBodyStep::Route(len) => {
            let edits = exchange.route_request(
                |offset, max| {
                    host.body(Body::Request, offset, max)
                        .ok()
                        .map(Option::unwrap_or_default)
                },
                len,
            );
            edit_headers(host, Map::RequestHeaders, &edits, None)?;
            Ok(Action::Continue)
        }
    }
}

// ----- response -----

/// Applies a response headers step. `Hold` pauses them (as for requests, this needs
/// `allow_on_headers_stop_iteration`) until the body callback that completes the
/// answer (and may still edit them) continues it.
fn apply_response_headers<H: Host>(
    host: &mut H,
    step: ResponseHeadersStep,
    present: &Snapshot,
) -> Result<Action> {
    match step {
        ResponseHeadersStep::Forward(edits) => {
            edit_headers(host, Map::ResponseHeaders, &edits, Some(present))?;
            Ok(Action::Continue)
        }
        ResponseHeadersStep::Hold(edits) => {
            edit_headers(host, Map::ResponseHeaders, &edits, Some(present))?;
            Ok(Action::Pause)
        }
        // Still in the headers callback: Envoy replaces the answer (its headers have
        // not gone out).
        ResponseHeadersStep::Reply(reply) => send_reply(host, &reply),
    }
}

/// Applies a response body step (from the body or the trailers callback);
/// `body_size` is the buffered body's length ([`WHOLE_BODY`] when unknown).
fn apply_response_body<H: Host>(
    host: &mut H,
    step: ResponseBodyStep,
    body_size: usize,
    exchange: &mut Exchange,
) -> Result<Action> {
    match step {
        ResponseBodyStep::Continue => Ok(Action::Continue),
        ResponseBodyStep::Wait => Ok(Action::Pause),
        ResponseBodyStep::Discard => {
            host.set_body(Body::Response, 0, body_size, &[])
                .map_err(failed("set_buffer(discard response body)"))?;
            Ok(Action::Pause)
        }
        ResponseBodyStep::Finish(edit) => {
            note_trailers(exchange, &edit);
            apply_response_edit(host, &edit, body_size)
        }
        ResponseBodyStep::Read(max) => {
            let body = read_body(host, Body::Response, max)?;
            match exchange.finish_response(&body) {
                Ok(edit) => {
                    note_trailers(exchange, &edit);
                    apply_response_edit(host, &edit, body_size)
                }
                Err(Reset(reason)) => reset_response(host, &reason),
            }
        }
        // The headers were held and have not gone out: Envoy replaces the answer.
        ResponseBodyStep::Reply(reply) => send_reply(host, &reply),
        ResponseBodyStep::Reset(reason) => reset_response(host, &reason),
    }
}

/// Completes a held body at its end (or carries a stream on): the held headers' edits
/// (empty unless they were held), body, then trailers (Envoy creates the trailer map if
/// the upstream sent none). Pauses when the edit says so (Envoy keeps the body).
fn apply_response_edit<H: Host>(
    host: &mut H,
    edit: &ResponseEdit,
    body_size: usize,
) -> Result<Action> {
    edit_headers(host, Map::ResponseHeaders, &edit.headers, None)?;
    match &edit.body {
        BodyEdit::Keep => {}
        BodyEdit::Prepend(header) => host
            .set_body(Body::Response, 0, 0, header)
            .map_err(failed("set_buffer(prepend to response body)"))?,
        BodyEdit::Wrap(header, end) => {
            host.set_body(Body::Response, 0, 0, header)
                .map_err(failed("set_buffer(prepend to response body)"))?;
            append_response(host, end)?;
        }
        BodyEdit::Append(end) => append_response(host, end)?,
        BodyEdit::Replace(body) => host
            .set_body(Body::Response, 0, body_size, body)
            .map_err(failed("set_buffer(response body)"))?,
    }
    for (name, value) in &edit.trailers {
        host.add_header(Map::ResponseTrailers, name, value)
            .map_err(failed("add response trailer"))?;
    }
    Ok(if edit.pause {
        Action::Pause
    } else {
        Action::Continue
    })
}

/// Puts `end` after the response body (Envoy appends what is set from at or past the
/// body's end); nothing to do for nothing.
fn append_response<H: Host>(host: &mut H, end: &[u8]) -> Result<()> {
    if end.is_empty() {
        return Ok(());
    }
    host.set_body(Body::Response, WHOLE_BODY, 0, end)
        .map_err(failed("set_buffer(append to response body)"))
}

/// The trailers an edit adds carry the call's outcome (`grpc-status`).
fn note_trailers(exchange: &mut Exchange, edit: &ResponseEdit) {
    for (name, value) in &edit.trailers {
        exchange.note_trailer(name, value);
    }
}

/// Resets the stream: the answer's headers went out and it cannot be completed.
fn reset_response<H: Host>(host: &mut H, reason: &str) -> Result<Action> {
    log::warn!("resetting the response: {reason}");
    host.reset_response()
        .map_err(failed("reset_http_response"))?;
    Ok(Action::Pause)
}

// ----- shared -----

/// Sends a local reply; the stream goes no further through this filter.
pub(crate) fn send_reply<H: Host>(host: &mut H, reply: &Reply) -> Result<Action> {
    let headers: Vec<(&str, &str)> = reply
        .headers
        .iter()
        .map(|(n, v)| (*n, v.as_str()))
        .collect();
    let body = (!reply.body.is_empty()).then_some(reply.body.as_slice());
    host.send_reply(u32::from(reply.status), &headers, body)
        .map_err(failed("send_http_response"))?;
    Ok(Action::Pause)
}

/// A header map as read at the start of a headers callback, in one host call: every
/// lookup of that callback is answered from it (each host call is a VM exit).
struct Snapshot(HeaderMap);

impl Snapshot {
    fn read<H: Host>(host: &mut H, map: Map) -> Result<Self> {
        host.headers(map)
            .map(Snapshot)
            .map_err(failed("get_header_map_pairs"))
    }

    /// The first value of `name` (lowercase, as Envoy keeps names), decoded lossily.
    fn get(&self, name: &str) -> Option<String> {
        self.0
            .get(name)
            .map(|v| String::from_utf8_lossy(v).into_owned())
    }

    fn has(&self, name: &str) -> bool {
        self.0.get(name).is_some()
    }
}

/// Applies header edits. With the map's `present` headers (read in this callback), a
/// removal of a header that is not there is skipped: no host call.
fn edit_headers<H: Host>(
    host: &mut H,
    map: Map,
    edits: &HeaderEdits,
    present: Option<&Snapshot>,
) -> Result<()> {
    for name in &edits.remove {
        if present.is_some_and(|p| !p.has(name)) {
            continue;
        }
        host.remove_header(map, name)
            .map_err(failed("remove header"))?;
    }
    for (name, value) in &edits.set {
        host.set_header(map, name, value)
            .map_err(failed("set header"))?;
    }
    Ok(())
}

fn read_body<H: Host>(host: &mut H, body: Body, max: usize) -> Result<Vec<u8>> {
    host.body(body, 0, max)
        .map(Option::unwrap_or_default)
        .map_err(failed("get_buffer(body)"))
}
