//! The shim's own endpoints beside the RPCs: `GET /metrics` (Prometheus text,
//! telemetry/metrics.rs) and `GET /healthz` (mysql/health.rs).
use crate::app::App;
use crate::connect::message_body::MessageBody;
use http::header::{HeaderValue, CONTENT_TYPE};
use http::{Method, Response, StatusCode};

/// `GET /metrics`: the Prometheus text (telemetry/metrics.rs).
pub fn metrics(app: &App, method: &Method) -> Response<MessageBody> {
    if method != Method::GET && method != Method::HEAD {
        let mut resp = Response::new(MessageBody::new("use GET\n".to_owned()));
        *resp.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
        return resp;
    }
    let text = app
        .metrics
        .render(&app.pools.snapshot(), app.pins.len(), app.kept.len());
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
pub async fn health(app: &App, method: &Method) -> Response<MessageBody> {
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
