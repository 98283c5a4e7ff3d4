//! ExecuteBatch (`ferry.v1alpha1.Database`): several statements, one answer (rpc/batch/).
//! Like Execute, the batch runs in a task of its own watching the client: if it goes
//! away, the running statement is stopped in MySQL, and an open transaction is still
//! rolled back before the task ends.
use super::batch;
use super::Call;
use crate::connect::error::ConnectError;
use crate::connect::response::{proto_response, with_db_time, AnsweredCode, ShimBody};
use ferry_proto::ferry::v1alpha1::ExecuteBatchRequest;
use ferry_proto::vitess::vtrpc::Code;
use http::Response;
use tokio::sync::mpsc;

pub async fn serve(call: Call<'_>) -> Result<Response<ShimBody>, ConnectError> {
    let req: ExecuteBatchRequest = call.request()?;
    let (watch, alive) = mpsc::channel(1);
    let (app, creds, trace, deadline) = (
        call.app.clone(),
        call.creds,
        call.trace.clone(),
        call.deadline,
    );
    let task =
        tokio::spawn(async move { batch::run(&app, &creds, req, deadline, watch, &trace).await });
    let answer = task.await.map_err(|e| {
        ConnectError::new(Code::Internal, format!("the batch's task failed: {e}"))
    })??;
    drop(alive);
    let code = answer.error.as_ref().map(|e| e.code);
    let mut resp = with_db_time(proto_response(&answer), answer.timing);
    if let Some(code) = code {
        resp.extensions_mut().insert(AnsweredCode::of(code));
    }
    Ok(resp)
}
