//! The three RPCs: Execute, CreateSession, CloseSession.
//!
//! Every request authenticates: an unpinned statement by getting a connection
//! from its credential's pool, a pinned one by its sealed session, whose
//! credential tag must match (seal.rs). Execute runs one query with the text
//! protocol and answers SQL errors inside the response (HTTP 200,
//! `ExecuteResponse.error`), as PlanetScale does; only failures to reach or log
//! in to MySQL are Connect errors.
//!
//! Where the connection comes from: a session without a pin borrows any pooled
//! connection; one with a pin (session.rs) runs on its pinned connection. A
//! statement that leaves a transaction (the server status flags say so) or
//! session state (ferry_wire::statement classifies SET, USE, temporary tables,
//! GET_LOCK, LOCK TABLES, PREPARE...) pins the connection it ran on to the
//! session. The pin ends when the transaction is over and no state is left, or
//! on CloseSession.
//!
//! A pooled connection goes back armed for COM_RESET_CONNECTION (pool.rs)
//! unless the statement was proven clean, which keeps the hot path (`SELECT
//! 1`) at one MySQL round trip.
use crate::auth::Credentials;
use crate::connect_error::ConnectError;
use crate::error_map::{sql_code, sql_message};
use crate::log::Level;
use crate::result::{field, Overflow, ResultLimits, Rows};
use crate::seal::{random, SealError, SessionId, Token};
use crate::server::App;
use crate::session::{retire, Ended, PinError, PinState};
use crate::statement::{classify, first_keyword, Verdict};
use ferry_proto::psdb::v1alpha1::{
    CloseSessionRequest, CloseSessionResponse, CreateSessionResponse, ExecuteRequest,
    ExecuteResponse, Role, Session, User,
};
use ferry_proto::vitess::query::QueryResult;
use ferry_proto::vitess::vtgate;
use ferry_proto::vitess::vtrpc::{Code, RpcError};
use mysql_async::consts::StatusFlags;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, DriverError};
use std::time::Instant;

fn rpc_error(code: Code, message: impl Into<String>) -> RpcError {
    RpcError {
        message: message.into(),
        code: code as i32,
    }
}

/// Transaction control: the status flags say when it is over, so it pins
/// without leaving sticky state.
fn is_transaction_control(label: &str) -> bool {
    matches!(
        label,
        "BEGIN" | "START TRANSACTION" | "XA" | "SAVEPOINT" | "ROLLBACK TO SAVEPOINT"
    )
}

/// Session state a statement makes, as far as the text tells. What the text
/// cannot rule out (`Reset`: CALL, several statements, user variables in a
/// SELECT) runs on a pooled connection that is reset after it, so whatever it
/// made is discarded, never leaked; it pins only if it leaves a transaction.
fn leaves_sticky_state(verdict: Verdict) -> bool {
    match verdict {
        Verdict::Refuse(label) => !is_transaction_control(label),
        Verdict::Clean | Verdict::Reset => false,
    }
}

/// The session an answer carries, sealed for these credentials. Fields the
/// gateway does not set (target_string, options...) are carried through.
struct SessionOut<'a> {
    app: &'a App,
    creds: &'a Credentials,
    id: SessionId,
    base: vtgate::Session,
}

impl SessionOut<'_> {
    fn seal(
        &self,
        pinned: bool,
        in_transaction: bool,
        autocommit: bool,
        qr: Option<&QueryResult>,
    ) -> Session {
        let mut v = self.base.clone();
        v.in_transaction = in_transaction;
        v.autocommit = autocommit;
        v.session_uuid = crate::seal::hex(&self.id);
        if let Some(qr) = qr {
            if qr.insert_id_changed {
                v.last_insert_id = qr.insert_id;
            }
            v.row_count = if qr.fields.is_empty() {
                i64::try_from(qr.rows_affected).unwrap_or(i64::MAX)
            } else {
                -1
            };
        }
        let signature = self
            .app
            .sealer
            .seal(self.id, self.app.instance, pinned, self.creds, &v);
        Session {
            signature,
            vitess_session: Some(v),
        }
    }

    /// The session as it was (for answers that change nothing).
    fn unchanged(&self, token: &Token) -> Session {
        self.seal(
            token.pinned,
            self.base.in_transaction,
            self.base.autocommit,
            None,
        )
    }

    fn fresh(&self) -> Session {
        self.seal(false, false, true, None)
    }
}

fn fresh_vitess() -> vtgate::Session {
    vtgate::Session {
        autocommit: true,
        ..Default::default()
    }
}

