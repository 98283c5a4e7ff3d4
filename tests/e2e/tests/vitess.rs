//! Ferry in front of Vitess (scripts/vitess.sh: vttestserver on MySQL 8, keyspace `ferry`
//! in 2 shards, vtgate checking passwords): scripts/e2e.sh's Vitess block runs this file
//! with FERRY_E2E_VITESS_GATEWAY=1 against a gateway whose shim points at vtgate. The main e2e run
//! has none: then these tests say so and pass.
mod common;
use common::*;
use ferry_compress::Encoding;
use ferry_e2e::connect::{ConnectClient, EXECUTE};
use ferry_e2e::framed::{Protocol, Shape, Transport, STREAM_EXECUTE};
use ferry_proto::psdb::v1alpha1::{ExecuteRequest, ExecuteResponse, Session};
use ferry_proto::vitess::vtrpc::Code;
use prost::Message;
use std::time::{Duration, Instant};

fn vitess() -> bool {
    let on = std::env::var("FERRY_E2E_VITESS_GATEWAY").is_ok_and(|v| v == "1");
    if !on {
        eprintln!(
            "skipped: FERRY_E2E_VITESS_GATEWAY (the Vitess gateway, scripts/e2e.sh) is not set"
        );
    }
    on
}

fn ok(r: &ExecuteResponse, what: &str) -> Session {
    assert!(r.error.is_none(), "{what}: {:?}", r.error);
    r.session.clone().expect("a session")
}

fn values(r: &ExecuteResponse) -> Vec<Vec<Option<String>>> {
    r.result
        .as_ref()
        .expect("a result")
        .rows
        .iter()
        .map(|row| {
            ferry_e2e::rows::cells(row)
                .into_iter()
                .map(|c| c.map(|b| String::from_utf8_lossy(&b).into_owned()))
                .collect()
        })
        .collect()
}

/// A table of the sharded keyspace, rows routed by `hash(id)`.
async fn sharded_table() -> String {
    let t = unique("vt");
    let r = execute(
        Way::ConnectJsonH2,
        &format!("CREATE TABLE {t} (id BIGINT PRIMARY KEY, v VARCHAR(40))"),
    )
    .await;
    ok(&r, "CREATE TABLE");
    let r = execute(
        Way::ConnectJsonH2,
        &format!("ALTER VSCHEMA ON {t} ADD VINDEX hash(id)"),
    )
    .await;
    ok(&r, "ALTER VSCHEMA");
    t
}

async fn count(t: &str) -> usize {
    let r = execute(Way::ConnectProtoH2, &format!("SELECT COUNT(*) FROM {t}")).await;
    ok(&r, "COUNT");
    values(&r)[0][0]
        .as_deref()
        .unwrap_or("0")
        .parse()
        .expect("a count")
}

#[tokio::test]
async fn vtgate_checks_the_password() {
    if !vitess() {
        return;
    }
    let r = execute(Way::ConnectJsonH2, "SELECT @@version").await;
    ok(&r, "SELECT @@version");
    assert!(values(&r)[0][0]
        .as_deref()
        .unwrap_or_default()
        .ends_with("-Vitess"));
    let mut wrong = cfg();
    wrong.password = "not-the-password".into();
    let a = ConnectClient::http2(&wrong).execute_json("SELECT 1").await;
    assert_eq!(a.status, 401, "{:?}", String::from_utf8_lossy(&a.body));
}

#[tokio::test]
async fn a_transaction_across_shards_commits_and_rolls_back() {
    if !vitess() {
        return;
    }
    let t = sharded_table().await;
    let s = ok(&execute(Way::ConnectJsonH2, "BEGIN").await, "BEGIN");
    let mut s = s;
    for id in 1..=6 {
        let r = execute_in(
            Way::GrpcH2,
            Some(&s),
            &format!("INSERT INTO {t} (id, v) VALUES ({id}, 'r{id}')"),
        )
        .await;
        s = ok(&r, "INSERT");
    }
    assert_eq!(count(&t).await, 0, "not committed yet");
    ok(
        &execute_in(Way::ConnectProtoH3, Some(&s), "COMMIT").await,
        "COMMIT",
    );
    assert_eq!(count(&t).await, 6);
    // Scatter: every shard's rows, in order.
    let r = execute(
        Way::ConnectJsonH2,
        &format!("SELECT id FROM {t} ORDER BY id"),
    )
    .await;
    let ids: Vec<String> = values(&r)
        .into_iter()
        .filter_map(|row| row[0].clone())
        .collect();
    assert_eq!(ids, ["1", "2", "3", "4", "5", "6"]);
    let s = ok(&execute(Way::ConnectJsonH2, "BEGIN").await, "BEGIN");
    let s = ok(
        &execute_in(
            Way::ConnectJsonH2,
            Some(&s),
            &format!("INSERT INTO {t} (id, v) VALUES (7, 'r7'), (8, 'r8')"),
        )
        .await,
        "INSERT",
    );
    ok(
        &execute_in(Way::ConnectJsonH2, Some(&s), "ROLLBACK").await,
        "ROLLBACK",
    );
    assert_eq!(count(&t).await, 6, "rolled back on every shard");
}

