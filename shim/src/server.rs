//! HTTP side: routing, the canonical request checks, and Connect unary framing
//! of answers (a bare protobuf message on success, a JSON Connect error
//! otherwise); StreamExecute answers as a Connect stream (stream.rs). Serves
//! HTTP/2 cleartext (prior knowledge) and HTTP/1.1 on TCP and, optionally, on
//! a unix socket.
//!
//! Every answer names the shim's role (`ferry-target: primary|replica`); an
//! answer of Execute, Prepare, CreateSession or CloseSession says how long it
//! spent in MySQL (`server-timing: db;dur=<ms>`): Execute the statement (and a
//! replica's wait for the session's writes), the others the whole call
//! (getting the connection, a new credential's login, the prepare).
//! StreamExecute has none: its headers leave before the statement runs.
//! `GET /healthz` (mysql/health.rs) and `GET /metrics` (telemetry/metrics.rs) are served on
//! the same listener; Envoy's routes never send clients there.
//!
//! With tracing on (`FERRY_OTLP_ENDPOINT`, telemetry/trace.rs), each RPC gets a span that
//! continues the request's `traceparent`, and its statement one of its own.
use crate::config::Config;
use crate::connect::deadline::{self, Deadline};
use crate::connect::error::ConnectError;
use crate::connect::message_body::MessageBody;
use crate::credentials::{self, Credentials};
use crate::execute;
use crate::mysql::pool::Pools;
use crate::mysql::role::{self, Role};
use crate::rows::result::ResultLimits;
use crate::rows::sink::ChunkPolicy;
use crate::rows::spill::{self, SpillPolicy};
use crate::sessions::pins::Pins;
use crate::sessions::seal::Sealer;
use crate::stream::{self, StreamBody};
use crate::telemetry::log::Level;
use crate::telemetry::metrics::Metrics;
use crate::telemetry::trace::{Trace, Tracing};
use crate::tls::listen::ListenTls;
use crate::types::column_types::ColumnTypes;
use bytes::Bytes;
use ferry_proto::psdb::v1alpha1::{
    CloseSessionRequest, CreateSessionRequest, ExecuteRequest, PrepareRequest,
};
use ferry_proto::vitess::vtrpc::Code;
use http::header::{
    HeaderValue, ALLOW, AUTHORIZATION, CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_TYPE,
};
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Either, LengthLimitError, Limited};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use prost::Message;
use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::{mpsc, oneshot};
use tokio::task::{JoinError, JoinHandle};

const PROTO: &str = "application/proto";

pub struct App {
    pub pools: Pools,
    pub pins: Pins,
    pub sealer: Sealer,
    /// This process, in every session it seals (a restart shows as a new one).
    pub instance: [u8; 8],
    pub max_request_bytes: usize,
    pub result_limits: ResultLimits,
    pub stream_chunks: ChunkPolicy,
    /// When an Execute answer goes out in pieces (rows/spill.rs).
    pub unary_spill: SpillPolicy,
    /// Tables' column types from information_schema (types/column_types.rs).
    pub column_types: ColumnTypes,
    /// The earliest an `unauthenticated` answer may leave (mysql/account.rs).
    pub auth_failure_delay: Duration,
    /// The database target this shim serves (mysql/role.rs).
    pub role: Role,
    /// `FERRY_TRACK_GTID`: sessions carry their last write's GTID (sessions/gtid.rs).
    pub track_gtid: bool,
    /// `FERRY_READ_AFTER_WRITE_WAIT_MS`: a replica's longest wait for one.
    pub read_after_write_wait: Duration,
    pub metrics: Metrics,
    /// Spans to an OTLP collector (`FERRY_OTLP_ENDPOINT`; telemetry/trace.rs); `None`: off.
    pub tracing: Option<Tracing>,
}

impl App {
    pub fn new(cfg: &Config, sealer: Sealer) -> Self {
        let pools = Pools::new(cfg);
        App {
            metrics: Metrics::new(cfg.role, &pools.metrics),
            role: cfg.role,
            track_gtid: cfg.track_gtid,
            read_after_write_wait: cfg.read_after_write_wait,
            pools,
            pins: Pins::new(
                cfg.sessions.txn_idle,
                cfg.sessions.state_idle,
                cfg.sessions.queue_max,
                cfg.sessions.max_pinned,
            ),
            sealer,
            instance: crate::sessions::seal::random(),
            max_request_bytes: cfg.max_request_bytes,
            result_limits: cfg.result_limits,
            stream_chunks: cfg.stream_chunks,
            unary_spill: SpillPolicy {
                after: cfg.unary_stream_after,
                piece: cfg.stream_chunks.bytes,
            },
            column_types: ColumnTypes::new(cfg.column_type_cache, cfg.column_type_ttl),
            auth_failure_delay: cfg.auth_failure_delay,
            tracing: None,
        }
    }
}

