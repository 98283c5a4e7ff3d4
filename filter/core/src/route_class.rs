//! Statement classes for routing: the filter names each psdb request's class in the
//! `x-ferry-class` request header, before Envoy's router picks a route, and Envoy
//! routes on it (reads may go to replicas and be retried; everything else goes to the
//! primary, never retried). The filter decides; Envoy acts.
//!
//! - `read`: `Execute`/`StreamExecute` of one replay-safe read
//!   ([`ferry_wire::replay::replay_safe`]: one read statement, no locks, no user
//!   variables, no side effects) in a session that is neither in a transaction
//!   (`Session.in_transaction`, or autocommit off: its statements open one) nor
//!   pinned (the signature's pinned flag, `affinity.rs`).
//! - `session`: a request of a pinned session or one in a transaction, or a statement
//!   that starts one or sets session state ([`ferry_wire::statement::classify`] is not
//!   `Clean`: the shim would pin or reset for it).
//! - `ExecuteBatch` (Ferry's own): a PIPELINE batch is the most demanding class of its
//!   statements (`session` over `write` over `read`); a TRANSACTION batch begins and
//!   ends its transaction in the request, so it is `read` only when it is `READ ONLY`
//!   and every statement is a replay-safe read, `session` in a pinned session or one in
//!   a transaction (the shim refuses it there), else `write`.
//! - `write`: everything else, and every other RPC (`CreateSession`, `CloseSession`,
//!   `Prepare`): the primary, no retry. A message that does not decode is `write` too
//!   (the shim answers its error; it must not be retried).
//!
//! The rules are ferry-wire's, shared with the shim; nothing here reads SQL itself.

use ferry_proto::ferry::v1alpha1::{BatchMode, ExecuteBatchRequest};
use ferry_proto::psdb::v1alpha1::{ExecuteRequest, Session};
use ferry_wire::replay::replay_safe;
use ferry_wire::statement::{classify, Verdict};
use prost::Message;

use crate::affinity;

/// The request header Envoy's routes match.
pub const HEADER: &str = "x-ferry-class";

/// Messages larger than this are classified from their session only (`session` or
/// `write`): a read that large is not worth copying into the VM to prove it is one.
pub const MAX_CLASSIFIED_BYTES: usize = 1 << 20;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Class {
    Read,
    #[default]
    Write,
    Session,
}

impl Class {
    /// The header value (and metric label).
    pub const fn as_str(self) -> &'static str {
        match self {
            Class::Read => "read",
            Class::Write => "write",
            Class::Session => "session",
        }
    }
}

/// Whether the RPC named `rpc` is classified from its statements (the others are
/// always `write`).
pub fn by_statement(rpc: &str) -> bool {
    matches!(rpc, "Execute" | "StreamExecute" | "ExecuteBatch")
}

/// The class of RPC `rpc`'s canonical (protobuf) request message.
pub fn of_message(rpc: &str, message: &[u8]) -> Class {
    match rpc {
        "ExecuteBatch" => of_batch(message),
        _ => of_execute(message),
    }
}

/// The class of a canonical `ExecuteBatchRequest`.
pub fn of_batch(message: &[u8]) -> Class {
    let Ok(request) = ExecuteBatchRequest::decode(message) else {
        return Class::Write;
    };
    let (in_transaction, pinned) = session_state(request.session.as_ref());
    // A session in a transaction or pinned: its shim, whatever the batch (the shim refuses
    // a TRANSACTION batch there). An empty batch is the shim's to refuse: never retried.
    if in_transaction || pinned {
        return Class::Session;
    }
    if request.statements.is_empty() {
        return Class::Write;
    }
    let mut classes = request
        .statements
        .iter()
        .map(|s| of_statement(&s.query, false, false));
    if request.mode == BatchMode::Pipeline as i32 {
        // The most demanding: Session > Write > Read.
        return classes.fold(Class::Read, |most, c| match (most, c) {
            (Class::Session, _) | (_, Class::Session) => Class::Session,
            (Class::Write, _) | (_, Class::Write) => Class::Write,
            _ => Class::Read,
        });
    }
    let read_only = request.transaction.is_some_and(|t| t.read_only);
    if read_only && classes.all(|c| c == Class::Read) {
        Class::Read
    } else {
        Class::Write
    }
}

/// The rule itself: a statement in a session that is (or is not) in a transaction or
/// pinned.
pub fn of_statement(query: &str, in_transaction: bool, pinned: bool) -> Class {
    if in_transaction || pinned || classify(query) != Verdict::Clean {
        Class::Session
    } else if replay_safe(query) {
        Class::Read
    } else {
        Class::Write
    }
}

/// Whether a session's statements run in a transaction: it is in one, or it has
/// autocommit off (its next statement opens one; the shim carries that setting in the
/// session, not on a held connection).
pub fn in_transaction(session: Option<&Session>) -> bool {
    session
        .and_then(|s| s.vitess_session.as_ref())
        .is_some_and(|v| v.in_transaction || !v.autocommit)
}

