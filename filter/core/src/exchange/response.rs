//! The response side of a call: how the upstream's answer goes out (from its status
//! and media type), and the unary conversions: the shim's success → the client's
//! codec, framing and compression; the shim's Connect errors, foreign answers and
//! lost pins → the client's error shape.

use ferry_compress::Encoding;

use super::framed_unary::{Declared, Fed, FramedUnary, Step};
use super::json_failure::json_failure;
use super::stream::StreamConverter;
use super::unary_stream::{Plan, UnaryStream};
use super::ResponseHeadersStep;
use super::{BodyEdit, Call, Reset, ResponseBodyStep, ResponseEdit, ResponseHead};
use crate::affinity;
use crate::compression;
use crate::config::Config;
use crate::envelope::{self, COMPRESSED, HEADER_LEN};
use crate::errors::{Code, Rejection};
use crate::http::HeaderEdits;
use crate::limits::{content_length, Limits};
use crate::lost;
use crate::protocol::{self, connect, connect_stream, Client, Codec};
use crate::rpc::Rpc;

/// How many bytes of a non-RPC error body are quoted in the error message.
pub(super) const QUOTED_BODY_BYTES: usize = 200;

pub(super) enum ResponseFlow {
    /// No response headers yet, or nothing more to do.
    Idle,
    /// The answer goes out untouched.
    Pass,
    /// The body is buffered and converted at its end; `status` is the upstream's.
    /// `overflowed`: the body outgrew the limit and is being discarded. `held`: the
    /// response headers wait for the end too (a Connect unary answer that may be
    /// compressed names its encoding in them).
    Convert {
        kind: Conversion,
        status: u16,
        overflowed: bool,
        held: bool,
    },
    /// The shim's stream, converted chunk by chunk as it arrives.
    Stream(Box<StreamConverter>),
    /// A Connect unary success sent on chunk by chunk as it arrives (converted to
    /// JSON, compressed, or as it is after its headers waited for a sample).
    Unary(Box<UnaryStream>),
    /// A unary success for an enveloped client, moved into the VM as it arrives
    /// (compressed as it comes when that pays) and framed at its end.
    Framed(Box<FramedUnary>),
    /// A declared, uncompressed proto unary success for an enveloped client: its
    /// envelope header goes in front of its first chunk, and every chunk goes on.
    Declared(Declared),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Conversion {
    /// The shim's unary success (200, `application/proto`) → the client's codec,
    /// framing and compression.
    Success,
    /// The shim's Connect error → the client's error.
    ConnectError,
    /// Any other answer → an error made from its HTTP status.
    HttpError,
    /// Envoy's own "no upstream" answer to a pinned request: the holding shim is gone.
    Lost,
}

impl Call {
    pub(super) fn on_response_headers(
        &mut self,
        head: &ResponseHead,
        end_of_stream: bool,
        settings: &Config,
    ) -> ResponseHeadersStep {
        let limits = settings.limits;
        let received = head
            .status
            .as_deref()
            .and_then(|s| s.trim().parse::<u16>().ok())
            .unwrap_or(0);
        // Envoy's jwt_authn refuses a token 401, or 403 for a token of another audience:
        // to the client, every refused token is `unauthenticated`, as a wrong password.
        let token_refused = head.envoy.is_token_refusal();
        let status = if received == 403 && token_refused {
            401
        } else {
            received
        };
        let media = head
            .content_type
            .as_deref()
            .map(protocol::media_type)
            .unwrap_or_default();
        let client = self.client;
        let declared = content_length(head.content_length.as_deref());
        // A pinned request no shim answered: Envoy's "no upstream", or Envoy naming an
        // upstream failure (a reset, its route timeout): the shim ends the pin of a
        // stream that goes away, so the transaction is lost either way.
        let lost = self.pinned
            && (affinity::is_lost(
                status,
                head.shim_instance.as_deref(),
                head.grpc_status.as_deref(),
            ) || (head.shim_instance.is_none() && head.envoy.reached().is_some()));
        if lost {
            if let Some(pinned) = self.lost.as_mut() {
                pinned.unknown(head.envoy.reached());
                if head.envoy.timed_out() {
                    pinned.timed_out();
                }
            }
        }
        let flow = match self.response_flow(status, media, declared, settings) {
            _ if lost => convert(Conversion::Lost, status, false),
            // No body will come: the buffered path answers from the headers.
            ResponseFlow::Unary(unary) if end_of_stream => {
                convert(Conversion::Success, status, unary.may_compress())
            }
            ResponseFlow::Framed(_) | ResponseFlow::Declared(_) if end_of_stream => {
                convert(Conversion::Success, status, false)
            }
            // gRPC-Web served here reads Envoy's trailers-only gRPC answers, but a gRPC
            // body would pass without its trailer frame (or its base64): foreign.
            ResponseFlow::Pass if !end_of_stream && client.wire.web_answer().is_some() => {
                convert(Conversion::HttpError, status, false)
            }
            flow => flow,
        };
        if let Some(declared) = declared {
            if let Err(rejection) = limits.check_response(declared) {
                if !lost {
                    return ResponseHeadersStep::Reply(client.reply(&rejection));
                }
            }
        }
        // Envoy's stateful_session names the upstream in this header: internal.
        let mut edits = HeaderEdits {
            set: Vec::new(),
            remove: vec![affinity::HEADER],
        };
        // Envoy's compressor compresses what it sees unless told not to: only a held
        // success is judged (in `success`), and a streamed one by its size; anything
        // else is small or an error.
        let judged = match &flow {
            ResponseFlow::Convert {
                kind: Conversion::Success,
                held,
                ..
            } => *held,
            ResponseFlow::Unary(unary) => unary.judged(),
            _ => false,
        };
        if self.envoy_encoding.is_some() && !judged {
            edits.set.push(compression::no_transform());
        }
        let (kind, held) = match &flow {
            ResponseFlow::Idle | ResponseFlow::Pass => {
                // Envoy's own trailers-only gRPC refusal of a token for another audience
                // says PERMISSION_DENIED (from its 403): UNAUTHENTICATED, as above.
                if token_refused && head.grpc_status.as_deref() == Some("7") {
                    edits.set.push(("grpc-status", "16".to_owned()));
                }
                self.response = flow;
                return ResponseHeadersStep::Forward(edits);
            }
            ResponseFlow::Stream(_) => {
                let (_, content_type) = client.wire.answer_head(client.media_type, None);
                edits.set.push(("content-type", content_type.to_owned()));
                self.name_encoding(&mut edits);
                edits.remove.push("content-length");
                self.response = flow;
                return ResponseHeadersStep::Forward(edits);
            }
            ResponseFlow::Unary(unary) => {
                let (_, content_type) = client.wire.answer_head(client.media_type, None);
                edits.set.push(("content-type", content_type.to_owned()));
                if let Some(named) = unary.named() {
                    let header = client.wire.encoding_headers().content;
                    edits.set.push((header, named.name().to_owned()));
                }
                edits.remove.push("content-length");
                let held = unary.holds();
                self.response = flow;
                return if held {
                    ResponseHeadersStep::Hold(edits)
                } else {
                    ResponseHeadersStep::Forward(edits)
                };
            }
            ResponseFlow::Convert { kind, held, .. } => (*kind, *held),
            ResponseFlow::Framed(_) | ResponseFlow::Declared(_) => (Conversion::Success, false),
        };
        let connect_lost = lost && self.lost.is_some() && !client.wire.enveloped();
        // A Connect client with the pinned request's context gets the RPC's own answer.
        let error = match kind {
            Conversion::Success => None,
            Conversion::Lost if connect_lost => None,
            Conversion::Lost => Some(self.lost.as_ref().map_or(Code::Aborted, |p| p.error().0)),
            Conversion::HttpError => Some(Code::from_http_status(status)),
            Conversion::ConnectError => Some(Code::Unknown),
        };
        let (new_status, content_type) = client.wire.answer_head(client.media_type, error);
        if new_status != received {
            edits.set.push((":status", new_status.to_string()));
        }
        edits.set.push(("content-type", content_type.to_owned()));
        edits.remove.push("content-length");
        if kind == Conversion::Success && client.wire.enveloped() {
            self.name_encoding(&mut edits);
        }
        if !end_of_stream {
            self.response = flow;
            return if held {
                ResponseHeadersStep::Hold(edits)
            } else {
                ResponseHeadersStep::Forward(edits)
            };
        }
        // Headers only: no body callback will come, so the whole answer is decided now.
        self.response = ResponseFlow::Idle;
        let converted = if kind == Conversion::Lost {
            Ok(lost_answer(self.rpc, client, self.lost.as_ref(), limits))
        } else {
            self.convert_response(kind, status, false, &[], settings)
        };
        match converted {
            Ok(edit) => headers_only(new_status, edits, edit),
            Err(Reset(message)) => {
                ResponseHeadersStep::Reply(client.reply(&Rejection::new(Code::Internal, message)))
            }
        }
    }

