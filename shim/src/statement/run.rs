//! Running a statement on the connection it was given: the statement itself
//! (text protocol, or the binary one when it has bind variables: types/bind.rs
//! gives typed parameters, never text in the SQL; rows/binary_row.rs turns its
//! rows into the text protocol's bytes), its rows into a sink, the status it
//! leaves, and the position of its write (`FERRY_TRACK_GTID`). SQL errors are
//! answered inside the response (HTTP 200, `ExecuteResponse.error`), as
//! PlanetScale does; only failures to reach MySQL, and deadlines, are Connect
//! errors.
use super::respond::{respond, Finished};
use super::session_out::SessionOut;
use super::source::{leaves_sticky_state, Left};
use super::start::{Query, Ready};
use super::stop::{Interrupt, Stop};
use crate::app::App;
use crate::connect::error::ConnectError;
use crate::credentials::Credentials;
use crate::errors::mysql::ER_WRONG_ARGUMENTS;
use crate::rows::answer::Answer;
use crate::rows::binary_row;
use crate::rows::gone::Gone;
use crate::rows::sink::Sink;
use crate::sessions::gtid::{self, Flavour};
use crate::sessions::state;
use crate::telemetry::log::Level;
use crate::types::column_types::Describer;
use ferry_proto::vitess::query::QueryResult;
use ferry_wire::statement::Verdict;
use futures_util::TryStreamExt;
use mysql_async::consts::StatusFlags;
use mysql_async::prelude::{Protocol, Queryable};
use mysql_async::{Conn, DriverError, Params, Row as MysqlRow, Value};
use std::time::Instant;

/// Runs a ready statement into `sink` and answers with the session it
/// leaves: the pin is kept, made or released as the statement left the
/// connection (source.rs). `Err` is a Connect error after the statement
/// started: its connection failed (unpinned), or it was stopped (`stop`).
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
        query:
            Query {
                sql,
                params,
                verdict,
                assigned,
                stream,
                before,
            },
        mut source,
        waited,
    } = ready;
    let mut out = SessionOut::new(app, creds, id, base);
    let pooled = source.is_pooled();
    // The state a pooled connection has for the statement: set now, or already on
    // one from the settings pool (sessions/settings_pool.rs).
    let (state_key, carried) = source.take_state();
    let Some(conn) = source.conn() else {
        return source.failed(&out, &sql, None).map(Answer::from);
    };
    let flavour = Flavour::of(conn.server_version());
    // On Vitess, vtgate's workload (sessions/state.rs): OLAP for a stream.
    let workload = app
        .pools
        .is_vitess()
        .then(|| state::vtgate_workload(&out.base, stream));
    let around = Around {
        // A pooled connection's LAST_INSERT_ID() is whoever used it last; the
        // session's own (sealed) value is what a direct connection would give.
        last_insert_id: pooled.then_some(out.base.last_insert_id),
        // So are its variables and settings (a pin has kept its own).
        apply: (pooled && !carried)
            .then(|| state::apply_sql(&out.base, flavour, workload))
            .flatten(),
        before,
        capture: assigned.as_ref().map(|a| state::capture_sql(a, flavour)),
        // Without a pin the session keeps FOUND_ROWS() (sessions/counters.rs); the
        // total a SQL_CALC_FOUND_ROWS counted is only the server's to tell.
        found_rows: pooled,
    };
    let applied = around.apply.is_some();
    if state_key.is_some() {
        app.metrics.session_state(carried);
    }
    let started = Instant::now();
    let describer = Describer {
        cache: &app.column_types,
        pools: &app.pools,
        creds,
    };
    let ran = until_stopped(conn, &sql, params, around, &describer, sink, stop).await;
    let timing = started.elapsed().as_secs_f64();
    let (finished, (in_txn, autocommit)) = match ran {
        Ran::Done(
            finished,
            status,
            After {
                captured,
                found_rows,
            },
        ) => {
            if let Finished::Done(qr, rows) = &finished {
                if !qr.fields.is_empty() {
                    let read = (rows.count as u64).max(sink.rows_sent());
                    out.base.found_rows = found_rows.unwrap_or(read);
                }
            }
            let stored = match (captured, &assigned) {
                (Some(row), Some(assigned)) => {
                    let columns = row.columns();
                    state::store(
                        &mut out.base,
                        assigned,
                        &columns,
                        &row.unwrap(),
                        app.state.max_bytes,
                    )
                    .err()
                }
                _ => None,
            };
            match stored {
                Some(unkept) => (Finished::StateUnkept(unkept), status),
                None => (finished, status),
            }
        }
        Ran::Failed(e) => return source.failed(&out, &sql, Some(&e)).map(Answer::from),
        Ran::Stopped(why) => {
            let killed = source.stopped(app, creds, why.reason()).await;
            return Err(why.error(stop, killed));
        }
    };
    if app.track_gtid && may_have_committed(&sql, in_txn) {
        if let Some(conn) = source.conn() {
            note_write_position(&mut out, conn, app.pools.is_vitess()).await;
        }
    }
    let left = Left {
        in_txn,
        autocommit,
        sticky: leaves_sticky_state(verdict)
            && !matches!(finished, Finished::Sql(_) | Finished::Invalid(_)),
    };
    let dirty = verdict != Verdict::Clean || applied || carried;
    // Kept for the session's next request when it carries exactly the session's
    // state: a clean statement that assigned nothing and succeeded.
    let keep = state_key.filter(|_| {
        verdict == Verdict::Clean
            && assigned.is_none()
            && !in_txn
            && matches!(finished, Finished::Done(..))
    });
    let pinned = match source.settle(&out, &sql, left, dirty, keep) {
        Ok(pinned) => pinned,
        Err(mut refused) => {
            refused.timing = timing + waited;
            return Ok((*refused).into());
        }
    };
    // A replica's wait for the session's writes is database time too.
    let timing = timing + waited;
    Ok(respond(
        &out,
        pinned,
        left,
        finished,
        timing,
        app.result_limits,
    ))
}

