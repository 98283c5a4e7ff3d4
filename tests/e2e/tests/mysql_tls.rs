//! TLS between the shim and MySQL (shim/src/mysql/tls.rs): the e2e MariaDB serves
//! TLS with the dev CA's certificate; the TCP gateway (FERRY_E2E_TCP_PORT) verifies it.
//! Shims started here, straight at MariaDB's port, show each mode and each refusal.
mod common;

use common::*;
use ferry_e2e::connect::ConnectClient;
use ferry_e2e::rows::text_rows;
use ferry_proto::psdb::v1alpha1::{ExecuteRequest, ExecuteResponse};
use prost::Message;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

const SSL_VERSION: &str = "SHOW SESSION STATUS LIKE 'Ssl_version'";

/// The TLS version MariaDB reports for the connection a statement ran on ("" = plain).
fn ssl_version(r: &ExecuteResponse) -> String {
    assert!(r.error.is_none(), "{:?}", r.error);
    let rows = text_rows(r.result.as_ref().expect("a result"));
    assert_eq!(rows.len(), 1, "{rows:?}");
    rows[0][1].clone().unwrap_or_default()
}

#[tokio::test]
async fn the_tcp_gateway_reaches_mysql_over_verified_tls_the_socket_one_without() {
    let cfg = cfg();
    let over_tcp = ConnectClient::http2(&tcp_gateway())
        .execute_proto(SSL_VERSION)
        .await;
    assert_eq!(ssl_version(&over_tcp), "TLSv1.3");
    let over_socket = ConnectClient::http2(&cfg).execute_proto(SSL_VERSION).await;
    assert_eq!(ssl_version(&over_socket), "");
}

/// A shim of its own on a free port, reaching the e2e MariaDB over TCP; killed on drop.
struct Shim {
    child: Child,
    addr: String,
}