    /// How the answer goes out, from its status and media type.
    fn response_flow(
        &self,
        status: u16,
        media: &str,
        declared: Option<usize>,
        settings: &Config,
    ) -> ResponseFlow {
        let is = |m: &str| media.eq_ignore_ascii_case(m);
        let wire = self.client.wire;
        let shim_unary = status == 200 && is(connect::PROTO) && !self.rpc.streaming;
        let shim_stream = status == 200 && is(connect_stream::PROTO) && self.rpc.streaming;
        let connect_error = status != 200 && is(connect::JSON);
        let grpc_answer = media
            .get(..16)
            .is_some_and(|p| p.eq_ignore_ascii_case("application/grpc"));
        if shim_stream {
            return ResponseFlow::Stream(Box::new(StreamConverter::new(settings.limits)));
        }
        if shim_unary && wire.enveloped() {
            // Its length goes in front of it, yet Envoy must not buffer it (its limit
            // would reset the stream after the 200): a declared uncompressed proto
            // answer goes on chunk by chunk behind its header; anything else moves into
            // the VM as it comes and is framed at its end (framed_unary.rs).
            let proto = self.client.codec == Codec::Proto;
            let text = self.text_answer() || self.behind_web_text;
            if let (Some(len), true, false) = (declared, proto, text) {
                let uncompressed = self.answer_encoding == Encoding::Identity
                    || len < settings.compression.min_bytes;
                if uncompressed && wire.end(None).body.is_empty() {
                    return ResponseFlow::Declared(Declared::new(len));
                }
            }
            let judge = proto.then_some(self.answer_encoding);
            let mut framed = FramedUnary::new(judge);
            framed.pause = self.behind_web_text;
            return ResponseFlow::Framed(Box::new(framed));
        }
        if shim_unary {
            // Connect unary names its encoding in its headers, before the body; the
            // shim declares the size of every answer it sends whole (one without a
            // size is large: it goes out in pieces as MySQL sends it, spill.rs).
            let small = declared.is_some_and(|n| n < settings.compression.min_bytes);
            let may_compress = (self.answer_encoding != Encoding::Identity
                || self.envoy_encoding.is_some())
                && !small
                && !self.near;
            let json = self.client.codec == Codec::Json;
            if !may_compress && !json {
                return ResponseFlow::Pass;
            }
            // Only Execute's answer is transcoded as it comes (the others are small).
            if json && !self.rpc.streams_json {
                // Compressed only if its headers may wait for the whole answer.
                return convert(
                    Conversion::Success,
                    status,
                    may_compress && self.response_hold,
                );
            }
            let plan = Plan {
                json,
                filter: if may_compress {
                    self.answer_encoding
                } else {
                    Encoding::Identity
                },
                envoy: self.envoy_encoding.filter(|_| may_compress),
                encoding_header: wire.encoding_headers().content,
                sample: self.response_hold,
            };
            return ResponseFlow::Unary(Box::new(UnaryStream::new(&plan, settings)));
        }
        if connect_error && wire.speaks_connect_errors() {
            return ResponseFlow::Pass;
        }
        if connect_error {
            return convert(Conversion::ConnectError, status, false);
        }
        // Already a gRPC answer: Envoy's local replies to gRPC requests are trailers-only.
        if grpc_answer && wire.speaks_grpc() {
            return ResponseFlow::Pass;
        }
        convert(Conversion::HttpError, status, false)
    }

