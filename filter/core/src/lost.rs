//! The answer to a pinned request whose shim Envoy could not reach (the shim holding
//! the session died or is unhealthy; strict affinity never sends it elsewhere).
//!
//! For Connect clients it is the RPC's own answer, as the shims give it for a lost pin
//! (`shim/src/statement/`): `Execute` answers HTTP 200 with `error.code = ABORTED`
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
//! A "rolled back" is true only if nothing could have committed: when Envoy says the
//! shim went away after the request may have reached it, a COMMIT (or, outside a
//! transaction, any statement but a plain read) gets `unknown` "may or may not have
//! been committed" instead, in the same shapes.
//! A pinned statement that runs past Envoy's route timeout is lost the same way: Envoy
//! answers 504 and resets the stream, the shim stops the statement and ends the pin
//! (the client went away); its messages name the timeout instead of a shim gone.

use ferry_proto::psdb::v1alpha1::{
    CloseSessionRequest, CloseSessionResponse, ExecuteRequest, ExecuteResponse, PrepareRequest,
    PrepareResponse, Session,
};
use ferry_proto::vitess::query::QueryResult;
use ferry_proto::vitess::vtgate;
use ferry_proto::vitess::vtrpc::{Code as VtCode, RpcError};
use ferry_wire::replay::replay_safe;
use ferry_wire::statement::{first_keyword, is_plain_rollback};
use prost::Message;

use crate::affinity;
use crate::errors::{Code, Rejection};
use crate::route_class::Class;

/// What Envoy says about an answer no shim gave: its `response.flags` property (Envoy
/// 1.40: the stream's response flags as a bit set, little-endian int64) and
/// `response.code_details`. Verified on 1.40: a refused connection gives flags `0x20`
/// (UF) and details `upstream_reset_before_response_started{remote_connection_failure|...}`;
/// an upstream that closed after reading the request gives `0x40` (UC) and
/// `upstream_reset_before_response_started{connection_termination}`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EnvoyAnswer {
    pub flags: u64,
    pub details: Option<String>,
}

/// Whether the request may have reached a shim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reached {
    /// Never sent: no connection, no healthy host, overflow, no route.
    No,
    /// Sent, and the connection died or timed out before an answer: the statement
    /// may or may not have run.
    Maybe,
}

/// Envoy's response flags (bit = the `CoreResponseFlag` index).
mod flag {
    pub const NO_HEALTHY_UPSTREAM: u64 = 1 << 1; // UH
    pub const UPSTREAM_TIMEOUT: u64 = 1 << 2; // UT
    pub const LOCAL_RESET: u64 = 1 << 3; // LR
    pub const UPSTREAM_REMOTE_RESET: u64 = 1 << 4; // UR
    pub const UPSTREAM_CONNECTION_FAILURE: u64 = 1 << 5; // UF
    pub const UPSTREAM_CONNECTION_TERMINATION: u64 = 1 << 6; // UC
    pub const UPSTREAM_OVERFLOW: u64 = 1 << 7; // UO
    pub const NO_ROUTE: u64 = 1 << 8; // NR
    pub const STREAM_IDLE_TIMEOUT: u64 = 1 << 16; // SI
    pub const MAX_STREAM_DURATION: u64 = 1 << 19; // UMSDR
    pub const UPSTREAM_PROTOCOL_ERROR: u64 = 1 << 23; // UPE
    pub const NO_CLUSTER: u64 = 1 << 24; // NC
    pub const MAYBE: u64 = UPSTREAM_TIMEOUT
        | LOCAL_RESET
        | UPSTREAM_REMOTE_RESET
        | UPSTREAM_CONNECTION_TERMINATION
        | STREAM_IDLE_TIMEOUT
        | MAX_STREAM_DURATION
        | UPSTREAM_PROTOCOL_ERROR;
    pub const NO: u64 = NO_HEALTHY_UPSTREAM
        | UPSTREAM_CONNECTION_FAILURE
        | UPSTREAM_OVERFLOW
        | NO_ROUTE
        | NO_CLUSTER;
}

