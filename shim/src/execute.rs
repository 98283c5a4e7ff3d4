//! The RPCs that run statements (Execute, StreamExecute) and the session
//! ones (CreateSession, CloseSession).
//!
//! Every request authenticates: an unpinned statement by getting a connection
//! from its credential's pool, a pinned one by its sealed session, whose
//! credential tag must match (sessions/seal.rs). A statement runs with the text
//! protocol, or with the binary one when it has bind variables (types/bind.rs:
//! typed parameters, never text in the SQL; rows/binary_row.rs turns its rows
//! into the text protocol's bytes). SQL errors are answered inside the
//! response (HTTP 200, `ExecuteResponse.error`), as PlanetScale does; only
//! failures to reach or log in to MySQL, and deadlines, are Connect errors.
//!
//! A statement has two seams. Where its connection comes from (`Source`): a
//! session without a pin borrows any pooled connection; one with a pin
//! (sessions/pins.rs) runs on its pinned connection. Where its rows go (`Sink`,
//! rows/sink.rs): kept for one answer (Execute) or sent on in bounded chunks as
//! they are read (StreamExecute, stream.rs). Everything else — pins, status
//! flags, the answer's session — is the same for both.
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
//! (mysql/cancel.rs). On a pin that ends the pin the way a dead connection does: the
//! transaction is rolled back and the session's next statement gets `aborted`
//! "transaction lost" — a statement of unknown outcome never lets a later
//! COMMIT go through as if nothing happened.
//!
//! Read replicas (mysql/role.rs, sessions/gtid.rs): on a `replica` shim only replay-safe reads
//! of sessions without a pin or transaction run, each after waiting for the
//! session's GTID; on a `primary` shim with `FERRY_TRACK_GTID`, a statement
//! that is not replay-safe and ends outside a transaction leaves the position
//! of its write in the session it answers.
use crate::connect::deadline::Deadline;
use crate::connect::error::ConnectError;
use crate::credentials::Credentials;
use crate::mysql::cancel;
use crate::mysql::errors::{
    lost_connection, sql_code, sql_message, ER_WRONG_ARGUMENTS, ER_WRONG_VALUE_FOR_VAR,
};
use crate::mysql::role::{self, Role as ShimRole};
use crate::olap;
use crate::rows::answer::Answer;
use crate::rows::binary_row;
use crate::rows::result::{EncodedRows, Overflow, ResultLimits};
use crate::rows::sink::{Gone, Sink};
use crate::rows::spill::{self, Pieces, Spill};
use crate::server::{self, App};
use crate::sessions::gtid::{self, WaitError};
use crate::sessions::pins::{retire, Ended, PinError, PinState};
use crate::sessions::seal::{random, SealError, SessionId, Token};
use crate::telemetry::log::Level;
use crate::telemetry::trace::{Statement, Trace};
use crate::types::bind::{self, BindError};
use crate::types::column_types::{describer, Describer};
use bytes::Bytes;
use ferry_proto::psdb::v1alpha1::{
    CloseSessionRequest, CloseSessionResponse, CreateSessionResponse, ExecuteRequest,
    ExecuteResponse, Role, Session, User,
};
use ferry_proto::vitess::query::execute_options::Workload;
use ferry_proto::vitess::query::QueryResult;
use ferry_proto::vitess::vtgate;
use ferry_proto::vitess::vtrpc::{Code, RpcError};
use ferry_wire::statement::{classify, first_keyword, Verdict};
use futures_util::TryStreamExt;
use mysql_async::consts::StatusFlags;
use mysql_async::prelude::{Protocol, Queryable};
use mysql_async::{Conn, DriverError, Params, Row as MysqlRow, Value};
use std::time::Instant;
use tokio::sync::{mpsc, oneshot, OwnedMutexGuard};

fn rpc_error(code: Code, message: impl Into<String>) -> RpcError {
    RpcError {
        message: message.into(),
        code: code as i32,
    }
}

