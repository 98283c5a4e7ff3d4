//! Bad input gets a clear error with the right status and code, and the stack
//! keeps serving afterwards (Envoy, its wasm VM and the shim all survive).
mod common;
use bytes::Bytes;
use common::*;
use ferry_e2e::config::basic_auth;
use ferry_e2e::connect::{ConnectClient, EXECUTE};
use ferry_e2e::h3_client::H3Client;
use ferry_e2e::{grpc, Answer};
use ferry_proto::psdb::v1alpha1::ExecuteRequest;
use prost::Message;

fn assert_connect_error(a: &Answer, status: u16, code: &str, what: &str) {
    assert_eq!(
        a.status,
        status,
        "{what}: {:?}",
        String::from_utf8_lossy(&a.body)
    );
    assert!(
        a.header("content-type")
            .unwrap_or("")
            .starts_with("application/json"),
        "{what}: JSON error body"
    );
    let v = a.json();
    assert_eq!(v["code"], code, "{what}: {v}");
    let msg = v["message"].as_str().unwrap_or("");
    assert!(!msg.is_empty(), "{what}: a readable message");
}

fn assert_grpc_error(a: &Answer, code: i32, what: &str) {
    assert_eq!(a.status, 200, "{what}: gRPC errors travel as HTTP 200");
    let (got, msg) = a
        .grpc_status()
        .unwrap_or_else(|| panic!("{what}: no grpc-status in {:?}", a.headers));
    assert_eq!(got, code, "{what}: {msg}");
    assert!(!msg.is_empty(), "{what}: a readable grpc-message");
}

async fn still_serving() {
    let r = execute(Way::ConnectJsonH2, "SELECT 1").await;
    assert!(r.error.is_none());
    let r = execute(Way::ConnectJsonH3, "SELECT 1").await;
    assert!(r.error.is_none());
}

