//! One request/response exchange, independent of the host: the host layer hands it
//! headers and body sizes (and, when asked, body bytes) and applies the steps it
//! returns. Everything a client can observe is decided here.
//!
//! Request: client protocol → the canonical request for the shim (Connect unary,
//! `application/proto`, uncompressed, `Authorization` kept) or a local error answer.
//! Response: the shim's answer (200 + proto, or a Connect error) → the client's
//! protocol; anything else (e.g. Envoy's own 503) → an error from the HTTP status.
//!
//! Timing (verified on Envoy 1.40): headers always continue, because proxy-wasm turns
//! a paused headers callback into Envoy's `StopAllIterationAndWatermark`, which stops
//! the body callbacks too (the stream hangs). So a rewritten request body is held by
//! pausing its body callbacks while its headers are already upstream, and a response's
//! status and content type are decided from its headers alone; only its body and
//! trailers are completed at the end. Before response headers go out the whole answer
//! can still be replaced (a declared oversized body, a headers-only answer); after,
//! gRPC can still report any error in its trailers, while a Connect success that
//! cannot be completed (oversized without `content-length`, malformed) is reset.

use std::ops::Range;

use crate::affinity;
use crate::auth;
use crate::codec::json::ToJsonError;
use crate::compression;
use crate::connect_get;
use crate::early_data;
use crate::errors::{Code, Rejection};
use crate::http::{Header, HeaderEdits, Reply};
use crate::limits::{content_length, Limits};
use crate::lost;
use crate::protocol::{self, connect, grpc, Client, Codec, Detected, Family, Protocol};
use crate::rpc::{self, Rpc};

/// The request headers the exchange reads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestHead {
    pub method: Option<String>,
    pub path: Option<String>,
    pub content_type: Option<String>,
    pub content_length: Option<String>,
    pub authorization: Option<String>,
    pub grpc_encoding: Option<String>,
    pub content_encoding: Option<String>,
    /// `early-data`: Envoy's mark of a request received in HTTP/3 0-RTT.
    pub early_data: Option<String>,
}

impl RequestHead {
    /// Reads the head with `get(name)` (the host's header lookup).
    pub fn read<E>(
        mut get: impl FnMut(&'static str) -> Result<Option<String>, E>,
    ) -> Result<Self, E> {
        Ok(RequestHead {
            method: get(":method")?,
            path: get(":path")?,
            content_type: get("content-type")?,
            content_length: get("content-length")?,
            authorization: get("authorization")?,
            grpc_encoding: get("grpc-encoding")?,
            content_encoding: get("content-encoding")?,
            early_data: get(early_data::HEADER)?,
        })
    }
}

/// The response headers the exchange reads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResponseHead {
    pub status: Option<String>,
    pub content_type: Option<String>,
    pub content_length: Option<String>,
    /// `ferry-shim-instance`: present on every answer that came from a shim.
    pub shim_instance: Option<String>,
    /// `grpc-status` in the headers (a trailers-only gRPC answer).
    pub grpc_status: Option<String>,
}

impl ResponseHead {
    /// Reads the head with `get(name)` (the host's header lookup).
    pub fn read<E>(
        mut get: impl FnMut(&'static str) -> Result<Option<String>, E>,
    ) -> Result<Self, E> {
        Ok(ResponseHead {
            status: get(":status")?,
            content_type: get("content-type")?,
            content_length: get("content-length")?,
            shim_instance: get(affinity::SHIM_INSTANCE)?,
            grpc_status: get("grpc-status")?,
        })
    }
}

/// What to do with the request headers.
#[derive(Debug, PartialEq, Eq)]
pub enum RequestHeadersStep {
    /// Apply the edits and forward the headers.
    Forward(HeaderEdits),
    /// Apply the edits and hold the headers until the body is complete (session
    /// affinity: the upstream depends on the session in the body). Needs Envoy's
    /// `allow_on_headers_stop_iteration`; without it a held request hangs.
    Hold(HeaderEdits),
    /// Answer locally; nothing is forwarded.
    Reply(Reply),
}

/// What to do with request body data.
#[derive(Debug, PartialEq, Eq)]
pub enum RequestBodyStep {
    /// Let it through.
    Continue,
    /// Keep buffering it.
    Wait,
    /// The body is complete: read all of it and call [`Exchange::finish_request`]
    /// (then [`Exchange::route_request`] with the canonical body, if headers are held).
    Read,
    /// The body (this many bytes, buffered by the host, canonical already) is
    /// complete: call [`Exchange::route_request`] with it, apply the header edits, and
    /// let the request go on.
    Route(usize),
    /// The body is complete: replace it (this many bytes, buffered by the host) with
    /// these bytes and let the request go on (a Connect GET's message, [`connect_get`]).
    Replace(Vec<u8>),
    /// Answer locally.
    Reply(Reply),
}

/// What to do with the response headers. They go out when the callback returns, so
/// the answer's status and content type are decided here, from the headers alone.
#[derive(Debug, PartialEq, Eq)]
pub enum ResponseHeadersStep {
    /// Apply the edits and forward the headers.
    Forward(HeaderEdits),
    /// Replace the whole answer (possible while its headers have not gone out).
    Reply(Reply),
}

/// What to do with response body data.
#[derive(Debug, PartialEq, Eq)]
pub enum ResponseBodyStep {
    Continue,
    /// Keep buffering it.
    Wait,
    /// Drop what is buffered and keep waiting for the end (an oversized body whose
    /// answer no longer depends on it).
    Discard,
    /// The body is complete: read up to this many bytes of it and call
    /// [`Exchange::finish_response`].
    Read(usize),
    /// The body is complete: apply this without reading it.
    Finish(ResponseEdit),
    /// The answer cannot be completed after its headers went out: reset the stream.
    Reset(String),
}

/// The changes that complete a held body at its end.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ResponseEdit {
    pub body: BodyEdit,
    /// Trailers to add (gRPC status); the host creates the trailer map.
    pub trailers: Vec<Header>,
}