/// A statement's MySQL error as the answer's `error` (vitess's code and message),
/// logged without the statement.
pub(crate) fn sql_error(se: &mysql_async::ServerError, creds: &Credentials) -> RpcError {
    let code = sql_code(se.code);
    crate::log!(
        Level::Info,
        "sql error",
        user = creds.user,
        errno = se.code,
        code = format!("{code:?}")
    );
    rpc_error(code, sql_message(&se.message, se.code, &se.state))
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
    /// The client's own signature (verified), for answers that hand the session back
    /// exactly as it came.
    signature: Vec<u8>,
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
        v.session_uuid = crate::sessions::seal::hex(&self.id);
        // Always present, as in vtgate's sessions: psdbproxy reads
        // `VitessSession.Options.Workload` on every statement without a nil check.
        v.options.get_or_insert_with(Default::default);
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

    /// The session exactly as the client sent it (not sealed again: it names its
    /// holder, which another shim must not replace with itself).
    fn as_received(&self) -> Session {
        Session {
            signature: self.signature.clone(),
            vitess_session: Some(self.base.clone()),
        }
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
        signature: Vec::new(),
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
    /// The result (its rows apart, encoded as they were read).
    Done(QueryResult, EncodedRows),
    Sql(mysql_async::ServerError),
    TooLarge(Overflow),
    /// The server asked for something the shim never does (LOAD DATA LOCAL).
    Unsupported(&'static str),
    /// The bound statement and its parameters did not fit (see types/bind.rs).
    Invalid(String),
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

/// Where a statement's connection comes from.
pub enum Source {
    /// Any pooled connection of the credential (armed for reset). `may_pin`:
    /// the text says the statement makes a transaction or session state, and
    /// a pin was admitted for it.
    Pooled { conn: Conn, may_pin: bool },
    /// The session's pinned connection, held by this request until it is done
    /// (the session's other requests queue behind it); `state.conn` is set.
    Pinned {
        token: Token,
        state: OwnedMutexGuard<PinState>,
    },
}

/// A statement that has its session verified and its connection in hand.
pub struct Ready {
    id: SessionId,
    base: vtgate::Session,
    sql: String,
    /// Bind variables' values, one per `?` of `sql`: run with the binary protocol.
    params: Option<Vec<Value>>,
    verdict: Verdict,
    source: Source,
    /// Seconds a replica waited for the session's GTID before it runs.
    waited: f64,
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
        let out = SessionOut {
            app,
            creds,
            id: self.id,
            base: self.base,
            signature: Vec::new(),
        };
        out.seal(self.pinned, in_txn, autocommit, None)
    }
}

impl Ready {
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
        match &mut self.source {
            Source::Pooled { conn, .. } => Some(conn),
            Source::Pinned { state, .. } => state.conn.as_mut(),
        }
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

/// What may stop a statement before it finishes.
pub struct Stop {
    pub deadline: Deadline,
    /// A stream's channel: closed when the client went away.
    pub watch: Option<mpsc::Sender<Bytes>>,
}

impl Stop {
    /// A unary answer's: its deadline, and `watch`, closed when its client goes
    /// away (the request's future was dropped; see server.rs).
    pub fn unary(deadline: Deadline, watch: Option<mpsc::Sender<Bytes>>) -> Stop {
        Stop { deadline, watch }
    }

    async fn client_gone(&self) {
        match &self.watch {
            Some(tx) => tx.closed().await,
            None => std::future::pending().await,
        }
    }
}

/// Why a statement was stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Interrupt {
    Deadline,
    ClientGone,
}

impl Interrupt {
    fn reason(self) -> &'static str {
        match self {
            Interrupt::Deadline => "a statement was stopped: its deadline passed",
            Interrupt::ClientGone => "a statement was stopped: its client went away",
        }
    }

    fn error(self, stop: &Stop) -> ConnectError {
        match self {
            Interrupt::Deadline => stop.deadline.error(),
            Interrupt::ClientGone => ConnectError::new(Code::Canceled, "the client went away"),
        }
    }
}

/// How a statement ended on its connection.
enum Ran {
    /// It finished (perhaps with an SQL error); the status it left.
    Done(Outcome, (bool, bool)),
    /// The connection failed (I/O, protocol).
    Failed(mysql_async::Error),
    Stopped(Interrupt),
}

/// Why reading a statement's result ended early.
enum Fail {
    Mysql(mysql_async::Error),
    Gone,
}

impl From<mysql_async::Error> for Fail {
    fn from(e: mysql_async::Error) -> Self {
        Fail::Mysql(e)
    }
}

impl From<Gone> for Fail {
    fn from(_: Gone) -> Self {
        Fail::Gone
    }
}

/// Execute: one statement, one answer (and its span, when traced). With `commit`,
/// a large answer goes out in pieces as it is read (rows/spill.rs): the body's receiver
/// is sent through `commit`, and what is returned is only the span's.
pub async fn execute(
    app: &App,
    creds: &Credentials,
    req: ExecuteRequest,
    deadline: Deadline,
    watch: Option<mpsc::Sender<Bytes>>,
    trace: &Trace,
    commit: Option<oneshot::Sender<Pieces>>,
) -> Result<Answer, ConnectError> {
    let mut span = trace.statement(&req.query);
    let (answer, streamed) =
        execute_spanned(app, creds, req, deadline, watch, commit, &mut span).await;
    // An Execute's rows travel encoded, beside its message: their count is the answer's.
    let rows = streamed.or_else(|| {
        answer
            .as_ref()
            .ok()
            .filter(|a| a.message.result.is_some())
            .map(|a| a.rows.count as u64)
    });
    span.finish(answer.as_ref().map(|a| &a.message), rows);
    answer
}

/// The answer, and the rows taken when it went out in pieces.
async fn execute_spanned(
    app: &App,
    creds: &Credentials,
    req: ExecuteRequest,
    deadline: Deadline,
    watch: Option<mpsc::Sender<Bytes>>,
    commit: Option<oneshot::Sender<Pieces>>,
    span: &mut Statement,
) -> (Result<Answer, ConnectError>, Option<u64>) {
    let asked = Instant::now();
    let ready = match deadline.within(start(app, creds, req)).await {
        Ok(Ok(Start::Answered(resp))) => return (Ok(resp.into()), None),
        Ok(Ok(Start::Run(ready))) => ready,
        Ok(Err(e)) | Err(e) => return (Err(e), None),
    };
    ready.traced(span, asked, app.role);
    let stop = Stop::unary(deadline, watch);
    let Some(commit) = commit.filter(|_| app.unary_spill.after > 0) else {
        let mut sink = Sink::collect(app.result_limits);
        return (run(app, creds, ready, &mut sink, &stop).await, None);
    };
    let as_is = ready.as_is();
    let spill = Spill::new(app.result_limits, app.unary_spill, commit);
    let mut sink = Sink::Spill(Box::new(spill));
    let answer = run(app, creds, ready, &mut sink, &stop).await;
    let Sink::Spill(spill) = sink else {
        return (answer, None);
    };
    if !spill.committed() {
        return (answer, None);
    }
    // The 200 is out: the rest of the message, whatever happened. Nobody to tell if
    // the client went away (the statement was stopped).
    let message = match answer {
        Ok(answer) => answer.message,
        Err(e) => spill::failed(e, as_is.seal(app, creds)),
    };
    let _ = spill.finish(message.clone()).await;
    // Counted here, not when its 200 left: with the code it ended with.
    let code = message
        .error
        .as_ref()
        .map_or("ok", |e| server::Outcome::of(e.code).0);
    app.metrics
        .request(ferry_wire::rpc::Method::Execute.name(), code);
    (Ok(message.into()), Some(spill.rows_taken()))
}

/// Verifies the session and gets the statement its connection. Connect
/// errors (no connection: 401, 429, 503) come before anything ran.
pub async fn start(
    app: &App,
    creds: &Credentials,
    req: ExecuteRequest,
) -> Result<Start, ConnectError> {
    let (mut out, token) = match open(app, creds, req.session) {
        Ok(opened) => opened,
        Err(answered) => return Ok(*answered),
    };
    if app.role == ShimRole::Replica {
        // The filter sends a replica reads outside transactions only.
        let pinned = token.as_ref().is_some_and(|t| t.pinned);
        if pinned || out.base.in_transaction || !role::replica_may_run(&req.query) {
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
                return Ok(answered(session, bind_error(&e)));
            }
        }
    };
    if params.is_none() {
        if let Some(set) = olap::set_workload(&sql) {
            return Ok(Start::Answered(switch_workload(
                &mut out,
                token.as_ref(),
                set,
            )));
        }
    }
    let verdict = classify(&sql);
    let start = connect(out, token, sql, params, verdict).await?;
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

/// Whether a statement that ended this way committed a write whose position
/// the session should carry: not replay-safe and outside a transaction
/// (an autocommit write, a COMMIT). A statement that wrote nothing only
/// re-reads the connection's last position, which is harmless.
fn may_have_committed(sql: &str, in_txn: bool) -> bool {
    !in_txn && !ferry_wire::replay::replay_safe(sql)
}

/// Puts the position of the connection's last write in the session's answer
/// (`FERRY_TRACK_GTID` on a primary: sessions/gtid.rs). One extra round trip.
async fn note_write_position(out: &mut SessionOut<'_>, conn: &mut Conn) {
    match gtid::position(conn).await {
        Ok(Some(pos)) => {
            let flavour = gtid::Flavour::of(conn.server_version());
            let raw = out
                .base
                .read_after_write
                .get_or_insert_with(Default::default);
            raw.read_after_write_gtid = gtid::merge(flavour, &raw.read_after_write_gtid, &pos);
        }
        Ok(None) => {}
        Err(e) => crate::log!(
            Level::Warn,
            "cannot read the GTID of a write",
            user = out.creds.user,
            error = e
        ),
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
    connect(out, token, String::new(), None, Verdict::Clean).await
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

/// Bind variables that do not fit the statement: `invalid_argument`, worded
/// as a MySQL error (ER_WRONG_ARGUMENTS) for clients that map it to one.
fn bind_error(e: &BindError) -> RpcError {
    rpc_error(Code::InvalidArgument, ER_WRONG_ARGUMENTS.message(&e.0))
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
    sql: String,
    params: Option<Vec<Value>>,
    verdict: Verdict,
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
                    return Ok(Start::Answered(lost(&out, &t, &sql, &why)));
                }
                if state.conn.is_none() {
                    // Released by the request ahead in the queue (its COMMIT):
                    // nothing is pinned any more.
                    drop(state);
                    return pooled(out, sql, params, verdict).await;
                }
                Ok(Start::Run(Ready {
                    id: out.id,
                    base: out.base,
                    sql,
                    params,
                    verdict,
                    source: Source::Pinned { token: t, state },
                    waited: 0.0,
                }))
            }
            None => match app.pins.ended(&t.id) {
                // An older copy of a session whose pin ended normally (sent by
                // concurrent requests): nothing is pinned, run it unpinned.
                Some(Ended::Released) => pooled(out, sql, params, verdict).await,
                Some(Ended::Lost(why)) => Ok(Start::Answered(lost(&out, &t, &sql, &why))),
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
                    Ok(Start::Answered(lost(&out, &t, &sql, why)))
                }
            },
        },
        _ => pooled(out, sql, params, verdict).await,
    }
}

