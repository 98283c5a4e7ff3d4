//! Client protocols: which one a request speaks (from its content type, by table) and,
//! per protocol, how its messages are framed and its errors shaped.

pub mod connect;
pub mod grpc;

use crate::errors::Rejection;
use crate::http::Reply;

/// A served client protocol: wire family × message codec.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    ConnectJson,
    ConnectProto,
    GrpcProto,
    GrpcJson,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// Connect unary: the body is the message; errors are JSON with an HTTP status.
    Connect,
    /// gRPC: the body is one 5-byte-framed message; the status is in trailers.
    Grpc,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Codec {
    Json,
    Proto,
}

impl Protocol {
    pub fn family(self) -> Family {
        match self {
            Protocol::ConnectJson | Protocol::ConnectProto => Family::Connect,
            Protocol::GrpcProto | Protocol::GrpcJson => Family::Grpc,
        }
    }

    pub fn codec(self) -> Codec {
        match self {
            Protocol::ConnectJson | Protocol::GrpcJson => Codec::Json,
            Protocol::ConnectProto | Protocol::GrpcProto => Codec::Proto,
        }
    }

    /// The value of the `x-ferry-protocol` request header.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::ConnectJson => "connect-json",
            Protocol::ConnectProto => "connect-proto",
            Protocol::GrpcProto => "grpc-proto",
            Protocol::GrpcJson => "grpc-json",
        }
    }
}

/// The client of one exchange: its protocol and the media type it sent (gRPC answers
/// echo it: `application/grpc` stays `application/grpc`, `+proto` stays `+proto`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Client {
    pub protocol: Protocol,
    pub media_type: &'static str,
}

impl Client {
    /// An error answer in this client's protocol.
    pub fn reply(&self, rejection: &Rejection) -> Reply {
        match self.protocol.family() {
            Family::Connect => connect::error_reply(rejection),
            Family::Grpc => grpc::error_reply(self.media_type, rejection),
        }
    }
}

/// What a request's content type says about its protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Detected {
    Served(Client),
    /// A protocol Ferry knows but does not serve yet.
    NotServed(&'static str),
    /// Missing or unknown content type.
    Unknown,
}

const fn served(media_type: &'static str, protocol: Protocol) -> (&'static str, Detected) {
    (
        media_type,
        Detected::Served(Client {
            protocol,
            media_type,
        }),
    )
}

/// Media type (content type without parameters, case-insensitive) → protocol.
pub const CONTENT_TYPES: &[(&str, Detected)] = &[
    served(connect::JSON, Protocol::ConnectJson),
    served(connect::PROTO, Protocol::ConnectProto),
    served("application/grpc", Protocol::GrpcProto),
    served("application/grpc+proto", Protocol::GrpcProto),
    served("application/grpc+json", Protocol::GrpcJson),
    (
        "application/connect+json",
        Detected::NotServed("Connect streaming"),
    ),
    (
        "application/connect+proto",
        Detected::NotServed("Connect streaming"),
    ),
    ("application/grpc-web", Detected::NotServed("gRPC-Web")),
    (
        "application/grpc-web+proto",
        Detected::NotServed("gRPC-Web"),
    ),
    ("application/grpc-web+json", Detected::NotServed("gRPC-Web")),
    ("application/grpc-web-text", Detected::NotServed("gRPC-Web")),
    (
        "application/grpc-web-text+proto",
        Detected::NotServed("gRPC-Web"),
    ),
];

/// The served media types, for `accept-post` on 415 answers.
pub const ACCEPTED: &str =
    "application/json, application/proto, application/grpc, application/grpc+proto, application/grpc+json";

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

    fn protocol(ct: &str) -> Option<Protocol> {
        match detect(Some(ct)) {
            Detected::Served(c) => Some(c.protocol),
            _ => None,
        }
    }

    #[test]
    fn detection_table() {
        assert_eq!(protocol("application/json"), Some(Protocol::ConnectJson));
        assert_eq!(
            protocol("application/json; charset=utf-8"),
            Some(Protocol::ConnectJson)
        );
        assert_eq!(
            protocol("Application/JSON ;charset=UTF-8"),
            Some(Protocol::ConnectJson)
        );
        assert_eq!(protocol("application/proto"), Some(Protocol::ConnectProto));
        assert_eq!(protocol("application/grpc"), Some(Protocol::GrpcProto));
        assert_eq!(
            protocol("application/grpc+proto"),
            Some(Protocol::GrpcProto)
        );
        assert_eq!(protocol("application/grpc+json"), Some(Protocol::GrpcJson));
        assert_eq!(
            detect(Some("application/grpc-web+proto")),
            Detected::NotServed("gRPC-Web")
        );
        assert_eq!(
            detect(Some("application/connect+json")),
            Detected::NotServed("Connect streaming")
        );
        assert_eq!(detect(Some("text/plain")), Detected::Unknown);
        assert_eq!(detect(Some("")), Detected::Unknown);
        assert_eq!(detect(None), Detected::Unknown);
    }

    #[test]
    fn grpc_media_type_is_kept_for_echo() {
        let Detected::Served(c) = detect(Some("application/grpc+proto")) else {
            panic!()
        };
        assert_eq!(c.media_type, "application/grpc+proto");
        let Detected::Served(c) = detect(Some("APPLICATION/GRPC")) else {
            panic!()
        };
        assert_eq!(c.media_type, "application/grpc");
    }
}
