//! `make chaos` (loadtest/chaos.sh; docs/benchmarks/chaos.md "The longer run"): the chaos
//! cases of replicas.rs for minutes instead of seconds, on a replica stack of its own.
//! Under a steady load of reads, writes and keyed writes, one process after another is
//! killed with SIGKILL and started again (Envoy, the primary's shim, the replica's
//! shim, the primary's MariaDB, the replica's MariaDB, in turn), every CHAOS_EVERY
//! seconds (30) for CHAOS_MINUTES (10).
//!
//! - Plain writes (autocommit INSERTs) are never retried: every acknowledged one must be
//!   in the table once; the unacknowledged ones may or may not be (counted).
//! - Keyed writes (`Idempotency-Key`) are retried with their key until acknowledged:
//!   each must be in the table exactly once (no unique index hides a second one).
//! - Reads must come back after each fault: the time from the kill to the first
//!   success of every kind after it is that fault's recovery time.
mod common;
use common::*;
use ferry_e2e::connect::{ConnectClient, EXECUTE};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn knob(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// One Execute as Connect JSON over HTTP/2: whether it succeeded (200, no SQL error).
async fn ok(c: &ConnectClient, sql: &str, key: Option<&str>) -> bool {
    let auth = c.cfg.basic_auth();
    let mut headers = vec![
        ("content-type", "application/json"),
        ("authorization", auth.as_str()),
    ];
    if let Some(k) = key {
        headers.push(("idempotency-key", k));
    }
    let body = serde_json::json!({ "query": sql }).to_string().into_bytes();
    match c.send(reqwest::Method::POST, EXECUTE, &headers, body).await {
        Ok(a) => {
            a.status == 200
                && serde_json::from_slice::<serde_json::Value>(&a.body)
                    .is_ok_and(|v| v.get("error").is_none())
        }
        Err(_) => false,
    }
}

fn client() -> ConnectClient {
    ConnectClient::http2(&cfg())
}

/// What each kind of call saw, and when.
#[derive(Default)]
struct Seen {
    successes: Vec<Instant>,
    failures: Vec<Instant>,
}

type Book = Arc<Mutex<BTreeMap<&'static str, Seen>>>;

fn note(book: &Book, kind: &'static str, success: bool) {
    let mut b = book.lock().unwrap();
    let s = b.entry(kind).or_default();
    if success {
        s.successes.push(Instant::now());
    } else {
        s.failures.push(Instant::now());
    }
}

/// Kills `victim` with SIGKILL and starts it again; how long the restart took.
fn kill_and_restart(victim: &str) -> Duration {
    stop(victim, "-9");
    let t = Instant::now();
    match victim {
        "envoy" => stack("gateway"),
        "shim" | "shim-replica" => stack("shim"),
        "mysql" => stack("mysql"),
        "mysql-replica" => stack("replica"),
        other => panic!("no way to restart {other}"),
    }
    t.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "kills the stack's processes for minutes (make chaos runs it on a stack of its own)"]
async fn one_fault_after_another_under_load() {
    let minutes = knob("CHAOS_MINUTES", 10);
    let every = Duration::from_secs(knob("CHAOS_EVERY", 30));
    let t = unique("chaos");
    assert!(
        ok(
            &client(),
            &format!(
                "CREATE TABLE {t} (id INT AUTO_INCREMENT PRIMARY KEY, k VARCHAR(64) NOT NULL, KEY (k))"
            ),
            None
        )
        .await
    );
    let book: Book = Arc::default();
    let acked_plain = Arc::new(Mutex::new(Vec::<String>::new()));
    let acked_keyed = Arc::new(Mutex::new(Vec::<String>::new()));
    let started = Instant::now();
    let until = started + Duration::from_secs(minutes * 60);
    let mut load = Vec::new();
    // Plain writes: never retried.
    for w in 0..2 {
        let (t, book, acked) = (t.clone(), book.clone(), acked_plain.clone());
        load.push(tokio::spawn(async move {
            let mut c = client();
            let mut n = 0u64;
            while Instant::now() < until {
                n += 1;
                let k = format!("plain-{w}-{n}");
                let done = ok(&c, &format!("INSERT INTO {t} (k) VALUES ('{k}')"), None).await;
                note(&book, "write", done);
                if done {
                    acked.lock().unwrap().push(k);
                } else {
                    c = client();
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }));
    }
    // Keyed writes: each retried with its key until acknowledged.
    for w in 0..2 {
        let (t, book, acked) = (t.clone(), book.clone(), acked_keyed.clone());
        load.push(tokio::spawn(async move {
            let mut c = client();
            let mut n = 0u64;
            while Instant::now() < until {
                n += 1;
                let k = format!("keyed-{w}-{n}-{}", unique("k"));
                loop {
                    let done =
                        ok(&c, &format!("INSERT INTO {t} (k) VALUES ('{k}')"), Some(&k)).await;
                    note(&book, "keyed write", done);
                    if done {
                        acked.lock().unwrap().push(k);
                        break;
                    }
                    assert!(
                        Instant::now() < until + Duration::from_secs(120),
                        "keyed write {k} never acknowledged"
                    );
                    c = client();
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }));
    }
    // Reads (the replica's, unless it is down).
    for _ in 0..2 {
        let (t, book) = (t.clone(), book.clone());
        load.push(tokio::spawn(async move {
            let mut c = client();
            while Instant::now() < until {
                let done = ok(&c, &format!("SELECT COUNT(*) FROM {t}"), None).await;
                note(&book, "read", done);
                if !done {
                    c = client();
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }));
    }

    let victims = ["envoy", "shim", "shim-replica", "mysql", "mysql-replica"];
    let mut faults = Vec::new();
    let mut next = started + every;
    let mut i = 0;
    while next + every / 2 < until {
        tokio::time::sleep_until(next.into()).await;
        let victim = victims[i % victims.len()];
        let killed = Instant::now();
        let restart = tokio::task::spawn_blocking(move || kill_and_restart(victim))
            .await
            .expect("kill and restart");
        faults.push((victim, killed, restart));
        i += 1;
        next += every;
    }
    for l in load {
        l.await.expect("a load task");
    }

    // Recovery, per kind: from the kill to the first success after the last failure
    // that followed it (before the next fault); none failed: unaffected.
    let book = book.lock().unwrap();
    let mut lines = Vec::new();
    for (victim, killed, restart) in &faults {
        let window = *killed + every;
        let mut per_kind = Vec::new();
        for (kind, seen) in book.iter() {
            let in_window = |t: &&Instant| **t >= *killed && **t < window;
            let failed = seen.failures.iter().filter(in_window).count();
            let Some(last_failure) = seen.failures.iter().filter(in_window).max() else {
                per_kind.push(format!("{kind}: none failed"));
                continue;
            };
            let back = seen
                .successes
                .iter()
                .find(|s| *s > last_failure)
                .map(|s| s.saturating_duration_since(*killed));
            let back = back.unwrap_or_else(|| panic!("no {kind} succeeded after {victim}'s kill"));
            assert!(back < every, "{victim}: {kind} not back within {every:?}");
            per_kind.push(format!("{kind}: {failed} failed, back after {back:.2?}"));
        }
        lines.push(format!(
            "kill -9 {victim} (restarted in {restart:.2?}): {}",
            per_kind.join("; ")
        ));
    }
    let rows: BTreeMap<String, u64> =
        mariadb_root(&format!("SELECT k, COUNT(*) FROM {t} GROUP BY k"))
            .lines()
            .filter_map(|l| l.split_once('\t'))
            .map(|(k, n)| (k.to_owned(), n.parse().expect("a count")))
            .collect();
    let plain = acked_plain.lock().unwrap();
    let keyed = acked_keyed.lock().unwrap();
    for k in plain.iter().chain(keyed.iter()) {
        assert_eq!(
            rows.get(k),
            Some(&1),
            "acknowledged {k} is in the table once"
        );
    }
    let unacked = rows.keys().filter(|k| k.starts_with("plain-")).count() - plain.len();
    for l in &lines {
        eprintln!("{l}");
    }
    for (kind, seen) in book.iter() {
        eprintln!(
            "{kind}: {} ok, {} failed",
            seen.successes.len(),
            seen.failures.len()
        );
    }
    eprintln!(
        "{minutes} min, {} faults: {} plain writes acknowledged (each once), {unacked} applied without an answer; \
         {} keyed writes acknowledged, each applied exactly once",
        faults.len(),
        plain.len(),
        keyed.len()
    );
}
