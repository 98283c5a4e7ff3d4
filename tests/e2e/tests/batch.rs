//! ExecuteBatch (`ferry.v1alpha1.Database`, docs/reference/api.md "ExecuteBatch") through
//! the real gateway: Envoy, the filter (every protocol it transcodes), the shim and
//! MariaDB. What was applied is counted in MariaDB itself, as root.
mod common;
use common::*;
use ferry_compress::Encoding;
use ferry_e2e::connect::ConnectClient;
use ferry_e2e::framed::{Protocol, Shape, Transport};
use ferry_proto::ferry::v1alpha1::{
    condition, BatchMode, BatchStatement, Condition, ExecuteBatchRequest, ExecuteBatchResponse,
    IsolationLevel, TransactionOptions,
};
use ferry_proto::vitess::vtrpc::Code;
use prost::Message;
use std::time::{Duration, Instant};

const BATCH: &str = "/ferry.v1alpha1.Database/ExecuteBatch";

fn shape(protocol: Protocol, json: bool, transport: Transport, send: Encoding) -> Shape {
    Shape {
        protocol,
        json,
        transport,
        send,
        accept: None,
    }
}

/// Every protocol and transport the filter serves, and a compressed request.
fn shapes() -> Vec<Shape> {
    use Protocol::{ConnectUnary as C, Grpc as G};
    use Transport::{H2, H3};
    let id = Encoding::Identity;
    vec![
        shape(C, true, H2, id),
        shape(C, false, H2, id),
        shape(G, false, H2, id),
        shape(C, true, H3, id),
        shape(C, false, H3, id),
        shape(G, false, H3, id),
        shape(C, false, H2, Encoding::Zstd),
        shape(G, false, H2, Encoding::Gzip),
    ]
}

fn stmt(query: &str) -> BatchStatement {
    BatchStatement {
        query: query.into(),
        ..Default::default()
    }
}

fn batch(mode: BatchMode, queries: &[&str]) -> ExecuteBatchRequest {
    ExecuteBatchRequest {
        statements: queries.iter().map(|q| stmt(q)).collect(),
        mode: mode as i32,
        ..Default::default()
    }
}

/// Sends `req` the way `shape` says; the decoded answer (HTTP 200 / gRPC OK).
async fn send(shape: Shape, req: &ExecuteBatchRequest) -> ExecuteBatchResponse {
    let message = if shape.json {
        serde_json::to_vec(req).expect("protojson request")
    } else {
        req.encode_to_vec()
    };
    let out = shape.call(&cfg(), BATCH, &message).await;
    assert_eq!(
        out.answer.status,
        200,
        "{shape:?}: {}",
        String::from_utf8_lossy(&out.answer.body)
    );
    // (The HTTP/2 client here does not read trailers; the HTTP/3 one does.)
    if shape.protocol == Protocol::Grpc && shape.transport == Transport::H3 {
        assert_eq!(
            out.answer.grpc_status(),
            Some((0, String::new())),
            "{shape:?}"
        );
    }
    let (_, body) = out.messages.first().expect("one answer message");
    if shape.json {
        serde_json::from_slice(body).expect("protojson ExecuteBatchResponse")
    } else {
        ExecuteBatchResponse::decode(body.as_slice()).expect("ExecuteBatchResponse")
    }
}

/// Connect proto over HTTP/2, with extra headers; the status and the body.
async fn post(req: &ExecuteBatchRequest, extra: &[(&str, &str)]) -> (u16, Vec<u8>) {
    let cfg = cfg();
    let auth = cfg.basic_auth();
    let mut headers = vec![
        ("content-type", "application/proto"),
        ("authorization", auth.as_str()),
    ];
    headers.extend_from_slice(extra);
    let a = ConnectClient::http2(&cfg)
        .post(BATCH, &headers, req.encode_to_vec())
        .await;
    (a.status, a.body.to_vec())
}

async fn proto(req: &ExecuteBatchRequest) -> ExecuteBatchResponse {
    send(
        shape(
            Protocol::ConnectUnary,
            false,
            Transport::H2,
            Encoding::Identity,
        ),
        req,
    )
    .await
}

fn table() -> String {
    let t = unique("batch");
    mariadb_root(&format!(
        "CREATE TABLE {t} (id INT PRIMARY KEY, v VARCHAR(20))"
    ));
    t
}

fn code(e: &Option<ferry_proto::vitess::vtrpc::RpcError>) -> Option<Code> {
    e.as_ref()
        .map(|e| Code::try_from(e.code).expect("a vtrpc code"))
}

