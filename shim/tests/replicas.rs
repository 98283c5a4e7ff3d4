//! Read replicas against a real MariaDB (issue 10): a primary shim tracking
//! GTIDs, a replica-role shim, their headers and /metrics.
//!
//! Skipped unless `FERRY_TEST_MYSQL_SOCKET` or `FERRY_TEST_MYSQL_PORT` is set
//! (see mysql.rs). GTID checks need the server's binary log (`log_bin`); they
//! are skipped, with a message, on a server without one. With
//! `FERRY_TEST_REPLICA_SOCKET` or `FERRY_TEST_REPLICA_PORT` (a GTID replica of
//! that server, same users), a replica shim also reads a write through it.
//!
//! The wait's timeout is tested without a replica: a replica-role shim pointed
//! at a MariaDB primary itself never reaches a GTID there (MASTER_GTID_WAIT
//! waits on the replication position, which a primary's own writes do not
//! move). On MySQL 8 (WAIT_FOR_EXECUTED_GTID_SET sees the server's own writes)
//! that part is skipped.
mod common;

use bytes::Bytes;
use common::{start_shim, Client, Db};
use ferry_proto::psdb::v1alpha1::{ExecuteRequest, ExecuteResponse, Session};
use http_body_util::{BodyExt, Full};
use mysql_async::prelude::Queryable;
use prost::Message;

const KEY: &str = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

struct Answer {
    status: u16,
    headers: http::HeaderMap,
    body: Bytes,
}

async fn execute(c: &mut Client, query: &str, session: Option<Session>) -> Answer {
    let req = ExecuteRequest {
        query: query.into(),
        session,
        ..Default::default()
    };
    let resp = c
        .send(
            "/psdb.v1alpha1.Database/Execute",
            "application/proto",
            &[],
            req.encode_to_vec(),
        )
        .await;
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    Answer {
        status,
        headers,
        body,
    }
}

fn decoded(a: &Answer, query: &str) -> ExecuteResponse {
    assert_eq!(a.status, 200, "{query}: {:?}", a.body);
    let resp = ExecuteResponse::decode(a.body.clone()).unwrap();
    assert!(resp.error.is_none(), "{query}: {:?}", resp.error);
    resp
}

fn gtid_of(s: &Session) -> String {
    s.vitess_session
        .as_ref()
        .and_then(|v| v.read_after_write.as_ref())
        .map(|r| r.read_after_write_gtid.clone())
        .unwrap_or_default()
}

async fn get(c: &mut Client, path: &str) -> (u16, http::HeaderMap, String) {
    let req = hyper::Request::get(format!("http://shim{path}"))
        .body(Full::new(Bytes::new()))
        .unwrap();
    let resp = c.h2.send_request(req).await.unwrap();
    let (status, headers) = (resp.status().as_u16(), resp.headers().clone());
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (status, headers, String::from_utf8_lossy(&body).into_owned())
}

fn replica_db() -> Option<Db> {
    let var = |n: &str| std::env::var(n).ok().filter(|v| !v.is_empty());
    let (socket, port) = (
        var("FERRY_TEST_REPLICA_SOCKET"),
        var("FERRY_TEST_REPLICA_PORT"),
    );
    if socket.is_none() && port.is_none() {
        return None;
    }
    let mut db = Db::from_env()?;
    db.socket = socket;
    db.port = port.map_or(3306, |p| p.parse().expect("FERRY_TEST_REPLICA_PORT"));
    Some(db)
}

