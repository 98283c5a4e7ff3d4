//! A finished statement as its answer: the result or the error, and the
//! session it leaves, sealed.
use super::session_out::SessionOut;
use super::source::Left;
use crate::errors::answers::{rpc_error, sql_error, too_large};
use crate::rows::answer::Answer;
use crate::rows::result::{EncodedRows, Overflow, ResultLimits};
use crate::sessions::state::Unkept;
use ferry_proto::psdb::v1alpha1::ExecuteResponse;
use ferry_proto::vitess::query::QueryResult;
use ferry_proto::vitess::vtrpc::Code;

/// How a statement ended, before it becomes a response.
pub enum Finished {
    /// The result (its rows apart, encoded as they were read).
    Done(QueryResult, EncodedRows),
    Sql(mysql_async::ServerError),
    TooLarge(Overflow),
    /// The server asked for something the shim never does (LOAD DATA LOCAL).
    Unsupported(&'static str),
    /// The bound statement and its parameters did not fit (see types/bind.rs).
    Invalid(String),
    /// The state the statement assigned was not kept (sessions/state.rs).
    StateUnkept(Unkept),
}

/// The answer to [`Unkept::Unreadable`].
const UNREADABLE: &str = "the statement ran, but the session state it set could not be read back from the server; the session keeps its state as it was";

pub fn respond(
    out: &SessionOut<'_>,
    pinned: bool,
    left: Left,
    finished: Finished,
    timing: f64,
    limits: ResultLimits,
) -> Answer {
    let mut rows = EncodedRows::default();
    let (result, error) = match finished {
        Finished::Done(result, encoded) => {
            rows = encoded;
            (Some(result), None)
        }
        Finished::Sql(se) => (None, Some(sql_error(&se, &out.creds.user))),
        Finished::TooLarge(overflow) => (None, Some(too_large(overflow, limits))),
        Finished::Unsupported(msg) => (None, Some(rpc_error(Code::Unimplemented, msg))),
        Finished::Invalid(msg) => (None, Some(rpc_error(Code::InvalidArgument, msg))),
        Finished::StateUnkept(Unkept::TooLarge(msg)) => {
            (None, Some(rpc_error(Code::ResourceExhausted, msg)))
        }
        Finished::StateUnkept(Unkept::Unreadable) => {
            (None, Some(rpc_error(Code::Internal, UNREADABLE)))
        }
    };
    let session = out.seal(pinned, left.in_txn, left.autocommit, result.as_ref());
    Answer {
        message: ExecuteResponse {
            session: Some(session),
            result,
            error,
            timing,
        },
        rows,
    }
}
