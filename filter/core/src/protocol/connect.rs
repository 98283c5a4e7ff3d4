//! Connect unary (connectrpc.com/docs/protocol): the body is the bare message,
//! `application/json` or `application/proto`, compressed as a whole
//! (`Content-Encoding`); errors are always JSON `{"code": "...", "message": "..."}`
//! with the code's HTTP status. The JSON error shape is also Connect streaming's.

use serde_json::{Map, Value};

use super::{EncodingHeaders, End, Wire};
use crate::errors::{Code, Rejection};
use crate::http::Reply;

pub const JSON: &str = "application/json";
pub const PROTO: &str = "application/proto";

/// Connect unary.
pub struct ConnectUnary;

impl Wire for ConnectUnary {
    fn serves(&self, streaming: bool) -> bool {
        !streaming
    }

    fn encoding_headers(&self) -> EncodingHeaders {
        EncodingHeaders {
            content: "content-encoding",
            accept: "accept-encoding",
        }
    }

    fn enveloped(&self) -> bool {
        false
    }

    fn error_reply(&self, _media_type: &'static str, rejection: &Rejection) -> Reply {
        error_reply(rejection)
    }

    fn answer_head(&self, media_type: &'static str, error: Option<Code>) -> (u16, &'static str) {
        match error {
            None => (200, media_type),
            Some(code) => (code.http_status(), JSON),
        }
    }

    fn end(&self, error: Option<(Code, &str)>) -> End {
        End {
            body: error.map_or_else(Vec::new, |(code, message)| error_body(code, message)),
            trailers: Vec::new(),
        }
    }

    fn late_errors(&self) -> bool {
        false
    }

    fn speaks_connect_errors(&self) -> bool {
        true
    }
}

/// The body of a Connect error.
pub fn error_body(code: Code, message: &str) -> Vec<u8> {
    error_value(code, message).to_string().into_bytes()
}

/// A Connect error as a JSON object (also the `error` of an end-of-stream message).
pub fn error_value(code: Code, message: &str) -> Value {
    let mut body = Map::new();
    body.insert("code".into(), Value::String(code.connect_name().into()));
    if !message.is_empty() {
        body.insert("message".into(), Value::String(message.into()));
    }
    Value::Object(body)
}

/// A Connect error answer.
pub fn error_reply(rejection: &Rejection) -> Reply {
    let mut headers = vec![("content-type", JSON.to_owned())];
    headers.extend(rejection.headers.iter().cloned());
    Reply {
        status: rejection.connect_http_status(),
        headers,
        body: error_body(rejection.code, &rejection.message),
    }
}

/// Reads a Connect error body: its code (`unknown` if the name is not a code) and
/// message. `None` if the body is not a Connect error at all.
pub fn parse_error(body: &[u8]) -> Option<(Code, String)> {
    let value: Value = serde_json::from_slice(body).ok()?;
    let name = value.get("code")?.as_str()?;
    let message = value
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or_default();
    Some((
        Code::from_connect_name(name).unwrap_or(Code::Unknown),
        message.to_owned(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_bodies() {
        assert_eq!(
            error_body(Code::InvalidArgument, "bad \"x\""),
            br#"{"code":"invalid_argument","message":"bad \"x\""}"#
        );
        assert_eq!(error_body(Code::Internal, ""), br#"{"code":"internal"}"#);
    }

    #[test]
    fn error_replies_use_the_table_status_unless_overridden() {
        let r = error_reply(&Rejection::new(Code::Unauthenticated, "no"));
        assert_eq!(r.status, 401);
        assert_eq!(r.header("content-type"), Some("application/json"));
        let r = error_reply(
            &Rejection::new(Code::Unimplemented, "x")
                .with_http_status(404)
                .with_header("a", "b"),
        );
        assert_eq!(r.status, 404);
        assert_eq!(r.header("a"), Some("b"));
    }

    #[test]
    fn parses_errors() {
        assert_eq!(
            parse_error(br#"{"code":"unauthenticated","message":"bad password","details":[]}"#),
            Some((Code::Unauthenticated, "bad password".into()))
        );
        assert_eq!(
            parse_error(br#"{"code":"weird"}"#),
            Some((Code::Unknown, String::new()))
        );
        assert_eq!(parse_error(b"no healthy upstream"), None);
        assert_eq!(parse_error(br#"{"message":"x"}"#), None);
    }
}