    /// Names the answer's message encoding in its headers (enveloped protocols: each
    /// message then says whether it is compressed).
    fn name_encoding(&self, edits: &mut HeaderEdits) {
        if self.answer_encoding != Encoding::Identity {
            let header = self.client.wire.encoding_headers().content;
            edits
                .set
                .push((header, self.answer_encoding.name().to_owned()));
        }
    }

    pub(super) fn on_response_body(
        &mut self,
        body_size: usize,
        end_of_stream: bool,
        settings: &Config,
    ) -> ResponseBodyStep {
        let limits = settings.limits;
        let client = self.client;
        let (kind, status, overflowed, held) = match &mut self.response {
            ResponseFlow::Idle | ResponseFlow::Pass => return ResponseBodyStep::Continue,
            ResponseFlow::Stream(stream) => {
                stream.at_end = end_of_stream;
                return ResponseBodyStep::Read(body_size);
            }
            ResponseFlow::Unary(unary) if unary.holds() => {
                unary.at_end = end_of_stream;
                // Its headers have not gone out: the whole answer can still change.
                if let Err(rejection) = limits.check_response(body_size) {
                    return ResponseBodyStep::Reply(client.reply(&rejection));
                }
                if body_size < settings.compression.sample_bytes && !end_of_stream {
                    return ResponseBodyStep::Wait;
                }
                return match unary.admit(body_size, limits) {
                    Ok(()) => ResponseBodyStep::Read(body_size),
                    Err(Reset(message)) => ResponseBodyStep::Reset(message),
                };
            }
            ResponseFlow::Framed(framed) => {
                // One chunk that is the whole body: answered whole as before (an
                // uncompressed proto message only gets its header prepended).
                let whole = end_of_stream && framed.is_empty();
                let overflowed = !whole && !framed.admit(body_size, limits);
                if !whole && !overflowed {
                    framed.at_end = end_of_stream;
                    return ResponseBodyStep::Read(body_size);
                }
                // Too large: the rest is discarded, and the end says so (grpc-status 8).
                self.response = ResponseFlow::Convert {
                    kind: Conversion::Success,
                    status: 200,
                    overflowed,
                    held: false,
                };
                return self.on_response_body(body_size, end_of_stream, settings);
            }
            ResponseFlow::Declared(declared) => {
                let len = declared.len();
                let header = |pause: bool, prepend: bool| match envelope::header(0, len) {
                    Some(header) => ResponseBodyStep::Finish(ResponseEdit {
                        body: if prepend {
                            BodyEdit::Prepend(header)
                        } else {
                            BodyEdit::Keep
                        },
                        pause,
                        ..ResponseEdit::default()
                    }),
                    None => ResponseBodyStep::Reset("response message is too large".into()),
                };
                return match declared.body(body_size, end_of_stream) {
                    Step::Pass { prepend } => header(false, prepend),
                    Step::Hold { prepend } => header(true, prepend),
                    Step::End => {
                        self.response = ResponseFlow::Idle;
                        let end = client.wire.end(None);
                        ResponseBodyStep::Finish(ResponseEdit {
                            body: BodyEdit::Append(end.body),
                            trailers: end.trailers,
                            ..ResponseEdit::default()
                        })
                    }
                    Step::Whole => {
                        self.response = convert(Conversion::Success, 200, false);
                        self.on_response_body(body_size, end_of_stream, settings)
                    }
                    Step::Mismatch(message) => {
                        self.response = ResponseFlow::Idle;
                        ResponseBodyStep::Reset(message)
                    }
                };
            }
            ResponseFlow::Unary(unary) => {
                unary.at_end = end_of_stream;
                return match unary.admit(body_size, limits) {
                    Ok(()) if unary.passes() => ResponseBodyStep::Continue,
                    Ok(()) => ResponseBodyStep::Read(body_size),
                    // A 200 is out; only a success body may follow, and it is too large.
                    Err(Reset(message)) => ResponseBodyStep::Reset(message),
                };
            }
            ResponseFlow::Convert {
                kind,
                status,
                overflowed,
                held,
            } => (*kind, *status, overflowed, *held),
        };
        if kind == Conversion::Lost {
            // The answer does not depend on Envoy's body: drop it, answer at its end.
            if !end_of_stream {
                return ResponseBodyStep::Discard;
            }
            self.response = ResponseFlow::Idle;
            return ResponseBodyStep::Finish(lost_answer(
                self.rpc,
                client,
                self.lost.as_ref(),
                limits,
            ));
        }
        if !*overflowed {
            if let Err(rejection) = limits.check_response(body_size) {
                if held {
                    // Its headers have not gone out: the whole answer can still change.
                    return ResponseBodyStep::Reply(client.reply(&rejection));
                }
                if kind == Conversion::Success && !client.wire.late_errors() {
                    // A 200 is out; only a success body may follow, and it is too large.
                    return ResponseBodyStep::Reset(rejection.message);
                }
                // The rest of the answer no longer depends on the body.
                *overflowed = true;
            }
        }
        if *overflowed {
            if !end_of_stream {
                return ResponseBodyStep::Discard;
            }
            self.response = ResponseFlow::Idle;
            return ResponseBodyStep::Finish(overflowed_answer(client, status, limits));
        }
        if !end_of_stream {
            return ResponseBodyStep::Wait;
        }
        if kind == Conversion::Success {
            if let Some(edit) = self.prepend_only(body_size, settings) {
                self.response = ResponseFlow::Idle;
                return ResponseBodyStep::Finish(edit);
            }
        }
        ResponseBodyStep::Read(if kind == Conversion::HttpError {
            body_size.min(QUOTED_BODY_BYTES)
        } else {
            body_size
        })
    }

