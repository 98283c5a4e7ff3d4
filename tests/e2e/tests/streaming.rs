//! StreamExecute against the real stack: results arrive complete and in order over
//! gRPC and Connect streaming, HTTP/2 and HTTP/3; fields come first; a client that
//! goes away stops the query in MySQL; the OLAP switch is answered by the gateway.
mod common;

use common::{cfg, execute, execute_in, gone_within, running, unique, Way};
use ferry_compress::Encoding;
use ferry_e2e::framed::{Protocol, Shape, Transport, STREAM_EXECUTE};
use ferry_proto::psdb::v1alpha1::{ExecuteRequest, ExecuteResponse};
use prost::Message;
use std::time::{Duration, Instant};

/// 0..1000 as a derived table (recursive CTEs stop at 1000 iterations in MariaDB).
const THOUSAND: &str =
    "WITH RECURSIVE k(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM k WHERE n < 999) SELECT n FROM k";

/// Rows 1..=n (n ≤ 1,000,000) with a label, in order.
fn sequence(n: u64) -> String {
    format!(
        "SELECT n, CONCAT('row-', n) AS label FROM \
         (SELECT a.n * 1000 + b.n + 1 AS n FROM ({THOUSAND}) a, ({THOUSAND}) b) s \
         WHERE n <= {n} ORDER BY n"
    )
}

/// Checks a stream's messages: fields only in the first, rows 1..=n in order.
fn check_sequence(messages: &[ExecuteResponse], n: u64) {
    assert!(!messages.is_empty());
    let first = messages[0].result.as_ref().expect("a result");
    assert_eq!(first.fields.len(), 2, "fields come first");
    let mut next = 1u64;
    for (i, m) in messages.iter().enumerate() {
        assert!(m.error.is_none(), "{:?}", m.error);
        let Some(result) = &m.result else { continue };
        if i > 0 {
            assert!(result.fields.is_empty(), "fields only in the first message");
        }
        for row in &result.rows {
            let cells = ferry_e2e::rows::cells(row);
            let got: u64 = String::from_utf8(cells[0].clone().unwrap())
                .unwrap()
                .parse()
                .unwrap();
            assert_eq!(got, next, "rows in order");
            assert_eq!(cells[1].as_deref(), Some(format!("row-{next}").as_bytes()));
            next += 1;
        }
    }
    assert_eq!(next - 1, n, "every row arrived");
}

#[tokio::test]
async fn large_streams_arrive_complete_and_in_order() {
    let cfg = cfg();
    let n = 100_000;
    let query = sequence(n);
    for transport in [Transport::H2, Transport::H3] {
        for (protocol, json) in [
            (Protocol::ConnectStream, false),
            (Protocol::ConnectStream, true),
            (Protocol::Grpc, false),
        ] {
            if protocol == Protocol::Grpc && transport == Transport::H2 {
                continue; // tonic's, below
            }
            let shape = Shape {
                protocol,
                json,
                transport,
                send: Encoding::Identity,
                accept: None,
            };
            let body = if json {
                serde_json::json!({ "query": query })
                    .to_string()
                    .into_bytes()
            } else {
                ExecuteRequest {
                    query: query.clone(),
                    ..Default::default()
                }
                .encode_to_vec()
            };
            let outcome = shape.call(&cfg, STREAM_EXECUTE, &body).await;
            assert_eq!(outcome.answer.status, 200, "{shape:?}");
            if protocol == Protocol::Grpc {
                assert_eq!(outcome.answer.grpc_status(), Some((0, String::new())));
            } else {
                assert_eq!(outcome.end, Some(serde_json::json!({})), "{shape:?}");
            }
            assert!(outcome.messages.len() > 2, "{shape:?}: chunked");
            let messages: Vec<ExecuteResponse> = outcome
                .messages
                .iter()
                .map(|(_, m)| {
                    if json {
                        serde_json::from_slice(m).unwrap()
                    } else {
                        ExecuteResponse::decode(&m[..]).unwrap()
                    }
                })
                .collect();
            check_sequence(&messages, n);
        }
    }
}

async fn grpc_stream(
    query: &str,
    timeout: Option<Duration>,
) -> Result<tonic::Streaming<ExecuteResponse>, tonic::Status> {
    let cfg = cfg();
    let channel = ferry_e2e::grpc::channel(&cfg).await;
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.unwrap();
    let mut req = tonic::Request::new(ExecuteRequest {
        query: query.into(),
        ..Default::default()
    });
    req.metadata_mut()
        .insert("authorization", cfg.basic_auth().parse().unwrap());
    if let Some(t) = timeout {
        req.set_timeout(t);
    }
    let codec = tonic_prost::ProstCodec::<ExecuteRequest, ExecuteResponse>::default();
    grpc.server_streaming(
        req,
        http::uri::PathAndQuery::from_static(STREAM_EXECUTE),
        codec,
    )
    .await
    .map(tonic::Response::into_inner)
}

#[tokio::test]
async fn tonic_streams_a_large_result() {
    let n = 200_000;
    let mut stream = grpc_stream(&sequence(n), None).await.unwrap();
    let mut messages = Vec::new();
    while let Some(m) = stream.message().await.unwrap() {
        messages.push(m);
    }
    check_sequence(&messages, n);
}

