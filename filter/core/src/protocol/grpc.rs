//! gRPC over HTTP/2 (grpc/doc/PROTOCOL-HTTP2.md): each message is framed with a flag
//! byte (bit 0 = compressed) and a 4-byte big-endian length; the status travels in
//! `grpc-status` / `grpc-message` trailers (or in the headers of a trailers-only
//! answer). Unary calls carry exactly one message each way.

use std::fmt::Write as _;
use std::ops::Range;

use crate::errors::{Code, Rejection};
use crate::http::{Header, Reply};

/// Length of a frame header.
pub const HEADER_LEN: usize = 5;

/// The frame header of an uncompressed message of `len` bytes (`None` above 4 GiB - 1).
pub fn frame_header(len: usize) -> Option<[u8; HEADER_LEN]> {
    let [a, b, c, d] = u32::try_from(len).ok()?.to_be_bytes();
    Some([0, a, b, c, d])
}

/// Checks that `body` is exactly one uncompressed frame; returns the message's range.
pub fn unframe(body: &[u8]) -> Result<Range<usize>, Rejection> {
    let invalid = |message: String| Err(Rejection::new(Code::InvalidArgument, message));
    let Some((&[flags, a, b, c, d], rest)) = body.split_first_chunk::<HEADER_LEN>() else {
        return if body.is_empty() {
            invalid("missing gRPC message: the request body is empty".into())
        } else {
            invalid(format!(
                "incomplete gRPC frame header: {} of 5 bytes",
                body.len()
            ))
        };
    };
    if flags & 1 != 0 {
        // The compression seam: see compression.rs.
        return Err(Rejection::new(
            Code::Unimplemented,
            "compressed gRPC messages are not supported yet",
        ));
    }
    if flags != 0 {
        return invalid(format!("invalid gRPC frame flags 0x{flags:02x}"));
    }
    let declared = u32::from_be_bytes([a, b, c, d]) as usize;
    let received = rest.len();
    if received < declared {
        return invalid(format!(
            "truncated gRPC message: the frame declares {declared} bytes, {received} arrived"
        ));
    }
    if received > declared {
        let extra = received - declared;
        return if extra >= HEADER_LEN {
            invalid("more than one message in a unary gRPC request".into())
        } else {
            invalid(format!("{extra} trailing bytes after the gRPC message"))
        };
    }
    Ok(HEADER_LEN..body.len())
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

    fn framed(message: &[u8]) -> Vec<u8> {
        let mut body = frame_header(message.len()).unwrap().to_vec();
        body.extend_from_slice(message);
        body
    }

    fn err(body: &[u8]) -> (Code, String) {
        let r = unframe(body).unwrap_err();
        (r.code, r.message)
    }

    #[test]
    fn frame_headers() {
        assert_eq!(frame_header(0), Some([0, 0, 0, 0, 0]));
        assert_eq!(frame_header(0x0102_0304), Some([0, 1, 2, 3, 4]));
    }

    #[test]
    fn unframes_one_message() {
        assert_eq!(unframe(&framed(b"abc")), Ok(5..8));
        assert_eq!(unframe(&framed(b"")), Ok(5..5));
    }

    #[test]
    fn refuses_bad_frames() {
        let inv = Code::InvalidArgument;
        assert_eq!(
            err(b""),
            (
                inv,
                "missing gRPC message: the request body is empty".into()
            )
        );
        assert_eq!(
            err(&[0, 0, 0]),
            (inv, "incomplete gRPC frame header: 3 of 5 bytes".into())
        );
        assert_eq!(
            err(&[0, 0, 0, 0, 9, 1, 2]),
            (
                inv,
                "truncated gRPC message: the frame declares 9 bytes, 2 arrived".into()
            )
        );
        assert_eq!(
            err(&[0, 0, 0, 0, 1, 1, 2]),
            (inv, "1 trailing bytes after the gRPC message".into())
        );
        let mut two = framed(b"a");
        two.extend(framed(b"b"));
        assert_eq!(
            err(&two),
            (inv, "more than one message in a unary gRPC request".into())
        );
        assert_eq!(
            err(&[2, 0, 0, 0, 0]),
            (inv, "invalid gRPC frame flags 0x02".into())
        );
        assert_eq!(err(&[1, 0, 0, 0, 0]).0, Code::Unimplemented);
    }

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