    /// The answer is gRPC-Web text this filter writes: every byte base64, so nothing
    /// of the shim's body may pass as it is.
    fn text_answer(&self) -> bool {
        self.client.wire.web_answer().is_some_and(|web| web.text)
    }

    /// The success of a proto client whose answer is one uncompressed envelope with
    /// its status in trailers (gRPC; binary gRPC-Web, whose trailer frame then goes
    /// after it): only the envelope header goes in front of the shim's body, which
    /// never enters the VM. `None` when the answer needs more (gRPC-Web text: base64).
    fn prepend_only(&self, body_size: usize, settings: &Config) -> Option<ResponseEdit> {
        let client = self.client;
        let uncompressed = self.answer_encoding == Encoding::Identity
            || body_size < settings.compression.min_bytes;
        if client.codec != Codec::Proto
            || !client.wire.enveloped()
            || !uncompressed
            || self.text_answer()
        {
            return None;
        }
        let end = client.wire.end(None);
        if !end.body.is_empty() {
            return None;
        }
        Some(match envelope::header(0, body_size) {
            Some(header) => ResponseEdit {
                headers: HeaderEdits::default(),
                body: BodyEdit::Prepend(header),
                trailers: end.trailers,
                pause: false,
            },
            None => error_edit(
                client,
                Code::ResourceExhausted,
                "response message is too large",
            ),
        })
    }

