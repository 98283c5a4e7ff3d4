//! StreamExecute: one statement answered as a Connect stream (connect/envelope.rs,
//! `application/connect+proto`, HTTP 200) of `ExecuteResponse` messages, in
//! the order vitess's vtgate streams them and PlanetScale's clients
//! (psdbproxy) read them:
//!
//! 1. a statement with rows: its fields, no rows; then its rows in chunks of
//!    at most `FERRY_STREAM_CHUNK_ROWS` rows / `FERRY_STREAM_CHUNK_BYTES`
//!    bytes, without fields. A statement without rows: one message with its
//!    `QueryResult` (rows affected, insert id, info).
//! 2. last, the session (with `error` if the statement failed in SQL, as
//!    Execute answers it); no `timing` (psdb leaves it out of streams).
//! 3. the end of stream: `{}`, or an error that is not SQL — the deadline
//!    passed (`deadline_exceeded`), the MySQL connection was lost — after
//!    the session message all the same (vitess: "even if there is an error,
//!    session could have been modified").
//!
//! Failures before the stream starts (credentials, no connection, a bad
//! request, a deadline passed while waiting) are unary Connect errors with
//! their HTTP status, as for Execute.
//!
//! The statement runs in a task of its own, feeding a channel of a few
//! chunks that the response body drains: a slow client stops the MySQL
//! reads, not the shim's memory. When the body is dropped (the client went
//! away) the task sees the channel close and stops the statement (mysql/cancel.rs).
use super::Call;
use crate::app::App;
use crate::connect::deadline::Deadline;
use crate::connect::envelope;
use crate::connect::error::ConnectError;
use crate::connect::response::ShimBody;
use crate::connect::stream_body::StreamBody;
use crate::credentials::Credentials;
use crate::rows::gone::Gone;
use crate::rows::sink::{Chunks, Sink};
use crate::statement::{self, Start, Stop};
use crate::telemetry::trace::{Statement, Trace};
use bytes::Bytes;
use ferry_proto::psdb::v1alpha1::{ExecuteRequest, ExecuteResponse};
use http::header::{HeaderValue, CONTENT_TYPE};
use http::Response;
use http_body_util::Either;
use std::sync::Arc;
use tokio::sync::mpsc;

/// Messages that may wait between the MySQL reader and the response body
/// (with the one being built and the one hyper is writing: a few chunks).
const BUFFERED: usize = 4;

pub async fn serve(call: Call<'_>) -> Result<Response<ShimBody>, ConnectError> {
    let req: ExecuteRequest = call.request()?;
    let session_timeout = req
        .session
        .as_ref()
        .and_then(|s| s.vitess_session.as_ref())
        .map_or(0, |v| v.query_timeout);
    let deadline = call.deadline.for_statement(&req.query, session_timeout);
    let resp = stream_execute(call.app.clone(), call.creds, req, deadline, call.trace).await?;
    Ok(resp.map(Either::Right))
}

/// Starts the statement; `Err` is an answer before the stream starts.
/// The statement's span (when traced) ends with the stream, and so does the
/// RPC's: `trace` goes along with the statement's task.
async fn stream_execute(
    app: Arc<App>,
    creds: Credentials,
    req: ExecuteRequest,
    deadline: Deadline,
    trace: &Trace,
) -> Result<Response<StreamBody>, ConnectError> {
    let mut span = trace.statement(&req.query);
    let asked = std::time::Instant::now();
    let start = match deadline
        .within(statement::start(&app, &creds, req, true))
        .await
    {
        Ok(Ok(start)) => start,
        Ok(Err(e)) | Err(e) => {
            span.finish(Err(&e), None);
            return Err(e);
        }
    };
    if let Start::Run(ready) = &start {
        ready.traced(&mut span, asked, app.role);
    }
    let (tx, rx) = mpsc::channel(BUFFERED);
    let traced = (span, trace.clone());
    tokio::spawn(produce(app, creds, start, tx, deadline, traced));
    let mut resp = Response::new(StreamBody::new(rx));
    resp.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static(envelope::CONTENT_TYPE),
    );
    Ok(resp)
}