/// The RPCs served: the list the filter serves too (ferry-wire).
use ferry_wire::rpc::Method as Rpc;

/// A unary answer, or a stream.
pub type ShimBody = Either<MessageBody, StreamBody>;

/// One request → one response; never fails at the HTTP level.
pub async fn handle(
    app: Arc<App>,
    req: Request<Incoming>,
) -> Result<Response<ShimBody>, Infallible> {
    let target = HeaderValue::from_static(app.role.as_str());
    match req.uri().path() {
        "/healthz" => {
            let mut resp = health(&app, req.method()).await.map(Either::Left);
            resp.headers_mut().insert(role::TARGET_HEADER, target);
            return Ok(resp);
        }
        "/metrics" => {
            let mut resp = metrics(&app, req.method()).map(Either::Left);
            resp.headers_mut().insert(role::TARGET_HEADER, target);
            return Ok(resp);
        }
        _ => {}
    }
    let arrived = tokio::time::Instant::now();
    let path = req.uri().path().to_owned();
    let rpc_name = Rpc::from_path(&path).map_or("unknown", Rpc::name);
    // The RPC's span (ends when the last clone goes: here, or at a stream's end).
    let trace = match &app.tracing {
        Some(t) => t.rpc(req.headers(), rpc_name),
        None => Trace::off(),
    };
    let mut user = String::new();
    let answer = rpc(&app, req, arrived, &mut user, &trace).await;
    let code = match &answer {
        Ok(resp) => resp.extensions().get::<Outcome>().map_or("ok", |o| o.0),
        Err(e) => e.name(),
    };
    // An answer going out in pieces is counted at its end, with the code it ends with.
    let counted_later = answer
        .as_ref()
        .is_ok_and(|resp| resp.extensions().get::<CountedAtItsEnd>().is_some());
    if !counted_later {
        app.metrics.request(rpc_name, code);
    }
    if answer
        .as_ref()
        .is_err_and(|e| e.code == Code::Unauthenticated)
    {
        // One timing shape for every refusal: before MySQL, after a failed
        // login, or after a login the policy refused.
        tokio::time::sleep_until(arrived + app.auth_failure_delay).await;
    }
    let mut resp = answer.unwrap_or_else(|e| {
        // A deadline is the client's choice, not the shim's failure; a replica
        // behind the session's writes is routine (the read goes to the primary).
        let routine = e.code == Code::DeadlineExceeded || e.header.is_some();
        let level = if e.status() >= 500 && !routine {
            Level::Error
        } else {
            Level::Warn
        };
        crate::log!(
            level,
            "request failed",
            path = path,
            status = e.status(),
            code = e.name(),
            user = user,
            error = e.message
        );
        connect_error_response(&e).map(Either::Left)
    });
    // Which shim process answered: sessions pinned to it must keep coming back.
    if let Ok(v) = HeaderValue::from_str(&crate::sessions::seal::hex(&app.instance)) {
        resp.headers_mut().insert("ferry-shim-instance", v);
    }
    resp.headers_mut().insert(role::TARGET_HEADER, target);
    trace.answered(code, resp.status().as_u16());
    Ok(resp)
}

async fn rpc(
    app: &Arc<App>,
    req: Request<Incoming>,
    arrived: tokio::time::Instant,
    user: &mut String,
    trace: &Trace,
) -> Result<Response<ShimBody>, ConnectError> {
    let path = req.uri().path();
    let Some(rpc) = Rpc::from_path(path) else {
        return Err(
            ConnectError::new(Code::Unimplemented, format!("no such procedure: {path}"))
                .with_status(404),
        );
    };
    if req.method() != Method::POST {
        return Err(ConnectError::new(
            Code::Unimplemented,
            format!("{} is not allowed; use POST", req.method()),
        )
        .with_status(405));
    }
    check_content_type(&req)?;
    let creds =
        credentials::parse_basic(req.headers().get(AUTHORIZATION).map(HeaderValue::as_bytes))
            .map_err(|msg| ConnectError::new(Code::Unauthenticated, msg))?;
    user.clone_from(&creds.user);
    // Statements only: the session RPCs are quick and have no statement to stop.
    let deadline = match rpc {
        Rpc::Execute | Rpc::StreamExecute => Deadline::from_header(
            req.headers()
                .get(deadline::HEADER)
                .map(HeaderValue::as_bytes),
            arrived,
        )?,
        Rpc::CreateSession | Rpc::CloseSession | Rpc::Prepare => Deadline::NONE,
    };
    let body = read_body(req, app.max_request_bytes).await?;
    dispatch(app, rpc, creds, body, deadline, trace).await
}

