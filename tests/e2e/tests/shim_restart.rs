//! A shim killed with SIGKILL mid-transaction and restarted: the session's
//! next statement fails with `aborted` ("transaction lost, rolled back"),
//! nothing of the transaction is applied, and the next transaction works; a
//! session's variables (carried in the session, no pin) survive it.
//! It kills the stack's shim, so scripts/e2e.sh runs it alone, after the
//! other tests (`--ignored`).
mod common;
use common::*;
use ferry_proto::vitess::vtrpc::Code;
use std::time::{Duration, Instant};

#[tokio::test]
#[ignore = "kills the stack's shim: run alone (scripts/e2e.sh does)"]
async fn a_transaction_on_a_restarted_shim_is_lost_explicitly() {
    let t = unique("restart");
    let r = execute(
        Way::ConnectJsonH2,
        &format!("CREATE TABLE {t} (id INT PRIMARY KEY)"),
    )
    .await;
    assert!(r.error.is_none(), "{:?}", r.error);
    let r = execute_in(Way::ConnectJsonH2, None, "BEGIN").await;
    let s = r.session.expect("session");
    let r = execute_in(
        Way::ConnectJsonH2,
        Some(&s),
        &format!("INSERT INTO {t} VALUES (1)"),
    )
    .await;
    assert!(r.error.is_none(), "{:?}", r.error);
    let s = r.session.expect("session");

    // A session whose variables travel in the session itself (no pin).
    let r = execute(
        Way::ConnectJsonH2,
        "SET @kept = 'across', time_zone = '+02:00'",
    )
    .await;
    assert!(r.error.is_none(), "{:?}", r.error);
    let stateful = r.session.expect("session");

    let run_dir = std::env::var("FERRY_RUN_DIR").expect("FERRY_RUN_DIR");
    let pid = std::fs::read_to_string(format!("{run_dir}/pids/shim.pid")).expect("shim pid");
    let killed = std::process::Command::new("kill")
        .args(["-9", pid.trim()])
        .status()
        .expect("kill");
    assert!(killed.success());
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let up = std::process::Command::new(format!("{root}/scripts/stack.sh"))
        .arg("up")
        .output()
        .expect("stack.sh up");
    assert!(
        up.status.success(),
        "{}",
        String::from_utf8_lossy(&up.stderr)
    );
    // Wait for Envoy to see the new shim healthy.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let a = ferry_e2e::connect::ConnectClient::http2(&cfg())
            .execute_json("SELECT 1")
            .await;
        if a.status == 200 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the restarted shim never answered: {}",
            a.status
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // The restarted shim serves the session's variables: they were never its to lose.
    let r = execute_in(Way::GrpcH2, Some(&stateful), "SELECT @kept, @@time_zone").await;
    assert!(r.error.is_none(), "{:?}", r.error);
    let row = ferry_e2e::rows::cells(&r.result.expect("a result").rows[0]);
    assert_eq!(
        (row[0].as_deref(), row[1].as_deref()),
        (Some(&b"across"[..]), Some(&b"+02:00"[..]))
    );

    let r = execute_in(
        Way::ConnectJsonH2,
        Some(&s),
        &format!("INSERT INTO {t} VALUES (2)"),
    )
    .await;
    let e = r
        .error
        .expect("a statement of the lost transaction must fail");
    assert_eq!(e.code(), Code::Aborted, "{}", e.message);
    assert!(
        e.message.starts_with("transaction lost, rolled back: ") && e.message.contains("restarted"),
        "{}",
        e.message
    );
    assert_eq!(count_rows(&t), 0, "nothing half-applied");
    let s = r.session.expect("session");
    let r = execute_in(Way::ConnectJsonH2, Some(&s), "ROLLBACK").await;
    assert!(r.error.is_none(), "{:?}", r.error);
    let s = r.session.expect("session");
    let r = execute_in(Way::ConnectJsonH2, Some(&s), "BEGIN").await;
    let s = r.session.expect("session");
    let r = execute_in(
        Way::ConnectJsonH2,
        Some(&s),
        &format!("INSERT INTO {t} VALUES (3)"),
    )
    .await;
    let s = r.session.expect("session");
    let r = execute_in(Way::ConnectJsonH2, Some(&s), "COMMIT").await;
    assert!(r.error.is_none(), "{:?}", r.error);
    assert_eq!(count_rows(&t), 1, "the next transaction works");
}