#[derive(Debug, Default, PartialEq, Eq)]
pub enum BodyEdit {
    #[default]
    Keep,
    /// Put these bytes in front of the body (a gRPC frame header: the body itself never
    /// enters the VM).
    Prepend([u8; grpc::HEADER_LEN]),
    Replace(Vec<u8>),
}

/// A request body to forward: a range of bytes the filter owns, so dropping a gRPC
/// frame header costs no copy inside the VM.
#[derive(Debug, PartialEq, Eq)]
pub struct Payload {
    bytes: Vec<u8>,
    range: Range<usize>,
}

impl Payload {
    fn whole(bytes: Vec<u8>) -> Self {
        let range = 0..bytes.len();
        Payload { bytes, range }
    }

    pub fn as_slice(&self) -> &[u8] {
        self.bytes.get(self.range.clone()).unwrap_or_default()
    }
}

/// How many bytes of a non-RPC error body are quoted in the error message.
const QUOTED_BODY_BYTES: usize = 200;

/// Request headers no canonical request carries: gRPC transport headers,
/// `accept-encoding` (the shim answers uncompressed; compression is the filter's job),
/// and `x-ferry-host` (only the filter decides where a session goes).
const REMOVED_REQUEST_HEADERS: &[&str] = &[
    "te",
    "grpc-encoding",
    "grpc-accept-encoding",
    "accept-encoding",
    affinity::HEADER,
];

pub struct Exchange {
    limits: Limits,
    /// Hold the headers of session-carrying requests until their body names the
    /// session's shim ([`affinity`]).
    affinity: bool,
    state: State,
}

enum State {
    /// No request headers yet.
    New,
    /// The filter answered (or gave up on) this exchange: everything passes untouched,
    /// including the filter's own local reply on its way out.
    Answered,
    Call(Call),
}