#[tokio::test]
async fn a_client_that_goes_away_stops_the_query() {
    let marker = unique("cancel");
    // Endless enough: a billion rows, read slower than MySQL makes them.
    let query = format!(
        "SELECT a.n, b.n, c.n, '{marker}' FROM ({THOUSAND}) a, ({THOUSAND}) b, ({THOUSAND}) c"
    );
    let mut stream = grpc_stream(&query, None).await.unwrap();
    for _ in 0..3 {
        stream.message().await.unwrap().expect("a message");
    }
    assert_eq!(
        running(&marker),
        1,
        "the query runs while the stream is read"
    );
    drop(stream);
    let took = gone_within(&marker, Duration::from_secs(3)).await;
    eprintln!("cancelled stream: the query was gone from the processlist after {took:?}");
}

#[tokio::test]
async fn a_deadline_stops_the_query() {
    let marker = unique("deadline");
    let query = format!("SELECT SLEEP(30), '{marker}'");
    let started = Instant::now();
    // The fields may come first; the stream then ends with the deadline.
    let status = match grpc_stream(&query, Some(Duration::from_millis(800))).await {
        Ok(mut stream) => loop {
            match stream.message().await {
                Ok(Some(m)) => assert!(m.result.is_none_or(|r| r.rows.is_empty()), "no row"),
                Ok(None) => panic!("the stream ended without the deadline"),
                Err(status) => break status,
            }
        },
        Err(status) => status,
    };
    assert_eq!(status.code(), tonic::Code::DeadlineExceeded, "{status:?}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    gone_within(&marker, Duration::from_secs(2)).await;
}

#[tokio::test]
async fn the_olap_switch_is_answered_by_the_gateway() {
    for way in [Way::ConnectJsonH2, Way::ConnectProtoH2, Way::GrpcH2] {
        let r = execute_in(way, None, "SET workload = 'olap'").await;
        assert!(r.error.is_none(), "{way:?}: {:?}", r.error);
        let session = r.session.expect("a session");
        let options = session
            .vitess_session
            .as_ref()
            .and_then(|s| s.options.as_ref())
            .expect("options");
        assert_eq!(options.workload, 2, "{way:?}: OLAP");
        // The session works on, and switches back.
        let r = execute_in(way, Some(&session), "SELECT 1").await;
        assert!(r.error.is_none());
        let r = execute_in(way, r.session.as_ref(), "set workload = oltp").await;
        let workload = r
            .session
            .unwrap()
            .vitess_session
            .unwrap()
            .options
            .unwrap()
            .workload;
        assert_eq!(workload, 1, "{way:?}: OLTP");
    }
}

/// PlanetScale's statement timeouts (sessions/query_timeout.rs): the `QUERY_TIMEOUT_MS`
/// comment directive and `SET query_timeout`, kept like the client's deadline: the
/// statement is stopped in MySQL and the answer is `deadline_exceeded` (504), on time.
#[tokio::test]
async fn query_timeouts_stop_the_statement() {
    let cfg = cfg();
    let auth = cfg.basic_auth();
    let c = ferry_e2e::connect::ConnectClient::http2(&cfg);
    let timed_out = |query: String, session: Option<ferry_proto::psdb::v1alpha1::Session>| {
        let (c, auth) = (&c, auth.clone());
        async move {
            let body = serde_json::json!({ "query": query, "session": session }).to_string();
            let started = Instant::now();
            let a = c
                .post(
                    "/psdb.v1alpha1.Database/Execute",
                    &[
                        ("content-type", "application/json"),
                        ("authorization", auth.as_str()),
                    ],
                    body.into_bytes(),
                )
                .await;
            let text = String::from_utf8_lossy(&a.body).into_owned();
            assert_eq!(a.status, 504, "{text}");
            assert!(text.contains("deadline_exceeded"), "{text}");
            assert!(
                started.elapsed() < Duration::from_secs(3),
                "{:?}",
                started.elapsed()
            );
            text
        }
    };
    // The directive, on one statement.
    let marker = unique("qt_directive");
    let text = timed_out(
        format!("SELECT /*vt+ QUERY_TIMEOUT_MS=500 */ SLEEP(30), '{marker}'"),
        None,
    )
    .await;
    assert!(text.contains("500 ms, QUERY_TIMEOUT_MS"), "{text}");
    gone_within(&marker, Duration::from_secs(2)).await;

    // The session's, set once, on every later statement.
    let r = execute(Way::ConnectJsonH2, "SET query_timeout = 400").await;
    assert!(r.error.is_none(), "{:?}", r.error);
    let s = r.session.expect("a session");
    assert_eq!(
        s.vitess_session.as_ref().map(|v| v.query_timeout),
        Some(400)
    );
    let marker = unique("qt_session");
    let text = timed_out(format!("SELECT SLEEP(30), '{marker}'"), Some(s.clone())).await;
    assert!(text.contains("400 ms, query_timeout"), "{text}");
    gone_within(&marker, Duration::from_secs(2)).await;
    // A quick statement is untouched; 0 turns it off; a bad value is refused.
    let r = execute_in(Way::ConnectJsonH2, Some(&s), "SELECT SLEEP(0.1)").await;
    assert!(r.error.is_none(), "{:?}", r.error);
    let r = execute_in(Way::ConnectJsonH2, Some(&s), "SET query_timeout = 0").await;
    assert_eq!(
        r.session
            .and_then(|s| s.vitess_session)
            .map(|v| v.query_timeout),
        Some(0)
    );
    let r = execute(Way::ConnectJsonH2, "SET query_timeout = 'soon'").await;
    assert_eq!(
        r.error.map(|e| e.code),
        Some(ferry_proto::vitess::vtrpc::Code::InvalidArgument as i32)
    );
}