/// vtgate's codes, as PlanetScale answers them, and no statement or value in a message.
#[tokio::test]
async fn errors_carry_vitess_codes_and_no_sql() {
    if !vitess() {
        return;
    }
    let t = sharded_table().await;
    ok(
        &execute(
            Way::ConnectJsonH2,
            &format!("INSERT INTO {t} (id, v) VALUES (1, 'secret_one')"),
        )
        .await,
        "INSERT",
    );
    for (sql, code) in [
        ("selec 1".to_string(), Code::InvalidArgument),
        (
            format!("INSERT INTO {t} (id, v) VALUES (1, 'secret_two')"),
            Code::AlreadyExists,
        ),
        // vtgate's vindexes.NotFoundError has no code: UNKNOWN over its own gRPC too.
        (
            "SELECT * FROM no_such_table_here".to_string(),
            Code::Unknown,
        ),
        (
            format!("SELECT v FROM {t} WHERE v = 'secret_three' AND bogus = 1"),
            Code::NotFound,
        ),
    ] {
        let r = execute(Way::ConnectJsonH2, &sql).await;
        let e = r.error.unwrap_or_else(|| panic!("{sql}: an error"));
        assert_eq!(e.code(), code, "{sql}: {}", e.message);
        for leak in ["Sql:", "BindVars", "secret_", "CallerID"] {
            assert!(!e.message.contains(leak), "{sql}: {}", e.message);
        }
    }
}

/// A deadline stops the statement in vtgate (its KILL, --allow-kill-statement).
#[tokio::test]
async fn a_deadline_stops_the_statement() {
    if !vitess() {
        return;
    }
    let client = ConnectClient::http2(&cfg());
    let auth = client.cfg.basic_auth();
    let started = Instant::now();
    let a = client
        .post(
            EXECUTE,
            &[
                ("content-type", "application/json"),
                ("authorization", auth.as_str()),
                ("connect-timeout-ms", "1500"),
            ],
            br#"{"query": "SELECT SLEEP(30)"}"#.to_vec(),
        )
        .await;
    assert_eq!(a.status, 504, "{:?}", String::from_utf8_lossy(&a.body));
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    // The pool goes on: the statement was stopped, not left holding a connection.
    let r = execute(Way::ConnectJsonH2, "SELECT 1").await;
    ok(&r, "SELECT 1 after the deadline");
}

#[tokio::test]
async fn session_variables_travel_through_vtgate() {
    if !vitess() {
        return;
    }
    let s = ok(
        &execute(Way::ConnectJsonH2, "SET @vt = 'kept', time_zone = '+04:00'").await,
        "SET",
    );
    for _ in 0..4 {
        let r = execute_in(Way::GrpcH2, Some(&s), "SELECT @vt, @@time_zone").await;
        ok(&r, "SELECT @vt");
        assert_eq!(
            values(&r),
            [[Some("kept".to_owned()), Some("+04:00".to_owned())]]
        );
    }
}

/// vttablet's row limit for a result that is not streamed (its default, 10,000).
const ROW_LIMIT: usize = 10_000;

/// A sharded table of `rows` rows (ids 1..=rows), filled 5,000 at a time.
async fn big_table(rows: usize) -> String {
    let t = sharded_table().await;
    for start in (1..=rows).step_by(5_000) {
        let end = (start + 4_999).min(rows);
        let values: Vec<String> = (start..=end).map(|i| format!("({i}, 'v{i}')")).collect();
        let r = execute(
            Way::ConnectProtoH2,
            &format!("INSERT INTO {t} (id, v) VALUES {}", values.join(", ")),
        )
        .await;
        ok(&r, "INSERT");
    }
    t
}

