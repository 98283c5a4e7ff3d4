//! Shared helpers for the end-to-end tests: every call goes to the real stack
//! (Envoy + wasm filter + shim + MariaDB) started by scripts/e2e.sh.
#![allow(dead_code)]

use bytes::Bytes;
use ferry_e2e::config::Config;
use ferry_e2e::connect::{ConnectClient, EXECUTE};
use ferry_e2e::h3_client::H3Client;
use ferry_e2e::{grpc, Answer};
use ferry_proto::psdb::v1alpha1::{ExecuteRequest, ExecuteResponse, Session};
use prost::Message;
use std::sync::atomic::{AtomicU32, Ordering};

pub fn cfg() -> Config {
    Config::from_env()
}

/// The e2e TCP gateway (scripts/e2e.sh `tcp_gateway`): its shim reaches MariaDB over
/// verified TLS on TCP, Envoy reaches the shim over mutual TLS, its sessions expire
/// after 2 s, and it keeps the shipped distance defaults for compression.
pub fn tcp_gateway() -> Config {
    let port: u16 = std::env::var("FERRY_E2E_TCP_PORT")
        .expect("FERRY_E2E_TCP_PORT: the e2e TCP gateway (scripts/e2e.sh)")
        .parse()
        .expect("FERRY_E2E_TCP_PORT is a port");
    cfg().with_port(port)
}

/// The gateways `grpc_web.rs` checks: the stack's own (Envoy's grpc_web filter in front
/// of the Ferry filter converts gRPC-Web), then each port listed, comma-separated, in
/// `FERRY_E2E_GRPC_WEB_PORTS`: gateways of the same stack (its CA, its database) whose
/// Envoy puts grpc_web after the Ferry filter or has none, so that the filter serves
/// gRPC-Web itself. `FERRY_E2E_GRPC_WEB_ONLY=1` checks the listed ones alone.
pub fn grpc_web_gateways() -> Vec<Config> {
    let cfg = cfg();
    let listed: Vec<Config> = std::env::var("FERRY_E2E_GRPC_WEB_PORTS")
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| {
            let port = p
                .parse()
                .unwrap_or_else(|_| panic!("FERRY_E2E_GRPC_WEB_PORTS: {p:?} is not a port"));
            cfg.with_port(port)
        })
        .collect();
    let only = std::env::var("FERRY_E2E_GRPC_WEB_ONLY").is_ok_and(|v| v == "1");
    if only {
        assert!(
            !listed.is_empty(),
            "FERRY_E2E_GRPC_WEB_ONLY=1 without FERRY_E2E_GRPC_WEB_PORTS"
        );
        return listed;
    }
    std::iter::once(cfg).chain(listed).collect()
}

/// A table name no other test (or earlier run) uses.
pub fn unique(prefix: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!(
        "{prefix}_{}_{}_{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed),
        nanos % 100_000
    )
}

/// The client forms Ferry serves, over the transports it serves them on.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Way {
    ConnectJsonH2,
    ConnectProtoH2,
    ConnectJsonH1,
    GrpcH2,
    ConnectJsonH3,
    ConnectProtoH3,
    GrpcH3,
}

pub const ALL_WAYS: &[Way] = &[
    Way::ConnectJsonH2,
    Way::ConnectProtoH2,
    Way::ConnectJsonH1,
    Way::GrpcH2,
    Way::ConnectJsonH3,
    Way::ConnectProtoH3,
    Way::GrpcH3,
];

pub fn grpc_frame(message: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(5 + message.len());
    f.push(0);
    f.extend_from_slice(&(message.len() as u32).to_be_bytes());
    f.extend_from_slice(message);
    f
}

pub fn grpc_unframe(body: &[u8]) -> &[u8] {
    assert!(
        body.len() >= 5,
        "gRPC body shorter than a frame header: {body:?}"
    );
    assert_eq!(body[0], 0, "uncompressed frame");
    let len = u32::from_be_bytes([body[1], body[2], body[3], body[4]]) as usize;
    assert_eq!(body.len(), 5 + len, "exactly one frame");
    &body[5..]
}

/// Runs one Execute the given way and returns the decoded answer, asserting the
/// transport-level success of that way (HTTP 200, content type, grpc-status 0).
pub async fn execute(way: Way, query: &str) -> ExecuteResponse {
    execute_in(way, None, query).await
}

