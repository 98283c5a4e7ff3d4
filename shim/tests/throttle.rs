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

#[tokio::test]
async fn guesses_at_one_user_are_throttled_and_its_owner_still_gets_in() {
    let Some(db) = Db::from_env() else {
        eprintln!("skipped: FERRY_TEST_MYSQL_SOCKET or FERRY_TEST_MYSQL_PORT not set");
        return;
    };
    let _turn = ONE_AT_A_TIME.lock().await;
    let shim = start_shim(
        &db,
        "throttle-user",
        &[
            ("FERRY_AUTH_THROTTLE_USER_FAILURES", "5"),
            ("FERRY_AUTH_THROTTLE_ADDR_FAILURES", "0"),
            ("FERRY_AUTH_THROTTLE_HALF_LIFE_SECS", "2"),
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

    // A wrong password twice: MySQL is asked once (the second is the negative cache).
    let before = aborted_connects(&db).await;
    for _ in 0..2 {
        assert_eq!(
            login(port, &db.user, "the-same-wrong", "10.9.0.1")
                .await
                .status,
            401
        );
    }
    assert_eq!(
        aborted_connects(&db).await - before,
        1,
        "one handshake for one wrong password"
    );

    // A burst of different wrong passwords from 10.9.0.1: the user's score reaches 5
    // (2 so far), then 429 with Retry-After, and MySQL sees no more handshakes.
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
    // Threshold 5, 2 failures already: 3 more reach MySQL (a 4th when the fast
    // half-life of this test has decayed the score meanwhile), then every one waits.
    let refused_by_mysql = statuses.iter().filter(|s| **s == 401).count();
    let throttled = statuses.iter().filter(|s| **s == 429).count();
    assert!((3..=4).contains(&refused_by_mysql), "{statuses:?}");
    assert_eq!(throttled, guesses - refused_by_mysql, "{statuses:?}");
    assert!(
        statuses[refused_by_mysql..].iter().all(|s| *s == 429),
        "{statuses:?}"
    );
    // MariaDB's own counter rose by at least those (others may count there too).
    assert!(aborted_connects(&db).await - aborted_before >= refused_by_mysql as u64);
    let retry_after = retry_after.expect("a Retry-After");
    assert!((1..=60).contains(&retry_after), "{retry_after}");

    // During the burst the owner is served at once: its credential's pool is open ...
    let g = login(port, &db.user, &db.password, "10.9.0.2").await;
    assert_eq!(g.status, 200);
    assert!(g.took < Duration::from_millis(200), "{:?}", g.took);
    // ... and once that pool has closed (idle), from the address it logged in from;
    // a new address waits (what a shared NAT address would cost).
    tokio::time::sleep(Duration::from_secs(4)).await;
    let g = login(port, &db.user, &db.password, "10.9.0.3").await;
    assert_eq!(
        g.status, 429,
        "a new address while the user name is throttled"
    );
    let g = login(port, &db.user, &db.password, "10.9.0.2").await;
    assert_eq!(g.status, 200, "the owner's address");

    // The scores decay: after the Retry-After, a guess reaches MySQL again (401).
    let wait = login(port, &db.user, "one-more", "10.9.0.1").await;
    let secs = wait.retry_after.unwrap_or(1);
    tokio::time::sleep(Duration::from_secs(secs + 1)).await;
    assert_eq!(
        login(port, &db.user, "after-the-wait", "10.9.0.1")
            .await
            .status,
        401
    );
    // And the right password from the guesser's address works again too.
    assert_eq!(
        login(port, &db.user, &db.password, "10.9.0.1").await.status,
        200
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
