//! Observability on the real stack: after a known workload (reads, writes, a
//! transaction, an SQL error, a refused password, a pool wait timeout; over HTTP/2 and
//! HTTP/3, Connect JSON and proto, gRPC), Envoy's /stats/prometheus has the filter's
//! `ferry_requests_total` / `ferry_request_duration_ms` with exactly those labels and
//! counts, the shim's /metrics has its pool lines, and the access log has a JSON line
//! per request with every field, and no SQL text or credential.
//! One test: it must be the only client of the gateway while it counts (scripts/e2e.sh
//! runs test binaries one after another).
mod common;

use bytes::Bytes;
use common::{cfg, grpc_frame, scrape, series, shim_addr, unique};
use ferry_e2e::connect::{ConnectClient, EXECUTE};
use ferry_e2e::h3_client::H3Client;
use ferry_e2e::{config::basic_auth, grpc, Answer};
use ferry_proto::psdb::v1alpha1::ExecuteRequest;
use prost::Message;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

fn var(name: &str, default: &str) -> String {
    std::env::var(name)
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| default.to_owned())
}

fn admin_url() -> String {
    format!(
        "http://{}:{}/stats/prometheus",
        var("FERRY_ADMIN_HOST", "127.0.0.1"),
        var("FERRY_ADMIN_PORT", "9901")
    )
}

fn access_log() -> std::path::PathBuf {
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let run_dir = var("FERRY_RUN_DIR", &root.join(".run").to_string_lossy());
    var(
        "FERRY_ACCESS_LOG",
        &std::path::Path::new(&run_dir)
            .join("logs/access.log")
            .to_string_lossy(),
    )
    .into()
}

/// Now, as Envoy's `%START_TIME%` prints it (`2026-11-23T00:54:09.041Z`), so the
/// two compare as strings.
fn utc_now_millis() -> String {
    let out = std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%dT%H:%M:%S.%3NZ"])
        .output()
        .expect("date");
    String::from_utf8(out.stdout)
        .expect("UTF-8")
        .trim()
        .to_owned()
}

fn labels(rpc: &str, protocol: &str, codec: &str, http: &str, class: &str, code: &str) -> String {
    format!(
        "rpc=\"{rpc}\",protocol=\"{protocol}\",codec=\"{codec}\",http=\"{http}\",class=\"{class}\",target=\"primary\",code=\"{code}\""
    )
}

fn delta(before: &BTreeMap<String, f64>, after: &BTreeMap<String, f64>) -> BTreeMap<String, f64> {
    after
        .iter()
        .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0.0)))
        .filter(|(_, d)| *d != 0.0)
        .collect()
}

struct Load {
    h2: ConnectClient,
    auth: String,
    tag: String,
    /// SQL text sent, none of which may reach the access log.
    sql: Vec<String>,
}

impl Load {
    fn id(&self, what: &str) -> String {
        format!("{}-{what}", self.tag)
    }

    fn headers<'a>(&'a self, ct: &'a str, id: &'a str) -> Vec<(&'a str, &'a str)> {
        vec![
            ("content-type", ct),
            ("authorization", self.auth.as_str()),
            ("x-request-id", id),
        ]
    }

    async fn json_h2(&mut self, what: &str, query: &str, session: &serde_json::Value) -> Answer {
        self.sql.push(query.to_owned());
        let id = self.id(what);
        let body = serde_json::json!({ "query": query, "session": session }).to_string();
        self.h2
            .post(
                EXECUTE,
                &self.headers("application/json", &id),
                body.into_bytes(),
            )
            .await
    }

    async fn proto_h2(&mut self, what: &str, query: &str) -> Answer {
        self.sql.push(query.to_owned());
        let id = self.id(what);
        let body = ExecuteRequest {
            query: query.into(),
            ..Default::default()
        }
        .encode_to_vec();
        self.h2
            .post(EXECUTE, &self.headers("application/proto", &id), body)
            .await
    }

    async fn h3(&mut self, what: &str, ct: &str, query: &str) -> Answer {
        self.sql.push(query.to_owned());
        let id = self.id(what);
        let proto = ExecuteRequest {
            query: query.into(),
            ..Default::default()
        }
        .encode_to_vec();
        let body = match ct {
            "application/json" => Bytes::from(serde_json::json!({ "query": query }).to_string()),
            "application/grpc" => Bytes::from(grpc_frame(&proto)),
            _ => Bytes::from(proto),
        };
        let mut headers = self.headers(ct, &id);
        if ct == "application/grpc" {
            headers.push(("te", "trailers"));
        }
        let mut h3 = H3Client::connect(&self.h2.cfg)
            .await
            .expect("HTTP/3 connection");
        let a = h3.post(EXECUTE, &headers, body).await.expect("HTTP/3 call");
        h3.close().await;
        assert_eq!(a.version, http::Version::HTTP_3);
        a
    }
}

