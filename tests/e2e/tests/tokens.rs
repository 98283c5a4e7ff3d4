//! Short-lived tokens instead of passwords (envoy/tokens.yaml, docs/guides/tokens.md),
//! on the e2e gateway that runs that scenario (scripts/e2e.sh: the browser gateway).
//! Its Envoy verifies ES256 tokens against two providers: keys from a file, and keys
//! fetched over HTTPS from scripts/dev-idp.py; the shim maps the `ferry_account` claim:
//! `app` → the dev user, `admin` → root, `super` → an account with global privileges.
//! Tokens are minted with scripts/dev-idp.py, the documented development way.
//!
//! Environment (scripts/e2e.sh): FERRY_E2E_TOKENS_PORT (the gateway), FERRY_E2E_TOKENS_DIR
//! (its keys), FERRY_E2E_TOKENS_LOGS (its logs: Envoy's, the access log, the shim's).
mod common;
use common::*;
use ferry_e2e::config::{basic_auth, Config};
use ferry_e2e::connect::{ConnectClient, EXECUTE};
use ferry_e2e::h3_client::H3Client;
use ferry_e2e::Answer;
use std::path::PathBuf;
use std::process::Command;

/// The account `super` maps to (its password is in the gateway's secrets file).
const SUPER_USER: &str = "ferry_tok_super";
const SUPER_PASSWORD: &str = "tok-super-pw-1";

struct Gateway {
    cfg: Config,
    keys: PathBuf,
    logs: PathBuf,
}

fn gateway() -> Option<Gateway> {
    let var = |n: &str| std::env::var(n).ok().filter(|v| !v.is_empty());
    let (Some(port), Some(keys), Some(logs)) = (
        var("FERRY_E2E_TOKENS_PORT"),
        var("FERRY_E2E_TOKENS_DIR"),
        var("FERRY_E2E_TOKENS_LOGS"),
    ) else {
        eprintln!("skipped: FERRY_E2E_TOKENS_PORT/_DIR/_LOGS not set (scripts/e2e.sh sets them)");
        return None;
    };
    Some(Gateway {
        cfg: cfg().with_port(port.parse().expect("FERRY_E2E_TOKENS_PORT is a port")),
        keys: keys.into(),
        logs: logs.into(),
    })
}

impl Gateway {
    /// A token from scripts/dev-idp.py: signed with the file provider's key unless
    /// `args` say otherwise.
    fn mint(&self, args: &[&str]) -> String {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
        let key = self.keys.join("file.pem");
        let out = Command::new("python3")
            .arg(root.join("scripts/dev-idp.py"))
            .args(["mint", "--key", key.to_str().unwrap()])
            .args(args)
            .output()
            .expect("python3 scripts/dev-idp.py");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    }

    async fn query(&self, auth: &str, sql: &str) -> Answer {
        query_on(&self.cfg, auth, sql, &[]).await
    }
}

async fn query_on(cfg: &Config, auth: &str, sql: &str, extra: &[(&str, &str)]) -> Answer {
    let mut headers = vec![
        ("content-type", "application/json"),
        ("authorization", auth),
    ];
    headers.extend_from_slice(extra);
    let body = serde_json::json!({ "query": sql }).to_string().into_bytes();
    ConnectClient::http2(cfg)
        .post(EXECUTE, &headers, body)
        .await
}