#[tokio::test]
async fn a_transaction_batch_is_one_request_over_every_protocol() {
    for shape in shapes() {
        let t = table();
        let inserts: Vec<String> = (1..=5)
            .map(|i| format!("INSERT INTO {t} (id, v) VALUES ({i}, 'v{i}')"))
            .collect();
        let q: Vec<&str> = inserts.iter().map(String::as_str).collect();
        let r = send(shape, &batch(BatchMode::Transaction, &q)).await;
        assert!(r.error.is_none(), "{shape:?}: {:?}", r.error);
        assert_eq!(r.results.len(), 5, "{shape:?}");
        assert!(r
            .results
            .iter()
            .all(|s| s.error.is_none() && s.result.as_ref().is_some_and(|q| q.rows_affected == 1)));
        assert_eq!(count_rows(&t), 5, "{shape:?}: all five committed");
        let s = r.session.expect("a session");
        assert!(!s.vitess_session.expect("vitess session").in_transaction);

        // The third fails (a duplicate key): nothing of the batch is applied.
        let q = [
            format!("INSERT INTO {t} (id, v) VALUES (6, 'a')"),
            format!("UPDATE {t} SET v = 'changed'"),
            format!("INSERT INTO {t} (id, v) VALUES (1, 'dup')"),
            format!("INSERT INTO {t} (id, v) VALUES (7, 'b')"),
            format!("DELETE FROM {t}"),
        ];
        let q: Vec<&str> = q.iter().map(String::as_str).collect();
        let r = send(shape, &batch(BatchMode::Transaction, &q)).await;
        assert_eq!(code(&r.error), Some(Code::AlreadyExists), "{shape:?}");
        assert_eq!(r.failed_statement, Some(2), "{shape:?}");
        assert_eq!(r.results.len(), 3, "the statements that ran");
        assert_eq!(code(&r.results[2].error), Some(Code::AlreadyExists));
        assert_eq!(count_rows(&t), 5, "{shape:?}: nothing applied");
        assert_eq!(
            mariadb_root(&format!("SELECT COUNT(*) FROM {t} WHERE v = 'changed'")),
            "0"
        );
        mariadb_root(&format!("DROP TABLE {t}"));
    }
}

#[tokio::test]
async fn grpc_web_through_envoys_bridge() {
    let t = table();
    let req = batch(
        BatchMode::Transaction,
        &[
            &format!("INSERT INTO {t} (id, v) VALUES (1, 'web')"),
            &format!("SELECT v FROM {t}"),
        ],
    );
    let cfg = cfg();
    let auth = cfg.basic_auth();
    let a = ConnectClient::http2(&cfg)
        .post(
            BATCH,
            &[
                ("content-type", "application/grpc-web+proto"),
                ("x-grpc-web", "1"),
                ("authorization", auth.as_str()),
            ],
            grpc_frame(&req.encode_to_vec()),
        )
        .await;
    assert_eq!(a.status, 200, "{}", String::from_utf8_lossy(&a.body));
    // The first frame is the message; the trailers frame (0x80) follows.
    let body = &a.body[..];
    assert_eq!(body[0], 0);
    let len = u32::from_be_bytes([body[1], body[2], body[3], body[4]]) as usize;
    let r = ExecuteBatchResponse::decode(&body[5..5 + len]).expect("ExecuteBatchResponse");
    assert!(r.error.is_none(), "{:?}", r.error);
    let rows = ferry_e2e::rows::cells(&r.results[1].result.as_ref().expect("rows").rows[0]);
    assert_eq!(rows, vec![Some(b"web".to_vec())]);
    assert_eq!(count_rows(&t), 1);
    mariadb_root(&format!("DROP TABLE {t}"));
}

#[tokio::test]
async fn transaction_options_reach_mysql() {
    let t = table();
    // READ ONLY: the server refuses the write, and the batch is rolled back.
    let mut req = batch(
        BatchMode::Transaction,
        &[
            &format!("SELECT COUNT(*) FROM {t}"),
            &format!("INSERT INTO {t} (id, v) VALUES (1, 'x')"),
        ],
    );
    req.transaction = Some(TransactionOptions {
        read_only: true,
        ..Default::default()
    });
    let r = proto(&req).await;
    assert_eq!(r.failed_statement, Some(1));
    let message = r.error.as_ref().expect("an error").message.clone();
    assert!(message.contains("READ ONLY"), "{message}");
    assert_eq!(count_rows(&t), 0);

    // The isolation level holds for the batch's transaction (InnoDB says so while it
    // runs), and not for the session after it.
    let mut req = batch(
        BatchMode::Transaction,
        &[&format!("SELECT COUNT(*) FROM {t}"), "SELECT SLEEP(1.5)"],
    );
    req.transaction = Some(TransactionOptions {
        isolation: IsolationLevel::Serializable as i32,
        read_only: false,
    });
    let running = tokio::spawn(async move { proto(&req).await });
    let mut seen = String::new();
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        seen = mariadb_root(
            "SELECT trx_isolation_level FROM information_schema.innodb_trx \
             WHERE trx_query LIKE 'SELECT SLEEP(1.5)%'",
        );
        if !seen.is_empty() {
            break;
        }
    }
    assert_eq!(seen, "SERIALIZABLE");
    let r = running.await.expect("the batch");
    assert!(r.error.is_none(), "{:?}", r.error);
    let after = proto(&batch(BatchMode::Pipeline, &["SELECT @@tx_isolation"])).await;
    let v = ferry_e2e::rows::cells(&after.results[0].result.as_ref().expect("rows").rows[0]);
    assert_ne!(v, vec![Some(b"SERIALIZABLE".to_vec())]);
    mariadb_root(&format!("DROP TABLE {t}"));
}

