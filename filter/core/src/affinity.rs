//! Session affinity: every request of a pinned session must reach the shim that holds
//! its MySQL connection, while unpinned requests balance across the shims.
//!
//! The session travels in the request body, so the filter learns it before the router
//! picks an upstream: for the RPCs that carry a session it holds the request headers
//! (Envoy's wasm option `allow_on_headers_stop_iteration`) until the body is complete,
//! reads `session.signature`, and, when the session is pinned, sets
//! `x-ferry-host: base64("ip:port")` of the holding shim. Envoy's `stateful_session`
//! filter (header-based session state, `strict: true`) then sends the request to that
//! cluster member, or answers 503 if it is gone; it never picks another host, and it
//! picks only cluster members. The routing is Envoy's; this file only decides.
//!
//! The signature (`shim/src/sessions/seal.rs`) is version (1) = 1 ‖ key id (4) ‖ session id
//! (16) ‖ shim instance (8) ‖ credential tag (16) ‖ issued-at (8) ‖ flags (1, bit 0:
//! pinned) ‖ holder length (1) ‖ holder ‖ MAC (32). The filter reads the flags and the
//! holder without verifying the MAC: the shim verifies it, and a forged holder can only
//! misroute the forger's own request, which the other shim refuses.
//!
//! The session is read from the canonical (protobuf) request without copying the body
//! into the VM: the top-level fields are walked through small windows read at offsets,
//! and only the session field's bytes are read whole (a large `query` is skipped).
//! Every occurrence of the field is kept, as protobuf merges repeated occurrences of a
//! message field.

use base64::Engine;
use ferry_proto::psdb::v1alpha1::Session;
use prost::Message;

/// The request header `stateful_session` reads (and, on responses, writes).
pub const HEADER: &str = "x-ferry-host";

/// The response header every shim answer carries (the shim process's id).
pub const SHIM_INSTANCE: &str = "ferry-shim-instance";

/// The answer to a pinned request whose shim Envoy could not reach.
pub const LOST: &str =
    "transaction lost, rolled back: the shim holding this session is unavailable";

/// The protobuf field number of `session` in the requests that carry one
/// (`ExecuteRequest`, `CloseSessionRequest`, `PrepareRequest`).
pub const SESSION_FIELD: u32 = 1;

const SIGNATURE_VERSION: u8 = 1;
const FLAGS_AT: usize = 1 + 4 + 16 + 8 + 16 + 8;
const HOLDER_LEN_AT: usize = FLAGS_AT + 1;
const HOLDER_AT: usize = HOLDER_LEN_AT + 1;
const MAC_LEN: usize = 32;
const FLAG_PINNED: u8 = 1;

/// Bytes read per window while walking field headers.
const WINDOW: usize = 256;
/// More session bytes than this is not a session the shim issued: no affinity.
const MAX_SESSION_BYTES: usize = 64 * 1024;
/// Top-level fields walked at most (bind variables are one field each).
const MAX_FIELDS: usize = 1_000_000;

/// The `x-ferry-host` value for a request message of `len` bytes, read with
/// `read(offset, max)` (up to `max` bytes at `offset`; fewer only at the end): `Some`
/// only for a pinned session with a holder.
pub fn route(read: impl FnMut(usize, usize) -> Option<Vec<u8>>, len: usize) -> Option<String> {
    let session = session(read, len)?;
    pinned_holder(&session.signature).map(header_value)
}

/// The request's session (field 1), read as [`route`] reads it: `None` when there is
/// none or it does not decode.
pub fn session(read: impl FnMut(usize, usize) -> Option<Vec<u8>>, len: usize) -> Option<Session> {
    let session = session_bytes(read, len, SESSION_FIELD)?;
    Session::decode(session.as_slice()).ok()
}

#[cfg(test)]
/// [`route`] for a message already in memory.
pub fn route_slice(message: &[u8]) -> Option<String> {
    route(
        |offset, max| {
            let end = offset.saturating_add(max).min(message.len());
            message.get(offset..end).map(<[u8]>::to_vec)
        },
        message.len(),
    )
}