/// Execute carrying a session (as a client sends back the last one it got).
pub async fn execute_in(way: Way, session: Option<&Session>, query: &str) -> ExecuteResponse {
    let cfg = cfg();
    let auth = cfg.basic_auth();
    let request = ExecuteRequest {
        query: query.into(),
        session: session.cloned(),
        ..Default::default()
    };
    let json_body = serde_json::json!({ "query": query, "session": session }).to_string();
    let proto_body = request.encode_to_vec();
    let json_headers = [
        ("content-type", "application/json"),
        ("authorization", auth.as_str()),
    ];
    let proto_headers = [
        ("content-type", "application/proto"),
        ("authorization", auth.as_str()),
    ];
    let grpc_headers = [
        ("content-type", "application/grpc"),
        ("te", "trailers"),
        ("authorization", auth.as_str()),
    ];
    match way {
        Way::ConnectJsonH2 | Way::ConnectJsonH1 => {
            let c = if way == Way::ConnectJsonH1 {
                ConnectClient::http1(&cfg)
            } else {
                ConnectClient::http2(&cfg)
            };
            let a = c.post(EXECUTE, &json_headers, json_body.into_bytes()).await;
            let want = if way == Way::ConnectJsonH1 {
                http::Version::HTTP_11
            } else {
                http::Version::HTTP_2
            };
            assert_eq!(a.version, want);
            from_json(&a)
        }
        Way::ConnectProtoH2 => {
            let a = ConnectClient::http2(&cfg)
                .post(EXECUTE, &proto_headers, proto_body)
                .await;
            assert_eq!(a.status, 200, "{:?}", String::from_utf8_lossy(&a.body));
            assert_eq!(a.header("content-type"), Some("application/proto"));
            ExecuteResponse::decode(a.body).expect("proto answer")
        }
        Way::GrpcH2 => {
            let ch = grpc::channel(&cfg).await;
            grpc::execute_request(ch, &cfg, request)
                .await
                .unwrap_or_else(|s| panic!("gRPC status {s:?}"))
        }
        Way::ConnectJsonH3 | Way::ConnectProtoH3 | Way::GrpcH3 => {
            let mut h3 = H3Client::connect(&cfg).await.expect("HTTP/3 connection");
            let a = match way {
                Way::ConnectJsonH3 => h3.post(EXECUTE, &json_headers, json_body.into()).await,
                Way::ConnectProtoH3 => {
                    h3.post(EXECUTE, &proto_headers, proto_body.clone().into())
                        .await
                }
                _ => {
                    h3.post(EXECUTE, &grpc_headers, Bytes::from(grpc_frame(&proto_body)))
                        .await
                }
            }
            .expect("HTTP/3 request");
            h3.close().await;
            assert_eq!(a.version, http::Version::HTTP_3);
            match way {
                Way::ConnectJsonH3 => from_json(&a),
                Way::ConnectProtoH3 => {
                    assert_eq!(a.status, 200, "{:?}", String::from_utf8_lossy(&a.body));
                    assert_eq!(a.header("content-type"), Some("application/proto"));
                    ExecuteResponse::decode(a.body).expect("proto answer")
                }
                _ => {
                    assert_eq!(a.status, 200);
                    assert!(a
                        .header("content-type")
                        .unwrap_or("")
                        .starts_with("application/grpc"));
                    assert_eq!(
                        a.grpc_status(),
                        Some((0, String::new())),
                        "trailers: {:?}",
                        a.trailers
                    );
                    ExecuteResponse::decode(grpc_unframe(&a.body)).expect("proto answer")
                }
            }
        }
    }
}

fn from_json(a: &Answer) -> ExecuteResponse {
    assert_eq!(a.status, 200, "{:?}", String::from_utf8_lossy(&a.body));
    assert_eq!(a.header("content-type"), Some("application/json"));
    serde_json::from_slice(&a.body).expect("protojson ExecuteResponse")
}

