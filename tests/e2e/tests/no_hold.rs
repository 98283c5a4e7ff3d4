//! A gateway whose Envoy cannot hold headers for the filter (no
//! `allow_on_headers_stop_iteration`, as Istio's WasmPlugin and Envoy Gateway's
//! EnvoyExtensionPolicy generate it) in front of two shims: the Istio-shaped e2e
//! gateway (envoy/istio.yaml, scripts/e2e.sh, FERRY_E2E_NO_HOLD_PORT). Every RPC in
//! every protocol answers (nothing waits for a decision the filter cannot make), and a
//! pinned session that Envoy sends to the other shim is refused there, clearly and
//! without running, never executed on the wrong shim.
mod common;
use common::*;
use ferry_compress::Encoding;
use ferry_e2e::config::Config;
use ferry_e2e::connect::{ConnectClient, EXECUTE};
use ferry_e2e::framed::{Protocol, Shape, Transport, STREAM_EXECUTE};
use ferry_e2e::h3_client::H3Client;
use ferry_proto::psdb::v1alpha1::{ExecuteRequest, ExecuteResponse, Session};
use prost::Message;
use std::time::Duration;

const INSTANCE: &str = "ferry-shim-instance";
const CALL_LIMIT: Duration = Duration::from_secs(10);

/// The Istio-shaped gateway, when scripts/e2e-meshes.sh runs this file against it (the
/// main e2e run has none: then these tests say so and pass).
fn gateway() -> Option<Config> {
    let Ok(port) = std::env::var("FERRY_E2E_NO_HOLD_PORT") else {
        eprintln!("skipped: FERRY_E2E_NO_HOLD_PORT (the Istio-shaped gateway, scripts/e2e-meshes.sh) is not set");
        return None;
    };
    Some(cfg().with_port(port.parse().expect("a port")))
}

