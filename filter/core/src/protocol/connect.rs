//! Connect unary (connectrpc.com/docs/protocol): the body is the bare message,
//! `application/json` or `application/proto`; errors are always JSON
//! `{"code": "...", "message": "..."}` with the code's HTTP status.

use serde_json::{Map, Value};

use crate::errors::{Code, Rejection};
use crate::http::Reply;

pub const JSON: &str = "application/json";
pub const PROTO: &str = "application/proto";

/// The body of a Connect error.
pub fn error_body(code: Code, message: &str) -> Vec<u8> {
    let mut body = Map::new();
    body.insert("code".into(), Value::String(code.connect_name().into()));
    if !message.is_empty() {
        body.insert("message".into(), Value::String(message.into()));
    }
    Value::Object(body).to_string().into_bytes()
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