    pub(super) fn on_response_trailers(&mut self, settings: &Config) -> ResponseBodyStep {
        let limits = settings.limits;
        match &mut self.response {
            ResponseFlow::Convert {
                kind: Conversion::Lost,
                ..
            } => {
                let edit = lost_answer(self.rpc, self.client, self.lost.as_ref(), limits);
                self.response = ResponseFlow::Idle;
                ResponseBodyStep::Finish(edit)
            }
            ResponseFlow::Convert {
                overflowed: true,
                status,
                ..
            } => {
                let edit = overflowed_answer(self.client, *status, limits);
                self.response = ResponseFlow::Idle;
                ResponseBodyStep::Finish(edit)
            }
            ResponseFlow::Convert { .. } => ResponseBodyStep::Read(limits.max_response_bytes),
            // The rest was held (its outcome was known): Envoy buffered the body, so
            // the end can still be written into it.
            ResponseFlow::Stream(stream) if stream.holds() => {
                stream.at_end = true;
                ResponseBodyStep::Read(limits.max_response_bytes)
            }
            // Every chunk went on already: no body is left to write into, only
            // trailers. gRPC ends there; a Connect stream's end message cannot follow
            // trailers (the shim never sends any).
            ResponseFlow::Stream(stream) => {
                stream.at_end = true;
                let edit =
                    stream.convert(&[], self.rpc, self.client, self.answer_encoding, settings);
                self.response = ResponseFlow::Idle;
                match edit.body {
                    BodyEdit::Replace(body) if body.is_empty() => ResponseBodyStep::Finish(ResponseEdit {
                        body: BodyEdit::Keep,
                        ..edit
                    }),
                    _ => ResponseBodyStep::Reset(
                        "the shim's stream ended with HTTP trailers; the client's end message cannot follow them".into(),
                    ),
                }
            }
            // Every chunk went on (emptied): the message cannot follow HTTP trailers
            // (the shim never sends any with a unary answer).
            ResponseFlow::Framed(_) => {
                self.response = ResponseFlow::Idle;
                ResponseBodyStep::Reset(
                    "the shim's answer ended with HTTP trailers; its message cannot follow them"
                        .into(),
                )
            }
            ResponseFlow::Declared(declared) => {
                let checked = declared.trailers();
                let holds = declared.holds();
                self.response = ResponseFlow::Idle;
                match checked {
                    Err(message) => ResponseBodyStep::Reset(message),
                    Ok(()) => {
                        let end = self.client.wire.end(None);
                        // A held chunk can still take the end's body (a gRPC-Web frame).
                        let body = if holds {
                            BodyEdit::Append(end.body)
                        } else {
                            BodyEdit::Keep
                        };
                        ResponseBodyStep::Finish(ResponseEdit {
                            body,
                            trailers: end.trailers,
                            ..ResponseEdit::default()
                        })
                    }
                }
            }
            // Still held: Envoy buffered the body, which is converted whole.
            ResponseFlow::Unary(unary) if unary.holds() => {
                unary.at_end = true;
                ResponseBodyStep::Read(limits.max_response_bytes)
            }
            // Every chunk went on already: the answer's end cannot follow trailers (the
            // shim never sends any with a unary answer).
            ResponseFlow::Unary(_) => ResponseBodyStep::Reset(
                "the shim's answer ended with HTTP trailers; it cannot be completed after them"
                    .into(),
            ),
            ResponseFlow::Idle | ResponseFlow::Pass => ResponseBodyStep::Continue,
        }
    }