/// Execute and StreamExecute in every protocol and codec over HTTP/2 and HTTP/3, and
/// the session RPCs and Prepare over HTTP/1.1, HTTP/2 and HTTP/3: each answers within
/// the limit (a request held without the flag would hang) and succeeds.
#[tokio::test]
async fn every_rpc_in_every_protocol_answers() {
    let Some(cfg) = gateway() else { return };
    let select = ExecuteRequest {
        query: "SELECT 1".into(),
        ..Default::default()
    };
    for (path, protocols) in [
        (EXECUTE, &[Protocol::ConnectUnary, Protocol::Grpc][..]),
        (
            STREAM_EXECUTE,
            &[Protocol::ConnectStream, Protocol::Grpc][..],
        ),
    ] {
        for &protocol in protocols {
            for json in [false, true] {
                for transport in [Transport::H2, Transport::H3] {
                    let shape = Shape {
                        protocol,
                        json,
                        transport,
                        send: Encoding::Identity,
                        accept: None,
                    };
                    let message = if json {
                        br#"{"query":"SELECT 1"}"#.to_vec()
                    } else {
                        select.encode_to_vec()
                    };
                    let out = tokio::time::timeout(CALL_LIMIT, shape.call(&cfg, path, &message))
                        .await
                        .unwrap_or_else(|_| {
                            panic!("{path} {shape:?}: no answer in {CALL_LIMIT:?}")
                        });
                    assert_eq!(out.answer.status, 200, "{path} {shape:?}: {out:?}");
                    if let Some((status, message)) = out.answer.grpc_status() {
                        assert_eq!(status, 0, "{path} {shape:?}: {message}");
                    }
                    assert!(!out.messages.is_empty(), "{path} {shape:?}: {out:?}");
                }
            }
        }
    }
    let auth = cfg.basic_auth();
    let headers = [
        ("content-type", "application/json"),
        ("authorization", auth.as_str()),
    ];
    for (rpc, body) in [
        ("CreateSession", "{}"),
        ("Prepare", r#"{"query":"SELECT ?"}"#),
        ("CloseSession", "{}"),
    ] {
        let path = format!("/psdb.v1alpha1.Database/{rpc}");
        for client in [ConnectClient::http2(&cfg), ConnectClient::http1(&cfg)] {
            let a = tokio::time::timeout(CALL_LIMIT, client.post(&path, &headers, body.into()))
                .await
                .unwrap_or_else(|_| panic!("{rpc}: no answer in {CALL_LIMIT:?}"));
            assert_eq!(
                a.status,
                200,
                "{rpc}: {:?}",
                String::from_utf8_lossy(&a.body)
            );
        }
        let h3 = async {
            let mut h3 = H3Client::connect(&cfg).await.expect("HTTP/3 connection");
            let a = h3
                .post(&path, &headers, body.as_bytes().to_vec().into())
                .await;
            h3.close().await;
            a.expect("HTTP/3 request")
        };
        let a = tokio::time::timeout(CALL_LIMIT, h3)
            .await
            .unwrap_or_else(|_| panic!("{rpc} over HTTP/3: no answer"));
        assert_eq!(
            a.status,
            200,
            "{rpc} (h3): {:?}",
            String::from_utf8_lossy(&a.body)
        );
    }
}

/// One Execute as Connect JSON over HTTP/2: the answer and the shim that served it.
async fn execute(
    cfg: &Config,
    session: Option<&Session>,
    query: &str,
) -> (ExecuteResponse, String) {
    let a = ConnectClient::http2(cfg)
        .execute_json_in(session, query)
        .await;
    assert_eq!(
        a.status,
        200,
        "{query}: {:?}",
        String::from_utf8_lossy(&a.body)
    );
    let instance = a.header(INSTANCE).expect("a shim answered").to_owned();
    (
        serde_json::from_slice(&a.body).expect("protojson"),
        instance,
    )
}

/// A transaction pinned in one shim: Envoy balances its statements over both (it
/// cannot route by the session without the hold). The holder runs them; the other
/// shim refuses each with UNAVAILABLE and runs nothing; the session comes back
/// unchanged, so the client's next try may reach the holder. What committed is exactly
/// what the holder ran.
#[tokio::test]
async fn a_pinned_session_on_the_wrong_shim_is_refused_and_nothing_runs_there() {
    if std::env::var("FERRY_E2E_NO_HOLD_SHIMS").as_deref() != Ok("2") {
        eprintln!("skipped: the gateway has one shim (FERRY_E2E_NO_HOLD_SHIMS=2 runs it)");
        return;
    }
    let Some(cfg) = gateway() else { return };
    let t = unique("nohold");
    let (r, _) = execute(
        &cfg,
        None,
        &format!("CREATE TABLE {t} (id INT PRIMARY KEY)"),
    )
    .await;
    assert!(r.error.is_none(), "{:?}", r.error);
    let (r, holder) = execute(&cfg, None, "BEGIN").await;
    assert!(r.error.is_none(), "{:?}", r.error);
    let mut session = r.session.expect("a session");
    let (mut ran, mut refused) = (0, 0);
    for id in 0..16 {
        let (r, instance) = execute(
            &cfg,
            Some(&session),
            &format!("INSERT INTO {t} VALUES ({id})"),
        )
        .await;
        match &r.error {
            None => {
                assert_eq!(instance, holder, "only the holder runs the transaction");
                ran += 1;
                session = r.session.expect("a session");
            }
            Some(e) => {
                assert_ne!(instance, holder);
                assert_eq!(
                    e.code(),
                    ferry_proto::vitess::vtrpc::Code::Unavailable,
                    "{e:?}"
                );
                assert!(
                    e.message.contains("pinned to another shim"),
                    "{}",
                    e.message
                );
                assert!(e.message.contains("nothing was executed"), "{}", e.message);
                assert_eq!(
                    r.session.as_ref(),
                    Some(&session),
                    "the session is unchanged"
                );
                refused += 1;
            }
        }
    }
    assert!(
        ran > 0 && refused > 0,
        "both shims were reached: ran {ran}, refused {refused}"
    );
    // Nothing is visible before the commit; the commit lands once it reaches the holder.
    assert_eq!(count_rows(&t), 0);
    let mut committed = false;
    for _ in 0..10 {
        let (r, instance) = execute(&cfg, Some(&session), "COMMIT").await;
        if r.error.is_none() {
            assert_eq!(instance, holder);
            committed = true;
            break;
        }
    }
    assert!(committed, "COMMIT reached the holder within 10 tries");
    assert_eq!(count_rows(&t), ran, "exactly what the holder ran");
}

/// What a mesh cannot add, and what happens instead: without the Lua helper a Connect
/// GET arrives without a body and is refused with 405 and `allow: POST` (nothing runs);
/// without Envoy's zstd compressor a Connect client accepting zstd gets the filter's
/// own zstd (the mesh shapes give the filter no client distance, so it compresses as
/// asked).
#[tokio::test]
async fn without_the_lua_helper_and_envoys_compressor() {
    let Some(cfg) = gateway() else { return };
    let auth = cfg.basic_auth();
    let client = ConnectClient::http2(&cfg);
    let get = client
        .send(
            reqwest::Method::GET,
            "/psdb.v1alpha1.Database/Execute?connect=v1&encoding=json&message=%7B%22query%22%3A%22SELECT%201%22%7D",
            &[("authorization", auth.as_str())],
            Vec::new(),
        )
        .await
        .expect("an answer");
    assert_eq!(get.status, 405, "{:?}", String::from_utf8_lossy(&get.body));
    assert_eq!(get.header("allow"), Some("POST"));
    assert!(
        String::from_utf8_lossy(&get.body).contains("use POST"),
        "{:?}",
        String::from_utf8_lossy(&get.body)
    );
    let query = r#"{"query":"SELECT REPEAT('ferry', 4000) AS r"}"#;
    let a = client
        .post(
            EXECUTE,
            &[
                ("content-type", "application/json"),
                ("authorization", auth.as_str()),
                ("accept-encoding", "zstd"),
            ],
            query.into(),
        )
        .await;
    assert_eq!(a.status, 200);
    assert_eq!(
        a.header("content-encoding"),
        Some("zstd"),
        "{:?}",
        a.headers
    );
    let mut plain = Vec::new();
    ferry_compress::decompress(Encoding::Zstd, &a.body, 1 << 20, &mut plain).expect("zstd");
    let answer: serde_json::Value = serde_json::from_slice(&plain).expect("JSON");
    assert!(answer["result"]["rows"].is_array(), "{answer}");
}
