//! HTTP/3 early data (TLS 1.3 0-RTT): what may run before the handshake completes.
//!
//! Early data can be captured and replayed by an attacker, so only requests that are
//! safe to run twice may go on. Envoy 1.40 (with `enable_early_data`) adds
//! `early-data: 1` to every request that arrives before the QUIC handshake is complete;
//! clients never send it (RFC 8470), and one that does asks to be treated as early,
//! which is the safe direction: the header's presence is what counts.
//!
//! Each RPC has a [`Policy`] in its row of the RPC table (`rpc.rs`): `CreateSession`
//! changes nothing and may go on; `Execute` goes on only for one replay-safe read
//! (`ferry_wire::replay::replay_safe`) outside a transaction; everything else is
//! refused. A refused request is answered by the filter itself and its body never
//! reaches the shim, so nothing is executed: Connect gets HTTP `425 Too Early` (RFC
//! 8470: the client retries after the handshake) with code `unavailable`; gRPC, which
//! has no 425 (its HTTP status is always 200), gets `UNAVAILABLE` (14), the status
//! gRPC defines as transient and safe to retry.

use ferry_proto::psdb::v1alpha1::ExecuteRequest;
use ferry_wire::replay::replay_safe;
use prost::Message;

use crate::errors::{Code, Rejection};

/// The request header Envoy adds to a request received in early data.
pub const HEADER: &str = "early-data";

/// HTTP 425 Too Early (RFC 8470).
pub const TOO_EARLY: u16 = 425;

/// Checks a canonical (protobuf) request message: `Err` says what makes it unsafe to
/// replay.
pub type Check = fn(&[u8]) -> Result<(), &'static str>;

/// What an RPC may do when its request arrives in early data.
#[derive(Clone, Copy)]
pub enum Policy {
    /// It changes nothing: it may go on whatever its message.
    Allow,
    /// Decided from its request message.
    Inspect(Check),
    /// Never in early data; the text names what is refused.
    Refuse(&'static str),
}

impl std::fmt::Debug for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Policy::Allow => "Allow",
            Policy::Inspect(_) => "Inspect",
            Policy::Refuse(_) => "Refuse",
        })
    }
}

/// Whether a request arrived in early data, from its `early-data` header.
pub fn is_early(header: Option<&str>) -> bool {
    header.is_some()
}

/// `ExecuteBatch` in early data: what routes as a read ([`crate::route_class::of_batch`]):
/// a READ ONLY transaction or a pipeline of replay-safe reads, outside a transaction
/// and outside session state.
pub fn execute_batch(message: &[u8]) -> Result<(), &'static str> {
    match crate::route_class::of_batch(message) {
        crate::route_class::Class::Read => Ok(()),
        _ => Err("a batch that is not all plain reads (in early data only a READ ONLY transaction or a pipeline of plain reads, outside a transaction, may run)"),
    }
}

/// `Execute` in early data: one replay-safe read, outside a transaction and
/// outside session state (a session whose sealed signature says pinned).
pub fn execute(message: &[u8]) -> Result<(), &'static str> {
    let request =
        ExecuteRequest::decode(message).map_err(|_| "an Execute request that does not decode")?;
    if crate::route_class::in_transaction(request.session.as_ref()) {
        return Err("a statement inside a transaction");
    }
    if request
        .session
        .as_ref()
        .is_some_and(|s| crate::affinity::is_pinned(&s.signature))
    {
        return Err("a statement of a session that holds session state");
    }
    if !replay_safe(&request.query) {
        return Err("a statement that is not a plain read (only one read without locking, INTO, variables or functions with effects may run in early data)");
    }
    Ok(())
}

/// The refusal of a request that arrived in early data; `what` names what is refused.
pub fn too_early(what: &str) -> Rejection {
    Rejection::new(
        Code::Unavailable,
        format!(
            "{what} is not safe to replay, and it was sent as TLS early data (0-RTT); retry after the handshake completes (nothing was executed)"
        ),
    )
    .with_http_status(TOO_EARLY)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_proto::psdb::v1alpha1::Session;
    use ferry_proto::vitess::vtgate::Session as VitessSession;

    fn execute_request(query: &str, in_transaction: Option<bool>) -> Vec<u8> {
        ExecuteRequest {
            query: query.into(),
            session: in_transaction.map(|in_transaction| Session {
                signature: b"sig".to_vec(),
                vitess_session: Some(VitessSession {
                    in_transaction,
                    autocommit: true,
                    ..Default::default()
                }),
            }),
            ..Default::default()
        }
        .encode_to_vec()
    }

    #[test]
    fn a_session_holding_state_is_not_replayed() {
        // A sealed signature with the pinned flag (byte 53, see affinity.rs).
        let mut signature = vec![1u8];
        signature.extend_from_slice(&[0; 52]);
        signature.push(1);
        signature.extend_from_slice(&[0; 33]);
        let pinned = ExecuteRequest {
            query: "SELECT 1".into(),
            session: Some(Session {
                signature: signature.clone(),
                vitess_session: Some(VitessSession {
                    autocommit: true,
                    ..Default::default()
                }),
            }),
            ..Default::default()
        };
        assert_eq!(
            execute(&pinned.encode_to_vec()),
            Err("a statement of a session that holds session state")
        );
        if let Some(flag) = signature.get_mut(53) {
            *flag = 0;
        }
        let unpinned = ExecuteRequest {
            session: Some(Session {
                signature,
                vitess_session: Some(VitessSession {
                    autocommit: true,
                    ..Default::default()
                }),
            }),
            ..pinned
        };
        assert_eq!(execute(&unpinned.encode_to_vec()), Ok(()));
    }

    #[test]
    fn the_header_present_means_early() {
        assert!(is_early(Some("1")));
        assert!(is_early(Some("0")), "any value asks to be treated as early");
        assert!(is_early(Some("")));
        assert!(!is_early(None));
    }

    #[test]
    fn only_replay_safe_reads_outside_transactions_go_on() {
        assert_eq!(execute(&execute_request("SELECT 1", None)), Ok(()));
        assert_eq!(execute(&execute_request("SELECT 1", Some(false))), Ok(()));
        assert_eq!(
            execute(&execute_request("SHOW TABLES", Some(false))),
            Ok(())
        );
        assert_eq!(
            execute(&execute_request("SELECT 1", Some(true))),
            Err("a statement inside a transaction")
        );
        for write in [
            "INSERT INTO t VALUES (1)",
            "SELECT * FROM t FOR UPDATE",
            "SELECT GET_LOCK('a', 1)",
            "BEGIN",
            "",
        ] {
            let err = execute(&execute_request(write, None)).unwrap_err();
            assert!(err.contains("not a plain read"), "{write}: {err}");
        }
        assert_eq!(
            execute(&[0x12, 0x05, b'x']),
            Err("an Execute request that does not decode")
        );
        assert!(execute(&[]).is_err(), "an empty message has an empty query");
    }

    #[test]
    fn refusals_are_425_unavailable() {
        let r = too_early("CloseSession");
        assert_eq!(r.code, Code::Unavailable);
        assert_eq!(r.connect_http_status(), 425);
        assert!(r.message.starts_with("CloseSession is not safe to replay"));
        assert!(r
            .message
            .contains("sent as TLS early data (0-RTT); retry after the handshake"));
    }
}
