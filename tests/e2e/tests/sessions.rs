//! Interactive transactions and session state across requests, sealed
//! sessions, and explicit failure when a pinned transaction is lost.
//! The stack (scripts/e2e.sh) runs with FERRY_TXN_IDLE_SECS=3; its second
//! gateway (FERRY_E2E_TCP_PORT) seals sessions that expire after 2 s.
mod common;
use base64::Engine;
use common::*;
use ferry_e2e::config::basic_auth;
use ferry_e2e::connect::{ConnectClient, EXECUTE};
use ferry_proto::psdb::v1alpha1::{ExecuteResponse, Session};
use ferry_proto::vitess::vtrpc::Code;

fn ok(r: &ExecuteResponse, what: &str) -> Session {
    assert!(r.error.is_none(), "{what}: {:?}", r.error);
    r.session.clone().expect("a session")
}

fn in_txn(s: &Session) -> bool {
    s.vitess_session.as_ref().is_some_and(|v| v.in_transaction)
}

async fn table() -> String {
    let t = unique("sess");
    let r = execute(
        Way::ConnectJsonH2,
        &format!("CREATE TABLE {t} (id INT PRIMARY KEY) ENGINE=InnoDB"),
    )
    .await;
    assert!(r.error.is_none(), "{:?}", r.error);
    t
}

#[tokio::test]
async fn a_transaction_spans_requests_over_every_way() {
    for way in ALL_WAYS {
        let t = table().await;
        let s = ok(&execute_in(*way, None, "BEGIN").await, "BEGIN");
        assert!(in_txn(&s), "{way:?}: BEGIN reports inTransaction");
        let s = ok(
            &execute_in(*way, Some(&s), &format!("INSERT INTO {t} VALUES (1), (2)")).await,
            "INSERT",
        );
        assert!(in_txn(&s));
        assert_eq!(
            count_rows(&t),
            0,
            "{way:?}: uncommitted rows are invisible to others"
        );
        // Another session through the gateway does not see them either.
        let r = execute(*way, &format!("SELECT COUNT(*) FROM {t}")).await;
        let qr = r.result.expect("result");
        assert_eq!(
            ferry_e2e::rows::cells(&qr.rows[0])[0].as_deref(),
            Some(&b"0"[..])
        );
        // Its own session does.
        let r = execute_in(*way, Some(&s), &format!("SELECT COUNT(*) FROM {t}")).await;
        let s = ok(&r, "SELECT in the transaction");
        let qr = r.result.expect("result");
        assert_eq!(
            ferry_e2e::rows::cells(&qr.rows[0])[0].as_deref(),
            Some(&b"2"[..])
        );
        let s = ok(&execute_in(*way, Some(&s), "COMMIT").await, "COMMIT");
        assert!(!in_txn(&s), "{way:?}: COMMIT ends the transaction");
        assert_eq!(count_rows(&t), 2, "{way:?}: visible after COMMIT");

        // ROLLBACK throws the work away.
        let s = ok(
            &execute_in(*way, Some(&s), "START TRANSACTION").await,
            "START",
        );
        let s = ok(
            &execute_in(*way, Some(&s), &format!("INSERT INTO {t} VALUES (3)")).await,
            "INSERT",
        );
        let s = ok(&execute_in(*way, Some(&s), "ROLLBACK").await, "ROLLBACK");
        assert!(!in_txn(&s));
        assert_eq!(count_rows(&t), 2, "{way:?}: rolled back");
    }
}