fn ok(i: u32) -> Condition {
    Condition {
        condition: Some(condition::Condition::Ok(i)),
    }
}

fn failed(i: u32) -> Condition {
    Condition {
        condition: Some(condition::Condition::Error(i)),
    }
}

#[tokio::test]
async fn a_pipeline_answers_each_statement_and_conditions_skip() {
    let t = table();
    let mut req = batch(
        BatchMode::Pipeline,
        &[
            &format!("INSERT INTO {t} (id, v) VALUES (1, 'a')"),
            &format!("INSERT INTO {t} (id, v) VALUES (1, 'dup')"),
            &format!("INSERT INTO {t} (id, v) VALUES (2, 'after a failure')"),
            &format!("INSERT INTO {t} (id, v) VALUES (3, 'if 1 failed')"),
            &format!("INSERT INTO {t} (id, v) VALUES (4, 'if 1 succeeded')"),
            "SET @batch_var = 42",
        ],
    );
    req.statements[3].condition = Some(failed(1));
    req.statements[4].condition = Some(ok(1));
    let r = proto(&req).await;
    assert!(r.error.is_none());
    assert_eq!(r.results.len(), 6);
    assert!(r.results[0].error.is_none());
    assert_eq!(code(&r.results[1].error), Some(Code::AlreadyExists));
    assert!(
        r.results[2].error.is_none(),
        "a pipeline goes on after an error"
    );
    assert!(!r.results[3].skipped && r.results[3].error.is_none());
    assert!(r.results[4].skipped && r.results[4].result.is_none());
    assert_eq!(
        mariadb_root(&format!("SELECT GROUP_CONCAT(id ORDER BY id) FROM {t}")),
        "1,2,3"
    );
    // The session goes on: its variable, in the next batch.
    let mut next = batch(BatchMode::Pipeline, &["SELECT @batch_var"]);
    next.session = r.session;
    let r = proto(&next).await;
    let v = ferry_e2e::rows::cells(&r.results[0].result.as_ref().expect("rows").rows[0]);
    assert_eq!(v, vec![Some(b"42".to_vec())]);

    // A pipeline runs in the session's open transaction: BEGIN, then a batch, then
    // ROLLBACK, and nothing is left.
    let begun = proto(&batch(BatchMode::Pipeline, &["BEGIN"])).await;
    let mut inside = batch(
        BatchMode::Pipeline,
        &[&format!("INSERT INTO {t} (id, v) VALUES (10, 'in txn')")],
    );
    inside.session = begun.session;
    let r = proto(&inside).await;
    assert!(r.results[0].error.is_none());
    assert!(r
        .session
        .as_ref()
        .and_then(|s| s.vitess_session.as_ref())
        .is_some_and(|v| v.in_transaction));
    // A TRANSACTION batch is refused there: it would begin its own.
    let mut refused = batch(BatchMode::Transaction, &["SELECT 1"]);
    refused.session = r.session.clone();
    let (status, body) = post(&refused, &[]).await;
    assert_eq!(status, 400, "{}", String::from_utf8_lossy(&body));
    assert!(String::from_utf8_lossy(&body).contains("failed_precondition"));
    let mut rollback = batch(BatchMode::Pipeline, &["ROLLBACK"]);
    rollback.session = r.session;
    proto(&rollback).await;
    assert_eq!(count_rows(&t), 3);
    mariadb_root(&format!("DROP TABLE {t}"));
}