#[tokio::test]
async fn primary_and_replica_roles() {
    let Some(db) = Db::from_env() else {
        eprintln!("skipped: set FERRY_TEST_MYSQL_SOCKET or FERRY_TEST_MYSQL_PORT");
        return;
    };
    let keys = std::env::temp_dir().join(format!("ferry-replicas-{}.keys", std::process::id()));
    std::fs::write(&keys, KEY).unwrap();
    let keys = keys.to_str().unwrap().to_owned();
    let primary = start_shim(
        &db,
        "replicas-primary",
        &[
            ("FERRY_SESSION_KEYS_FILE", &keys),
            ("FERRY_TRACK_GTID", "1"),
        ],
    )
    .await;
    // A replica-role shim on the primary's server: it refuses writes, and
    // never reaches a GTID there (see the module comment).
    let lagging = start_shim(
        &db,
        "replicas-lagging",
        &[
            ("FERRY_SESSION_KEYS_FILE", &keys),
            ("FERRY_SHIM_ROLE", "replica"),
            ("FERRY_READ_AFTER_WRITE_WAIT_MS", "200"),
        ],
    )
    .await;
    let mut p = Client::connect(primary.port, &db.user, &db.password).await;
    let mut r = Client::connect(lagging.port, &db.user, &db.password).await;

    // Headers on every answer: the role, and the database time.
    let a = execute(&mut p, "DROP TABLE IF EXISTS shim_replicas", None).await;
    decoded(&a, "DROP");
    assert_eq!(a.headers["ferry-target"], "primary");
    let timing = a.headers["server-timing"].to_str().unwrap().to_owned();
    let ms: f64 = timing
        .strip_prefix("db;dur=")
        .unwrap_or_else(|| panic!("{timing}"))
        .parse()
        .unwrap();
    assert!(
        ms > 0.0 && timing.split('.').nth(1).unwrap().len() == 2,
        "{timing}"
    );
    let a = execute(&mut p, "CREATE TABLE shim_replicas (a INT)", None).await;
    decoded(&a, "CREATE");

    // A replica refuses anything but a read outside a transaction.
    for sql in [
        "INSERT INTO shim_replicas VALUES (1)",
        "BEGIN",
        "SET @a = 1",
        "SELECT * FROM shim_replicas FOR UPDATE",
    ] {
        let a = execute(&mut r, sql, None).await;
        assert_eq!(a.status, 400, "{sql}");
        assert_eq!(a.headers["ferry-target"], "replica");
        let e: serde_json::Value = serde_json::from_slice(&a.body).unwrap();
        assert_eq!(
            e,
            serde_json::json!({"code": "failed_precondition",
                "message": "this shim serves a read replica: only reads"}),
            "{sql}"
        );
    }
    // Twice: the first wait is a new credential's (`user="-"` in /metrics).
    for _ in 0..2 {
        let a = execute(&mut r, "SELECT COUNT(*) FROM shim_replicas", None).await;
        decoded(&a, "a read on the replica");
        assert_eq!(a.headers["ferry-target"], "replica");
    }

    // A write leaves its GTID in the session (with a binary log).
    let log_bin: Option<i64> = db
        .direct()
        .await
        .query_first("SELECT @@log_bin")
        .await
        .unwrap();
    let version: Option<String> = db
        .direct()
        .await
        .query_first("SELECT VERSION()")
        .await
        .unwrap();
    let mariadb = version.unwrap_or_default().contains("MariaDB");
    let lags = log_bin == Some(1) && mariadb;
    let write = decoded(
        &execute(&mut p, "INSERT INTO shim_replicas VALUES (1)", None).await,
        "INSERT",
    );
    let session = write.session.clone().unwrap();
    if log_bin == Some(1) {
        let gtid = gtid_of(&session);
        let position = if mariadb {
            "SELECT @@gtid_binlog_pos"
        } else {
            "SELECT @@global.gtid_executed"
        };
        let direct: Option<String> = db.direct().await.query_first(position).await.unwrap();
        assert!(!gtid.is_empty(), "a write's session carries its GTID");
        assert!(
            direct.unwrap().contains(&gtid),
            "{gtid} is the server's last position"
        );
        // Reads keep it; a later write moves it on.
        let read = decoded(
            &execute(&mut p, "SELECT 1", Some(session.clone())).await,
            "SELECT",
        );
        assert_eq!(gtid_of(read.session.as_ref().unwrap()), gtid);
        // Tampering with it is refused (the seal covers it).
        let mut forged = session.clone();
        if let Some(raw) = forged
            .vitess_session
            .as_mut()
            .and_then(|v| v.read_after_write.as_mut())
        {
            raw.read_after_write_gtid = "0-1-1".into();
        }
        let a = execute(&mut p, "SELECT 1", Some(forged)).await;
        let refused = ExecuteResponse::decode(a.body).unwrap();
        assert!(refused.error.unwrap().message.contains("invalid session"));
    } else {
        eprintln!("GTID checks skipped: the server has no binary log (log_bin = 0)");
        assert_eq!(gtid_of(&session), "", "no binary log, no position");
    }
    if lags {
        // The replica does not reach it: 503, for Envoy to retry on the primary.
        let started = std::time::Instant::now();
        let a = execute(&mut r, "SELECT * FROM shim_replicas", Some(session.clone())).await;
        let waited = started.elapsed();
        assert_eq!(a.status, 503, "{:?}", a.body);
        assert_eq!(a.headers["x-ferry-replica-behind"], "1");
        assert_eq!(a.headers["ferry-target"], "replica");
        let e: serde_json::Value = serde_json::from_slice(&a.body).unwrap();
        assert_eq!(
            e,
            serde_json::json!({"code": "unavailable",
                "message": "replica has not applied this session's writes within 200 ms"})
        );
        assert!(
            waited >= std::time::Duration::from_millis(200)
                && waited < std::time::Duration::from_secs(2),
            "{waited:?}"
        );
        // A session without writes reads there freely.
        let a = execute(&mut r, "SELECT * FROM shim_replicas", None).await;
        decoded(&a, "a read without a GTID");
    }

    // A real replica, when given: the read waits for the write and sees it.
    if let Some(rdb) = replica_db() {
        let replica = start_shim(
            &rdb,
            "replicas-replica",
            &[
                ("FERRY_SESSION_KEYS_FILE", &keys),
                ("FERRY_SHIM_ROLE", "replica"),
            ],
        )
        .await;
        let mut rr = Client::connect(replica.port, &db.user, &db.password).await;
        let w = decoded(
            &execute(
                &mut p,
                "INSERT INTO shim_replicas VALUES (2)",
                Some(session),
            )
            .await,
            "INSERT 2",
        );
        let a = execute(
            &mut rr,
            "SELECT COUNT(*) FROM shim_replicas WHERE a = 2",
            w.session,
        )
        .await;
        let read = decoded(&a, "read your write on the replica");
        assert_eq!(
            common::values(read.result.as_ref().unwrap()),
            [[Some("1".into())]]
        );
        assert_eq!(a.headers["ferry-target"], "replica");
    }

    // /metrics after known calls.
    let (status, headers, text) = get(&mut r, "/metrics").await;
    assert_eq!(status, 200);
    assert_eq!(headers["content-type"], "text/plain; version=0.0.4");
    let has = |line: &str| text.lines().any(|l| l == line);
    assert!(
        has("ferry_shim_requests_total{code=\"failed_precondition\",rpc=\"Execute\"} 4"),
        "{text}"
    );
    assert!(text.contains("ferry_shim_info{role=\"replica\""), "{text}");
    let user = format!("{{user=\"{}\"}}", db.user);
    for name in [
        "ferry_shim_pool_connections",
        "ferry_shim_pool_connections_in_use",
        "ferry_shim_pool_connections_idle",
        "ferry_shim_pool_waiting_requests",
        "ferry_shim_pool_wait_seconds_count",
        "ferry_shim_pool_wait_seconds_sum",
    ] {
        assert!(text.contains(&format!("{name}{user}")), "{name}: {text}");
    }
    assert!(has("ferry_shim_pinned_sessions 0"), "{text}");
    assert!(
        has("ferry_shim_pool_wait_seconds_count{user=\"-\"} 1"),
        "{text}"
    );
    if lags {
        assert!(
            has("ferry_shim_read_after_write_waits_total{outcome=\"behind\"} 1"),
            "{text}"
        );
        assert!(
            has("ferry_shim_requests_total{code=\"unavailable\",rpc=\"Execute\"} 1"),
            "{text}"
        );
    }
    assert!(
        !text.contains(&db.password) || db.password == db.user,
        "no password"
    );
    let (_, _, text) = get(&mut p, "/metrics").await;
    assert!(text.contains("ferry_shim_info{role=\"primary\""), "{text}");
    // The health check answers, and names the role.
    let (status, headers, body) = get(&mut r, "/healthz").await;
    assert_eq!((status, body.as_str()), (200, "ok\n"));
    assert_eq!(headers["ferry-target"], "replica");
}