#[tokio::test]
async fn last_insert_id_and_session_state_follow_the_session() {
    let t = unique("ai");
    execute(
        Way::ConnectJsonH2,
        &format!("CREATE TABLE {t} (id INT AUTO_INCREMENT PRIMARY KEY, v INT)"),
    )
    .await;
    let s = ok(
        &execute_in(Way::ConnectJsonH2, None, "SET @x = 7").await,
        "SET",
    );
    let s = ok(
        &execute_in(Way::GrpcH3, Some(&s), "USE information_schema").await,
        "USE",
    );
    let r = execute_in(Way::ConnectProtoH3, Some(&s), "SELECT @x, DATABASE()").await;
    let s = ok(&r, "SELECT");
    let row = ferry_e2e::rows::cells(&r.result.expect("result").rows[0]);
    assert_eq!(row[0].as_deref(), Some(&b"7"[..]));
    assert_eq!(row[1].as_deref(), Some(&b"information_schema"[..]));
    let s = ok(
        &execute_in(
            Way::ConnectJsonH2,
            Some(&s),
            &format!("INSERT INTO ferry.{t} (v) VALUES (1), (2)"),
        )
        .await,
        "INSERT",
    );
    let v = s.vitess_session.clone().expect("vitess");
    assert_eq!(
        (v.last_insert_id, v.row_count),
        (1, 2),
        "as MySQL reports them"
    );
    let r = execute_in(
        Way::GrpcH2,
        Some(&s),
        "SELECT LAST_INSERT_ID(), ROW_COUNT()",
    )
    .await;
    let s = ok(&r, "LAST_INSERT_ID");
    let row = ferry_e2e::rows::cells(&r.result.expect("result").rows[0]);
    assert_eq!(
        row[0].as_deref(),
        Some(&b"1"[..]),
        "on the session's own connection"
    );
    close_session(&s).await;
    // A closed session's state is gone; a new session starts clean.
    let r = execute(Way::ConnectJsonH2, "SELECT @x, DATABASE()").await;
    let row = ferry_e2e::rows::cells(&r.result.expect("result").rows[0]);
    assert_eq!(row[0], None);
    assert_eq!(row[1].as_deref(), Some(cfg().database.as_bytes()));
}

/// Posts an Execute with a hand-made JSON session, as a tampering client would.
async fn execute_json_raw(
    session: serde_json::Value,
    query: &str,
    auth: &str,
) -> serde_json::Value {
    let cfg = cfg();
    let body = serde_json::json!({ "query": query, "session": session }).to_string();
    let a = ConnectClient::http2(&cfg)
        .post(
            EXECUTE,
            &[
                ("content-type", "application/json"),
                ("authorization", auth),
            ],
            body.into_bytes(),
        )
        .await;
    assert_eq!(a.status, 200, "{:?}", String::from_utf8_lossy(&a.body));
    a.json()
}

