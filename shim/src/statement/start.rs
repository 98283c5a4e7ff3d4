//! Before a statement runs: its session verified (the sealed token must open
//! for the request's credentials: sessions/seal.rs), its bind variables bound
//! (types/bind.rs), and its connection in hand (`Source`): a session without a
//! pin borrows any pooled connection; one with a pin (sessions/pins.rs) runs
//! on its pinned connection, queued behind the session's other requests.
//!
//! Read replicas (mysql/role.rs, sessions/gtid.rs): on a `replica` shim only
//! replay-safe reads of sessions without a pin or transaction run, each after
//! waiting for the session's GTID.
use super::session_out::{fresh_vitess, SessionOut};
use super::source::{lost, Source};
use crate::app::App;
use crate::connect::error::ConnectError;
use crate::credentials::Credentials;
use crate::errors::answers::{
    bad_query_timeout, bad_workload, bind_error, misrouted, pin_error, seal_error,
};
use crate::errors::mysql::lost_connection;
use crate::mysql::role::{self, Role as ShimRole};
use crate::sessions::counters::{self, Counter};
use crate::sessions::gtid::{self, WaitError};
use crate::sessions::pins::Ended;
use crate::sessions::seal::{random, SessionId, Token};
use crate::sessions::state;
use crate::sessions::{olap, query_timeout};
use crate::telemetry::log::Level;
use crate::telemetry::trace::Statement;
use crate::types::bind;
use ferry_proto::psdb::v1alpha1::{ExecuteRequest, ExecuteResponse, Session};
use ferry_proto::vitess::query::execute_options::Workload;
use ferry_proto::vitess::query::QueryResult;
use ferry_proto::vitess::vtgate;
use ferry_proto::vitess::vtrpc::{Code, RpcError};
use ferry_wire::session_state::{self, Assigned};
use ferry_wire::statement::{classify, classify_user_variables_read, Verdict};
use mysql_async::{Conn, Value};
use std::time::Instant;

/// A statement that has its session verified and its connection in hand.
pub struct Ready {
    pub(super) id: SessionId,
    pub(super) base: vtgate::Session,
    pub(super) query: Query,
    pub(super) source: Source,
    /// Seconds a replica waited for the session's GTID before it runs.
    pub(super) waited: f64,
}

/// The session as it is before a statement, to be sealed if it cannot finish.
pub struct AsIs {
    id: SessionId,
    base: vtgate::Session,
    pinned: bool,
}

impl AsIs {
    pub fn seal(self, app: &App, creds: &Credentials) -> Session {
        let (in_txn, autocommit) = (self.base.in_transaction, self.base.autocommit);
        let out = SessionOut::new(app, creds, self.id, self.base);
        out.seal(self.pinned, in_txn, autocommit, None)
    }
}

impl Ready {
    fn new(out: SessionOut<'_>, query: Query, source: Source) -> Self {
        Ready {
            id: out.id,
            base: out.base,
            query,
            source,
            waited: 0.0,
        }
    }

    /// The session as it is before the statement: what a stream (or an answer
    /// already going out in pieces) ends with when the statement cannot finish.
    pub fn as_is(&self) -> AsIs {
        AsIs {
            id: self.id,
            base: self.base.clone(),
            pinned: matches!(self.source, Source::Pinned { .. }),
        }
    }

    /// [`Ready::as_is`], sealed.
    pub fn session_as_is(&self, app: &App, creds: &Credentials) -> Session {
        self.as_is().seal(app, creds)
    }

    /// The connection in hand (`None` only for a pin that lost it, which
    /// start() never hands out).
    pub fn conn(&mut self) -> Option<&mut Conn> {
        self.source.conn()
    }

    /// Tells the statement's span how it got here: `asked` is when start()
    /// was called (what it took, less a replica's wait, is the connection's).
    pub fn traced(&self, span: &mut Statement, asked: Instant, role: ShimRole) {
        let pinned = matches!(self.source, Source::Pinned { .. });
        span.connected(asked.elapsed(), self.waited, pinned, role);
    }

