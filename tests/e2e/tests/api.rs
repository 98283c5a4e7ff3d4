//! The API around queries: sessions, TLS 1.3 only, Alt-Svc advertising HTTP/3.
mod common;
use common::*;
use ferry_e2e::connect::{ConnectClient, CLOSE_SESSION, CREATE_SESSION};
use ferry_e2e::Answer;

/// A Connect JSON call of `path` as `auth` (a Basic authorization value).
async fn post_json(c: &ConnectClient, path: &str, auth: &str, body: &str) -> Answer {
    let h = [
        ("content-type", "application/json"),
        ("authorization", auth),
    ];
    c.post(path, &h, body.as_bytes().to_vec()).await
}

#[tokio::test]
async fn create_and_close_session_over_connect_json() {
    let cfg = cfg();
    let c = ConnectClient::http2(&cfg);
    let auth = cfg.basic_auth();
    let a = post_json(&c, CREATE_SESSION, &auth, "{}").await;
    assert_eq!(a.status, 200, "{:?}", String::from_utf8_lossy(&a.body));
    let v = a.json();
    assert_eq!(v["branch"], cfg.database.as_str());
    assert_eq!(v["user"]["username"], cfg.user.as_str());
    assert!(v["session"].is_object(), "a session to send back: {v}");
    let body = serde_json::json!({ "session": v["session"] }).to_string();
    let a = post_json(&c, CLOSE_SESSION, &auth, &body).await;
    assert_eq!(a.status, 200, "{:?}", String::from_utf8_lossy(&a.body));
    let wrong = ferry_e2e::config::basic_auth("ferry", "nope");
    let a = post_json(&c, CREATE_SESSION, &wrong, "{}").await;
    assert_eq!(a.status, 401);
}

#[tokio::test]
async fn many_empty_answers_at_once_share_the_shim_connection() {
    // CloseSession's answer is an empty message. Envoy closes an upstream connection
    // that sends more than one empty DATA frame without END_STREAM in a row (a flood,
    // `max_consecutive_inbound_frames_with_empty_payload`); the shim once sent each
    // empty answer as an empty frame and then END_STREAM, so two at once on one
    // connection reset each other (seen as h2 protocol errors on MySQL 8's stack).
    let cfg = cfg();
    let c = ConnectClient::http2(&cfg);
    let auth = cfg.basic_auth();
    let a = post_json(&c, CREATE_SESSION, &auth, "{}").await;
    assert_eq!(a.status, 200, "{:?}", String::from_utf8_lossy(&a.body));
    let body = serde_json::json!({ "session": a.json()["session"] }).to_string();
    let mut closes = tokio::task::JoinSet::new();
    for _ in 0..64 {
        let (c, auth, body) = (c.clone(), auth.clone(), body.clone());
        closes.spawn(async move { post_json(&c, CLOSE_SESSION, &auth, &body).await });
    }
    while let Some(a) = closes.join_next().await {
        let a = a.expect("the CloseSession task");
        assert_eq!(a.status, 200, "{:?}", String::from_utf8_lossy(&a.body));
        assert_eq!(a.body.as_ref(), b"{}");
    }
}

#[tokio::test]
async fn http2_answers_advertise_http3() {
    let cfg = cfg();
    let a = ConnectClient::http2(&cfg).execute_json("SELECT 1").await;
    assert_eq!(a.version, http::Version::HTTP_2);
    assert_eq!(
        a.header("alt-svc"),
        Some(format!("h3=\":{}\"; ma=86400", cfg.port).as_str())
    );
}

#[tokio::test]
async fn tls_below_1_3_is_refused() {
    let cfg = cfg();
    ferry_e2e::config::install_crypto_provider();
    let roots = cfg
        .ca_der()
        .into_iter()
        .map(|d| reqwest::Certificate::from_der(&d).unwrap());
    let client = reqwest::Client::builder()
        .tls_certs_only(roots)
        .tls_version_max(reqwest::tls::Version::TLS_1_2)
        .build()
        .unwrap();
    let err = client
        .post(format!("{}/psdb.v1alpha1.Database/Execute", cfg.base_url()))
        .send()
        .await;
    assert!(err.is_err(), "a TLS 1.2 handshake must fail");
}

/// gRPC sessions with the real client; CloseSession answers an empty message, which
/// must still arrive as one (framed) message with grpc-status 0.
#[tokio::test]
async fn create_and_close_session_over_grpc() {
    use ferry_e2e::grpc;
    use ferry_proto::psdb::v1alpha1::{
        CloseSessionRequest, CloseSessionResponse, CreateSessionRequest, CreateSessionResponse,
    };
    let cfg = cfg();
    let auth = cfg.basic_auth();
    let ch = grpc::channel(&cfg).await;
    let created = grpc::unary::<_, CreateSessionResponse>(
        ch.clone(),
        CREATE_SESSION,
        CreateSessionRequest::default(),
        Some(&auth),
    )
    .await
    .expect("CreateSession over gRPC")
    .into_inner();
    assert_eq!(created.branch, cfg.database);
    assert!(created.session.is_some());
    let closed = grpc::unary::<_, CloseSessionResponse>(
        ch,
        CLOSE_SESSION,
        CloseSessionRequest {
            session: created.session,
        },
        Some(&auth),
    )
    .await
    .expect("CloseSession over gRPC")
    .into_inner();
    assert_eq!(closed, CloseSessionResponse::default());
}