pub async fn create_session(
    app: &App,
    creds: &Credentials,
) -> Result<CreateSessionResponse, ConnectError> {
    let mut conn = app.pools.conn(creds).await?;
    conn.reset_connection(false); // nothing ran on it
    drop(conn);
    let out = SessionOut {
        app,
        creds,
        id: random(),
        base: fresh_vitess(),
    };
    Ok(CreateSessionResponse {
        branch: app.pools.database().to_owned(),
        user: Some(User {
            username: creds.user.clone(),
            psid: String::new(),
            role: Role::Readwriter as i32,
        }),
        session: Some(out.fresh()),
    })
}

/// Ends the session's pin, if any (its transaction is rolled back).
pub async fn close_session(
    app: &App,
    creds: &Credentials,
    req: CloseSessionRequest,
) -> Result<CloseSessionResponse, ConnectError> {
    let session = req.session.unwrap_or_default();
    let vitess = session.vitess_session.unwrap_or_default();
    let token = match app.sealer.open(&session.signature, &vitess, creds) {
        Ok(token) => token,
        Err(e) => {
            return Ok(CloseSessionResponse {
                session: None,
                error: Some(seal_error(&e)),
            })
        }
    };
    match token {
        Some(t) if t.pinned => {
            if let Some(pin) = app.pins.get(&t.id) {
                let mut state = pin.state.lock().await;
                if let Some(conn) = state.conn.take() {
                    retire(conn, state.sticky);
                }
                drop(state);
                app.pins.end(&t.id, Ended::Released);
            }
        }
        // Nothing pinned: still authenticate, as every RPC does.
        _ => {
            let mut conn = app.pools.conn(creds).await?;
            conn.reset_connection(false);
        }
    }
    Ok(CloseSessionResponse {
        session: None,
        error: None,
    })
}

fn seal_error(e: &SealError) -> RpcError {
    let code = match e {
        SealError::OtherCredentials => Code::PermissionDenied,
        SealError::Expired { .. } => Code::FailedPrecondition,
        SealError::Invalid(_) => Code::InvalidArgument,
    };
    rpc_error(code, e.to_string())
}