    /// Gives the connection back when nothing ran on it that could leave
    /// state (Prepare): a pooled one without a reset, a pin as it was.
    pub fn release_clean(self) {
        match self.source {
            // One kept with a session's state: closed, the rare way out that
            // needs no knowledge of the server (a replica behind).
            Source::Pooled {
                conn,
                carried: true,
                ..
            } => crate::sessions::pins::retire(conn, true),
            Source::Pooled { mut conn, .. } => conn.reset_connection(false),
            Source::Pinned { .. } => {}
        }
    }
}

/// A request before MySQL runs anything: answered already (a refused
/// session, the workload switch, a lost pin, no room for a pin...) or ready.
pub enum Start {
    Answered(ExecuteResponse),
    Run(Ready),
}

/// The statement, as the shim will run it.
pub struct Query {
    pub sql: String,
    /// Bind variables' values, one per `?` of `sql`: run with the binary protocol.
    pub params: Option<Vec<Value>>,
    pub verdict: Verdict,
    /// The user variables and settings it assigns, when they all travel in the
    /// session (sessions/state.rs): read back after it runs.
    pub assigned: Option<Assigned>,
    /// Its rows go out as a stream (StreamExecute): on Vitess, in OLAP.
    pub stream: bool,
    /// Run right before it, on its connection ([`Opening::before`]).
    pub before: Option<&'static str>,
}

/// What a caller other than Execute asks of a statement's start: ExecuteBatch
/// (rpc/execute_batch.rs) opens its transaction with these.
#[derive(Clone, Copy, Debug, Default)]
pub struct Opening {
    /// A statement run right before this one on the same connection, from a fixed
    /// set (a transaction's isolation level: `SET TRANSACTION ISOLATION LEVEL ...`,
    /// which holds for the next transaction only, so it cannot run on its own).
    pub before: Option<&'static str>,
    /// It opens, runs in or ends a `READ ONLY` transaction of a batch whose every
    /// statement is a read: a replica may run it (the server refuses a write in it).
    pub read_only_txn: bool,
}

impl Query {
    /// A statement whose session changes all travel in the session runs on a
    /// pooled connection, is not pinned, and its connection is reset after. One
    /// whose text shows it assigns nothing only reads its user variables: they ask
    /// for no reset (what else may, still does).
    fn new(sql: String, params: Option<Vec<Value>>, stream: bool) -> Query {
        let verdict = classify(&sql);
        let assigned = match verdict {
            Verdict::Refuse("SET") | Verdict::Reset => session_state::assigned(&sql),
            _ => None,
        };
        let verdict = match &assigned {
            Some(a) if a.user.is_empty() && a.system.is_empty() => {
                classify_user_variables_read(&sql)
            }
            Some(_) => Verdict::Reset,
            None => verdict,
        };
        let assigned = assigned.filter(|a| !(a.user.is_empty() && a.system.is_empty()));
        Query {
            verdict,
            sql,
            params,
            assigned,
            stream,
            before: None,
        }
    }

    /// No statement (Prepare): the connection is all it wants.
    fn none() -> Query {
        Query {
            sql: String::new(),
            params: None,
            verdict: Verdict::Clean,
            assigned: None,
            stream: false,
            before: None,
        }
    }
}

/// A statement the gateway answers itself (a counter, `SET query_timeout`, the
/// workload) still needs a credential MySQL has taken: one whose pool is admitted
/// costs nothing more; another logs in first, as its statement would have, so a wrong
/// password gets the same 401 as everywhere else, never an answer.
async fn admitted(app: &App, creds: &Credentials) -> Result<(), ConnectError> {
    if app.pools.idle(creds).is_some() {
        return Ok(());
    }
    app.pools.conn(creds).await.map(drop)
}

/// Verifies the session and gets the statement its connection. Connect
/// errors (no connection: 401, 429, 503) come before anything ran. `stream`:
/// StreamExecute's.
pub async fn start(
    app: &App,
    creds: &Credentials,
    req: ExecuteRequest,
    stream: bool,
) -> Result<Start, ConnectError> {
    start_opening(app, creds, req, stream, Opening::default()).await
}

