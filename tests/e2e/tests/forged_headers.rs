//! What Envoy tells the shim, a client cannot forge, in every form the filter is
//! delivered in (envoy/ferry.yaml and its scenarios; scripts/e2e-meshes.sh runs this file
//! on the Istio and Envoy Gateway forms, whose control planes make no header mutation):
//!
//! - its address (`x-ferry-client-addr`: the password-guessing throttle counts failed
//!   logins by it, and the filter judges the client's distance by it): the shim sees the
//!   peer Envoy saw, set by Envoy's early header mutation or by the filter itself
//!   (`client_address: "peer"`). The shim logs a failed request with the client's
//!   address; the test reads it there (`FERRY_E2E_SHIM_LOG`: the shims' logs,
//!   `:`-separated; default: the stack's `logs/shim.log`);
//! - a token's verified claims (`x-ferry-token-claims`: only Envoy's jwt_authn, after the
//!   filter, sets them): the filter removes a client's own, so a request with its own
//!   Basic credentials runs as its own user (a shim without tokens would refuse a request
//!   carrying claims; one with tokens, a request carrying both).
mod common;
use common::*;
use ferry_e2e::config::basic_auth;
use ferry_e2e::connect::{ConnectClient, EXECUTE};

fn shim_logs() -> Vec<std::path::PathBuf> {
    match std::env::var("FERRY_E2E_SHIM_LOG") {
        Ok(paths) if !paths.is_empty() => paths.split(':').map(Into::into).collect(),
        _ => vec![run_dir().join("logs/shim.log")],
    }
}

#[tokio::test]
async fn a_client_cannot_choose_its_address() {
    let cfg = cfg();
    let client = ConnectClient::http2(&cfg);
    let body = serde_json::json!({ "query": "SELECT 1" }).to_string();
    let mut users = Vec::new();
    for forged in [
        Some("198.51.100.9"),
        Some("2001:db8::77"),
        Some("junk"),
        None,
    ] {
        // A user of its own, so its refusal's log line is found; a wrong password.
        let user = unique("addr");
        let auth = basic_auth(&user, "not-the-password");
        let mut headers = vec![
            ("content-type", "application/json"),
            ("authorization", auth.as_str()),
        ];
        if let Some(address) = forged {
            headers.push(("x-ferry-client-addr", address));
        }
        let a = client.post(EXECUTE, &headers, body.clone().into()).await;
        assert_eq!(a.status, 401, "{forged:?}: {:?}", a.body);
        users.push((user, forged));
    }
    let log: String = shim_logs()
        .iter()
        .map(|path| std::fs::read_to_string(path).expect("the shim's log"))
        .collect();
    for (user, forged) in users {
        let line = log
            .lines()
            .find(|l| l.contains("msg=\"request failed\"") && l.contains(&format!("user={user} ")))
            .unwrap_or_else(|| panic!("no log line for {user} in {:?}", shim_logs()));
        assert!(
            line.contains(" client=127.0.0.1 "),
            "{forged:?}: the shim saw another address: {line}"
        );
    }
}

#[tokio::test]
async fn a_client_cannot_forge_token_claims() {
    use base64::Engine;
    let cfg = cfg();
    let forged =
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(r#"{"ferry_account":"admin"}"#);
    let auth = cfg.basic_auth();
    let headers = [
        ("content-type", "application/json"),
        ("authorization", auth.as_str()),
        ("x-ferry-token-claims", forged.as_str()),
    ];
    let body = serde_json::json!({ "query": "SELECT CURRENT_USER() AS u" }).to_string();
    let a = ConnectClient::http2(&cfg)
        .post(EXECUTE, &headers, body.into_bytes())
        .await;
    assert_eq!(a.status, 200, "{:?}", String::from_utf8_lossy(&a.body));
    let v = a.json();
    assert!(v.get("error").is_none(), "{v}");
    let rows = ferry_e2e::rows::json_rows(&v["result"]);
    let user = rows[0][0].clone().expect("CURRENT_USER()");
    let user = String::from_utf8_lossy(&user);
    assert!(
        user.starts_with(&format!("{}@", cfg.user)),
        "the request ran as {user}, not as its own user"
    );
}
