//! Chaos: the disk under MariaDB's data directory fills up (issue 29). Writes must fail
//! clearly, or be answered at their deadline, while reads go on; once space returns,
//! writes work again, and every acknowledged write is there, once.
//!
//! Each test starts its own MariaDB, as scripts/stack.sh does (`mariadb-install-db`, root
//! with a random password, the `ferry` user and database; the same server flags), whose
//! data directory and tmpdir are on a 256 MiB tmpfs mounted for the test, reached on a
//! unix socket only (`--skip-networking`), and a real shim in front of it. The disk is
//! filled with a file of its own (`fallocate`, then 4 KiB writes until ENOSPC), while
//! MariaDB runs. What MariaDB does then depends on what needs the space (MariaDB
//! 10.11.19, found by these tests; docs/benchmarks/chaos.md has the figures):
//! - no binary log (`stack.sh up`): a row that needs a new page of its table fails at
//!   once, errno 1114 "The table '...' is full"; a CREATE TABLE fails with errno 3
//!   "Error writing file '....frm' (Errcode: 28 "No space left on device")". Reads go on.
//!   Writes work again as soon as space returns.
//! - a binary log in the data directory (`FERRY_REPLICAS=1`'s primary): a commit that
//!   must grow the binary log waits ("Waiting for someone to free space", retried every
//!   60 s) with no error. The client's deadline (`connect-timeout-ms`) answers it, and the
//!   shim's KILL ends the wait: the row is not in the table, but the killed commit's
//!   events stay in MariaDB's binary log cache and are written once space returns, torn
//!   or whole (MDEV-27803): the test reports what the binary log holds, and whether it
//!   still reads. (Without a KILL, the waiting commit holds every commit until MariaDB's
//!   next retry, up to 60 s after space returns: too long for this test.)
//! - a row stored off-page (a large TEXT/BLOB): MariaDB retries the allocation for about
//!   5 s, then aborts ("[FATAL] InnoDB: Error (Out of disk space) in rollback", signal
//!   6), KILL or not. The test restarts it once space is back, as a supervisor would.
//!
//! Needs root (mount); skipped, with a message, without it, without MariaDB's binaries,
//! or unless `FERRY_TEST_MYSQL_SOCKET` or `FERRY_TEST_MYSQL_PORT` is set (the gate of the
//! other tests: that server is not used). The tests take turns; about 15 s in all.
mod common;
use common::*;
use ferry_proto::psdb::v1alpha1::{ExecuteRequest, ExecuteResponse};
use ferry_proto::vitess::query::QueryResult;
use ferry_proto::vitess::vtrpc::Code;
use http_body_util::BodyExt;
use mysql_async::prelude::Queryable;
use prost::Message;
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const EXECUTE: &str = "/psdb.v1alpha1.Database/Execute";

/// One MariaDB (and one full disk) at a time.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The tmpfs for MariaDB's files: room for what `mariadb-install-db` and the server make
/// (about 120 MiB with the default 96 MiB redo log), filled up by the test.
const DISK: &str = "256m";

fn binary(name: &str) -> Option<PathBuf> {
    ["/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin"]
        .iter()
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file())
}

fn random_hex() -> String {
    let mut b = [0u8; 24];
    getrandom::fill(&mut b).expect("random bytes");
    b.iter().map(|b| format!("{b:02x}")).collect()
}

