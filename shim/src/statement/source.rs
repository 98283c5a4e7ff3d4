//! Where a statement's connection comes from, and what becomes of it after
//! the statement: the pin rule, once for a pooled connection and a pinned one.
//!
//! A statement that leaves a transaction (the server status flags say so) or
//! session state (ferry_wire::statement classifies SET, USE, temporary tables,
//! GET_LOCK, LOCK TABLES, PREPARE...) pins the connection it ran on to the
//! session. The pin ends when the transaction is over and no state is left, or
//! on CloseSession.
//!
//! A pooled connection goes back armed for COM_RESET_CONNECTION (mysql/pool.rs)
//! unless the statement was proven clean, which keeps the hot path (`SELECT
//! 1`) at one MySQL round trip.
//!
//! A statement stopped before it finished (its deadline passed, or its
//! stream's client went away) is killed in MySQL and its connection closed
//! (mysql/cancel.rs). On a pin that ends the pin the way a dead connection
//! does: the transaction is rolled back and the session's next statement gets
//! `aborted` "transaction lost" — a statement of unknown outcome never lets a
//! later COMMIT go through as if nothing happened.
use super::session_out::SessionOut;
use crate::app::App;
use crate::connect::error::ConnectError;
use crate::credentials::Credentials;
use crate::errors::answers::{pin_error, pin_lost};
use crate::errors::mysql::lost_connection_during_statement;
use crate::mysql::cancel;
use crate::sessions::pins::{retire, Ended, PinState};
use crate::sessions::seal::Token;
use crate::telemetry::log::Level;
use ferry_proto::psdb::v1alpha1::ExecuteResponse;
use ferry_proto::vitess::query::QueryResult;
use ferry_proto::vitess::vtrpc::Code;
use ferry_wire::statement::{first_keyword, Verdict};
use mysql_async::Conn;
use tokio::sync::OwnedMutexGuard;

/// Where a statement's connection comes from.
pub enum Source {
    /// Any pooled connection of the credential (armed for reset). `may_pin`:
    /// the text says the statement makes a transaction or session state, and
    /// a pin was admitted for it. `state`: the key of the session's state for this
    /// statement (sessions/state.rs `key`), `carried`: the connection came from the
    /// settings pool with that state on it (sessions/settings_pool.rs).
    Pooled {
        conn: Conn,
        may_pin: bool,
        state: Option<String>,
        carried: bool,
    },
    /// The session's pinned connection, held by this request until it is done
    /// (the session's other requests queue behind it); `state.conn` is set.
    Pinned {
        token: Token,
        state: OwnedMutexGuard<PinState>,
    },
}

/// What a statement left on its connection.
#[derive(Clone, Copy)]
pub struct Left {
    pub in_txn: bool,
    pub autocommit: bool,
    /// Session state that outlives the statement (`leaves_sticky_state`).
    pub sticky: bool,
}

impl Left {
    /// The pin rule: a connection stays with its session while it holds a
    /// transaction or session state that cannot travel in the session. With
    /// autocommit off (it travels: sessions/state.rs) each statement opens a
    /// transaction, which pins until it ends.
    fn holds_a_pin(self) -> bool {
        self.in_txn || self.sticky
    }
}

impl Source {
    pub fn is_pooled(&self) -> bool {
        matches!(self, Source::Pooled { .. })
    }

    /// For a pooled connection: the key of the session's state, taken out, and
    /// whether the connection already carries it.
    pub fn take_state(&mut self) -> (Option<String>, bool) {
        match self {
            Source::Pooled { state, carried, .. } => (state.take(), *carried),
            Source::Pinned { .. } => (None, false),
        }
    }

    /// The connection in hand (`None` only for a pin that lost it, which
    /// start() never hands out).
    pub fn conn(&mut self) -> Option<&mut Conn> {
        match self {
            Source::Pooled { conn, .. } => Some(conn),
            Source::Pinned { state, .. } => state.conn.as_mut(),
        }
    }

    /// The answer when the connection is missing or failed (I/O, protocol)
    /// under the statement: a pooled one is discarded by the pool and the
    /// answer is a Connect error; a pin is lost, and the answer says so.
    pub fn failed(
        self,
        out: &SessionOut<'_>,
        sql: &str,
        e: Option<&mysql_async::Error>,
    ) -> Result<ExecuteResponse, ConnectError> {
        let creds = out.creds;
        match self {
            Source::Pooled { conn, .. } => {
                // A broken connection is discarded by the pool; one that got a server
                // error back is reset, or closed where a reset is not enough (Vitess).
                retire(conn, out.app.pools.is_vitess());
                let e = e.map_or_else(|| "it is gone".to_owned(), ToString::to_string);
                crate::log!(
                    Level::Error,
                    "mysql connection failed during a query",
                    user = creds.user,
                    error = e
                );
                Err(ConnectError::new(
                    Code::Unavailable,
                    lost_connection_during_statement(&e),
                ))
            }
            Source::Pinned { token, mut state } => {
                let Some(e) = e else {
                    // start() hands out a pin only with its connection.
                    return Ok(lost(out, &token, sql, "the gateway no longer holds it"));
                };
                let why = format!("the MySQL connection failed: {e}");
                state.conn = None;
                state.lost = Some(why.clone());
                drop(state);
                out.app.pins.end(&token.id, Ended::Lost(why.clone()));
                crate::log!(Level::Warn, "pin lost", user = creds.user, reason = why);
                Ok(lost(out, &token, sql, &why))
            }
        }
    }

