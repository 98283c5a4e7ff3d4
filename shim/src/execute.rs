//! The three RPCs: Execute, CreateSession, CloseSession.
//!
//! Every request authenticates by getting a connection from its credential's
//! pool. Execute runs one query with the text protocol and answers SQL errors
//! inside the response (HTTP 200, `ExecuteResponse.error`), as PlanetScale does;
//! only failures to reach or log in to MySQL are Connect errors.
//!
//! Pool safety: sessions and interactive transactions are not supported yet,
//! so a connection must go back to the pool exactly as clean as it came. The
//! statement policy (statement.rs) refuses what would leave state; after a
//! statement runs, the server status flags are checked (in a transaction, or
//! autocommit turned off, means state leaked past the policy: the answer is the
//! same refusal and the connection is reset). A connection stays armed for
//! COM_RESET_CONNECTION on return (see pool.rs) unless proven clean, which
//! keeps the hot path (`SELECT 1`) at one MySQL round trip.
use crate::auth::Credentials;
use crate::connect_error::ConnectError;
use crate::error_map::{sql_code, sql_message};
use crate::log::Level;
use crate::pool::Pools;
use crate::result::{field, Overflow, ResultLimits, Rows};
use crate::statement::{classify, first_keyword, refusal_message, Verdict};
use ferry_proto::psdb::v1alpha1::{
    CloseSessionResponse, CreateSessionResponse, ExecuteRequest, ExecuteResponse, Role, Session,
    User,
};
use ferry_proto::vitess::query::QueryResult;
use ferry_proto::vitess::vtgate;
use ferry_proto::vitess::vtrpc::{Code, RpcError};
use mysql_async::consts::StatusFlags;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, DriverError};
use std::time::Instant;

/// The session every answer carries. Sessions are a later issue: the one a
/// client sends is accepted and ignored (never trusted), and this one says
/// "autocommit, no transaction".
pub fn fresh_session() -> Session {
    Session {
        signature: Vec::new(),
        vitess_session: Some(vtgate::Session {
            autocommit: true,
            ..Default::default()
        }),
    }
}

fn rpc_error(code: Code, message: impl Into<String>) -> RpcError {
    RpcError {
        message: message.into(),
        code: code as i32,
    }
}

pub async fn create_session(
    pools: &Pools,
    creds: &Credentials,
) -> Result<CreateSessionResponse, ConnectError> {
    let mut conn = pools.conn(creds).await?;
    conn.reset_connection(false); // nothing ran on it
    Ok(CreateSessionResponse {
        branch: pools.database().to_owned(),
        user: Some(User {
            username: creds.user.clone(),
            psid: String::new(),
            role: Role::Readwriter as i32,
        }),
        session: Some(fresh_session()),
    })
}

pub async fn close_session(
    pools: &Pools,
    creds: &Credentials,
) -> Result<CloseSessionResponse, ConnectError> {
    let mut conn = pools.conn(creds).await?;
    conn.reset_connection(false);
    Ok(CloseSessionResponse {
        session: None,
        error: None,
    })
}

/// How a statement ended, before it becomes a response.
enum Outcome {
    Done(QueryResult),
    Sql(mysql_async::ServerError),
    TooLarge(Overflow),
    /// In a transaction or with autocommit off afterwards: state leaked.
    LeftState,
    /// The server asked for something the shim never does (LOAD DATA LOCAL).
    Unsupported(&'static str),
}

pub async fn execute(
    pools: &Pools,
    creds: &Credentials,
    req: ExecuteRequest,
    limits: ResultLimits,
) -> Result<ExecuteResponse, ConnectError> {
    let mut conn = pools.conn(creds).await?;
    let answer =
        |result: Option<QueryResult>, error: Option<RpcError>, timing: f64| ExecuteResponse {
            session: Some(fresh_session()),
            result,
            error,
            timing,
        };
    if !req.bind_variables.is_empty() {
        conn.reset_connection(false);
        let msg = "bind variables are not supported yet; interpolate parameters into the query";
        return Ok(answer(None, Some(rpc_error(Code::Unimplemented, msg)), 0.0));
    }
    let verdict = classify(&req.query);
    if let Verdict::Refuse(label) = verdict {
        conn.reset_connection(false);
        crate::log!(
            Level::Info,
            "statement refused",
            user = creds.user,
            statement = label
        );
        return Ok(answer(
            None,
            Some(rpc_error(Code::Unimplemented, refusal_message(label))),
            0.0,
        ));
    }

    let started = Instant::now();
    let outcome = run(&mut conn, &req.query, limits).await;
    let timing = started.elapsed().as_secs_f64();

    let outcome = match outcome {
        Ok(outcome) => outcome,
        Err(e) => {
            // The connection is broken (I/O or protocol): the pool discards it.
            let err =
                ConnectError::new(Code::Unavailable, format!("lost the MySQL connection: {e}"));
            crate::log!(
                Level::Error,
                "mysql connection failed during a query",
                user = creds.user,
                error = e
            );
            return Err(err);
        }
    };
    // Disarm the reset only when nothing can have been left behind.
    let clean = verdict == Verdict::Clean && !matches!(outcome, Outcome::LeftState);
    conn.reset_connection(!clean);
    drop(conn);

    Ok(match outcome {
        Outcome::Done(result) => answer(Some(result), None, timing),
        Outcome::Sql(se) => {
            let code = sql_code(se.code);
            crate::log!(
                Level::Info,
                "sql error",
                user = creds.user,
                errno = se.code,
                code = format!("{code:?}")
            );
            answer(
                None,
                Some(rpc_error(
                    code,
                    sql_message(&se.message, se.code, &se.state),
                )),
                timing,
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
            answer(None, Some(rpc_error(Code::ResourceExhausted, msg)), timing)
        }
        Outcome::Unsupported(msg) => {
            answer(None, Some(rpc_error(Code::Unimplemented, msg)), timing)
        }
        Outcome::LeftState => {
            let label = first_keyword(&req.query);
            crate::log!(
                Level::Warn,
                "statement left session state; connection will be reset",
                user = creds.user
            );
            answer(
                None,
                Some(rpc_error(Code::Unimplemented, refusal_message(&label))),
                timing,
            )
        }
    })
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
    // The last OK/EOF packet carries the status after the whole query.
    let status = conn
        .last_ok_packet()
        .map(|ok| ok.status_flags())
        .unwrap_or_default();
    if status.contains(StatusFlags::SERVER_STATUS_IN_TRANS)
        || !status.contains(StatusFlags::SERVER_STATUS_AUTOCOMMIT)
    {
        return Ok(Outcome::LeftState);
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
    fn fresh_session_is_autocommit_without_signature() {
        let s = fresh_session();
        assert!(s.signature.is_empty());
        let v = s.vitess_session.unwrap();
        assert!(v.autocommit && !v.in_transaction);
    }
}