    pub(super) fn finish_response(
        &mut self,
        body: &[u8],
        settings: &Config,
    ) -> Result<ResponseEdit, Reset> {
        match &mut self.response {
            ResponseFlow::Stream(stream) => {
                let edit =
                    stream.convert(body, self.rpc, self.client, self.answer_encoding, settings);
                if stream.at_end {
                    self.response = ResponseFlow::Idle;
                }
                Ok(edit)
            }
            // The whole answer came while its headers waited for a sample: it is
            // judged and converted whole, as any held answer.
            ResponseFlow::Unary(unary) if unary.holds() && unary.at_end => {
                self.response = ResponseFlow::Idle;
                self.success(body, true, settings)
            }
            ResponseFlow::Unary(unary) => {
                let at_end = unary.at_end;
                let converted = unary.convert(body, self.rpc, settings);
                if at_end || converted.is_err() {
                    self.response = ResponseFlow::Idle;
                } else if unary.passes() {
                    self.response = ResponseFlow::Pass;
                }
                converted
            }
            // Each chunk moves into the VM and Envoy's goes on emptied (a continued
            // callback: the end's chunk is not held against Envoy's buffer limit).
            ResponseFlow::Framed(framed) => match framed.feed(body, settings) {
                Fed::Kept => Ok(ResponseEdit {
                    pause: framed.pause,
                    ..ResponseEdit::replace(Vec::new(), Vec::new())
                }),
                Fed::Done(message) => {
                    self.response = ResponseFlow::Idle;
                    Ok(self.framed(COMPRESSED, message))
                }
                Fed::Whole { kept, refused } => {
                    self.response = ResponseFlow::Idle;
                    self.whole_message(kept, refused, settings)
                }
            },
            ResponseFlow::Declared(_) => Ok(ResponseEdit::default()),
            ResponseFlow::Convert {
                kind, status, held, ..
            } => {
                let (kind, status, held) = (*kind, *status, *held);
                self.response = ResponseFlow::Idle;
                self.convert_response(kind, status, held, body, settings)
            }
            ResponseFlow::Idle | ResponseFlow::Pass => Ok(ResponseEdit::default()),
        }
    }

    /// The body (and trailers) that complete a converted answer; `Err` when the answer
    /// cannot be completed and the stream must be reset.
    fn convert_response(
        &self,
        kind: Conversion,
        status: u16,
        held: bool,
        body: &[u8],
        settings: &Config,
    ) -> Result<ResponseEdit, Reset> {
        let client = self.client;
        match kind {
            Conversion::Success => self.success(body, held, settings),
            Conversion::ConnectError => Ok(match connect::parse_error(body) {
                Some((code, message)) => error_edit(client, code, &message),
                None => http_error(client, status, body),
            }),
            Conversion::HttpError => Ok(http_error(client, status, body)),
            Conversion::Lost => Ok(lost_answer(
                self.rpc,
                client,
                self.lost.as_ref(),
                settings.limits,
            )),
        }
    }

    /// The shim's unary success (one proto message) → the client's message: its
    /// codec, compressed if that pays, framed if enveloped, then the protocol's end.
    fn success(&self, body: &[u8], held: bool, settings: &Config) -> Result<ResponseEdit, Reset> {
        if let Some(edit) = self.prepend_only(body.len(), settings) {
            return Ok(edit);
        }
        self.success_whole(body, held, settings)
    }