struct Call {
    rpc: &'static Rpc,
    client: Client,
    /// The request came in early data (0-RTT) and its message decides whether it may
    /// go on: the body is buffered and checked before any of it is forwarded.
    replay_check: Option<early_data::Check>,
    /// The request headers are held until the session in the body is read.
    hold: bool,
    /// The request was routed to the shim holding its session.
    pinned: bool,
    /// What its answer needs if that shim is gone (small requests only).
    lost: Option<lost::Pinned>,
    request: RequestFlow,
    /// Request bytes seen so far while streaming.
    streamed: usize,
    /// A Connect GET's canonical message, put into the body Envoy opened for it.
    get_message: Option<Vec<u8>>,
    response: ResponseFlow,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RequestFlow {
    /// The body is already canonical (Connect proto): it streams, only counted.
    Stream,
    /// The body is buffered and rewritten at its end.
    Buffer,
    /// The body is already canonical (Connect proto) and the headers are held: it is
    /// buffered by the host, not rewritten, and routed at its end.
    Hold,
    /// A Connect GET: the (empty) body is replaced with the message from the query.
    Inject,
    Done,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ResponseFlow {
    /// No response headers yet, or nothing more to do.
    Idle,
    /// The answer goes out untouched.
    Pass,
    /// The body is buffered and converted at its end; `status` is the upstream's.
    /// `overflowed`: the body outgrew the limit and is being discarded.
    Convert {
        kind: Conversion,
        status: u16,
        overflowed: bool,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Conversion {
    /// The shim's success (200, `application/proto`) → the client's codec and framing.
    Success,
    /// The shim's Connect error → a gRPC status.
    ConnectError,
    /// Any other answer → an error made from its HTTP status.
    HttpError,
    /// Envoy's own "no upstream" answer to a pinned request: the holding shim is gone.
    Lost,
}

impl Exchange {
    pub fn new(limits: Limits) -> Self {
        Exchange {
            limits,
            affinity: false,
            state: State::New,
        }
    }

    /// Turns session affinity on or off ([`affinity`]; off by default).
    pub fn with_affinity(mut self, on: bool) -> Self {
        self.affinity = on;
        self
    }

    // ----- request -----

    pub fn on_request_headers(
        &mut self,
        head: &RequestHead,
        end_of_stream: bool,
    ) -> RequestHeadersStep {
        if let Some((rpc, path, query)) = get_form(head) {
            return match self.accept_get(head, rpc, path, query, end_of_stream) {
                Ok(edits) => RequestHeadersStep::Forward(edits),
                Err(reply) => self.answer(RequestHeadersStep::Reply(reply)),
            };
        }
        let mut call = match self.accept(head) {
            Ok(call) => call,
            Err(reply) => return self.answer(RequestHeadersStep::Reply(reply)),
        };
        if early_data::is_early(head.early_data.as_deref()) {
            match call.rpc.early_data {
                early_data::Policy::Allow => {}
                early_data::Policy::Inspect(check) => call.replay_check = Some(check),
                early_data::Policy::Refuse(what) => {
                    let reply = call.client.reply(&early_data::too_early(what));
                    return self.answer(RequestHeadersStep::Reply(reply));
                }
            }
        }
        let protocol = call.client.protocol;
        let mut edits = HeaderEdits {
            set: vec![
                ("content-type", connect::PROTO.to_owned()),
                ("x-ferry-rpc", call.rpc.name.to_owned()),
                ("x-ferry-protocol", protocol.name().to_owned()),
            ],
            remove: REMOVED_REQUEST_HEADERS.to_vec(),
        };
        // Connect proto is already canonical and streams, unless early data must be checked.
        let canonical = protocol == Protocol::ConnectProto && call.replay_check.is_none();
        call.hold = self.affinity && call.rpc.carries_session && !end_of_stream;
        let streams = canonical && !call.hold;
        if !canonical {
            edits.remove.push("content-length");
        }
        if end_of_stream && !streams {
            // No body at all: the message is empty. Connect proto streams (an empty body
            // is an empty message); every other form needs bytes, so this is refused.
            if let Err(rejection) = call.canonical_request(Vec::new()) {
                let reply = call.client.reply(&rejection);
                return self.answer(RequestHeadersStep::Reply(reply));
            }
        }
        let request = match (canonical, end_of_stream) {
            (_, true) => RequestFlow::Done,
            (true, false) if call.hold => RequestFlow::Hold,
            (true, false) => RequestFlow::Stream,
            (false, false) => RequestFlow::Buffer,
        };
        let hold = call.hold;
        self.state = State::Call(Call { request, ..call });
        if hold {
            RequestHeadersStep::Hold(edits)
        } else {
            RequestHeadersStep::Forward(edits)
        }
    }

    /// Checks the request head, in order: path, method, content type, compression,
    /// credentials, declared size. Errors take the client's shape once its protocol
    /// is known (a gRPC client asking for an unknown path gets gRPC status 12).
    fn accept(&self, head: &RequestHead) -> Result<Call, Reply> {
        let detected = protocol::detect(head.content_type.as_deref());
        let reject = |rejection: Rejection| match detected {
            Detected::Served(client) => client.reply(&rejection),
            Detected::NotServed(_) | Detected::Unknown => connect::error_reply(&rejection),
        };
        let path = head.path.as_deref().unwrap_or_default();
        let rpc = rpc::lookup(path).ok_or_else(|| {
            reject(
                Rejection::new(
                    Code::Unimplemented,
                    format!("unknown or unsupported RPC {path:?}"),
                )
                .with_http_status(404),
            )
        })?;
        let method = head.method.as_deref().unwrap_or_default();
        if method != "POST" {
            return Err(reject(
                Rejection::new(
                    Code::Unimplemented,
                    format!("{} needs POST, not {method:?}", rpc.name),
                )
                .with_http_status(405)
                .with_header("allow", "POST"),
            ));
        }
        let client = match detected {
            Detected::Served(client) => client,
            Detected::NotServed(what) => {
                return Err(reject(unsupported_media(
                    Code::Unimplemented,
                    format!("{what} is not supported yet"),
                )))
            }
            Detected::Unknown => {
                let message = match head.content_type.as_deref() {
                    Some(ct) => format!("unsupported content-type {ct:?}"),
                    None => "missing content-type".to_owned(),
                };
                return Err(reject(unsupported_media(Code::InvalidArgument, message)));
            }
        };
        let (encoding_header, encoding) = match client.protocol.family() {
            Family::Connect => ("content-encoding", head.content_encoding.as_deref()),
            Family::Grpc => ("grpc-encoding", head.grpc_encoding.as_deref()),
        };
        compression::parse(encoding).map_err(|compression::Unsupported(name)| {
            reject(Rejection::new(
                Code::Unimplemented,
                format!("{encoding_header} {name:?} is not supported yet (identity only)"),
            ))
        })?;
        auth::check_basic(head.authorization.as_deref()).map_err(reject)?;
        if let Some(declared) = content_length(head.content_length.as_deref()) {
            self.limits.check_request(declared).map_err(reject)?;
        }
        Ok(Call::new(rpc, client, RequestFlow::Done))
    }

    /// A Connect GET ([`connect_get`]): checks it, in order: query (encoding,
    /// compression, message, size), credentials, a body Envoy opened (the Lua filter)
    /// and none sent by the client, the message, and that it is safe to replay. Then
    /// the edits that make it the canonical POST; its message goes into the body at
    /// the body callback. Errors are Connect errors.
    fn accept_get(
        &mut self,
        head: &RequestHead,
        rpc: &'static Rpc,
        path: &str,
        query: &str,
        end_of_stream: bool,
    ) -> Result<HeaderEdits, Reply> {
        let reject = |rejection: Rejection| connect::error_reply(&rejection);
        let request = connect_get::parse(query, &self.limits).map_err(reject)?;
        let client = match request.codec {
            Codec::Json => Client {
                protocol: Protocol::ConnectJson,
                media_type: connect::JSON,
            },
            Codec::Proto => Client {
                protocol: Protocol::ConnectProto,
                media_type: connect::PROTO,
            },
        };
        auth::check_basic(head.authorization.as_deref()).map_err(reject)?;
        if end_of_stream {
            return Err(reject(connect_get::use_post(format!(
                "{} via GET is not enabled on this gateway (its Envoy configuration lacks the Lua filter that gives the request a body); use POST",
                rpc.name
            ))));
        }
        if content_length(head.content_length.as_deref()).is_some_and(|n| n > 0) {
            return Err(reject(Rejection::new(
                Code::InvalidArgument,
                "a Connect GET request has no body (the message goes in the query string)",
            )));
        }
        if request.codec == Codec::Proto {
            (rpc.validate_request)(&request.message).map_err(|e| {
                reject(Rejection::new(
                    Code::InvalidArgument,
                    format!("invalid {} request: {e}", rpc.name),
                ))
            })?;
        }
        let message = canonical_request(rpc, client.protocol, request.message)
            .map_err(reject)?
            .as_slice()
            .to_vec();
        let replay_safe = match rpc.early_data {
            early_data::Policy::Allow => Ok(()),
            early_data::Policy::Inspect(check) => check(&message),
            early_data::Policy::Refuse(what) => Err(what),
        };
        replay_safe.map_err(|what| {
            reject(connect_get::use_post(format!(
                "{} via GET runs only what is safe to replay (one plain read outside a transaction or session state), not {what}; send it with POST (nothing was executed)",
                rpc.name
            )))
        })?;
        let mut edits = HeaderEdits {
            set: vec![
                (":method", "POST".to_owned()),
                (":path", path.to_owned()),
                ("content-type", connect::PROTO.to_owned()),
                ("x-ferry-rpc", rpc.name.to_owned()),
                ("x-ferry-protocol", client.protocol.name().to_owned()),
            ],
            remove: REMOVED_REQUEST_HEADERS.to_vec(),
        };
        edits.remove.push("content-length");
        // A pinned session never gets here (its statements are not safe to
        // replay), so there is nothing to route back to a shim.
        self.state = State::Call(Call {
            get_message: Some(message),
            ..Call::new(rpc, client, RequestFlow::Inject)
        });
        Ok(edits)
    }

    /// `body_size`: while buffering, all bytes buffered so far; while streaming, this
    /// chunk's bytes (the host's convention: Envoy reports the buffered total).
    pub fn on_request_body(&mut self, body_size: usize, end_of_stream: bool) -> RequestBodyStep {
        let limits = self.limits;
        let State::Call(call) = &mut self.state else {
            return RequestBodyStep::Continue;
        };
        let received = match call.request {
            RequestFlow::Done => return RequestBodyStep::Continue,
            RequestFlow::Inject if body_size > 0 => {
                let reply = call.client.reply(&Rejection::new(
                    Code::InvalidArgument,
                    "a Connect GET request has no body (the message goes in the query string)",
                ));
                return self.answer(RequestBodyStep::Reply(reply));
            }
            RequestFlow::Inject if end_of_stream => {
                call.request = RequestFlow::Done;
                return RequestBodyStep::Replace(call.get_message.take().unwrap_or_default());
            }
            RequestFlow::Inject => return RequestBodyStep::Wait,
            RequestFlow::Stream => {
                call.streamed = call.streamed.saturating_add(body_size);
                call.streamed
            }
            RequestFlow::Buffer | RequestFlow::Hold => {
                call.streamed = body_size;
                body_size
            }
        };
        if let Err(rejection) = limits.check_request(received) {
            let reply = call.client.reply(&rejection);
            return self.answer(RequestBodyStep::Reply(reply));
        }
        match (call.request, end_of_stream) {
            (RequestFlow::Buffer, true) => RequestBodyStep::Read,
            (RequestFlow::Hold, true) => {
                call.request = RequestFlow::Done;
                RequestBodyStep::Route(body_size)
            }
            (RequestFlow::Buffer | RequestFlow::Hold, false) => RequestBodyStep::Wait,
            (_, true) => {
                call.request = RequestFlow::Done;
                RequestBodyStep::Continue
            }
            (_, false) => RequestBodyStep::Continue,
        }
    }

    /// Request trailers end the body.
    pub fn on_request_trailers(&mut self) -> RequestBodyStep {
        match &mut self.state {
            State::Call(call) if call.request == RequestFlow::Buffer => RequestBodyStep::Read,
            State::Call(call) if call.request == RequestFlow::Inject => {
                call.request = RequestFlow::Done;
                RequestBodyStep::Replace(call.get_message.take().unwrap_or_default())
            }
            State::Call(call) if call.request == RequestFlow::Hold => {
                call.request = RequestFlow::Done;
                RequestBodyStep::Route(call.streamed)
            }
            State::Call(call) => {
                call.request = RequestFlow::Done;
                RequestBodyStep::Continue
            }
            _ => RequestBodyStep::Continue,
        }
    }

    /// The complete buffered request body → the canonical body, or an error answer.
    pub fn finish_request(&mut self, body: Vec<u8>) -> Result<Payload, Reply> {
        let State::Call(call) = &mut self.state else {
            return Ok(Payload::whole(body));
        };
        call.request = RequestFlow::Done;
        match call.canonical_request(body) {
            Ok(payload) => Ok(payload),
            Err(rejection) => {
                let reply = call.client.reply(&rejection);
                self.state = State::Answered;
                Err(reply)
            }
        }
    }

    /// The held request's canonical body (`len` bytes, read with `read(offset, max)`)
    /// → the request header edits that route it: `x-ferry-host` for a pinned session.
    /// Decided once: after the first call (and for requests whose headers are not
    /// held) the edits are empty, so headers are never touched after they went on.
    pub fn route_request(
        &mut self,
        read: impl FnMut(usize, usize) -> Option<Vec<u8>>,
        len: usize,
    ) -> HeaderEdits {
        let State::Call(call) = &mut self.state else {
            return HeaderEdits::default();
        };
        if !std::mem::take(&mut call.hold) {
            return HeaderEdits::default();
        }
        let mut read = read;
        match affinity::route(&mut read, len) {
            Some(host) => {
                call.pinned = true;
                if len <= lost::MAX_MESSAGE {
                    call.lost = read(0, len)
                        .and_then(|message| lost::Pinned::from_request(call.rpc.name, &message));
                }
                HeaderEdits {
                    set: vec![(affinity::HEADER, host)],
                    remove: Vec::new(),
                }
            }
            None => HeaderEdits::default(),
        }
    }

    // ----- response -----

    pub fn on_response_headers(
        &mut self,
        head: &ResponseHead,
        end_of_stream: bool,
    ) -> ResponseHeadersStep {
        let limits = self.limits;
        let State::Call(call) = &mut self.state else {
            return ResponseHeadersStep::Forward(HeaderEdits::default());
        };
        let status = head
            .status
            .as_deref()
            .and_then(|s| s.trim().parse::<u16>().ok())
            .unwrap_or(0);
        let media = head
            .content_type
            .as_deref()
            .map(protocol::media_type)
            .unwrap_or_default();
        let client = call.client;
        let lost = call.pinned
            && affinity::is_lost(
                status,
                head.shim_instance.as_deref(),
                head.grpc_status.as_deref(),
            );
        let flow = if lost {
            ResponseFlow::Convert {
                kind: Conversion::Lost,
                status,
                overflowed: false,
            }
        } else {
            response_flow(client.protocol, status, media)
        };
        if let Some(declared) = content_length(head.content_length.as_deref()) {
            if let Err(rejection) = limits.check_response(declared) {
                if !lost {
                    return self.answer(ResponseHeadersStep::Reply(client.reply(&rejection)));
                }
            }
        }
        // Envoy's stateful_session names the upstream in this header: internal.
        let stripped = HeaderEdits {
            set: Vec::new(),
            remove: vec![affinity::HEADER],
        };
        let ResponseFlow::Convert { kind, .. } = flow else {
            call.response = flow;
            return ResponseHeadersStep::Forward(stripped);
        };
        let (new_status, mut edits) = if lost && call.lost.is_some() {
            lost_headers(client, kind, status)
        } else {
            answer_headers(client, kind, status)
        };
        edits.remove.extend(stripped.remove);
        if !end_of_stream {
            call.response = flow;
            return ResponseHeadersStep::Forward(edits);
        }
        // Headers only: no body callback will come, so the whole answer is decided now.
        call.response = ResponseFlow::Idle;
        let converted = if kind == Conversion::Lost {
            Ok(lost_answer(call.rpc, client, call.lost.as_ref(), limits))
        } else {
            convert_response(call.rpc, client, kind, status, &[], limits)
        };
        let step = match converted {
            Ok(edit) => headers_only(new_status, edits, edit),
            Err(Reset(message)) => {
                ResponseHeadersStep::Reply(client.reply(&Rejection::new(Code::Internal, message)))
            }
        };
        if matches!(step, ResponseHeadersStep::Reply(_)) {
            self.state = State::Answered;
        }
        step
    }

    /// `body_size`: all response bytes buffered so far (or this chunk's, when passing).
    pub fn on_response_body(&mut self, body_size: usize, end_of_stream: bool) -> ResponseBodyStep {
        let limits = self.limits;
        let State::Call(call) = &mut self.state else {
            return ResponseBodyStep::Continue;
        };
        let ResponseFlow::Convert {
            kind,
            status,
            overflowed,
        } = &mut call.response
        else {
            return ResponseBodyStep::Continue;
        };
        let (kind, status) = (*kind, *status);
        let client = call.client;
        if kind == Conversion::Lost {
            // The answer does not depend on Envoy's body: drop it, answer at its end.
            if !end_of_stream {
                return ResponseBodyStep::Discard;
            }
            call.response = ResponseFlow::Idle;
            return ResponseBodyStep::Finish(lost_answer(
                call.rpc,
                client,
                call.lost.as_ref(),
                limits,
            ));
        }
        if !*overflowed {
            if let Err(rejection) = limits.check_response(body_size) {
                if kind == Conversion::Success && client.protocol.family() == Family::Connect {
                    // A 200 is out; only a success body may follow, and it is too large.
                    return self.answer(ResponseBodyStep::Reset(rejection.message));
                }
                // The rest of the answer no longer depends on the body.
                *overflowed = true;
            }
        }
        if *overflowed {
            if !end_of_stream {
                return ResponseBodyStep::Discard;
            }
            call.response = ResponseFlow::Idle;
            return ResponseBodyStep::Finish(overflowed_answer(client, status, limits));
        }
        if !end_of_stream {
            return ResponseBodyStep::Wait;
        }
        if kind == Conversion::Success && client.protocol == Protocol::GrpcProto {
            call.response = ResponseFlow::Idle;
            return ResponseBodyStep::Finish(grpc_proto_success(body_size));
        }
        ResponseBodyStep::Read(if kind == Conversion::HttpError {
            body_size.min(QUOTED_BODY_BYTES)
        } else {
            body_size
        })
    }

    /// Response trailers end the body (its size is then unknown: read it all).
    pub fn on_response_trailers(&mut self) -> ResponseBodyStep {
        let State::Call(call) = &mut self.state else {
            return ResponseBodyStep::Continue;
        };
        match call.response {
            ResponseFlow::Convert {
                kind: Conversion::Lost,
                ..
            } => {
                call.response = ResponseFlow::Idle;
                ResponseBodyStep::Finish(lost_answer(
                    call.rpc,
                    call.client,
                    call.lost.as_ref(),
                    self.limits,
                ))
            }
            ResponseFlow::Convert {
                overflowed: true,
                status,
                ..
            } => {
                call.response = ResponseFlow::Idle;
                ResponseBodyStep::Finish(overflowed_answer(call.client, status, self.limits))
            }
            ResponseFlow::Convert { .. } => ResponseBodyStep::Read(self.limits.max_response_bytes),
            ResponseFlow::Idle | ResponseFlow::Pass => ResponseBodyStep::Continue,
        }
    }

    /// The complete (or, for foreign errors, the start of the) response body → the edit
    /// that completes the client's answer.
    pub fn finish_response(&mut self, body: &[u8]) -> Result<ResponseEdit, Reset> {
        let State::Call(call) = &mut self.state else {
            return Ok(ResponseEdit::default());
        };
        let ResponseFlow::Convert { kind, status, .. } = call.response else {
            return Ok(ResponseEdit::default());
        };
        call.response = ResponseFlow::Idle;
        let result = convert_response(call.rpc, call.client, kind, status, body, self.limits);
        if result.is_err() {
            self.state = State::Answered;
        }
        result
    }

    /// An internal error answer for when the host fails mid-exchange; `None` if the
    /// exchange has no client protocol yet. The exchange is over afterwards.
    pub fn fail(&mut self, message: &str) -> Option<Reply> {
        let reply = match &self.state {
            State::Call(call) => Some(call.client.reply(&Rejection::new(Code::Internal, message))),
            State::New | State::Answered => None,
        };
        self.state = State::Answered;
        reply
    }

    /// Marks the exchange answered locally and returns `step`.
    fn answer<T>(&mut self, step: T) -> T {
        self.state = State::Answered;
        step
    }
}

impl Call {
    /// A call that has just started: not held, not pinned, nothing seen yet.
    fn new(rpc: &'static Rpc, client: Client, request: RequestFlow) -> Call {
        Call {
            rpc,
            client,
            replay_check: None,
            hold: false,
            pinned: false,
            lost: None,
            request,
            streamed: 0,
            get_message: None,
            response: ResponseFlow::Idle,
        }
    }

    /// The client's request body → the canonical body; a request in early data must
    /// also be safe to replay.
    fn canonical_request(&self, body: Vec<u8>) -> Result<Payload, Rejection> {
        let payload = canonical_request(self.rpc, self.client.protocol, body)?;
        if let Some(check) = self.replay_check {
            check(payload.as_slice()).map_err(early_data::too_early)?;
        }
        Ok(payload)
    }
}

/// A request in Connect's GET form for an RPC that serves it: the RPC, the bare path
/// and the query string. Any other GET gets the usual "needs POST".
fn get_form(head: &RequestHead) -> Option<(&'static Rpc, &str, &str)> {
    if head.method.as_deref() != Some("GET") {
        return None;
    }
    let full = head.path.as_deref()?;
    let (path, query) = full.split_once('?')?;
    let rpc = rpc::lookup(path).filter(|rpc| rpc.get)?;
    connect_get::is_get_form(query).then_some((rpc, path, query))
}

fn unsupported_media(code: Code, message: String) -> Rejection {
    Rejection::new(code, message)
        .with_http_status(415)
        .with_header("accept-post", protocol::ACCEPTED)
}

/// The client's request body → the canonical body (the bare protobuf message).
fn canonical_request(rpc: &Rpc, protocol: Protocol, body: Vec<u8>) -> Result<Payload, Rejection> {
    let invalid = |e: crate::codec::CodecError| {
        Rejection::new(
            Code::InvalidArgument,
            format!("invalid {} request: {e}", rpc.name),
        )
    };
    let (message, framed) = match protocol.family() {
        Family::Connect => (0..body.len(), false),
        Family::Grpc => (grpc::unframe(&body)?, true),
    };
    let bytes = body.get(message.clone()).unwrap_or_default();
    match protocol.codec() {
        Codec::Json => (rpc.request_from_json)(bytes)
            .map(Payload::whole)
            .map_err(invalid),
        Codec::Proto if framed => {
            (rpc.validate_request)(bytes).map_err(invalid)?;
            Ok(Payload {
                bytes: body,
                range: message,
            })
        }
        // Connect proto is already canonical (it streams and is not decoded).
        Codec::Proto => Ok(Payload::whole(body)),
    }
}

/// How the answer to `protocol` goes out, from its status and media type.
fn response_flow(protocol: Protocol, status: u16, media: &str) -> ResponseFlow {
    let is = |m: &str| media.eq_ignore_ascii_case(m);
    let convert = |kind| ResponseFlow::Convert {
        kind,
        status,
        overflowed: false,
    };
    let shim_success = status == 200 && is(connect::PROTO);
    let connect_error = status != 200 && is(connect::JSON);
    let grpc_answer = media
        .get(..16)
        .is_some_and(|p| p.eq_ignore_ascii_case("application/grpc"));
    match protocol.family() {
        Family::Connect if shim_success && protocol == Protocol::ConnectProto => ResponseFlow::Pass,
        Family::Connect if shim_success => convert(Conversion::Success),
        // Connect errors are JSON whatever the request codec.
        Family::Connect if connect_error => ResponseFlow::Pass,
        Family::Grpc if shim_success => convert(Conversion::Success),
        Family::Grpc if connect_error => convert(Conversion::ConnectError),
        // Already a gRPC answer: Envoy's local replies to gRPC requests are trailers-only.
        Family::Grpc if grpc_answer => ResponseFlow::Pass,
        _ => convert(Conversion::HttpError),
    }
}

/// The status and headers of a converted answer, decided from the upstream's status:
/// gRPC answers are always 200 (the status goes in trailers); a Connect error made
/// from an HTTP status gets its code's HTTP status.
fn answer_headers(client: Client, kind: Conversion, status: u16) -> (u16, HeaderEdits) {
    let (new_status, content_type) = match (client.protocol.family(), kind) {
        (Family::Grpc, _) => (200, client.media_type),
        (Family::Connect, Conversion::HttpError) => {
            (Code::from_http_status(status).http_status(), connect::JSON)
        }
        (Family::Connect, Conversion::Lost) => (Code::Aborted.http_status(), connect::JSON),
        (Family::Connect, _) => (status, connect::JSON),
    };
    let mut set = Vec::with_capacity(2);
    if new_status != status {
        set.push((":status", new_status.to_string()));
    }
    set.push(("content-type", content_type.to_owned()));
    (
        new_status,
        HeaderEdits {
            set,
            remove: vec!["content-length"],
        },
    )
}

/// The end of an answer whose body outgrew the limit (and was discarded): gRPC says
/// so in its trailers; a Connect error made from an HTTP status stands, unquoted.
/// (A Connect success never gets here: it is reset.)
fn overflowed_answer(client: Client, status: u16, limits: Limits) -> ResponseEdit {
    match client.protocol.family() {
        Family::Grpc => {
            let limit = limits.max_response_bytes;
            let message = format!("response body is larger than the {limit}-byte limit");
            error_body(client, Code::ResourceExhausted, &message)
        }
        Family::Connect => http_error(client, status, b""),
    }
}

/// The body (and trailers) that complete a converted answer; `Err` when the answer
/// cannot be completed and the stream must be reset.
fn convert_response(
    rpc: &Rpc,
    client: Client,
    kind: Conversion,
    status: u16,
    body: &[u8],
    limits: Limits,
) -> Result<ResponseEdit, Reset> {
    match kind {
        Conversion::Success => success(rpc, client, body, limits),
        Conversion::ConnectError => Ok(match connect::parse_error(body) {
            Some((code, message)) => error_body(client, code, &message),
            None => http_error(client, status, body),
        }),
        Conversion::HttpError => Ok(http_error(client, status, body)),
        Conversion::Lost => Ok(lost_answer(rpc, client, None, limits)),
    }
}

/// The answer to a pinned request whose shim Envoy could not reach ([`lost`]): for a
/// Connect client with the request's context, the RPC's own answer, as the shims
/// give it for a lost pin; otherwise `aborted`.
fn lost_answer(
    rpc: &Rpc,
    client: Client,
    pinned: Option<&lost::Pinned>,
    limits: Limits,
) -> ResponseEdit {
    let fallback = || error_body(client, Code::Aborted, affinity::LOST);
    let Some(pinned) = pinned.filter(|_| client.protocol.family() == Family::Connect) else {
        return fallback();
    };
    let message = pinned.answer();
    if client.protocol == Protocol::ConnectProto {
        return ResponseEdit {
            body: BodyEdit::Replace(message),
            trailers: Vec::new(),
        };
    }
    let mut out = Vec::new();
    match (rpc.response_to_json)(&message, &mut out, limits.max_response_bytes) {
        Ok(_) => ResponseEdit {
            body: BodyEdit::Replace(out),
            trailers: Vec::new(),
        },
        Err(_) => fallback(),
    }
}

/// The status and headers of [`lost_answer`]: a Connect answer with the request's
/// context is the RPC's own (200, the client's codec); anything else as usual.
fn lost_headers(client: Client, kind: Conversion, status: u16) -> (u16, HeaderEdits) {
    if client.protocol.family() != Family::Connect {
        return answer_headers(client, kind, status);
    }
    let content_type = if client.protocol == Protocol::ConnectProto {
        connect::PROTO
    } else {
        connect::JSON
    };
    let mut set = vec![("content-type", content_type.to_owned())];
    if status != 200 {
        set.insert(0, (":status", "200".to_owned()));
    }
    (
        200,
        HeaderEdits {
            set,
            remove: vec!["content-length"],
        },
    )
}

/// The stream must be reset: the reason, for the log.
#[derive(Debug, PartialEq, Eq)]
pub struct Reset(pub String);

fn success(rpc: &Rpc, client: Client, body: &[u8], limits: Limits) -> Result<ResponseEdit, Reset> {
    let protocol = client.protocol;
    if protocol == Protocol::GrpcProto {
        return Ok(grpc_proto_success(body.len()));
    }
    let framed = protocol.family() == Family::Grpc;
    let header_len = if framed { grpc::HEADER_LEN } else { 0 };
    let mut out = vec![0; header_len];
    let max_len = limits.max_response_bytes.saturating_add(header_len);
    if let Err(e) = (rpc.response_to_json)(body, &mut out, max_len) {
        let (code, message) = match e {
            ToJsonError::Invalid(e) => (
                Code::Internal,
                format!("the shim's {} response is not valid: {e}", rpc.name),
            ),
            // Protojson outgrows the proto (base64): a message under the limit can
            // convert to JSON over it. Envoy resets a stream whose body is replaced
            // past its buffer limit from inside the callback, which the VM cannot
            // survive, so the JSON is capped while it is written.
            ToJsonError::TooLarge => (
                Code::ResourceExhausted,
                format!(
                    "the answer converted to JSON is over the {}-byte response limit; select fewer rows or columns",
                    limits.max_response_bytes
                ),
            ),
        };
        // gRPC can still say so in its trailers; a Connect 200 is already out.
        return if framed {
            Ok(error_body(client, code, &message))
        } else {
            Err(Reset(message))
        };
    }
    if !framed {
        return Ok(ResponseEdit {
            body: BodyEdit::Replace(out),
            trailers: Vec::new(),
        });
    }
    let header = grpc::frame_header(out.len().saturating_sub(header_len));
    match (header, out.get_mut(..header_len)) {
        (Some(header), Some(slot)) => slot.copy_from_slice(&header),
        _ => {
            return Ok(error_body(
                client,
                Code::ResourceExhausted,
                "response message is too large",
            ))
        }
    }
    Ok(ResponseEdit {
        body: BodyEdit::Replace(out),
        trailers: grpc::status(None, ""),
    })
}

/// gRPC proto success: the shim's body is the message; only a frame header goes in
/// front of it.
fn grpc_proto_success(len: usize) -> ResponseEdit {
    match grpc::frame_header(len) {
        Some(header) => ResponseEdit {
            body: BodyEdit::Prepend(header),
            trailers: grpc::status(None, ""),
        },
        None => ResponseEdit {
            body: BodyEdit::Replace(Vec::new()),
            trailers: grpc::status(
                Some(Code::ResourceExhausted),
                "response message is too large",
            ),
        },
    }
}

/// An answer that did not come from the shim's RPC layer (e.g. Envoy's `503 no healthy
/// upstream`): the code follows the HTTP status; the message quotes the body's start.
fn http_error(client: Client, status: u16, body: &[u8]) -> ResponseEdit {
    let quoted = String::from_utf8_lossy(body.get(..QUOTED_BODY_BYTES).unwrap_or(body))
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect::<String>();
    let quoted = quoted.trim();
    let message = if quoted.is_empty() {
        format!("upstream answered HTTP {status}")
    } else {
        format!("upstream answered HTTP {status}: {quoted}")
    };
    error_body(client, Code::from_http_status(status), &message)
}

/// The body of an error answer whose headers are already decided: Connect, the JSON
/// error; gRPC, no message and the status in trailers.
fn error_body(client: Client, code: Code, message: &str) -> ResponseEdit {
    match client.protocol.family() {
        Family::Connect => ResponseEdit {
            body: BodyEdit::Replace(connect::error_body(code, message)),
            trailers: Vec::new(),
        },
        Family::Grpc => ResponseEdit {
            body: BodyEdit::Replace(Vec::new()),
            trailers: grpc::status(Some(code), message),
        },
    }
}

/// Completes an answer that ended with its headers (no body callback will come).
/// Without a body, the edits are the answer (gRPC trailers become a trailers-only
/// answer). With a body and no trailers (Connect), it becomes a whole local reply.
/// A gRPC message needs a body *and* trailers, which a headers-only answer cannot get:
/// it becomes a trailers-only `internal` error instead.
fn headers_only(status: u16, mut edits: HeaderEdits, edit: ResponseEdit) -> ResponseHeadersStep {
    let body = match edit.body {
        BodyEdit::Keep => Vec::new(),
        BodyEdit::Prepend(header) => header.to_vec(),
        BodyEdit::Replace(body) => body,
    };
    let trailers = if body.is_empty() {
        edit.trailers
    } else if edit.trailers.is_empty() {
        edits.set.retain(|(name, _)| *name != ":status");
        return ResponseHeadersStep::Reply(Reply {
            status,
            headers: edits.set,
            body,
        });
    } else {
        let message = "the shim answered with headers only; an empty message needs a body to be framed for gRPC";
        grpc::status(Some(Code::Internal), message)
    };
    edits.set.extend(trailers);
    ResponseHeadersStep::Forward(edits)
}

#[cfg(test)]
mod tests;
