//! Running a batch: every statement as an Execute of the same session (rpc/execute.rs),
//! the session threading from one to the next, one deadline over them all.
//!
//! - TRANSACTION: `START TRANSACTION` (its isolation level set right before it, on its
//!   connection), the statements on the pin that opens, `COMMIT`. The first error (SQL,
//!   or a statement stopped by the deadline or the client going away) rolls back and is
//!   the batch's `error`, with the statement's index. Nothing was applied.
//! - PIPELINE: each statement in order, answered on its own; a statement whose condition
//!   does not hold is `skipped`. A failure that is not the statement's own SQL error
//!   (the deadline, a lost connection) ends the pipeline there.
//!
//! A Connect error before anything ran (a refused login, no connection, a replica
//! behind the session's writes) is the RPC's own error, as for Execute: nothing ran, and
//! a replica's 503 lets Envoy take the whole batch to the primary.
use super::condition::{self, Outcome};
use super::plan::{Mode, Opening, Plan};
use crate::app::App;
use crate::connect::deadline::Deadline;
use crate::connect::error::ConnectError;
use crate::credentials::Credentials;
use crate::rpc::execute;
use crate::statement;
use crate::telemetry::trace::Trace;
use bytes::Bytes;
use ferry_proto::ferry::v1alpha1::{
    BatchResult, BatchStatement, ExecuteBatchRequest, ExecuteBatchResponse,
};
use ferry_proto::psdb::v1alpha1::{ExecuteRequest, ExecuteResponse, Session};
use ferry_proto::vitess::vtrpc::{Code, RpcError};
use prost::Message;
use tokio::sync::mpsc;

/// Runs the batch. `watch` closes when the client goes away (rpc/execute_batch.rs).
pub async fn run(
    app: &App,
    creds: &Credentials,
    req: ExecuteBatchRequest,
    deadline: Deadline,
    watch: mpsc::Sender<Bytes>,
    trace: &Trace,
) -> Result<ExecuteBatchResponse, ConnectError> {
    let (plan, runner) = Runner::planned(app, creds, req, deadline, watch, trace)?;
    match plan.mode {
        Mode::Transaction(opening) => {
            match transaction(runner, plan.session, plan.statements, opening, None).await? {
                Ended::Answer(answer) => Ok(*answer),
                // No record, no conflict.
                Ended::RecordConflict => Err(ConnectError::new(
                    Code::Internal,
                    "a batch without a key met a key's record",
                )),
            }
        }
        Mode::Pipeline => pipeline(runner, plan.session, plan.statements).await,
    }
}

/// Builds the statement that records an idempotency key, from the answers of the batch's
/// statements (idempotency/store.rs), run just before the COMMIT.
pub type Record<'a> = &'a (dyn Fn(&[BatchResult]) -> Result<BatchStatement, ConnectError> + Sync);

/// How a keyed transaction ended.
pub enum Ended {
    Answer(Box<ExecuteBatchResponse>),
    /// Another request recorded the same key first (its record's INSERT met a duplicate
    /// key): this one was rolled back, and the stored answer is the one to give.
    RecordConflict,
}

/// A TRANSACTION batch whose COMMIT also records its key (`record`): rpc/keyed.rs.
/// Refused in PIPELINE mode: a pipeline is not one transaction.
#[allow(clippy::too_many_arguments)]
pub async fn run_keyed(
    app: &App,
    creds: &Credentials,
    req: ExecuteBatchRequest,
    deadline: Deadline,
    watch: mpsc::Sender<Bytes>,
    trace: &Trace,
    record: Record<'_>,
) -> Result<Ended, ConnectError> {
    let (plan, runner) = Runner::planned(app, creds, req, deadline, watch, trace)?;
    match plan.mode {
        Mode::Transaction(opening) => transaction(runner, plan.session, plan.statements, opening, Some(record)).await,
        Mode::Pipeline => Err(ConnectError::new(
            Code::InvalidArgument,
            "an Idempotency-Key is for a TRANSACTION batch (a pipeline is not one transaction: its statements commit one by one)",
        )),
    }
}

struct Runner<'a> {
    app: &'a App,
    creds: &'a Credentials,
    deadline: Deadline,
    watch: mpsc::Sender<Bytes>,
    trace: &'a Trace,
}

