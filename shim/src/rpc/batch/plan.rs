//! What a batch asks, checked before anything runs: its size, its mode's options, its
//! conditions, and the statements that open its transaction.
use super::condition;
use crate::connect::error::ConnectError;
use ferry_proto::ferry::v1alpha1::{
    BatchMode, BatchStatement, ExecuteBatchRequest, IsolationLevel,
};
use ferry_proto::psdb::v1alpha1::Session;
use ferry_proto::vitess::vtrpc::Code;

#[derive(Debug)]
pub struct Plan {
    pub session: Option<Session>,
    pub statements: Vec<BatchStatement>,
    pub mode: Mode,
}

#[derive(Debug, PartialEq, Eq)]
pub enum Mode {
    Transaction(Opening),
    Pipeline,
}

/// How a transaction batch begins.
#[derive(Debug, PartialEq, Eq)]
pub struct Opening {
    /// `START TRANSACTION`, `READ ONLY` when asked.
    pub begin: &'static str,
    /// The isolation level's `SET TRANSACTION`, right before it on its connection.
    pub isolation: Option<&'static str>,
    /// `READ ONLY`, and every statement a read (ferry-wire `replay_safe`): a replica
    /// may run it (the filter routes it as a read).
    pub replica_may_run: bool,
}

/// The isolation levels' statements: each holds for the next transaction only.
const ISOLATION: &[(IsolationLevel, Option<&str>)] = &[
    (IsolationLevel::Default, None),
    (
        IsolationLevel::ReadUncommitted,
        Some("SET TRANSACTION ISOLATION LEVEL READ UNCOMMITTED"),
    ),
    (
        IsolationLevel::ReadCommitted,
        Some("SET TRANSACTION ISOLATION LEVEL READ COMMITTED"),
    ),
    (
        IsolationLevel::RepeatableRead,
        Some("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"),
    ),
    (
        IsolationLevel::Serializable,
        Some("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE"),
    ),
];

fn invalid(message: impl Into<String>) -> ConnectError {
    ConnectError::new(Code::InvalidArgument, message)
}