impl EnvoyAnswer {
    /// Whether the request may have reached a shim; `None` when Envoy names no
    /// upstream failure (the answer keeps its usual mapping).
    pub fn reached(&self) -> Option<Reached> {
        if self.flags & flag::MAYBE != 0 {
            return Some(Reached::Maybe);
        }
        if self.flags & flag::NO != 0 {
            return Some(Reached::No);
        }
        let details = self.details.as_deref().unwrap_or_default();
        if details.contains("connection_failure") || details.contains("no_healthy_upstream") {
            Some(Reached::No)
        } else if details.starts_with("upstream_reset") {
            Some(Reached::Maybe)
        } else {
            None
        }
    }

    /// Envoy's route timeout ended the request (UT, `upstream_response_timeout`).
    pub fn timed_out(&self) -> bool {
        self.flags & flag::UPSTREAM_TIMEOUT != 0
            || self
                .details
                .as_deref()
                .is_some_and(|d| d.starts_with("upstream_response_timeout"))
    }

    /// Envoy's jwt_authn refused the request's token (`jwt_authn_access_denied{...}`).
    pub fn is_token_refusal(&self) -> bool {
        self.details
            .as_deref()
            .is_some_and(|d| d.starts_with("jwt_authn_access_denied"))
    }
}

/// The message of a statement whose outcome is unknown.
pub const UNKNOWN_OUTCOME: &str = "the gateway lost the database connection while this statement ran: it may or may not have been applied";
/// The message of a statement that never reached a database.
pub const NOT_APPLIED: &str =
    "the gateway could not reach the database: this statement was not applied";
/// The message of a read no database answered (after Envoy's retries).
/// The message of a pinned statement that may have committed when its shim went away.
pub const UNKNOWN_COMMIT: &str = "the shim holding this session went away while this statement ran: it may or may not have been committed; the session's connection is gone (check, then start a new transaction)";
/// The message of a pinned statement that ran past Envoy's route timeout and may have
/// committed.
pub const TIMED_OUT_COMMIT: &str = "this statement ran past the gateway's route timeout and was stopped: it may or may not have been committed; the session's connection is gone (check, then start a new transaction)";
/// The message of a pinned statement that ran past Envoy's route timeout.
pub const TIMED_OUT: &str = "transaction lost, rolled back: this statement ran past the gateway's route timeout and was stopped";
pub const READ_FAILED: &str =
    "the gateway could not get this read answered by any database (retried where safe): nothing was changed";

/// The answer to an unpinned request no shim answered, by its class: a write or a
/// session statement that may have run is `unknown` (never retried: the client must
/// check), one that never left is `unavailable` (safe to send again); a read, which
/// Envoy already retried, is `unavailable`.
pub fn unanswered(class: Class, answer: &EnvoyAnswer) -> Option<Rejection> {
    let reached = answer.reached()?;
    Some(match (class, reached) {
        (Class::Read, _) => Rejection::new(Code::Unavailable, READ_FAILED),
        (_, Reached::Maybe) => Rejection::new(Code::Unknown, UNKNOWN_OUTCOME),
        (_, Reached::No) => Rejection::new(Code::Unavailable, NOT_APPLIED),
    })
}