fn ok_json(a: &Answer, what: &str) -> serde_json::Value {
    assert_eq!(
        a.status,
        200,
        "{what}: {:?}",
        String::from_utf8_lossy(&a.body)
    );
    let v = a.json();
    assert!(v.get("error").is_none(), "{what}: {v}");
    v
}

#[tokio::test(flavor = "multi_thread")]
async fn metrics_and_access_log_after_a_known_workload() {
    let cfg = cfg();
    let tag = unique("obs");
    let table = format!("{tag}_t");
    let log_path = access_log();
    // The histogram's counts catch up with the counter on Envoy's stats flush (5 s):
    // start once they agree, so calls made just before (earlier tests) are in both.
    let settle = Instant::now() + Duration::from_secs(12);
    let envoy_before = loop {
        let text = scrape(&admin_url()).await;
        let agree = series(&text, "ferry_requests_total")
            == series(&text, "ferry_request_duration_ms_count");
        if agree || Instant::now() > settle {
            break text;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    // Earlier tests' last lines reach the access log within its 1 s flush: start after.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let log_start = std::fs::metadata(&log_path).map(|m| m.len()).unwrap_or(0);
    // Lines still written after that for earlier tests' calls (an HTTP/3 stream is
    // logged once its last packets are acknowledged) start before this instant.
    let started_at = utc_now_millis();
    let shim_url = format!("http://{}/metrics", shim_addr());
    let shim_before = scrape(&shim_url).await;
    let mut load = Load {
        h2: ConnectClient::http2(&cfg),
        auth: cfg.basic_auth(),
        tag: tag.clone(),
        sql: Vec::new(),
    };
    let none = serde_json::Value::Null;
    let mut expect: BTreeMap<String, f64> = BTreeMap::new();
    let mut add = |k: String, n: f64| *expect.entry(k).or_default() += n;

    // A pool wait timeout: every connection of the user busy (FERRY_POOL_MAX sleeps) and
    // one more statement, which waits FERRY_POOL_WAIT_SECS and gets resource_exhausted.
    let pool_max: usize = var("FERRY_POOL_MAX", "16").parse().expect("FERRY_POOL_MAX");
    let wait_secs: u64 = var("FERRY_POOL_WAIT_SECS", "10")
        .parse()
        .expect("FERRY_POOL_WAIT_SECS");
    // Earlier tests' pins idle out (FERRY_TXN_IDLE_SECS): start with no connection in use.
    let in_use_key = format!("user=\"{}\"", cfg.user);
    let idle_by = Instant::now() + Duration::from_secs(60);
    while series(
        &scrape(&shim_url).await,
        "ferry_shim_pool_connections_in_use",
    )
    .get(&in_use_key)
    .is_some_and(|n| *n > 0.0)
    {
        assert!(
            Instant::now() < idle_by,
            "the shim's connections stay in use"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let sleep_sql = format!("SELECT SLEEP({}) AS {tag}_sleep", wait_secs + 3);
    load.sql.push(sleep_sql.clone());
    let sleeps: Vec<_> = (0..pool_max)
        .map(|i| {
            let (c, auth, q, id) = (
                load.h2.clone(),
                load.auth.clone(),
                sleep_sql.clone(),
                load.id(&format!("sleep{i}")),
            );
            tokio::spawn(async move {
                let body = serde_json::json!({ "query": q }).to_string().into_bytes();
                c.post(
                    EXECUTE,
                    &[
                        ("content-type", "application/json"),
                        ("authorization", &auth),
                        ("x-request-id", &id),
                    ],
                    body,
                )
                .await
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let waiting = {
        let mut l = Load {
            h2: load.h2.clone(),
            auth: load.auth.clone(),
            tag: tag.clone(),
            sql: Vec::new(),
        };
        tokio::spawn(async move {
            let q = format!("SELECT 1 AS {}_waits", l.tag);
            l.json_h2("timeout", &q, &serde_json::Value::Null).await
        })
    };
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let busy = scrape(&shim_url).await;
    let user = format!("user=\"{}\"", cfg.user);
    assert_eq!(
        series(&busy, "ferry_shim_pool_connections_in_use").get(&user),
        Some(&(pool_max as f64)),
        "every connection busy:\n{busy}"
    );
    assert_eq!(
        series(&busy, "ferry_shim_pool_waiting_requests").get(&user),
        Some(&1.0),
        "one request waiting:\n{busy}"
    );
    let timed_out = waiting.await.expect("waiting call");
    assert_eq!(
        timed_out.status,
        429,
        "{:?}",
        String::from_utf8_lossy(&timed_out.body)
    );
    assert_eq!(timed_out.json()["code"], "resource_exhausted");
    for s in sleeps {
        ok_json(&s.await.expect("sleep call"), "sleep");
    }
    // SLEEP is not a replay-safe read (route_class.rs): a write.
    add(
        labels("Execute", "connect", "json", "h2", "write", "ok"),
        pool_max as f64,
    );
    add(
        labels(
            "Execute",
            "connect",
            "json",
            "h2",
            "read",
            "resource_exhausted",
        ),
        1.0,
    );

    // Reads, writes, a transaction: Connect JSON and proto over HTTP/2.
    ok_json(
        &load
            .json_h2("read", &format!("SELECT '{tag}_read' AS v"), &none)
            .await,
        "read",
    );
    add(
        labels("Execute", "connect", "json", "h2", "read", "ok"),
        1.0,
    );
    let get_sql = format!("SELECT '{tag}_get' AS v");
    load.sql.push(get_sql.clone());
    let message = serde_json::json!({ "query": get_sql }).to_string();
    let enc: String = message
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect();
    let get_id = load.id("get");
    let get = load
        .h2
        .send(
            reqwest::Method::GET,
            &format!("{EXECUTE}?connect=v1&encoding=json&message={enc}"),
            &[("authorization", &load.auth), ("x-request-id", &get_id)],
            Vec::new(),
        )
        .await
        .expect("Connect GET");
    ok_json(&get, "GET");
    add(
        labels("Execute", "connect", "json", "h2", "read", "ok"),
        1.0,
    );
    for (what, q) in [
        (
            "create",
            format!("CREATE TABLE {table} (id INT PRIMARY KEY)"),
        ),
        ("insert", format!("INSERT INTO {table} VALUES (1)")),
    ] {
        let a = load.proto_h2(what, &q).await;
        assert_eq!(a.status, 200, "{what}");
        assert_eq!(a.header("content-type"), Some("application/proto"));
    }
    add(
        labels("Execute", "connect", "proto", "h2", "write", "ok"),
        2.0,
    );
    let mut session = none.clone();
    for (what, q) in [
        ("begin", "BEGIN".to_owned()),
        ("txinsert", format!("INSERT INTO {table} VALUES (2)")),
        ("commit", "COMMIT".to_owned()),
    ] {
        let v = ok_json(&load.json_h2(what, &q, &session).await, what);
        session = v["session"].clone();
    }
    add(
        labels("Execute", "connect", "json", "h2", "session", "ok"),
        3.0,
    );

    // HTTP/3: an SQL error (200, the error in the body), a proto read, gRPC.
    let err = load
        .h3(
            "sqlerror",
            "application/json",
            &format!("SELEC {tag}_broken"),
        )
        .await;
    assert_eq!(err.status, 200);
    assert!(err.json()["error"]["code"].is_string(), "{:?}", err.json());
    add(
        labels("Execute", "connect", "json", "h3", "write", "ok"),
        1.0,
    );
    let a = load
        .h3(
            "h3proto",
            "application/proto",
            &format!("SELECT '{tag}_h3' AS v"),
        )
        .await;
    assert_eq!(a.status, 200);
    add(
        labels("Execute", "connect", "proto", "h3", "read", "ok"),
        1.0,
    );
    let a = load
        .h3(
            "h3grpc",
            "application/grpc",
            &format!("SELECT '{tag}_grpc3' AS v"),
        )
        .await;
    assert_eq!(a.grpc_status().map(|s| s.0), Some(0), "{a:?}");
    add(labels("Execute", "grpc", "proto", "h3", "read", "ok"), 1.0);
    // gRPC over HTTP/2 with tonic.
    let q = format!("SELECT '{tag}_grpc2' AS v");
    load.sql.push(q.clone());
    grpc::execute(grpc::channel(&cfg).await, &cfg, &q)
        .await
        .expect("gRPC over HTTP/2");
    add(labels("Execute", "grpc", "proto", "h2", "read", "ok"), 1.0);
    // A refused password (the shim answers 401; the pool counts a connect error).
    let bad_password = format!("{tag}_wrong_pw");
    let bad_auth = basic_auth(&cfg.user, &bad_password);
    let refused_id = load.id("refused");
    let refused = load
        .h2
        .post(
            EXECUTE,
            &[
                ("content-type", "application/json"),
                ("authorization", &bad_auth),
                ("x-request-id", &refused_id),
            ],
            br#"{"query":"SELECT 1"}"#.to_vec(),
        )
        .await;
    assert_eq!(refused.status, 401);
    add(
        labels(
            "Execute",
            "connect",
            "json",
            "h2",
            "read",
            "unauthenticated",
        ),
        1.0,
    );
    let requests = expect.values().sum::<f64>() as usize;

    // Envoy: the counter's deltas are exactly the workload, and the histogram (merged
    // on Envoy's stats flush, every 5 s) catches up to the same counts.
    let before = series(&envoy_before, "ferry_requests_total");
    let before_count = series(&envoy_before, "ferry_request_duration_ms_count");
    let deadline = Instant::now() + Duration::from_secs(20);
    let envoy_after = loop {
        let text = scrape(&admin_url()).await;
        let done = delta(&before, &series(&text, "ferry_requests_total")) == expect
            && delta(
                &before_count,
                &series(&text, "ferry_request_duration_ms_count"),
            ) == expect;
        if done || Instant::now() > deadline {
            break text;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert_eq!(
        delta(&before, &series(&envoy_after, "ferry_requests_total")),
        expect,
        "ferry_requests_total: the workload's calls, label by label"
    );
    assert_eq!(
        delta(
            &before_count,
            &series(&envoy_after, "ferry_request_duration_ms_count")
        ),
        expect,
        "ferry_request_duration_ms_count"
    );
    let buckets = series(&envoy_after, "ferry_request_duration_ms_bucket");
    let slow = labels("Execute", "connect", "json", "h2", "read", "ok");
    assert!(
        buckets
            .iter()
            .any(|(k, _)| k.starts_with(&slow) && k.ends_with("le=\"+Inf\"")),
        "a +Inf bucket for {slow}"
    );
    for line in [
        "envoy_cluster_upstream_rq_retry{envoy_cluster_name=\"shim\"}",
        "envoy_cluster_membership_healthy{envoy_cluster_name=\"shim\"} 1",
        "envoy_cluster_outlier_detection_ejections_active{envoy_cluster_name=\"shim\"}",
    ] {
        assert!(envoy_after.contains(line), "{line} in /stats/prometheus");
    }
    // QUIC transport stats (the listener's quic_stats visitor): the workload's HTTP/3
    // connections, closed by the client, are counted when Envoy closes them.
    let quic_packets = |text: &str| -> f64 {
        [
            "envoy_listener_quic_stats_cx_tx_packets_total",
            "envoy_listener_quic_stats_cx_rx_packets_total",
        ]
        .iter()
        .map(|name| series(text, name).values().sum::<f64>())
        .sum()
    };
    let quic_before = quic_packets(&envoy_before);
    let deadline = Instant::now() + Duration::from_secs(15);
    let quic_after = loop {
        let n = quic_packets(&scrape(&admin_url()).await);
        if n > quic_before || Instant::now() > deadline {
            break n;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert!(
        quic_after > quic_before,
        "envoy_listener_quic_stats_cx_{{tx,rx}}_packets_total grow with the HTTP/3 calls \
         ({quic_before} -> {quic_after})"
    );

    // The shim: its pool lines, and the counters of this workload.
    let shim_after = scrape(&shim_url).await;
    let u = format!("user=\"{}\"", cfg.user);
    for name in [
        "ferry_shim_pool_connections",
        "ferry_shim_pool_connections_in_use",
        "ferry_shim_pool_connections_idle",
        "ferry_shim_pool_waiting_requests",
        "ferry_shim_pool_wait_seconds_count",
    ] {
        assert!(
            series(&shim_after, name).contains_key(&u),
            "{name}{{{u}}} in the shim's /metrics:\n{shim_after}"
        );
    }
    assert!(series(&shim_after, "ferry_shim_pinned_sessions").contains_key(""));
    let d = |name: &str, key: &str| {
        series(&shim_after, name).get(key).copied().unwrap_or(0.0)
            - series(&shim_before, name).get(key).copied().unwrap_or(0.0)
    };
    assert_eq!(d("ferry_shim_pool_wait_timeouts_total", &u), 1.0);
    assert_eq!(d("ferry_shim_pool_connect_errors_total", "user=\"-\""), 1.0);
    assert_eq!(
        d(
            "ferry_shim_requests_total",
            "code=\"invalid_argument\",rpc=\"Execute\""
        ),
        1.0,
        "the SQL error, counted by its code"
    );
    assert_eq!(
        d(
            "ferry_shim_requests_total",
            "code=\"resource_exhausted\",rpc=\"Execute\""
        ),
        1.0
    );

    // The access log: a JSON line per request (flushed about every second).
    let deadline = Instant::now() + Duration::from_secs(15);
    let lines: Vec<serde_json::Value> = loop {
        let all = std::fs::read(&log_path)
            .unwrap_or_else(|e| panic!("reading {}: {e}", log_path.display()));
        let text = String::from_utf8(all[log_start as usize..].to_vec()).expect("UTF-8 log");
        for secret in load
            .sql
            .iter()
            .map(String::as_str)
            .chain([bad_password.as_str(), "Basic "])
            .chain([
                load.auth.trim_start_matches("Basic "),
                bad_auth.trim_start_matches("Basic "),
            ])
        {
            assert!(
                !text.contains(secret),
                "the access log must not hold {secret:?}"
            );
        }
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .filter(|l: &serde_json::Value| {
                l["time"].as_str().is_some_and(|t| t >= started_at.as_str())
            })
            .collect();
        if lines.len() >= requests || Instant::now() > deadline {
            break lines;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    assert!(
        lines.len() >= requests,
        "{} access log lines for {requests} requests",
        lines.len()
    );
    const FIELDS: [&str; 23] = [
        "time",
        "rpc",
        "path",
        "protocol",
        "http",
        "class",
        "target",
        "status",
        "grpc_status",
        "grpc_status_trailers_only",
        "duration_ms",
        "upstream_ms",
        "upstream_cluster",
        "upstream_host",
        "attempts",
        "response_flags",
        "details",
        "bytes_received",
        "bytes_sent",
        "server_timing",
        "request_id",
        "client",
        "client_rtt_ms",
    ];
    let shim = shim_addr();
    for l in &lines {
        assert_eq!(l.as_object().map(|o| o.len()), Some(FIELDS.len()), "{l}");
        for f in FIELDS {
            assert!(l.get(f).is_some(), "{f} in {l}");
        }
        assert_eq!(l["rpc"], "Execute", "{l}");
        assert_eq!(l["path"], EXECUTE, "{l}");
        assert_eq!(l["target"], "primary", "{l}");
        assert_eq!(l["upstream_cluster"], "shim", "{l}");
        assert_eq!(l["upstream_host"], shim.as_str(), "{l}");
        assert_eq!(l["attempts"], 1, "{l}");
        assert_eq!(l["response_flags"], "-", "{l}");
        assert_eq!(l["details"], "via_upstream", "{l}");
        assert!(l["bytes_sent"].as_u64() > Some(0), "{l}");
        assert!(l["duration_ms"].is_u64(), "{l}");
        assert!(l["time"].as_str().is_some_and(|t| t.ends_with('Z')), "{l}");
        // Envoy's measure of the client's TCP round trip (loopback: 0 ms); none for QUIC.
        let rtt = if l["http"] == "HTTP/3" {
            serde_json::Value::Null
        } else {
            serde_json::json!("0")
        };
        assert_eq!(l["client_rtt_ms"], rtt, "{l}");
        assert!(
            l["server_timing"]
                .as_str()
                .is_some_and(|s| s.contains("gateway;dur=")),
            "{l}"
        );
    }
    // Which calls: (http, protocol, class, status) -> lines.
    let key = |l: &serde_json::Value| {
        format!(
            "{} {} {} {}",
            l["http"].as_str().unwrap_or("?"),
            l["protocol"].as_str().unwrap_or("?"),
            l["class"].as_str().unwrap_or("?"),
            l["status"]
        )
    };
    let mut got: BTreeMap<String, usize> = BTreeMap::new();
    for l in &lines {
        *got.entry(key(l)).or_default() += 1;
    }
    let want: BTreeMap<String, usize> = [
        ("HTTP/2 connect-json write 200", pool_max),
        ("HTTP/2 connect-json read 429", 1),
        ("HTTP/2 connect-json read 200", 2),
        ("HTTP/2 connect-proto write 200", 2),
        ("HTTP/2 connect-json session 200", 3),
        ("HTTP/3 connect-json write 200", 1),
        ("HTTP/3 connect-proto read 200", 1),
        ("HTTP/3 grpc-proto read 200", 1),
        ("HTTP/2 grpc-proto read 200", 1),
        ("HTTP/2 connect-json read 401", 1),
    ]
    .into_iter()
    .map(|(k, n)| (k.to_owned(), n))
    .collect();
    assert_eq!(
        got, want,
        "access log lines by http, protocol, class, status"
    );
    let one = |k: &str| {
        lines
            .iter()
            .filter(|l| key(l) == k)
            .cloned()
            .collect::<Vec<_>>()
    };
    // The GET carried its statement in the query string: not logged, no body received.
    assert_eq!(
        one("HTTP/2 connect-json read 200")
            .iter()
            .filter(|l| l["bytes_received"] == 0)
            .count(),
        1
    );
    let l = &one("HTTP/3 connect-json write 200")[0];
    assert!(
        l["server_timing"].as_str().unwrap().contains("db;dur="),
        "the SQL error's line: {l}"
    );
    for k in ["HTTP/3 grpc-proto read 200", "HTTP/2 grpc-proto read 200"] {
        let l = &one(k)[0];
        assert_eq!(l["grpc_status"], "0", "{l}");
    }
    let l = &one("HTTP/2 connect-json read 429")[0];
    assert!(
        l["duration_ms"].as_u64() >= Some(wait_secs * 1000 - 100),
        "the pool wait timeout: {l}"
    );
}