impl<'a> Runner<'a> {
    /// The batch's plan (what it may ask, checked: plan.rs) and its runner.
    fn planned(
        app: &'a App,
        creds: &'a Credentials,
        req: ExecuteBatchRequest,
        deadline: Deadline,
        watch: mpsc::Sender<Bytes>,
        trace: &'a Trace,
    ) -> Result<(Plan, Runner<'a>), ConnectError> {
        let plan = Plan::of(req, app.batch.max_statements)?;
        Ok((
            plan,
            Runner {
                app,
                creds,
                deadline,
                watch,
                trace,
            },
        ))
    }
}

impl Runner<'_> {
    /// One statement, as Execute runs it, within the batch's deadline.
    async fn one(
        &self,
        session: Option<Session>,
        s: BatchStatement,
        opening: statement::Opening,
    ) -> Result<ExecuteResponse, ConnectError> {
        let req = ExecuteRequest {
            session,
            query: s.query,
            bind_variables: s.bind_variables,
            prepared: false,
        };
        let answer = execute::execute(
            self.app,
            self.creds,
            req,
            self.deadline,
            Some(self.watch.clone()),
            self.trace,
            None,
            opening,
        )
        .await?;
        Ok(answer.decoded())
    }

    /// Ends the transaction whatever happened (no deadline, nobody watching): its
    /// session, or `fallback` (the batch's own, from before it began) when the rollback
    /// could not answer; then the pin, if any is left, is the sweeper's.
    async fn rollback(
        &self,
        session: Option<Session>,
        fallback: Option<Session>,
        read_only: bool,
    ) -> Option<Session> {
        let req = ExecuteRequest {
            session,
            query: "ROLLBACK".into(),
            ..Default::default()
        };
        let opening = statement::Opening {
            before: None,
            read_only_txn: read_only,
        };
        match execute::execute(
            self.app,
            self.creds,
            req,
            Deadline::NONE,
            None,
            self.trace,
            None,
            opening,
        )
        .await
        {
            Ok(answer) => answer.message.session.or(fallback),
            Err(_) => fallback,
        }
    }
}

/// The batch's answers, all together, within one Execute's result limits.
struct Budget {
    left_bytes: usize,
    left_rows: usize,
}

impl Budget {
    fn new(app: &App) -> Self {
        Budget {
            left_bytes: app.result_limits.bytes,
            left_rows: app.result_limits.rows,
        }
    }

    /// Takes a statement's answer from what is left, or says which limit it passes.
    fn take(&mut self, r: &ExecuteResponse) -> Result<(), ConnectError> {
        let Some(result) = &r.result else {
            return Ok(());
        };
        let (bytes, rows) = (result.encoded_len(), result.rows.len());
        if bytes > self.left_bytes || rows > self.left_rows {
            return Err(ConnectError::new(
                Code::ResourceExhausted,
                "the batch's results together pass the limit of one answer (FERRY_SHIM_MAX_RESULT_BYTES, FERRY_SHIM_MAX_RESULT_ROWS): split the batch",
            ));
        }
        self.left_bytes -= bytes;
        self.left_rows -= rows;
        Ok(())
    }
}

fn rpc_error(e: &ConnectError) -> RpcError {
    RpcError {
        code: e.code as i32,
        message: e.message.clone(),
    }
}

fn failed(error: RpcError, timing: f64) -> BatchResult {
    BatchResult {
        error: Some(error),
        timing,
        ..Default::default()
    }
}

/// First keywords of statements that end a transaction, or commit it implicitly in
/// MySQL and MariaDB (DDL, accounts, table maintenance, replication): a TRANSACTION
/// batch could not roll back what came before them. Savepoints and temporary tables
/// are fine inside one ([`ends_a_transaction`]).
const ENDS_A_TRANSACTION: &[&str] = &[
    "ALTER",
    "ANALYZE",
    "BEGIN",
    "CACHE",
    "CHANGE",
    "CHECK",
    "COMMIT",
    "CREATE",
    "DROP",
    "FLUSH",
    "GRANT",
    "INSTALL",
    "LOCK",
    "OPTIMIZE",
    "RENAME",
    "REPAIR",
    "RESET",
    "REVOKE",
    "ROLLBACK",
    "START",
    "STOP",
    "TRUNCATE",
    "UNINSTALL",
    "UNLOCK",
    "XA",
];