/// How a statement ended, before it becomes a response.
enum Outcome {
    Done(QueryResult),
    Sql(mysql_async::ServerError),
    TooLarge(Overflow),
    /// The server asked for something the shim never does (LOAD DATA LOCAL).
    Unsupported(&'static str),
}

/// The server status after a statement: (in a transaction, autocommit on).
/// It comes with the last OK packet; an error packet carries none, and after
/// an error the transaction may have ended (a deadlock rolls it back) or,
/// in a multi-statement query, begun: then `DO 0` fetches a fresh status.
async fn txn_status(conn: &mut Conn) -> Result<(bool, bool), mysql_async::Error> {
    if conn.last_ok_packet().is_none() {
        conn.query_drop("DO 0").await?;
    }
    let status = conn
        .last_ok_packet()
        .map(|ok| ok.status_flags())
        .unwrap_or_default();
    Ok((
        status.contains(StatusFlags::SERVER_STATUS_IN_TRANS),
        status.contains(StatusFlags::SERVER_STATUS_AUTOCOMMIT),
    ))
}

/// Before a statement that reads LAST_INSERT_ID() on a pooled connection: set
/// the connection's value to the session's (`DO LAST_INSERT_ID(n)`). A mention
/// inside a string or comment costs the same round trip and changes nothing.
async fn restore_last_insert_id(
    conn: &mut Conn,
    sql: &str,
    last_insert_id: u64,
) -> Result<(), mysql_async::Error> {
    if mentions_last_insert_id(sql) {
        conn.query_drop(format!("DO LAST_INSERT_ID({last_insert_id})"))
            .await?;
    }
    Ok(())
}

fn mentions_last_insert_id(sql: &str) -> bool {
    sql.as_bytes()
        .windows(14)
        .any(|w| w.eq_ignore_ascii_case(b"LAST_INSERT_ID"))
}

/// Runs a statement, then reads the transaction status it left.
async fn run_with_status(
    conn: &mut Conn,
    sql: &str,
    limits: ResultLimits,
) -> Result<(Outcome, (bool, bool)), mysql_async::Error> {
    let outcome = run(conn, sql, limits).await?;
    Ok((outcome, txn_status(conn).await?))
}

pub async fn execute(
    app: &App,
    creds: &Credentials,
    req: ExecuteRequest,
) -> Result<ExecuteResponse, ConnectError> {
    let session = req.session.unwrap_or_default();
    let base = session.vitess_session.unwrap_or_else(fresh_vitess);
    let opened = app.sealer.open(&session.signature, &base, creds);
    let out = SessionOut {
        app,
        creds,
        id: match &opened {
            Ok(Some(t)) => t.id,
            _ => random(),
        },
        base: if opened.is_ok() { base } else { fresh_vitess() },
    };
    let answer =
        |session: Session, result: Option<QueryResult>, error: Option<RpcError>, timing: f64| {
            ExecuteResponse {
                session: Some(session),
                result,
                error,
                timing,
            }
        };
    let token = match opened {
        Ok(token) => token,
        // Never executed; the client may go on with the fresh session it gets.
        Err(e) => {
            crate::log!(
                Level::Warn,
                "session refused",
                user = creds.user,
                reason = e
            );
            return Ok(answer(out.fresh(), None, Some(seal_error(&e)), 0.0));
        }
    };
    if !req.bind_variables.is_empty() {
        let msg = "bind variables are not supported yet; interpolate parameters into the query";
        let session = match &token {
            Some(t) => out.unchanged(t),
            None => out.fresh(),
        };
        return Ok(answer(
            session,
            None,
            Some(rpc_error(Code::Unimplemented, msg)),
            0.0,
        ));
    }
    let verdict = classify(&req.query);
    let limits = app.result_limits;
    match token {
        Some(t) if t.pinned => match app.pins.get(&t.id) {
            Some(pin) => {
                let mut state = match app.pins.enter(&pin).await {
                    Ok(state) => state,
                    Err(e) => return Ok(answer(out.unchanged(&t), None, Some(pin_error(&e)), 0.0)),
                };
                if let Some(why) = state.lost.clone() {
                    return Ok(lost(&out, &t, &req.query, &why));
                }
                let Some(conn) = state.conn.as_mut() else {
                    // Released by the request ahead in the queue (its COMMIT):
                    // nothing is pinned any more.
                    drop(state);
                    return unpinned(app, &out, creds, &req.query, verdict).await;
                };
                let started = Instant::now();
                let run = run_with_status(conn, &req.query, limits).await;
                let timing = started.elapsed().as_secs_f64();
                let (outcome, (in_txn, autocommit)) = match run {
                    Ok(done) => done,
                    Err(e) => {
                        let why = format!("the MySQL connection failed: {e}");
                        state.conn = None;
                        state.lost = Some(why.clone());
                        drop(state);
                        app.pins.end(&t.id, Ended::Lost(why.clone()));
                        crate::log!(Level::Warn, "pin lost", user = creds.user, reason = why);
                        return Ok(lost(&out, &t, &req.query, &why));
                    }
                };
                state.in_transaction = in_txn;
                state.sticky |= leaves_sticky_state(verdict) && !matches!(outcome, Outcome::Sql(_));
                let keep = in_txn || !autocommit || state.sticky;
                if !keep {
                    if let Some(conn) = state.conn.take() {
                        retire(conn, false);
                    }
                    drop(state);
                    app.pins.end(&t.id, Ended::Released);
                }
                Ok(respond(
                    &out, keep, in_txn, autocommit, outcome, timing, creds, limits,
                ))
            }
            None => match app.pins.ended(&t.id) {
                // An older copy of a session whose pin ended normally (sent by
                // concurrent requests): nothing is pinned, run it unpinned.
                Some(Ended::Released) => unpinned(app, &out, creds, &req.query, verdict).await,
                Some(Ended::Lost(why)) => Ok(lost(&out, &t, &req.query, &why)),
                None => {
                    let why = if t.instance == app.instance {
                        "the gateway no longer holds it"
                    } else {
                        "the shim that held it restarted or is gone"
                    };
                    Ok(lost(&out, &t, &req.query, why))
                }
            },
        },
        _ => unpinned(app, &out, creds, &req.query, verdict).await,
    }
}

/// A statement of a session without a pin: any pooled connection; pinned if
/// it leaves a transaction or session state.
async fn unpinned(
    app: &App,
    out: &SessionOut<'_>,
    creds: &Credentials,
    sql: &str,
    verdict: Verdict,
) -> Result<ExecuteResponse, ConnectError> {
    let mut conn = app.pools.conn(creds).await?;
    let may_pin = matches!(verdict, Verdict::Refuse(_));
    if may_pin {
        if let Err(e) = app.pins.admit(&creds.user) {
            conn.reset_connection(false); // nothing ran on it
            return Ok(ExecuteResponse {
                session: Some(out.fresh()),
                result: None,
                error: Some(pin_error(&e)),
                timing: 0.0,
            });
        }
    }
    let started = Instant::now();
    // A pooled connection's LAST_INSERT_ID() is whoever used it last; the
    // session's own (sealed) value is what a direct connection would give.
    let outcome = match restore_last_insert_id(&mut conn, sql, out.base.last_insert_id).await {
        Ok(()) => run_with_status(&mut conn, sql, app.result_limits).await,
        Err(e) => Err(e),
    };
    let timing = started.elapsed().as_secs_f64();
    let (outcome, (in_txn, autocommit)) = match outcome {
        Ok(done) => done,
        Err(e) => {
            // The connection is broken (I/O or protocol): the pool discards it.
            crate::log!(
                Level::Error,
                "mysql connection failed during a query",
                user = creds.user,
                error = e
            );
            return Err(ConnectError::new(
                Code::Unavailable,
                format!("lost the MySQL connection: {e}"),
            ));
        }
    };
    let sticky = leaves_sticky_state(verdict) && !matches!(outcome, Outcome::Sql(_));
    let pin = in_txn || !autocommit || sticky;
    if pin && !may_pin {
        // A statement that did not look like it (a procedure) left a
        // transaction: pin it if allowed, else roll it back, and say so.
        if let Err(e) = app.pins.admit(&creds.user) {
            conn.reset_connection(true);
            drop(conn);
            let mut error = pin_error(&e);
            error.message = format!(
                "the statement left a transaction open, which was rolled back: {}",
                error.message
            );
            return Ok(ExecuteResponse {
                session: Some(out.fresh()),
                result: None,
                error: Some(error),
                timing,
            });
        }
    }
    if pin {
        conn.reset_connection(true); // whenever it goes back to the pool
        app.pins.insert(
            out.id,
            creds.user.clone(),
            PinState {
                conn: Some(conn),
                sticky,
                in_transaction: in_txn,
                lost: None,
            },
        );
        crate::log!(
            Level::Debug,
            "session pinned",
            user = creds.user,
            statement = first_keyword(sql)
        );
    } else {
        // Disarm the reset only when nothing can have been left behind.
        conn.reset_connection(verdict != Verdict::Clean);
        drop(conn);
    }
    Ok(respond(
        out,
        pin,
        in_txn,
        autocommit,
        outcome,
        timing,
        creds,
        app.result_limits,
    ))
}

#[allow(clippy::too_many_arguments)]
fn respond(
    out: &SessionOut<'_>,
    pinned: bool,
    in_txn: bool,
    autocommit: bool,
    outcome: Outcome,
    timing: f64,
    creds: &Credentials,
    limits: ResultLimits,
) -> ExecuteResponse {
    let (result, error) = match outcome {
        Outcome::Done(result) => (Some(result), None),
        Outcome::Sql(se) => {
            let code = sql_code(se.code);
            crate::log!(
                Level::Info,
                "sql error",
                user = creds.user,
                errno = se.code,
                code = format!("{code:?}")
            );
            (
                None,
                Some(rpc_error(
                    code,
                    sql_message(&se.message, se.code, &se.state),
                )),
            )
        }
        Outcome::TooLarge(overflow) => {
            let msg = match overflow {
                Overflow::Bytes => format!(
                    "the result exceeds {} bytes (FERRY_SHIM_MAX_RESULT_BYTES); select fewer rows or columns",
                    limits.bytes
                ),
                Overflow::Rows => format!(
                    "row count exceeded {} (FERRY_SHIM_MAX_RESULT_ROWS); add a LIMIT or page through the rows",
                    limits.rows
                ),
            };
            (None, Some(rpc_error(Code::ResourceExhausted, msg)))
        }
        Outcome::Unsupported(msg) => (None, Some(rpc_error(Code::Unimplemented, msg))),
    };
    ExecuteResponse {
        session: Some(out.seal(pinned, in_txn, autocommit, result.as_ref())),
        result,
        error,
        timing,
    }
}

/// The answer for a session whose pin was lost. A plain ROLLBACK succeeds (the
/// transaction is already rolled back) and ends the session's claim to a pin;
/// anything else fails with `aborted` and, inside a transaction, the session
/// stays marked so every later statement fails the same way until ROLLBACK or
/// CloseSession. Session state without a transaction is simply gone: one
/// error, then the session goes on unpinned.
fn lost(out: &SessionOut<'_>, t: &Token, sql: &str, why: &str) -> ExecuteResponse {
    if crate::statement::is_plain_rollback(sql) {
        return ExecuteResponse {
            session: Some(out.fresh()),
            result: Some(QueryResult::default()),
            error: None,
            timing: 0.0,
        };
    }
    let in_txn = out.base.in_transaction;
    let (message, session) = if in_txn {
        (
            format!("transaction lost, rolled back: {why}"),
            out.unchanged(t),
        )
    } else {
        (format!("session state lost: {why}"), out.fresh())
    };
    ExecuteResponse {
        session: Some(session),
        result: None,
        error: Some(rpc_error(Code::Aborted, message)),
        timing: 0.0,
    }
}

fn pin_error(e: &PinError) -> RpcError {
    match e {
        PinError::QueueFull(n) => rpc_error(
            Code::ResourceExhausted,
            format!("{n} requests of this session are already waiting (FERRY_SESSION_QUEUE_MAX); requests of one session run one at a time"),
        ),
        PinError::TooManyPins(n) => rpc_error(
            Code::ResourceExhausted,
            format!("this user already has {n} sessions holding a MySQL connection (open transactions or session state; FERRY_POOL_MAX_PINNED); commit or roll back, or close sessions"),
        ),
    }
}

/// Runs one query with the text protocol. Only the first result set is
/// returned; later ones (multi-statement queries, CALL) are read and dropped,
/// but an error in any of them is the answer, since part of the query failed.
/// `Err` means the connection itself failed.
async fn run(
    conn: &mut Conn,
    sql: &str,
    limits: ResultLimits,
) -> Result<Outcome, mysql_async::Error> {
    let mut qr = QueryResult::default();
    let mut rows = Rows::new(limits);
    let first = async {
        let mut result = conn.query_iter(sql).await?;
        match result.columns() {
            Some(columns) if !columns.is_empty() => {
                qr.fields = columns.iter().map(field).collect();
                result.for_each(|row| rows.push(&row)).await?;
            }
            _ => {
                // An OK packet: read its numbers before later results replace them.
                qr.rows_affected = result.affected_rows();
                qr.insert_id = result.last_insert_id().unwrap_or(0);
                qr.insert_id_changed = qr.insert_id != 0;
                qr.info = result.info().into_owned();
            }
        }
        result.drop_result().await
    };
    match first.await {
        Ok(()) => {}
        Err(mysql_async::Error::Server(se)) => return Ok(Outcome::Sql(se)),
        // No infile handler is installed, on purpose: the shim's files are not
        // the client's. mysql_async drops the connection; the pool replaces it.
        Err(mysql_async::Error::Driver(DriverError::LocalInfile(_))) => {
            return Ok(Outcome::Unsupported(
                "LOAD DATA LOCAL INFILE is not supported",
            ))
        }
        Err(e) => return Err(e),
    }
    if let Some(overflow) = rows.overflow {
        return Ok(Outcome::TooLarge(overflow));
    }
    qr.rows = rows.rows;
    Ok(Outcome::Done(qr))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_insert_id_is_recognised() {
        assert!(mentions_last_insert_id("select last_insert_id()"));
        assert!(mentions_last_insert_id("SELECT LAST_INSERT_ID() + 1"));
        assert!(!mentions_last_insert_id("SELECT 1"));
        assert!(!mentions_last_insert_id("LAST_INSERT_I"));
    }

    #[test]
    fn what_pins_and_what_sticks() {
        for sql in ["BEGIN", "START TRANSACTION", "SAVEPOINT a", "XA START 'x'"] {
            let v = classify(sql);
            assert!(v != Verdict::Clean && !leaves_sticky_state(v), "{sql}");
        }
        for sql in [
            "SET @v = 1",
            "USE ferry",
            "CREATE TEMPORARY TABLE t (a INT)",
            "SELECT GET_LOCK('a', 1)",
            "LOCK TABLES t READ",
            "PREPARE s FROM 'SELECT 1'",
        ] {
            assert!(leaves_sticky_state(classify(sql)), "{sql}");
        }
        // Not readable from the text: reset after, pinned only by a transaction.
        for sql in ["CALL p()", "SELECT 1; SELECT 2", "SELECT @v := 1"] {
            assert_eq!(classify(sql), Verdict::Reset, "{sql}");
            assert!(!leaves_sticky_state(classify(sql)), "{sql}");
        }
        for sql in ["SELECT 1", "INSERT INTO t VALUES (1)", "COMMIT", "ROLLBACK"] {
            assert_eq!(classify(sql), Verdict::Clean, "{sql}");
        }
    }
}
