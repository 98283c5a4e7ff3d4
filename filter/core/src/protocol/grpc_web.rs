//! gRPC-Web (grpc/doc/PROTOCOL-WEB.md), served by this filter itself when Envoy's
//! `grpc_web` filter did not turn the request into gRPC first: it comes after this
//! filter (Istio and Envoy Gateway place Wasm filters first) or is absent. A request
//! with a gRPC-Web content type only reaches this filter unconverted.
//!
//! The call is gRPC's (the same 5-byte frames, `grpc-encoding`, the statuses), with
//! Envoy's filter's differences on the wire, which this filter mirrors:
//! - `application/grpc-web-text[+proto]` requests are base64 of the framed body
//!   ([`text`]); `application/grpc-web[+proto]` are the framed body itself;
//! - the answer is `application/grpc-web-text+proto` (every body byte in base64) when
//!   the request's `accept` is exactly `application/grpc-web-text` or
//!   `application/grpc-web-text+proto`, else `application/grpc-web+proto`;
//! - the status never travels in HTTP trailers: it is a last body frame (flag `0x80`)
//!   of `name:value\r\n` lines ([`trailer_frame`]), added by the exchange where gRPC
//!   adds trailers. A trailers-only answer (the status in the headers, no body) stays
//!   one: gRPC-Web clients read it.

pub mod text;

use super::{EncodingHeaders, End, Wire};
use crate::envelope;
use crate::errors::{Code, Rejection};
use crate::http::{Header, Reply};

use super::grpc;

/// The flag of the frame that carries the trailers.
pub const TRAILER: u8 = 0x80;

pub const BINARY: &str = "application/grpc-web";
pub const BINARY_PROTO: &str = "application/grpc-web+proto";
pub const TEXT: &str = "application/grpc-web-text";
pub const TEXT_PROTO: &str = "application/grpc-web-text+proto";

/// gRPC-Web, in one of its four forms: request and answer each binary or base64 text.
pub struct GrpcWeb {
    text_request: bool,
    text_answer: bool,
}

/// How a gRPC-Web answer leaves the filter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Answer {
    /// Its content type.
    pub content_type: &'static str,
    /// Every body byte in base64.
    pub text: bool,
}

/// Binary both ways (`application/grpc-web[+proto]` without a text `accept`).
pub const BINARY_FORM: GrpcWeb = GrpcWeb {
    text_request: false,
    text_answer: false,
};
/// A binary request asking for a text answer.
const BINARY_TO_TEXT: GrpcWeb = GrpcWeb {
    text_request: false,
    text_answer: true,
};
/// A text request (`application/grpc-web-text[+proto]`) without a text `accept`.
pub const TEXT_FORM: GrpcWeb = GrpcWeb {
    text_request: true,
    text_answer: false,
};
/// Text both ways.
const TEXT_TO_TEXT: GrpcWeb = GrpcWeb {
    text_request: true,
    text_answer: true,
};

impl GrpcWeb {
    fn answer(&self) -> Answer {
        Answer {
            content_type: if self.text_answer {
                TEXT_PROTO
            } else {
                BINARY_PROTO
            },
            text: self.text_answer,
        }
    }
}

/// Whether an `accept` header asks for a text answer: exactly one of the two text
/// media types, as Envoy's grpc_web filter decides.
pub fn asks_text(accept: Option<&str>) -> bool {
    accept.is_some_and(|a| a == TEXT || a == TEXT_PROTO)
}

impl Wire for GrpcWeb {
    fn serves(&self, _streaming: bool) -> bool {
        true
    }

    fn encoding_headers(&self) -> EncodingHeaders {
        grpc::Grpc.encoding_headers()
    }

    fn enveloped(&self) -> bool {
        true
    }

    fn error_reply(&self, _media_type: &'static str, rejection: &Rejection) -> Reply {
        grpc::error_reply(self.answer().content_type, rejection)
    }

    fn answer_head(&self, _media_type: &'static str, _error: Option<Code>) -> (u16, &'static str) {
        (200, self.answer().content_type)
    }

    /// gRPC's trailers: the exchange moves them into the trailer frame.
    fn end(&self, error: Option<(Code, &str)>) -> End {
        grpc::Grpc.end(error)
    }

    fn late_errors(&self) -> bool {
        true
    }

    fn speaks_grpc(&self) -> bool {
        true
    }