/// [`start`], with what a batch asks of it.
pub async fn start_opening(
    app: &App,
    creds: &Credentials,
    req: ExecuteRequest,
    stream: bool,
    opening: Opening,
) -> Result<Start, ConnectError> {
    let (mut out, token) = match open(app, creds, req.session) {
        Ok(opened) => opened,
        Err(answered) => return Ok(*answered),
    };
    if app.role == ShimRole::Replica && !opening.read_only_txn {
        // The filter sends a replica reads outside transactions only.
        let pinned = token.as_ref().is_some_and(|t| t.pinned);
        // Autocommit off (it travels in the session): a statement opens a transaction.
        let in_txn = out.base.in_transaction || !out.base.autocommit;
        if pinned || in_txn || !role::replica_may_run(&req.query) {
            return Err(role::only_reads());
        }
    }
    // `prepared` (psdb's newer field) is a hint only: bind variables decide.
    let (sql, params) = if req.bind_variables.is_empty() {
        (req.query, None)
    } else {
        match bind::bind(&req.query, &req.bind_variables, bind::Mode::Execute) {
            Ok(bound) => (bound.sql, Some(bound.params)),
            Err(e) => {
                // The reason quotes the client's values: answered, not logged.
                crate::log!(Level::Info, "bind variables refused", user = creds.user);
                let session = match &token {
                    Some(t) => out.unchanged(t),
                    None => out.fresh(),
                };
                return Ok(answered(session, bind_error(&e.0)));
            }
        }
    };
    let pinned = token.as_ref().is_some_and(|t| t.pinned);
    if params.is_none() && !pinned {
        if let Some((counter, name)) = counters::standalone(&sql) {
            admitted(app, creds).await?;
            return Ok(Start::Answered(count(&mut out, counter, name)));
        }
    }
    if params.is_none() {
        if let Some(set) = query_timeout::set_query_timeout(&sql) {
            admitted(app, creds).await?;
            return Ok(Start::Answered(set_query_timeout(
                &mut out,
                token.as_ref(),
                set,
            )));
        }
        if let Some(set) = olap::set_workload(&sql) {
            admitted(app, creds).await?;
            return Ok(Start::Answered(switch_workload(
                &mut out,
                token.as_ref(),
                set,
            )));
        }
    }
    let query = Query {
        before: opening.before,
        ..Query::new(sql, params, stream)
    };
    let start = connect(out, token, query).await?;
    match app.role {
        ShimRole::Replica => read_after_write(app, start).await,
        ShimRole::Primary => Ok(start),
    }
}

/// On a replica: a read of a session that carries a GTID runs once the
/// server has applied it; not within `FERRY_READ_AFTER_WRITE_WAIT_MS`, it is
/// answered 503 (role::behind) for Envoy to retry on the primary.
async fn read_after_write(app: &App, start: Start) -> Result<Start, ConnectError> {
    let Start::Run(mut ready) = start else {
        return Ok(start);
    };
    let gtid = ready
        .base
        .read_after_write
        .as_ref()
        .map(|r| r.read_after_write_gtid.clone())
        .unwrap_or_default();
    if gtid.is_empty() {
        return Ok(Start::Run(ready));
    }
    if gtid == gtid::PRIMARY_ONLY {
        // A write through Vitess: no position to wait for (sessions/gtid.rs).
        app.metrics.read_after_vitess_write();
        ready.release_clean();
        return Err(role::wrote_through_vitess());
    }
    let Some(conn) = ready.conn() else {
        return Ok(Start::Run(ready));
    };
    let started = Instant::now();
    match gtid::wait_for(conn, &gtid, app.read_after_write_wait).await {
        Ok(()) => {
            app.metrics.read_after_write(true);
            ready.waited = started.elapsed().as_secs_f64();
            Ok(Start::Run(ready))
        }
        Err(WaitError::NotReached(why)) => {
            app.metrics.read_after_write(false);
            // The wait's SELECT leaves nothing on the connection.
            ready.release_clean();
            crate::log!(
                Level::Info,
                "replica behind a session's writes",
                gtid = gtid,
                reason = why
            );
            Err(role::behind(app.read_after_write_wait))
        }
        Err(WaitError::Mysql(e)) => {
            drop(ready); // broken: the pool discards it
            Err(ConnectError::new(Code::Unavailable, lost_connection(&e)))
        }
    }
}