/// A statement of a session without a pin: any pooled connection; a pin is
/// admitted first if the statement means to make one.
async fn pooled(
    out: SessionOut<'_>,
    sql: String,
    params: Option<Vec<Value>>,
    verdict: Verdict,
) -> Result<Start, ConnectError> {
    let (app, creds) = (out.app, out.creds);
    let mut conn = app.pools.conn(creds).await?;
    let may_pin = matches!(verdict, Verdict::Refuse(_));
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
    Ok(Start::Run(Ready {
        id: out.id,
        base: out.base,
        sql,
        params,
        verdict,
        source: Source::Pooled { conn, may_pin },
        waited: 0.0,
    }))
}

/// `SET workload = ...`: vitess's setting, kept in the session's options;
/// nothing runs in MySQL and nothing is pinned (olap.rs).
fn switch_workload(
    out: &mut SessionOut<'_>,
    token: Option<&Token>,
    set: Result<Workload, String>,
) -> ExecuteResponse {
    let (result, error) = match set {
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
            (Some(QueryResult::default()), None)
        }
        // As vitess words it; the errno is MySQL's ER_WRONG_VALUE_FOR_VAR.
        Err(value) => (
            None,
            Some(rpc_error(
                Code::InvalidArgument,
                ER_WRONG_VALUE_FOR_VAR.message(&format!("invalid workload: {value}")),
            )),
        ),
    };
    let session = match token {
        Some(t) => out.unchanged(t),
        None => out.fresh(),
    };
    ExecuteResponse {
        session: Some(session),
        result,
        error,
        timing: 0.0,
    }
}

