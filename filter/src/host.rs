//! The only file that calls the proxy-wasm host: it reads what the exchange needs and
//! applies the steps the exchange returns.
//!
//! It uses the SDK's `hostcalls` functions, which return `Result`, never the context
//! trait helpers (those `unwrap`). Header values are read as bytes (the SDK's string
//! getters `unwrap` UTF-8 decoding of client-controlled values) and decoded lossily.
//! The SDK still aborts on a status it does not expect from a call (e.g. `BadArgument`
//! for a header map that does not exist in the current phase); each call below is made
//! only in the phase where its map or buffer exists:
//! request headers and body in request callbacks, response headers, body and trailers
//! in response callbacks, the body only from a body (or trailers) callback.

use std::fmt;

use proxy_wasm::hostcalls;
use proxy_wasm::types::{Action, BufferType, MapType, Status};

use ferry_filter_core::exchange::{
    BodyEdit, Exchange, RequestBodyStep, RequestHead, RequestHeadersStep, Reset, ResponseBodyStep,
    ResponseEdit, ResponseHead, ResponseHeadersStep,
};
use ferry_filter_core::http::{HeaderEdits, Reply};

/// A host call that failed.
#[derive(Debug)]
pub struct HostError {
    call: &'static str,
    status: Status,
}

impl fmt::Display for HostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "host call {} failed: {:?}", self.call, self.status)
    }
}

pub type Result<T> = std::result::Result<T, HostError>;

fn failed(call: &'static str) -> impl Fn(Status) -> HostError {
    move |status| HostError { call, status }
}

/// A body length that means "all of it" (the host clamps reads; a replacement whose
/// length covers the buffer replaces it whole).
pub const WHOLE_BODY: usize = usize::MAX;

/// The plugin configuration bytes, if any.
pub fn plugin_configuration() -> Result<Option<Vec<u8>>> {
    hostcalls::get_buffer(BufferType::PluginConfiguration, 0, WHOLE_BODY)
        .map_err(failed("get_buffer(plugin configuration)"))
}

// ----- request -----

pub fn request_head() -> Result<RequestHead> {
    RequestHead::read(|name| header(MapType::HttpRequestHeaders, name))
}

/// Applies a request headers step. `Hold` pauses the headers until the body callback
/// that routes the request continues it; this needs the wasm filter's
/// `allow_on_headers_stop_iteration` (otherwise proxy-wasm's pause is Envoy's
/// `StopAllIterationAndWatermark`, which stops the body callbacks too: a hang).
pub fn apply_request_headers(step: RequestHeadersStep) -> Result<Action> {
    match step {
        RequestHeadersStep::Forward(edits) => {
            edit_headers(MapType::HttpRequestHeaders, &edits)?;
            Ok(Action::Continue)
        }
        RequestHeadersStep::Hold(edits) => {
            edit_headers(MapType::HttpRequestHeaders, &edits)?;
            Ok(Action::Pause)
        }
        RequestHeadersStep::Reply(reply) => send_reply(&reply),
    }
}

/// Applies a request body step; `body_size` is the buffered body's length
/// ([`WHOLE_BODY`] when unknown).
pub fn apply_request_body(
    step: RequestBodyStep,
    body_size: usize,
    exchange: &mut Exchange,
) -> Result<Action> {
    match step {
        RequestBodyStep::Continue => Ok(Action::Continue),
        RequestBodyStep::Wait => Ok(Action::Pause),
        RequestBodyStep::Reply(reply) => send_reply(&reply),
        RequestBodyStep::Read => {
            let body = read_body(BufferType::HttpRequestBody, body_size)?;
            match exchange.finish_request(body) {
                Ok(payload) => {
                    let message = payload.as_slice();
                    hostcalls::set_buffer(BufferType::HttpRequestBody, 0, body_size, message)
                        .map_err(failed("set_buffer(request body)"))?;
                    let edits = exchange.route_request(
                        |offset, max| {
                            let end = offset.saturating_add(max).min(message.len());
                            message.get(offset..end).map(<[u8]>::to_vec)
                        },
                        message.len(),
                    );
                    edit_headers(MapType::HttpRequestHeaders, &edits)?;
                    Ok(Action::Continue)
                }
                Err(reply) => send_reply(&reply),
            }
        }
        RequestBodyStep::Replace(message) => {
            hostcalls::set_buffer(BufferType::HttpRequestBody, 0, body_size, &message)
                .map_err(failed("set_buffer(request body)"))?;
            Ok(Action::Continue)
        }
        // The body stays in the host; only the session's bytes are read.
        RequestBodyStep::Route(len) => {
            let edits = exchange.route_request(
                |offset, max| {
                    hostcalls::get_buffer(BufferType::HttpRequestBody, offset, max)
                        .ok()
                        .map(Option::unwrap_or_default)
                },
                len,
            );
            edit_headers(MapType::HttpRequestHeaders, &edits)?;
            Ok(Action::Continue)
        }
    }
}