fn run(cmd: &mut Command) -> Result<(), String> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{cmd:?}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{cmd:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// A MariaDB of its own on a small tmpfs. Dropped (even when the test fails): the
/// server is killed and the tmpfs unmounted.
struct Server {
    /// The tmpfs: data/, tmp/, the socket and the filler.
    dir: PathBuf,
    /// MariaDB's error log, outside the tmpfs (it must not compete for the space, and is
    /// kept when the test fails).
    log: PathBuf,
    mariadbd: PathBuf,
    args: Vec<String>,
    child: Option<Child>,
    db: Db,
    /// `ferry_monitor`'s password (see `start`).
    monitor_password: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let mut unmounted = false;
        for _ in 0..50 {
            if run(Command::new("umount").arg(&self.dir)).is_ok() {
                unmounted = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        if !unmounted {
            let _ = run(Command::new("umount").arg("-l").arg(&self.dir));
        }
        let _ = std::fs::remove_dir(&self.dir);
        if std::thread::panicking() {
            eprintln!("MariaDB's error log kept: {}", self.log.display());
        } else {
            let _ = std::fs::remove_file(&self.log);
        }
    }
}

impl Server {
    /// Mounts the tmpfs, makes the data directory and starts MariaDB; `binlog`: with a
    /// binary log in the data directory, as `FERRY_REPLICAS=1`'s primary. `Err`: why the
    /// test cannot run here.
    async fn start(name: &str, binlog: bool) -> Result<Server, String> {
        let (Some(install), Some(mariadbd)) = (binary("mariadb-install-db"), binary("mariadbd"))
        else {
            return Err("mariadb-install-db or mariadbd not found".into());
        };
        let dir = PathBuf::from(format!("/tmp/diskfull-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        if let Err(e) = run(Command::new("mount")
            .args(["-t", "tmpfs", "-o"])
            .arg(format!("size={DISK},mode=0755"))
            .arg("tmpfs")
            .arg(&dir))
        {
            let _ = std::fs::remove_dir(&dir);
            return Err(format!("cannot mount a tmpfs (needs root): {e}"));
        }
        let log = PathBuf::from(format!("/tmp/diskfull-{}-{name}.log", std::process::id()));
        let mut server = Server {
            dir: dir.clone(),
            log: log.clone(),
            mariadbd,
            args: Vec::new(),
            child: None,
            db: Db {
                socket: Some(dir.join("mysql.sock").to_str().unwrap().to_owned()),
                host: "127.0.0.1".into(),
                port: 0,
                user: "ferry".into(),
                password: "ferry".into(),
                database: "ferry".into(),
            },
            monitor_password: String::new(),
        };
        let data = dir.join("data");
        std::fs::create_dir_all(dir.join("tmp")).unwrap();
        // As stack.sh: root gets a random password while the data dir is made (nobody
        // keeps it: the test needs no root), no anonymous or remote root; then the dev
        // user and database. The test's own look at the server (the binary log's events,
        // the process list) is as `ferry_monitor`: the shim serves no account with global
        // privileges.
        let pw = random_hex();
        server.monitor_password = random_hex();
        let init = dir.join("init.sql");
        let sql = format!(
            "FLUSH PRIVILEGES;
DELETE FROM mysql.global_priv WHERE User = '' OR (User = 'root' AND Host <> 'localhost');
FLUSH PRIVILEGES;
ALTER USER 'root'@'localhost' IDENTIFIED BY '{pw}';
CREATE DATABASE IF NOT EXISTS ferry;
CREATE USER IF NOT EXISTS 'ferry'@'localhost' IDENTIFIED BY 'ferry';
GRANT ALL PRIVILEGES ON ferry.* TO 'ferry'@'localhost';
CREATE USER IF NOT EXISTS 'ferry_monitor'@'localhost' IDENTIFIED BY '{monitor}';
GRANT BINLOG MONITOR, PROCESS ON *.* TO 'ferry_monitor'@'localhost';
",
            monitor = server.monitor_password
        );
        // Mode 0600: it holds passwords (and is removed once read).
        let mut file = std::fs::OpenOptions::new();
        std::os::unix::fs::OpenOptionsExt::mode(file.write(true).create_new(true), 0o600);
        file.open(&init)
            .and_then(|mut f| f.write_all(sql.as_bytes()))
            .unwrap();
        let installed = run(Command::new(&install)
            .arg("--no-defaults")
            .arg("--user=root")
            .arg(format!("--datadir={}", data.display()))
            .args(["--auth-root-authentication-method=normal", "--skip-test-db"])
            .arg(format!("--extra-file={}", init.display())));
        let _ = std::fs::remove_file(&init);
        installed.unwrap_or_else(|e| panic!("mariadb-install-db: {e}"));
        // stack.sh's flags, with a unix socket only.
        let mut args = vec![
            "--no-defaults".to_owned(),
            "--user=root".into(),
            format!("--datadir={}", data.display()),
            format!("--socket={}", server.db.socket.as_ref().unwrap()),
            "--skip-networking".into(),
            format!("--pid-file={}", data.join("mariadbd.pid").display()),
            format!("--log-error={}", log.display()),
            format!("--tmpdir={}", dir.join("tmp").display()),
            "--max-connections=500".into(),
            "--innodb-buffer-pool-size=256M".into(),
        ];
        if binlog {
            args.extend([
                "--server-id=1".to_owned(),
                format!("--log-bin={}", data.join("binlog").display()),
                "--binlog-format=ROW".into(),
                "--expire-logs-days=1".into(),
            ]);
        }
        server.args = args;
        server.spawn().await;
        Ok(server)
    }

    /// Starts mariadbd and waits until the ferry user can log in.
    async fn spawn(&mut self) -> Duration {
        let t0 = Instant::now();
        let child = Command::new(&self.mariadbd)
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn mariadbd");
        self.child = Some(child);
        loop {
            if let Ok(c) = mysql_async::Conn::new(self.opts()).await {
                let _ = c.disconnect().await;
                return t0.elapsed();
            }
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("mariadbd exited ({status}): {}", self.log_tail(20));
            }
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "MariaDB did not start: {}",
                self.log_tail(20)
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn opts(&self) -> mysql_async::OptsBuilder {
        mysql_async::OptsBuilder::default()
            .user(Some(self.db.user.clone()))
            .pass(Some(self.db.password.clone()))
            .db_name(Some(self.db.database.clone()))
            .socket(self.db.socket.clone())
    }

    /// Whether mariadbd has exited (and reaps it).
    fn exited(&mut self) -> bool {
        match self.child.as_mut() {
            Some(c) => c.try_wait().unwrap().is_some(),
            None => true,
        }
    }

    fn log_text(&self) -> String {
        String::from_utf8_lossy(&std::fs::read(&self.log).unwrap_or_default()).into_owned()
    }

    fn log_tail(&self, n: usize) -> String {
        let text = self.log_text();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }

    /// Fills the tmpfs: `fallocate` what is free, then 4 KiB writes until ENOSPC.
    /// Returns the bytes taken.
    fn fill(&self) -> u64 {
        let out = Command::new("df")
            .args(["-B1", "--output=avail"])
            .arg(&self.dir)
            .output()
            .expect("df");
        let avail: u64 = String::from_utf8_lossy(&out.stdout)
            .lines()
            .last()
            .and_then(|l| l.trim().parse().ok())
            .expect("df's available bytes");
        let filler = self.dir.join("filler");
        if avail > 0 {
            run(Command::new("fallocate")
                .arg("-l")
                .arg(avail.to_string())
                .arg(&filler))
            .expect("fallocate");
        }
        let mut tail = std::fs::File::create(self.dir.join("filler-tail")).unwrap();
        let block = [0u8; 4096];
        let mut taken = avail;
        loop {
            match tail.write_all(&block).and_then(|()| tail.sync_data()) {
                Ok(()) => taken += block.len() as u64,
                Err(e) if e.raw_os_error() == Some(28) => return taken,
                Err(e) => panic!("filling {}: {e}", self.dir.display()),
            }
        }
    }

    /// Gives the space back.
    fn free(&self) {
        for f in ["filler", "filler-tail"] {
            let _ = std::fs::remove_file(self.dir.join(f));
        }
    }

    /// Rows per tag, read directly.
    async fn tags(&self) -> HashMap<String, i64> {
        let mut c = self.db.direct().await;
        let rows: Vec<(String, i64)> = c
            .query("SELECT tag, COUNT(*) FROM disk_full GROUP BY tag")
            .await
            .unwrap();
        rows.into_iter().collect()
    }

    /// A connection as `ferry_monitor`.
    async fn monitor(&self) -> mysql_async::Conn {
        let opts = self
            .opts()
            .user(Some("ferry_monitor"))
            .pass(Some(self.monitor_password.clone()))
            .db_name(None::<String>);
        mysql_async::Conn::new(opts).await.expect("ferry_monitor")
    }

    /// The statements MariaDB is holding until space returns. (SHOW PROCESSLIST:
    /// information_schema.PROCESSLIST needs an on-disk temporary table.)
    async fn waiting_for_space(&self) -> usize {
        let mut c = self.monitor().await;
        let states: Vec<Option<String>> = c
            .query_map("SHOW PROCESSLIST", |row: mysql_async::Row| {
                row.get::<Option<String>, _>("State").flatten()
            })
            .await
            .unwrap();
        states
            .iter()
            .flatten()
            .filter(|s| s.starts_with("Waiting for someone to free space"))
            .count()
    }

    /// The binary log as mariadb-binlog reads it: the statements of its row events
    /// (`Annotate_rows`), and the error where it stops reading, if it does.
    fn binlog(&self) -> (Vec<String>, Option<String>) {
        let tool = binary("mariadb-binlog").expect("mariadb-binlog");
        let out = Command::new(tool)
            .arg("--no-defaults")
            .arg(self.dir.join("data/binlog.000001"))
            .output()
            .expect("mariadb-binlog");
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        let statements = text
            .lines()
            .filter_map(|l| l.strip_prefix("#Q> "))
            .map(str::to_owned)
            .collect();
        let error = text
            .lines()
            .find(|l| l.starts_with("ERROR"))
            .map(str::to_owned);
        (statements, error)
    }
}

/// A MariaDB and a shim on it, or `None` (printed) when this machine cannot run it.
async fn setup(name: &str, binlog: bool) -> Option<(Server, Shim)> {
    if Db::from_env().is_none() {
        eprintln!("skipped: FERRY_TEST_MYSQL_SOCKET or FERRY_TEST_MYSQL_PORT not set");
        return None;
    }
    let server = match Server::start(name, binlog).await {
        Ok(s) => s,
        Err(why) => {
            eprintln!("skipped: {why}");
            return None;
        }
    };
    let unix = server.dir.join("shim.sock");
    let shim = start_shim(
        &server.db,
        &format!("diskfull-{name}"),
        &[
            ("FERRY_LOG", "info"),
            ("FERRY_SHIM_UNIX", unix.to_str().unwrap()),
        ],
    )
    .await;
    Some((server, shim))
}

/// `Client::connect`, with TCP_NODELAY: the HEADERS and DATA frames of a request go
/// out at once, and the times below are the shim's and MariaDB's, not Nagle's.
async fn connect(port: u16, db: &Db) -> Client {
    use base64::Engine;
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    tcp.set_nodelay(true).unwrap();
    let (h2, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(tcp),
    )
    .await
    .expect("h2c handshake (prior knowledge)");
    tokio::spawn(conn);
    let auth = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{}:{}", db.user, db.password))
    );
    Client { h2, auth }
}

/// What the shim answered.
#[derive(Debug)]
enum Answer {
    Ok(QueryResult),
    /// An SQL error in a 200 answer: its vtrpc code and message.
    Sql(Code, String),
    /// A Connect error: the HTTP status and the JSON body's code and message.
    Http(u16, String, String),
}

impl Answer {
    fn is_ok(&self) -> bool {
        matches!(self, Answer::Ok(_))
    }

    /// For the figures printed.
    fn brief(&self) -> String {
        match self {
            Answer::Ok(r) => format!("200, {} row(s)", r.rows.len()),
            Answer::Sql(code, message) => format!("200, {code:?} {message:?}"),
            Answer::Http(status, code, message) => format!("{status} {code} {message:?}"),
        }
    }
}

/// One statement with a deadline (`connect-timeout-ms`); the answer and how long it took.
async fn call(c: &mut Client, sql: &str, deadline_ms: u64) -> (Answer, Duration) {
    let req = ExecuteRequest {
        query: sql.into(),
        ..Default::default()
    };
    let t0 = Instant::now();
    let ms = deadline_ms.to_string();
    let resp = c
        .send(
            EXECUTE,
            "application/proto",
            &[("connect-timeout-ms", &ms)],
            req.encode_to_vec(),
        )
        .await;
    let status = resp.status().as_u16();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    let took = t0.elapsed();
    if status == 200 {
        let r = ExecuteResponse::decode(body).expect("ExecuteResponse");
        return match r.error {
            Some(e) => (
                Answer::Sql(Code::try_from(e.code).unwrap(), e.message),
                took,
            ),
            None => (Answer::Ok(r.result.expect("result")), took),
        };
    }
    let j: serde_json::Value =
        serde_json::from_slice(&body).unwrap_or_else(|_| panic!("{status}: not JSON: {body:?}"));
    (
        Answer::Http(
            status,
            j["code"].as_str().unwrap_or_default().to_owned(),
            j["message"].as_str().unwrap_or_default().to_owned(),
        ),
        took,
    )
}

async fn healthz(port: u16) -> (u16, String) {
    let mut c = Client::connect(port, "-", "-").await;
    let req = hyper::Request::get("http://shim/healthz")
        .body(http_body_util::Full::new(bytes::Bytes::new()))
        .unwrap();
    let resp = c.h2.send_request(req).await.unwrap();
    let status = resp.status().as_u16();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

fn insert(tag: &str, len: usize) -> String {
    format!("INSERT INTO disk_full (tag, v) VALUES ('{tag}', REPEAT('x', {len}))")
}

/// A read through the shim, during the fault: it must answer, and quickly.
async fn read_ok(c: &mut Client, expect_rows: usize) -> Duration {
    let (a, took) = call(c, "SELECT id, tag FROM disk_full ORDER BY id", 5000).await;
    let Answer::Ok(r) = a else {
        panic!("a read during the fault: {a:?}");
    };
    assert_eq!(r.rows.len(), expect_rows);
    assert!(took < Duration::from_secs(1), "a read took {took:?}");
    took
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

/// Without a binary log (`stack.sh up`): a write that needs a new page of its table is
/// answered at once, errno 1114 (`resource_exhausted`); DDL fails naming ENOSPC; reads
/// and the shim go on; writes work again as soon as the space is back.
#[tokio::test]
async fn a_full_disk_fails_writes_clearly_and_reads_go_on() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let Some((server, shim)) = setup("innodb", false).await else {
        return;
    };
    let mut c = connect(shim.port, &server.db).await;
    c.ok("CREATE TABLE disk_full (id INT AUTO_INCREMENT PRIMARY KEY, tag VARCHAR(40) NOT NULL, v MEDIUMTEXT NOT NULL)").await;
    let mut acked: Vec<String> = Vec::new();
    for i in 0..20 {
        let tag = format!("seed-{i}");
        c.ok(&insert(&tag, 4000)).await;
        acked.push(tag);
    }
    // A read before the fill, to compare.
    let before = read_ok(&mut c, acked.len()).await;
    let filled = server.fill();

    // Rows of 4,000 bytes (stored in the page), each with a 5 s deadline, until three
    // in a row fail. The first few may still fit in the table's free pages.
    let mut failed: Vec<String> = Vec::new();
    let mut first_error = None;
    let mut slowest_failure = Duration::ZERO;
    let mut reads = Vec::new();
    for i in 0..200 {
        let tag = format!("w-{i}");
        let (a, took) = call(&mut c, &insert(&tag, 4000), 5000).await;
        match a {
            Answer::Ok(_) => {
                failed.clear(); // three in a row
                acked.push(tag);
            }
            Answer::Sql(code, message) => {
                assert_eq!(code, Code::ResourceExhausted, "{message}");
                assert!(
                    message.contains("is full (errno 1114)") || message.contains("(errno 1021)"),
                    "names the cause: {message}"
                );
                first_error.get_or_insert((code, message));
                slowest_failure = slowest_failure.max(took);
                failed.push(tag);
            }
            a => panic!("a write on a full disk: {a:?} after {took:?}"),
        }
        reads.push(read_ok(&mut c, acked.len()).await);
        if failed.len() == 3 {
            break;
        }
    }
    assert_eq!(failed.len(), 3, "writes kept succeeding on a full disk");
    assert!(
        slowest_failure < Duration::from_secs(1),
        "answered at once, not at the deadline: {slowest_failure:?}"
    );
    let during = acked.len() - 20;

    // A CREATE TABLE: MariaDB cannot write its .frm.
    let (ddl, _) = call(&mut c, "CREATE TABLE disk_full_ddl (a INT)", 5000).await;
    let Answer::Sql(ddl_code, ddl_message) = &ddl else {
        panic!("DDL on a full disk: {ddl:?}");
    };
    assert!(
        ddl_message.contains("No space left on device"),
        "{ddl_code:?} {ddl_message}"
    );

    // The shim is well, and so is MariaDB.
    assert_eq!(healthz(shim.port).await, (200, "ok\n".into()));
    let (a, _) = call(&mut c, "SELECT COUNT(*) FROM disk_full", 5000).await;
    assert_eq!(
        values(&match a {
            Answer::Ok(r) => r,
            a => panic!("{a:?}"),
        }),
        [[Some(acked.len().to_string())]]
    );

    // Space returns: how long until a write succeeds.
    server.free();
    let t0 = Instant::now();
    let mut lost: Vec<String> = failed.clone();
    let attempts = until_a_write_succeeds(&mut c, 4000, 20, &mut acked, &mut lost).await;
    let recovery = t0.elapsed();

    // Every acknowledged write once; none of the failed ones.
    let tags = once_or_absent(&server, &acked, &lost).await;
    assert_eq!(tags.values().sum::<i64>(), acked.len() as i64);

    let (code, message) = first_error.unwrap();
    let log = server.log_text();
    eprintln!(
        "disk full, no binary log ({} filled): {during} write(s) acknowledged after the fill, then 3 failed \
         in <= {} each: 200, {code:?} {message:?}",
        filled,
        ms(slowest_failure),
    );
    eprintln!("  CREATE TABLE: 200, {ddl_code:?} {ddl_message:?}");
    eprintln!(
        "  {} reads during the fill, slowest {} (one before it: {}); /healthz 200",
        reads.len(),
        ms(reads.iter().copied().max().unwrap()),
        ms(before)
    );
    eprintln!(
        "  MariaDB's log: {} \"preallocating ... failed with error 28\", {} \"is full\"",
        log.matches("failed with error 28").count(),
        log.matches("is full").count()
    );
    eprintln!(
        "  space back: a write succeeded after {} ({attempts} attempt(s)); rows after: {} \
         acknowledged present once, {} failed absent",
        ms(recovery),
        acked.len(),
        lost.len()
    );
}

/// With a binary log in the data directory (`FERRY_REPLICAS=1`'s primary): a commit
/// waits for space, without an error; the deadline answers it (504, the shim KILLs it,
/// which ends MariaDB's wait); reads go on; writes work again once space is back.
#[tokio::test]
async fn with_a_binary_log_a_full_disk_holds_commits_and_the_deadline_answers() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let Some((server, shim)) = setup("binlog", true).await else {
        return;
    };
    let mut c = connect(shim.port, &server.db).await;
    // Rows of 500 bytes: the table's first page has room for the rows of this test, so
    // what needs space is the binary log (each commit about 600 bytes of it).
    c.ok("CREATE TABLE disk_full (id INT AUTO_INCREMENT PRIMARY KEY, tag VARCHAR(40) NOT NULL, v MEDIUMTEXT NOT NULL)").await;
    let mut acked: Vec<String> = Vec::new();
    for i in 0..3 {
        let tag = format!("seed-{i}");
        c.ok(&insert(&tag, 500)).await;
        acked.push(tag);
    }
    // A read before the fill, to compare.
    let before = read_ok(&mut c, acked.len()).await;
    let filled = server.fill();

    // Writes with a 1 s deadline until one is not answered in time. The first few fill
    // what is left of the binary log's last page.
    let deadline = 1000;
    let mut stopped: Vec<(String, Duration, String)> = Vec::new();
    let mut reads = Vec::new();
    let mut during = 0;
    for i in 0..40 {
        let tag = format!("w-{i}");
        let (a, took) = call(&mut c, &insert(&tag, 500), deadline).await;
        match a {
            Answer::Ok(_) => {
                acked.push(tag);
                during += 1;
            }
            Answer::Http(504, code, message) => {
                assert_eq!(code, "deadline_exceeded", "{message}");
                assert!(message.contains("it was stopped"), "{message}");
                // The deadline, then the KILL (immediate here).
                assert!(
                    took >= Duration::from_millis(deadline)
                        && took < Duration::from_millis(deadline + 1500),
                    "{took:?}"
                );
                stopped.push((tag, took, message));
            }
            a => panic!("a write on a full disk: {a:?} after {took:?}"),
        }
        reads.push(read_ok(&mut c, acked.len()).await);
        if stopped.len() == 2 {
            break;
        }
    }
    assert_eq!(stopped.len(), 2, "writes kept succeeding on a full disk");
    // MariaDB held them, it did not refuse them; the KILL ended the wait.
    let log = server.log_text();
    assert!(
        log.contains("Waiting for someone to free space"),
        "{}",
        server.log_tail(10)
    );
    // The shim's KILL ended MariaDB's wait (a moment after KILL QUERY returned).
    let t0 = Instant::now();
    while server.waiting_for_space().await > 0 {
        assert!(
            t0.elapsed() < Duration::from_secs(3),
            "a stopped statement still waits for space in MariaDB"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(healthz(shim.port).await, (200, "ok\n".into()));

    // Space returns: how long until a write succeeds.
    server.free();
    let t0 = Instant::now();
    let mut lost: Vec<String> = stopped.iter().map(|s| s.0.clone()).collect();
    let attempts = until_a_write_succeeds(&mut c, 500, 20, &mut acked, &mut lost).await;
    let recovery = t0.elapsed();

    // The table: every acknowledged write once, none of the stopped ones.
    once_or_absent(&server, &acked, &lost).await;
    // The binary log (what a replica reads): as the server serves it (SHOW BINLOG EVENTS),
    // and as mariadb-binlog reads it, up to where it breaks if it does.
    let shown: Result<Vec<String>, _> = server
        .monitor()
        .await
        .query_map("SHOW BINLOG EVENTS", |row: mysql_async::Row| {
            row.get::<String, _>("Event_type").unwrap()
        })
        .await;
    let (statements, broken) = server.binlog();
    let in_binlog = |tag: &str| {
        let needle = format!("VALUES ('{tag}',");
        statements.iter().filter(|q| q.contains(&needle)).count()
    };
    // Each acknowledged write once (those before a break, if it broke).
    for tag in &acked {
        let n = in_binlog(tag);
        assert!(
            n == 1 || (n == 0 && broken.is_some()),
            "acknowledged {tag}: {n} in the binary log"
        );
    }
    let phantoms: Vec<&String> = lost.iter().filter(|t| in_binlog(t) > 0).collect();
    let unreplicated: Vec<&String> = acked.iter().filter(|t| in_binlog(t) == 0).collect();

    eprintln!(
        "disk full, binary log in the data dir ({filled} filled): {during} write(s) acknowledged after the \
         fill, then each write waited in MariaDB (\"Waiting for someone to free space\")"
    );
    for (tag, took, message) in &stopped {
        eprintln!(
            "  {tag}: 504 deadline_exceeded after {} ({deadline} ms deadline): {message:?}",
            ms(*took)
        );
    }
    eprintln!(
        "  {} reads during the fill, slowest {} (one before it: {}); /healthz 200; no statement \
         left waiting in MariaDB",
        reads.len(),
        ms(reads.iter().copied().max().unwrap()),
        ms(before)
    );
    eprintln!(
        "  space back: a write succeeded after {} ({attempts} attempt(s)); rows after: {} \
         acknowledged present once, {} stopped absent from the table",
        ms(recovery),
        acked.len(),
        lost.len()
    );
    match (&shown, &broken) {
        (Ok(events), None) => eprintln!("  the binary log reads whole ({} events)", events.len()),
        _ => eprintln!(
            "  BUT the binary log is CORRUPT: SHOW BINLOG EVENTS: {}; mariadb-binlog: {}; \
             acknowledged writes a replica cannot get past it: {unreplicated:?}",
            shown
                .as_ref()
                .map_or_else(|e| e.to_string(), |e| format!("{} events", e.len())),
            broken.as_deref().unwrap_or("reads it whole"),
        ),
    }
    if phantoms.is_empty() {
        eprintln!("  the binary log has none of the stopped writes");
    } else if broken.is_some() {
        eprintln!(
            "  it breaks inside stopped write(s) {phantoms:?}, absent from the primary's table"
        );
    } else {
        eprintln!(
            "  BUT the binary log has {} of the {} stopped writes ({phantoms:?}): absent from the \
             primary's table, a replica would apply them",
            phantoms.len(),
            lost.len()
        );
    }
}

/// What became of a 64 KiB write that was not acknowledged.
struct OffPage {
    tag: String,
    answer: Answer,
    /// How long the answer took.
    took: Duration,
    /// A read sent right after that answer.
    read: (Answer, Duration),
    /// When MariaDB exited, counted from when the write was sent (`None`: it did not).
    exited: Option<Duration>,
}

/// 64 KiB rows (off-page) with this deadline until one is not acknowledged; then a
/// read, and up to 12 s (from the write) to see whether MariaDB exits.
async fn off_page_until_failure(
    server: &mut Server,
    c: &mut Client,
    phase: &str,
    deadline_ms: u64,
    acked: &mut Vec<String>,
) -> OffPage {
    for i in 0..20 {
        let tag = format!("{phase}-{i}");
        let sent = Instant::now();
        let (answer, took) = call(c, &insert(&tag, 65536), deadline_ms).await;
        if answer.is_ok() {
            acked.push(tag);
            continue;
        }
        let read = call(c, "SELECT COUNT(*) FROM disk_full", 2000).await;
        let mut exited = None;
        while sent.elapsed() < Duration::from_secs(12) {
            if server.exited() {
                exited = Some(sent.elapsed());
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        return OffPage {
            tag,
            answer,
            took,
            read,
            exited,
        };
    }
    panic!("64 KiB writes kept succeeding on a full disk");
}

/// Space back, and MariaDB restarted if it exited (crash recovery), as a supervisor
/// would: until a 64 KiB write succeeds through the shim. Prints the times.
/// Once space is back: writes of `len`-byte rows until one is acknowledged (within
/// `limit_secs`), each refused one counted lost. How many attempts it took.
async fn until_a_write_succeeds(
    c: &mut Client,
    len: usize,
    limit_secs: u64,
    acked: &mut Vec<String>,
    lost: &mut Vec<String>,
) -> u32 {
    let t0 = Instant::now();
    let mut attempts = 0;
    loop {
        attempts += 1;
        let tag = format!("r-{}", acked.len() + lost.len());
        let (a, _) = call(c, &insert(&tag, len), 2000).await;
        if a.is_ok() {
            acked.push(tag);
            return attempts;
        }
        lost.push(tag);
        assert!(
            t0.elapsed() < Duration::from_secs(limit_secs),
            "no recovery: {a:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The table's rows by tag: every acknowledged write there once, no lost one there.
async fn once_or_absent(
    server: &Server,
    acked: &[String],
    lost: &[String],
) -> HashMap<String, i64> {
    let tags = server.tags().await;
    for tag in acked {
        assert_eq!(tags.get(tag), Some(&1), "acknowledged {tag}");
    }
    for tag in lost {
        assert_eq!(tags.get(tag), None, "failed or stopped {tag} is absent");
    }
    tags
}

async fn recover(
    server: &mut Server,
    c: &mut Client,
    acked: &mut Vec<String>,
    lost: &mut Vec<String>,
) {
    server.free();
    let t0 = Instant::now();
    let restart = if server.exited() {
        Some(server.spawn().await)
    } else {
        None
    };
    let attempts = until_a_write_succeeds(c, 65536, 30, acked, lost).await;
    match restart {
        Some(r) => eprintln!(
            "  space back, MariaDB restarted: it took logins after {}, a write through the shim \
             succeeded after {} ({attempts} attempt(s))",
            ms(r),
            ms(t0.elapsed())
        ),
        None => eprintln!(
            "  space back: a write succeeded after {} ({attempts} attempt(s))",
            ms(t0.elapsed())
        ),
    }
}

/// A row stored off-page (64 KiB of TEXT) on a full disk: MariaDB 10.11 retries the
/// allocation for about 5 s, then aborts in the rollback, KILL or not.
/// - A 1 s deadline: answered 504 at the deadline, the shim's KILL QUERY succeeds, yet
///   the statement goes on in MariaDB until the abort (reads meanwhile work).
/// - A 15 s deadline: answered 503 `unavailable` when MariaDB dies under it.
///
/// Each time, once space is back MariaDB is restarted (as a supervisor would); after
/// both, the acknowledged rows are there once and the failed ones are not.
#[tokio::test]
async fn an_off_page_row_on_a_full_disk() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let Some((mut server, shim)) = setup("blob", false).await else {
        return;
    };
    let mut c = connect(shim.port, &server.db).await;
    c.ok("CREATE TABLE disk_full (id INT AUTO_INCREMENT PRIMARY KEY, tag VARCHAR(40) NOT NULL, v MEDIUMTEXT NOT NULL)").await;
    let mut acked: Vec<String> = Vec::new();
    let mut lost: Vec<String> = Vec::new();
    for i in 0..3 {
        let tag = format!("seed-{i}");
        c.ok(&insert(&tag, 65536)).await;
        acked.push(tag);
    }

    for (phase, deadline) in [("short", 1000), ("long", 15_000)] {
        server.fill();
        let f = off_page_until_failure(&mut server, &mut c, phase, deadline, &mut acked).await;
        lost.push(f.tag.clone());
        eprintln!(
            "disk full, a 64 KiB (off-page) row, {deadline} ms deadline: answered after {}: {}",
            ms(f.took),
            f.answer.brief()
        );
        eprintln!(
            "  a read right after: {} in {}",
            f.read.0.brief(),
            ms(f.read.1)
        );
        match f.exited {
            Some(at) => {
                let log = server.log_text();
                let fatal = log.lines().rfind(|l| l.contains("[FATAL]")).unwrap_or("");
                assert!(
                    fatal.contains("Out of disk space"),
                    "{}",
                    server.log_tail(30)
                );
                eprintln!(
                    "  MariaDB ABORTED {} after the write was sent: {fatal:?}",
                    ms(at)
                );
                if let Answer::Http(504, code, message) = &f.answer {
                    // Answered at the deadline plus the KILL's wait (2 s), before MariaDB
                    // gave up: the KILL was acknowledged but the statement ran on, and
                    // the answer says so.
                    assert_eq!(code, "deadline_exceeded");
                    assert!(message.contains("could not be stopped"), "{message}");
                    assert!(f.took < at, "{:?} {at:?}", f.took);
                    assert!(
                        f.took < Duration::from_millis(deadline + 2500),
                        "{:?}",
                        f.took
                    );
                    assert!(
                        f.read.0.is_ok(),
                        "reads go on until MariaDB aborts: {:?}",
                        f.read.0
                    );
                } else {
                    // Answered when MariaDB died under it.
                    let Answer::Http(status, code, message) = &f.answer else {
                        panic!("{:?}", f.answer);
                    };
                    assert_eq!((*status, code.as_str()), (503, "unavailable"), "{message}");
                    assert!(
                        message.starts_with(
                            "lost the MySQL connection during the statement, which may or may not have been applied: "
                        ),
                        "{message}"
                    );
                    assert!(
                        !message.contains("Input/output error: Input/output error"),
                        "each cause once: {message}"
                    );
                    // Reads fail while it is down, at once, and the shim lives.
                    assert!(!f.read.0.is_ok());
                    assert!(f.read.1 < Duration::from_millis(2500), "{:?}", f.read.1);
                    assert_eq!(healthz(shim.port).await.0, 503);
                }
            }
            None => {
                // A MariaDB that survives it: a clear SQL error, or the deadline.
                match &f.answer {
                    Answer::Sql(code, message) => {
                        assert_eq!(*code, Code::ResourceExhausted, "{message}")
                    }
                    Answer::Http(504, code, _) => assert_eq!(code, "deadline_exceeded"),
                    a => panic!("{a:?}"),
                }
                eprintln!("  MariaDB survived it");
            }
        }
        recover(&mut server, &mut c, &mut acked, &mut lost).await;
    }

    once_or_absent(&server, &acked, &lost).await;
    eprintln!(
        "  rows after: {} acknowledged present once, {} failed absent",
        acked.len(),
        lost.len()
    );
}