async fn dispatch(
    app: &Arc<App>,
    rpc: Rpc,
    creds: Credentials,
    body: Bytes,
    deadline: Deadline,
    trace: &Trace,
) -> Result<Response<ShimBody>, ConnectError> {
    let bad = |e: prost::DecodeError| {
        ConnectError::new(
            Code::InvalidArgument,
            format!("cannot decode the {rpc:?} request: {e}"),
        )
    };
    let creds = &creds;
    let started = std::time::Instant::now();
    let took = || started.elapsed().as_secs_f64();
    Ok(match rpc {
        Rpc::Execute => {
            let req = ExecuteRequest::decode(body).map_err(bad)?;
            // The statement runs in a task of its own, watching `alive`: if the client
            // goes away (or cancels at its deadline, which it usually notices before
            // the shim does), hyper drops this future — or, once the answer goes out in
            // pieces, its body —, `alive` with it, and the statement is stopped in MySQL
            // (KILL QUERY) instead of running on.
            let (watch, alive) = mpsc::channel(1);
            let (commit, committed) = oneshot::channel();
            let (app, creds, trace) = (app.clone(), creds.clone(), trace.clone());
            let task = tokio::spawn(async move {
                execute::execute(
                    &app,
                    &creds,
                    req,
                    deadline,
                    Some(watch),
                    &trace,
                    Some(commit),
                )
                .await
            });
            let done = match answer_of(committed, task).await {
                Ok(pieces) => {
                    // A large answer: its 200 goes now, its pieces as they are read.
                    let body = StreamBody::guarded(pieces, alive);
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
                resp.extensions_mut().insert(Outcome::of(code));
            }
            resp
        }
        Rpc::StreamExecute => {
            let req = ExecuteRequest::decode(body).map_err(bad)?;
            stream::stream_execute(app.clone(), creds.clone(), req, deadline, trace)
                .await?
                .map(Either::Right)
        }
        Rpc::CreateSession => {
            CreateSessionRequest::decode(body).map_err(bad)?;
            let answer = execute::create_session(app, creds).await?;
            with_db_time(proto_response(&answer), took())
        }
        Rpc::CloseSession => {
            let req = CloseSessionRequest::decode(body).map_err(bad)?;
            let answer = execute::close_session(app, creds, req).await?;
            with_db_time(proto_response(&answer), took())
        }
        Rpc::Prepare => {
            let req = PrepareRequest::decode(body).map_err(bad)?;
            let answer = crate::prepare::prepare(app, creds, req).await?;
            with_db_time(proto_response(&answer), took())
        }
    })
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

/// Marks an Execute answer going out in pieces: its task counts it at its end
/// (execute.rs), not the handler.
#[derive(Clone, Copy)]
struct CountedAtItsEnd;

/// The code an RPC answered 200 with (an SQL error in the body), for metrics.
#[derive(Clone, Copy)]
pub(crate) struct Outcome(pub(crate) &'static str);

impl Outcome {
    pub(crate) fn of(code: i32) -> Outcome {
        let row = u32::try_from(code)
            .ok()
            .and_then(ferry_wire::status::by_grpc)
            .unwrap_or(ferry_wire::status::UNKNOWN);
        Outcome(row.connect)
    }
}

/// `server-timing: db;dur=<ms>` (two decimals), from seconds.
fn db_timing(secs: f64) -> String {
    format!("db;dur={:.2}", (secs * 1000.0).max(0.0))
}

fn with_db_time(mut resp: Response<ShimBody>, secs: f64) -> Response<ShimBody> {
    if let Ok(v) = HeaderValue::from_str(&db_timing(secs)) {
        resp.headers_mut().insert("server-timing", v);
    }
    resp
}

/// The canonical form only: `application/proto`, uncompressed. The filter
/// converts every client form into it, so anything else is a bug upstream.
fn check_content_type<B>(req: &Request<B>) -> Result<(), ConnectError> {
    let ct = req
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let base = ct.split(';').next().unwrap_or("").trim();
    if !base.eq_ignore_ascii_case(PROTO) {
        return Err(ConnectError::new(
            Code::InvalidArgument,
            format!("unsupported content-type {ct:?}; the shim speaks {PROTO} only"),
        )
        .with_status(415));
    }
    for name in [CONTENT_ENCODING.as_str(), "connect-content-encoding"] {
        if let Some(enc) = req.headers().get(name) {
            if !enc.as_bytes().eq_ignore_ascii_case(b"identity") {
                let enc = String::from_utf8_lossy(enc.as_bytes());
                return Err(ConnectError::new(
                    Code::Unimplemented,
                    format!("unsupported {name} {enc:?}; send identity"),
                ));
            }
        }
    }
    Ok(())
}

async fn read_body(req: Request<Incoming>, limit: usize) -> Result<Bytes, ConnectError> {
    let too_big = || {
        ConnectError::new(
            Code::ResourceExhausted,
            format!("request body exceeds {limit} bytes"),
        )
    };
    let declared = req
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(too_big());
    }
    match Limited::new(req.into_body(), limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.is::<LengthLimitError>() => Err(too_big()),
        Err(e) => Err(ConnectError::new(
            Code::InvalidArgument,
            format!("cannot read the request body: {e}"),
        )),
    }
}

fn proto_response(msg: &impl Message) -> Response<ShimBody> {
    pieces_response(vec![msg.encode_to_vec().into()])
}

/// A proto answer whose bytes are these pieces, in order.
fn pieces_response(pieces: Vec<Bytes>) -> Response<ShimBody> {
    let len: usize = pieces.iter().map(Bytes::len).sum();
    let mut resp = Response::new(Either::Left(MessageBody::pieces(pieces)));
    let h = resp.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static(PROTO));
    h.insert(CONTENT_LENGTH, HeaderValue::from(len));
    resp
}

pub fn connect_error_response(e: &ConnectError) -> Response<MessageBody> {
    let body = e.body();
    let len = body.len();
    let mut resp = Response::new(MessageBody::new(body));
    *resp.status_mut() =
        StatusCode::from_u16(e.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let h = resp.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    h.insert(CONTENT_LENGTH, HeaderValue::from(len));
    if e.status() == 405 {
        h.insert(ALLOW, HeaderValue::from_static("POST"));
    }
    if let Some((name, value)) = e.header {
        h.insert(name, HeaderValue::from_static(value));
    }
    resp
}

/// `GET /metrics`: the Prometheus text (telemetry/metrics.rs).
fn metrics(app: &App, method: &Method) -> Response<MessageBody> {
    if method != Method::GET && method != Method::HEAD {
        let mut resp = Response::new(MessageBody::new("use GET\n".to_owned()));
        *resp.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
        return resp;
    }
    let text = app.metrics.render(&app.pools, app.pins.len());
    let mut resp = Response::new(MessageBody::new(text));
    resp.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static(crate::telemetry::metrics::CONTENT_TYPE),
    );
    resp
}

/// For Envoy's active health checks: the shim is up and its MySQL target
/// answers (mysql/health.rs: a ping on a pooled connection, else a handshake probe;
/// neither leaves a line in MariaDB's error log).
async fn health(app: &App, method: &Method) -> Response<MessageBody> {
    let (status, text) = if method != Method::GET && method != Method::HEAD {
        (StatusCode::METHOD_NOT_ALLOWED, "use GET\n".to_owned())
    } else {
        let target = app.pools.target();
        match crate::mysql::health::check(&app.pools, target).await {
            Ok(()) => (StatusCode::OK, "ok\n".to_owned()),
            Err(e) => (
                StatusCode::SERVICE_UNAVAILABLE,
                format!("mysql unreachable at {target}: {e}\n"),
            ),
        }
    };
    let mut resp = Response::new(MessageBody::new(text));
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    resp
}

/// Accepts connections until `shutdown` resolves, then lets in-flight
/// requests finish (up to 10 s).
pub async fn serve(
    app: Arc<App>,
    tcp: TcpListener,
    tls: Option<ListenTls>,
    unix: Option<UnixListener>,
    shutdown: impl Future<Output = ()>,
) {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new());
    // Header limits far above Envoy's (60 KiB by default): an oversized header is the
    // gateway's to refuse with a clear error (the filter checks Authorization against
    // ferry-wire's limit), never this server's bare 431.
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(1024)
        .max_header_list_size(256 << 10);
    builder.http1().max_buf_size(512 << 10);
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = tcp.accept() => match accepted {
                Ok((stream, peer)) => {
                    let _ = stream.set_nodelay(true);
                    match &tls {
                        None => spawn_conn(&builder, graceful.watcher(), TokioIo::new(stream), app.clone()),
                        // The handshake runs in its own task: a slow client holds up no one.
                        Some(tls) => {
                            let (tls, builder, app) = (tls.clone(), builder.clone(), app.clone());
                            let watcher = graceful.watcher();
                            tokio::spawn(async move {
                                match tls.accept(stream).await {
                                    Ok(stream) => spawn_conn(&builder, watcher, TokioIo::new(stream), app),
                                    Err(e) => crate::log!(Level::Info, "TLS handshake failed", peer = peer, error = e),
                                }
                            });
                        }
                    }
                }
                Err(e) => accept_failed(e).await,
            },
            accepted = accept_unix(unix.as_ref()) => match accepted {
                Ok(stream) => spawn_conn(&builder, graceful.watcher(), TokioIo::new(stream), app.clone()),
                Err(e) => accept_failed(e).await,
            },
            () = &mut shutdown => break,
        }
    }
    drop(tcp);
    drop(unix);
    crate::log!(Level::Info, "shutting down", connections = graceful.count());
    if tokio::time::timeout(Duration::from_secs(10), graceful.shutdown())
        .await
        .is_err()
    {
        crate::log!(Level::Warn, "shutdown timed out with requests in flight");
    }
}

