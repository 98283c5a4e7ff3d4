//! Execute: one statement, one answer (HTTP 200 with `ExecuteResponse`, SQL
//! errors inside it). The statement runs in a task of its own, so that a client
//! going away stops it; a large answer goes out in pieces as it is read
//! (rows/spill.rs).
use super::Call;
use crate::app::App;
use crate::connect::deadline::Deadline;
use crate::connect::error::ConnectError;
use crate::connect::response::{
    pieces_response, with_db_time, AnsweredCode, CountedAtItsEnd, ShimBody, PROTO,
};
use crate::connect::stream_body::StreamBody;
use crate::credentials::Credentials;
use crate::rows::answer::Answer;
use crate::rows::sink::Sink;
use crate::rows::spill::{self, Pieces, Spill};
use crate::statement::{self, Opening, Start, Stop};
use crate::telemetry::trace::{Statement, Trace};
use bytes::Bytes;
use ferry_proto::psdb::v1alpha1::ExecuteRequest;
use ferry_proto::vitess::vtrpc::Code;
use http::header::{HeaderValue, CONTENT_TYPE};
use http::Response;
use http_body_util::Either;
use std::time::Instant;
use tokio::sync::{mpsc, oneshot};
use tokio::task::{JoinError, JoinHandle};

pub async fn serve(call: Call<'_>) -> Result<Response<ShimBody>, ConnectError> {
    let req: ExecuteRequest = call.request()?;
    // The statement runs in a task of its own, watching `alive`: if the client
    // goes away (or cancels at its deadline, which it usually notices before
    // the shim does), hyper drops this future — or, once the answer goes out in
    // pieces, its body —, `alive` with it, and the statement is stopped in MySQL
    // (KILL QUERY) instead of running on.
    let (watch, alive) = mpsc::channel(1);
    let (commit, committed) = oneshot::channel();
    let (app, creds, trace, deadline) = (
        call.app.clone(),
        call.creds,
        call.trace.clone(),
        call.deadline,
    );
    let task = tokio::spawn(async move {
        execute(
            &app,
            &creds,
            req,
            deadline,
            Some(watch),
            &trace,
            Some(commit),
            Opening::default(),
        )
        .await
    });
    let done = match answer_of(committed, task).await {
        Ok(pieces) => {
            // A large answer: its 200 goes now, its pieces as they are read.
            let body = StreamBody::holding(pieces, alive);
            let mut resp = Response::new(Either::Right(body));
            resp.headers_mut()
                .insert(CONTENT_TYPE, HeaderValue::from_static(PROTO));
            resp.extensions_mut().insert(CountedAtItsEnd);
            return Ok(resp);
        }
        Err(done) => done,
    };
    let answer = done.map_err(|e| {
        ConnectError::new(Code::Internal, format!("the statement's task failed: {e}"))
    })?;
    drop(alive);
    let answer = answer?;
    let (timing, code) = (
        answer.message.timing,
        answer.message.error.as_ref().map(|e| e.code),
    );
    let mut resp = with_db_time(pieces_response(answer.encode()), timing);
    if let Some(code) = code {
        resp.extensions_mut().insert(AnsweredCode::of(code));
    }
    Ok(resp)
}

/// An Execute's answer: its pieces if it committed to going out in pieces (rows/spill.rs),
/// else what its task returned. The commit is looked at first: an answer of a few
/// pieces may have finished its task too, and then what the task returned is only
/// its span's.
async fn answer_of<T>(
    committed: oneshot::Receiver<spill::Pieces>,
    mut task: JoinHandle<T>,
) -> Result<spill::Pieces, Result<T, JoinError>> {
    tokio::select! {
        biased;
        Ok(pieces) = committed => Ok(pieces),
        done = &mut task => Err(done),
    }
}

/// Execute: one statement, one answer (and its span, when traced). With `commit`,
/// a large answer goes out in pieces as it is read (rows/spill.rs): the body's receiver
/// is sent through `commit`, and what is returned is only the span's. `opening`: what a
/// batch asks of the statement (rpc/execute_batch.rs).
#[allow(clippy::too_many_arguments)]
pub async fn execute(
    app: &App,
    creds: &Credentials,
    req: ExecuteRequest,
    deadline: Deadline,
    watch: Option<mpsc::Sender<Bytes>>,
    trace: &Trace,
    commit: Option<oneshot::Sender<Pieces>>,
    opening: Opening,
) -> Result<Answer, ConnectError> {
    let session_timeout = req
        .session
        .as_ref()
        .and_then(|s| s.vitess_session.as_ref())
        .map_or(0, |v| v.query_timeout);
    let deadline = deadline.for_statement(&req.query, session_timeout);
    let mut span = trace.statement(&req.query);
    let (answer, streamed) =
        execute_spanned(app, creds, req, deadline, watch, commit, opening, &mut span).await;
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
#[allow(clippy::too_many_arguments)]
async fn execute_spanned(
    app: &App,
    creds: &Credentials,
    req: ExecuteRequest,
    deadline: Deadline,
    watch: Option<mpsc::Sender<Bytes>>,
    commit: Option<oneshot::Sender<Pieces>>,
    opening: Opening,
    span: &mut Statement,
) -> (Result<Answer, ConnectError>, Option<u64>) {
    let asked = Instant::now();
    let ready = match deadline
        .within(statement::start_opening(app, creds, req, false, opening))
        .await
    {
        Ok(Ok(Start::Answered(resp))) => return (Ok(resp.into()), None),
        Ok(Ok(Start::Run(ready))) => ready,
        Ok(Err(e)) | Err(e) => return (Err(e), None),
    };
    ready.traced(span, asked, app.role);
    let stop = Stop::unary(deadline, watch);
    let Some(commit) = commit.filter(|_| app.unary_spill.after > 0) else {
        let mut sink = Sink::collect(app.result_limits);
        return (
            statement::run(app, creds, ready, &mut sink, &stop).await,
            None,
        );
    };
    let as_is = ready.as_is();
    let spill = Spill::new(app.result_limits, app.unary_spill, commit);
    let mut sink = Sink::Spill(Box::new(spill));
    let answer = statement::run(app, creds, ready, &mut sink, &stop).await;
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
        .map_or("ok", |e| AnsweredCode::of(e.code).0);
    app.metrics
        .request(ferry_wire::rpc::Method::Execute.name(), code);
    (Ok(message.into()), Some(spill.rows_taken()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_committed_answer_is_its_pieces_even_when_its_task_is_done() {
        let (commit, committed) = oneshot::channel();
        let (_tx, rx) = mpsc::channel(1);
        commit.send(rx).unwrap();
        let task = tokio::spawn(async { "the span's" });
        while !task.is_finished() {
            tokio::task::yield_now().await;
        }
        assert!(answer_of(committed, task).await.is_ok());
        // Never committed: the task's answer.
        let (commit, committed) = oneshot::channel::<spill::Pieces>();
        let task = tokio::spawn(async move {
            drop(commit);
            "whole"
        });
        assert_eq!(
            answer_of(committed, task).await.unwrap_err().unwrap(),
            "whole"
        );
    }
}