/// What runs around a statement on its connection.
struct Around {
    /// The session's LAST_INSERT_ID(), set again when the statement reads it.
    last_insert_id: Option<u64>,
    /// The `SET` that gives the connection the session's state, first.
    apply: Option<String>,
    /// Then a statement the caller asked for (`Opening::before`).
    before: Option<&'static str>,
    /// The query that reads back what the statement assigned, after it.
    capture: Option<String>,
    /// Read `FOUND_ROWS()` after it, if it returned rows and asked the server to count
    /// them all (`SQL_CALC_FOUND_ROWS`).
    found_rows: bool,
}

/// What was read after the statement.
struct After {
    captured: Option<MysqlRow>,
    found_rows: Option<u64>,
}

/// A statement that asks the server to count all its rows.
fn calc_found_rows(sql: &str) -> bool {
    ferry_wire::lexer::Lexer::new(sql)
        .any(|t| matches!(t, ferry_wire::lexer::Tok::Word(w) if w.eq_ignore_ascii_case("SQL_CALC_FOUND_ROWS")))
}

/// How a statement ended on its connection.
enum Ran {
    /// It finished (perhaps with an SQL error); the status it left, and the
    /// state it assigned, read back.
    Done(Finished, (bool, bool), After),
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

/// The server status after a statement: (in a transaction, autocommit on).
/// It comes with the last OK packet; an error packet carries none, and after
/// an error the transaction may have ended (a deadlock rolls it back) or,
/// in a multi-statement query, begun: then `SELECT 1` fetches a fresh status
/// (its result's terminator carries one). A SELECT, because on Vitess in OLAP
/// (a stream) vttablet streams nothing else: `DO 0` was refused there.
async fn txn_status(conn: &mut Conn) -> Result<(bool, bool), mysql_async::Error> {
    if conn.last_ok_packet().is_none() {
        conn.query_drop("SELECT 1").await?;
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

/// Whether a statement that ended this way committed a write whose position
/// the session should carry: not replay-safe and outside a transaction
/// (an autocommit write, a COMMIT). A statement that wrote nothing only
/// re-reads the connection's last position, which is harmless.
fn may_have_committed(sql: &str, in_txn: bool) -> bool {
    !in_txn && !ferry_wire::replay::replay_safe(sql)
}

/// Puts the position of the connection's last write in the session's answer
/// (`FERRY_TRACK_GTID` on a primary: sessions/gtid.rs). One extra round trip; on
/// Vitess none: the session is marked `PRIMARY_ONLY` (there is no position).
async fn note_write_position(out: &mut SessionOut<'_>, conn: &mut Conn, vitess: bool) {
    if vitess {
        out.base
            .read_after_write
            .get_or_insert_with(Default::default)
            .read_after_write_gtid = gtid::PRIMARY_ONLY.to_owned();
        return;
    }
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

/// Runs the statement (after restoring the session's LAST_INSERT_ID() on a
/// pooled connection) and reads the status it left, unless `stop` comes
/// first. When it does, the statement's future is dropped midway: the
/// connection is left inside a result and must be stopped (mysql/cancel.rs).
async fn until_stopped(
    conn: &mut Conn,
    sql: &str,
    params: Option<Vec<Value>>,
    around: Around,
    describer: &Describer<'_>,
    sink: &mut Sink,
    stop: &Stop,
) -> Ran {
    let work = async {
        if let Some(id) = around.last_insert_id {
            restore_last_insert_id(conn, sql, id).await?;
        }
        // The session's state, then what the caller asked for (a batch's isolation
        // level). Refused by this server (a setting it does not know, vtgate): answered
        // as the statement's SQL error; nothing else ran.
        for set in around.apply.as_deref().into_iter().chain(around.before) {
            if let Err(mysql_async::Error::Server(se)) = conn.query_drop(set).await {
                let after = After {
                    captured: None,
                    found_rows: None,
                };
                return Ok((Finished::Sql(se), txn_status(conn).await?, after));
            }
        }
        let outcome = run_statement(conn, sql, params, describer, sink).await?;
        let status = txn_status(conn).await?;
        let done = matches!(outcome, Finished::Done(..));
        // The text is read for it only after a statement that returned rows.
        let rows = matches!(&outcome, Finished::Done(qr, _) if !qr.fields.is_empty());
        let found_rows = match around.found_rows && rows && calc_found_rows(sql) {
            true => conn.query_first::<u64, _>("SELECT FOUND_ROWS()").await?,
            false => None,
        };
        let captured = match (&around.capture, done) {
            (Some(select), true) => conn.query_first::<MysqlRow, _>(select).await?,
            _ => None,
        };
        let after = After {
            captured,
            found_rows,
        };
        Ok::<_, Fail>((outcome, status, after))
    };
    // Unbiased on purpose: a result that is always ready to read must not
    // starve the deadline.
    tokio::select! {
        done = work => match done {
            Ok((outcome, status, after)) => Ran::Done(outcome, status, after),
            Err(Fail::Mysql(e)) => Ran::Failed(e),
            Err(Fail::Gone) => Ran::Stopped(Interrupt::ClientGone),
        },
        () = stop.deadline.expired() => Ran::Stopped(Interrupt::Deadline),
        () = stop.client_gone() => Ran::Stopped(Interrupt::ClientGone),
    }
}

async fn run_statement(
    conn: &mut Conn,
    sql: &str,
    params: Option<Vec<Value>>,
    describer: &Describer<'_>,
    sink: &mut Sink,
) -> Result<Finished, Fail> {
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
        Err(Fail::Mysql(mysql_async::Error::Server(se))) => return Ok(Finished::Sql(se)),
        // The server counts the statement's `?` otherwise than types/bind.rs did (a
        // session with NO_BACKSLASH_ESCAPES read a string differently):
        // refused before anything was sent.
        Err(Fail::Mysql(mysql_async::Error::Driver(DriverError::StmtParamsMismatch {
            required,
            supplied,
        }))) => {
            return Ok(Finished::Invalid(ER_WRONG_ARGUMENTS.message(
                &format!("the server reads {required} placeholders in the statement, and {supplied} values were bound"),
            )))
        }
        // No infile handler is installed, on purpose: the shim's files are not
        // the client's. mysql_async drops the connection; the pool replaces it.
        Err(Fail::Mysql(mysql_async::Error::Driver(DriverError::LocalInfile(_)))) => {
            return Ok(Finished::Unsupported(
                "LOAD DATA LOCAL INFILE is not supported",
            ))
        }
        Err(e) => return Err(e),
    }
    if let Some(overflow) = sink.overflow() {
        return Ok(Finished::TooLarge(overflow));
    }
    let rows = sink.take_rows();
    Ok(Finished::Done(qr, rows))
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
}
