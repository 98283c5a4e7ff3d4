//! Envoy → shim over mutual TLS (envoy/shim-tls.yaml, shim/src/tls/listen.rs), as for a
//! shim on another host: the e2e TCP gateway runs that way, so every test on it
//! (sessions.rs, accounts.rs, compression.rs' distance test) crosses the TLS hop. Here,
//! straight at that shim: plain h2c, TLS without a client certificate and a client
//! certificate of another CA are all refused; Envoy's certificate gets in; and Envoy
//! sees the shim healthy and serves through it.
mod common;

use common::{cfg, tcp_gateway};
use ferry_e2e::connect::ConnectClient;
use std::path::PathBuf;

fn shim_addr() -> String {
    std::env::var("FERRY_E2E_TCP_SHIM_ADDR")
        .expect("FERRY_E2E_TCP_SHIM_ADDR: the TCP gateway's shim (scripts/e2e.sh)")
}

fn certs() -> PathBuf {
    cfg()
        .ca_pem
        .parent()
        .expect("the dev CA's directory")
        .to_path_buf()
}

/// A client trusting the dev CA, presenting `identity` (PEM: certificate, then key).
fn client(identity: Option<Vec<u8>>) -> reqwest::Client {
    ferry_e2e::config::install_crypto_provider();
    let mut b = reqwest::Client::builder()
        .tls_certs_only(
            cfg()
                .ca_der()
                .into_iter()
                .map(|der| reqwest::Certificate::from_der(&der).expect("CA certificate")),
        )
        .http2_prior_knowledge();
    if let Some(pem) = identity {
        b = b.identity(reqwest::Identity::from_pem(&pem).expect("client identity"));
    }
    b.build().expect("reqwest client")
}

fn pem(cert: PathBuf, key: PathBuf) -> Vec<u8> {
    let mut pem = std::fs::read(&cert).unwrap_or_else(|e| panic!("{}: {e}", cert.display()));
    pem.extend(std::fs::read(&key).unwrap_or_else(|e| panic!("{}: {e}", key.display())));
    pem
}

#[tokio::test]
async fn only_envoys_certificate_opens_the_shim() {
    let addr = shim_addr();
    let healthz = format!("https://{addr}/healthz");
    // Plain h2c, as Envoy speaks to a shim on its own host: no TLS, no answer.
    let plain = client(None)
        .get(format!("http://{addr}/healthz"))
        .send()
        .await;
    assert!(plain.is_err(), "plain h2c was answered: {plain:?}");
    // TLS, but no client certificate.
    let anonymous = client(None).get(&healthz).send().await;
    assert!(
        anonymous.is_err(),
        "answered without a client certificate: {anonymous:?}"
    );
    // A certificate of another CA (self-signed).
    let testdata = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shim/testdata");
    let stranger = pem(
        testdata.join("mysql-tls-client.pem"),
        testdata.join("mysql-tls-client.key"),
    );
    let refused = client(Some(stranger)).get(&healthz).send().await;
    assert!(
        refused.is_err(),
        "answered a stranger's certificate: {refused:?}"
    );
    // Envoy's own client certificate (scripts/dev-cert.sh): in.
    let envoy = pem(
        certs().join("envoy-client.pem"),
        certs().join("envoy-client.key"),
    );
    let answer = client(Some(envoy))
        .get(&healthz)
        .send()
        .await
        .expect("the shim answers Envoy's certificate");
    assert_eq!(answer.status(), 200);
    assert_eq!(answer.version(), reqwest::Version::HTTP_2);
}

#[tokio::test]
async fn envoy_serves_through_the_tls_hop() {
    let gateway = tcp_gateway();
    let answer = ConnectClient::http2(&gateway)
        .execute_json("SELECT 6 * 7 AS answer")
        .await;
    assert_eq!(
        answer.status,
        200,
        "{}",
        String::from_utf8_lossy(&answer.body)
    );
    let json: serde_json::Value = serde_json::from_slice(&answer.body).expect("JSON");
    assert_eq!(json["result"]["fields"][0]["name"], "answer", "{json}");
    // Envoy's health checks reach the shim over the same TLS: it is healthy there.
    let admin = std::env::var("FERRY_E2E_TCP_ADMIN_PORT").unwrap_or_else(|_| "19902".into());
    let clusters = reqwest::get(format!("http://127.0.0.1:{admin}/clusters"))
        .await
        .expect("Envoy's admin")
        .text()
        .await
        .expect("its /clusters");
    assert!(
        clusters
            .lines()
            .any(|l| l.starts_with("shim::") && l.ends_with("::health_flags::healthy")),
        "{clusters}"
    );
}