    /// The statement was stopped: it is killed in MySQL and its connection
    /// closed; a pin ends as a dead connection's does (see the module comment).
    /// Whether the KILL stopped it (mysql/cancel.rs).
    pub async fn stopped(self, app: &App, creds: &Credentials, reason: &str) -> bool {
        let conn = match self {
            Source::Pooled { conn, .. } => Some(conn),
            Source::Pinned { token, mut state } => {
                let conn = state.conn.take();
                state.lost = Some(reason.to_owned());
                drop(state);
                app.pins.end(&token.id, Ended::Lost(reason.to_owned()));
                crate::log!(Level::Info, "pin lost", user = creds.user, reason = reason);
                conn
            }
        };
        match conn {
            Some(conn) => cancel::stop(&app.pools, creds, conn, reason).await,
            None => true,
        }
    }

    /// After the statement finished: keeps, makes or releases the pin, and
    /// gives a pooled connection back (reset unless the statement was proven
    /// clean). `Ok`: whether the session is pinned; `Err`: the answer for a
    /// transaction that could not be pinned (rolled back).
    /// `dirty`: the connection may carry state (the statement's, or the session's
    /// applied before it): reset before anyone else gets it. `keep`: it carries
    /// exactly this state (the settings pool's key) and nothing else, and goes to
    /// the settings pool instead.
    pub fn settle(
        self,
        out: &SessionOut<'_>,
        sql: &str,
        left: Left,
        dirty: bool,
        keep: Option<String>,
    ) -> Result<bool, Box<ExecuteResponse>> {
        let (app, creds) = (out.app, out.creds);
        match self {
            Source::Pinned { token, mut state } => {
                state.in_transaction = left.in_txn;
                state.sticky |= left.sticky;
                let keep = Left {
                    sticky: state.sticky,
                    ..left
                }
                .holds_a_pin();
                if !keep {
                    state.release(app.pools.is_vitess());
                    drop(state);
                    app.pins.end(&token.id, Ended::Released);
                }
                Ok(keep)
            }
            Source::Pooled {
                mut conn, may_pin, ..
            } => {
                let pin = left.holds_a_pin();
                if pin && !may_pin {
                    // A statement that did not look like it (a procedure) left a
                    // transaction: pin it if allowed, else roll it back, and say so.
                    if let Err(e) = app.pins.admit(&creds.user) {
                        retire(conn, app.pools.is_vitess());
                        let mut error = pin_error(&e);
                        error.message = format!(
                            "the statement left a transaction open, which was rolled back: {}",
                            error.message
                        );
                        return Err(Box::new(ExecuteResponse {
                            session: Some(out.fresh()),
                            result: None,
                            error: Some(error),
                            timing: 0.0,
                        }));
                    }
                }
                if pin {
                    conn.reset_connection(true); // whenever it goes back to the pool
                    app.pins.insert(
                        out.id,
                        creds.user.clone(),
                        PinState {
                            conn: Some(conn),
                            sticky: left.sticky,
                            in_transaction: left.in_txn,
                            lost: None,
                        },
                    );
                    crate::log!(
                        Level::Debug,
                        "session pinned",
                        user = creds.user,
                        statement = first_keyword(sql)
                    );
                } else if let Some(state) = keep {
                    app.kept.keep(creds, state, conn, app.pools.is_vitess());
                } else if dirty && app.pools.is_vitess() {
                    // vtgate's reset keeps variables and settings (mysql/pool.rs).
                    retire(conn, true);
                } else {
                    // Disarm the reset only when nothing can have been left behind.
                    conn.reset_connection(dirty);
                    drop(conn);
                }
                Ok(pin)
            }
        }
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
pub fn leaves_sticky_state(verdict: Verdict) -> bool {
    match verdict {
        Verdict::Refuse(label) => !is_transaction_control(label),
        Verdict::Clean | Verdict::Reset => false,
    }
}

/// The answer for a session whose pin was lost. A plain ROLLBACK succeeds (the
/// transaction is already rolled back) and ends the session's claim to a pin;
/// anything else fails with `aborted` and, inside a transaction, the session
/// stays marked so every later statement fails the same way until ROLLBACK or
/// CloseSession. Session state without a transaction is simply gone: one
/// error, then the session goes on unpinned.
pub fn lost(out: &SessionOut<'_>, t: &Token, sql: &str, why: &str) -> ExecuteResponse {
    if ferry_wire::statement::is_plain_rollback(sql) {
        return ExecuteResponse {
            session: Some(out.fresh()),
            result: Some(QueryResult::default()),
            error: None,
            timing: 0.0,
        };
    }
    let in_txn = out.base.in_transaction;
    let session = if in_txn {
        out.unchanged(t)
    } else {
        out.fresh()
    };
    ExecuteResponse {
        session: Some(session),
        result: None,
        error: Some(pin_lost(in_txn, why)),
        timing: 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_wire::statement::classify;

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
