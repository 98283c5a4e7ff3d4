//! Multiplexing: 2,000 concurrent sessions over HTTP/2 and HTTP/3 against a
//! MariaDB that allows 100 connections. The shim's per-credential pools keep
//! MySQL connections bounded and queue the rest, so no client ever sees "Too
//! many connections". It changes max_connections server-wide, so
//! scripts/e2e.sh runs it alone, after the other tests (`--ignored`).
mod common;
use common::*;
use ferry_e2e::connect::{ConnectClient, EXECUTE};
use ferry_e2e::h3_client::H3Client;
use ferry_e2e::Answer;
use std::sync::Arc;

const SESSIONS_H2: usize = 1800;
const SESSIONS_H3: usize = 200;

fn status(name: &str) -> u64 {
    let out = mariadb_root(&format!("SHOW GLOBAL STATUS LIKE '{name}'"));
    out.split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{name}: {out}"))
}

fn body(query: &str, session: &serde_json::Value) -> Vec<u8> {
    serde_json::json!({ "query": query, "session": session })
        .to_string()
        .into_bytes()
}

/// A session's two statements; the error text if anything failed.
fn check(a: &Answer, what: &str) -> Result<serde_json::Value, String> {
    if a.status != 200 {
        return Err(format!(
            "{what}: HTTP {} {}",
            a.status,
            String::from_utf8_lossy(&a.body)
        ));
    }
    let v: serde_json::Value =
        serde_json::from_slice(&a.body).map_err(|e| format!("{what}: {e}"))?;
    if let Some(e) = v.get("error") {
        return Err(format!("{what}: {e}"));
    }
    Ok(v["session"].clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "changes max_connections server-wide: run alone (scripts/e2e.sh does)"]
async fn thousands_of_sessions_share_a_hundred_connections() {
    let cfg = cfg();
    mariadb_root("SET GLOBAL max_connections = 100; FLUSH STATUS");
    let auth = cfg.basic_auth();
    let headers = Arc::new([
        ("content-type".to_string(), "application/json".to_string()),
        ("authorization".to_string(), auth),
    ]);
    let clients: Vec<ConnectClient> = (0..8).map(|_| ConnectClient::http2(&cfg)).collect();
    let mut tasks = Vec::new();
    for i in 0..SESSIONS_H2 {
        let c = clients[i % clients.len()].clone();
        let headers = headers.clone();
        tasks.push(tokio::spawn(async move {
            let h: Vec<(&str, &str)> = headers
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            let a = c
                .send(
                    reqwest::Method::POST,
                    EXECUTE,
                    &h,
                    body(&format!("SELECT {i}"), &serde_json::Value::Null),
                )
                .await
                .map_err(|e| e.to_string())?;
            let s = check(&a, "first")?;
            let a = c
                .send(
                    reqwest::Method::POST,
                    EXECUTE,
                    &h,
                    body("SELECT CONNECTION_ID()", &s),
                )
                .await
                .map_err(|e| e.to_string())?;
            check(&a, "second").map(|_| ())
        }));
    }
    for i in 0..SESSIONS_H3 {
        let cfg = cfg.clone();
        let headers = headers.clone();
        tasks.push(tokio::spawn(async move {
            let h: Vec<(&str, &str)> = headers
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            let mut h3 = H3Client::connect(&cfg)
                .await
                .map_err(|e| format!("h3 connect: {e}"))?;
            let a = h3
                .post(
                    EXECUTE,
                    &h,
                    body(&format!("SELECT {i}"), &serde_json::Value::Null).into(),
                )
                .await
                .map_err(|e| e.to_string())?;
            let s = check(&a, "h3 first")?;
            let a = h3
                .post(EXECUTE, &h, body("SELECT CONNECTION_ID()", &s).into())
                .await
                .map_err(|e| e.to_string())?;
            h3.close().await;
            check(&a, "h3 second").map(|_| ())
        }));
    }
    let mut errors = Vec::new();
    for t in tasks {
        if let Err(e) = t.await.expect("task") {
            errors.push(e);
        }
    }
    let max_used = status("Max_used_connections");
    let refused = status("Connection_errors_max_connections");
    mariadb_root("SET GLOBAL max_connections = 500");
    println!(
        "{} sessions, {} errors, MariaDB max used connections {max_used}, refused for max_connections {refused}",
        SESSIONS_H2 + SESSIONS_H3,
        errors.len()
    );
    assert!(
        errors.is_empty(),
        "{} errors, e.g. {:?}",
        errors.len(),
        &errors[..errors.len().min(5)]
    );
    assert!(max_used <= 100, "{max_used}");
    assert_eq!(refused, 0, "no connection was refused for max_connections");
}