/// Runs a ready statement into `sink` and answers with the session it
/// leaves: the pin is kept, made or released as the statement left the
/// connection. `Err` is a Connect error after the statement started: its
/// connection failed (unpinned), or it was stopped (`stop`).
pub async fn run(
    app: &App,
    creds: &Credentials,
    ready: Ready,
    sink: &mut Sink,
    stop: &Stop,
) -> Result<Answer, ConnectError> {
    let Ready {
        id,
        base,
        sql,
        params,
        verdict,
        source,
        waited,
    } = ready;
    let mut out = SessionOut {
        app,
        creds,
        id,
        base,
        signature: Vec::new(),
    };
    let answer = match source {
        Source::Pinned { token, state } => {
            run_pinned(&mut out, token, state, &sql, params, verdict, sink, stop).await
        }
        Source::Pooled { conn, may_pin } => {
            run_pooled(&mut out, conn, may_pin, &sql, params, verdict, sink, stop).await
        }
    };
    // A replica's wait for the session's writes is database time too.
    answer.map(|mut resp| {
        resp.message.timing += waited;
        resp
    })
}

#[allow(clippy::too_many_arguments)]
async fn run_pinned(
    out: &mut SessionOut<'_>,
    t: Token,
    mut state: OwnedMutexGuard<PinState>,
    sql: &str,
    params: Option<Vec<Value>>,
    verdict: Verdict,
    sink: &mut Sink,
    stop: &Stop,
) -> Result<Answer, ConnectError> {
    let (app, creds) = (out.app, out.creds);
    let limits = app.result_limits;
    let Some(conn) = state.conn.as_mut() else {
        // start() hands out a pin only with its connection.
        return Ok(lost(out, &t, sql, "the gateway no longer holds it").into());
    };
    let started = Instant::now();
    let describer = describer(app, creds);
    let ran = guarded(conn, sql, params, None, &describer, sink, stop).await;
    let timing = started.elapsed().as_secs_f64();
    let (outcome, (in_txn, autocommit)) = match ran {
        Ran::Done(outcome, status) => (outcome, status),
        Ran::Failed(e) => {
            let why = format!("the MySQL connection failed: {e}");
            state.conn = None;
            state.lost = Some(why.clone());
            drop(state);
            app.pins.end(&t.id, Ended::Lost(why.clone()));
            crate::log!(Level::Warn, "pin lost", user = creds.user, reason = why);
            return Ok(lost(out, &t, sql, &why).into());
        }
        Ran::Stopped(why) => {
            // The pin goes as a dead connection's does (see the module comment).
            let reason = why.reason().to_owned();
            let conn = state.conn.take();
            state.lost = Some(reason.clone());
            drop(state);
            app.pins.end(&t.id, Ended::Lost(reason.clone()));
            crate::log!(Level::Info, "pin lost", user = creds.user, reason = reason);
            if let Some(conn) = conn {
                cancel::stop(&app.pools, creds, conn, &reason).await;
            }
            return Err(why.error(stop));
        }
    };
    state.in_transaction = in_txn;
    if app.track_gtid && may_have_committed(sql, in_txn) {
        if let Some(conn) = state.conn.as_mut() {
            note_write_position(out, conn).await;
        }
    }
    state.sticky |=
        leaves_sticky_state(verdict) && !matches!(outcome, Outcome::Sql(_) | Outcome::Invalid(_));
    let keep = in_txn || !autocommit || state.sticky;
    if !keep {
        if let Some(conn) = state.conn.take() {
            retire(conn, false);
        }
        drop(state);
        app.pins.end(&t.id, Ended::Released);
    }
    Ok(respond(
        out, keep, in_txn, autocommit, outcome, timing, creds, limits,
    ))
}

