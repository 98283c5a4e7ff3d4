//! One request/response exchange, independent of the host: the host layer hands it
//! headers and body sizes (and, when asked, body bytes) and applies the steps it
//! returns. Everything a client can observe is decided here; what differs between
//! client protocols is asked of the client's [`Wire`](crate::protocol::Wire).
//!
//! Request ([`request`]): client protocol → the canonical request for the shim
//! (Connect unary, `application/proto`, uncompressed, `Authorization` kept) or a local
//! error answer. Response: the shim's unary answer (200 + proto, or a Connect error)
//! → the client's protocol ([`response`]); the shim's stream (200 + Connect streaming
//! envelopes) → the client's stream, converted envelope by envelope as the chunks
//! arrive ([`stream`]); anything else (e.g. Envoy's own 503) → an error from the
//! HTTP status.
//!
//! Timing (verified on Envoy 1.40): a paused headers callback needs the wasm filter's
//! `allow_on_headers_stop_iteration` (else proxy-wasm's pause is Envoy's
//! `StopAllIterationAndWatermark`, which stops the body callbacks too: the stream
//! hangs). With it, request headers are held while a session's body is read
//! ([`affinity`]) and a Connect unary answer's headers are held while its body decides
//! its `content-encoding`; otherwise headers go on at once and only bodies and
//! trailers are completed at the end. Before response headers go out the whole answer
//! can still be replaced; after, gRPC and Connect streams can still report an error at
//! their end, while a Connect unary success that cannot be completed is reset.

mod framed_unary;
mod json_failure;
mod request;
mod response;
mod stream;
mod unary_stream;
mod web;

use ferry_compress::Encoding;

use crate::affinity;
use crate::compression;
use crate::config::{ClientAddress, Config};
use crate::connect_get;
use crate::distance;
use crate::early_data;
use crate::errors::{Code, Rejection};
use crate::header_hold::Hold;
use crate::http::{Header, HeaderEdits, Reply};
use crate::limits::{content_length, Limits};
use crate::lost;
use crate::metrics;
use crate::protocol::grpc_web::Answer as WebAnswer;
use crate::protocol::{self, connect, Client, Codec, Detected};
use crate::route_class::{self, Class};
use crate::rpc::{self, Rpc};

use response::ResponseFlow;

/// The request headers the exchange reads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestHead {
    pub method: Option<String>,
    pub path: Option<String>,
    pub content_type: Option<String>,
    pub content_length: Option<String>,
    pub authorization: Option<String>,
    /// Every protocol's encoding headers, read by name ([`REQUEST_HEADERS`]).
    pub encodings: Vec<(&'static str, String)>,
    /// `grpc-timeout`: translated for the shim into `connect-timeout-ms`.
    pub grpc_timeout: Option<String>,
    /// `early-data`: Envoy's mark of a request received in HTTP/3 0-RTT.
    pub early_data: Option<String>,
    /// `x-ferry-client-rtt-ms` and `x-ferry-client-addr`: how far the client is
    /// ([`distance`]).
    pub client_rtt: Option<String>,
    pub client_addr: Option<String>,
    /// The request came in as gRPC-Web and Envoy's grpc_web filter made it gRPC: the
    /// client's `x-grpc-web` header, or an `accept` naming gRPC-Web. For metrics only
    /// (gRPC-Web this filter serves itself is known from its content type).
    pub grpc_web: bool,
    /// `accept`: a gRPC-Web client served here asks for a text answer with it.
    pub accept: Option<String>,
}

/// The encoding headers of every client protocol, read into [`RequestHead::encodings`].
const ENCODING_HEADERS: &[&str] = &[
    "content-encoding",
    "accept-encoding",
    "grpc-encoding",
    "grpc-accept-encoding",
    "connect-content-encoding",
    "connect-accept-encoding",
];