impl Drop for Shim {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The binary the stack runs (scripts/env.sh's FERRY_SHIM_BIN).
fn shim_bin() -> String {
    std::env::var("FERRY_SHIM_BIN").unwrap_or_else(|_| {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../target/release/ferry-shim")
            .display()
            .to_string()
    })
}

async fn shim(tls: &[(&str, &str)]) -> Shim {
    ferry_e2e::config::install_crypto_provider();
    // A port free a moment ago may be taken by the time the shim binds it (another
    // test's shim, an outgoing connection): then the shim exits and we try another.
    for _ in 0..5 {
        if let Some(shim) = try_shim(tls).await {
            return shim;
        }
    }
    panic!("ferry-shim with {tls:?} did not start on any of 5 ports");
}

async fn try_shim(tls: &[(&str, &str)]) -> Option<Shim> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let addr = format!("127.0.0.1:{port}");
    let mysql_port = std::env::var("FERRY_MYSQL_PORT").expect("FERRY_MYSQL_PORT");
    // Only what is set here: the test's environment names the stack's own socket files.
    let mut cmd = Command::new(shim_bin());
    cmd.env_clear()
        .env("FERRY_SHIM_ADDR", &addr)
        .env("FERRY_MYSQL_HOST", "127.0.0.1")
        .env("FERRY_MYSQL_PORT", mysql_port)
        .env("FERRY_MYSQL_DATABASE", cfg().database)
        .env("FERRY_LOG", "warn")
        .env(
            "FERRY_SESSION_KEYS_FILE",
            cfg().ca_pem.with_file_name("session.keys"),
        )
        .envs(tls.iter().copied())
        .stdout(std::process::Stdio::null());
    let child = cmd.spawn().expect("start ferry-shim");
    let mut shim = Shim { child, addr };
    let health = format!("http://{}/healthz", shim.addr);
    for _ in 0..100 {
        if let Ok(Some(_)) = shim.child.try_wait() {
            return None; // the port was taken
        }
        if let Ok(a) = reqwest::get(&health).await {
            if a.status().is_success() {
                // Ours, not a process that held the port first: ours would have exited.
                tokio::time::sleep(Duration::from_millis(200)).await;
                return match shim.child.try_wait() {
                    Ok(None) => Some(shim),
                    _ => None,
                };
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("ferry-shim with {tls:?} did not become healthy at {health}");
}

/// An Execute straight at a shim (its canonical Connect proto): the answer, or
/// the HTTP status and Connect error JSON.
async fn execute(shim: &Shim, query: &str) -> Result<ExecuteResponse, (u16, serde_json::Value)> {
    execute_as(shim, &cfg().basic_auth(), query).await
}

async fn execute_as(
    shim: &Shim,
    authorization: &str,
    query: &str,
) -> Result<ExecuteResponse, (u16, serde_json::Value)> {
    let request = ExecuteRequest {
        query: query.into(),
        ..Default::default()
    };
    let a = reqwest::Client::new()
        .post(format!(
            "http://{}/psdb.v1alpha1.Database/Execute",
            shim.addr
        ))
        .header("content-type", "application/proto")
        .header("authorization", authorization)
        .body(request.encode_to_vec())
        .send()
        .await
        .expect("POST to the shim");
    let status = a.status().as_u16();
    let body = a.bytes().await.expect("body");
    if status == 200 {
        Ok(ExecuteResponse::decode(body).expect("an ExecuteResponse"))
    } else {
        Err((
            status,
            serde_json::from_slice(&body).expect("a Connect error"),
        ))
    }
}

fn ca(cfg: &ferry_e2e::config::Config) -> String {
    cfg.ca_pem.display().to_string()
}

fn openssl(args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .output()
        .expect("openssl");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A new P-256 key in `key`, and a self-signed CA certificate (`-x509`) or a request.
const NEW_KEY: [&str; 6] = [
    "req",
    "-newkey",
    "ec",
    "-pkeyopt",
    "ec_paramgen_curve:P-256",
    "-nodes",
];

/// A CA of its own that signed nothing MariaDB has.
fn stranger_ca(dir: &Path) -> String {
    std::fs::create_dir_all(dir).expect("temp dir");
    let (key, pem) = (dir.join("stranger-ca.key"), dir.join("stranger-ca.pem"));
    let (key, pem) = (key.display().to_string(), pem.display().to_string());
    openssl(
        &[
            &NEW_KEY[..],
            &[
                "-x509",
                "-days",
                "1",
                "-subj",
                "/CN=Not Ferry's CA",
                "-keyout",
                &key,
                "-out",
                &pem,
            ],
        ]
        .concat(),
    );
    pem
}

/// A client certificate for `cn`, signed by the dev CA (whose key the stack keeps).
fn client_cert(dir: &Path, cn: &str) -> (String, String) {
    let certs = cfg().ca_pem.parent().expect("the certs dir").to_owned();
    std::fs::create_dir_all(dir).expect("temp dir");
    let path = |name: &str| dir.join(name).display().to_string();
    let (key, csr, pem, ext) = (
        path("client.key"),
        path("client.csr"),
        path("client.pem"),
        path("client.ext"),
    );
    // X.509 v3 (extensions): rustls refuses a v1 certificate as its own.
    std::fs::write(&ext, "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n")
        .expect("ext file");
    let (ca, ca_key) = (certs.join("ca.pem"), certs.join("ca.key"));
    let (ca, ca_key) = (ca.to_string_lossy(), ca_key.to_string_lossy());
    let subj = format!("/CN={cn}");
    openssl(
        &[
            &NEW_KEY[..],
            &["-subj", &subj, "-keyout", &key, "-out", &csr],
        ]
        .concat(),
    );
    openssl(&[
        "x509", "-req", "-days", "1", "-in", &csr, "-CA", &ca, "-CAkey", &ca_key, "-extfile", &ext,
        "-out", &pem,
    ]);
    (pem, key)
}

#[tokio::test]
async fn each_mode_connects_as_it_says() {
    let cfg = cfg();
    let ca = ca(&cfg);
    // Verified against the dev CA, by the address dialled (its certificate names 127.0.0.1) ...
    let s = shim(&[
        ("FERRY_MYSQL_TLS", "verify_identity"),
        ("FERRY_MYSQL_TLS_CA", &ca),
    ])
    .await;
    assert_eq!(
        ssl_version(&execute(&s, SSL_VERSION).await.unwrap()),
        "TLSv1.3"
    );
    // ... or by a name it carries, when MySQL is dialled by address.
    let s = shim(&[
        ("FERRY_MYSQL_TLS_CA", &ca),
        ("FERRY_MYSQL_TLS_SERVER_NAME", "localhost"),
    ])
    .await;
    assert_eq!(
        ssl_version(&execute(&s, SSL_VERSION).await.unwrap()),
        "TLSv1.3"
    );
    // Encrypted, unverified.
    let s = shim(&[("FERRY_MYSQL_TLS", "required")]).await;
    assert_eq!(
        ssl_version(&execute(&s, SSL_VERSION).await.unwrap()),
        "TLSv1.3"
    );
    // Loopback without settings: plain, as MySQL's own clients on the same host.
    let s = shim(&[]).await;
    assert_eq!(ssl_version(&execute(&s, SSL_VERSION).await.unwrap()), "");
}

#[tokio::test]
async fn a_certificate_that_does_not_verify_is_refused_and_the_shim_keeps_serving() {
    let cfg = cfg();
    let dir = std::env::temp_dir().join(unique("ferry_mysql_tls"));
    let stranger = stranger_ca(&dir);
    let cases = [
        (
            vec![("FERRY_MYSQL_TLS_CA", stranger.clone())],
            "UnknownIssuer",
        ),
        (
            vec![
                ("FERRY_MYSQL_TLS_CA", ca(&cfg)),
                ("FERRY_MYSQL_TLS_SERVER_NAME", "db.example.invalid".into()),
            ],
            "db.example.invalid",
        ),
    ];
    for (vars, says) in cases {
        let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let s = shim(&vars).await;
        for _ in 0..2 {
            let (status, error) = execute(&s, "SELECT 1").await.expect_err("refused");
            let message = error["message"].as_str().unwrap_or_default();
            assert_eq!(
                (status, error["code"].as_str()),
                (503, Some("unavailable")),
                "{error}"
            );
            assert!(
                message.contains("MySQL at 127.0.0.1:")
                    && message.contains(
                        "failed TLS (FERRY_MYSQL_TLS=verify_identity): invalid peer certificate"
                    ),
                "{message}"
            );
            assert!(message.contains(says), "{vars:?}: {message}");
            eprintln!("refused: {message}");
        }
        // Still up, and still answering its health check.
        let health = reqwest::get(format!("http://{}/healthz", s.addr))
            .await
            .expect("healthz");
        assert!(health.status().is_success());
    }
    std::fs::remove_dir_all(&dir).expect("remove temp dir");
}

async fn assert_unauthenticated(shim: &Shim, authorization: &str) {
    let (status, e) = execute_as(shim, authorization, "SELECT 1")
        .await
        .expect_err("refused");
    assert_eq!(
        (status, e["code"].as_str()),
        (401, Some("unauthenticated")),
        "{e}"
    );
}

#[tokio::test]
async fn a_server_that_requires_a_client_certificate_gets_one_and_the_password_still_counts() {
    let cfg = cfg();
    let dir = std::env::temp_dir().join(unique("ferry_mysql_x509"));
    let user = unique("x509");
    let password = "x509-pass-1";
    mariadb_root(&format!(
        "CREATE USER '{user}'@'127.0.0.1' IDENTIFIED BY '{password}' REQUIRE X509; \
         GRANT SELECT ON `{}`.* TO '{user}'@'127.0.0.1'",
        cfg.database
    ));
    let (cert, key) = client_cert(&dir, "ferry-shim");
    let ca = ca(&cfg);
    let auth = ferry_e2e::config::basic_auth(&user, password);
    let with = shim(&[
        ("FERRY_MYSQL_TLS_CA", &ca),
        ("FERRY_MYSQL_TLS_CERT", &cert),
        ("FERRY_MYSQL_TLS_KEY", &key),
    ])
    .await;
    let r = execute_as(&with, &auth, "SHOW SESSION STATUS LIKE 'Ssl_version'")
        .await
        .expect("served");
    assert_eq!(ssl_version(&r), "TLSv1.3");
    // The certificate is not a login: a wrong password is refused all the same.
    let wrong = ferry_e2e::config::basic_auth(&user, "not-the-password");
    assert_unauthenticated(&with, &wrong).await;
    // Without the certificate MariaDB refuses the account.
    let without = shim(&[("FERRY_MYSQL_TLS_CA", &ca)]).await;
    assert_unauthenticated(&without, &auth).await;
    mariadb_root(&format!("DROP USER '{user}'@'127.0.0.1'"));
    std::fs::remove_dir_all(&dir).expect("remove temp dir");
}

#[test]
fn contradictory_settings_stop_the_shim_at_start() {
    for (vars, says) in [
        (
            vec![
                ("FERRY_MYSQL_SOCKET", "/nonexistent/mysql.sock"),
                ("FERRY_MYSQL_TLS", "required"),
            ],
            "needs MySQL over TCP",
        ),
        (
            vec![("FERRY_MYSQL_TLS_CA", "/nonexistent/ca.pem")],
            "FERRY_MYSQL_TLS_CA=/nonexistent/ca.pem",
        ),
        (
            vec![("FERRY_MYSQL_TLS", "preferred")],
            "is not one of disabled, required, verify_identity",
        ),
    ] {
        let out = Command::new(shim_bin())
            .env_clear()
            .env("FERRY_SHIM_ADDR", "127.0.0.1:1")
            .envs(vars.iter().copied())
            .output()
            .expect("run ferry-shim");
        let log = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{vars:?}: {log}");
        assert!(
            log.contains("bad configuration") && log.contains(says),
            "{vars:?}: {log}"
        );
    }
}
