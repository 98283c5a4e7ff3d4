//! Client protocols: which one a request speaks (from its content type, by table) and,
//! per protocol, one type behind the [`Wire`] trait that knows how its messages are
//! framed, where its compression is named and how its errors and ends look. The
//! exchange talks to clients only through [`Client`], never by matching on a protocol.

pub mod connect;
pub mod connect_stream;
pub mod grpc;
pub mod grpc_web;

use crate::errors::{Code, Rejection};
use crate::http::{Header, Reply};

/// The message codec of a request and its answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Codec {
    Json,
    Proto,
}

/// The headers naming a message encoding: the one a message was compressed with,
/// and the ones a client accepts back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EncodingHeaders {
    pub content: &'static str,
    pub accept: &'static str,
}

/// How a client protocol completes an answer: body bytes to append and trailers.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct End {
    pub body: Vec<u8>,
    pub trailers: Vec<Header>,
}

/// What differs between client protocols.
pub trait Wire: Sync {
    /// Serves server-streaming RPCs (`true`) or unary ones (`false`).
    fn serves(&self, streaming: bool) -> bool;
    /// Where the message encoding is named.
    fn encoding_headers(&self) -> EncodingHeaders;
    /// Messages travel in 5-byte envelopes (with a per-message compression flag);
    /// otherwise the body is the message and its encoding is the body's.
    fn enveloped(&self) -> bool;
    /// A whole local error answer (nothing went out yet).
    fn error_reply(&self, media_type: &'static str, rejection: &Rejection) -> Reply;
    /// The HTTP status and content type of an answer whose outcome is `error`
    /// (`None`: success) once the filter has decided it.
    fn answer_head(&self, media_type: &'static str, error: Option<Code>) -> (u16, &'static str);
    /// The end of an answer with this outcome, after its messages.
    fn end(&self, error: Option<(Code, &str)>) -> End;
    /// An error can still be told after a success's headers went out (gRPC trailers,
    /// Connect's end-of-stream message); a Connect unary 200 cannot be taken back.
    fn late_errors(&self) -> bool;
    /// The shim's own Connect errors are already this protocol's errors.
    fn speaks_connect_errors(&self) -> bool {
        false
    }
    /// Envoy's own trailers-only gRPC answers are already this protocol's answers.
    fn speaks_grpc(&self) -> bool {
        false
    }
    /// The request body as this protocol's framing expects it (gRPC-Web text: decoded
    /// from base64); an error if it cannot be.
    fn request_body(&self, body: Vec<u8>) -> Result<Vec<u8>, Rejection> {
        Ok(body)
    }
    /// The form of this protocol that answers a request with this `accept` header, if
    /// it depends on it (gRPC-Web: a text answer); `None`: this one.
    fn answering(&self, _accept: Option<&str>) -> Option<&'static dyn Wire> {
        None
    }
    /// gRPC-Web served by this filter: the answer is gRPC's, then its trailers go into
    /// a last body frame and, for text, every body byte into base64 (`exchange/web.rs`).
    fn web_answer(&self) -> Option<grpc_web::Answer> {
        None
    }
}

/// The client of one exchange: its protocol, codec, and the media type it sent
/// (answers echo it: `application/grpc` stays `application/grpc`).
#[derive(Clone, Copy)]
pub struct Client {
    pub wire: &'static dyn Wire,
    pub codec: Codec,
    pub media_type: &'static str,
    /// The value of the `x-ferry-protocol` request header.
    pub name: &'static str,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.name, self.media_type)
    }
}

impl PartialEq for Client {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name && self.media_type == other.media_type
    }
}

impl Eq for Client {}

impl Client {
    /// A whole local error answer in this client's protocol.
    pub fn reply(&self, rejection: &Rejection) -> Reply {
        self.wire.error_reply(self.media_type, rejection)
    }

    /// The client that answers a request with this `accept` header (gRPC-Web's answer
    /// form depends on it).
    pub fn answering(self, accept: Option<&str>) -> Client {
        match self.wire.answering(accept) {
            Some(wire) => Client { wire, ..self },
            None => self,
        }
    }

    /// Connect unary with the proto codec: the shim's canonical form itself.
    pub fn is_canonical(&self) -> bool {
        self.media_type == connect::PROTO
    }
}

