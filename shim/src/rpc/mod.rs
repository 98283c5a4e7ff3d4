//! The RPCs served (the list the filter serves too: ferry-wire's `rpc::Method`),
//! one file each: a new RPC is one file and one row in `dispatch`.
pub mod batch;
mod execute;
mod execute_batch;
mod keyed;
mod prepare;
mod sessions;
mod stream_execute;

use crate::app::App;
use crate::connect::deadline::Deadline;
use crate::connect::error::ConnectError;
use crate::connect::response::{proto_response, with_db_time, ShimBody};
use crate::credentials::Credentials;
use crate::telemetry::trace::Trace;
use bytes::Bytes;
use ferry_proto::vitess::vtrpc::Code;
use ferry_wire::rpc::Method as Rpc;
use http::Response;
use std::sync::Arc;

/// One RPC call: the request's body (its message, not yet decoded) and context.
pub struct Call<'a> {
    pub app: &'a Arc<App>,
    pub rpc: Rpc,
    pub creds: Credentials,
    pub body: Bytes,
    /// The statement's (Execute, StreamExecute), the batch's (ExecuteBatch); none for the others.
    pub deadline: Deadline,
    pub trace: &'a Trace,
    /// The request's `Idempotency-Key` (Execute, ExecuteBatch: rpc/keyed.rs).
    pub key: Option<crate::idempotency::key::Key>,
}

/// Serves one call of `call.rpc`.
pub async fn dispatch(mut call: Call<'_>) -> Result<Response<ShimBody>, ConnectError> {
    if let Some(key) = call.key.take() {
        return match call.rpc {
            Rpc::Execute => keyed::serve_execute(call, key).await,
            Rpc::ExecuteBatch => keyed::serve_batch(call, key).await,
            other => Err(ConnectError::new(
                Code::InvalidArgument,
                format!(
                    "Idempotency-Key is for Execute and ExecuteBatch, not {}",
                    other.name()
                ),
            )),
        };
    }
    match call.rpc {
        Rpc::Execute => execute::serve(call).await,
        Rpc::StreamExecute => stream_execute::serve(call).await,
        Rpc::CreateSession => sessions::serve_create(call).await,
        Rpc::CloseSession => sessions::serve_close(call).await,
        Rpc::Prepare => prepare::serve(call).await,
        Rpc::ExecuteBatch => execute_batch::serve(call).await,
    }
}

/// A unary answer: its message, saying how long the call spent in MySQL (since
/// `started`: getting the connection, a new credential's login, the work).
fn timed(message: &impl prost::Message, started: std::time::Instant) -> Response<ShimBody> {
    with_db_time(proto_response(message), started.elapsed().as_secs_f64())
}

impl Call<'_> {
    /// The request message; `invalid_argument` when it does not decode.
    fn request<M: prost::Message + Default>(&self) -> Result<M, ConnectError> {
        M::decode(self.body.clone()).map_err(|e| {
            ConnectError::new(
                Code::InvalidArgument,
                format!("cannot decode the {:?} request: {e}", self.rpc),
            )
        })
    }
}