/// Whether a session is in a transaction, and whether it is pinned.
fn session_state(session: Option<&Session>) -> (bool, bool) {
    let pinned = session.is_some_and(|s| affinity::is_pinned(&s.signature));
    (in_transaction(session), pinned)
}

/// The class of a canonical (protobuf) `ExecuteRequest`.
pub fn of_execute(message: &[u8]) -> Class {
    match ExecuteRequest::decode(message) {
        Ok(request) => {
            let (in_transaction, pinned) = session_state(request.session.as_ref());
            of_statement(&request.query, in_transaction, pinned)
        }
        Err(_) => Class::Write,
    }
}

/// The class of RPC `rpc`'s canonical request of `len` bytes, read with
/// `read(offset, max)`. Large messages are judged by their session alone.
pub fn of_request(
    rpc: &str,
    mut read: impl FnMut(usize, usize) -> Option<Vec<u8>>,
    len: usize,
) -> Class {
    if !by_statement(rpc) {
        return Class::Write;
    }
    if len <= MAX_CLASSIFIED_BYTES {
        return match read(0, len) {
            Some(message) if message.len() == len => of_message(rpc, &message),
            _ => Class::Write,
        };
    }
    match session_state(affinity::session(read, len).as_ref()) {
        (false, false) => Class::Write,
        _ => Class::Session,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_proto::vitess::vtgate::Session as VitessSession;

    /// A sealed signature with (or without) the pinned flag (byte 53, see affinity.rs).
    fn signature(pinned: bool) -> Vec<u8> {
        let mut s = vec![1u8];
        s.extend_from_slice(&[0; 52]);
        s.push(u8::from(pinned));
        s.extend_from_slice(&[0; 33]);
        s
    }

    fn request(query: &str, in_transaction: bool, pinned: bool) -> Vec<u8> {
        ExecuteRequest {
            query: query.into(),
            session: Some(Session {
                signature: signature(pinned),
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

    fn whole(message: &[u8]) -> impl FnMut(usize, usize) -> Option<Vec<u8>> + '_ {
        |offset, max| {
            let end = offset.saturating_add(max).min(message.len());
            message.get(offset..end).map(<[u8]>::to_vec)
        }
    }

    #[test]
    fn the_table() {
        use Class::*;
        // (statement, in a transaction, pinned) -> class
        let table: &[(&str, bool, bool, Class)] = &[
            ("SELECT 1", false, false, Read),
            ("select * from t where id = 7;", false, false, Read),
            ("SHOW TABLES", false, false, Read),
            ("WITH x AS (SELECT 1) SELECT * FROM x", false, false, Read),
            ("SELECT 1", true, false, Session),
            ("SELECT 1", false, true, Session),
            ("SELECT 1", true, true, Session),
            ("INSERT INTO t VALUES (1)", true, false, Session),
            ("BEGIN", false, false, Session),
            ("START TRANSACTION", false, false, Session),
            ("SET @x = 1", false, false, Session),
            ("SET NAMES utf8mb4", false, false, Session),
            ("SELECT @x", false, false, Session),
            ("LOCK TABLES t READ", false, false, Session),
            ("USE other", false, false, Session),
            ("SELECT GET_LOCK('a', 1)", false, false, Session),
            ("SELECT 1; SELECT 2", false, false, Session),
            ("CALL p()", false, false, Session),
            ("INSERT INTO t VALUES (1)", false, false, Write),
            ("UPDATE t SET a = 1", false, false, Write),
            ("DELETE FROM t", false, false, Write),
            ("CREATE TABLE t (a INT)", false, false, Write),
            ("SELECT * FROM t FOR UPDATE", false, false, Write),
            ("SELECT SLEEP(1)", false, false, Write),
            ("SELECT f(1)", false, false, Write),
            ("SELECT * FROM t INTO OUTFILE '/tmp/x'", false, false, Write),
            ("COMMIT", false, false, Write),
            ("COMMIT", true, false, Session),
            ("ROLLBACK", true, true, Session),
            ("", false, false, Write),
        ];
        for &(sql, in_tx, pinned, class) in table {
            assert_eq!(
                of_statement(sql, in_tx, pinned),
                class,
                "{sql:?} {in_tx} {pinned}"
            );
            let m = request(sql, in_tx, pinned);
            assert_eq!(of_execute(&m), class, "message {sql:?}");
            assert_eq!(of_request("Execute", whole(&m), m.len()), class);
            assert_eq!(of_request("StreamExecute", whole(&m), m.len()), class);
        }
    }

    #[test]
    fn autocommit_off_is_a_transaction() {
        let m = ExecuteRequest {
            query: "SELECT 1".into(),
            session: Some(Session {
                signature: signature(false),
                vitess_session: Some(VitessSession {
                    autocommit: false,
                    ..Default::default()
                }),
            }),
            ..Default::default()
        }
        .encode_to_vec();
        assert_eq!(of_execute(&m), Class::Session);
        // No session at all: a new one, autocommit on.
        let m = ExecuteRequest {
            query: "SELECT 1".into(),
            ..Default::default()
        }
        .encode_to_vec();
        assert_eq!(of_execute(&m), Class::Read);
    }

    #[test]
    fn other_rpcs_and_broken_messages_are_writes() {
        let m = request("SELECT 1", false, false);
        for rpc in ["CreateSession", "CloseSession", "Prepare"] {
            assert_eq!(of_request(rpc, whole(&m), m.len()), Class::Write, "{rpc}");
        }
        assert_eq!(of_execute(&[0x12, 0x05, b'x']), Class::Write);
        assert_eq!(of_execute(&[]), Class::Write, "an empty query");
        assert_eq!(of_request("Execute", |_, _| None, m.len()), Class::Write);
        let no_session = ExecuteRequest {
            query: "SELECT 1".into(),
            ..Default::default()
        }
        .encode_to_vec();
        assert_eq!(of_execute(&no_session), Class::Read);
    }

    #[test]
    fn large_messages_are_judged_by_their_session() {
        let big = format!("SELECT '{}'", "x".repeat(MAX_CLASSIFIED_BYTES));
        let free = request(&big, false, false);
        assert_eq!(
            of_request("Execute", whole(&free), free.len()),
            Class::Write
        );
        let pinned = request(&big, false, true);
        assert_eq!(
            of_request("Execute", whole(&pinned), pinned.len()),
            Class::Session
        );
        let in_tx = request(&big, true, false);
        assert_eq!(
            of_request("Execute", whole(&in_tx), in_tx.len()),
            Class::Session
        );
    }

    fn batch(
        mode: BatchMode,
        queries: &[&str],
        read_only: bool,
        in_transaction: bool,
        pinned: bool,
    ) -> Vec<u8> {
        use ferry_proto::ferry::v1alpha1::{BatchStatement, TransactionOptions};
        ExecuteBatchRequest {
            session: Some(Session {
                signature: signature(pinned),
                vitess_session: Some(VitessSession {
                    in_transaction,
                    autocommit: true,
                    ..Default::default()
                }),
            }),
            statements: queries
                .iter()
                .map(|q| BatchStatement {
                    query: (*q).into(),
                    ..Default::default()
                })
                .collect(),
            mode: mode as i32,
            transaction: read_only.then_some(TransactionOptions {
                read_only: true,
                ..Default::default()
            }),
        }
        .encode_to_vec()
    }

    #[test]
    fn batches_route_as_their_statements() {
        use BatchMode::{Pipeline, Transaction};
        let reads = ["SELECT 1", "SELECT * FROM t"];
        // A transaction: a read only when READ ONLY and all reads.
        assert_eq!(
            of_batch(&batch(Transaction, &reads, true, false, false)),
            Class::Read
        );
        assert_eq!(
            of_batch(&batch(Transaction, &reads, false, false, false)),
            Class::Write
        );
        assert_eq!(
            of_batch(&batch(
                Transaction,
                &["SELECT 1", "DELETE FROM t"],
                true,
                false,
                false
            )),
            Class::Write
        );
        assert_eq!(
            of_batch(&batch(Transaction, &reads, true, true, false)),
            Class::Session
        );
        assert_eq!(
            of_batch(&batch(Transaction, &reads, true, false, true)),
            Class::Session
        );
        assert_eq!(
            of_batch(&batch(Transaction, &[], true, false, false)),
            Class::Write
        );
        // A pipeline: its most demanding statement.
        assert_eq!(
            of_batch(&batch(Pipeline, &reads, false, false, false)),
            Class::Read
        );
        assert_eq!(
            of_batch(&batch(
                Pipeline,
                &["SELECT 1", "INSERT INTO t VALUES (1)"],
                false,
                false,
                false
            )),
            Class::Write
        );
        assert_eq!(
            of_batch(&batch(
                Pipeline,
                &["SELECT 1", "BEGIN", "SELECT 2"],
                false,
                false,
                false
            )),
            Class::Session
        );
        assert_eq!(
            of_batch(&batch(Pipeline, &reads, false, true, false)),
            Class::Session
        );
        // What does not decode: a write (never retried).
        assert_eq!(of_batch(b"\xff\xff"), Class::Write);
        assert_eq!(
            of_message(
                "ExecuteBatch",
                &batch(Pipeline, &reads, false, false, false)
            ),
            Class::Read
        );
        assert!(by_statement("ExecuteBatch"));
        // Early data: what routes as a read, nothing else.
        assert!(
            crate::early_data::execute_batch(&batch(Transaction, &reads, true, false, false))
                .is_ok()
        );
        assert!(
            crate::early_data::execute_batch(&batch(Transaction, &reads, false, false, false))
                .is_err()
        );
        assert!(crate::early_data::execute_batch(&batch(
            Pipeline,
            &["INSERT INTO t VALUES (1)"],
            false,
            false,
            false
        ))
        .is_err());
    }
}
