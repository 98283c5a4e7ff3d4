//! The settings pool (shim/src/sessions/settings_pool.rs): a session's later statements
//! run on a connection that already carries its variables and settings, with no `SET`
//! before them, and no other session ever gets that connection as it is. Alone in its
//! file: it counts MariaDB's SET statements server-wide.
mod common;
use common::*;
use ferry_proto::psdb::v1alpha1::{ExecuteResponse, Session};

fn ok(r: &ExecuteResponse, what: &str) -> Session {
    assert!(r.error.is_none(), "{what}: {:?}", r.error);
    r.session.clone().expect("a session")
}

/// MariaDB's count of SET statements since it started (every connection's).
fn sets() -> u64 {
    mariadb_root("SHOW GLOBAL STATUS LIKE 'Com_set_option'")
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .expect("Com_set_option")
}

#[tokio::test]
async fn a_session_with_state_reuses_a_connection_that_carries_it() {
    let reads = 10;
    let s = ok(
        &execute(Way::ConnectJsonH2, "SET @sp = 'kept', time_zone = '+06:00'").await,
        "SET",
    );
    let before = sets();
    for _ in 0..reads {
        let r = execute_in(Way::ConnectProtoH2, Some(&s), "SELECT @sp, @@time_zone").await;
        ok(&r, "SELECT");
        let row = ferry_e2e::rows::text_rows(r.result.as_ref().expect("a result"));
        assert_eq!(row, [[Some("kept".to_owned()), Some("+06:00".to_owned())]]);
    }
    let set = sets() - before;
    // One SET gives a connection the state (the SET statement's own connection was
    // reset: it assigned); the other reads find it kept. Without the settings pool
    // every read sets it first: `reads` SETs. (The mariadb client adds none.)
    assert!(
        set <= 2,
        "{set} SET statements for {reads} reads of one session"
    );
    // No other session gets that connection as it is.
    for _ in 0..6 {
        let r = execute(Way::ConnectJsonH2, "SELECT @sp, @@time_zone").await;
        ok(&r, "a fresh session");
        let row = ferry_e2e::rows::text_rows(r.result.as_ref().expect("a result"));
        assert_eq!(row[0][0], None, "another session's variable");
        assert_ne!(
            row[0][1].as_deref(),
            Some("+06:00"),
            "another session's setting"
        );
    }
}