/// The session's connection for a request that runs nothing that could
/// leave state behind (Prepare): the pin if the session has one (queued
/// behind its other requests; a lost pin is answered as for a statement),
/// else any pooled connection, and never a new pin.
pub async fn start_without_statement(
    app: &App,
    creds: &Credentials,
    session: Option<Session>,
) -> Result<Start, ConnectError> {
    let (out, token) = match open(app, creds, session) {
        Ok(opened) => opened,
        Err(answered) => return Ok(*answered),
    };
    connect(out, token, Query::none()).await
}

/// An answer before anything ran.
fn answered(session: Session, error: RpcError) -> Start {
    Start::Answered(ExecuteResponse {
        session: Some(session),
        result: None,
        error: Some(error),
        timing: 0.0,
    })
}

/// Verifies the request's session: its sealed token (`None`: a new
/// session), or the answer for a refused one.
fn open<'a>(
    app: &'a App,
    creds: &'a Credentials,
    session: Option<Session>,
) -> Result<(SessionOut<'a>, Option<Token>), Box<Start>> {
    let session = session.unwrap_or_default();
    let base = session.vitess_session.unwrap_or_else(fresh_vitess);
    let opened = app.sealer.open(&session.signature, &base, creds);
    let out = SessionOut {
        app,
        creds,
        signature: if opened.is_ok() {
            session.signature
        } else {
            Vec::new()
        },
        id: match &opened {
            Ok(Some(t)) => t.id,
            _ => random(),
        },
        base: if opened.is_ok() { base } else { fresh_vitess() },
    };
    match opened {
        Ok(token) => Ok((out, token)),
        // Never executed; the client may go on with the fresh session it gets.
        Err(e) => {
            crate::log!(
                Level::Warn,
                "session refused",
                user = creds.user,
                reason = e
            );
            Err(Box::new(answered(out.fresh(), seal_error(&e))))
        }
    }
}

/// The statement's connection: the session's pin, or a pooled one.
async fn connect(
    out: SessionOut<'_>,
    token: Option<Token>,
    query: Query,
) -> Result<Start, ConnectError> {
    let app = out.app;
    match token {
        Some(t) if t.pinned => match app.pins.get(&t.id) {
            Some(pin) => {
                let state = match app.pins.enter(&pin).await {
                    Ok(state) => state,
                    Err(e) => return Ok(answered(out.unchanged(&t), pin_error(&e))),
                };
                if let Some(why) = state.lost.clone() {
                    return Ok(Start::Answered(lost(&out, &t, &query.sql, &why)));
                }
                if state.conn.is_none() {
                    // Released by the request ahead in the queue (its COMMIT):
                    // nothing is pinned any more.
                    drop(state);
                    return pooled(out, query).await;
                }
                let source = Source::Pinned { token: t, state };
                Ok(Start::Run(Ready::new(out, query, source)))
            }
            None => match app.pins.ended(&t.id) {
                // An older copy of a session whose pin ended normally (sent by
                // concurrent requests): nothing is pinned, run it unpinned.
                Some(Ended::Released) => pooled(out, query).await,
                Some(Ended::Lost(why)) => Ok(Start::Answered(lost(&out, &t, &query.sql, &why))),
                // Pinned in another shim, and Envoy brought it here: session affinity
                // is not at work on this gateway. Nothing runs; the session is kept
                // (the transaction is still open there).
                None if t.instance != app.instance && app.sealer.held_elsewhere(&t.holder) => {
                    crate::log!(
                        Level::Warn,
                        "pinned session of another shim",
                        user = out.creds.user
                    );
                    Ok(answered(out.as_received(), misrouted()))
                }
                None => {
                    let why = if t.instance == app.instance {
                        "the gateway no longer holds it"
                    } else {
                        "the shim that held it restarted or is gone"
                    };
                    Ok(Start::Answered(lost(&out, &t, &query.sql, why)))
                }
            },
        },
        _ => pooled(out, query).await,
    }
}

