//! gRPC over HTTP/2 (grpc/doc/PROTOCOL-HTTP2.md): each message in a 5-byte envelope
//! (flag bit 0 = compressed with `grpc-encoding`); the status travels in
//! `grpc-status` / `grpc-message` trailers (or in the headers of a trailers-only
//! answer). Unary calls carry one message each way; server streams many back.

use std::fmt::Write as _;

use super::{EncodingHeaders, End, Wire};
use crate::errors::{Code, Rejection};
use crate::http::{Header, Reply};

/// gRPC.
pub struct Grpc;

impl Wire for Grpc {
    fn serves(&self, _streaming: bool) -> bool {
        true
    }

    fn encoding_headers(&self) -> EncodingHeaders {
        EncodingHeaders {
            content: "grpc-encoding",
            accept: "grpc-accept-encoding",
        }
    }

    fn enveloped(&self) -> bool {
        true
    }

    fn error_reply(&self, media_type: &'static str, rejection: &Rejection) -> Reply {
        error_reply(media_type, rejection)
    }

    fn answer_head(&self, media_type: &'static str, _error: Option<Code>) -> (u16, &'static str) {
        (200, media_type)
    }

    fn end(&self, error: Option<(Code, &str)>) -> End {
        let (code, message) = match error {
            Some((code, message)) => (Some(code), message),
            None => (None, ""),
        };
        End {
            body: Vec::new(),
            trailers: status(code, message),
        }
    }

    fn late_errors(&self) -> bool {
        true
    }

    fn speaks_grpc(&self) -> bool {
        true
    }
}

/// Percent-encodes a `grpc-message` value: bytes outside printable ASCII, and `%`.
pub fn percent_encode(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    for &b in message.as_bytes() {
        if (0x20..=0x7e).contains(&b) && b != b'%' {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}"); // writing to a String cannot fail
        }
    }
    out
}

/// `grpc-status` (and `grpc-message` if there is one) for a status.
pub fn status(code: Option<Code>, message: &str) -> Vec<Header> {
    let mut headers = vec![("grpc-status", code.map_or(0, Code::grpc).to_string())];
    if !message.is_empty() {
        headers.push(("grpc-message", percent_encode(message)));
    }
    headers
}

/// A trailers-only gRPC error answer: HTTP 200, no body, the status in the headers.
pub fn error_reply(media_type: &str, rejection: &Rejection) -> Reply {
    let mut headers = vec![("content-type", media_type.to_owned())];
    headers.extend(status(Some(rejection.code), &rejection.message));
    headers.extend(rejection.headers.iter().cloned());
    Reply {
        status: 200,
        headers,
        body: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_encoding() {
        assert_eq!(percent_encode("plain text: ok"), "plain text: ok");
        assert_eq!(percent_encode("100%"), "100%25");
        assert_eq!(percent_encode("line\nbreak"), "line%0Abreak");
        assert_eq!(percent_encode("naïve"), "na%C3%AFve");
    }

    #[test]
    fn trailers_only_errors() {
        let r = error_reply(
            "application/grpc+json",
            &Rejection::new(Code::Unauthenticated, "no 100%"),
        );
        assert_eq!(r.status, 200);
        assert!(r.body.is_empty());
        assert_eq!(r.header("content-type"), Some("application/grpc+json"));
        assert_eq!(r.header("grpc-status"), Some("16"));
        assert_eq!(r.header("grpc-message"), Some("no 100%25"));
        assert_eq!(status(None, ""), vec![("grpc-status", "0".to_owned())]);
    }
}