/// Percent-encodes a query component (everything but RFC 3986 unreserved characters).
pub fn percent_encode(s: &[u8]) -> String {
    s.iter()
        .map(|&b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Rows in a table, counted by MariaDB directly (not through Ferry).
pub fn count_rows(table: &str) -> usize {
    mariadb_root(&format!("SELECT COUNT(*) FROM {table}"))
        .parse()
        .expect("a count")
}

/// CloseSession over Connect proto (HTTP/2), as a client ends its session.
pub async fn close_session(session: &Session) {
    let cfg = cfg();
    let auth = cfg.basic_auth();
    let body = ferry_proto::psdb::v1alpha1::CloseSessionRequest {
        session: Some(session.clone()),
    }
    .encode_to_vec();
    let a = ConnectClient::http2(&cfg)
        .post(
            ferry_e2e::connect::CLOSE_SESSION,
            &[
                ("content-type", "application/proto"),
                ("authorization", auth.as_str()),
            ],
            body,
        )
        .await;
    assert_eq!(a.status, 200, "{:?}", String::from_utf8_lossy(&a.body));
    let r = ferry_proto::psdb::v1alpha1::CloseSessionResponse::decode(a.body).expect("proto");
    assert!(r.error.is_none(), "{:?}", r.error);
}

/// Runs SQL directly on MariaDB with the `mariadb` client (an independent view,
/// not through Ferry's pool), as root (its password from the stack's option
/// file) over the stack's unix socket.
pub fn mariadb_root(sql: &str) -> String {
    mariadb_root_on(&cfg().mysql_socket.to_string_lossy(), sql)
}

/// [`mariadb_root`] on the server behind another unix socket (e.g. a replica).
pub fn mariadb_root_on(socket: &str, sql: &str) -> String {
    let cfg = cfg();
    let out = std::process::Command::new("mariadb")
        .arg(format!("--defaults-file={}", cfg.root_cnf.display()))
        .args(["-N", "-B"])
        .arg(format!("--socket={socket}"))
        .arg(&cfg.database)
        .args(["-e", sql])
        .output()
        .expect("run the mariadb client");
    assert!(
        out.status.success(),
        "mariadb ({socket}): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// How many statements carrying `marker` MariaDB is running.
pub fn running(marker: &str) -> usize {
    mariadb_root(&format!(
        "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE '%{marker}%' AND INFO NOT LIKE '%PROCESSLIST%'"
    ))
    .parse()
    .unwrap()
}

/// Waits until no statement carrying `marker` runs in MariaDB; fails past `limit`.
pub async fn gone_within(marker: &str, limit: std::time::Duration) -> std::time::Duration {
    let started = std::time::Instant::now();
    loop {
        if running(marker) == 0 {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < limit,
            "the statement {marker} still runs in MySQL after {limit:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// The shim's HTTP address (`FERRY_SHIM_ADDR`), for its /metrics.
pub fn shim_addr() -> String {
    std::env::var("FERRY_SHIM_ADDR")
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "127.0.0.1:8081".to_owned())
}

/// A plain-HTTP GET (Envoy admin, the shim's /metrics).
pub async fn scrape(url: &str) -> String {
    ferry_e2e::config::install_crypto_provider();
    let a = reqwest::Client::new()
        .get(url)
        .send()
        .await
        .unwrap_or_else(|e| panic!("GET {url}: {e}"));
    assert!(a.status().is_success(), "GET {url}: {}", a.status());
    a.text().await.expect("scrape text")
}

/// `name{labels} value` lines of one metric name in a Prometheus scrape: labels text
/// (as written) -> value.
pub fn series(text: &str, name: &str) -> std::collections::BTreeMap<String, f64> {
    text.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix(name)?;
            let (labels, value) = if let Some(r) = rest.strip_prefix('{') {
                let end = r.find('}')?;
                (r[..end].to_owned(), r[end + 1..].trim())
            } else if rest.starts_with(' ') {
                (String::new(), rest.trim())
            } else {
                return None;
            };
            Some((labels, value.parse().ok()?))
        })
        .collect()
}

/// The stack's run dir (`FERRY_RUN_DIR`): its pid files, sockets and logs.
pub fn run_dir() -> std::path::PathBuf {
    std::path::PathBuf::from(
        std::env::var("FERRY_RUN_DIR").expect("FERRY_RUN_DIR (scripts/e2e.sh sets it)"),
    )
}

/// scripts/stack.sh with the test's environment (the stack under test's).
pub fn stack(arg: &str) {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let out = std::process::Command::new(format!("{root}/scripts/stack.sh"))
        .arg(arg)
        .output()
        .expect("stack.sh");
    assert!(
        out.status.success(),
        "stack.sh {arg}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The pid of one of the stack's processes (its pid file's name: envoy, shim, mysql, ...).
pub fn pid_of(name: &str) -> String {
    std::fs::read_to_string(run_dir().join(format!("pids/{name}.pid")))
        .unwrap_or_else(|e| panic!("{name}.pid: {e}"))
        .trim()
        .to_owned()
}

/// Sends `signal` to a process of the stack and waits until it is gone.
pub fn stop(name: &str, signal: &str) {
    let pid = pid_of(name);
    let ok = std::process::Command::new("kill")
        .args([signal, &pid])
        .status()
        .expect("kill");
    assert!(ok.success(), "kill {signal} {name} ({pid})");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while std::path::Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .unwrap_or_default()
            .contains(") Z")
    {
        assert!(
            std::time::Instant::now() < deadline,
            "{name} ({pid}) did not stop"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}
