//! StreamExecute, deadlines, cancellation and the workload switch, straight at
//! the shim binary against a real MariaDB (skipped without one, as mysql.rs).
//! Results are generated with MariaDB's sequence engine (`seq_1_to_N`).
//! Figures (rows/s, the shim's peak RSS, cancel latencies) are printed; see
//! them with `--nocapture`.
mod common;

use bytes::{Buf, Bytes, BytesMut};
use common::{start_shim, values, Client, Db, Shim};
use ferry_proto::psdb::v1alpha1::{ExecuteRequest, ExecuteResponse, Session};
use ferry_proto::vitess::query::execute_options::{TransactionIsolation, Workload};
use ferry_proto::vitess::query::ExecuteOptions;
use ferry_proto::vitess::vtrpc::Code;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use mysql_async::prelude::Queryable;
use prost::Message;
use std::time::{Duration, Instant};

const STREAM: &str = "/psdb.v1alpha1.Database/StreamExecute";
const EXECUTE: &str = "/psdb.v1alpha1.Database/Execute";

/// One test at a time: they measure time and the shim's memory.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn setup(name: &str, env: &[(&str, &str)]) -> Option<(Db, Shim, Client)> {
    let Some(db) = Db::from_env() else {
        eprintln!("skipped: set FERRY_TEST_MYSQL_SOCKET or FERRY_TEST_MYSQL_PORT to run the shim against MySQL");
        return None;
    };
    let shim = start_shim(&db, name, env).await;
    let c = Client::connect(shim.port, &db.user, &db.password).await;
    Some((db, shim, c))
}

fn request(query: &str, session: Option<Session>) -> Vec<u8> {
    ExecuteRequest {
        query: query.into(),
        session,
        ..Default::default()
    }
    .encode_to_vec()
}

enum Msg {
    Data(Box<ExecuteResponse>),
    End(serde_json::Value),
}

/// A StreamExecute answer, read envelope by envelope.
struct Streamed {
    status: u16,
    content_type: String,
    body: Incoming,
    buf: BytesMut,
    bytes: u64,
}

impl Streamed {
    async fn open(
        c: &mut Client,
        query: &str,
        session: Option<Session>,
        headers: &[(&str, &str)],
    ) -> Streamed {
        let resp = c
            .send(
                STREAM,
                "application/proto",
                headers,
                request(query, session),
            )
            .await;
        Streamed {
            status: resp.status().as_u16(),
            content_type: resp
                .headers()
                .get("content-type")
                .map(|v| v.to_str().unwrap().to_owned())
                .unwrap_or_default(),
            body: resp.into_body(),
            buf: BytesMut::new(),
            bytes: 0,
        }
    }

    fn check_is_stream(&self) {
        assert_eq!(
            (self.status, self.content_type.as_str()),
            (200, "application/connect+proto")
        );
    }

    /// The next envelope's flags and payload; `None` when the body ends.
    async fn next_raw(&mut self) -> Option<(u8, Bytes)> {
        loop {
            if self.buf.len() >= 5 {
                let len = u32::from_be_bytes(self.buf[1..5].try_into().unwrap()) as usize;
                if self.buf.len() >= 5 + len {
                    let flags = self.buf[0];
                    self.buf.advance(5);
                    return Some((flags, self.buf.split_to(len).freeze()));
                }
            }
            match self.body.frame().await {
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.bytes += data.len() as u64;
                        self.buf.extend_from_slice(&data);
                    }
                }
                Some(Err(e)) => panic!("the stream's body failed: {e}"),
                None => {
                    assert!(self.buf.is_empty(), "a partial envelope at the end");
                    return None;
                }
            }
        }
    }

    async fn next(&mut self) -> Option<Msg> {
        let (flags, payload) = self.next_raw().await?;
        Some(match flags {
            0 => Msg::Data(Box::new(
                ExecuteResponse::decode(payload).expect("an ExecuteResponse"),
            )),
            2 => Msg::End(serde_json::from_slice(&payload).expect("end-of-stream JSON")),
            f => panic!("unexpected envelope flags {f}"),
        })
    }

    /// Every message to the end, and the end-of-stream JSON (last in the body).
    async fn all(mut self) -> (Vec<ExecuteResponse>, serde_json::Value) {
        self.check_is_stream();
        let mut msgs = Vec::new();
        loop {
            match self.next().await.expect("an end-of-stream envelope") {
                Msg::Data(m) => msgs.push(*m),
                Msg::End(end) => {
                    assert!(self.next_raw().await.is_none(), "nothing after the end");
                    return (msgs, end);
                }
            }
        }
    }
}

