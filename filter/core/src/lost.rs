//! The answer to a pinned request whose shim Envoy could not reach (the shim holding
//! the session died or is unhealthy; strict affinity never sends it elsewhere).
//!
//! For Connect clients it is the RPC's own answer, as the shims give it for a lost pin
//! (`shim/src/execute.rs`): `Execute` answers HTTP 200 with `error.code = ABORTED`
//! "transaction lost, rolled back: ..." and the session the client sent, so every
//! later statement of that session fails the same way, except a plain `ROLLBACK`,
//! which succeeds (the transaction is gone with its connection) and hands back a fresh,
//! unsealed session — the shims take an unsealed session as a new one. So a
//! `@planetscale/database` `transaction()` that throws and rolls back leaves its
//! connection usable (a Connect error would not update the driver's session, and its
//! ROLLBACK would go to the dead shim again, for ever). `Prepare` answers the same
//! error with the client's session, as the shims answer a Prepare of a lost pin.
//! `CloseSession` succeeds.
//! gRPC clients get status ABORTED: Envoy's local replies to gRPC requests carry no
//! body, so no message can be sent.

use ferry_proto::psdb::v1alpha1::{
    CloseSessionRequest, CloseSessionResponse, ExecuteRequest, ExecuteResponse, PrepareRequest,
    PrepareResponse, Session,
};
use ferry_proto::vitess::query::QueryResult;
use ferry_proto::vitess::vtgate;
use ferry_proto::vitess::vtrpc::{Code as VtCode, RpcError};
use ferry_wire::statement::is_plain_rollback;
use prost::Message;

use crate::affinity;

/// What of a pinned request the answer needs, kept from its (small) message.
#[derive(Debug, Clone, PartialEq)]
pub enum Pinned {
    Execute {
        // Boxed: a vitess session is large, and this rides in every pinned call.
        session: Option<Box<Session>>,
        plain_rollback: bool,
    },
    Prepare {
        session: Option<Box<Session>>,
    },
    CloseSession,
}

/// Requests larger than this keep no context: their loss is a plain error.
pub const MAX_MESSAGE: usize = 64 * 1024;

impl Pinned {
    /// From the canonical request message of `rpc` (`None` for other RPCs or a
    /// message that does not decode).
    pub fn from_request(rpc: &str, message: &[u8]) -> Option<Pinned> {
        match rpc {
            "Execute" => {
                let r = ExecuteRequest::decode(message).ok()?;
                Some(Pinned::Execute {
                    plain_rollback: is_plain_rollback(&r.query),
                    session: r.session.map(Box::new),
                })
            }
            "Prepare" => {
                let r = PrepareRequest::decode(message).ok()?;
                Some(Pinned::Prepare {
                    session: r.session.map(Box::new),
                })
            }
            "CloseSession" => {
                CloseSessionRequest::decode(message).ok()?;
                Some(Pinned::CloseSession)
            }
            _ => None,
        }
    }

    /// The canonical (protobuf) answer.
    pub fn answer(&self) -> Vec<u8> {
        match self {
            Pinned::CloseSession => CloseSessionResponse::default().encode_to_vec(),
            Pinned::Prepare { session } => PrepareResponse {
                session: session.as_deref().cloned(),
                error: Some(RpcError {
                    message: affinity::LOST.to_owned(),
                    code: VtCode::Aborted as i32,
                }),
                ..Default::default()
            }
            .encode_to_vec(),
            Pinned::Execute {
                plain_rollback: true,
                ..
            } => ExecuteResponse {
                session: Some(Session {
                    signature: Vec::new(),
                    vitess_session: Some(vtgate::Session {
                        autocommit: true,
                        ..Default::default()
                    }),
                }),
                result: Some(QueryResult::default()),
                ..Default::default()
            }
            .encode_to_vec(),
            Pinned::Execute { session, .. } => ExecuteResponse {
                session: session.as_deref().cloned(),
                error: Some(RpcError {
                    message: affinity::LOST.to_owned(),
                    code: VtCode::Aborted as i32,
                }),
                ..Default::default()
            }
            .encode_to_vec(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn execute(query: &str) -> Vec<u8> {
        ExecuteRequest {
            query: query.into(),
            session: Some(Session {
                signature: vec![1, 2, 3],
                vitess_session: Some(vtgate::Session {
                    in_transaction: true,
                    ..Default::default()
                }),
            }),
            ..Default::default()
        }
        .encode_to_vec()
    }

    #[test]
    fn a_statement_of_a_lost_transaction_fails_and_keeps_its_session() {
        let p = Pinned::from_request("Execute", &execute("INSERT INTO t VALUES (1)")).unwrap();
        let r = ExecuteResponse::decode(p.answer().as_slice()).unwrap();
        let e = r.error.unwrap();
        assert_eq!(
            (e.code(), e.message.as_str()),
            (VtCode::Aborted, affinity::LOST)
        );
        let s = r.session.unwrap();
        assert_eq!(
            s.signature,
            vec![1, 2, 3],
            "the same session: it keeps failing"
        );
        assert!(s.vitess_session.unwrap().in_transaction);
        assert!(r.result.is_none());
    }

    #[test]
    fn rollback_succeeds_with_a_fresh_session() {
        let p = Pinned::from_request("Execute", &execute("rollback")).unwrap();
        let r = ExecuteResponse::decode(p.answer().as_slice()).unwrap();
        assert!(r.error.is_none() && r.result.is_some());
        let s = r.session.unwrap();
        assert!(s.signature.is_empty(), "unsealed: the shims take it as new");
        let v = s.vitess_session.unwrap();
        assert!(v.autocommit && !v.in_transaction);
    }

    #[test]
    fn prepare_fails_and_keeps_its_session() {
        let msg = PrepareRequest {
            query: "SELECT 1".into(),
            session: Some(Session {
                signature: vec![4, 5],
                vitess_session: None,
            }),
            ..Default::default()
        }
        .encode_to_vec();
        let p = Pinned::from_request("Prepare", &msg).unwrap();
        let r = PrepareResponse::decode(p.answer().as_slice()).unwrap();
        assert_eq!(r.error.unwrap().code(), VtCode::Aborted);
        assert_eq!(r.session.unwrap().signature, vec![4, 5]);
        assert!(r.fields.is_empty() && r.params_count == 0);
    }

    #[test]
    fn close_session_succeeds_and_other_rpcs_keep_nothing() {
        let close = CloseSessionRequest::default().encode_to_vec();
        let p = Pinned::from_request("CloseSession", &close).unwrap();
        assert!(CloseSessionResponse::decode(p.answer().as_slice()).is_ok());
        assert_eq!(Pinned::from_request("CreateSession", &[]), None);
        assert_eq!(Pinned::from_request("Execute", &[0xff]), None);
    }
}