/// A statement of a session without a pin: a connection kept with the session's
/// state on it (sessions/settings_pool.rs), else any pooled connection; a pin is
/// admitted first if the statement means to make one.
async fn pooled(out: SessionOut<'_>, query: Query) -> Result<Start, ConnectError> {
    let (app, creds) = (out.app, out.creds);
    let vitess = app.pools.is_vitess();
    let workload = vitess.then(|| state::vtgate_workload(&out.base, query.stream));
    // No statement (Prepare): no state is set, none is needed.
    let key = match query.sql.is_empty() {
        true => None,
        false => state::key(&out.base, workload),
    };
    let kept = key.as_deref().and_then(|k| app.kept.take(creds, k));
    let carried = kept.is_some();
    let mut conn = match kept {
        Some(conn) => conn,
        None => {
            // None idle in the credential's pool: a kept one goes back first, so that
            // kept connections never make a request wait.
            if !app.kept.is_empty() && app.pools.idle(creds) == Some(0) {
                app.kept.give_one_back(creds, vitess);
            }
            app.pools.conn(creds).await?
        }
    };
    let may_pin = matches!(query.verdict, Verdict::Refuse(_));
    if may_pin {
        if let Err(e) = app.pins.admit(&creds.user) {
            conn.reset_connection(false); // nothing ran on it
            return Ok(Start::Answered(ExecuteResponse {
                session: Some(out.fresh()),
                result: None,
                error: Some(pin_error(&e)),
                timing: 0.0,
            }));
        }
    }
    let source = Source::Pooled {
        conn,
        may_pin,
        state: key,
        carried,
    };
    Ok(Start::Run(Ready::new(out, query, source)))
}

/// `SELECT ROW_COUNT()` / `SELECT FOUND_ROWS()` of a session without a pin,
/// answered from the session (sessions/counters.rs); nothing runs in MySQL.
fn count(out: &mut SessionOut<'_>, counter: Counter, name: String) -> ExecuteResponse {
    let result = counters::answer(counter, name, &out.base);
    // As after any statement that returns one row.
    out.base.found_rows = 1;
    let (in_txn, autocommit) = (out.base.in_transaction, out.base.autocommit);
    ExecuteResponse {
        session: Some(out.seal(false, in_txn, autocommit, Some(&result))),
        result: Some(result),
        error: None,
        timing: 0.0,
    }
}

/// `SET query_timeout = ms`: kept in the session (sessions/query_timeout.rs); nothing
/// runs in MySQL.
fn set_query_timeout(
    out: &mut SessionOut<'_>,
    token: Option<&Token>,
    set: Result<u64, String>,
) -> ExecuteResponse {
    let set = set
        .map(|ms| out.base.query_timeout = i64::try_from(ms).unwrap_or(i64::MAX))
        .map_err(|value| bad_query_timeout(&value));
    setting_answered(out, token, set)
}

/// `SET workload = ...`: vitess's setting, kept in the session's options;
/// nothing runs in MySQL and nothing is pinned (sessions/olap.rs).
fn switch_workload(
    out: &mut SessionOut<'_>,
    token: Option<&Token>,
    set: Result<Workload, String>,
) -> ExecuteResponse {
    let set = match set {
        Ok(workload) => {
            out.base
                .options
                .get_or_insert_with(Default::default)
                .workload = workload as i32;
            crate::log!(
                Level::Debug,
                "workload switched",
                user = out.creds.user,
                workload = workload.as_str_name()
            );
            Ok(())
        }
        Err(value) => Err(bad_workload(&value)),
    };
    setting_answered(out, token, set)
}

/// The answer to a setting the gateway keeps in the session itself: the session as
/// it now is (pin unchanged), an empty result or the setting's error.
fn setting_answered(
    out: &SessionOut<'_>,
    token: Option<&Token>,
    set: Result<(), RpcError>,
) -> ExecuteResponse {
    let session = match token {
        Some(t) => out.unchanged(t),
        None => out.fresh(),
    };
    let (result, error) = match set {
        Ok(()) => (Some(QueryResult::default()), None),
        Err(e) => (None, Some(e)),
    };
    ExecuteResponse {
        session: Some(session),
        result,
        error,
        timing: 0.0,
    }
}