    /// A whole message kept in the VM (after [`HEADER_LEN`] bytes of room) for an
    /// enveloped client: framed in place when it goes uncompressed in proto (no copy),
    /// else converted as any whole answer. `refused`: its sample did not pay.
    fn whole_message(
        &self,
        mut kept: Vec<u8>,
        refused: bool,
        settings: &Config,
    ) -> Result<ResponseEdit, Reset> {
        let message_len = kept.len().saturating_sub(HEADER_LEN);
        let uncompressed = refused
            || self.answer_encoding == Encoding::Identity
            || message_len < settings.compression.min_bytes;
        if self.client.codec != Codec::Proto || !uncompressed {
            return self.success_whole(kept.get(HEADER_LEN..).unwrap_or_default(), false, settings);
        }
        let end = self.client.wire.end(None);
        match (envelope::header(0, message_len), kept.get_mut(..HEADER_LEN)) {
            (Some(header), Some(slot)) => slot.copy_from_slice(&header),
            _ => {
                return Ok(error_edit(
                    self.client,
                    Code::ResourceExhausted,
                    "response message is too large",
                ))
            }
        }
        kept.extend_from_slice(&end.body);
        Ok(ResponseEdit::replace(kept, end.trailers))
    }

    /// [`Call::success`] for a message that is converted whatever its size (it is in
    /// the VM, or Envoy's chunk is not the whole of it).
    fn success_whole(
        &self,
        body: &[u8],
        held: bool,
        settings: &Config,
    ) -> Result<ResponseEdit, Reset> {
        let client = self.client;
        let rpc = self.rpc;
        let limits = settings.limits;
        let enveloped = client.wire.enveloped();
        // Connect unary compresses only when its headers waited to name the encoding.
        let encoding = if enveloped || held {
            self.answer_encoding
        } else {
            Encoding::Identity
        };
        let header_len = if enveloped { HEADER_LEN } else { 0 };
        // The message is written after room for its envelope header: one copy.
        let mut out = vec![0; header_len];
        match client.codec {
            Codec::Proto => out.extend_from_slice(body),
            Codec::Json => {
                let max_len = limits.max_response_bytes.saturating_add(header_len);
                if let Err(e) = (rpc.response_to_json)(body, &mut out, max_len) {
                    let (code, message) = json_failure(rpc, e, limits);
                    // gRPC and streams can still say so at their end; so can a held
                    // Connect answer; a Connect 200 that is out cannot.
                    return if held {
                        Ok(held_error(client, code, &message))
                    } else if client.wire.late_errors() {
                        Ok(error_edit(client, code, &message))
                    } else {
                        Err(Reset(message))
                    };
                }
            }
        }
        // Compressed bytes go after room for their envelope header too: whichever
        // buffer is sent gets its header written in place, with no copy.
        let mut compressed = vec![0; header_len];
        let message = out.get(header_len..).unwrap_or_default();
        let used = compression::compress(&settings.compression, encoding, message, &mut compressed);
        let mut headers = HeaderEdits::default();
        // Headers can change here only when they were held (else they are out).
        if let (Some(envoy), true) = (self.envoy_encoding, held) {
            if !settings.compression.worth(envoy, message) {
                headers.set.push(compression::no_transform());
            }
        }
        let end = client.wire.end(None);
        let body = if enveloped {
            let (flags, mut framed) = if used == Encoding::Identity {
                (0, out)
            } else {
                (COMPRESSED, compressed)
            };
            let header = envelope::header(flags, framed.len().saturating_sub(HEADER_LEN));
            match (header, framed.get_mut(..HEADER_LEN)) {
                (Some(header), Some(slot)) => slot.copy_from_slice(&header),
                _ => {
                    return Ok(error_edit(
                        client,
                        Code::ResourceExhausted,
                        "response message is too large",
                    ))
                }
            }
            framed.extend_from_slice(&end.body);
            BodyEdit::Replace(framed)
        } else if used != Encoding::Identity {
            headers.set.push((
                client.wire.encoding_headers().content,
                used.name().to_owned(),
            ));
            BodyEdit::Replace(compressed) // no envelope: no room was kept
        } else if client.codec == Codec::Proto {
            // The shim's body is the answer as it is.
            BodyEdit::Keep
        } else {
            BodyEdit::Replace(out)
        };
        Ok(ResponseEdit {
            headers,
            body,
            trailers: end.trailers,
            pause: false,
        })
    }