/// What a request's content type says about its protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Detected {
    Served(Client),
    /// A protocol Ferry knows but does not serve in this form: why (the 415's message).
    NotServed(&'static str),
    /// Missing or unknown content type.
    Unknown,
}

const fn served(
    media_type: &'static str,
    wire: &'static dyn Wire,
    codec: Codec,
    name: &'static str,
) -> (&'static str, Detected) {
    (
        media_type,
        Detected::Served(Client {
            wire,
            codec,
            media_type,
            name,
        }),
    )
}

const UNARY: &dyn Wire = &connect::ConnectUnary;
const STREAM: &dyn Wire = &connect_stream::ConnectStream;
const GRPC: &dyn Wire = &grpc::Grpc;
const GRPC_WEB: &dyn Wire = &grpc_web::BINARY_FORM;
const GRPC_WEB_TEXT: &dyn Wire = &grpc_web::TEXT_FORM;

/// Media type (content type without parameters, case-insensitive) → protocol.
pub const CONTENT_TYPES: &[(&str, Detected)] = &[
    served(connect::JSON, UNARY, Codec::Json, "connect-json"),
    served(connect::PROTO, UNARY, Codec::Proto, "connect-proto"),
    served(
        connect_stream::JSON,
        STREAM,
        Codec::Json,
        "connect-stream-json",
    ),
    served(
        connect_stream::PROTO,
        STREAM,
        Codec::Proto,
        "connect-stream-proto",
    ),
    served("application/grpc", GRPC, Codec::Proto, "grpc-proto"),
    served("application/grpc+proto", GRPC, Codec::Proto, "grpc-proto"),
    served("application/grpc+json", GRPC, Codec::Json, "grpc-json"),
    // gRPC-Web: arrives here only when Envoy's grpc_web filter did not convert it to
    // gRPC (it comes after this filter, or is absent, or the content type has
    // parameters); this filter then serves it itself (protocol/grpc_web.rs).
    served(grpc_web::BINARY, GRPC_WEB, Codec::Proto, "grpc-web-proto"),
    served(
        grpc_web::BINARY_PROTO,
        GRPC_WEB,
        Codec::Proto,
        "grpc-web-proto",
    ),
    served(
        grpc_web::TEXT,
        GRPC_WEB_TEXT,
        Codec::Proto,
        "grpc-web-text-proto",
    ),
    served(
        grpc_web::TEXT_PROTO,
        GRPC_WEB_TEXT,
        Codec::Proto,
        "grpc-web-text-proto",
    ),
    // gRPC-Web is served with protobuf only (as Envoy's grpc_web filter serves it).
    (
        "application/grpc-web+json",
        Detected::NotServed(GRPC_WEB_JSON),
    ),
    (
        "application/grpc-web-text+json",
        Detected::NotServed(GRPC_WEB_JSON),
    ),
];

const GRPC_WEB_JSON: &str = "gRPC-Web with JSON is not served: gRPC-Web is served with protobuf only, as Envoy's grpc_web filter serves it (application/grpc-web, application/grpc-web+proto, application/grpc-web-text, application/grpc-web-text+proto); use one of those, or application/grpc+json or application/json for JSON";

/// The served media types, for `accept-post` on 415 answers.
pub const ACCEPTED: &str = "application/json, application/proto, application/connect+json, application/connect+proto, application/grpc, application/grpc+proto, application/grpc+json, application/grpc-web, application/grpc-web+proto, application/grpc-web-text, application/grpc-web-text+proto";

/// The Connect unary client of a Connect GET with this codec.
pub fn connect_unary(codec: Codec) -> Client {
    let media = match codec {
        Codec::Json => connect::JSON,
        Codec::Proto => connect::PROTO,
    };
    match detect(Some(media)) {
        Detected::Served(client) => client,
        // Both media types are rows of the table above.
        Detected::NotServed(_) | Detected::Unknown => Client {
            wire: UNARY,
            codec,
            media_type: media,
            name: "connect",
        },
    }
}

/// The media type of a content type: `application/json; charset=utf-8` → `application/json`.
pub fn media_type(content_type: &str) -> &str {
    content_type
        .split_once(';')
        .map_or(content_type, |(m, _)| m)
        .trim()
}