/// A statement on a pooled connection; pinned if it leaves a transaction or
/// session state.
#[allow(clippy::too_many_arguments)]
async fn run_pooled(
    out: &mut SessionOut<'_>,
    mut conn: Conn,
    may_pin: bool,
    sql: &str,
    params: Option<Vec<Value>>,
    verdict: Verdict,
    sink: &mut Sink,
    stop: &Stop,
) -> Result<Answer, ConnectError> {
    let (app, creds) = (out.app, out.creds);
    let started = Instant::now();
    // A pooled connection's LAST_INSERT_ID() is whoever used it last; the
    // session's own (sealed) value is what a direct connection would give.
    let describer = describer(app, creds);
    let last_insert_id = Some(out.base.last_insert_id);
    let ran = guarded(
        &mut conn,
        sql,
        params,
        last_insert_id,
        &describer,
        sink,
        stop,
    )
    .await;
    let timing = started.elapsed().as_secs_f64();
    let (outcome, (in_txn, autocommit)) = match ran {
        Ran::Done(outcome, status) => (outcome, status),
        Ran::Failed(e) => {
            // The connection is broken (I/O or protocol): the pool discards it.
            crate::log!(
                Level::Error,
                "mysql connection failed during a query",
                user = creds.user,
                error = e
            );
            return Err(ConnectError::new(Code::Unavailable, lost_connection(&e)));
        }
        Ran::Stopped(why) => {
            cancel::stop(&app.pools, creds, conn, why.reason()).await;
            return Err(why.error(stop));
        }
    };
    if app.track_gtid && may_have_committed(sql, in_txn) {
        note_write_position(out, &mut conn).await;
    }
    let sticky =
        leaves_sticky_state(verdict) && !matches!(outcome, Outcome::Sql(_) | Outcome::Invalid(_));
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
            }
            .into());
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

