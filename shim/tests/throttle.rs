//! Password guessing against the real shim and MariaDB (throttle/): a burst of wrong
//! passwords is answered 429 past the threshold and MariaDB sees no more handshakes
//! than that; the owner still gets in, at once, from where they logged in before; the
//! scores decay. The client's address is the header Envoy sets (`x-ferry-client-addr`),
//! sent here directly.
mod common;
use common::*;
use http_body_util::BodyExt;
use mysql_async::prelude::Queryable;
use std::time::{Duration, Instant};

const EXECUTE: &str = "/psdb.v1alpha1.Database/Execute";

/// MariaDB's counter is the server's: the tests of this file take turns.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// MariaDB's count of failed connection attempts (wrong passwords among them): the
/// server's, so other clients' count too. Only checked never to rise by more than this
/// shim's own count says.
async fn aborted_connects(db: &Db) -> u64 {
    let mut c = db.direct().await;
    let v: Option<(String, u64)> = c
        .query_first("SHOW GLOBAL STATUS LIKE 'Aborted_connects'")
        .await
        .expect("status");
    v.expect("Aborted_connects").1
}

struct Got {
    status: u16,
    retry_after: Option<u64>,
    took: Duration,
}

async fn login(port: u16, user: &str, password: &str, from: &str) -> Got {
    let mut c = Client::connect(port, user, password).await;
    let req = ferry_proto::psdb::v1alpha1::ExecuteRequest {
        query: "SELECT 1".into(),
        ..Default::default()
    };
    let t0 = Instant::now();
    let resp = c
        .send(
            EXECUTE,
            "application/proto",
            &[("x-ferry-client-addr", from)],
            prost::Message::encode_to_vec(&req),
        )
        .await;
    let status = resp.status().as_u16();
    let retry_after = resp
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok());
    let _ = resp.into_body().collect().await;
    Got {
        status,
        retry_after,
        took: t0.elapsed(),
    }
}

/// The shim's own count of logins it answered without MySQL, for one reason.
async fn throttled(port: u16, reason: &str) -> u64 {
    let mut c = Client::connect(port, "-", "-").await;
    let req = hyper::Request::get("http://shim/metrics")
        .body(http_body_util::Full::new(bytes::Bytes::new()))
        .unwrap();
    let resp = c.h2.send_request(req).await.unwrap();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    let series = format!("ferry_shim_auth_throttled_total{{reason=\"{reason}\"}} ");
    String::from_utf8_lossy(&body)
        .lines()
        .find_map(|l| l.strip_prefix(&series))
        .map_or(0, |v| v.trim().parse().expect("a count"))
}

#[tokio::test]
async fn guesses_at_one_user_are_throttled_and_its_owner_still_gets_in() {
    let Some(db) = Db::from_env() else {
        eprintln!("skipped: FERRY_TEST_MYSQL_SOCKET or FERRY_TEST_MYSQL_PORT not set");
        return;
    };
    let _turn = ONE_AT_A_TIME.lock().await;
    // A half-life long beside the burst, however slow the machine: what this test counts
    // does not depend on timing. Decay has its own test below.
    let shim = start_shim(
        &db,
        "throttle-user",
        &[
            ("FERRY_AUTH_THROTTLE_USER_FAILURES", "5"),
            ("FERRY_AUTH_THROTTLE_ADDR_FAILURES", "0"),
            ("FERRY_AUTH_THROTTLE_HALF_LIFE_SECS", "120"),
            ("FERRY_AUTH_NEGATIVE_CACHE_SECS", "30"),
            ("FERRY_POOL_IDLE_SECS", "1"),
        ],
    )
    .await;
    let port = shim.port;
    // The owner logs in from 10.9.0.2 before the guessing starts.
    assert_eq!(
        login(port, &db.user, &db.password, "10.9.0.2").await.status,
        200
    );

    // A wrong password twice: the second is answered from the negative cache, not MySQL.
    let before = aborted_connects(&db).await;
    for _ in 0..2 {
        assert_eq!(
            login(port, &db.user, "the-same-wrong", "10.9.0.1")
                .await
                .status,
            401
        );
    }
    assert_eq!(throttled(port, "repeated_password").await, 1);
    assert!(aborted_connects(&db).await > before, "MariaDB refused one");

    // A burst of different wrong passwords from 10.9.0.1: the user's score reaches 5
    // (2 so far), then 429 with Retry-After, and MySQL is not asked.
    let aborted_before = aborted_connects(&db).await;
    let mut statuses = Vec::new();
    let mut retry_after = None;
    let guesses = 30;
    for i in 0..guesses {
        let g = login(port, &db.user, &format!("guess-{i}"), "10.9.0.1").await;
        if g.status == 429 {
            retry_after = retry_after.or(g.retry_after);
        }
        statuses.push(g.status);
    }
    // Threshold 5, 2 failures already: 3 more reach MySQL (a 4th only if the burst
    // were slow enough for the score to decay), then every one waits.
    let refused_by_mysql = statuses.iter().filter(|s| **s == 401).count();
    assert!((3..=4).contains(&refused_by_mysql), "{statuses:?}");
    assert!(
        statuses[refused_by_mysql..].iter().all(|s| *s == 429),
        "{statuses:?}"
    );
    assert_eq!(
        throttled(port, "user").await,
        (guesses - refused_by_mysql) as u64,
        "each 429 answered without MySQL"
    );
    // MariaDB's own counter rose by at least those (others may count there too).
    assert!(aborted_connects(&db).await - aborted_before >= refused_by_mysql as u64);
    let retry_after = retry_after.expect("a Retry-After");
    assert!((1..=3600).contains(&retry_after), "{retry_after}");

    // During the burst the owner is served: its credential's pool is open ...
    let g = login(port, &db.user, &db.password, "10.9.0.2").await;
    assert_eq!(g.status, 200);
    assert!(g.took < Duration::from_secs(1), "{:?}", g.took);
    // ... and once that pool has closed (idle), from the address it logged in from;
    // a new address waits (what a shared NAT address would cost).
    tokio::time::sleep(Duration::from_secs(3)).await;
    let g = login(port, &db.user, &db.password, "10.9.0.3").await;
    assert_eq!(
        g.status, 429,
        "a new address while the user name is throttled"
    );
    let g = login(port, &db.user, &db.password, "10.9.0.2").await;
    assert_eq!(g.status, 200, "the owner's address");
}