impl RequestHead {
    /// Reads the head with `get(name)` (the host's header lookup).
    pub fn read<E>(
        mut get: impl FnMut(&'static str) -> Result<Option<String>, E>,
    ) -> Result<Self, E> {
        let mut encodings = Vec::new();
        let accept = get("accept")?;
        for &name in ENCODING_HEADERS {
            if let Some(value) = get(name)? {
                encodings.push((name, value));
            }
        }
        Ok(RequestHead {
            method: get(":method")?,
            path: get(":path")?,
            content_type: get("content-type")?,
            content_length: get("content-length")?,
            authorization: get("authorization")?,
            encodings,
            grpc_timeout: get("grpc-timeout")?,
            early_data: get(early_data::HEADER)?,
            client_rtt: get(distance::CLIENT_RTT_HEADER)?,
            client_addr: get(distance::CLIENT_ADDR_HEADER)?,
            grpc_web: get("x-grpc-web")?.is_some()
                || accept
                    .as_deref()
                    .is_some_and(|a| a.contains("application/grpc-web")),
            accept,
        })
    }

    /// The value of one of the [`ENCODING_HEADERS`].
    pub fn encoding(&self, name: &str) -> Option<&str> {
        self.encodings
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
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
    /// `ferry-target`: the answering shim's role (primary | replica).
    pub target: Option<String>,
    /// What Envoy says about an answer no shim gave (`response.flags`,
    /// `response.code_details`); the host fills it only when `shim_instance` is absent.
    pub envoy: lost::EnvoyAnswer,
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
            target: get("ferry-target")?,
            envoy: lost::EnvoyAnswer::default(),
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
    /// Keep buffering it (the host holds it: Envoy's buffer limit bounds it).
    Wait,
    /// Move this chunk into the filter: read it (all the host holds), give it to
    /// [`Exchange::keep_request`], empty the host's chunk, then `Continue` (the
    /// upstream gets an empty chunk) or, with `pause`, pause (the headers are held: a
    /// `Continue` would let them go on). Envoy then buffers nothing of the body, so its
    /// buffer limit does not bound it; [`Limits`] does.
    Keep { pause: bool },
    /// The body is complete: read what the host holds of it (the last chunk) and call
    /// [`Exchange::finish_request`] with it (the chunks kept before come first), replace
    /// it with the canonical body (then [`Exchange::route_request`] with it, if headers
    /// are held) and let the request go on.
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

/// What to do with the response headers.
#[derive(Debug, PartialEq, Eq)]
pub enum ResponseHeadersStep {
    /// Apply the edits and forward the headers.
    Forward(HeaderEdits),
    /// Apply the edits and hold the headers: the edit that completes the body
    /// ([`ResponseEdit::headers`]) still changes them. Needs Envoy's
    /// `allow_on_headers_stop_iteration`.
    Hold(HeaderEdits),
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
    /// Read up to this many bytes of the buffered body (the whole answer at its end,
    /// or, for a stream, this chunk), call [`Exchange::finish_response`] with them and
    /// apply the edit it returns in their place; the data goes on.
    Read(usize),
    /// Apply this without reading the body.
    Finish(ResponseEdit),
    /// Replace the whole answer: its headers were held and have not gone out.
    Reply(Reply),
    /// The answer cannot be completed after its headers went out: reset the stream.
    Reset(String),
}

/// The changes that complete (or, streaming, carry on) a response body.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ResponseEdit {
    /// Edits of the held response headers ([`ResponseHeadersStep::Hold`] only).
    pub headers: HeaderEdits,
    pub body: BodyEdit,
    /// Trailers to add at the end of the body; the host creates the trailer map.
    pub trailers: Vec<Header>,
    /// Stop here: Envoy keeps what the edit left of the body (a held stream's end
    /// follows; see [`stream`]). Otherwise the body goes on.
    pub pause: bool,
}

#[derive(Debug, Default, PartialEq, Eq)]
pub enum BodyEdit {
    #[default]
    Keep,
    /// Put these bytes in front of the body (an envelope header: the body itself never
    /// enters the VM).
    Prepend([u8; crate::envelope::HEADER_LEN]),
    /// Put the envelope header in front of the body and these bytes after it (a
    /// gRPC-Web trailer frame): the body itself never enters the VM either.
    Wrap([u8; crate::envelope::HEADER_LEN], Vec<u8>),
    /// Put these bytes after the body (the end of an answer whose chunks went on as
    /// they came: nothing, or a gRPC-Web trailer frame).
    Append(Vec<u8>),
    Replace(Vec<u8>),
}

impl ResponseEdit {
    fn replace(body: Vec<u8>, trailers: Vec<Header>) -> Self {
        ResponseEdit {
            headers: HeaderEdits::default(),
            body: BodyEdit::Replace(body),
            trailers,
            pause: false,
        }
    }
}

/// A request body to forward: a range of bytes the filter owns, so dropping an
/// envelope header costs no copy inside the VM.
#[derive(Debug, PartialEq, Eq)]
pub struct Payload {
    bytes: Vec<u8>,
    range: std::ops::Range<usize>,
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

/// The stream must be reset: the reason, for the log.
#[derive(Debug, PartialEq, Eq)]
pub struct Reset(pub String);

/// Request headers no canonical request carries: a client's token claims, gRPC
/// transport headers, every protocol's encoding headers (the filter undoes a request's
/// compression and the shim answers uncompressed; compression is the filter's job), and
/// `x-ferry-host` (only the filter decides where a session goes).
const REMOVED_REQUEST_HEADERS: &[&str] = &[
    // Only Envoy's jwt_authn, after this filter, may set a token's verified claims
    // (envoy/tokens.yaml): a client's own never reaches the shim, in any form the filter
    // is delivered in, whether or not the control plane removes it first.
    ferry_wire::headers::TOKEN_CLAIMS,
    "te",
    "content-encoding",
    "accept-encoding",
    "grpc-encoding",
    "grpc-accept-encoding",
    "connect-content-encoding",
    "connect-accept-encoding",
    affinity::HEADER,
    route_class::HEADER,
];

pub struct Exchange {
    settings: std::rc::Rc<Config>,
    /// Whether headers may be held ([`crate::header_hold`]).
    hold: Hold,
    state: State,
    /// What the metrics need, kept after the call is answered.
    observed: Observed,
    /// The content type of the filter's own body-less local reply, which Envoy drops
    /// when it does not take the request for gRPC (gRPC-Web's trailers-only answers):
    /// put back as the reply passes this filter's response callback.
    reply_type: Option<String>,
}

/// What one exchange's metrics are made of, gathered as it goes.
#[derive(Clone, Debug, Default)]
struct Observed {
    /// `None` until the request names a served RPC (other requests have no metrics).
    rpc: Option<&'static str>,
    protocol: &'static str,
    codec: &'static str,
    class: Class,
    target: &'static str,
    /// The outcome so far (`None`: ok).
    code: Option<Code>,
}

enum State {
    /// No request headers yet.
    New,
    /// The filter answered (or gave up on) this exchange: everything passes untouched,
    /// including the filter's own local reply on its way out.
    Answered,
    Call(Box<Call>),
}

struct Call {
    rpc: &'static Rpc,
    client: Client,
    /// The encoding of the request's message.
    request_encoding: Encoding,
    /// The encoding the answer's messages may use (negotiated with the client).
    answer_encoding: Encoding,
    /// Connect unary: the codec Envoy's compressor will use after us (config
    /// `compression.envoy`, accepted by the client); the answer leaves uncompressed,
    /// marked `no-transform` when it does not pay.
    envoy_encoding: Option<Encoding>,
    /// The client is too near for compression to pay ([`distance`]): its answer goes
    /// uncompressed, and Envoy's compressor is told so (`no-transform`).
    near: bool,
    /// The client's `grpc-timeout`, in milliseconds: sent on as `connect-timeout-ms`.
    deadline_ms: Option<u64>,
    /// A gRPC request Envoy's grpc_web filter (in front of this one) converted from
    /// gRPC-Web, asking for a text answer: that filter encodes our answer after us, and
    /// stops on every chunk without a whole frame, after which it lets trailers we add
    /// pass unconverted (as HTTP trailers, which gRPC-Web has not). So a unary answer
    /// reaches it whole, at its end (framed_unary.rs).
    behind_web_text: bool,
    /// The request came in early data (0-RTT) and its message decides whether it may
    /// go on: the body is buffered and checked before any of it is forwarded.
    replay_check: Option<early_data::Check>,
    /// The request headers are held until the session in the body is read.
    hold: bool,
    /// The answer's headers may be held (the hold is known to work).
    response_hold: bool,
    /// The request was routed to the shim holding its session.
    pinned: bool,
    /// What its answer needs if that shim is gone (small requests only).
    lost: Option<lost::Pinned>,
    request: RequestFlow,
    /// Request bytes seen so far (streaming, or kept).
    streamed: usize,
    /// [`RequestFlow::Buffer`]: the body chunks moved into the filter so far.
    kept: Vec<u8>,
    /// The last request body step paused ([`RequestBodyStep::Keep`] with `pause`): the
    /// host still has a (possibly emptied) body buffered, which the trailers callback
    /// may replace. Otherwise the last chunk went on, and there is nothing to write to.
    body_paused: bool,
    /// A Connect GET's canonical message, put into the body Envoy opened for it.
    get_message: Option<Vec<u8>>,
    response: ResponseFlow,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RequestFlow {
    /// The body is already canonical (Connect proto): it streams, only counted.
    Stream,
    /// The body is rewritten at its end: each chunk is moved into the filter as it
    /// arrives ([`RequestBodyStep::Keep`]) and the canonical body replaces the last.
    Buffer,
    /// The body is already canonical (Connect proto) and the headers are held: it is
    /// buffered by the host (bounded by Envoy's buffer limit), not rewritten, and
    /// routed at its end. Released headers (no hold after all) make it [`Stream`].
    ///
    /// [`Stream`]: RequestFlow::Stream
    Hold,
    /// A Connect GET: the (empty) body is replaced with the message from the query.
    Inject,
    Done,
}

impl Exchange {
    /// An exchange under the filter's configuration (shared by all its exchanges).
    pub fn new(settings: std::rc::Rc<Config>) -> Self {
        Exchange {
            settings,
            hold: Hold::Works,
            state: State::New,
            observed: Observed::default(),
            reply_type: None,
        }
    }

    /// The same exchange under what is known of the header hold (by default it works).
    pub fn with_hold(mut self, hold: Hold) -> Self {
        self.hold = hold;
        self
    }

    /// The request headers are held (until [`Exchange::route_request`] decides).
    pub fn request_held(&self) -> bool {
        matches!(&self.state, State::Call(call) if call.hold)
    }

    /// The host let the held request headers go on without a decision (Envoy does not
    /// hold headers for this filter after all): nothing may edit them any more, and
    /// the request goes where Envoy routes it without a class or a holder.
    pub fn release_request_headers(&mut self) {
        if let State::Call(call) = &mut self.state {
            call.hold = false;
        }
    }

    fn limits(&self) -> Limits {
        self.settings.limits
    }

    /// Whether the host must put Envoy's downstream address (`source.address`) in
    /// [`RequestHead::client_addr`] (`client_address: "peer"`).
    pub fn wants_peer_address(&self) -> bool {
        self.settings.client_address == ClientAddress::Peer
    }

    /// `client_address: "peer"`: the address Envoy saw replaces whatever the client
    /// sent in `x-ferry-client-addr`; with none known, the client's is removed.
    fn client_address_edit(&self, head: &RequestHead, edits: &mut HeaderEdits) {
        if self.wants_peer_address() {
            match &head.client_addr {
                Some(addr) => edits.set.push((distance::CLIENT_ADDR_HEADER, addr.clone())),
                None => edits.remove.push(distance::CLIENT_ADDR_HEADER),
            }
        }
    }

    fn too_near(&self, head: &RequestHead) -> bool {
        let (rtt, addr) = (head.client_rtt.as_deref(), head.client_addr.as_deref());
        self.settings.distance.too_near(rtt, addr)
    }

    // ----- request -----

    pub fn on_request_headers(
        &mut self,
        head: &RequestHead,
        end_of_stream: bool,
    ) -> RequestHeadersStep {
        if let Some((rpc, path, query)) = request::get_form(head) {
            return match self.accept_get(head, rpc, path, query, end_of_stream) {
                Ok(edits) => RequestHeadersStep::Forward(edits),
                Err(reply) => self.answer(RequestHeadersStep::Reply(reply)),
            };
        }
        let mut call = match self.accept(head) {
            Ok(call) => call,
            Err(reply) => return self.answer(RequestHeadersStep::Reply(reply)),
        };
        self.observe(call.rpc, call.client, head.grpc_web);
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
        let mut edits = HeaderEdits {
            set: vec![
                ("content-type", connect::PROTO.to_owned()),
                ("x-ferry-rpc", call.rpc.name.to_owned()),
                ("x-ferry-protocol", call.client.name.to_owned()),
            ],
            remove: REMOVED_REQUEST_HEADERS.to_vec(),
        };
        self.client_address_edit(head, &mut edits);
        if let Some(ms) = call.deadline_ms {
            edits.set.push(("connect-timeout-ms", ms.to_string()));
        }
        // Connect proto is already canonical and streams, unless it is compressed or
        // early data must be checked.
        let canonical = call.client.is_canonical()
            && call.request_encoding == Encoding::Identity
            && call.replay_check.is_none();
        // Held until the body is read: for the session (affinity) and for the statement
        // (`x-ferry-class`); both decide the route, which Envoy picks once they go on.
        // Without the hold (`header_hold`), a request goes on at once as `write`: the
        // primary, never retried.
        let classified = route_class::by_statement(call.rpc.name);
        call.response_hold = self.hold.response();
        call.hold = !end_of_stream
            && self.hold.request()
            && (classified || (self.settings.session_affinity && call.rpc.carries_session));
        if !call.hold {
            // Decided now: no statement to read (another RPC, no body at all, or no
            // hold to read it in).
            let class = if classified && end_of_stream {
                route_class::of_message(call.rpc.name, &[])
            } else {
                Class::Write
            };
            self.observed.class = class;
            edits
                .set
                .push((route_class::HEADER, class.as_str().to_owned()));
        }
        let streams = canonical && !call.hold;
        if !canonical {
            edits.remove.push("content-length");
        }
        if end_of_stream && !streams {
            // No body at all: the message is empty. Connect proto streams (an empty body
            // is an empty message); every other form needs bytes, so this is refused.
            if let Err(rejection) = call.canonical_request(Vec::new(), self.limits()) {
                let reply = call.client.reply(&rejection);
                return self.answer(RequestHeadersStep::Reply(reply));
            }
        }
        call.request = match (canonical, end_of_stream) {
            (_, true) => RequestFlow::Done,
            (true, false) if call.hold => RequestFlow::Hold,
            (true, false) => RequestFlow::Stream,
            (false, false) => RequestFlow::Buffer,
        };
        let hold = call.hold;
        self.state = State::Call(call);
        if hold {
            RequestHeadersStep::Hold(edits)
        } else {
            RequestHeadersStep::Forward(edits)
        }
    }

    /// Checks the request head, in order: path, method, content type (and that it
    /// fits the RPC's kind), compression, credentials, declared size. Errors take the
    /// client's shape once its protocol is known (a gRPC client asking for an unknown
    /// path gets gRPC status 12).
    fn accept(&self, head: &RequestHead) -> Result<Box<Call>, Reply> {
        let detected = match protocol::detect(head.content_type.as_deref()) {
            // gRPC-Web's answer form depends on `accept`.
            Detected::Served(client) => Detected::Served(client.answering(head.accept.as_deref())),
            other => other,
        };
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
            Detected::NotServed(why) => {
                return Err(reject(request::unsupported_media(
                    Code::Unimplemented,
                    why.to_owned(),
                )))
            }
            Detected::Unknown => {
                let message = match head.content_type.as_deref() {
                    Some(ct) => format!("unsupported content-type {ct:?}"),
                    None => "missing content-type".to_owned(),
                };
                return Err(reject(request::unsupported_media(
                    Code::InvalidArgument,
                    message,
                )));
            }
        };
        if !client.wire.serves(rpc.streaming) {
            // Not this protocol's call at all: a plain HTTP 415, as connect-go answers.
            return Err(connect::error_reply(&request::wrong_kind(rpc, client)));
        }
        let headers = client.wire.encoding_headers();
        let request_encoding =
            compression::request_encoding(headers.content, head.encoding(headers.content))
                .map_err(|rejection| {
                    reject(rejection.with_header(headers.accept, ferry_compress::SUPPORTED))
                })?;
        let accept = head.encoding(headers.accept);
        let envoy_encoding = if client.wire.enveloped() {
            None
        } else {
            compression::negotiate_envoy(&self.settings.envoy_compression, accept)
        };
        let near = self.too_near(head);
        let answer_encoding = match envoy_encoding {
            Some(_) => Encoding::Identity,
            None if near => Encoding::Identity,
            None => compression::negotiate(&self.settings.compression, accept),
        };
        crate::auth::check_credentials(head.authorization.as_deref()).map_err(reject)?;
        if let Some(declared) = content_length(head.content_length.as_deref()) {
            self.limits().check_request(declared).map_err(reject)?;
        }
        let deadline_ms = match head.grpc_timeout.as_deref() {
            None => None,
            Some(value) => Some(request::grpc_timeout_ms(value).map_err(reject)?),
        };
        let mut call = Call::new(rpc, client, RequestFlow::Done);
        call.deadline_ms = deadline_ms;
        call.request_encoding = request_encoding;
        call.answer_encoding = answer_encoding;
        call.envoy_encoding = envoy_encoding;
        call.near = near;
        call.behind_web_text = client.wire.web_answer().is_none()
            && client.wire.speaks_grpc()
            && protocol::grpc_web::asks_text(head.accept.as_deref());
        Ok(call)
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
        let limits = self.limits();
        let request = connect_get::parse(query, &limits).map_err(reject)?;
        let client = protocol::connect_unary(request.codec);
        self.observe(rpc, client, false);
        crate::auth::check_credentials(head.authorization.as_deref()).map_err(reject)?;
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
        let call = Call::new(rpc, client, RequestFlow::Inject);
        let message = call
            .decode_request(request.message, limits)
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
                ("x-ferry-protocol", client.name.to_owned()),
            ],
            remove: REMOVED_REQUEST_HEADERS.to_vec(),
        };
        self.client_address_edit(head, &mut edits);
        edits.remove.push("content-length");
        // The message is known already (and replay-safe): its class is decided now.
        let class = route_class::of_execute(&message);
        self.observed.class = class;
        edits
            .set
            .push((route_class::HEADER, class.as_str().to_owned()));
        // A pinned session never gets here (its statements are not safe to
        // replay), so there is nothing to route back to a shim.
        let mut call = call;
        call.get_message = Some(message);
        call.response_hold = self.hold.response();
        call.envoy_encoding = compression::negotiate_envoy(
            &self.settings.envoy_compression,
            head.encoding("accept-encoding"),
        );
        call.near = self.too_near(head);
        self.state = State::Call(call);
        Ok(edits)
    }

    /// `body_size`: what the host holds of the body (Envoy reports the buffered total
    /// after a paused callback, else this chunk's bytes): while the host buffers
    /// ([`RequestBodyStep::Wait`]), all bytes so far; while streaming or keeping
    /// ([`RequestBodyStep::Keep`] empties each chunk), this chunk's.
    pub fn on_request_body(&mut self, body_size: usize, end_of_stream: bool) -> RequestBodyStep {
        let limits = self.limits();
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
            // The headers went on without a decision (Envoy does not hold them): what
            // Envoy buffered meanwhile is this chunk, and the rest streams.
            RequestFlow::Hold if !call.hold => {
                call.request = RequestFlow::Stream;
                call.streamed = body_size;
                body_size
            }
            // Each chunk is moved out of the host (`Keep`): this one is new.
            RequestFlow::Stream | RequestFlow::Buffer => {
                call.streamed = call.streamed.saturating_add(body_size);
                call.streamed
            }
            // Buffered by the host: all of it so far.
            RequestFlow::Hold => {
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
            (RequestFlow::Buffer, false) => {
                // Held headers stay held only while the body callbacks pause.
                call.body_paused = call.hold;
                RequestBodyStep::Keep { pause: call.hold }
            }
            (RequestFlow::Hold, true) => {
                call.request = RequestFlow::Done;
                RequestBodyStep::Route(body_size)
            }
            (RequestFlow::Hold, false) => RequestBodyStep::Wait,
            (_, true) => {
                call.request = RequestFlow::Done;
                RequestBodyStep::Continue
            }
            (_, false) => RequestBodyStep::Continue,
        }
    }

    /// Request trailers end the body.
    pub fn on_request_trailers(&mut self) -> RequestBodyStep {
        let limits = self.limits();
        let State::Call(call) = &mut self.state else {
            return RequestBodyStep::Continue;
        };
        match call.request {
            // The host still holds the (emptied) body: the message replaces it.
            RequestFlow::Buffer if call.body_paused => RequestBodyStep::Read,
            RequestFlow::Buffer => {
                // The last chunk went on, and Envoy lets a filter write no body from
                // its trailers callback: the message cannot follow. A message that is
                // wrong anyway says so; either way nothing of it went upstream.
                let body = std::mem::take(&mut call.kept);
                let rejection = match call.canonical_request(body, limits) {
                    Err(rejection) => rejection,
                    Ok(_) => Rejection::new(
                        Code::InvalidArgument,
                        "the request body ended with trailers, which gRPC and Connect \
                         requests do not carry; this gateway forwards a rewritten \
                         request only when its body ends with its last data (nothing \
                         was executed)",
                    ),
                };
                let reply = call.client.reply(&rejection);
                self.answer(RequestBodyStep::Reply(reply))
            }
            RequestFlow::Inject => {
                call.request = RequestFlow::Done;
                RequestBodyStep::Replace(call.get_message.take().unwrap_or_default())
            }
            RequestFlow::Hold => {
                call.request = RequestFlow::Done;
                RequestBodyStep::Route(call.streamed)
            }
            RequestFlow::Stream | RequestFlow::Done => {
                call.request = RequestFlow::Done;
                RequestBodyStep::Continue
            }
        }
    }

    /// A request body chunk moved into the filter ([`RequestBodyStep::Keep`]).
    pub fn keep_request(&mut self, chunk: Vec<u8>) {
        if let State::Call(call) = &mut self.state {
            if call.kept.is_empty() {
                call.kept = chunk;
            } else {
                call.kept.extend_from_slice(&chunk);
            }
        }
    }

    /// The last of the request body (what the host holds at its end) → the canonical
    /// body of the whole (the chunks kept before, then these bytes), or an error answer.
    pub fn finish_request(&mut self, last: Vec<u8>) -> Result<Payload, Reply> {
        let limits = self.limits();
        let State::Call(call) = &mut self.state else {
            return Ok(Payload::whole(last));
        };
        call.request = RequestFlow::Done;
        let body = if call.kept.is_empty() {
            last
        } else {
            let mut body = std::mem::take(&mut call.kept);
            body.extend_from_slice(&last);
            body
        };
        match call.canonical_request(body, limits) {
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
        let affinity_on = self.settings.session_affinity;
        let State::Call(call) = &mut self.state else {
            return HeaderEdits::default();
        };
        if !std::mem::take(&mut call.hold) {
            return HeaderEdits::default();
        }
        let mut read = read;
        // A message small enough to classify is read into the VM once, and the
        // session walk, the lost-pin context and the class all use that copy.
        let whole = (len <= route_class::MAX_CLASSIFIED_BYTES)
            .then(|| read(0, len))
            .flatten()
            .filter(|message| message.len() == len);
        let mut read = |offset: usize, max: usize| match &whole {
            Some(message) => message
                .get(offset..)
                .map(|rest| rest.iter().take(max).copied().collect()),
            None => read(offset, max),
        };
        let mut edits = HeaderEdits::default();
        let holder = if affinity_on && call.rpc.carries_session {
            affinity::route(&mut read, len)
        } else {
            None
        };
        if let Some(host) = holder {
            call.pinned = true;
            if len <= lost::MAX_MESSAGE {
                call.lost = whole
                    .as_deref()
                    .and_then(|message| lost::Pinned::from_request(call.rpc.name, message));
            }
            edits.set.push((affinity::HEADER, host));
        }
        let class = match whole.as_deref() {
            Some(message) if route_class::by_statement(call.rpc.name) => {
                route_class::of_message(call.rpc.name, message)
            }
            _ => route_class::of_request(call.rpc.name, &mut read, len),
        };
        self.observed.class = class;
        edits
            .set
            .push((route_class::HEADER, class.as_str().to_owned()));
        edits
    }

    // ----- response -----

    pub fn on_response_headers(
        &mut self,
        head: &ResponseHead,
        end_of_stream: bool,
    ) -> ResponseHeadersStep {
        let settings = self.settings.clone();
        let State::Call(call) = &mut self.state else {
            // The filter's own local reply on its way out (or no call at all).
            let mut edits = HeaderEdits::default();
            if let (Some(content_type), None) = (self.reply_type.take(), &head.content_type) {
                edits.set.push(("content-type", content_type));
            }
            return ResponseHeadersStep::Forward(edits);
        };
        self.observed.target = metrics::target(head.target.as_deref());
        self.observed.code = answer_code(head, call.client);
        // No shim answered an unpinned request (pinned ones are `lost.rs`'s): Envoy
        // says whether it may have reached one.
        let unanswered = if head.shim_instance.is_none() && !call.pinned {
            lost::unanswered(self.observed.class, &head.envoy)
        } else {
            None
        };
        let web = call.client.wire.web_answer();
        let step = match unanswered {
            Some(rejection) => ResponseHeadersStep::Reply(call.client.reply(&rejection)),
            None => call.on_response_headers(head, end_of_stream, &settings),
        };
        let step = match web {
            Some(answer) => web::headers(answer, step),
            None => step,
        };
        if let ResponseHeadersStep::Reply(reply) = &step {
            self.observed.code = metrics::reply_code(reply);
            self.state = State::Answered;
        }
        step
    }

    /// Notes the code of a local reply the host sent (the call's outcome).
    pub fn note_reply(&mut self, reply: &Reply) {
        self.observed.code = metrics::reply_code(reply);
        self.reply_type = reply
            .header("content-type")
            .filter(|_| reply.body.is_empty())
            .map(str::to_owned);
    }

    /// Notes a trailer the filter added to the answer (`grpc-status` is the outcome).
    pub fn note_trailer(&mut self, name: &str, value: &str) {
        if name == "grpc-status" {
            self.observed.code = metrics::grpc_code(value);
        }
    }

    /// The labels of this exchange's metrics, once it is over (`http`: the `http`
    /// label); `None` for requests that named no served RPC.
    pub fn metric_labels(&self, http: &'static str) -> Option<metrics::Labels> {
        let o = &self.observed;
        Some(metrics::Labels {
            rpc: o.rpc?,
            protocol: o.protocol,
            codec: o.codec,
            http,
            class: o.class,
            target: if o.target.is_empty() {
                "none"
            } else {
                o.target
            },
            code: o.code,
        })
    }

    /// Records the RPC and client of the call for its metrics.
    fn observe(&mut self, rpc: &'static Rpc, client: Client, grpc_web: bool) {
        let grpc = client.name.starts_with("grpc");
        // Through Envoy's grpc_web filter, or served here.
        let grpc_web = grpc_web || client.wire.web_answer().is_some();
        self.observed.rpc = Some(rpc.name);
        self.observed.protocol = match (grpc, grpc_web) {
            (true, true) => "grpc_web",
            (true, false) => "grpc",
            (false, _) => "connect",
        };
        self.observed.codec = match client.codec {
            Codec::Json => "json",
            Codec::Proto => "proto",
        };
    }

    /// `body_size`: all response bytes buffered so far (or this chunk's, when passing
    /// or streaming).
    pub fn on_response_body(&mut self, body_size: usize, end_of_stream: bool) -> ResponseBodyStep {
        let settings = self.settings.clone();
        let State::Call(call) = &mut self.state else {
            return ResponseBodyStep::Continue;
        };
        let web = call.client.wire.web_answer();
        let step = call.on_response_body(body_size, end_of_stream, &settings);
        let step = self.web_body(web, step);
        if matches!(
            step,
            ResponseBodyStep::Reset(_) | ResponseBodyStep::Reply(_)
        ) {
            self.state = State::Answered;
        }
        step
    }

    /// Response trailers end the body (its size is then unknown: read it all).
    pub fn on_response_trailers(&mut self) -> ResponseBodyStep {
        let settings = self.settings.clone();
        let State::Call(call) = &mut self.state else {
            return ResponseBodyStep::Continue;
        };
        let web = call.client.wire.web_answer();
        let step = call.on_response_trailers(&settings);
        let step = self.web_body(web, step);
        if matches!(step, ResponseBodyStep::Reset(_)) {
            self.state = State::Answered;
        }
        step
    }

    /// The bytes a [`ResponseBodyStep::Read`] asked for → the edit that completes (or
    /// carries on) the client's answer.
    pub fn finish_response(&mut self, body: &[u8]) -> Result<ResponseEdit, Reset> {
        let settings = self.settings.clone();
        let State::Call(call) = &mut self.state else {
            return Ok(ResponseEdit::default());
        };
        let web = call.client.wire.web_answer();
        let result = call.finish_response(body, &settings);
        let result = self.web_edit(web, result);
        if result.is_err() {
            self.state = State::Answered;
        }
        result
    }

    /// A body step of a gRPC-Web answer served here ([`web`]); its status is noted
    /// first, as its trailers become body bytes.
    fn web_body(&mut self, web: Option<WebAnswer>, step: ResponseBodyStep) -> ResponseBodyStep {
        let Some(answer) = web else {
            return step;
        };
        if let ResponseBodyStep::Finish(edit) = &step {
            self.note_trailers(&edit.trailers);
        }
        web::body(answer, step)
    }

    /// The edit of a gRPC-Web answer served here ([`web`]), as [`Exchange::web_body`].
    fn web_edit(
        &mut self,
        web: Option<WebAnswer>,
        result: Result<ResponseEdit, Reset>,
    ) -> Result<ResponseEdit, Reset> {
        let Some(answer) = web else {
            return result;
        };
        let edit = result?;
        self.note_trailers(&edit.trailers);
        web::edit(answer, edit)
    }

    fn note_trailers(&mut self, trailers: &[Header]) {
        for (name, value) in trailers {
            self.note_trailer(name, value);
        }
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

    /// For a host that cannot add response trailers (Envoy 1.40's dynamic modules): a
    /// call whose answer ends with trailers the filter adds (gRPC, and gRPC-Web that
    /// Envoy's grpc_web filter translates from gRPC) is refused with this reply,
    /// `unimplemented`, instead of an answer that could not end. `None` for every other
    /// call (Connect; gRPC-Web served here, whose trailers go in the body) and before
    /// a call.
    pub fn refuse_without_trailers(&mut self, message: &str) -> Option<Reply> {
        let State::Call(call) = &self.state else {
            return None;
        };
        let grpc = call.client.name.starts_with("grpc");
        if !grpc || call.client.wire.web_answer().is_some() {
            return None;
        }
        let reply = call
            .client
            .reply(&Rejection::new(Code::Unimplemented, message));
        self.state = State::Answered;
        Some(reply)
    }

    /// Marks the exchange answered locally and returns `step`.
    fn answer<T>(&mut self, step: T) -> T {
        self.state = State::Answered;
        step
    }
}

/// The outcome an upstream answer's head shows: ok for a 200 without an error
/// `grpc-status`; otherwise the code of its status. A stream's or a converted error's
/// final code is noted later (`note_trailer`, `note_reply`).
fn answer_code(head: &ResponseHead, client: Client) -> Option<Code> {
    let status = head
        .status
        .as_deref()
        .and_then(|s| s.trim().parse::<u16>().ok())
        .unwrap_or(0);
    if let Some(grpc) = head.grpc_status.as_deref() {
        return metrics::grpc_code(grpc);
    }
    match status {
        200 => None,
        // A Connect error passed to a Connect client: its code is in the body; its
        // HTTP status names the first code Connect gives that status.
        _ if !client.wire.enveloped() => Some(
            ferry_wire::status::TABLE
                .iter()
                .find(|row| row.http == status)
                .and_then(|row| Code::from_connect_name(row.connect))
                .unwrap_or(Code::from_http_status(status)),
        ),
        _ => Some(Code::from_http_status(status)),
    }
}

impl Call {
    /// A call that has just started: identity both ways, not held, not pinned,
    /// nothing seen yet.
    fn new(rpc: &'static Rpc, client: Client, request: RequestFlow) -> Box<Call> {
        Box::new(Call {
            rpc,
            client,
            request_encoding: Encoding::Identity,
            answer_encoding: Encoding::Identity,
            envoy_encoding: None,
            near: false,
            deadline_ms: None,
            behind_web_text: false,
            replay_check: None,
            hold: false,
            response_hold: false,
            pinned: false,
            lost: None,
            request,
            streamed: 0,
            kept: Vec::new(),
            body_paused: false,
            get_message: None,
            response: ResponseFlow::Idle,
        })
    }

    /// The client's request body → the canonical body; a request in early data must
    /// also be safe to replay.
    fn canonical_request(&self, body: Vec<u8>, limits: Limits) -> Result<Payload, Rejection> {
        let payload = self.decode_request(body, limits)?;
        if let Some(check) = self.replay_check {
            check(payload.as_slice()).map_err(early_data::too_early)?;
        }
        Ok(payload)
    }

    fn decode_request(&self, body: Vec<u8>, limits: Limits) -> Result<Payload, Rejection> {
        request::canonical(
            self.rpc,
            self.client,
            self.request_encoding,
            body,
            limits.max_request_bytes,
        )
    }
}

#[cfg(test)]
mod tests;