/// The session a stream ends with: the last message, alone.
fn closing_session(msgs: &[ExecuteResponse]) -> Session {
    let last = msgs.last().expect("messages");
    assert!(last.result.is_none(), "the session comes alone, last");
    last.session
        .clone()
        .expect("the last message carries the session")
}

/// Unary Execute with extra headers: (status, body).
async fn execute_with(
    c: &mut Client,
    query: &str,
    session: Option<Session>,
    headers: &[(&str, &str)],
) -> (u16, Bytes) {
    let resp = c
        .send(
            EXECUTE,
            "application/proto",
            headers,
            request(query, session),
        )
        .await;
    let status = resp.status().as_u16();
    (status, resp.into_body().collect().await.unwrap().to_bytes())
}

async fn execute_in(c: &mut Client, query: &str, session: Option<Session>) -> ExecuteResponse {
    let (status, body) = execute_with(c, query, session, &[]).await;
    assert_eq!(status, 200, "{query}: {body:?}");
    ExecuteResponse::decode(body).unwrap()
}

/// Connections of the test user (the shim's are too) running a statement
/// that mentions `marker`, or with this connection id.
async fn running(direct: &mut mysql_async::Conn, marker: &str, id: u64) -> Vec<(u64, String)> {
    direct
        .exec_map(
            "SELECT ID, COALESCE(INFO, '') FROM information_schema.PROCESSLIST \
             WHERE ID <> CONNECTION_ID() AND (INFO LIKE ? OR ID = ?)",
            (format!("%{marker}%"), id),
            |(id, info): (u64, String)| (id, info),
        )
        .await
        .unwrap()
}