/// What of a pinned request the answer needs, kept from its (small) message.
#[derive(Debug, Clone, PartialEq)]
pub enum Pinned {
    Execute {
        // Boxed: a vitess session is large, and this rides in every pinned call.
        session: Option<Box<Session>>,
        plain_rollback: bool,
        /// It could make something durable: a COMMIT, or outside a transaction a
        /// statement that is not a plain read (autocommit).
        may_commit: bool,
        /// Its shim went away after it may have received it ([`Pinned::unknown`]).
        outcome_unknown: bool,
        /// Envoy's route timeout ended it ([`Pinned::timed_out`]).
        timed_out: bool,
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
                let in_transaction = r
                    .session
                    .as_ref()
                    .and_then(|s| s.vitess_session.as_ref())
                    .is_some_and(|v| v.in_transaction);
                let may_commit = if in_transaction {
                    first_keyword(&r.query) == "COMMIT"
                } else {
                    !replay_safe(&r.query)
                };
                Some(Pinned::Execute {
                    plain_rollback: is_plain_rollback(&r.query),
                    may_commit,
                    outcome_unknown: false,
                    timed_out: false,
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

    /// Envoy says the request may have reached the shim before it went away
    /// (`reached`): a statement that could have committed gets `unknown`, not
    /// "rolled back".
    pub fn unknown(&mut self, reached: Option<Reached>) {
        if let Pinned::Execute {
            may_commit: true,
            plain_rollback: false,
            outcome_unknown,
            ..
        } = self
        {
            *outcome_unknown = reached == Some(Reached::Maybe);
        }
    }

    /// The code and message of its error: `aborted` "transaction lost", or
    /// `unknown` for a statement that may have committed.
    pub fn error(&self) -> (Code, &'static str) {
        match self {
            Pinned::Execute {
                outcome_unknown: true,
                timed_out,
                ..
            } => (
                Code::Unknown,
                if *timed_out {
                    TIMED_OUT_COMMIT
                } else {
                    UNKNOWN_COMMIT
                },
            ),
            Pinned::Execute {
                timed_out: true, ..
            } => (Code::Aborted, TIMED_OUT),
            _ => (Code::Aborted, affinity::LOST),
        }
    }

    /// Envoy's route timeout ended the request (an Execute's messages say so).
    pub fn timed_out(&mut self) {
        if let Pinned::Execute { timed_out, .. } = self {
            *timed_out = true;
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
            Pinned::Execute { session, .. } => {
                let (code, message) = self.error();
                ExecuteResponse {
                    session: session.as_deref().cloned(),
                    error: Some(RpcError {
                        message: message.to_owned(),
                        // vtrpc's codes are gRPC's numbers.
                        code: code.grpc() as i32,
                    }),
                    ..Default::default()
                }
                .encode_to_vec()
            }
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

    /// A pinned Execute of `query` whose shim is lost (`reached`).
    fn pinned_with(query: &str, in_transaction: bool, reached: Option<Reached>) -> Pinned {
        let message = ExecuteRequest {
            query: query.into(),
            session: Some(Session {
                signature: vec![1, 2, 3],
                vitess_session: Some(vtgate::Session {
                    in_transaction,
                    ..Default::default()
                }),
            }),
            ..Default::default()
        }
        .encode_to_vec();
        let mut p = Pinned::from_request("Execute", &message).unwrap();
        p.unknown(reached);
        p
    }

    /// The error an Execute of `query` gets when its shim is lost (`reached`).
    fn lost_with(query: &str, in_transaction: bool, reached: Option<Reached>) -> RpcError {
        let p = pinned_with(query, in_transaction, reached);
        let r = ExecuteResponse::decode(p.answer().as_slice()).unwrap();
        assert_eq!(r.session.unwrap().signature, vec![1, 2, 3], "{query}");
        r.error.unwrap()
    }

    #[test]
    fn past_the_route_timeout_the_messages_name_it() {
        let envoy = |flags, details: &str| EnvoyAnswer {
            flags,
            details: Some(details.into()),
        };
        assert!(envoy(0x4, "upstream_response_timeout").timed_out());
        assert!(envoy(0, "upstream_response_timeout").timed_out());
        assert!(!envoy(
            0x40,
            "upstream_reset_before_response_started{connection_termination}"
        )
        .timed_out());
        for (query, in_tx, expected) in [
            ("COMMIT", true, (VtCode::Unknown, TIMED_OUT_COMMIT)),
            (
                "INSERT INTO t VALUES (1)",
                true,
                (VtCode::Aborted, TIMED_OUT),
            ),
        ] {
            let mut p = pinned_with(query, in_tx, Some(Reached::Maybe));
            p.timed_out();
            let e = ExecuteResponse::decode(p.answer().as_slice())
                .unwrap()
                .error
                .unwrap();
            assert_eq!((e.code(), e.message.as_str()), expected, "{query}");
            let code = if expected.0 == VtCode::Unknown {
                Code::Unknown
            } else {
                Code::Aborted
            };
            assert_eq!(p.error(), (code, expected.1), "{query}");
        }
        // Prepare and CloseSession keep their answers.
        let mut p = Pinned::from_request(
            "CloseSession",
            &CloseSessionRequest::default().encode_to_vec(),
        )
        .unwrap();
        p.timed_out();
        assert_eq!(p.error(), (Code::Aborted, affinity::LOST));
    }

    #[test]
    fn a_statement_that_may_have_committed_is_unknown_never_rolled_back() {
        let maybe = Some(Reached::Maybe);
        // The shim went away after the request may have reached it.
        for (query, in_tx) in [
            ("COMMIT", true),
            (" commit work", true),
            ("INSERT INTO t VALUES (1)", false), // autocommit in a session-state pin
            ("UPDATE t SET a = 1", false),
        ] {
            let e = lost_with(query, in_tx, maybe);
            assert_eq!(
                (e.code(), e.message.as_str()),
                (VtCode::Unknown, UNKNOWN_COMMIT),
                "{query}"
            );
        }
        // Inside a transaction nothing but COMMIT is durable: rolled back with it.
        for (query, in_tx, reached) in [
            ("INSERT INTO t VALUES (1)", true, maybe),
            ("SELECT 1", false, maybe),
            // Never reached the shim: nothing ran.
            ("COMMIT", true, Some(Reached::No)),
            ("COMMIT", true, None),
        ] {
            let e = lost_with(query, in_tx, reached);
            assert_eq!(
                (e.code(), e.message.as_str()),
                (VtCode::Aborted, affinity::LOST),
                "{query}"
            );
        }
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

    fn envoy(flags: u64, details: &str) -> EnvoyAnswer {
        EnvoyAnswer {
            flags,
            details: Some(details.to_owned()),
        }
    }

    #[test]
    fn unanswered_requests_by_class_and_envoys_flags() {
        // As seen on Envoy 1.40 (probe: a refused connection, a shim that read the
        // request and closed).
        let uf = envoy(0x20, "upstream_reset_before_response_started{remote_connection_failure|delayed_connect_error:_Connection_refused}");
        let uc = envoy(
            0x40,
            "upstream_reset_before_response_started{connection_termination}",
        );
        for class in [Class::Write, Class::Session] {
            let r = unanswered(class, &uc).unwrap();
            assert_eq!(
                (r.code, r.message.as_str()),
                (Code::Unknown, UNKNOWN_OUTCOME)
            );
            let r = unanswered(class, &uf).unwrap();
            assert_eq!(
                (r.code, r.message.as_str()),
                (Code::Unavailable, NOT_APPLIED)
            );
        }
        for answer in [&uf, &uc] {
            let r = unanswered(Class::Read, answer).unwrap();
            assert_eq!(
                (r.code, r.message.as_str()),
                (Code::Unavailable, READ_FAILED)
            );
        }
        // Flags alone, details alone, and both: a possible run wins.
        assert_eq!(
            EnvoyAnswer {
                flags: 0x10,
                details: None
            }
            .reached(),
            Some(Reached::Maybe)
        );
        assert_eq!(
            EnvoyAnswer {
                flags: 0x2,
                details: None
            }
            .reached(),
            Some(Reached::No)
        );
        assert_eq!(
            EnvoyAnswer {
                flags: 0x80,
                details: None
            }
            .reached(),
            Some(Reached::No)
        );
        assert_eq!(
            EnvoyAnswer {
                flags: 0x4,
                details: None
            }
            .reached(),
            Some(Reached::Maybe)
        );
        assert_eq!(
            EnvoyAnswer {
                flags: 0x20 | 0x40,
                details: None
            }
            .reached(),
            Some(Reached::Maybe)
        );
        assert_eq!(
            envoy(
                0,
                "upstream_reset_before_response_started{connection_termination}"
            )
            .reached(),
            Some(Reached::Maybe)
        );
        assert_eq!(envoy(0, "no_healthy_upstream").reached(), Some(Reached::No));
        // Nothing about the upstream: the usual mapping stays.
        assert_eq!(envoy(0, "via_upstream").reached(), None);
        assert_eq!(EnvoyAnswer::default().reached(), None);
        assert!(unanswered(Class::Write, &EnvoyAnswer::default()).is_none());
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