    /// One compressed message in the client's envelope, then the protocol's end.
    fn framed(&self, flags: u8, message: Vec<u8>) -> ResponseEdit {
        let Some(header) = envelope::header(flags, message.len()) else {
            return error_edit(
                self.client,
                Code::ResourceExhausted,
                "response message is too large",
            );
        };
        let end = self.client.wire.end(None);
        let mut body = Vec::with_capacity(HEADER_LEN + message.len() + end.body.len());
        body.extend_from_slice(&header);
        body.extend_from_slice(&message);
        body.extend_from_slice(&end.body);
        ResponseEdit::replace(body, end.trailers)
    }
}

fn convert(kind: Conversion, status: u16, held: bool) -> ResponseFlow {
    ResponseFlow::Convert {
        kind,
        status,
        overflowed: false,
        held,
    }
}

/// The end of an answer whose body outgrew the limit (and was discarded): protocols
/// with late errors say so at their end; a Connect error made from an HTTP status
/// stands, unquoted. (A Connect success never gets here: it is reset.)
fn overflowed_answer(client: Client, status: u16, limits: Limits) -> ResponseEdit {
    if client.wire.late_errors() {
        let limit = limits.max_response_bytes;
        let message = format!("response body is larger than the {limit}-byte limit");
        error_edit(client, Code::ResourceExhausted, &message)
    } else {
        http_error(client, status, b"")
    }
}

/// The answer to a pinned request whose shim Envoy could not reach ([`lost`]): for a
/// Connect unary client with the request's context, the RPC's own answer, as the
/// shims give it for a lost pin; otherwise `aborted`.
fn lost_answer(
    rpc: &Rpc,
    client: Client,
    pinned: Option<&lost::Pinned>,
    limits: Limits,
) -> ResponseEdit {
    let fallback = || {
        let (code, message) = pinned.map_or((Code::Aborted, affinity::LOST), lost::Pinned::error);
        error_edit(client, code, message)
    };
    let Some(pinned) = pinned.filter(|_| !client.wire.enveloped()) else {
        return fallback();
    };
    let message = pinned.answer();
    if client.codec == Codec::Proto {
        return ResponseEdit::replace(message, Vec::new());
    }
    let mut out = Vec::new();
    match (rpc.response_to_json)(&message, &mut out, limits.max_response_bytes) {
        Ok(_) => ResponseEdit::replace(out, Vec::new()),
        Err(_) => fallback(),
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
    let message = match (status, quoted.is_empty()) {
        // Envoy's own authentication refused it (jwt_authn: "Jwt is expired").
        (401, false) => format!("authentication failed at the gateway: {quoted}"),
        (_, true) => format!("upstream answered HTTP {status}"),
        (_, false) => format!("upstream answered HTTP {status}: {quoted}"),
    };
    error_edit(client, Code::from_http_status(status), &message)
}

/// An error answer whose headers were held: its status and content type change too.
fn held_error(client: Client, code: Code, message: &str) -> ResponseEdit {
    let (status, content_type) = client.wire.answer_head(client.media_type, Some(code));
    let mut edit = error_edit(client, code, message);
    edit.headers.set = vec![
        (":status", status.to_string()),
        ("content-type", content_type.to_owned()),
    ];
    edit
}

/// The body and trailers of an error answer whose headers are already decided.
pub(super) fn error_edit(client: Client, code: Code, message: &str) -> ResponseEdit {
    let end = client.wire.end(Some((code, message)));
    ResponseEdit::replace(end.body, end.trailers)
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
        BodyEdit::Wrap(header, end) => [header.as_slice(), &end].concat(),
        BodyEdit::Append(body) | BodyEdit::Replace(body) => body,
    };
    edits.set.extend(edit.headers.set);
    let trailers = if body.is_empty() {
        edit.trailers
    } else if edit.trailers.is_empty() {
        edits.set.retain(|(name, _)| *name != ":status");
        return ResponseHeadersStep::Reply(crate::http::Reply {
            status,
            headers: edits.set,
            body,
        });
    } else {
        let message = "the shim answered with headers only; an empty message needs a body to be framed for gRPC";
        crate::protocol::grpc::status(Some(Code::Internal), message)
    };
    edits.set.extend(trailers);
    ResponseHeadersStep::Forward(edits)
}
