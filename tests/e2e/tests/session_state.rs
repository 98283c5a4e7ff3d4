//! User variables and session settings travel in the sealed session, not on a held
//! connection (shim/src/sessions/state.rs): many short-lived sessions that SET things
//! never lock each other out, each sees only its own values, nothing pins, and a
//! tampered value is refused like any tampered session. The pair gateway's test
//! (affinity.rs `session_variables_need_no_affinity`) serves one session from both
//! shims.
mod common;
use common::*;
use ferry_proto::psdb::v1alpha1::{ExecuteResponse, Session};
use ferry_proto::vitess::vtrpc::Code;

fn ok(r: &ExecuteResponse, what: &str) -> Session {
    assert!(r.error.is_none(), "{what}: {:?}", r.error);
    r.session.clone().expect("a session")
}

fn row(r: &ExecuteResponse) -> Vec<Option<String>> {
    let qr = r.result.as_ref().expect("a result");
    ferry_e2e::rows::cells(&qr.rows[0])
        .into_iter()
        .map(|c| c.map(|b| String::from_utf8_lossy(&b).into_owned()))
        .collect()
}

/// One serverless-shaped client: its own variables and settings, then reads of them.
async fn client(i: usize) {
    let zone = format!("+0{}:00", i % 10);
    let mode = if i.is_multiple_of(2) { "ANSI" } else { "" };
    let s = ok(
        &execute_in(Way::ConnectJsonH2, None, &format!("SET @x = {i}")).await,
        "SET @x",
    );
    let s = ok(
        &execute_in(
            Way::ConnectProtoH2,
            Some(&s),
            &format!("SET time_zone = '{zone}'"),
        )
        .await,
        "SET time_zone",
    );
    let s = ok(
        &execute_in(Way::GrpcH3, Some(&s), &format!("SET sql_mode = '{mode}'")).await,
        "SET sql_mode",
    );
    let s = ok(
        &execute_in(
            Way::ConnectJsonH3,
            Some(&s),
            "SET NAMES utf8mb4 COLLATE utf8mb4_bin",
        )
        .await,
        "SET NAMES",
    );
    assert!(
        !pinned(&s),
        "client {i}: its state travels, no connection is held"
    );
    for way in [Way::ConnectJsonH2, Way::GrpcH2] {
        let r = execute_in(
            way,
            Some(&s),
            "SELECT @x, @@time_zone, @@sql_mode, @@collation_connection",
        )
        .await;
        ok(&r, "SELECT");
        let expected_mode = if mode.is_empty() {
            String::new()
        } else {
            // ANSI expands to its parts on both servers; it starts with REAL_AS_FLOAT.
            "REAL_AS_FLOAT".into()
        };
        let got = row(&r);
        assert_eq!(
            got[0].as_deref(),
            Some(i.to_string().as_str()),
            "client {i}"
        );
        assert_eq!(got[1].as_deref(), Some(zone.as_str()), "client {i}");
        assert!(
            got[2]
                .as_deref()
                .unwrap_or_default()
                .starts_with(&expected_mode),
            "client {i}: {:?}",
            got[2]
        );
        assert_eq!(got[3].as_deref(), Some("utf8mb4_bin"), "client {i}");
    }
}

/// Whether the shim sealed the session as holding a connection (the flags byte of
/// the signature, shim/src/sessions/seal.rs; the filter reads it for affinity).
fn pinned(s: &Session) -> bool {
    s.signature.get(53).is_some_and(|flags| flags & 1 != 0)
}

#[tokio::test]
async fn sessions_that_set_things_never_pin_or_see_each_other() {
    for i in 0..40 {
        client(i).await;
    }
    let all: Vec<_> = (100..120).map(|i| tokio::spawn(client(i))).collect();
    for c in all {
        c.await.expect("a client");
    }
    // MariaDB saw no more connections than the pools hold (FERRY_POOL_MAX in e2e.sh).
    let threads: usize = mariadb_root("SHOW STATUS LIKE 'Threads_connected'")
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .expect("Threads_connected");
    let pool_max: usize = std::env::var("FERRY_POOL_MAX")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(16);
    assert!(
        threads <= pool_max + 8,
        "{threads} connections to MariaDB (pool {pool_max})"
    );
    // And a session without state sees the server's defaults.
    let r = execute(Way::ConnectJsonH2, "SELECT @x, @@time_zone").await;
    assert_eq!(row(&r), [None, Some("SYSTEM".to_owned())]);
}

