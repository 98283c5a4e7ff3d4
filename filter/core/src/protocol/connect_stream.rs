//! Connect streaming (connectrpc.com/docs/protocol, "Streaming RPCs"):
//! `application/connect+json` / `+proto`; every message in a 5-byte envelope (flag
//! 0x01 = compressed with `Connect-Content-Encoding`), always HTTP 200, and the
//! outcome in a last envelope (flag 0x02) holding JSON `{}` or `{"error": {...}}`.

use serde_json::{Map, Value};

use super::connect::error_value;
use super::{EncodingHeaders, End, Wire};
use crate::envelope::{self, END_STREAM};
use crate::errors::{Code, Rejection};
use crate::http::Reply;

pub const JSON: &str = "application/connect+json";
pub const PROTO: &str = "application/connect+proto";

/// Connect streaming.
pub struct ConnectStream;

impl Wire for ConnectStream {
    fn serves(&self, streaming: bool) -> bool {
        streaming
    }

    fn encoding_headers(&self) -> EncodingHeaders {
        EncodingHeaders {
            content: "connect-content-encoding",
            accept: "connect-accept-encoding",
        }
    }

    fn enveloped(&self) -> bool {
        true
    }

    /// Streams answer 200 with the error in the end-of-stream message.
    fn error_reply(&self, media_type: &'static str, rejection: &Rejection) -> Reply {
        let mut headers = vec![("content-type", media_type.to_owned())];
        headers.extend(rejection.headers.iter().cloned());
        Reply {
            status: 200,
            headers,
            body: end_of_stream(Some((rejection.code, &rejection.message))),
        }
    }

    fn answer_head(&self, media_type: &'static str, _error: Option<Code>) -> (u16, &'static str) {
        (200, media_type)
    }

    fn end(&self, error: Option<(Code, &str)>) -> End {
        End {
            body: end_of_stream(error),
            trailers: Vec::new(),
        }
    }

    fn late_errors(&self) -> bool {
        true
    }
}

/// The end-of-stream envelope.
pub fn end_of_stream(error: Option<(Code, &str)>) -> Vec<u8> {
    let mut end = Map::new();
    if let Some((code, message)) = error {
        end.insert("error".into(), error_value(code, message));
    }
    let json = Value::Object(end).to_string();
    let mut out = Vec::with_capacity(json.len().saturating_add(envelope::HEADER_LEN));
    envelope::write(END_STREAM, json.as_bytes(), &mut out);
    out
}

/// Reads an end-of-stream message: `None` for success, else its error's code (or
/// `unknown`) and message. A message that is not JSON is itself an error.
pub fn parse_end(message: &[u8]) -> Option<(Code, String)> {
    let Ok(value) = serde_json::from_slice::<Value>(message) else {
        return Some((
            Code::Internal,
            "the shim's end-of-stream message is not JSON".to_owned(),
        ));
    };
    let error = value.get("error")?;
    let code = error
        .get("code")
        .and_then(Value::as_str)
        .and_then(Code::from_connect_name)
        .unwrap_or(Code::Unknown);
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or_default();
    Some((code, message.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn end_of_stream_messages() {
        assert_eq!(end_of_stream(None), b"\x02\0\0\0\x02{}");
        let end = end_of_stream(Some((Code::Internal, "boom")));
        assert_eq!(end[0], END_STREAM);
        assert_eq!(
            &end[5..],
            br#"{"error":{"code":"internal","message":"boom"}}"#
        );
        assert_eq!(parse_end(b"{}"), None);
        assert_eq!(parse_end(br#"{"metadata":{}}"#), None);
        assert_eq!(
            parse_end(br#"{"error":{"code":"deadline_exceeded","message":"late"}}"#),
            Some((Code::DeadlineExceeded, "late".into()))
        );
        assert_eq!(
            parse_end(br#"{"error":{}}"#),
            Some((Code::Unknown, String::new()))
        );
        assert_eq!(parse_end(b"nope").map(|e| e.0), Some(Code::Internal));
    }

    #[test]
    fn errors_before_the_stream_are_200_with_an_end_message() {
        let r = ConnectStream.error_reply(PROTO, &Rejection::new(Code::Unauthenticated, "no"));
        assert_eq!(r.status, 200);
        assert_eq!(r.header("content-type"), Some(PROTO));
        assert_eq!(
            &r.body[5..],
            br#"{"error":{"code":"unauthenticated","message":"no"}}"#
        );
    }
}
