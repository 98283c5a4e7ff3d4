//! Drives an [`Exchange`] through a [`Host`]: one function per proxy-wasm callback,
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

use std::fmt;

use proxy_wasm::types::{Action, Status};

use ferry_filter_core::config::Config;
use ferry_filter_core::exchange::{
    BodyEdit, Exchange, RequestBodyStep, RequestHead, RequestHeadersStep, Reset, ResponseBodyStep,
    ResponseEdit, ResponseHead, ResponseHeadersStep,
};
use ferry_filter_core::http::{HeaderEdits, Reply};

use crate::host::{Body, Host, Map, WHOLE_BODY};

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
                "{:?}, session affinity {}",
                config.limits,
                if config.session_affinity { "on" } else { "off" }
            );
            Some(config)
        }
        Err(e) => {
            log::error!("refusing to start: {e}");
            None
        }
    }
}

// ----- request callbacks -----

/// `on_http_request_headers`.
pub(crate) fn on_request_headers<H: Host>(
    host: &mut H,
    exchange: &mut Exchange,
    end_of_stream: bool,
) -> Result<Action> {
    let head = RequestHead::read(|name| header(host, Map::RequestHeaders, name))?;
    let step = exchange.on_request_headers(&head, end_of_stream);
    apply_request_headers(host, step)
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
    apply_request_body(host, step, body_size, exchange)
}

/// `on_http_request_trailers`: they end the body, whose size is then unknown.
pub(crate) fn on_request_trailers<H: Host>(
    host: &mut H,
    exchange: &mut Exchange,
) -> Result<Action> {
    let step = exchange.on_request_trailers();
    apply_request_body(host, step, WHOLE_BODY, exchange)
}

// ----- response callbacks -----

/// `on_http_response_headers`.
pub(crate) fn on_response_headers<H: Host>(
    host: &mut H,
    exchange: &mut Exchange,
    end_of_stream: bool,
) -> Result<Action> {
    let head = ResponseHead::read(|name| header(host, Map::ResponseHeaders, name))?;
    let step = exchange.on_response_headers(&head, end_of_stream);
    apply_response_headers(host, step)
}

/// `on_http_response_body`; `body_size` as for requests.
pub(crate) fn on_response_body<H: Host>(
    host: &mut H,
    exchange: &mut Exchange,
    body_size: usize,
    end_of_stream: bool,
) -> Result<Action> {
    let step = exchange.on_response_body(body_size, end_of_stream);
    apply_response_body(host, step, body_size, exchange)
}

/// `on_http_response_trailers`: they end the body, whose size is then unknown.
pub(crate) fn on_response_trailers<H: Host>(
    host: &mut H,
    exchange: &mut Exchange,
) -> Result<Action> {
    let step = exchange.on_response_trailers();
    apply_response_body(host, step, WHOLE_BODY, exchange)
}

// ----- request -----

/// Applies a request headers step. `Hold` pauses the headers until the body callback
/// that routes the request continues it; this needs the wasm filter's
/// `allow_on_headers_stop_iteration` (otherwise proxy-wasm's pause is Envoy's
/// `StopAllIterationAndWatermark`, which stops the body callbacks too: a hang).
fn apply_request_headers<H: Host>(host: &mut H, step: RequestHeadersStep) -> Result<Action> {
    match step {
        RequestHeadersStep::Forward(edits) => {
            edit_headers(host, Map::RequestHeaders, &edits)?;
            Ok(Action::Continue)
        }
        RequestHeadersStep::Hold(edits) => {
            edit_headers(host, Map::RequestHeaders, &edits)?;
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
                    edit_headers(host, Map::RequestHeaders, &edits)?;
                    Ok(Action::Continue)
                }
                Err(reply) => send_reply(host, &reply),
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
            edit_headers(host, Map::RequestHeaders, &edits)?;
            Ok(Action::Continue)
        }
    }
}

// ----- response -----

/// Applies a response headers step. `Hold` pauses them (as for requests, this needs
/// `allow_on_headers_stop_iteration`) until the body callback that completes the
/// answer (and may still edit them) continues it.
fn apply_response_headers<H: Host>(host: &mut H, step: ResponseHeadersStep) -> Result<Action> {
    match step {
        ResponseHeadersStep::Forward(edits) => {
            edit_headers(host, Map::ResponseHeaders, &edits)?;
            Ok(Action::Continue)
        }
        ResponseHeadersStep::Hold(edits) => {
            edit_headers(host, Map::ResponseHeaders, &edits)?;
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
        ResponseBodyStep::Finish(edit) => apply_response_edit(host, &edit, body_size),
        ResponseBodyStep::Read(max) => {
            let body = read_body(host, Body::Response, max)?;
            match exchange.finish_response(&body) {
                Ok(edit) => apply_response_edit(host, &edit, body_size),
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
    edit_headers(host, Map::ResponseHeaders, &edit.headers)?;
    match &edit.body {
        BodyEdit::Keep => {}
        BodyEdit::Prepend(header) => host
            .set_body(Body::Response, 0, 0, header)
            .map_err(failed("set_buffer(prepend to response body)"))?,
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

fn header<H: Host>(host: &mut H, map: Map, name: &str) -> Result<Option<String>> {
    host.header(map, name).map_err(failed("get header"))
}

fn edit_headers<H: Host>(host: &mut H, map: Map, edits: &HeaderEdits) -> Result<()> {
    for name in &edits.remove {
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