#[tokio::test]
async fn connect_bad_inputs() {
    let cfg = cfg();
    let c = ConnectClient::http2(&cfg);
    let auth = cfg.basic_auth();
    let json = [
        ("content-type", "application/json"),
        ("authorization", auth.as_str()),
    ];
    let proto = [
        ("content-type", "application/proto"),
        ("authorization", auth.as_str()),
    ];

    let a = c
        .post("/psdb.v1alpha1.Database/Nope", &json, b"{}".to_vec())
        .await;
    assert_connect_error(&a, 404, "unimplemented", "unknown RPC");
    let a = c.post("/some/other/path", &json, b"{}".to_vec()).await;
    assert_connect_error(&a, 404, "unimplemented", "unknown path");
    // GET without Connect's GET form (connect_get.rs), or for another RPC: 405.
    let a = c
        .send(reqwest::Method::GET, EXECUTE, &json, vec![])
        .await
        .unwrap();
    assert_eq!(a.status, 405, "GET: {:?}", String::from_utf8_lossy(&a.body));
    assert_eq!(a.header("allow"), Some("POST"));
    let a = c
        .send(
            reqwest::Method::GET,
            "/psdb.v1alpha1.Database/CreateSession?connect=v1&encoding=json&message=%7B%7D",
            &json,
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(
        a.status,
        405,
        "GET CreateSession: {:?}",
        String::from_utf8_lossy(&a.body)
    );

    let a = c
        .post(
            EXECUTE,
            &[("content-type", "text/plain"), ("authorization", &auth)],
            b"SELECT 1".to_vec(),
        )
        .await;
    assert_eq!(a.status, 415, "text/plain");
    let a = c
        .post(EXECUTE, &[("authorization", &auth)], b"{}".to_vec())
        .await;
    assert_eq!(a.status, 415, "no content type");

    for (body, what) in [
        (&b"{not json"[..], "broken JSON"),
        (&b"{\"query\": 5}"[..], "wrong JSON type"),
        (&b"[1,2]"[..], "JSON array"),
        (&b""[..], "empty JSON body"),
        (&b"{\"query\":\"SELECT 1\"}trailing"[..], "trailing garbage"),
    ] {
        let a = c.post(EXECUTE, &json, body.to_vec()).await;
        assert_connect_error(&a, 400, "invalid_argument", what);
    }
    let a = c.post(EXECUTE, &proto, vec![0xff, 0xff, 0xff]).await;
    assert_connect_error(&a, 400, "invalid_argument", "malformed protobuf");
    let a = c
        .post(
            EXECUTE,
            &[
                ("content-type", "application/json"),
                ("content-encoding", "br"),
                ("authorization", &auth),
            ],
            b"{}".to_vec(),
        )
        .await;
    assert!(
        a.status >= 400 && a.status < 600,
        "unsupported content-encoding: {}",
        a.status
    );

    // Credentials: missing, not Basic, undecodable, wrong password, unknown user.
    let body = br#"{"query":"SELECT 1"}"#.to_vec();
    let a = c
        .post(
            EXECUTE,
            &[("content-type", "application/json")],
            body.clone(),
        )
        .await;
    assert_connect_error(&a, 401, "unauthenticated", "no credentials");
    for bad in [
        "Bearer abc",
        "Basic !!!notbase64",
        &basic_auth("ferry", "wrong"),
        &basic_auth("nobody", "x"),
    ] {
        let a = c
            .post(
                EXECUTE,
                &[("content-type", "application/json"), ("authorization", bad)],
                body.clone(),
            )
            .await;
        assert_connect_error(&a, 401, "unauthenticated", bad);
        assert!(
            !String::from_utf8_lossy(&a.body).contains("wrong"),
            "the password is never echoed"
        );
    }

    // Oversized body (the filter's default limit is 8 MiB).
    let big = format!("{{\"query\":\"SELECT '{}'\"}}", "x".repeat(9 << 20));
    let a = c.post(EXECUTE, &json, big.into_bytes()).await;
    assert_connect_error(&a, 429, "resource_exhausted", "oversized body");

    still_serving().await;
}

#[tokio::test]
async fn grpc_bad_inputs() {
    let cfg = cfg();
    let c = ConnectClient::http2(&cfg);
    let auth = cfg.basic_auth();
    let msg = ExecuteRequest {
        query: "SELECT 1".into(),
        ..Default::default()
    }
    .encode_to_vec();
    let grpc_h = [
        ("content-type", "application/grpc"),
        ("te", "trailers"),
        ("authorization", auth.as_str()),
    ];

    let mut short = grpc_frame(&msg);
    short.truncate(short.len() - 1);
    let a = c.post(EXECUTE, &grpc_h, short).await;
    assert_grpc_error(&a, 3, "frame shorter than its length");
    let mut two = grpc_frame(&msg);
    two.extend(grpc_frame(&msg));
    let a = c.post(EXECUTE, &grpc_h, two).await;
    assert_grpc_error(&a, 3, "two messages on a unary call");
    let a = c.post(EXECUTE, &grpc_h, vec![0, 0, 0]).await;
    assert_grpc_error(&a, 3, "truncated frame header");
    let a = c.post(EXECUTE, &grpc_h, grpc_frame(&[0xff, 0xff])).await;
    assert_grpc_error(&a, 3, "malformed protobuf in a frame");
    let mut compressed = grpc_frame(&msg);
    compressed[0] = 1;
    let a = c.post(EXECUTE, &grpc_h, compressed).await;
    assert!(
        a.grpc_status().map(|s| s.0) != Some(0),
        "compressed flag without an encoding is refused"
    );
    let a = c
        .post("/psdb.v1alpha1.Database/Nope", &grpc_h, grpc_frame(&msg))
        .await;
    assert_grpc_error(&a, 12, "unknown RPC");

    // The real gRPC client: missing and wrong credentials.
    let ch = grpc::channel(&cfg).await;
    let req = ExecuteRequest {
        query: "SELECT 1".into(),
        ..Default::default()
    };
    let s = grpc::unary::<_, ferry_proto::psdb::v1alpha1::ExecuteResponse>(
        ch.clone(),
        EXECUTE,
        req.clone(),
        None,
    )
    .await
    .expect_err("no credentials");
    assert_eq!(s.code(), tonic::Code::Unauthenticated, "{s:?}");
    let wrong = basic_auth("ferry", "wrong");
    let s = grpc::unary::<_, ferry_proto::psdb::v1alpha1::ExecuteResponse>(
        ch.clone(),
        EXECUTE,
        req,
        Some(&wrong),
    )
    .await
    .expect_err("wrong password");
    assert_eq!(s.code(), tonic::Code::Unauthenticated, "{s:?}");
    assert!(!s.message().is_empty());

    still_serving().await;
}

#[tokio::test]
async fn http3_bad_inputs() {
    let cfg = cfg();
    let auth = cfg.basic_auth();
    let mut h3 = H3Client::connect(&cfg).await.expect("HTTP/3");
    let a = h3
        .post(
            EXECUTE,
            &[
                ("content-type", "application/json"),
                ("authorization", &auth),
            ],
            Bytes::from_static(b"{oops"),
        )
        .await
        .unwrap();
    assert_connect_error(&a, 400, "invalid_argument", "HTTP/3 broken JSON");
    let a = h3
        .post(
            EXECUTE,
            &[("content-type", "application/json")],
            Bytes::from_static(b"{}"),
        )
        .await
        .unwrap();
    assert_connect_error(&a, 401, "unauthenticated", "HTTP/3 no credentials");
    let a = h3
        .post(
            EXECUTE,
            &[
                ("content-type", "application/grpc"),
                ("authorization", &auth),
            ],
            Bytes::from_static(&[0, 0, 0, 0, 9]),
        )
        .await
        .unwrap();
    assert_grpc_error(&a, 3, "HTTP/3 gRPC frame longer than the body");
    // The same connection keeps working after the errors.
    let a = h3
        .post(
            EXECUTE,
            &[
                ("content-type", "application/json"),
                ("authorization", &auth),
            ],
            Bytes::from_static(br#"{"query":"SELECT 2"}"#),
        )
        .await
        .unwrap();
    assert_eq!(a.status, 200);
    h3.close().await;
    still_serving().await;
}

/// A gRPC client's deadline (grpc-timeout) bounds the call at Envoy: a query that
/// runs longer ends with DEADLINE_EXCEEDED on time, and the stack keeps serving.
#[tokio::test]
async fn grpc_deadline_is_enforced() {
    let cfg = cfg();
    let auth = cfg.basic_auth();
    let msg = ExecuteRequest {
        query: "SELECT SLEEP(3)".into(),
        ..Default::default()
    }
    .encode_to_vec();
    let h = [
        ("content-type", "application/grpc"),
        ("te", "trailers"),
        ("grpc-timeout", "300m"),
        ("authorization", auth.as_str()),
    ];
    // The shim keeps the deadline and stops the query; its status comes in trailers,
    // which reqwest does not read: HTTP/3 here.
    let started = std::time::Instant::now();
    let mut h3 = H3Client::connect(&cfg).await.unwrap();
    let a = h3.post(EXECUTE, &h, grpc_frame(&msg).into()).await.unwrap();
    let took = started.elapsed();
    assert_grpc_error(&a, 4, "grpc-timeout 300m on a 3 s query");
    assert!(
        took < std::time::Duration::from_secs(2),
        "answered after {took:?}"
    );
    // A deadline the gateway cannot read is refused, not dropped: the call would run
    // without the bound its client set. Nothing runs.
    let marker = unique("badtimeout");
    let msg = ExecuteRequest {
        query: format!("SELECT SLEEP(3), '{marker}'"),
        ..Default::default()
    }
    .encode_to_vec();
    let mut h = h;
    h[2] = ("grpc-timeout", "1.5S");
    let a = h3.post(EXECUTE, &h, grpc_frame(&msg).into()).await.unwrap();
    assert_grpc_error(&a, 3, "a malformed grpc-timeout");
    assert_eq!(
        a.grpc_status().unwrap().1,
        "grpc-timeout must be 1 to 8 digits and a unit (H, M, S, m, u or n), got \"1.5S\""
    );
    assert_eq!(running(&marker), 0, "nothing ran");
    still_serving().await;
}

/// An answer that fits the shim's limit but not the gateway's once converted to
/// protojson (base64 grows it by a third): ~55 MB of rows → ~73 MB of JSON, over the
/// filter's 64 MiB. gRPC ends with RESOURCE_EXHAUSTED; a Connect client, whose 200
/// is already out, sees the stream reset. Envoy and its VM survive both.
#[tokio::test]
async fn answers_too_large_after_conversion() {
    let cfg = cfg();
    let auth = cfg.basic_auth();
    let query = "SELECT REPEAT('a', 1000000) FROM seq_1_to_55";

    let mut h3 = H3Client::connect(&cfg).await.expect("HTTP/3");
    let msg = serde_json::json!({ "query": query }).to_string();
    let mut framed = vec![0u8];
    framed.extend((msg.len() as u32).to_be_bytes());
    framed.extend(msg.as_bytes());
    let a = h3
        .post(
            EXECUTE,
            &[
                ("content-type", "application/grpc+json"),
                ("authorization", &auth),
            ],
            Bytes::from(framed),
        )
        .await
        .unwrap();
    assert_grpc_error(&a, 8, "gRPC JSON answer over the limit after conversion");

    let c = ConnectClient::http2(&cfg);
    let body = serde_json::json!({ "query": query })
        .to_string()
        .into_bytes();
    let h = [
        ("content-type", "application/json"),
        ("authorization", auth.as_str()),
    ];
    let r = c.send(reqwest::Method::POST, EXECUTE, &h, body).await;
    assert!(r.is_err(), "a truncated answer must not look complete");

    still_serving().await;
}

/// The gateway and the shim read credentials alike (ferry-wire): unpadded base64 is
/// served, and an oversized Authorization header is refused by the gateway with a
/// clear error, not by the shim's HTTP server with a bare 431.
#[tokio::test]
async fn credentials_read_alike_and_oversized_headers_are_refused_clearly() {
    let cfg = cfg();
    let c = ConnectClient::http2(&cfg);
    let padded = basic_auth(&cfg.user, &cfg.password);
    let unpadded = padded.trim_end_matches('=').to_owned();
    assert_ne!(padded, unpadded, "the dev credentials need padding");
    let body = serde_json::json!({ "query": "SELECT 1" })
        .to_string()
        .into_bytes();
    let a = c
        .post(
            EXECUTE,
            &[
                ("content-type", "application/json"),
                ("authorization", &unpadded),
            ],
            body.clone(),
        )
        .await;
    assert_eq!(a.status, 200, "{:?}", String::from_utf8_lossy(&a.body));
    assert!(a.json().get("error").is_none(), "{}", a.json());

    let huge = format!("Basic {}", "QUFB".repeat(15_000)); // 60 KB, under Envoy's 60 KiB
    let a = c
        .post(
            EXECUTE,
            &[
                ("content-type", "application/json"),
                ("authorization", &huge),
            ],
            body,
        )
        .await;
    assert_eq!(a.status, 431, "{:?}", String::from_utf8_lossy(&a.body));
    let json = a.json();
    assert_eq!(json["code"], "resource_exhausted");
    assert!(
        json["message"]
            .as_str()
            .unwrap()
            .contains("4096-byte limit"),
        "{json}"
    );
    let msg = ExecuteRequest {
        query: "SELECT 1".into(),
        ..Default::default()
    }
    .encode_to_vec();
    let mut h3 = H3Client::connect(&cfg).await.unwrap();
    let a = h3
        .post(
            EXECUTE,
            &[
                ("content-type", "application/grpc"),
                ("te", "trailers"),
                ("authorization", &huge),
            ],
            grpc_frame(&msg).into(),
        )
        .await
        .unwrap();
    assert_grpc_error(&a, 8, "a 60 KB Authorization header over gRPC");
    still_serving().await;
}