/// Each value read back in a later request (the state applied to a pooled
/// connection) is what the same read gives on the connection that set it (a
/// transaction's pin), type and bytes.
#[tokio::test]
async fn user_variables_keep_their_type_and_bytes() {
    let cases = [
        "-9223372036854775808",
        "9223372036854775807",
        "18446744073709551615",
        "-1",
        "123.4500",
        "-0.000000000000000000000000000001",
        "0.1e0 + 0.2e0",
        "1.7976931348623157e308",
        "4.9e-324",
        "'héllo € 😀 日本'",
        "'it''s \\\\ \"q\" %_'",
        "_binary X'00FF7F80C3A9'",
        "(SELECT GROUP_CONCAT(CHAR(n) SEPARATOR '') FROM (SELECT 0 AS n UNION SELECT 1 UNION SELECT 39 UNION SELECT 92 UNION SELECT 127) AS t)",
        "NULL",
        "CURRENT_DATE",
        "CAST('2024-02-29 12:34:56.789' AS DATETIME(3))",
    ];
    for expr in cases {
        let set = format!("SET @v = {expr}");
        // On the connection that set it.
        let pin = ok(&execute(Way::ConnectProtoH2, "BEGIN").await, "BEGIN");
        let pin = ok(
            &execute_in(Way::ConnectProtoH2, Some(&pin), &set).await,
            &set,
        );
        let there = execute_in(Way::ConnectProtoH2, Some(&pin), "SELECT @v").await;
        ok(&there, "SELECT @v (pinned)");
        execute_in(Way::ConnectProtoH2, Some(&pin), "ROLLBACK").await;
        // Travelling in the session, on whichever pooled connection.
        let s = ok(&execute(Way::ConnectJsonH2, &set).await, &set);
        let here = execute_in(Way::GrpcH2, Some(&s), "SELECT @v").await;
        ok(&here, "SELECT @v");
        let (a, b) = (there.result.unwrap(), here.result.unwrap());
        assert_eq!(
            (a.fields[0].r#type, &a.rows),
            (b.fields[0].r#type, &b.rows),
            "{expr}"
        );
    }
}

#[tokio::test]
async fn assignments_in_selects_travel_too() {
    let s = ok(
        &execute(Way::ConnectJsonH2, "SELECT @v := 1").await,
        "SELECT @v :=",
    );
    let s = ok(
        &execute_in(Way::ConnectJsonH2, Some(&s), "SELECT 'five' INTO @w").await,
        "INTO @w",
    );
    let r = execute_in(Way::ConnectProtoH3, Some(&s), "SELECT @v, @w").await;
    ok(&r, "SELECT @v, @w");
    assert_eq!(row(&r), [Some("1".to_owned()), Some("five".to_owned())]);
}

#[tokio::test]
async fn a_procedure_s_out_parameters_travel_too() {
    let p = unique("out_proc");
    let r = execute(
        Way::ConnectJsonH2,
        &format!("CREATE PROCEDURE {p}(IN i INT, OUT o INT, INOUT io VARCHAR(10)) BEGIN SET o = i * 2; SET io = CONCAT(io, '!'); END"),
    )
    .await;
    ok(&r, "CREATE PROCEDURE");
    let s = ok(
        &execute(Way::ConnectJsonH2, "SET @io = 'hi'").await,
        "SET @io",
    );
    let s = ok(
        &execute_in(
            Way::ConnectJsonH2,
            Some(&s),
            &format!("CALL {p}(21, @o, @io)"),
        )
        .await,
        "CALL",
    );
    assert!(
        !pinned(&s),
        "a CALL that leaves no transaction holds no connection"
    );
    let r = execute_in(Way::ConnectProtoH2, Some(&s), "SELECT @o, @io").await;
    ok(&r, "SELECT @o, @io");
    assert_eq!(row(&r), [Some("42".to_owned()), Some("hi!".to_owned())]);
    ok(
        &execute(Way::ConnectJsonH2, &format!("DROP PROCEDURE {p}")).await,
        "DROP PROCEDURE",
    );
}

#[tokio::test]
async fn tampered_variables_are_refused() {
    let s = ok(
        &execute(
            Way::ConnectJsonH2,
            "SET @role = 'reader', time_zone = '+01:00'",
        )
        .await,
        "SET",
    );
    let mut changed = s.clone();
    let v = changed.vitess_session.as_mut().expect("vitess");
    v.user_defined_variables
        .get_mut("role")
        .expect("the variable travels")
        .value = b"admin".to_vec();
    let mut injected = s.clone();
    injected
        .vitess_session
        .as_mut()
        .expect("vitess")
        .system_variables
        .insert("foreign_key_checks".into(), "0".into());
    for (what, session) in [("changed", changed), ("injected", injected)] {
        let r = execute_in(Way::ConnectJsonH2, Some(&session), "SELECT @role").await;
        let e = r.error.unwrap_or_else(|| panic!("{what}: refused"));
        assert_eq!(e.code(), Code::InvalidArgument, "{what}: {}", e.message);
        assert!(e.message.starts_with("invalid session"), "{}", e.message);
        assert!(r.result.is_none(), "{what}: never executed");
    }
}

#[tokio::test]
async fn a_session_carries_bounded_state() {
    let s = ok(&execute(Way::ConnectJsonH2, "SET @small = 1").await, "SET");
    let r = execute_in(
        Way::ConnectJsonH2,
        Some(&s),
        "SET @big = REPEAT('x', 100000)",
    )
    .await;
    let e = r.error.as_ref().expect("too much state is refused");
    assert_eq!(e.code(), Code::ResourceExhausted);
    assert!(
        e.message.contains("FERRY_SESSION_STATE_MAX_BYTES"),
        "{}",
        e.message
    );
    // The session goes on with what it had.
    let s = r.session.expect("a session");
    let r = execute_in(Way::ConnectJsonH2, Some(&s), "SELECT @small, @big").await;
    assert_eq!(row(&r), [Some("1".to_owned()), None]);
}

/// Without a pin, `SELECT ROW_COUNT()` and `SELECT FOUND_ROWS()` give the session's own
/// counts (kept in the session, as vtgate keeps them), typed as MySQL types them.
#[tokio::test]
async fn row_count_and_found_rows_follow_a_session_without_a_pin() {
    let t = unique("counts");
    execute(
        Way::ConnectJsonH2,
        &format!("CREATE TABLE {t} (id INT PRIMARY KEY)"),
    )
    .await;
    let s = ok(
        &execute(
            Way::ConnectJsonH2,
            &format!("INSERT INTO {t} VALUES (1), (2), (3), (4), (5)"),
        )
        .await,
        "INSERT",
    );
    assert!(!pinned(&s));
    // Another session's statements in between, on the same pool.
    for _ in 0..5 {
        execute(Way::ConnectJsonH2, "SELECT 1 UNION SELECT 2").await;
    }
    let r = execute_in(Way::GrpcH2, Some(&s), "SELECT ROW_COUNT() AS n").await;
    let s = ok(&r, "ROW_COUNT()");
    assert_eq!(row(&r), [Some("5".to_owned())]);
    let field = r.result.as_ref().unwrap().fields[0].clone();
    assert_eq!(field.name, "n");
    let s = ok(
        &execute_in(
            Way::ConnectJsonH2,
            Some(&s),
            &format!("SELECT id FROM {t} LIMIT 2"),
        )
        .await,
        "SELECT",
    );
    let r = execute_in(Way::ConnectJsonH2, Some(&s), "SELECT FOUND_ROWS()").await;
    let s = ok(&r, "FOUND_ROWS()");
    assert_eq!(row(&r), [Some("2".to_owned())]);
    let s = ok(
        &execute_in(
            Way::ConnectProtoH3,
            Some(&s),
            &format!("SELECT SQL_CALC_FOUND_ROWS id FROM {t} LIMIT 2"),
        )
        .await,
        "SQL_CALC_FOUND_ROWS",
    );
    let r = execute_in(Way::ConnectJsonH2, Some(&s), "SELECT FOUND_ROWS()").await;
    ok(&r, "FOUND_ROWS()");
    assert_eq!(row(&r), [Some("5".to_owned())]);
    // The same read on a pinned connection, in MySQL: the same type.
    let pin = ok(&execute(Way::ConnectJsonH2, "BEGIN").await, "BEGIN");
    let there = execute_in(Way::ConnectJsonH2, Some(&pin), "SELECT ROW_COUNT() AS n").await;
    execute_in(Way::ConnectJsonH2, Some(&pin), "ROLLBACK").await;
    let theirs = there.result.expect("a result").fields[0].clone();
    assert_eq!((field.r#type, field.flags), (theirs.r#type, theirs.flags));
}

/// `SET autocommit = 0` travels too: it holds nothing by itself; each statement then
/// opens a transaction, which pins until COMMIT or ROLLBACK, as on MySQL.
#[tokio::test]
async fn autocommit_off_holds_a_connection_only_inside_a_transaction() {
    let t = unique("ac");
    execute(
        Way::ConnectJsonH2,
        &format!("CREATE TABLE {t} (id INT PRIMARY KEY) ENGINE=InnoDB"),
    )
    .await;
    let s = ok(
        &execute(Way::ConnectJsonH2, "SET autocommit = 0").await,
        "SET autocommit",
    );
    let v = s.vitess_session.clone().expect("vitess");
    assert!(!pinned(&s) && !v.autocommit && !v.in_transaction);
    let s = ok(
        &execute_in(
            Way::GrpcH2,
            Some(&s),
            &format!("INSERT INTO {t} VALUES (1)"),
        )
        .await,
        "INSERT",
    );
    assert!(pinned(&s), "the insert opened a transaction");
    assert_eq!(count_rows(&t), 0, "not committed yet");
    let s = ok(
        &execute_in(Way::ConnectJsonH2, Some(&s), "COMMIT").await,
        "COMMIT",
    );
    assert!(!pinned(&s), "nothing held between transactions");
    assert_eq!(count_rows(&t), 1);
    let s = ok(
        &execute_in(
            Way::ConnectProtoH3,
            Some(&s),
            &format!("INSERT INTO {t} VALUES (2)"),
        )
        .await,
        "INSERT",
    );
    assert!(pinned(&s), "still autocommit off: a transaction again");
    let s = ok(
        &execute_in(Way::ConnectJsonH2, Some(&s), "ROLLBACK").await,
        "ROLLBACK",
    );
    assert_eq!(count_rows(&t), 1, "rolled back");
    let r = execute_in(Way::ConnectJsonH2, Some(&s), "SELECT @@autocommit").await;
    assert_eq!(row(&r), [Some("0".to_owned())]);
}