async fn accept_unix(unix: Option<&UnixListener>) -> std::io::Result<tokio::net::UnixStream> {
    match unix {
        Some(listener) => listener.accept().await.map(|(s, _)| s),
        None => std::future::pending().await,
    }
}

/// Out of file descriptors and the like: log, back off briefly, keep serving.
async fn accept_failed(e: std::io::Error) {
    crate::log!(Level::Error, "accept failed", error = e);
    tokio::time::sleep(Duration::from_millis(100)).await;
}

fn spawn_conn<I>(
    builder: &auto::Builder<TokioExecutor>,
    watcher: Watcher,
    io: TokioIo<I>,
    app: Arc<App>,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let svc = service_fn(move |req| handle(app.clone(), req));
    let conn = builder.serve_connection(io, svc).into_owned();
    let conn = watcher.watch(conn);
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            crate::log!(Level::Debug, "connection ended with an error", error = e);
        }
    });
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

    fn req(ct: Option<&str>, enc: Option<&str>) -> Request<()> {
        let mut b = Request::post("/psdb.v1alpha1.Database/Execute");
        if let Some(ct) = ct {
            b = b.header(CONTENT_TYPE, ct);
        }
        if let Some(enc) = enc {
            b = b.header(CONTENT_ENCODING, enc);
        }
        b.body(()).unwrap()
    }

    #[test]
    fn only_the_canonical_content_type_passes() {
        assert!(check_content_type(&req(Some("application/proto"), None)).is_ok());
        assert!(
            check_content_type(&req(Some("Application/Proto; charset=x"), Some("identity")))
                .is_ok()
        );
        let e = check_content_type(&req(Some("application/json"), None)).unwrap_err();
        assert_eq!((e.status(), e.name()), (415, "invalid_argument"));
        assert_eq!(
            check_content_type(&req(None, None)).unwrap_err().status(),
            415
        );
        let e = check_content_type(&req(Some("application/proto"), Some("gzip"))).unwrap_err();
        assert_eq!((e.status(), e.name()), (501, "unimplemented"));
    }

    #[test]
    fn db_time_has_two_decimals() {
        assert_eq!(db_timing(0.0123456), "db;dur=12.35");
        assert_eq!(db_timing(0.0), "db;dur=0.00");
        assert_eq!(
            Outcome::of(Code::InvalidArgument as i32).0,
            "invalid_argument"
        );
        assert_eq!(Outcome::of(999).0, "unknown");
    }

    #[test]
    fn a_replica_behind_answers_its_header() {
        let resp = connect_error_response(&role::behind(Duration::from_millis(20)));
        assert_eq!(resp.status(), 503);
        assert_eq!(resp.headers()[role::BEHIND_HEADER], "1");
    }

    #[test]
    fn connect_errors_are_json_with_their_status() {
        let resp = connect_error_response(&ConnectError::new(Code::Unauthenticated, "no"));
        assert_eq!(resp.status(), 401);
        assert_eq!(resp.headers()[CONTENT_TYPE], "application/json");
        let resp =
            connect_error_response(&ConnectError::new(Code::Unimplemented, "GET").with_status(405));
        assert_eq!(
            (resp.status().as_u16(), &resp.headers()[ALLOW]),
            (405, &HeaderValue::from_static("POST"))
        );
    }
}