/// `base64(holder)`, standard alphabet with padding: what Envoy's header-based
/// session state decodes (and writes, `Envoy::Base64::encode`).
pub fn header_value(holder: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(holder)
}

/// Whether the signature says the session holds a pinned connection (an open
/// transaction or session state). Unverified: the shim checks the seal.
pub fn is_pinned(signature: &[u8]) -> bool {
    signature.first() == Some(&SIGNATURE_VERSION)
        && signature
            .get(FLAGS_AT)
            .is_some_and(|flags| flags & FLAG_PINNED != 0)
}

/// The holder's address if the signature says the session is pinned.
pub fn pinned_holder(signature: &[u8]) -> Option<&str> {
    if !is_pinned(signature) {
        return None;
    }
    let len = usize::from(*signature.get(HOLDER_LEN_AT)?);
    let end = HOLDER_AT.checked_add(len)?;
    if len == 0 || signature.len() < end.checked_add(MAC_LEN)? {
        return None;
    }
    let holder = std::str::from_utf8(signature.get(HOLDER_AT..end)?).ok()?;
    holder
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b".:[]-_%".contains(&b))
        .then_some(holder)
}

/// Whether an answer to a pinned request is Envoy's own "no upstream" (the holder is
/// gone, unhealthy or unreachable): it did not come from a shim (every shim answer
/// names its instance) and is a 503, or a gRPC `UNAVAILABLE` Envoy made itself.
pub fn is_lost(status: u16, shim_instance: Option<&str>, grpc_status: Option<&str>) -> bool {
    shim_instance.is_none() && (status == 503 || grpc_status.map(str::trim) == Some("14"))
}

/// Every occurrence of length-delimited field `field` of the message, concatenated
/// (protobuf's merge of a repeated message field); `None` when there is none, the
/// message does not parse, or it is larger than a session can be.
fn session_bytes(
    read: impl FnMut(usize, usize) -> Option<Vec<u8>>,
    len: usize,
    field: u32,
) -> Option<Vec<u8>> {
    let mut reader = Reader {
        read,
        len,
        start: 0,
        window: Vec::new(),
    };
    let mut found: Option<Vec<u8>> = None;
    let mut pos = 0;
    let mut fields = 0;
    while pos < len {
        fields += 1;
        if fields > MAX_FIELDS {
            return None;
        }
        let key = reader.varint(&mut pos)?;
        let number = key >> 3;
        if number == 0 {
            return None;
        }
        match key & 7 {
            0 => {
                reader.varint(&mut pos)?;
            }
            1 => pos = pos.checked_add(8)?,
            5 => pos = pos.checked_add(4)?,
            2 => {
                let n = usize::try_from(reader.varint(&mut pos)?).ok()?;
                let end = pos.checked_add(n)?;
                if end > len {
                    return None;
                }
                if number == u64::from(field) {
                    let have = found.as_ref().map_or(0, Vec::len);
                    if have.checked_add(n)? > MAX_SESSION_BYTES {
                        return None;
                    }
                    let bytes = reader.exact(pos, n)?;
                    found.get_or_insert_with(Vec::new).extend_from_slice(&bytes);
                }
                pos = end;
            }
            // Groups (3, 4) are not in these messages; anything else is not protobuf.
            _ => return None,
        }
    }
    if pos != len {
        return None;
    }
    found
}

/// Reads the message through windows, so walking field headers reads few bytes.
struct Reader<F> {
    read: F,
    len: usize,
    /// Offset of `window` in the message.
    start: usize,
    window: Vec<u8>,
}

impl<F: FnMut(usize, usize) -> Option<Vec<u8>>> Reader<F> {
    fn byte(&mut self, pos: usize) -> Option<u8> {
        if pos >= self.len {
            return None;
        }
        let in_window = pos
            .checked_sub(self.start)
            .and_then(|i| self.window.get(i).copied());
        if let Some(b) = in_window {
            return Some(b);
        }
        self.window = (self.read)(pos, WINDOW.min(self.len - pos))?;
        self.start = pos;
        self.window.first().copied()
    }

