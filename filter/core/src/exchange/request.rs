//! The request side's pure parts: the client's body → the canonical message, and the
//! small header readings the exchange needs.

use ferry_compress::Encoding;

use super::Payload;
use crate::compression;
use crate::connect_get;
use crate::envelope::{self, COMPRESSED};
use crate::errors::{Code, Rejection};
use crate::protocol::{self, Client, Codec};
use crate::rpc::{self, Rpc};

/// The client's request body → the canonical body (the bare, uncompressed protobuf
/// message), decompressed up to `limit` bytes.
pub(super) fn canonical(
    rpc: &Rpc,
    client: Client,
    encoding: Encoding,
    body: Vec<u8>,
    limit: usize,
) -> Result<Payload, Rejection> {
    let invalid = |e: crate::codec::CodecError| {
        Rejection::new(
            Code::InvalidArgument,
            format!("invalid {} request: {e}", rpc.name),
        )
    };
    // gRPC-Web text: base64 of the framed body (no larger than what was received).
    let body = client.wire.request_body(body)?;
    let (message, compressed) = if client.wire.enveloped() {
        let protocol = if client.wire.serves(false) {
            "gRPC"
        } else {
            "Connect streaming"
        };
        let (flags, range) = envelope::single(&body, protocol)?;
        if flags & COMPRESSED != 0 && encoding == Encoding::Identity {
            return Err(Rejection::new(
                Code::Internal,
                format!(
                    "the {protocol} message is flagged compressed but the request names no encoding"
                ),
            ));
        }
        (range, flags & COMPRESSED != 0)
    } else {
        (0..body.len(), encoding != Encoding::Identity)
    };
    let payload = if compressed {
        let raw = body.get(message).unwrap_or_default();
        Payload::whole(compression::decompress(encoding, raw, limit)?)
    } else {
        Payload {
            bytes: body,
            range: message,
        }
    };
    match client.codec {
        Codec::Json => (rpc.request_from_json)(payload.as_slice())
            .map(Payload::whole)
            .map_err(invalid),
        // An enveloped proto message is checked here, where its envelope is dropped;
        // Connect unary proto is the shim's own form, which checks it.
        Codec::Proto if client.wire.enveloped() => {
            (rpc.validate_request)(payload.as_slice()).map_err(invalid)?;
            Ok(payload)
        }
        Codec::Proto => Ok(payload),
    }
}

/// A request in Connect's GET form for an RPC that serves it: the RPC, the bare path
/// and the query string. Any other GET gets the usual "needs POST".
pub(super) fn get_form(head: &super::RequestHead) -> Option<(&'static Rpc, &str, &str)> {
    if head.method.as_deref() != Some("GET") {
        return None;
    }
    let full = head.path.as_deref()?;
    let (path, query) = full.split_once('?')?;
    let rpc = rpc::lookup(path).filter(|rpc| rpc.get)?;
    connect_get::is_get_form(query).then_some((rpc, path, query))
}

pub(super) fn unsupported_media(code: Code, message: String) -> Rejection {
    Rejection::new(code, message)
        .with_http_status(415)
        .with_header("accept-post", protocol::ACCEPTED)
}

/// A unary content type for a streaming RPC, or the reverse (as connect-go answers).
pub(super) fn wrong_kind(rpc: &Rpc, client: Client) -> Rejection {
    let wanted = if rpc.streaming {
        "a server-streaming RPC: use application/connect+proto, application/connect+json or gRPC"
    } else {
        "a unary RPC: use application/proto, application/json or gRPC"
    };
    unsupported_media(
        Code::Unimplemented,
        format!("{} is {wanted}, not {}", rpc.name, client.media_type),
    )
}

/// A `grpc-timeout` value (`<1-8 digits><H|M|S|m|u|n>`) in whole milliseconds,
/// rounded up so a deadline is never shortened to zero. A value that is not one is
/// refused, as a malformed `connect-timeout-ms` is: dropping it would run the call
/// without the deadline its client set.
pub(super) fn grpc_timeout_ms(value: &str) -> Result<u64, Rejection> {
    parse_grpc_timeout(value.trim()).ok_or_else(|| {
        Rejection::new(
            Code::InvalidArgument,
            format!(
                "grpc-timeout must be 1 to 8 digits and a unit (H, M, S, m, u or n), got {:?}",
                truncated(value, 32)
            ),
        )
    })
}

fn parse_grpc_timeout(value: &str) -> Option<u64> {
    let unit = value.chars().last()?;
    let digits = value.get(..value.len().saturating_sub(1))?;
    if digits.is_empty() || digits.len() > 8 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    let nanos_per_unit: u64 = match unit {
        'H' => 3_600_000_000_000,
        'M' => 60_000_000_000,
        'S' => 1_000_000_000,
        'm' => 1_000_000,
        'u' => 1_000,
        'n' => 1,
        _ => return None,
    };
    Some(n.checked_mul(nanos_per_unit)?.div_ceil(1_000_000))
}

/// At most `max` characters of `value`, marked when cut.
fn truncated(value: &str, max: usize) -> String {
    match value.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", value.get(..at).unwrap_or_default()),
        None => value.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_timeouts() {
        let ok = |v: &str| grpc_timeout_ms(v).ok();
        assert_eq!(ok("500m"), Some(500));
        assert_eq!(ok("2S"), Some(2000));
        assert_eq!(ok("1H"), Some(3_600_000));
        assert_eq!(ok("1500u"), Some(2));
        assert_eq!(ok("1n"), Some(1));
        assert_eq!(ok("0m"), Some(0));
        assert_eq!(ok(" 5S "), Some(5000));
        for bad in ["", "m", "12", "123456789S", "1x", "-1S", "1.5S", "1é"] {
            let refused = grpc_timeout_ms(bad).err().unwrap();
            assert_eq!(refused.code, Code::InvalidArgument, "{bad}");
            assert_eq!(
                refused.message,
                format!("grpc-timeout must be 1 to 8 digits and a unit (H, M, S, m, u or n), got {bad:?}")
            );
        }
        let long = grpc_timeout_ms(&"9".repeat(100)).err().unwrap();
        assert!(
            long.message
                .ends_with(&format!("got \"{}…\"", "9".repeat(32))),
            "{}",
            long.message
        );
    }
}
