//! HTTP side: routing, and the canonical request checks. Serves the RPCs
//! (rpc/: one file per RPC) and, on the same listener, `GET /healthz` and
//! `GET /metrics` (admin.rs); Envoy's routes never send clients there.
//!
//! Every answer names the shim's role (`ferry-target: primary|replica`) and the
//! shim process (`ferry-shim-instance`); an answer of Execute, Prepare,
//! CreateSession or CloseSession says how long it spent in MySQL
//! (`server-timing: db;dur=<ms>`): Execute the statement (and a replica's wait
//! for the session's writes), the others the whole call (getting the
//! connection, a new credential's login, the prepare). StreamExecute has none:
//! its headers leave before the statement runs.
//!
//! With tracing on (`FERRY_OTLP_ENDPOINT`, telemetry/trace.rs), each RPC gets a
//! span that continues the request's `traceparent`, and its statement one of
//! its own.
use super::admin;
use crate::app::App;
use crate::connect::deadline::{self, Deadline};
use crate::connect::error::ConnectError;
use crate::connect::response::{
    connect_error_response, AnsweredCode, CountedAtItsEnd, ShimBody, PROTO,
};
use crate::credentials::Credentials;
use crate::mysql::role;
use crate::rpc;
use crate::telemetry::log::Level;
use crate::telemetry::trace::Trace;
use crate::throttle::limiter::Attempt;
use crate::tokens::{self, Via};
use bytes::Bytes;
use ferry_proto::vitess::vtrpc::Code;
use ferry_wire::headers::{CLIENT_ADDR as CLIENT_ADDR_HEADER, TOKEN_CLAIMS};
use ferry_wire::rpc::Method as Rpc;
use http::header::{HeaderValue, AUTHORIZATION, CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_TYPE};
use http::{Method, Request, Response};
use http_body_util::{BodyExt, Either, LengthLimitError, Limited};
use hyper::body::Incoming;
use std::convert::Infallible;
use std::net::IpAddr;
use std::sync::Arc;

/// One request → one response; never fails at the HTTP level.
pub async fn handle(
    app: Arc<App>,
    req: Request<Incoming>,
) -> Result<Response<ShimBody>, Infallible> {
    let target = HeaderValue::from_static(app.role.as_str());
    match req.uri().path() {
        "/healthz" => {
            let mut resp = admin::health(&app, req.method()).await.map(Either::Left);
            resp.headers_mut().insert(role::TARGET_HEADER, target);
            return Ok(resp);
        }
        "/metrics" => {
            let mut resp = admin::metrics(&app, req.method()).map(Either::Left);
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
    let mut attempt = None;
    // The client's address as Envoy gave it, for the log of a failed request (an
    // operator's view of who fails to log in).
    let client = req.headers().get(CLIENT_ADDR_HEADER).cloned();
    let answer = rpc(&app, req, arrived, &mut user, &mut attempt, &trace).await;
    if let Some((a, creds)) = attempt {
        // A login of a credential not admitted before (throttle/): refused, or admitted
        // now (MySQL took its password), or neither (no connection: not counted).
        if answer
            .as_ref()
            .is_err_and(|e| e.code == Code::Unauthenticated)
        {
            app.throttle.failed(a);
        } else if app.pools.idle(&creds).is_some() {
            app.throttle.succeeded(a);
        }
    }
    let code = match &answer {
        Ok(resp) => resp
            .extensions()
            .get::<AnsweredCode>()
            .map_or("ok", |o| o.0),
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
            client = client
                .as_ref()
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default(),
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
    attempt: &mut Option<(Attempt, Credentials)>,
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
    let (creds, via) = tokens::request_credentials(
        app.tokens.as_ref(),
        req.headers().get(AUTHORIZATION).map(HeaderValue::as_bytes),
        req.headers().get(TOKEN_CLAIMS).map(HeaderValue::as_bytes),
    )?;
    user.clone_from(&creds.user);
    // Password guessing (throttle/): a credential MySQL has not admitted yet is checked
    // first; one that has (its pool is open) never is, nor one the policy refuses
    // without asking MySQL, nor a verified token's (no password was guessed).
    if via == Via::Password && app.pools.idle(&creds).is_none() && app.pools.asks_mysql(&creds) {
        let client = req
            .headers()
            .get(CLIENT_ADDR_HEADER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<IpAddr>().ok());
        match app.throttle.check(&creds, client) {
            Ok(a) => *attempt = Some((a, creds.clone())),
            Err(refusal) => {
                app.metrics.auth_throttled(refusal.reason());
                return Err(refusal.error());
            }
        }
    }
    // Statements only (a batch's covers all its statements): the session RPCs are quick
    // and have no statement to stop.
    let deadline = match rpc {
        Rpc::Execute | Rpc::StreamExecute | Rpc::ExecuteBatch => Deadline::from_header(
            req.headers()
                .get(deadline::HEADER)
                .map(HeaderValue::as_bytes),
            arrived,
        )?,
        Rpc::CreateSession | Rpc::CloseSession | Rpc::Prepare => Deadline::NONE,
    };
    let key = match req.headers().get(crate::idempotency::key::HEADER) {
        Some(v) => Some(crate::idempotency::key::Key::parse(v.as_bytes())?),
        None => None,
    };
    if key.is_some() && app.role == role::Role::Replica {
        // Its record is a write: the primary's (503, which Envoy retries there).
        return Err(role::keyed_to_the_primary());
    }
    let body = read_body(req, app.max_request_bytes).await?;
    rpc::dispatch(rpc::Call {
        app,
        rpc,
        creds,
        body,
        deadline,
        trace,
        key,
    })
    .await
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