/// How long until nothing matches `running` any more (panics after `limit`).
async fn gone_within(db: &Db, marker: &str, id: u64, since: Instant, limit: Duration) -> Duration {
    let mut direct = db.direct().await;
    loop {
        let left = running(&mut direct, marker, id).await;
        if left.is_empty() {
            return since.elapsed();
        }
        assert!(
            since.elapsed() < limit,
            "still running after {limit:?}: {left:?}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Waits until a statement that mentions `marker` runs in MySQL.
async fn wait_running(db: &Db, marker: &str) {
    let mut direct = db.direct().await;
    for _ in 0..500 {
        if !running(&mut direct, marker, 0).await.is_empty() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{marker} never started");
}

/// `VmRSS` / `VmHWM` of a process, in KiB.
fn memory_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| {
            l.strip_prefix(field)?
                .trim()
                .strip_suffix("kB")?
                .trim()
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

#[tokio::test]
async fn large_streams_arrive_complete_in_order_and_chunked() {
    let _serial = SERIAL.lock().await;
    let chunk_bytes = 65_536;
    let Some((_db, _shim, mut c)) = setup(
        "large",
        &[
            ("FERRY_STREAM_CHUNK_ROWS", "1000"),
            ("FERRY_STREAM_CHUNK_BYTES", "65536"),
        ],
    )
    .await
    else {
        return;
    };
    let n: u64 = 200_000;
    // Runs of small rows (1000 fit in a chunk) and of 300-byte ones (about
    // 200 do), so both bounds cut chunks.
    let pad = |seq: u64| if seq % 20_000 < 10_000 { 0 } else { 300 };
    let query = format!(
        "SELECT seq, CONCAT('row-', seq) AS label, \
         REPEAT('p', IF(seq % 20000 < 10000, 0, 300)) AS pad FROM seq_1_to_{n}"
    );
    let started = Instant::now();
    let (msgs, end) = Streamed::open(&mut c, &query, None, &[]).await.all().await;
    let secs = started.elapsed().as_secs_f64();
    assert_eq!(end, serde_json::json!({}));

    let first = msgs[0].result.as_ref().expect("fields first");
    let names: Vec<&str> = first.fields.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["seq", "label", "pad"]);
    assert!(first.rows.is_empty() && msgs[0].session.is_none());
    let session = closing_session(&msgs);
    assert!(session.vitess_session.as_ref().unwrap().autocommit);

    let mut next = 1u64;
    let (mut by_rows, mut by_bytes) = (0, 0);
    for m in &msgs[1..msgs.len() - 1] {
        assert_eq!(m.timing, 0.0, "no timing in a stream");
        assert!(m.session.is_none() && m.error.is_none());
        let r = m.result.as_ref().unwrap();
        assert!(r.fields.is_empty(), "fields only in the first message");
        assert!(r.rows.len() <= 1000, "{} rows in a chunk", r.rows.len());
        let size = r.encoded_len();
        assert!(size <= chunk_bytes, "a chunk of {size} bytes");
        if r.rows.len() == 1000 {
            by_rows += 1;
        } else if size > chunk_bytes - 350 {
            by_bytes += 1;
        }
        for v in values(r) {
            assert_eq!(v[0].as_deref(), Some(next.to_string().as_str()), "in order");
            assert_eq!(v[1], Some(format!("row-{next}")));
            assert_eq!(v[2].as_ref().map(String::len), Some(pad(next)));
            next += 1;
        }
    }
    assert_eq!(next - 1, n, "every row");
    assert!(
        by_rows > 0 && by_bytes > 0,
        "both bounds cut: {by_rows} by rows, {by_bytes} by bytes"
    );
    println!(
        "stream: {n} rows in {:.2}s = {:.0} rows/s, {} messages",
        secs,
        n as f64 / secs,
        msgs.len()
    );

    // Execute is unchanged: the unary caps still hold.
    let r = execute_in(&mut c, "SELECT seq FROM seq_1_to_100001", None).await;
    let e = r.error.expect("row count exceeded");
    assert_eq!(e.code, Code::ResourceExhausted as i32, "{}", e.message);
    // ... and the stream of the same has none.
    let (msgs, end) = Streamed::open(&mut c, "SELECT seq FROM seq_1_to_100001", None, &[])
        .await
        .all()
        .await;
    assert_eq!(end, serde_json::json!({}));
    let rows: usize = msgs
        .iter()
        .filter_map(|m| m.result.as_ref())
        .map(|r| r.rows.len())
        .sum();
    assert_eq!(rows, 100_001);
}

#[tokio::test]
async fn statements_without_rows_errors_and_the_workload_switch() {
    let _serial = SERIAL.lock().await;
    let Some((db, _shim, mut c)) = setup(
        "forms",
        &[("FERRY_POOL_MAX", "2"), ("FERRY_POOL_MAX_PINNED", "0")],
    )
    .await
    else {
        return;
    };
    c.ok("DROP TABLE IF EXISTS stream_rows").await;
    c.ok("CREATE TABLE stream_rows (id INT AUTO_INCREMENT PRIMARY KEY, v INT)")
        .await;

    // Without rows: the OK numbers, then the session.
    let (msgs, end) = Streamed::open(
        &mut c,
        "INSERT INTO stream_rows (v) VALUES (1), (2)",
        None,
        &[],
    )
    .await
    .all()
    .await;
    assert_eq!(end, serde_json::json!({}));
    assert_eq!(msgs.len(), 2);
    let r = msgs[0].result.as_ref().unwrap();
    assert_eq!((r.rows_affected, r.insert_id, r.fields.len()), (2, 1, 0));
    let s = closing_session(&msgs);
    assert_eq!(s.vitess_session.unwrap().last_insert_id, 1);

    // An SQL error: inside the last message, with the session; the stream ends well.
    let (msgs, end) = Streamed::open(&mut c, "SELECT * FROM no_such_table", None, &[])
        .await
        .all()
        .await;
    assert_eq!(end, serde_json::json!({}));
    assert_eq!(msgs.len(), 1);
    let e = msgs[0].error.as_ref().expect("the SQL error");
    assert_eq!(e.code, Code::NotFound as i32);
    assert!(
        e.message.ends_with("(errno 1146) (sqlstate 42S02)"),
        "{}",
        e.message
    );
    assert!(msgs[0].session.is_some());

    // Before the stream starts: a unary Connect error with its status.
    let mut bad = Client::connect(_shim.port, &db.user, "not-the-password").await;
    let resp = bad
        .send(STREAM, "application/proto", &[], request("SELECT 1", None))
        .await;
    assert_eq!(resp.status(), 401);
    assert_eq!(resp.headers()["content-type"], "application/json");

    // The workload switch: answered by the shim (MySQL would say "unknown
    // system variable"), and without a pin (none is allowed here).
    let options = ExecuteOptions {
        included_fields: 2,
        sql_select_limit: 7,
        transaction_isolation: TransactionIsolation::ReadCommitted as i32,
        ..Default::default()
    };
    let mut session = execute_in(&mut c, "SELECT 1", None).await.session.unwrap();
    assert_eq!(
        session.vitess_session.as_ref().unwrap().options,
        Some(ExecuteOptions::default()),
        "every session has options (psdbproxy reads them unchecked)"
    );
    session.vitess_session.as_mut().unwrap().options = Some(options);
    let r = execute_in(&mut c, "SET workload = 'olap'", Some(session)).await;
    assert!(r.error.is_none(), "{:?}", r.error);
    assert_eq!(r.result, Some(Default::default()));
    let olap = r.session.unwrap();
    let v = olap.vitess_session.as_ref().unwrap();
    assert_eq!(
        v.options,
        Some(ExecuteOptions {
            workload: Workload::Olap as i32,
            ..options
        }),
        "the other options are carried through"
    );
    assert!(!v.in_transaction);
    // OLAP clients stream everything, the switch back included.
    let (msgs, _) = Streamed::open(&mut c, "SELECT 41 + 1", Some(olap.clone()), &[])
        .await
        .all()
        .await;
    assert_eq!(
        values(msgs[1].result.as_ref().unwrap()),
        [[Some("42".into())]]
    );
    let kept = closing_session(&msgs);
    let workload = |s: &Session| {
        s.vitess_session
            .as_ref()
            .unwrap()
            .options
            .as_ref()
            .unwrap()
            .workload
    };
    assert_eq!(
        workload(&kept),
        Workload::Olap as i32,
        "the session keeps it"
    );
    let (msgs, end) = Streamed::open(&mut c, "set @@session.workload = oltp;", Some(kept), &[])
        .await
        .all()
        .await;
    assert_eq!(end, serde_json::json!({}));
    assert_eq!(msgs.len(), 2, "an empty result, then the session");
    assert_eq!(workload(&closing_session(&msgs)), Workload::Oltp as i32);
    let r = execute_in(&mut c, "SET workload = 'turbo'", Some(olap)).await;
    let e = r.error.expect("invalid workload");
    assert_eq!(e.code, Code::InvalidArgument as i32);
    assert!(
        e.message.starts_with("invalid workload: turbo"),
        "{}",
        e.message
    );
}

#[tokio::test]
async fn a_client_that_goes_away_stops_its_statement() {
    let _serial = SERIAL.lock().await;
    let Some((db, _shim, mut c)) = setup("gone", &[("FERRY_POOL_MAX", "2")]).await else {
        return;
    };
    // Mid-result: MySQL has rows to send; the client reads one chunk and leaves.
    let marker = "gone-midway";
    let mut s = Streamed::open(
        &mut c,
        &format!(
            "SELECT CONNECTION_ID() AS id, seq, REPEAT('z', 500) AS pad, '{marker}' AS m \
             FROM seq_1_to_100000000"
        ),
        None,
        &[],
    )
    .await;
    s.check_is_stream();
    let mut id = 0u64;
    while id == 0 {
        if let Some(Msg::Data(m)) = s.next().await {
            if let Some(row) = m.result.as_ref().and_then(|r| values(r).into_iter().next()) {
                id = row[0].as_deref().unwrap().parse().unwrap();
            }
        }
    }
    let left = Instant::now();
    drop(s);
    let took = gone_within(&db, marker, id, left, Duration::from_secs(1)).await;
    println!("client gone mid-result: statement and connection {id} gone after {took:?}");

    // Before the first row: nothing to write, so MySQL alone would never notice.
    let marker = "gone-sleeping";
    let s = Streamed::open(&mut c, &format!("SELECT SLEEP(30), '{marker}'"), None, &[]).await;
    s.check_is_stream();
    wait_running(&db, marker).await;
    let left = Instant::now();
    drop(s);
    let took = gone_within(&db, marker, 0, left, Duration::from_secs(1)).await;
    println!("client gone during SLEEP(30): statement gone after {took:?}");

    // The pool goes on, without the stopped connection.
    let r = c.ok("SELECT CONNECTION_ID()").await;
    assert_ne!(values(&r)[0][0], Some(id.to_string()));
}

#[tokio::test]
async fn deadlines_stop_statements() {
    let _serial = SERIAL.lock().await;
    let Some((db, _shim, mut c)) = setup(
        "deadline",
        &[("FERRY_POOL_MAX", "4"), ("FERRY_POOL_MAX_PINNED", "2")],
    )
    .await
    else {
        return;
    };
    let within = [("connect-timeout-ms", "500")];

    // Execute: 504 deadline_exceeded, and the statement is gone.
    let started = Instant::now();
    let (status, body) =
        execute_with(&mut c, "SELECT SLEEP(30), 'deadline-unary'", None, &within).await;
    let answered = started.elapsed();
    let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        (status, json["code"].as_str()),
        (504, Some("deadline_exceeded")),
        "{json}"
    );
    assert!(
        answered >= Duration::from_millis(500) && answered < Duration::from_millis(900),
        "{answered:?}"
    );
    let took = gone_within(&db, "deadline-unary", 0, started, Duration::from_secs(1)).await;
    println!("Execute deadline 500 ms: answered after {answered:?}, statement gone after {took:?}");

    // StreamExecute before the first row: the session, then the error.
    let started = Instant::now();
    let (msgs, end) = Streamed::open(&mut c, "SELECT SLEEP(30), 'deadline-stream'", None, &within)
        .await
        .all()
        .await;
    let answered = started.elapsed();
    assert_eq!(end["error"]["code"], "deadline_exceeded", "{end}");
    assert_eq!(msgs.len(), 1);
    closing_session(&msgs);
    assert!(answered < Duration::from_millis(900), "{answered:?}");
    let took = gone_within(&db, "deadline-stream", 0, started, Duration::from_secs(1)).await;
    println!(
        "StreamExecute deadline 500 ms: ended after {answered:?}, statement gone after {took:?}"
    );

    // ... and in the middle of the rows.
    let (msgs, end) = Streamed::open(
        &mut c,
        "SELECT seq, 'deadline-rows' FROM seq_1_to_1000000000",
        None,
        &[("connect-timeout-ms", "300")],
    )
    .await
    .all()
    .await;
    assert_eq!(end["error"]["code"], "deadline_exceeded", "{end}");
    assert!(msgs.len() > 2, "rows came before the deadline");
    closing_session(&msgs);
    gone_within(
        &db,
        "deadline-rows",
        0,
        Instant::now(),
        Duration::from_millis(500),
    )
    .await;

    // A malformed deadline is refused before anything runs.
    let (status, _) =
        execute_with(&mut c, "SELECT 1", None, &[("connect-timeout-ms", "soon")]).await;
    assert_eq!(status, 400);

    // In a transaction: the pin is lost (rolled back), as when its connection dies.
    c.ok("DROP TABLE IF EXISTS stream_txn").await;
    c.ok("CREATE TABLE stream_txn (v INT)").await;
    let begun = execute_in(&mut c, "BEGIN", None).await.session.unwrap();
    let s = execute_in(&mut c, "INSERT INTO stream_txn VALUES (1)", Some(begun))
        .await
        .session
        .unwrap();
    assert!(s.vitess_session.as_ref().unwrap().in_transaction);
    let (status, _) = execute_with(
        &mut c,
        "SELECT SLEEP(30), 'deadline-txn'",
        Some(s.clone()),
        &within,
    )
    .await;
    assert_eq!(status, 504);
    gone_within(
        &db,
        "deadline-txn",
        0,
        Instant::now(),
        Duration::from_millis(500),
    )
    .await;
    let r = execute_in(&mut c, "SELECT 1", Some(s.clone())).await;
    let e = r.error.expect("the transaction is lost");
    assert_eq!(e.code, Code::Aborted as i32);
    assert!(e.message.contains("deadline"), "{}", e.message);
    let r = execute_in(&mut c, "ROLLBACK", Some(s)).await;
    assert!(r.error.is_none());
    let n: Option<i64> = db
        .direct()
        .await
        .query_first("SELECT COUNT(*) FROM stream_txn")
        .await
        .unwrap();
    assert_eq!(n, Some(0), "rolled back");
}

#[tokio::test]
async fn a_transaction_streams_on_its_pin() {
    let _serial = SERIAL.lock().await;
    let Some((db, _shim, mut c)) = setup(
        "txn",
        &[("FERRY_POOL_MAX", "4"), ("FERRY_POOL_MAX_PINNED", "2")],
    )
    .await
    else {
        return;
    };
    c.ok("DROP TABLE IF EXISTS stream_pin").await;
    c.ok("CREATE TABLE stream_pin (v INT)").await;
    // An OLAP client sends everything through StreamExecute, BEGIN included.
    let (msgs, _) = Streamed::open(&mut c, "BEGIN", None, &[]).await.all().await;
    let s = closing_session(&msgs);
    assert!(s.vitess_session.as_ref().unwrap().in_transaction);
    let (msgs, _) = Streamed::open(
        &mut c,
        "INSERT INTO stream_pin SELECT seq FROM seq_1_to_5000",
        Some(s),
        &[],
    )
    .await
    .all()
    .await;
    assert_eq!(msgs[0].result.as_ref().unwrap().rows_affected, 5000);
    let s = closing_session(&msgs);
    // The same connection: the uncommitted rows are there.
    let (msgs, end) = Streamed::open(&mut c, "SELECT v FROM stream_pin ORDER BY v", Some(s), &[])
        .await
        .all()
        .await;
    assert_eq!(end, serde_json::json!({}));
    let rows: usize = msgs
        .iter()
        .filter_map(|m| m.result.as_ref())
        .map(|r| r.rows.len())
        .sum();
    assert_eq!(rows, 5000);
    let s = closing_session(&msgs);
    assert!(s.vitess_session.as_ref().unwrap().in_transaction);
    let n: Option<i64> = db
        .direct()
        .await
        .query_first("SELECT COUNT(*) FROM stream_pin")
        .await
        .unwrap();
    assert_eq!(n, Some(0), "not committed yet");
    let (msgs, _) = Streamed::open(&mut c, "COMMIT", Some(s), &[])
        .await
        .all()
        .await;
    assert!(
        !closing_session(&msgs)
            .vitess_session
            .unwrap()
            .in_transaction
    );
    let n: Option<i64> = db
        .direct()
        .await
        .query_first("SELECT COUNT(*) FROM stream_pin")
        .await
        .unwrap();
    assert_eq!(n, Some(5000));
}

#[tokio::test]
async fn memory_stays_bounded_while_a_gigabyte_streams() {
    let _serial = SERIAL.lock().await;
    let Some((_db, shim, mut c)) = setup("memory", &[]).await else {
        return;
    };
    let pid = shim.child.id();
    c.ok("SELECT 1").await;
    let before = memory_kib(pid, "VmRSS:");
    let rows: u64 = std::env::var("FERRY_TEST_STREAM_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let query = format!("SELECT seq, REPEAT('x', 1000) AS pad FROM seq_1_to_{rows}");
    let started = Instant::now();
    let mut s = Streamed::open(&mut c, &query, None, &[]).await;
    s.check_is_stream();
    let (mut paused, mut during_pause, mut msgs) = (false, 0, 0u64);
    let end = loop {
        match s.next_raw().await.expect("an end of stream") {
            (0, _) => msgs += 1,
            (2, end) => break end,
            (f, _) => panic!("flags {f}"),
        }
        // A slow client: stop reading for a while; the shim must not buffer.
        if !paused && s.bytes > 50 << 20 {
            paused = true;
            tokio::time::sleep(Duration::from_secs(2)).await;
            during_pause = memory_kib(pid, "VmRSS:");
        }
    };
    let secs = started.elapsed().as_secs_f64();
    assert_eq!(&end[..], b"{}");
    let peak = memory_kib(pid, "VmHWM:");
    let mib = s.bytes as f64 / f64::from(1 << 20);
    println!(
        "memory: {rows} rows, {mib:.0} MiB streamed in {secs:.2}s ({:.0} MiB/s, {:.0} rows/s, {msgs} messages); \
         shim RSS {before} KiB before, {during_pause} KiB while the client paused, peak (VmHWM) {peak} KiB",
        mib / secs,
        rows as f64 / secs
    );
    assert!(s.bytes > rows * 1000, "everything arrived");
    assert!(peak < 64 * 1024, "the shim's peak RSS is {peak} KiB");
}