/// StreamExecute in Connect proto over HTTP/2: every message, or the first error.
async fn stream(session: Option<&Session>, query: &str) -> Result<Vec<ExecuteResponse>, String> {
    let shape = Shape {
        protocol: Protocol::ConnectStream,
        json: false,
        transport: Transport::H2,
        send: Encoding::Identity,
        accept: None,
    };
    let body = ExecuteRequest {
        query: query.to_owned(),
        session: session.cloned(),
        ..Default::default()
    }
    .encode_to_vec();
    let outcome = shape.call(&cfg(), STREAM_EXECUTE, &body).await;
    assert_eq!(outcome.answer.status, 200);
    let messages: Vec<ExecuteResponse> = outcome
        .messages
        .iter()
        .filter(|(flags, _)| flags & 2 == 0)
        .map(|(_, m)| ExecuteResponse::decode(&m[..]).expect("a message"))
        .collect();
    if let Some(e) = messages.iter().find_map(|m| m.error.as_ref()) {
        return Err(format!("{:?}: {}", e.code(), e.message));
    }
    if outcome.end != Some(serde_json::json!({})) {
        return Err(format!("ended with {:?}", outcome.end));
    }
    Ok(messages)
}

fn rows_in(messages: &[ExecuteResponse]) -> usize {
    messages
        .iter()
        .filter_map(|m| m.result.as_ref())
        .map(|r| r.rows.len())
        .sum()
}

#[tokio::test]
async fn olap_passes_the_row_limit_and_streams_always_do() {
    if !vitess() {
        return;
    }
    let n = 50_000;
    let t = big_table(n).await;
    let all = format!("SELECT id, v FROM {t}");
    // OLTP (vtgate's default): vttablet stops a result past its limit, and the error
    // carries the tablet's code (ABORTED), as vtgate's own API would.
    let r = execute(Way::ConnectProtoH2, &all).await;
    let e = r.error.expect("the row limit");
    assert_eq!(e.code(), Code::Aborted, "{}", e.message);
    assert!(e.message.contains("Row count exceeded"), "{}", e.message);
    // After SET workload = 'olap' (answered by the gateway, which says so in the
    // session), the workload reaches vtgate: Execute gets every row.
    let olap = ok(
        &execute(Way::ConnectJsonH2, "SET workload = 'olap'").await,
        "SET workload",
    );
    let r = execute_in(Way::ConnectProtoH2, Some(&olap), &all).await;
    ok(&r, "OLAP Execute");
    assert_eq!(r.result.as_ref().map(|q| q.rows.len()), Some(n));
    // StreamExecute streams past the limit with or without the switch, as psdb's does.
    for session in [None, Some(&olap)] {
        let messages = stream(session, &all).await.expect("the stream");
        assert!(messages.len() > 2, "chunked");
        assert_eq!(rows_in(&messages), n);
    }
    // The stream's workload stayed with it: the next OLTP Execute meets the limit again.
    let r = execute(Way::ConnectProtoH2, &all).await;
    assert_eq!(r.error.map(|e| e.code()), Some(Code::Aborted));
    let r = execute(
        Way::ConnectProtoH2,
        &format!("SELECT id FROM {t} LIMIT {ROW_LIMIT}"),
    )
    .await;
    ok(&r, "a result at the limit");
}

/// vtgate's COM_RESET_CONNECTION keeps a connection's user variables, settings and
/// workload (vitess 24.0.4): a pooled connection that carried a session's state must
/// never serve another session as it is.
#[tokio::test]
async fn no_state_reaches_another_session() {
    if !vitess() {
        return;
    }
    for way in [Way::ConnectJsonH2, Way::GrpcH2] {
        let s = ok(
            &execute(way, "SET @leak = 'mine', time_zone = '+03:00'").await,
            "SET",
        );
        let olap = ok(
            &execute_in(way, Some(&s), "SET workload = 'olap'").await,
            "SET workload",
        );
        // The session itself reads them on any connection ...
        let r = execute_in(way, Some(&olap), "SELECT @leak, @@time_zone").await;
        assert_eq!(
            values(&r),
            [[Some("mine".to_owned()), Some("+03:00".to_owned())]]
        );
        // ... and no other session ever does, whichever connection it gets.
        for _ in 0..12 {
            let r = execute(way, "SELECT @leak, @@time_zone, @@workload").await;
            ok(&r, "SELECT in a fresh session");
            let row = &values(&r)[0];
            assert_eq!(row[0], None, "another session's variable");
            assert_ne!(
                row[1].as_deref(),
                Some("+03:00"),
                "another session's setting"
            );
            assert_ne!(
                row[2].as_deref().map(str::to_ascii_uppercase).as_deref(),
                Some("OLAP"),
                "another session's workload"
            );
        }
    }
}

