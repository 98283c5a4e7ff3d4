//! Execute and ExecuteBatch with an `Idempotency-Key` (idempotency/): run once, as a
//! TRANSACTION batch whose COMMIT also records the key and the answer; a repeat gets
//! the stored answer (`idempotent-replayed: true`) without running anything.
//!
//! An Execute with a key runs as a one-statement transaction: it must be a statement a
//! transaction can hold (not DDL), in a session that is not in a transaction. A replayed
//! answer carries the result first given and the session as the repeat sent it.
use super::batch::{self, Ended};
use super::Call;
use crate::app::App;
use crate::connect::deadline::Deadline;
use crate::connect::error::ConnectError;
use crate::connect::response::{proto_response, with_db_time, AnsweredCode, ShimBody};
use crate::credentials::Credentials;
use crate::idempotency::key::{Key, REPLAYED};
use crate::idempotency::{fingerprint, store};
use crate::telemetry::trace::Trace;
use bytes::Bytes;
use ferry_proto::ferry::v1alpha1::{
    BatchResult, BatchStatement, ExecuteBatchRequest, ExecuteBatchResponse,
};
use ferry_proto::psdb::v1alpha1::{ExecuteRequest, ExecuteResponse};
use ferry_proto::vitess::vtrpc::Code;
use http::header::HeaderValue;
use http::Response;
use prost::Message;
use tokio::sync::mpsc;

/// What the keyed run gave.
enum Keyed {
    /// It ran (committed, or failed and rolled back: then nothing was recorded).
    Ran(Box<ExecuteBatchResponse>),
    /// The stored answer of the same request.
    Replayed(Vec<u8>),
}

pub async fn serve_execute(call: Call<'_>, key: Key) -> Result<Response<ShimBody>, ConnectError> {
    let req: ExecuteRequest = call.request()?;
    let open = req
        .session
        .as_ref()
        .and_then(|s| s.vitess_session.as_ref())
        .is_some_and(|v| v.in_transaction || !v.autocommit);
    if open {
        return Err(ConnectError::new(
            Code::FailedPrecondition,
            "an Idempotency-Key is for a write outside a transaction (send the transaction as one TRANSACTION batch with the key)",
        ));
    }
    let fp = fingerprint::execute(&call.creds.user, &req);
    let session = req.session.clone();
    let batch = ExecuteBatchRequest {
        session: req.session,
        statements: vec![BatchStatement {
            query: req.query,
            bind_variables: req.bind_variables,
            condition: None,
        }],
        ..Default::default()
    };
    // What is stored: the statement's result (the session is the repeat's own).
    let answer_of = |results: &[BatchResult]| {
        ExecuteResponse {
            result: results.first().and_then(|r| r.result.clone()),
            timing: results.first().map_or(0.0, |r| r.timing),
            ..Default::default()
        }
        .encode_to_vec()
    };
    let message = match keyed(&call, key, "Execute", fp, batch, answer_of).await? {
        Keyed::Replayed(bytes) => {
            let mut stored = decode::<ExecuteResponse>(&bytes)?;
            stored.session = session;
            return Ok(replayed(proto_response(&stored)));
        }
        Keyed::Ran(ran) => ExecuteResponse {
            session: ran.session,
            result: ran
                .results
                .into_iter()
                .next()
                .and_then(|r| r.result)
                .filter(|_| ran.error.is_none()),
            error: ran.error,
            timing: ran.timing,
        },
    };
    Ok(answered(
        proto_response(&message),
        message.timing,
        message.error.as_ref().map(|e| e.code),
    ))
}

pub async fn serve_batch(call: Call<'_>, key: Key) -> Result<Response<ShimBody>, ConnectError> {
    let req: ExecuteBatchRequest = call.request()?;
    let fp = fingerprint::batch(&call.creds.user, &req);
    let session = req.session.clone();
    let answer_of = |results: &[BatchResult]| {
        ExecuteBatchResponse {
            results: results.to_vec(),
            timing: results.iter().map(|r| r.timing).sum(),
            ..Default::default()
        }
        .encode_to_vec()
    };
    match keyed(&call, key, "ExecuteBatch", fp, req, answer_of).await? {
        Keyed::Replayed(bytes) => {
            let mut stored = decode::<ExecuteBatchResponse>(&bytes)?;
            stored.session = session;
            Ok(replayed(proto_response(&stored)))
        }
        Keyed::Ran(ran) => Ok(answered(
            proto_response(&ran),
            ran.timing,
            ran.error.as_ref().map(|e| e.code),
        )),
    }
}

fn decode<M: Message + Default>(bytes: &[u8]) -> Result<M, ConnectError> {
    M::decode(bytes).map_err(|e| {
        ConnectError::new(
            Code::Internal,
            format!("a stored answer does not decode: {e}"),
        )
    })
}