    fn request_body(&self, body: Vec<u8>) -> Result<Vec<u8>, Rejection> {
        if !self.text_request {
            return Ok(body);
        }
        text::decode(&body).map_err(|e| {
            Rejection::new(
                Code::InvalidArgument,
                format!("invalid gRPC-Web text request: the body is not base64 ({e})"),
            )
        })
    }

    fn answering(&self, accept: Option<&str>) -> Option<&'static dyn Wire> {
        let form: &'static GrpcWeb = match (self.text_request, asks_text(accept)) {
            (false, false) => &BINARY_FORM,
            (false, true) => &BINARY_TO_TEXT,
            (true, false) => &TEXT_FORM,
            (true, true) => &TEXT_TO_TEXT,
        };
        Some(form)
    }

    fn web_answer(&self) -> Option<Answer> {
        Some(self.answer())
    }
}

/// The trailer frame: flag `0x80`, then `name:value\r\n` per trailer (names lowercase,
/// `grpc-message` percent-encoded already), as Envoy's grpc_web filter writes it.
pub fn trailer_frame(trailers: &[Header]) -> Vec<u8> {
    let mut block = String::new();
    for (name, value) in trailers {
        block.push_str(name);
        block.push(':');
        block.push_str(value);
        block.push_str("\r\n");
    }
    let mut frame = Vec::with_capacity(envelope::HEADER_LEN + block.len());
    // A trailer block is far below the 4 GiB an envelope can declare.
    envelope::write(TRAILER, block.as_bytes(), &mut frame);
    frame
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_answer_form_follows_accept_exactly() {
        let form = |wire: &'static GrpcWeb, accept| {
            wire.answering(accept)
                .and_then(|w| w.web_answer())
                .map(|a| (a.content_type, a.text))
        };
        for wire in [&BINARY_FORM, &TEXT_FORM] {
            assert_eq!(form(wire, None), Some((BINARY_PROTO, false)));
            assert_eq!(
                form(wire, Some("application/grpc-web-text")),
                Some((TEXT_PROTO, true))
            );
            assert_eq!(
                form(wire, Some("application/grpc-web-text+proto")),
                Some((TEXT_PROTO, true))
            );
            // Envoy compares the whole header value.
            for other in [
                "application/grpc-web",
                "application/grpc-web-text, */*",
                "Application/grpc-web-text",
                "*/*",
            ] {
                assert_eq!(
                    form(wire, Some(other)),
                    Some((BINARY_PROTO, false)),
                    "{other}"
                );
            }
        }
    }

    #[test]
    fn trailer_frames() {
        let frame = trailer_frame(&grpc::status(Some(Code::NotFound), "no 100%\n"));
        assert_eq!(frame[0], TRAILER);
        let block = b"grpc-status:5\r\ngrpc-message:no 100%25%0A\r\n";
        assert_eq!(&frame[1..5], &(block.len() as u32).to_be_bytes());
        assert_eq!(&frame[5..], block);
        assert_eq!(
            trailer_frame(&grpc::status(None, "")),
            b"\x80\0\0\0\x0fgrpc-status:0\r\n"
        );
    }

    #[test]
    fn errors_before_the_answer_are_trailers_only_in_the_answer_type() {
        let wire = TEXT_FORM.answering(Some(TEXT)).unwrap();
        let r = wire.error_reply(TEXT, &Rejection::new(Code::Unauthenticated, "no"));
        assert_eq!(r.status, 200);
        assert!(r.body.is_empty());
        assert_eq!(r.header("content-type"), Some(TEXT_PROTO));
        assert_eq!(r.header("grpc-status"), Some("16"));
        assert_eq!(r.header("grpc-message"), Some("no"));
        let r = BINARY_FORM.error_reply(BINARY, &Rejection::new(Code::Internal, "x"));
        assert_eq!(r.header("content-type"), Some(BINARY_PROTO));
    }

    #[test]
    fn text_requests_are_decoded_and_binary_ones_kept() {
        assert_eq!(
            BINARY_FORM.request_body(b"AAAA".to_vec()),
            Ok(b"AAAA".to_vec())
        );
        assert_eq!(
            TEXT_FORM.request_body(b"AAAAAAU=".to_vec()),
            Ok(vec![0, 0, 0, 0, 5])
        );
        let e = TEXT_FORM.request_body(b"AAAA!".to_vec()).unwrap_err();
        assert_eq!(e.code, Code::InvalidArgument);
        assert!(
            e.message.starts_with("invalid gRPC-Web text request"),
            "{}",
            e.message
        );
    }
}