/// `QueryCountsWithTabletType` of vtgate's /debug/vars (vtcombo's HTTP port): SELECTs that
/// tablets of this type ran (keys `<tablet>.<table>.<plan>.<TYPE>`; a scatter COUNT's
/// table reads `Join`). Other tests run meanwhile, so callers compare with `>=`.
async fn tablet_counts(tablet_type: &str) -> f64 {
    let http =
        std::env::var("FERRY_E2E_VITESS_HTTP").expect("FERRY_E2E_VITESS_HTTP (scripts/e2e.sh)");
    let vars: serde_json::Value =
        serde_json::from_str(&scrape(&format!("http://{http}/debug/vars")).await)
            .expect("vtgate's /debug/vars");
    vars["QueryCountsWithTabletType"]
        .as_object()
        .expect("QueryCountsWithTabletType")
        .iter()
        .filter(|(k, _)| k.ends_with(&format!(".Select.{tablet_type}")))
        .filter_map(|(_, v)| v.as_f64())
        .sum()
}

/// Behind envoy/replicas.yaml (FERRY_REPLICAS=1): a read goes to the replica's shim, whose
/// connections target vtgate's replica tablets (`ferry@replica`); a session that has
/// written carries the Vitess mark instead of a GTID, so its reads go to the primary.
#[tokio::test]
async fn reads_go_to_replica_tablets_and_a_writers_to_the_primary() {
    if !vitess() {
        return;
    }
    let t = sharded_table().await;
    let c = ConnectClient::http2(&cfg());
    let auth = c.cfg.basic_auth();
    let call = |session: Option<Session>, query: String| {
        let c = &c;
        let auth = auth.clone();
        async move {
            let req = ExecuteRequest {
                query,
                session,
                ..Default::default()
            };
            let a = c
                .post(
                    EXECUTE,
                    &[
                        ("content-type", "application/proto"),
                        ("authorization", auth.as_str()),
                    ],
                    req.encode_to_vec(),
                )
                .await;
            assert_eq!(a.status, 200, "{}", String::from_utf8_lossy(&a.body));
            let target = a.header("ferry-target").unwrap_or_default().to_owned();
            (
                ExecuteResponse::decode(a.body.clone()).expect("ExecuteResponse"),
                target,
            )
        }
    };
    let (r, target) = call(
        None,
        format!("INSERT INTO {t} (id, v) VALUES (1, 'a'), (2, 'b')"),
    )
    .await;
    let wrote = ok(&r, "INSERT");
    assert_eq!(target, "primary", "a write");
    assert_eq!(
        wrote
            .vitess_session
            .as_ref()
            .and_then(|s| s.read_after_write.as_ref())
            .map(|r| r.read_after_write_gtid.as_str()),
        Some("primary"),
        "the session of a write through Vitess carries the mark, not a GTID"
    );
    let before = tablet_counts("REPLICA").await;
    let (r, target) = call(None, format!("SELECT COUNT(*) FROM {t}")).await;
    ok(&r, "a read");
    assert_eq!(target, "replica", "a read of a session that wrote nothing");
    assert_eq!(values(&r), [[Some("2".to_owned())]]);
    let after = tablet_counts("REPLICA").await;
    assert!(
        after >= before + 2.0,
        "vtgate's replica tablets ran the scatter read on both shards: {before} -> {after}"
    );
    let primary_before = tablet_counts("PRIMARY").await;
    let (r, target) = call(Some(wrote.clone()), format!("SELECT COUNT(*) FROM {t}")).await;
    ok(&r, "a read after the session's write");
    assert_eq!(
        target, "primary",
        "the session wrote: its read goes to the primary"
    );
    assert_eq!(values(&r), [[Some("2".to_owned())]]);
    assert!(
        tablet_counts("PRIMARY").await >= primary_before + 2.0,
        "on the primary tablets"
    );
    // The replica's shim counted it.
    if let Ok(addr) = std::env::var("FERRY_REPLICA_SHIM_ADDR") {
        let m = scrape(&format!("http://{addr}/metrics")).await;
        let s = series(&m, "ferry_shim_read_after_write_waits_total");
        assert!(
            s.get("outcome=\"primary_only\"").copied().unwrap_or(0.0) >= 1.0,
            "{s:?}"
        );
    }
}