fn replayed(resp: Response<ShimBody>) -> Response<ShimBody> {
    let mut resp = resp;
    resp.headers_mut()
        .insert(REPLAYED, HeaderValue::from_static("true"));
    resp
}

fn answered(resp: Response<ShimBody>, timing: f64, code: Option<i32>) -> Response<ShimBody> {
    let mut resp = with_db_time(resp, timing);
    if let Some(code) = code {
        resp.extensions_mut().insert(AnsweredCode::of(code));
    }
    resp
}

/// Looks the key up, then runs the batch with its record; a conflict (another request
/// with the key committed meanwhile) looks again. In a task of its own, as Execute's.
async fn keyed(
    call: &Call<'_>,
    key: Key,
    rpc: &'static str,
    fp: [u8; 32],
    batch: ExecuteBatchRequest,
    answer_of: impl Fn(&[BatchResult]) -> Vec<u8> + Send + Sync + 'static,
) -> Result<Keyed, ConnectError> {
    let (watch, alive) = mpsc::channel(1);
    let (app, creds, trace, deadline) = (
        call.app.clone(),
        call.creds.clone(),
        call.trace.clone(),
        call.deadline,
    );
    let task = {
        let (app, creds) = (app.clone(), creds.clone());
        tokio::spawn(async move {
            run(
                &app, &creds, &trace, deadline, watch, key, rpc, fp, batch, answer_of,
            )
            .await
        })
    };
    let outcome = task.await.map_err(|e| {
        ConnectError::new(
            Code::Internal,
            format!("the keyed request's task failed: {e}"),
        )
    })?;
    drop(alive);
    if matches!(&outcome, Ok(Keyed::Ran(a)) if a.error.is_none())
        && app.idempotency_cleaner.due(&creds.user)
    {
        // Records past the retention, a few at a time, off the request's path.
        tokio::spawn(async move {
            let (retention, limit) = (
                app.idempotency.retention,
                crate::idempotency::cleaner::BATCH,
            );
            if let Err(e) = store::clean(&app.pools, &creds, retention, limit).await {
                crate::log!(
                    crate::telemetry::log::Level::Warn,
                    "cannot clean idempotency records",
                    user = creds.user,
                    error = e.message
                );
            }
        });
    }
    outcome
}

#[allow(clippy::too_many_arguments)]
async fn run(
    app: &App,
    creds: &Credentials,
    trace: &Trace,
    deadline: Deadline,
    watch: mpsc::Sender<Bytes>,
    key: Key,
    rpc: &'static str,
    fp: [u8; 32],
    batch: ExecuteBatchRequest,
    answer_of: impl Fn(&[BatchResult]) -> Vec<u8> + Sync,
) -> Result<Keyed, ConnectError> {
    let settings = app.idempotency;
    let record = |results: &[BatchResult]| {
        let answer = answer_of(results);
        if answer.len() > settings.max_answer_bytes {
            return Err(ConnectError::new(
                Code::ResourceExhausted,
                format!(
                    "the answer to store with the Idempotency-Key is {} bytes, more than FERRY_IDEMPOTENCY_MAX_ANSWER_BYTES ({}): nothing was applied",
                    answer.len(),
                    settings.max_answer_bytes
                ),
            ));
        }
        Ok(store::insert(&app.sealer, creds, rpc, &key, &fp, &answer))
    };
    // Twice at most: a conflict means the other request's record is now committed.
    for _ in 0..2 {
        let found = deadline
            .within(store::lookup(
                &app.pools,
                &app.sealer,
                creds,
                rpc,
                &key,
                &fp,
                settings.retention,
            ))
            .await??;
        match found {
            store::Found::Same(answer) => {
                app.metrics.idempotency("replayed");
                return Ok(Keyed::Replayed(answer));
            }
            store::Found::Expired => {
                deadline
                    .within(store::forget_expired(
                        &app.pools,
                        creds,
                        &key,
                        settings.retention,
                    ))
                    .await??;
            }
            store::Found::None => {}
        }
        let ended = batch::run_keyed(
            app,
            creds,
            batch.clone(),
            deadline,
            watch.clone(),
            trace,
            &record,
        )
        .await?;
        match ended {
            Ended::Answer(answer) => {
                if answer.error.is_none() {
                    app.metrics.idempotency("stored");
                }
                return Ok(Keyed::Ran(answer));
            }
            Ended::RecordConflict => app.metrics.idempotency("waited"),
        }
    }
    Err(ConnectError::new(
        Code::Aborted,
        format!(
            "Idempotency-Key {:?}: another request with this key is in progress; try again",
            key.0
        ),
    ))
}