#[tokio::test]
async fn tampered_forged_borrowed_and_expired_sessions_are_refused() {
    let t = table().await;
    let auth = cfg().basic_auth();
    let begun = execute_json_raw(serde_json::Value::Null, "BEGIN", &auth).await;
    let session = begun["session"].clone();
    assert_eq!(session["vitessSession"]["inTransaction"], true);
    let insert = format!("INSERT INTO {t} VALUES (1)");

    let refused = |v: &serde_json::Value, code: &str, what: &str| {
        assert_eq!(v["error"]["code"], code, "{what}: {v}");
        assert!(v.get("result").is_none(), "{what}: never executed");
        let msg = v["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(msg.contains("session"), "{what}: {msg}");
    };
    // Flip inTransaction.
    let mut s = session.clone();
    s["vitessSession"]["inTransaction"] = false.into();
    refused(
        &execute_json_raw(s, &insert, &auth).await,
        "INVALID_ARGUMENT",
        "tampered flag",
    );
    // Change one bit of the signature.
    let mut sig = base64::engine::general_purpose::STANDARD
        .decode(session["signature"].as_str().expect("signature"))
        .expect("base64");
    sig[10] ^= 1;
    let mut s = session.clone();
    s["signature"] = base64::engine::general_purpose::STANDARD
        .encode(&sig)
        .into();
    refused(
        &execute_json_raw(s, &insert, &auth).await,
        "INVALID_ARGUMENT",
        "tampered signature",
    );
    // Forged from scratch.
    let mut s = session.clone();
    s["signature"] = base64::engine::general_purpose::STANDARD
        .encode([7u8; 85])
        .into();
    refused(
        &execute_json_raw(s, &insert, &auth).await,
        "INVALID_ARGUMENT",
        "forged",
    );
    // Another user's credentials with this session.
    let other = unique("u2");
    mariadb_root(&format!(
        "CREATE USER '{other}'@'localhost' IDENTIFIED BY 'pw-{other}'; \
         GRANT ALL ON `{}`.* TO '{other}'@'localhost'",
        cfg().database
    ));
    let v = execute_json_raw(
        session.clone(),
        &insert,
        &basic_auth(&other, &format!("pw-{other}")),
    )
    .await;
    refused(&v, "PERMISSION_DENIED", "other credentials");
    assert_eq!(count_rows(&t), 0, "nothing ran");
    mariadb_root(&format!("DROP USER '{other}'@'localhost'"));

    // The real session still works after all that.
    let v = execute_json_raw(session.clone(), &insert, &auth).await;
    assert!(v.get("error").is_none(), "{v}");
    let v = execute_json_raw(v["session"].clone(), "COMMIT", &auth).await;
    assert!(v.get("error").is_none(), "{v}");
    assert_eq!(count_rows(&t), 1);

    // Expired: the second gateway's sessions live 2 s.
    let tcp = ConnectClient::http2(&tcp_gateway());
    let post = |body: serde_json::Value| {
        let tcp = tcp.clone();
        let auth = auth.clone();
        async move {
            let a = tcp
                .post(
                    EXECUTE,
                    &[
                        ("content-type", "application/json"),
                        ("authorization", &auth),
                    ],
                    body.to_string().into_bytes(),
                )
                .await;
            a.json()
        }
    };
    let v = post(serde_json::json!({ "query": "SELECT 1" })).await;
    let s = v["session"].clone();
    tokio::time::sleep(std::time::Duration::from_millis(3500)).await;
    let v = post(serde_json::json!({ "query": insert, "session": s })).await;
    refused(&v, "FAILED_PRECONDITION", "expired");
    assert!(v["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .contains("expired"));
    assert_eq!(count_rows(&t), 1, "the expired session ran nothing");
}

#[tokio::test]
async fn an_idle_transaction_is_lost_explicitly_never_silently() {
    let t = table().await;
    let s = ok(
        &execute_in(Way::ConnectJsonH2, None, "BEGIN").await,
        "BEGIN",
    );
    let s = ok(
        &execute_in(
            Way::ConnectJsonH2,
            Some(&s),
            &format!("INSERT INTO {t} VALUES (1)"),
        )
        .await,
        "INSERT",
    );
    // FERRY_TXN_IDLE_SECS=3 in the e2e stack; the sweep runs every second.
    tokio::time::sleep(std::time::Duration::from_secs(5)).await;
    for stmt in [format!("INSERT INTO {t} VALUES (2)"), "COMMIT".to_string()] {
        let r = execute_in(Way::ConnectJsonH2, Some(&s), &stmt).await;
        let e = r
            .error
            .as_ref()
            .unwrap_or_else(|| panic!("{stmt} after the pin was lost must fail"));
        assert_eq!(e.code(), Code::Aborted, "{stmt}: {}", e.message);
        assert!(
            e.message.starts_with("transaction lost, rolled back: ") && e.message.contains("idle"),
            "{}",
            e.message
        );
        assert!(
            in_txn(r.session.as_ref().expect("session")),
            "still marked: nothing autocommits"
        );
    }
    assert_eq!(
        count_rows(&t),
        0,
        "neither the first insert nor a later one was applied"
    );
    // ROLLBACK acknowledges it; then the session works again.
    let s = ok(
        &execute_in(Way::ConnectJsonH2, Some(&s), "ROLLBACK").await,
        "ROLLBACK",
    );
    assert!(!in_txn(&s));
    let s = ok(
        &execute_in(
            Way::ConnectJsonH2,
            Some(&s),
            &format!("INSERT INTO {t} VALUES (3)"),
        )
        .await,
        "INSERT after ROLLBACK",
    );
    assert!(!in_txn(&s));
    assert_eq!(count_rows(&t), 1);
}

#[tokio::test]
async fn concurrent_statements_of_one_transaction_all_run_in_it() {
    let t = table().await;
    let s = ok(
        &execute_in(Way::ConnectJsonH2, None, "BEGIN").await,
        "BEGIN",
    );
    let tasks: Vec<_> = (0..20)
        .map(|i| {
            let s = s.clone();
            let t = t.clone();
            let way = ALL_WAYS[i % ALL_WAYS.len()];
            tokio::spawn(async move {
                execute_in(way, Some(&s), &format!("INSERT INTO {t} VALUES ({i})")).await
            })
        })
        .collect();
    for task in tasks {
        let r = task.await.expect("task");
        let s = ok(&r, "concurrent INSERT");
        assert!(in_txn(&s));
    }
    assert_eq!(count_rows(&t), 0, "all inside the transaction");
    let s = ok(
        &execute_in(Way::ConnectJsonH2, Some(&s), "COMMIT").await,
        "COMMIT",
    );
    assert!(!in_txn(&s));
    assert_eq!(count_rows(&t), 20, "nothing lost");
}

#[tokio::test]
async fn session_fields_the_gateway_does_not_use_come_back_unchanged() {
    let auth = cfg().basic_auth();
    let first = execute_json_raw(serde_json::Value::Null, "SELECT 1", &auth).await;
    let mut session = first["session"].clone();
    let extra = serde_json::json!({
        "targetString": "ferry@primary",
        "DDLStrategy": "vitess",
        "migrationContext": "ctx-1",
        "savepoints": ["a", "b"],
        "queryTimeout": "3000",
        "transactionMode": "SINGLE",
    });
    for (k, v) in extra.as_object().expect("object") {
        session["vitessSession"][k] = v.clone();
    }
    // Connect JSON (protojson both ways).
    let v = execute_json_raw(session.clone(), "SELECT 2", &auth).await;
    assert!(v.get("error").is_none(), "{v}");
    for (k, want) in extra.as_object().expect("object") {
        assert_eq!(&v["session"]["vitessSession"][k], want, "{k} over JSON");
    }
    // Connect proto and gRPC over HTTP/3 (protobuf both ways).
    let s: Session = serde_json::from_value(v["session"].clone()).expect("a Session");
    for way in [Way::ConnectProtoH3, Way::GrpcH2] {
        let r = execute_in(way, Some(&s), "SELECT 3").await;
        let back = ok(&r, "SELECT 3").vitess_session.expect("vitess");
        let sent = s.vitess_session.clone().expect("vitess");
        assert_eq!(back.target_string, sent.target_string, "{way:?}");
        assert_eq!(back.system_variables, sent.system_variables, "{way:?}");
        assert_eq!(back.ddl_strategy, sent.ddl_strategy, "{way:?}");
        assert_eq!(back.migration_context, sent.migration_context, "{way:?}");
        assert_eq!(back.savepoints, sent.savepoints, "{way:?}");
        assert_eq!(back.query_timeout, 3000, "{way:?}");
        assert_eq!(
            back.found_rows, 1,
            "the gateway keeps foundRows: SELECT 3's row"
        );
    }
}

#[tokio::test]
async fn last_insert_id_follows_a_session_without_a_pin() {
    let t = unique("lid");
    execute(
        Way::ConnectJsonH2,
        &format!("CREATE TABLE {t} (id INT AUTO_INCREMENT PRIMARY KEY, v INT)"),
    )
    .await;
    // Two sessions insert; each then asks LAST_INSERT_ID() on whatever pooled
    // connection it gets, several times, interleaved.
    let a = ok(
        &execute_in(
            Way::ConnectJsonH2,
            None,
            &format!("INSERT INTO {t} (v) VALUES (1)"),
        )
        .await,
        "INSERT a",
    );
    let b = ok(
        &execute_in(
            Way::ConnectProtoH2,
            None,
            &format!("INSERT INTO {t} (v) VALUES (2), (3)"),
        )
        .await,
        "INSERT b",
    );
    let (ida, idb) = (
        a.vitess_session.as_ref().expect("vitess").last_insert_id,
        b.vitess_session.as_ref().expect("vitess").last_insert_id,
    );
    assert_ne!(ida, idb);
    for round in 0..6 {
        for (s, want, way) in [(&a, ida, Way::ConnectJsonH2), (&b, idb, Way::GrpcH2)] {
            let r = execute_in(way, Some(s), "SELECT LAST_INSERT_ID()").await;
            ok(&r, "SELECT LAST_INSERT_ID()");
            let row = ferry_e2e::rows::cells(&r.result.expect("result").rows[0]);
            assert_eq!(
                row[0].as_deref(),
                Some(want.to_string().as_bytes()),
                "round {round}: the session's own id, as on a direct connection"
            );
        }
    }
}