// ----- response -----

pub fn response_head() -> Result<ResponseHead> {
    ResponseHead::read(|name| header(MapType::HttpResponseHeaders, name))
}

/// Applies a response headers step (headers always continue, as for requests).
pub fn apply_response_headers(step: ResponseHeadersStep) -> Result<Action> {
    match step {
        ResponseHeadersStep::Forward(edits) => {
            edit_headers(MapType::HttpResponseHeaders, &edits)?;
            Ok(Action::Continue)
        }
        // Still in the headers callback: Envoy replaces the answer (its headers have
        // not gone out).
        ResponseHeadersStep::Reply(reply) => send_reply(&reply),
    }
}

/// Applies a response body step; `body_size` is the buffered body's length
/// ([`WHOLE_BODY`] when unknown).
pub fn apply_response_body(
    step: ResponseBodyStep,
    body_size: usize,
    exchange: &mut Exchange,
) -> Result<Action> {
    match step {
        ResponseBodyStep::Continue => Ok(Action::Continue),
        ResponseBodyStep::Wait => Ok(Action::Pause),
        ResponseBodyStep::Discard => {
            hostcalls::set_buffer(BufferType::HttpResponseBody, 0, body_size, &[])
                .map_err(failed("set_buffer(discard response body)"))?;
            Ok(Action::Pause)
        }
        ResponseBodyStep::Finish(edit) => apply_response_edit(&edit, body_size),
        ResponseBodyStep::Read(max) => {
            let body = read_body(BufferType::HttpResponseBody, max)?;
            match exchange.finish_response(&body) {
                Ok(edit) => apply_response_edit(&edit, body_size),
                Err(Reset(reason)) => reset_response(&reason),
            }
        }
        ResponseBodyStep::Reset(reason) => reset_response(&reason),
    }
}

/// Completes a held body at its end: body, then trailers (Envoy creates the trailer
/// map if the upstream sent none).
fn apply_response_edit(edit: &ResponseEdit, body_size: usize) -> Result<Action> {
    match &edit.body {
        BodyEdit::Keep => {}
        BodyEdit::Prepend(header) => {
            hostcalls::set_buffer(BufferType::HttpResponseBody, 0, 0, header)
                .map_err(failed("set_buffer(prepend to response body)"))?
        }
        BodyEdit::Replace(body) => {
            hostcalls::set_buffer(BufferType::HttpResponseBody, 0, body_size, body)
                .map_err(failed("set_buffer(response body)"))?
        }
    }
    for (name, value) in &edit.trailers {
        hostcalls::add_map_value(MapType::HttpResponseTrailers, name, value)
            .map_err(failed("add response trailer"))?;
    }
    Ok(Action::Continue)
}

/// Resets the stream: the answer's headers went out and it cannot be completed.
fn reset_response(reason: &str) -> Result<Action> {
    log::warn!("resetting the response: {reason}");
    hostcalls::reset_http_response().map_err(failed("reset_http_response"))?;
    Ok(Action::Pause)
}

// ----- shared -----

/// Sends a local reply; the stream goes no further through this filter.
pub fn send_reply(reply: &Reply) -> Result<Action> {
    let headers = reply
        .headers
        .iter()
        .map(|(n, v)| (*n, v.as_str()))
        .collect();
    let body = (!reply.body.is_empty()).then_some(reply.body.as_slice());
    hostcalls::send_http_response(u32::from(reply.status), headers, body)
        .map_err(failed("send_http_response"))?;
    Ok(Action::Pause)
}

fn header(map: MapType, name: &str) -> Result<Option<String>> {
    hostcalls::get_map_value_bytes(map, name)
        .map(|value| value.map(|bytes| String::from_utf8_lossy(&bytes).into_owned()))
        .map_err(failed("get header"))
}

fn edit_headers(map: MapType, edits: &HeaderEdits) -> Result<()> {
    for name in &edits.remove {
        hostcalls::remove_map_value(map, name).map_err(failed("remove header"))?;
    }
    for (name, value) in &edits.set {
        hostcalls::set_map_value(map, name, Some(value)).map_err(failed("set header"))?;
    }
    Ok(())
}

fn read_body(buffer: BufferType, max: usize) -> Result<Vec<u8>> {
    hostcalls::get_buffer(buffer, 0, max)
        .map(Option::unwrap_or_default)
        .map_err(failed("get_buffer(body)"))
}