    /// One varint at `pos` (decoded by prost), advancing `pos` past it.
    fn varint(&mut self, pos: &mut usize) -> Option<u64> {
        // A varint is at most 10 bytes; gather them from the windows.
        let mut bytes = [0u8; 10];
        let mut n = 0;
        for slot in bytes.iter_mut() {
            let Some(b) = self.byte(pos.checked_add(n)?) else {
                break;
            };
            *slot = b;
            n += 1;
            if b & 0x80 == 0 {
                break;
            }
        }
        let mut buf = bytes.get(..n)?;
        let before = buf.len();
        let value = prost::encoding::decode_varint(&mut buf).ok()?;
        *pos = pos.checked_add(before - buf.len())?;
        Some(value)
    }

    fn exact(&mut self, pos: usize, n: usize) -> Option<Vec<u8>> {
        if n == 0 {
            return Some(Vec::new());
        }
        let bytes = (self.read)(pos, n)?;
        (bytes.len() == n).then_some(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_proto::psdb::v1alpha1::{CloseSessionRequest, ExecuteRequest};
    use ferry_proto::vitess::query::BindVariable;
    use ferry_proto::vitess::vtgate::Session as VitessSession;

    fn signature(pinned: bool, holder: &str) -> Vec<u8> {
        let mut sig = vec![SIGNATURE_VERSION];
        sig.extend_from_slice(&[7; 4 + 16 + 8 + 16 + 8]);
        sig.push(if pinned { FLAG_PINNED } else { 0 });
        sig.push(holder.len() as u8);
        sig.extend_from_slice(holder.as_bytes());
        sig.extend_from_slice(&[9; MAC_LEN]);
        sig
    }

    fn session(pinned: bool, holder: &str) -> Session {
        Session {
            signature: signature(pinned, holder),
            vitess_session: Some(VitessSession {
                in_transaction: pinned,
                ..Default::default()
            }),
        }
    }

    fn execute(session: Option<Session>, query: &str) -> Vec<u8> {
        ExecuteRequest {
            session,
            query: query.into(),
            ..Default::default()
        }
        .encode_to_vec()
    }

    #[test]
    fn the_base64_is_envoys() {
        // Seen on Envoy 1.40: stateful_session wrote this for 127.0.0.1:18081.
        assert_eq!(header_value("127.0.0.1:18081"), "MTI3LjAuMC4xOjE4MDgx");
        assert_eq!(header_value("127.0.0.1:8082"), "MTI3LjAuMC4xOjgwODI=");
    }

    #[test]
    fn a_pinned_session_routes_to_its_holder() {
        let m = execute(Some(session(true, "127.0.0.1:18083")), "SELECT 1");
        assert_eq!(
            route_slice(&m).as_deref(),
            Some(header_value("127.0.0.1:18083").as_str())
        );
        let close = CloseSessionRequest {
            session: Some(session(true, "[::1]:8081")),
        }
        .encode_to_vec();
        assert_eq!(route_slice(&close), Some(header_value("[::1]:8081")));
    }

    #[test]
    fn unpinned_or_sessionless_requests_balance() {
        assert_eq!(
            route_slice(&execute(Some(session(false, "127.0.0.1:1")), "x")),
            None
        );
        assert_eq!(route_slice(&execute(None, "SELECT 1")), None);
        assert_eq!(route_slice(&[]), None);
        let no_signature = Session {
            signature: Vec::new(),
            vitess_session: None,
        };
        assert_eq!(route_slice(&execute(Some(no_signature), "x")), None);
    }

    #[test]
    fn malformed_signatures_give_no_route() {
        let good = signature(true, "127.0.0.1:1");
        assert_eq!(pinned_holder(&good), Some("127.0.0.1:1"));
        let mut other_version = good.clone();
        other_version[0] = 2;
        assert_eq!(pinned_holder(&other_version), None);
        // No room for the MAC after the holder.
        assert_eq!(pinned_holder(&good[..good.len() - 1]), None);
        assert_eq!(pinned_holder(&good[..HOLDER_AT]), None);
        assert_eq!(pinned_holder(&[]), None);
        assert_eq!(pinned_holder(&signature(true, "")), None);
        for bad in ["a b:1", "x\r\ny:1", "é:1", "a/b"] {
            assert_eq!(pinned_holder(&signature(true, bad)), None, "{bad:?}");
        }
        let mut bad_len = good.clone();
        bad_len[HOLDER_LEN_AT] = 255;
        assert_eq!(pinned_holder(&bad_len), None);
    }

    #[test]
    fn the_session_is_found_after_other_fields_and_merged() {
        // query, bind variables, then the session: a field order prost does not write
        // but any protobuf encoder may.
        let mut m = ExecuteRequest {
            query: "SELECT ".to_owned() + &"x".repeat(100_000),
            bind_variables: (0..50)
                .map(|i| (format!("v{i}"), BindVariable::default()))
                .collect(),
            prepared: true,
            ..Default::default()
        }
        .encode_to_vec();
        m.extend(
            ExecuteRequest {
                session: Some(session(true, "10.0.0.1:8081")),
                ..Default::default()
            }
            .encode_to_vec(),
        );
        assert_eq!(route_slice(&m), Some(header_value("10.0.0.1:8081")));
        // A later occurrence's signature wins (protobuf merge), as in the shim.
        m.extend(
            ExecuteRequest {
                session: Some(session(true, "10.0.0.2:8081")),
                ..Default::default()
            }
            .encode_to_vec(),
        );
        assert_eq!(route_slice(&m), Some(header_value("10.0.0.2:8081")));
    }

    #[test]
    fn a_large_query_is_skipped_not_read() {
        let m = execute(Some(session(true, "127.0.0.1:1")), &"y".repeat(1 << 20));
        let mut read_bytes = 0;
        let got = route(
            |offset, max| {
                let end = (offset + max).min(m.len());
                read_bytes += end - offset;
                Some(m[offset..end].to_vec())
            },
            m.len(),
        );
        assert_eq!(got, Some(header_value("127.0.0.1:1")));
        assert!(read_bytes < 4 * WINDOW, "read {read_bytes} bytes");
    }

    #[test]
    fn broken_messages_give_no_route() {
        let m = execute(Some(session(true, "127.0.0.1:1")), "SELECT 1");
        assert_eq!(route_slice(&m[..m.len() - 1]), None, "truncated");
        assert_eq!(route_slice(&[0x0a, 0xff]), None, "length past the end");
        assert_eq!(route_slice(&[0x03]), None, "group");
        assert_eq!(route_slice(&[0x00, 0x00]), None, "field 0");
        assert_eq!(
            route_slice(&[0x0a, 0x02, 0xff, 0xff]),
            None,
            "not a Session"
        );
        assert_eq!(route_slice(&[0x08; 11]), None, "varint too long");
        // A host that cannot read gives no route (and no panic).
        assert_eq!(route(|_, _| None, m.len()), None);
        assert_eq!(route(|_, _| Some(Vec::new()), m.len()), None);
        // An oversized session is not one the shim issued.
        let mut big = session(true, "127.0.0.1:1");
        big.vitess_session = Some(VitessSession {
            session_uuid: "u".repeat(MAX_SESSION_BYTES),
            ..Default::default()
        });
        assert_eq!(route_slice(&execute(Some(big), "x")), None);
    }

    #[test]
    fn envoys_own_503_is_a_lost_session_and_a_shims_answer_is_not() {
        assert!(is_lost(503, None, None));
        assert!(is_lost(200, None, Some("14")));
        assert!(!is_lost(503, Some("0123456789abcdef"), None));
        assert!(!is_lost(200, Some("0123456789abcdef"), Some("14")));
        assert!(!is_lost(504, None, None));
        assert!(!is_lost(200, None, None));
        assert!(!is_lost(200, None, Some("13")));
    }
}