#[tokio::test]
async fn the_scores_decay() {
    let Some(db) = Db::from_env() else {
        return;
    };
    let _turn = ONE_AT_A_TIME.lock().await;
    let shim = start_shim(
        &db,
        "throttle-decay",
        &[
            ("FERRY_AUTH_THROTTLE_USER_FAILURES", "2"),
            ("FERRY_AUTH_THROTTLE_ADDR_FAILURES", "0"),
            ("FERRY_AUTH_THROTTLE_HALF_LIFE_SECS", "1"),
        ],
    )
    .await;
    let port = shim.port;
    // Guess until the user name is throttled (twice on a fast machine; the score
    // decays between guesses on a slow one).
    let mut wait = None;
    for i in 0..20 {
        let g = login(port, &db.user, &format!("guess-{i}"), "10.9.2.1").await;
        if g.status == 429 {
            wait = g.retry_after;
            break;
        }
        assert_eq!(g.status, 401);
    }
    let wait = wait.expect("a 429 with Retry-After");
    // After the Retry-After the right password gets in, and a guess reaches MySQL again.
    tokio::time::sleep(Duration::from_secs(wait)).await;
    assert_eq!(
        login(port, &db.user, &db.password, "10.9.2.1").await.status,
        200
    );
    assert_eq!(
        login(port, &db.user, "after-the-wait", "10.9.2.1")
            .await
            .status,
        401
    );
}

#[tokio::test]
async fn an_address_guessing_many_user_names_is_throttled() {
    let Some(db) = Db::from_env() else {
        return;
    };
    let _turn = ONE_AT_A_TIME.lock().await;
    let shim = start_shim(
        &db,
        "throttle-addr",
        &[
            ("FERRY_AUTH_THROTTLE_USER_FAILURES", "0"),
            ("FERRY_AUTH_THROTTLE_ADDR_FAILURES", "4"),
            ("FERRY_AUTH_THROTTLE_HALF_LIFE_SECS", "60"),
        ],
    )
    .await;
    let mut statuses = Vec::new();
    for i in 0..10 {
        statuses.push(
            login(shim.port, &format!("nobody_{i}"), "x", "10.9.1.1")
                .await
                .status,
        );
    }
    assert_eq!(statuses, [401, 401, 401, 401, 429, 429, 429, 429, 429, 429]);
    // Another address is not; the right password from there works.
    assert_eq!(
        login(shim.port, &db.user, &db.password, "10.9.1.2")
            .await
            .status,
        200
    );
    // Without the header (no Envoy in front), only the per-user score applies: off here.
    assert_eq!(login(shim.port, "nobody_x", "x", "").await.status, 401);
}