/// Why this statement cannot be in a TRANSACTION batch, if it cannot.
fn ends_a_transaction(sql: &str) -> Option<String> {
    use ferry_wire::lexer::{Lexer, Tok};
    let words: Vec<String> = Lexer::new(sql)
        .filter_map(|t| match t {
            Tok::Word(w) => Some(w.to_ascii_uppercase()),
            _ => None,
        })
        .take(4)
        .collect();
    let w = |i: usize| words.get(i).map(String::as_str).unwrap_or("");
    let inside = match w(0) {
        // ROLLBACK [WORK] TO [SAVEPOINT] s: back to a savepoint, the transaction goes on.
        "ROLLBACK" => w(1) == "TO" || (w(1) == "WORK" && w(2) == "TO"),
        // CREATE/DROP TEMPORARY TABLE: no implicit commit.
        "CREATE" | "DROP" => w(1) == "TEMPORARY",
        _ => false,
    };
    if w(0) == "SET" && sql.to_ascii_lowercase().contains("autocommit") {
        return Some("SET autocommit changes how the transaction ends: it cannot be in a TRANSACTION batch (use PIPELINE mode)".into());
    }
    (!inside && ENDS_A_TRANSACTION.contains(&w(0))).then(|| {
        format!("{} ends or implicitly commits a transaction in MySQL: it cannot be in a TRANSACTION batch (use PIPELINE mode)", w(0))
    })
}

async fn transaction(
    r: Runner<'_>,
    session: Option<Session>,
    statements: Vec<BatchStatement>,
    opening: Opening,
    record: Option<Record<'_>>,
) -> Result<Ended, ConnectError> {
    if let Some((at, why)) = statements
        .iter()
        .enumerate()
        .find_map(|(i, s)| ends_a_transaction(&s.query).map(|why| (i, why)))
    {
        return Err(ConnectError::new(
            Code::InvalidArgument,
            format!("statement {at}: {why}"),
        ));
    }
    let before = session.clone();
    let in_txn = statement::Opening {
        before: None,
        read_only_txn: opening.replica_may_run,
    };
    let begin = BatchStatement {
        query: opening.begin.into(),
        ..Default::default()
    };
    let began = r
        .one(
            session,
            begin,
            statement::Opening {
                before: opening.isolation,
                ..in_txn
            },
        )
        .await?;
    let mut timing = began.timing;
    let mut session = began.session;
    if let Some(error) = began.error {
        // Nothing began (a refused isolation level, READ ONLY on a server without it).
        return Ok(Ended::Answer(Box::new(ExecuteBatchResponse {
            session,
            error: Some(error),
            timing,
            ..Default::default()
        })));
    }
    let mut results = Vec::with_capacity(statements.len());
    let mut budget = Budget::new(r.app);
    for (at, s) in statements.into_iter().enumerate() {
        let answer = r
            .one(session.clone(), s, in_txn)
            .await
            .and_then(|a| budget.take(&a).map(|()| a));
        let error = match answer {
            Ok(a) if a.error.is_none() => {
                timing += a.timing;
                session = a.session.or(session);
                results.push(BatchResult {
                    result: a.result,
                    timing: a.timing,
                    ..Default::default()
                });
                continue;
            }
            Ok(a) => {
                timing += a.timing;
                session = a.session.or(session);
                results.push(failed(a.error.clone().unwrap_or_default(), a.timing));
                a.error.unwrap_or_default()
            }
            Err(e) => {
                results.push(failed(rpc_error(&e), 0.0));
                rpc_error(&e)
            }
        };
        let session = r.rollback(session, before, in_txn.read_only_txn).await;
        return Ok(Ended::Answer(Box::new(ExecuteBatchResponse {
            session,
            results,
            error: Some(error),
            failed_statement: Some(at as u32),
            timing,
        })));
    }
    if let Some(record) = record {
        // The key's record, in this transaction: it commits with the writes or not at all.
        let recorded = match record(&results) {
            Ok(insert) => r.one(session.clone(), insert, in_txn).await,
            Err(e) => Err(e),
        };
        let error = match recorded {
            Ok(a) if a.error.is_none() => {
                timing += a.timing;
                session = a.session.or(session);
                None
            }
            Ok(a) => {
                session = a.session.clone().or(session);
                let conflict = a
                    .error
                    .as_ref()
                    .is_some_and(|e| e.code == Code::AlreadyExists as i32);
                if conflict {
                    r.rollback(session, before, in_txn.read_only_txn).await;
                    return Ok(Ended::RecordConflict);
                }
                a.error
            }
            Err(e) => Some(rpc_error(&e)),
        };
        if let Some(error) = error {
            let session = r.rollback(session, before, in_txn.read_only_txn).await;
            return Ok(Ended::Answer(Box::new(ExecuteBatchResponse {
                session,
                results,
                error: Some(error),
                failed_statement: None,
                timing,
            })));
        }
    }
    let commit = BatchStatement {
        query: "COMMIT".into(),
        ..Default::default()
    };
    match r.one(session, commit, in_txn).await {
        Ok(a) => {
            timing += a.timing;
            let still_open = a
                .session
                .as_ref()
                .and_then(|s| s.vitess_session.as_ref())
                .is_some_and(|v| v.in_transaction);
            let session = match still_open {
                true => r.rollback(a.session, before, in_txn.read_only_txn).await,
                false => a.session,
            };
            Ok(Ended::Answer(Box::new(ExecuteBatchResponse {
                session,
                results,
                error: a.error,
                failed_statement: None,
                timing,
            })))
        }
        // The COMMIT's outcome could not be told (its message says so): the session from
        // before the batch, whose transaction is gone either way.
        Err(e) => Ok(Ended::Answer(Box::new(ExecuteBatchResponse {
            session: before,
            results,
            error: Some(rpc_error(&e)),
            failed_statement: None,
            timing,
        }))),
    }
}