impl Plan {
    pub fn of(req: ExecuteBatchRequest, max_statements: usize) -> Result<Plan, ConnectError> {
        let n = req.statements.len();
        if n == 0 {
            return Err(invalid("ExecuteBatch needs at least one statement"));
        }
        if n > max_statements {
            return Err(ConnectError::new(
                Code::ResourceExhausted,
                format!("ExecuteBatch has {n} statements; at most {max_statements} run in one batch (FERRY_BATCH_MAX_STATEMENTS)"),
            ));
        }
        let mode = match BatchMode::try_from(req.mode) {
            Ok(BatchMode::Transaction) => {
                if let Some(at) = req.statements.iter().position(|s| s.condition.is_some()) {
                    return Err(invalid(format!(
                        "statement {at}: conditions are for PIPELINE mode; a TRANSACTION batch stops at its first error"
                    )));
                }
                if req
                    .session
                    .as_ref()
                    .and_then(|s| s.vitess_session.as_ref())
                    .is_some_and(|v| v.in_transaction)
                {
                    return Err(ConnectError::new(
                        Code::FailedPrecondition,
                        "the session is in a transaction: a TRANSACTION batch begins its own (use PIPELINE mode to run statements in the open one)",
                    ));
                }
                let options = req.transaction.unwrap_or_default();
                let isolation = IsolationLevel::try_from(options.isolation)
                    .ok()
                    .and_then(|level| ISOLATION.iter().find(|(l, _)| *l == level))
                    .map(|(_, sql)| *sql)
                    .ok_or_else(|| {
                        invalid(format!("unknown isolation level {}", options.isolation))
                    })?;
                let all_reads = req
                    .statements
                    .iter()
                    .all(|s| ferry_wire::replay::replay_safe(&s.query));
                Mode::Transaction(Opening {
                    begin: if options.read_only {
                        "START TRANSACTION READ ONLY"
                    } else {
                        "START TRANSACTION"
                    },
                    isolation,
                    replica_may_run: options.read_only && all_reads,
                })
            }
            Ok(BatchMode::Pipeline) => {
                if req.transaction.is_some() {
                    return Err(invalid(
                        "transaction options are for TRANSACTION mode (in PIPELINE mode, send BEGIN as a statement)",
                    ));
                }
                for (at, s) in req.statements.iter().enumerate() {
                    if let Some(c) = &s.condition {
                        condition::check(c, at).map_err(invalid)?;
                    }
                }
                Mode::Pipeline
            }
            Err(_) => return Err(invalid(format!("unknown batch mode {}", req.mode))),
        };
        Ok(Plan {
            session: req.session,
            statements: req.statements,
            mode,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_proto::ferry::v1alpha1::{
        condition::Condition as Kind, Condition, TransactionOptions,
    };

    fn stmt(q: &str) -> BatchStatement {
        BatchStatement {
            query: q.into(),
            ..Default::default()
        }
    }

    fn req(mode: BatchMode, qs: &[&str]) -> ExecuteBatchRequest {
        ExecuteBatchRequest {
            statements: qs.iter().map(|q| stmt(q)).collect(),
            mode: mode as i32,
            ..Default::default()
        }
    }

    #[test]
    fn a_transaction_opens_as_asked() {
        let mut r = req(BatchMode::Transaction, &["SELECT 1", "SELECT 2"]);
        r.transaction = Some(TransactionOptions {
            isolation: IsolationLevel::Serializable as i32,
            read_only: true,
        });
        let p = Plan::of(r, 10).unwrap();
        assert_eq!(
            p.mode,
            Mode::Transaction(Opening {
                begin: "START TRANSACTION READ ONLY",
                isolation: Some("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE"),
                replica_may_run: true,
            })
        );
        // A write in it: not for a replica (the server would refuse it there anyway).
        let mut r = req(BatchMode::Transaction, &["SELECT 1", "DELETE FROM t"]);
        r.transaction = Some(TransactionOptions {
            isolation: 0,
            read_only: true,
        });
        let Mode::Transaction(o) = Plan::of(r, 10).unwrap().mode else {
            panic!()
        };
        assert!(!o.replica_may_run && o.isolation.is_none());
        // Not read-only: never.
        let Mode::Transaction(o) = Plan::of(req(BatchMode::Transaction, &["SELECT 1"]), 10)
            .unwrap()
            .mode
        else {
            panic!()
        };
        assert_eq!(o.begin, "START TRANSACTION");
        assert!(!o.replica_may_run);
    }

    #[test]
    fn what_is_refused_before_anything_runs() {
        let code = |r, max| Plan::of(r, max).unwrap_err().code;
        assert_eq!(
            code(req(BatchMode::Pipeline, &[]), 10),
            Code::InvalidArgument
        );
        assert_eq!(
            code(req(BatchMode::Pipeline, &["SELECT 1"; 11]), 10),
            Code::ResourceExhausted
        );
        let mut r = req(BatchMode::Transaction, &["SELECT 1", "SELECT 2"]);
        r.statements[1].condition = Some(Condition {
            condition: Some(Kind::Ok(0)),
        });
        assert_eq!(
            code(r, 10),
            Code::InvalidArgument,
            "conditions in a transaction"
        );
        let mut r = req(BatchMode::Pipeline, &["SELECT 1"]);
        r.transaction = Some(TransactionOptions::default());
        assert_eq!(code(r, 10), Code::InvalidArgument, "options in a pipeline");
        let mut r = req(BatchMode::Pipeline, &["SELECT 1", "SELECT 2"]);
        r.statements[0].condition = Some(Condition {
            condition: Some(Kind::Ok(1)),
        });
        assert_eq!(code(r, 10), Code::InvalidArgument, "a later statement");
        let mut r = req(BatchMode::Transaction, &["SELECT 1"]);
        r.session = Some(Session {
            vitess_session: Some(ferry_proto::vitess::vtgate::Session {
                in_transaction: true,
                ..Default::default()
            }),
            ..Default::default()
        });
        assert_eq!(code(r, 10), Code::FailedPrecondition);
        let mut r = req(BatchMode::Transaction, &["SELECT 1"]);
        r.transaction = Some(TransactionOptions {
            isolation: 99,
            read_only: false,
        });
        assert_eq!(code(r, 10), Code::InvalidArgument);
        assert_eq!(
            code(
                ExecuteBatchRequest {
                    mode: 7,
                    ..req(BatchMode::Pipeline, &["SELECT 1"])
                },
                10
            ),
            Code::InvalidArgument
        );
    }
}
