//! Connect's GET form of a unary call (connectrpc.com/docs/protocol, "Unary-Get-Request"):
//! `GET {path}?connect=v1&encoding=json|proto&message=…[&base64=1][&compression=…]`,
//! no body. HTTP/3 clients that send only GET in 0-RTT (quic-go, browsers) get
//! one-round-trip reads this way.
//!
//! Served for `Execute` only (the `get` column of `rpc.rs`) and only for what may run
//! twice: one replay-safe read outside a transaction (the early-data check,
//! [`crate::early_data::execute`]), whether or not it arrived in early data. A write
//! via GET is refused with 405 and `allow: POST`, as connect-go refuses GET for a
//! method with side effects, and nothing is executed.
//!
//! The shim speaks one canonical form (POST, `application/proto`, the message as the
//! body), so the filter turns the GET into it: `:method` POST, the bare path, the
//! decoded (and, for JSON, converted) message as the body. A proxy-wasm filter cannot
//! give a body to a request that arrived without one (Envoy 1.40 answers `set_buffer`
//! with `BadArgument` while there is no body buffer), so Envoy's Lua filter, placed
//! before this one in the shipped configs, opens an empty body for these GETs
//! (`request_handle:body(true)`); the filter fills it in its body callback. Without
//! that Lua filter the GET arrives headers-only and is refused with a clear error.
//! The Lua script runs only on the route for `GET …/Execute` (it costs ~25 µs of Envoy
//! CPU a request); the POST the filter makes is then routed like any other.

use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use base64::Engine;

use ferry_compress::Encoding;

use crate::compression;
use crate::errors::{Code, Rejection};
use crate::limits::Limits;
use crate::protocol::Codec;

/// URL-safe base64, padding optional (`base64=1`).
const URL_SAFE: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::URL_SAFE,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// The query parameters that make a GET a Connect GET (any one of them).
const FORM_PARAMS: &[&str] = &["connect", "encoding", "message"];

/// Whether a GET's query string asks for Connect's GET form: it names `connect`,
/// `encoding` or `message`. Any other GET keeps the plain "needs POST" answer.
pub fn is_get_form(query: &str) -> bool {
    query.split('&').any(|pair| {
        let key = pair.split_once('=').map_or(pair, |(k, _)| k);
        percent_decode(key.as_bytes())
            .is_ok_and(|k| FORM_PARAMS.iter().any(|p| p.as_bytes() == k.as_slice()))
    })
}

/// A parsed Connect GET: the message's codec and its bytes (decoded from the query,
/// not yet converted to the canonical protobuf).
#[derive(Debug, PartialEq, Eq)]
pub struct GetRequest {
    pub codec: Codec,
    pub message: Vec<u8>,
}

/// Parses the query string of a Connect GET. Checked in this order: duplicates and
/// `connect`, `encoding`, `compression`, `base64`, `message` (decoding, then the
/// request limit on the decoded message). Unknown parameters are ignored.
pub fn parse(query: &str, limits: &Limits) -> Result<GetRequest, Rejection> {
    let mut connect = None;
    let mut encoding = None;
    let mut message = None;
    let mut base64 = None;
    let mut compression = None;
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (raw_key, raw_value) = pair.split_once('=').unwrap_or((pair, ""));
        let key = percent_decode(raw_key.as_bytes())?;
        let slot = match key.as_slice() {
            b"connect" => &mut connect,
            b"encoding" => &mut encoding,
            b"message" => &mut message,
            b"base64" => &mut base64,
            b"compression" => &mut compression,
            _ => continue,
        };
        if slot.is_some() {
            return Err(invalid(format!(
                "query parameter {:?} appears more than once",
                String::from_utf8_lossy(&key)
            )));
        }
        *slot = Some(percent_decode(raw_value.as_bytes())?);
    }
    if let Some(version) = connect {
        if version != b"v1" {
            return Err(invalid(format!(
                "unsupported Connect protocol version {:?} (connect=v1)",
                String::from_utf8_lossy(&version)
            )));
        }
    }
    let codec = match encoding.as_deref() {
        Some(b"json") => Codec::Json,
        Some(b"proto") => Codec::Proto,
        Some(other) => {
            return Err(Rejection::new(
                Code::InvalidArgument,
                format!(
                    "unsupported encoding {:?} (json or proto)",
                    String::from_utf8_lossy(other)
                ),
            )
            .with_http_status(415))
        }
        None => {
            return Err(invalid(
                "missing query parameter \"encoding\" (json or proto)",
            ))
        }
    };
    let compression = compression.map(|c| String::from_utf8_lossy(&c).into_owned());
    let encoding = compression::request_encoding("compression", compression.as_deref())?;
    let base64 = match base64.as_deref() {
        None | Some(b"0") => false,
        Some(b"1") => true,
        Some(other) => {
            return Err(invalid(format!(
                "invalid base64 parameter {:?} (1 or 0)",
                String::from_utf8_lossy(other)
            )))
        }
    };
    let Some(message) = message else {
        return Err(invalid("missing query parameter \"message\""));
    };
    let message = if base64 {
        URL_SAFE
            .decode(&message)
            .map_err(|e| invalid(format!("message is not URL-safe base64: {e}")))?
    } else {
        message
    };
    limits.check_request(message.len())?;
    let message = if encoding == Encoding::Identity {
        message
    } else {
        compression::decompress(encoding, &message, limits.max_request_bytes)?
    };
    Ok(GetRequest { codec, message })
}