async fn pipeline(
    r: Runner<'_>,
    mut session: Option<Session>,
    statements: Vec<BatchStatement>,
) -> Result<ExecuteBatchResponse, ConnectError> {
    let mut results = Vec::with_capacity(statements.len());
    let mut outcomes = Vec::with_capacity(statements.len());
    let mut timing = 0.0;
    let mut budget = Budget::new(r.app);
    for (at, s) in statements.into_iter().enumerate() {
        if s.condition
            .as_ref()
            .is_some_and(|c| !condition::holds(c, &outcomes))
        {
            outcomes.push(Outcome::Skipped);
            results.push(BatchResult {
                skipped: true,
                ..Default::default()
            });
            continue;
        }
        let answer = r
            .one(session.clone(), s, statement::Opening::default())
            .await;
        let answer = match answer {
            // Nothing ran yet: the RPC's own error, as Execute's.
            Err(e) if at == 0 => return Err(e),
            Err(e) => {
                results.push(failed(rpc_error(&e), 0.0));
                break;
            }
            Ok(a) => a,
        };
        timing += answer.timing;
        session = answer.session.clone().or(session);
        if let Err(e) = budget.take(&answer) {
            results.push(failed(rpc_error(&e), answer.timing));
            break;
        }
        outcomes.push(if answer.error.is_some() {
            Outcome::Failed
        } else {
            Outcome::Ok
        });
        results.push(BatchResult {
            result: answer.result,
            error: answer.error,
            skipped: false,
            timing: answer.timing,
        });
    }
    Ok(ExecuteBatchResponse {
        session,
        results,
        error: None,
        failed_statement: None,
        timing,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_ends_a_transaction_is_refused_in_one() {
        for sql in [
            "COMMIT",
            "rollback",
            "BEGIN",
            "START TRANSACTION",
            "CREATE TABLE t (id INT)",
            "DROP TABLE t",
            "ALTER TABLE t ADD c INT",
            "TRUNCATE t",
            "LOCK TABLES t WRITE",
            "SET autocommit = 1",
            "set @@AUTOCOMMIT=1",
            "GRANT SELECT ON t TO u",
            "ROLLBACK WORK",
        ] {
            assert!(ends_a_transaction(sql).is_some(), "{sql}");
        }
        for sql in [
            "INSERT INTO t VALUES (1)",
            "UPDATE t SET c = 1",
            "DELETE FROM t",
            "SELECT * FROM t FOR UPDATE",
            "SET @x = 1",
            "(SELECT 1)",
            "REPLACE INTO t VALUES (1)",
            "SAVEPOINT a",
            "RELEASE SAVEPOINT a",
            "ROLLBACK TO SAVEPOINT a",
            "rollback work to a",
            "CREATE TEMPORARY TABLE tmp (id INT)",
            "DROP TEMPORARY TABLE tmp",
        ] {
            assert!(ends_a_transaction(sql).is_none(), "{sql}");
        }
    }
}
