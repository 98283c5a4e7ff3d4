//! The errors an answer carries in its `error` field (HTTP 200, as PlanetScale
//! answers them): one constructor per error the shim sends there.
use crate::errors::mysql::{sql_code, sql_message, ER_WRONG_ARGUMENTS, ER_WRONG_VALUE_FOR_VAR};
use crate::errors::vitess;
use crate::rows::result::{Overflow, ResultLimits};
use crate::sessions::pins::PinError;
use crate::sessions::seal::SealError;
use crate::telemetry::log::Level;
use ferry_proto::vitess::vtrpc::{Code, RpcError};

pub fn rpc_error(code: Code, message: impl Into<String>) -> RpcError {
    RpcError {
        message: message.into(),
        code: code as i32,
    }
}

/// A statement's MySQL error as the answer's `error` (vitess's code and message),
/// logged without the statement.
pub fn sql_error(se: &mysql_async::ServerError, user: &str) -> RpcError {
    let code = vitess::code(se.code, &se.message).unwrap_or_else(|| sql_code(se.code));
    crate::log!(
        Level::Info,
        "sql error",
        user = user,
        errno = se.code,
        code = format!("{code:?}")
    );
    rpc_error(
        code,
        sql_message(&vitess::redacted(&se.message), se.code, &se.state),
    )
}

/// A session whose seal does not open for these credentials.
pub fn seal_error(e: &SealError) -> RpcError {
    let code = match e {
        SealError::OtherCredentials => Code::PermissionDenied,
        SealError::Expired { .. } => Code::FailedPrecondition,
        SealError::Invalid(_) => Code::InvalidArgument,
    };
    rpc_error(code, e.to_string())
}

/// Bind variables that do not fit the statement: `invalid_argument`, worded
/// as a MySQL error (ER_WRONG_ARGUMENTS) for clients that map it to one.
pub fn bind_error(reason: &str) -> RpcError {
    rpc_error(Code::InvalidArgument, ER_WRONG_ARGUMENTS.message(reason))
}

/// `SET workload = <value>` with a value vitess does not know; worded as vitess
/// words it, with MySQL's ER_WRONG_VALUE_FOR_VAR.
pub fn bad_workload(value: &str) -> RpcError {
    rpc_error(
        Code::InvalidArgument,
        ER_WRONG_VALUE_FOR_VAR.message(&format!("invalid workload: {value}")),
    )
}

/// `SET query_timeout` to something that is not milliseconds.
pub fn bad_query_timeout(value: &str) -> RpcError {
    rpc_error(
        Code::InvalidArgument,
        ER_WRONG_VALUE_FOR_VAR.message(&format!("invalid query_timeout (milliseconds): {value}")),
    )
}

/// A result over the shim's limits.
pub fn too_large(overflow: Overflow, limits: ResultLimits) -> RpcError {
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
    rpc_error(Code::ResourceExhausted, msg)
}

/// A session whose pin (transaction or session state) is gone.
pub fn pin_lost(in_transaction: bool, why: &str) -> RpcError {
    let message = if in_transaction {
        format!("transaction lost, rolled back: {why}")
    } else {
        format!("session state lost: {why}")
    };
    rpc_error(Code::Aborted, message)
}

/// A pinned session that reached a shim other than its holder.
pub fn misrouted() -> RpcError {
    rpc_error(
        Code::Unavailable,
        "this session is pinned to another shim (an open transaction or session state), and this gateway did not route the request there: session affinity needs Envoy to hold request headers for the Ferry filter (allow_on_headers_stop_iteration) and its stateful_session filter; nothing was executed, the session is unchanged",
    )
}

/// No room for the session's request or for a new pin.
pub fn pin_error(e: &PinError) -> RpcError {
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