/// Runs the statement (after restoring the session's LAST_INSERT_ID() on a
/// pooled connection) and reads the status it left, unless `stop` comes
/// first. When it does, the statement's future is dropped midway: the
/// connection is left inside a result and must be stopped (mysql/cancel.rs).
async fn guarded(
    conn: &mut Conn,
    sql: &str,
    params: Option<Vec<Value>>,
    last_insert_id: Option<u64>,
    describer: &Describer<'_>,
    sink: &mut Sink,
    stop: &Stop,
) -> Ran {
    let work = async {
        if let Some(id) = last_insert_id {
            restore_last_insert_id(conn, sql, id).await?;
        }
        let outcome = run_statement(conn, sql, params, describer, sink).await?;
        Ok::<_, Fail>((outcome, txn_status(conn).await?))
    };
    // Unbiased on purpose: a result that is always ready to read must not
    // starve the deadline.
    tokio::select! {
        done = work => match done {
            Ok((outcome, status)) => Ran::Done(outcome, status),
            Err(Fail::Mysql(e)) => Ran::Failed(e),
            Err(Fail::Gone) => Ran::Stopped(Interrupt::ClientGone),
        },
        () = stop.deadline.expired() => Ran::Stopped(Interrupt::Deadline),
        () = stop.client_gone() => Ran::Stopped(Interrupt::ClientGone),
    }
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
) -> Answer {
    let mut rows = EncodedRows::default();
    let (result, error) = match outcome {
        Outcome::Done(result, encoded) => {
            rows = encoded;
            (Some(result), None)
        }
        Outcome::Sql(se) => (None, Some(sql_error(&se, creds))),
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
        Outcome::Invalid(msg) => (None, Some(rpc_error(Code::InvalidArgument, msg))),
    };
    Answer {
        message: ExecuteResponse {
            session: Some(out.seal(pinned, in_txn, autocommit, result.as_ref())),
            result,
            error,
            timing,
        },
        rows,
    }
}