#[tokio::test]
async fn one_deadline_covers_the_batch_and_stops_its_statement() {
    let t = table();
    let marker = unique("deadline");
    let req = batch(
        BatchMode::Transaction,
        &[
            &format!("INSERT INTO {t} (id, v) VALUES (1, 'x')"),
            &format!("SELECT SLEEP(30) AS {marker}"),
        ],
    );
    let t0 = Instant::now();
    let (status, body) = post(&req, &[("connect-timeout-ms", "800")]).await;
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    assert_eq!(status, 200);
    let r = ExecuteBatchResponse::decode(body.as_slice()).expect("ExecuteBatchResponse");
    assert_eq!(code(&r.error), Some(Code::DeadlineExceeded));
    assert_eq!(r.failed_statement, Some(1));
    assert_eq!(count_rows(&t), 0, "rolled back");
    let gone = gone_within(&marker, Duration::from_secs(5)).await;
    assert!(
        gone < Duration::from_secs(5),
        "the SLEEP was stopped in MySQL"
    );
    mariadb_root(&format!("DROP TABLE {t}"));
}

#[tokio::test]
async fn what_a_batch_may_not_ask_is_refused_before_anything_runs() {
    let t = table();
    let refused = |req: ExecuteBatchRequest,
                   status: u16,
                   code: &'static str,
                   says: &'static str| async move {
        let (got, body) = post(&req, &[]).await;
        let body = String::from_utf8_lossy(&body).into_owned();
        assert_eq!(got, status, "{body}");
        assert!(body.contains(code) && body.contains(says), "{body}");
    };
    refused(
        batch(BatchMode::Transaction, &[]),
        400,
        "invalid_argument",
        "at least one",
    )
    .await;
    let many = vec!["SELECT 1"; 101];
    refused(
        batch(BatchMode::Pipeline, &many),
        429,
        "resource_exhausted",
        "FERRY_BATCH_MAX_STATEMENTS",
    )
    .await;
    refused(
        batch(
            BatchMode::Transaction,
            &[
                &format!("INSERT INTO {t} (id, v) VALUES (1, 'x')"),
                "CREATE TABLE nope (a INT)",
            ],
        ),
        400,
        "invalid_argument",
        "statement 1: CREATE",
    )
    .await;
    refused(
        batch(
            BatchMode::Transaction,
            &["INSERT INTO nope VALUES (1)", "COMMIT"],
        ),
        400,
        "invalid_argument",
        "statement 1: COMMIT",
    )
    .await;
    let mut conditional = batch(BatchMode::Pipeline, &["SELECT 1", "SELECT 2"]);
    conditional.statements[0].condition = Some(ok(1));
    refused(conditional, 400, "invalid_argument", "earlier statement").await;
    assert_eq!(count_rows(&t), 0);
    // A wrong password: the RPC's own 401, nothing ran.
    let mut wrong = cfg();
    wrong.password = "not-the-password".into();
    let auth = wrong.basic_auth();
    let a = ConnectClient::http2(&wrong)
        .post(
            BATCH,
            &[
                ("content-type", "application/json"),
                ("authorization", auth.as_str()),
            ],
            format!(r#"{{"statements":[{{"query":"INSERT INTO {t} (id, v) VALUES (1, 'x')"}}]}}"#)
                .into_bytes(),
        )
        .await;
    assert_eq!(a.status, 401);
    // Bad JSON: the filter's clear 400.
    let a = ConnectClient::http2(&cfg())
        .post(
            BATCH,
            &[
                ("content-type", "application/json"),
                ("authorization", cfg().basic_auth().as_str()),
            ],
            br#"{"statements": [{"query": 1}]}"#.to_vec(),
        )
        .await;
    assert_eq!(a.status, 400, "{}", String::from_utf8_lossy(&a.body));
    assert_eq!(count_rows(&t), 0);
    mariadb_root(&format!("DROP TABLE {t}"));
}

#[tokio::test]
async fn bind_variables_per_statement() {
    let t = table();
    let mut req = batch(
        BatchMode::Transaction,
        &[
            &format!("INSERT INTO {t} (id, v) VALUES (:id, :v)"),
            &format!("SELECT v FROM {t} WHERE id = ?"),
        ],
    );
    let bv =
        |ty: ferry_proto::vitess::query::Type, v: &str| ferry_proto::vitess::query::BindVariable {
            r#type: ty as i32,
            value: v.as_bytes().to_vec(),
            ..Default::default()
        };
    use ferry_proto::vitess::query::Type;
    req.statements[0]
        .bind_variables
        .insert("id".into(), bv(Type::Int64, "7"));
    req.statements[0]
        .bind_variables
        .insert("v".into(), bv(Type::Varchar, "it's \"quoted\""));
    req.statements[1]
        .bind_variables
        .insert("v1".into(), bv(Type::Int64, "7"));
    let r = proto(&req).await;
    assert!(r.error.is_none(), "{:?}", r.error);
    let v = ferry_e2e::rows::cells(&r.results[1].result.as_ref().expect("rows").rows[0]);
    assert_eq!(v, vec![Some(b"it's \"quoted\"".to_vec())]);
    mariadb_root(&format!("DROP TABLE {t}"));
}
