//! Pool safety: a statement that leaves a transaction or session state pins
//! its connection to its session, and a request of another session (or one
//! that dropped its session) never inherits it. Checked from outside Ferry
//! with the mariadb client: rows are committed and visible.
mod common;
use common::*;

#[tokio::test]
async fn begin_then_insert_does_not_run_in_a_leftover_transaction() {
    let t = unique("tx");
    let r = execute(
        Way::ConnectJsonH2,
        &format!("CREATE TABLE {t} (id INT PRIMARY KEY) ENGINE=InnoDB"),
    )
    .await;
    assert!(r.error.is_none(), "{:?}", r.error);
    // (statement, opens a transaction, leaves autocommit on)
    let starters = [
        ("BEGIN", true, true),
        ("begin work", true, true),
        ("  /* leading comment */ START TRANSACTION", true, true),
        ("START TRANSACTION READ ONLY", true, true),
        ("SET autocommit = 0", false, false),
        ("set @@autocommit=0", false, false),
        ("SELECT 1; BEGIN", true, true),
    ];
    let mut committed = 0;
    // Two rounds, so the statements land on different pooled connections; the
    // first round's sessions are closed, the second's abandoned (their pins
    // idle out).
    for round in 0..2 {
        for (i, (starter, in_txn, autocommit)) in starters.iter().enumerate() {
            let way = ALL_WAYS[(round + i) % ALL_WAYS.len()];
            let r = execute(way, starter).await;
            assert!(r.error.is_none(), "{starter:?} ({way:?}): {:?}", r.error);
            let session = r.session.expect("a session");
            let v = session.vitess_session.clone().expect("vitess session");
            assert_eq!(
                (v.in_transaction, v.autocommit),
                (*in_txn, *autocommit),
                "{starter:?} ({way:?})"
            );
            assert!(!session.signature.is_empty(), "sealed");
            // A request without that session: a pooled connection, autocommit.
            let id = round * 100 + i;
            let r = execute(way, &format!("INSERT INTO {t} VALUES ({id})")).await;
            assert!(r.error.is_none(), "insert after {starter:?}: {:?}", r.error);
            let v = r.session.and_then(|s| s.vitess_session).expect("session");
            assert!(!v.in_transaction && v.autocommit, "{starter:?}");
            committed += 1;
            let seen: usize = mariadb_root(&format!("SELECT COUNT(*) FROM {t}"))
                .parse()
                .unwrap();
            assert_eq!(
                seen, committed,
                "the insert after {starter:?} is committed and visible to others"
            );
            if round == 0 {
                close_session(&session).await;
            }
        }
    }
}

#[tokio::test]
async fn session_state_stays_with_its_session() {
    let t = unique("tmp");
    let mut sessions = Vec::new();
    for stmt in [
        "SET @v = 42".to_string(),
        "SET NAMES latin1".to_string(),
        "SET SESSION sql_mode = ''".to_string(),
        "USE information_schema".to_string(),
        format!("CREATE TEMPORARY TABLE {t} (id INT)"),
    ] {
        let r = execute(Way::ConnectProtoH2, &stmt).await;
        assert!(r.error.is_none(), "{stmt:?}: {:?}", r.error);
        sessions.push(r.session.expect("session"));
    }
    for _ in 0..20 {
        let r = execute(Way::ConnectProtoH2, "SELECT @v, DATABASE(), @@autocommit").await;
        let qr = r.result.expect("result");
        let row = ferry_e2e::rows::cells(&qr.rows[0]);
        assert_eq!(row[0], None, "no user variable leaks from another session");
        assert_eq!(
            row[1].as_deref(),
            Some(cfg().database.as_bytes()),
            "default database"
        );
        assert_eq!(row[2].as_deref(), Some(&b"1"[..]), "autocommit on");
        let r = execute(Way::ConnectProtoH2, &format!("SELECT * FROM {t}")).await;
        assert!(
            r.error.is_some(),
            "another session's temporary table is not visible"
        );
    }
    // Their own sessions still have them.
    let r = execute_in(Way::ConnectProtoH2, Some(&sessions[0]), "SELECT @v").await;
    let qr = r.result.expect("result");
    assert_eq!(
        ferry_e2e::rows::cells(&qr.rows[0])[0].as_deref(),
        Some(&b"42"[..])
    );
    let r = execute_in(
        Way::ConnectProtoH2,
        Some(&sessions[4]),
        &format!("SELECT COUNT(*) FROM {t}"),
    )
    .await;
    assert!(r.error.is_none(), "{:?}", r.error);
    for s in &sessions {
        close_session(s).await;
    }
}