async fn produce(
    app: Arc<App>,
    creds: Credentials,
    start: Start,
    tx: mpsc::Sender<Bytes>,
    deadline: Deadline,
    (span, _rpc): (Statement, Trace),
) {
    let mut sink = Sink::Chunks(Chunks::new(tx.clone(), app.stream_chunks));
    let (last, error) = match start {
        Start::Answered(resp) => (resp, None),
        Start::Run(ready) => {
            let as_is = ready.session_as_is(&app, &creds);
            let stop = Stop {
                deadline,
                watch: Some(tx.clone()),
            };
            match statement::run(&app, &creds, ready, &mut sink, &stop).await {
                // A stream's rows went out in chunks: the answer holds none.
                Ok(resp) => (resp.message, None),
                // Nobody to tell; the statement was stopped.
                Err(_) if tx.is_closed() => return span.failed("canceled"),
                Err(e) => (
                    ExecuteResponse {
                        session: Some(as_is),
                        ..Default::default()
                    },
                    Some(e),
                ),
            }
        }
    };
    match &error {
        Some(e) => span.finish(Err(e), Some(sink.rows_sent())),
        None => span.finish(Ok(&last), Some(sink.rows_sent())),
    }
    let _ = finish(&tx, last, sink.sent_columns(), error.as_ref()).await;
}

async fn finish(
    tx: &mpsc::Sender<Bytes>,
    last: ExecuteResponse,
    sent_columns: bool,
    error: Option<&ConnectError>,
) -> Result<(), Gone> {
    for msg in closing_messages(last, sent_columns) {
        tx.send(envelope::data(&msg)).await.map_err(|_| Gone)?;
    }
    tx.send(envelope::end_stream(error)).await.map_err(|_| Gone)
}

/// The data messages that end a stream, from the statement's answer: its
/// result unless its fields went first (then its rows went too), then the
/// session with the SQL error, if any.
fn closing_messages(last: ExecuteResponse, sent_columns: bool) -> Vec<ExecuteResponse> {
    let mut msgs = Vec::with_capacity(2);
    if let Some(result) = last.result.filter(|_| !sent_columns) {
        msgs.push(ExecuteResponse {
            result: Some(result),
            ..Default::default()
        });
    }
    msgs.push(ExecuteResponse {
        session: last.session,
        error: last.error,
        ..Default::default()
    });
    msgs
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_proto::psdb::v1alpha1::Session;
    use ferry_proto::vitess::query::{Field, QueryResult};
    use ferry_proto::vitess::vtrpc::RpcError;

    fn session() -> Option<Session> {
        Some(Session {
            signature: b"sig".to_vec(),
            vitess_session: None,
        })
    }

    #[test]
    fn a_stream_ends_with_its_session_and_never_timing() {
        // Rows were streamed: only the session closes it.
        let select = ExecuteResponse {
            session: session(),
            result: Some(QueryResult {
                fields: vec![Field::default()],
                ..Default::default()
            }),
            error: None,
            timing: 0.25,
        };
        let msgs = closing_messages(select, true);
        assert_eq!(msgs.len(), 1);
        assert_eq!((msgs[0].session.clone(), msgs[0].timing), (session(), 0.0));
        assert!(msgs[0].result.is_none());

        // No rows: the OK numbers, then the session.
        let insert = ExecuteResponse {
            session: session(),
            result: Some(QueryResult {
                rows_affected: 3,
                ..Default::default()
            }),
            error: None,
            timing: 0.25,
        };
        let msgs = closing_messages(insert, false);
        assert_eq!(msgs.len(), 2);
        assert_eq!(msgs[0].result.as_ref().unwrap().rows_affected, 3);
        assert!(msgs[0].session.is_none() && msgs[1].result.is_none());
        assert_eq!(msgs[1].session, session());

        // An SQL error rides with the session.
        let failed = ExecuteResponse {
            session: session(),
            error: Some(RpcError {
                message: "no".into(),
                code: 5,
            }),
            ..Default::default()
        };
        let msgs = closing_messages(failed, false);
        assert_eq!(msgs.len(), 1);
        assert_eq!(msgs[0].error.as_ref().unwrap().code, 5);
    }
}