fn first_cell(a: &Answer) -> String {
    let v = a.json();
    assert!(v.get("error").is_none(), "{v}");
    let rows = ferry_e2e::rows::json_rows(&v["result"]);
    String::from_utf8(rows[0][0].clone().expect("a value")).unwrap()
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

/// What a refused credential gets: 401 `unauthenticated`, as JSON. Returns the message.
fn refused(a: &Answer, what: &str) -> String {
    assert_eq!(
        a.status,
        401,
        "{what}: {:?}",
        String::from_utf8_lossy(&a.body)
    );
    let v = a.json();
    assert_eq!(v["code"], "unauthenticated", "{what}: {v}");
    v["message"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn a_token_runs_as_the_account_its_claim_names() {
    let Some(g) = gateway() else { return };
    let user = format!("{}@localhost", g.cfg.user);
    // Keys from a file, HTTP/2.
    let a = g
        .query(&bearer(&g.mint(&[])), "SELECT CURRENT_USER()")
        .await;
    assert_eq!(a.status, 200, "{:?}", String::from_utf8_lossy(&a.body));
    assert_eq!(first_cell(&a), user);
    // Keys Envoy fetched over HTTPS (the other provider, its own issuer and key).
    let url_key = g.keys.join("url.pem");
    let token = g.mint(&[
        "--key",
        url_key.to_str().unwrap(),
        "--kid",
        "url-1",
        "--iss",
        "https://idp.ferry.invalid/url",
    ]);
    let a = g.query(&bearer(&token), "SELECT CURRENT_USER()").await;
    assert_eq!(a.status, 200, "{:?}", String::from_utf8_lossy(&a.body));
    assert_eq!(first_cell(&a), user);
    // HTTP/3.
    let mut h3 = H3Client::connect(&g.cfg).await.expect("HTTP/3 connection");
    let body = serde_json::json!({ "query": "SELECT CURRENT_USER()" }).to_string();
    let auth = bearer(&g.mint(&[]));
    let a = h3
        .post(
            EXECUTE,
            &[
                ("content-type", "application/json"),
                ("authorization", auth.as_str()),
            ],
            body.into_bytes().into(),
        )
        .await
        .expect("HTTP/3 request");
    h3.close().await;
    assert_eq!(a.status, 200);
    assert_eq!(first_cell(&a), user);
    // A transaction across requests: the session a token's request got carries on.
    let table = unique("tok");
    let auth = bearer(&g.mint(&[]));
    assert_eq!(
        g.query(&auth, &format!("CREATE TABLE {table} (id INT PRIMARY KEY)"))
            .await
            .status,
        200
    );
    let client = ConnectClient::http2(&g.cfg);
    let headers = [
        ("content-type", "application/json"),
        ("authorization", auth.as_str()),
    ];
    let mut session = serde_json::Value::Null;
    for sql in [
        "BEGIN".to_owned(),
        format!("INSERT INTO {table} VALUES (1)"),
        "COMMIT".to_owned(),
    ] {
        let body = serde_json::json!({ "query": sql, "session": session }).to_string();
        let a = client.post(EXECUTE, &headers, body.into_bytes()).await;
        assert_eq!(
            a.status,
            200,
            "{sql}: {:?}",
            String::from_utf8_lossy(&a.body)
        );
        let v = a.json();
        assert!(v.get("error").is_none(), "{sql}: {v}");
        session = v["session"].clone();
    }
    assert_eq!(count_rows(&table), 1);
    // Basic credentials keep working on the same gateway.
    let a = g.query(&g.cfg.basic_auth(), "SELECT CURRENT_USER()").await;
    assert_eq!(first_cell(&a), user);
}

#[tokio::test]
async fn a_refused_token_looks_like_a_wrong_password() {
    let Some(g) = gateway() else { return };
    // Global privileges: an administrator the shim does not serve, token or not.
    mariadb_root(&format!(
        "CREATE OR REPLACE USER '{SUPER_USER}'@'localhost' IDENTIFIED BY '{SUPER_PASSWORD}'; \
         GRANT ALL PRIVILEGES ON *.* TO '{SUPER_USER}'@'localhost'"
    ));
    let wrong = refused(
        &g.query(&basic_auth(&g.cfg.user, "not-the-password"), "SELECT 1")
            .await,
        "a wrong password",
    );
    let valid = g.mint(&[]);
    let (head, rest) = valid.split_once('.').unwrap();
    let (payload, signature) = rest.split_once('.').unwrap();
    let other_sig = if signature.starts_with('A') { "B" } else { "A" };
    let bad_signature = format!("{head}.{payload}.{other_sig}{}", &signature[1..]);
    let cases: Vec<(&str, String, &str)> = vec![
        ("expired", g.mint(&["--ttl", "-120"]), "Jwt is expired"),
        (
            "another issuer",
            g.mint(&["--iss", "https://idp.example.com"]),
            "Jwt issuer is not configured",
        ),
        (
            "another audience",
            g.mint(&["--aud", "not-ferry"]),
            "Audiences in Jwt are not allowed",
        ),
        ("a bad signature", bad_signature, "Jwt verification fails"),
        (
            "an unknown key id",
            g.mint(&["--kid", "file-9"]),
            "Jwks doesn't have key to match kid or alg from Jwt",
        ),
        ("not a JWT", "abc.def".into(), "Jwt is not in the form"),
        (
            "an account not mapped",
            g.mint(&["--account", "ghost"]),
            "claim names no account this gateway serves",
        ),
        (
            "no account claim",
            g.mint(&["--account", ""]),
            "no `ferry_account` claim",
        ),
        ("mapped to root", g.mint(&["--account", "admin"]), &wrong),
        (
            "mapped to an account with global privileges",
            g.mint(&["--account", "super"]),
            &wrong,
        ),
    ];
    for (what, token, expected) in &cases {
        let msg = refused(&g.query(&bearer(token), "SELECT 1").await, what);
        assert!(msg.contains(expected), "{what}: {msg}");
    }
    // The same over gRPC (Envoy answers a gRPC request's refusal trailers-only; for
    // another audience with PERMISSION_DENIED, which the filter makes UNAUTHENTICATED).
    for (token, expected) in [
        (g.mint(&["--ttl", "-120"]), "Jwt is expired"),
        (
            g.mint(&["--aud", "not-ferry"]),
            "Audiences in Jwt are not allowed",
        ),
    ] {
        let channel = ferry_e2e::grpc::channel(&g.cfg).await;
        let req = ferry_proto::psdb::v1alpha1::ExecuteRequest {
            query: "SELECT 1".into(),
            ..Default::default()
        };
        let status = ferry_e2e::grpc::unary::<_, ferry_proto::psdb::v1alpha1::ExecuteResponse>(
            channel,
            EXECUTE,
            req,
            Some(&bearer(&token)),
        )
        .await
        .expect_err("refused");
        assert_eq!(status.code(), tonic::Code::Unauthenticated, "{status:?}");
        assert!(status.message().contains(expected), "{status:?}");
    }
    mariadb_root(&format!("DROP USER '{SUPER_USER}'@'localhost'"));
}

#[tokio::test]
async fn a_client_cannot_forge_verified_claims() {
    let Some(g) = gateway() else { return };
    use base64::Engine;
    let forged =
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(r#"{"ferry_account":"admin"}"#);
    // With its own Basic credentials: the forged header is removed on arrival (the shim
    // would refuse a request carrying both), so the request runs as its own user.
    let a = query_on(
        &g.cfg,
        &g.cfg.basic_auth(),
        "SELECT CURRENT_USER()",
        &[("x-ferry-token-claims", forged.as_str())],
    )
    .await;
    assert_eq!(a.status, 200, "{:?}", String::from_utf8_lossy(&a.body));
    assert_eq!(first_cell(&a), format!("{}@localhost", g.cfg.user));
    // Without credentials: nothing to go on.
    let headers = [
        ("content-type", "application/json"),
        ("x-ferry-token-claims", forged.as_str()),
    ];
    let body = serde_json::json!({ "query": "SELECT 1" }).to_string();
    let a = ConnectClient::http2(&g.cfg)
        .post(EXECUTE, &headers, body.into_bytes())
        .await;
    assert!(refused(&a, "forged claims alone").contains("missing Authorization"));
}

#[tokio::test]
async fn the_token_reaches_no_log() {
    let Some(g) = gateway() else { return };
    let token = g.mint(&["--sub", "log-check"]);
    let a = g.query(&bearer(&token), "SELECT 1").await;
    assert_eq!(a.status, 200);
    let expired = g.mint(&["--ttl", "-120"]);
    refused(&g.query(&bearer(&expired), "SELECT 1").await, "expired");
    // The access log is flushed every second.
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let signature = |t: &str| t.rsplit('.').next().unwrap().to_owned();
    let mut read = 0;
    for entry in std::fs::read_dir(&g.logs).expect("the gateway's logs") {
        let path = entry.unwrap().path();
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        read += 1;
        for t in [&token, &expired] {
            assert!(
                !text.contains(&signature(t)),
                "{} holds a token",
                path.display()
            );
        }
    }
    assert!(read >= 3, "read {read} log files in {}", g.logs.display());
}