/// The answer for a session whose pin was lost. A plain ROLLBACK succeeds (the
/// transaction is already rolled back) and ends the session's claim to a pin;
/// anything else fails with `aborted` and, inside a transaction, the session
/// stays marked so every later statement fails the same way until ROLLBACK or
/// CloseSession. Session state without a transaction is simply gone: one
/// error, then the session goes on unpinned.
fn lost(out: &SessionOut<'_>, t: &Token, sql: &str, why: &str) -> ExecuteResponse {
    if ferry_wire::statement::is_plain_rollback(sql) {
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

/// A pinned session that reached a shim other than its holder.
fn misrouted() -> RpcError {
    rpc_error(
        Code::Unavailable,
        "this session is pinned to another shim (an open transaction or session state), and this gateway did not route the request there: session affinity needs Envoy to hold request headers for the Ferry filter (allow_on_headers_stop_iteration) and its stateful_session filter; nothing was executed, the session is unchanged",
    )
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

/// Runs one query with the text protocol, reading its rows one by one into
/// the sink. Only the first result set is answered; later ones
/// (multi-statement queries, CALL) are read and dropped, but an error in any
/// of them is the answer, since part of the query failed. `Err` means the
/// connection failed, or the sink's client went away.
async fn run_statement(
    conn: &mut Conn,
    sql: &str,
    params: Option<Vec<Value>>,
    describer: &Describer<'_>,
    sink: &mut Sink,
) -> Result<Outcome, Fail> {
    let mut qr = QueryResult::default();
    let server_version = conn.server_version();
    let first = async {
        match params {
            None => {
                let result = conn.query_iter(sql).await?;
                read_first(result, &mut qr, describer, server_version, sink).await
            }
            // COM_STMT_PREPARE, COM_STMT_EXECUTE, COM_STMT_CLOSE: a statement
            // is never reused, because MySQL 8 fixes the type of a parameter
            // that its context does not type (`SELECT ?`) at the statement's
            // first execution and converts later values to it ('2x' → 2), so
            // a cached statement would answer differently for the same
            // request. Nothing is left prepared on the connection either
            // (max_prepared_stmt_count is server-wide).
            Some(params) => {
                let stmt = conn.prep(sql).await?;
                let read = async {
                    let result = conn.exec_iter(&stmt, Params::Positional(params)).await?;
                    read_first(result, &mut qr, describer, server_version, sink).await
                }
                .await;
                match &read {
                    // The connection is sound: close the statement on it.
                    Ok(())
                    | Err(Fail::Mysql(
                        mysql_async::Error::Server(_)
                        | mysql_async::Error::Driver(DriverError::StmtParamsMismatch { .. }),
                    )) => conn.close(stmt).await?,
                    // It failed or is being stopped: it goes, with its statement.
                    Err(_) => {}
                }
                read
            }
        }
    };
    match first.await {
        Ok(()) => describer.statement_ran(sql),
        Err(Fail::Mysql(mysql_async::Error::Server(se))) => return Ok(Outcome::Sql(se)),
        // The server counts the statement's `?` otherwise than types/bind.rs did (a
        // session with NO_BACKSLASH_ESCAPES read a string differently):
        // refused before anything was sent.
        Err(Fail::Mysql(mysql_async::Error::Driver(DriverError::StmtParamsMismatch {
            required,
            supplied,
        }))) => {
            return Ok(Outcome::Invalid(ER_WRONG_ARGUMENTS.message(
                &format!("the server reads {required} placeholders in the statement, and {supplied} values were bound"),
            )))
        }
        // No infile handler is installed, on purpose: the shim's files are not
        // the client's. mysql_async drops the connection; the pool replaces it.
        Err(Fail::Mysql(mysql_async::Error::Driver(DriverError::LocalInfile(_)))) => {
            return Ok(Outcome::Unsupported(
                "LOAD DATA LOCAL INFILE is not supported",
            ))
        }
        Err(e) => return Err(e),
    }
    if let Some(overflow) = sink.overflow() {
        return Ok(Outcome::TooLarge(overflow));
    }
    let rows = sink.take_rows();
    Ok(Outcome::Done(qr, rows))
}

/// Reads the first result set of a statement into the sink (its rows one
/// by one; a binary-protocol row is turned into text bytes first), or the
/// numbers of its OK packet; the later result sets are read and dropped.
async fn read_first<P: Protocol + Unpin>(
    mut result: mysql_async::QueryResult<'_, '_, P>,
    qr: &mut QueryResult,
    describer: &Describer<'_>,
    server_version: (u16, u16, u16),
    sink: &mut Sink,
) -> Result<(), Fail> {
    let binary =
        std::any::TypeId::of::<P>() == std::any::TypeId::of::<mysql_async::BinaryProtocol>();
    match result.columns() {
        Some(columns) if !columns.is_empty() => {
            qr.fields = describer.fields(&columns, server_version).await;
            sink.columns(&qr.fields).await?;
            if let Some(mut rows) = result.stream::<MysqlRow>().await? {
                while let Some(mut row) = rows.try_next().await? {
                    if binary {
                        binary_row::to_text(&mut row);
                    }
                    sink.row(&row).await?;
                }
            }
            sink.end().await?;
        }
        _ => {
            // An OK packet: read its numbers before later results replace them.
            qr.rows_affected = result.affected_rows();
            qr.insert_id = result.last_insert_id().unwrap_or(0);
            qr.insert_id_changed = qr.insert_id != 0;
            qr.info = result.info().into_owned();
        }
    }
    result.drop_result().await?;
    Ok(())
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
    fn which_statements_leave_a_position() {
        assert!(may_have_committed("INSERT INTO t VALUES (1)", false));
        assert!(may_have_committed("COMMIT", false));
        assert!(
            !may_have_committed("INSERT INTO t VALUES (1)", true),
            "not yet committed"
        );
        assert!(!may_have_committed("BEGIN", true));
        assert!(!may_have_committed("SELECT * FROM t", false), "a read");
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