/// Percent-decoding of a query component; `+` is a space (form encoding, as Go's
/// `url.QueryEscape` in connect-go writes it).
fn percent_decode(input: &[u8]) -> Result<Vec<u8>, Rejection> {
    let mut out = Vec::with_capacity(input.len());
    let mut bytes = input.iter();
    while let Some(&b) = bytes.next() {
        match b {
            b'%' => {
                let hi = bytes.next().and_then(|&h| hex(h));
                let lo = bytes.next().and_then(|&l| hex(l));
                match (hi, lo) {
                    (Some(hi), Some(lo)) => out.push(hi << 4 | lo),
                    _ => return Err(invalid("invalid percent-encoding in the query string")),
                }
            }
            b'+' => out.push(b' '),
            _ => out.push(b),
        }
    }
    Ok(out)
}

fn hex(digit: u8) -> Option<u8> {
    char::from(digit)
        .to_digit(16)
        .and_then(|d| u8::try_from(d).ok())
}

fn invalid(message: impl Into<String>) -> Rejection {
    Rejection::new(Code::InvalidArgument, message)
}

/// A request the GET form does not serve (another RPC, or a statement that is not a
/// replay-safe read): 405 with `allow: POST`, as connect-go answers GET for a method
/// with side effects.
pub fn use_post(message: impl Into<String>) -> Rejection {
    Rejection::new(Code::Unimplemented, message)
        .with_http_status(405)
        .with_header("allow", "POST")
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_proto::psdb::v1alpha1::ExecuteRequest;
    use prost::Message;

    fn limits() -> Limits {
        Limits {
            max_request_bytes: 100,
            max_response_bytes: 100,
        }
    }

    fn ok(query: &str) -> GetRequest {
        parse(query, &limits()).unwrap()
    }

    fn err(query: &str) -> (Code, u16, String) {
        let r = parse(query, &limits()).unwrap_err();
        (r.code, r.connect_http_status(), r.message)
    }

    #[test]
    fn detects_the_get_form() {
        assert!(is_get_form("connect=v1&encoding=json&message=%7B%7D"));
        assert!(is_get_form("message=x"));
        assert!(is_get_form("encoding"));
        assert!(is_get_form("%65ncoding=json"), "keys are percent-decoded");
        assert!(!is_get_form(""));
        assert!(!is_get_form("x=1&y=2"));
        assert!(!is_get_form("messages=1"));
    }

    #[test]
    fn json_percent_encoded() {
        let r = ok("connect=v1&encoding=json&message=%7B%22query%22%3A%22SELECT+1%22%7D");
        assert_eq!(r.codec, Codec::Json);
        assert_eq!(r.message, br#"{"query":"SELECT 1"}"#);
        // `connect` is optional, unknown parameters are ignored, `%2B` is a plus.
        let r = ok("encoding=json&x=y&message=%7B%22query%22%3A%221%2B1%22%7D&");
        assert_eq!(r.message, br#"{"query":"1+1"}"#);
        assert_eq!(ok("encoding=json&message=%7b%7d").message, b"{}");
    }

    #[test]
    fn proto_base64_url_safe_padding_optional() {
        let message = ExecuteRequest {
            query: "SELECT 1 -- ~~~~??>>".into(),
            ..Default::default()
        }
        .encode_to_vec();
        let unpadded = URL_SAFE.encode(&message).trim_end_matches('=').to_owned();
        let padded = base64::engine::general_purpose::URL_SAFE.encode(&message);
        assert_ne!(unpadded, padded, "the test message needs padding");
        for encoded in [&unpadded, &padded, &padded.replace('=', "%3D")] {
            let r = ok(&format!(
                "connect=v1&encoding=proto&base64=1&message={encoded}"
            ));
            assert_eq!(r.codec, Codec::Proto);
            assert_eq!(r.message, message);
        }
        let (code, status, msg) = err("encoding=proto&base64=1&message=a+b");
        assert_eq!((code, status), (Code::InvalidArgument, 400));
        assert!(msg.starts_with("message is not URL-safe base64"), "{msg}");
        // Standard base64's `/` is not URL-safe.
        assert!(parse("encoding=proto&base64=1&message=ab/c", &limits()).is_err());
        // Raw proto bytes, percent-encoded, without base64.
        assert_eq!(
            ok("encoding=proto&base64=0&message=%0A%01x").message,
            b"\n\x01x"
        );
        assert_eq!(ok("encoding=proto&message=").message, b"");
    }

    #[test]
    fn errors() {
        assert_eq!(
            err("connect=v1&message=%7B%7D"),
            (
                Code::InvalidArgument,
                400,
                "missing query parameter \"encoding\" (json or proto)".into()
            )
        );
        assert_eq!(
            err("connect=v1&encoding=json"),
            (
                Code::InvalidArgument,
                400,
                "missing query parameter \"message\"".into()
            )
        );
        let (code, status, msg) = err("encoding=xml&message=x");
        assert_eq!((code, status), (Code::InvalidArgument, 415));
        assert!(msg.contains("\"xml\" (json or proto)"), "{msg}");
        let (code, _, msg) = err("connect=v2&encoding=json&message=x");
        assert_eq!(code, Code::InvalidArgument);
        assert!(msg.contains("\"v2\""), "{msg}");
        let (code, _, msg) = err("encoding=json&message=1&message=2");
        assert_eq!(code, Code::InvalidArgument);
        assert!(msg.contains("\"message\" appears more than once"), "{msg}");
        let (code, _, msg) = err("encoding=json&message=%7");
        assert_eq!(code, Code::InvalidArgument);
        assert!(msg.contains("percent-encoding"), "{msg}");
        assert!(parse("encoding=json&message=%zz", &limits()).is_err());
        let (code, _, msg) = err("encoding=json&base64=yes&message=x");
        assert_eq!(code, Code::InvalidArgument);
        assert!(msg.contains("base64"), "{msg}");
    }

    #[test]
    fn compressed_messages() {
        assert_eq!(
            ok("encoding=json&compression=identity&message=x").message,
            b"x"
        );
        assert_eq!(ok("encoding=json&compression=&message=x").message, b"x");
        let mut gz = Vec::new();
        ferry_compress::compress(Encoding::Gzip, br#"{"query":"SELECT 1"}"#, &mut gz);
        let b64 = URL_SAFE.encode(&gz);
        let r = ok(&format!(
            "encoding=json&compression=gzip&base64=1&message={b64}"
        ));
        assert_eq!(r.message, br#"{"query":"SELECT 1"}"#);
        let (code, status, msg) = err("encoding=json&compression=br&message=x");
        assert_eq!((code, status), (Code::Unimplemented, 501));
        assert_eq!(
            msg,
            "compression \"br\" is not supported (supported: identity, gzip, zstd, snappy, s2)"
        );
        let (code, _, _) = err("encoding=json&compression=gzip&message=x");
        assert_eq!(code, Code::InvalidArgument);
    }

    #[test]
    fn the_request_limit_applies_to_the_decoded_message() {
        let at_limit = "a".repeat(100);
        assert_eq!(
            ok(&format!("encoding=json&message={at_limit}"))
                .message
                .len(),
            100
        );
        // 100 decoded bytes from 300 characters of query: within the limit.
        let encoded = "%61".repeat(100);
        assert_eq!(
            ok(&format!("encoding=json&message={encoded}"))
                .message
                .len(),
            100
        );
        let over = URL_SAFE.encode([0u8; 101]);
        let (code, status, _) = err(&format!("encoding=proto&base64=1&message={over}"));
        assert_eq!((code, status), (Code::ResourceExhausted, 429));
    }

    #[test]
    fn use_post_is_405() {
        let r = use_post("x");
        assert_eq!(r.code, Code::Unimplemented);
        assert_eq!(r.connect_http_status(), 405);
        assert_eq!(r.headers, vec![("allow", "POST".to_owned())]);
    }
}