/// Detects the protocol from a request's `content-type` header.
pub fn detect(content_type: Option<&str>) -> Detected {
    let Some(media) = content_type.map(media_type) else {
        return Detected::Unknown;
    };
    CONTENT_TYPES
        .iter()
        .find(|(m, _)| m.eq_ignore_ascii_case(media))
        .map_or(Detected::Unknown, |(_, detected)| *detected)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(ct: &str) -> Option<&'static str> {
        match detect(Some(ct)) {
            Detected::Served(c) => Some(c.name),
            _ => None,
        }
    }

    #[test]
    fn detection_table() {
        assert_eq!(name("application/json"), Some("connect-json"));
        assert_eq!(
            name("application/json; charset=utf-8"),
            Some("connect-json")
        );
        assert_eq!(
            name("Application/JSON ;charset=UTF-8"),
            Some("connect-json")
        );
        assert_eq!(name("application/proto"), Some("connect-proto"));
        assert_eq!(name("application/grpc"), Some("grpc-proto"));
        assert_eq!(name("application/grpc+proto"), Some("grpc-proto"));
        assert_eq!(name("application/grpc+json"), Some("grpc-json"));
        assert_eq!(
            name("application/connect+json"),
            Some("connect-stream-json")
        );
        assert_eq!(
            name("application/connect+proto"),
            Some("connect-stream-proto")
        );
        assert_eq!(name("application/grpc-web"), Some("grpc-web-proto"));
        assert_eq!(name("application/grpc-web+proto"), Some("grpc-web-proto"));
        assert_eq!(
            name("application/grpc-web; charset=utf-8"),
            Some("grpc-web-proto")
        );
        assert_eq!(
            name("application/grpc-web-text"),
            Some("grpc-web-text-proto")
        );
        assert_eq!(
            name("Application/gRPC-Web-Text+proto"),
            Some("grpc-web-text-proto")
        );
        assert_eq!(
            detect(Some("application/grpc-web+json")),
            Detected::NotServed(GRPC_WEB_JSON)
        );
        assert_eq!(detect(Some("text/plain")), Detected::Unknown);
        assert_eq!(detect(Some("")), Detected::Unknown);
        assert_eq!(detect(None), Detected::Unknown);
    }

    #[test]
    fn media_types_are_kept_for_echo() {
        let Detected::Served(c) = detect(Some("application/grpc+proto")) else {
            panic!()
        };
        assert_eq!(c.media_type, "application/grpc+proto");
        let Detected::Served(c) = detect(Some("APPLICATION/GRPC")) else {
            panic!()
        };
        assert_eq!(c.media_type, "application/grpc");
    }

    #[test]
    fn each_protocol_serves_its_rpc_kind() {
        let client = |ct| match detect(Some(ct)) {
            Detected::Served(c) => c,
            _ => panic!(),
        };
        assert!(client("application/json").wire.serves(false));
        assert!(!client("application/json").wire.serves(true));
        assert!(client("application/connect+proto").wire.serves(true));
        assert!(!client("application/connect+proto").wire.serves(false));
        assert!(client("application/grpc").wire.serves(true));
        assert!(client("application/grpc").wire.serves(false));
        assert!(client("application/grpc-web").wire.serves(true));
        assert!(client("application/grpc-web-text").wire.serves(false));
    }

    #[test]
    fn grpc_web_answers_as_accept_asks() {
        let client = |ct| match detect(Some(ct)) {
            Detected::Served(c) => c,
            _ => panic!(),
        };
        let answer = |c: Client| c.wire.web_answer().map(|a| (a.content_type, a.text));
        let binary = Some(("application/grpc-web+proto", false));
        let text = Some(("application/grpc-web-text+proto", true));
        assert_eq!(answer(client("application/grpc-web")), binary);
        assert_eq!(answer(client("application/grpc-web-text")), binary);
        let asking = client("application/grpc-web").answering(Some("application/grpc-web-text"));
        assert_eq!(answer(asking), text);
        assert_eq!(asking.name, "grpc-web-proto");
        assert_eq!(asking.media_type, "application/grpc-web");
        // Other protocols do not depend on accept.
        let grpc = client("application/grpc").answering(Some("application/grpc-web-text"));
        assert_eq!(answer(grpc), None);
        assert_eq!(grpc, client("application/grpc"));
    }
}
