//! The seed's large payloads through the gateway, compressed and not, over HTTP/2 and
//! HTTP/3: a 2,000-row INSERT (~5.5 MB of SQL, sent compressed: the MySQL protocol
//! cannot compress from the client) and a ~27.5 MB SELECT of 10,000 rows × 11 columns.
mod common;

use common::{cfg, count_rows, execute, unique, Way};
use ferry_compress::Encoding;
use ferry_e2e::connect::EXECUTE;
use ferry_e2e::framed::{Protocol, Shape, Transport};
use ferry_proto::psdb::v1alpha1::{ExecuteRequest, ExecuteResponse};
use prost::Message;

const ROWS: usize = 10_000;
const BATCH: usize = 2_000;

/// Row `i`'s 10 text columns (~2,750 bytes in all), deterministic.
fn columns(i: usize) -> Vec<String> {
    (0..10)
        .map(|c| {
            let word = format!("r{i}c{c}-");
            word.repeat(275 / word.len() + 1)[..275].to_owned()
        })
        .collect()
}

fn insert_sql(table: &str, from: usize) -> String {
    let mut sql = format!("INSERT INTO {table} VALUES ");
    for i in from..from + BATCH {
        if i > from {
            sql.push(',');
        }
        sql.push_str(&format!("({i}"));
        for v in columns(i) {
            sql.push_str(&format!(",'{v}'"));
        }
        sql.push(')');
    }
    sql
}

#[tokio::test]
async fn large_insert_and_select_compressed_and_not() {
    let cfg = cfg();
    let table = unique("large");
    let cols: Vec<String> = (0..10).map(|c| format!("c{c} VARCHAR(300)")).collect();
    let r = execute(
        Way::ConnectProtoH2,
        &format!(
            "CREATE TABLE {table} (id INT PRIMARY KEY, {})",
            cols.join(", ")
        ),
    )
    .await;
    assert!(r.error.is_none(), "{:?}", r.error);
    // Five 2,000-row INSERTs, each ~5.5 MB of SQL sent compressed (every codec, both
    // transports, Connect unary and gRPC).
    let senders = [
        (Protocol::ConnectUnary, Transport::H2, Encoding::Zstd),
        (Protocol::ConnectUnary, Transport::H3, Encoding::S2),
        (Protocol::Grpc, Transport::H3, Encoding::Gzip),
        (Protocol::ConnectUnary, Transport::H2, Encoding::Snappy),
        (Protocol::ConnectUnary, Transport::H3, Encoding::Identity),
    ];
    for (batch, (protocol, transport, send)) in senders.into_iter().enumerate() {
        let sql = insert_sql(&table, batch * BATCH);
        let message = ExecuteRequest {
            query: sql.clone(),
            ..Default::default()
        }
        .encode_to_vec();
        let shape = Shape {
            protocol,
            json: false,
            transport,
            send,
            accept: None,
        };
        let sent = shape.body(&message).len();
        let outcome = shape.call(&cfg, EXECUTE, &message).await;
        assert_eq!(outcome.answer.status, 200, "{shape:?}");
        let r = ExecuteResponse::decode(&outcome.messages[0].1[..]).unwrap();
        assert!(r.error.is_none(), "{shape:?}: {:?}", r.error);
        assert_eq!(r.result.unwrap().rows_affected, BATCH as u64);
        eprintln!(
            "INSERT of {BATCH} rows: {} bytes of SQL sent as {sent} ({send})",
            sql.len()
        );
    }
    assert_eq!(count_rows(&table), ROWS);

    // The whole table back, ~27.5 MB of values, as each client takes it.
    let query = format!("SELECT * FROM {table} ORDER BY id");
    // Past 1 MiB the shim sends the answer in pieces as MySQL sends the rows (its
    // spill.rs); each client still reads one message.
    for (protocol, transport, json, accept) in [
        (Protocol::ConnectUnary, Transport::H2, false, None),
        (Protocol::ConnectUnary, Transport::H2, true, Some("gzip")),
        (Protocol::ConnectUnary, Transport::H3, false, Some("s2")),
        (Protocol::ConnectUnary, Transport::H3, true, None),
        (Protocol::ConnectUnary, Transport::H2, false, Some("zstd")),
        (Protocol::ConnectUnary, Transport::H3, true, Some("zstd")),
        (Protocol::Grpc, Transport::H2, false, None),
    ] {
        let shape = Shape {
            protocol,
            json,
            transport,
            send: Encoding::Identity,
            accept,
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
        let started = std::time::Instant::now();
        let outcome = shape.call(&cfg, EXECUTE, &body).await;
        let took = started.elapsed();
        assert_eq!(outcome.answer.status, 200, "{shape:?}");
        assert_eq!(outcome.encoding.as_deref(), accept, "{shape:?}");
        let message = &outcome.messages[0].1;
        let r: ExecuteResponse = if json {
            serde_json::from_slice(message).unwrap()
        } else {
            ExecuteResponse::decode(&message[..]).unwrap()
        };
        assert!(r.error.is_none(), "{shape:?}: {:?}", r.error);
        let rows = r.result.unwrap().rows;
        assert_eq!(rows.len(), ROWS, "{shape:?}");
        let mut bytes = 0;
        for (i, row) in rows.iter().enumerate() {
            let cells = ferry_e2e::rows::cells(row);
            assert_eq!(cells[0].as_deref(), Some(i.to_string().as_bytes()));
            for (c, v) in columns(i).iter().enumerate() {
                assert_eq!(
                    cells[c + 1].as_deref(),
                    Some(v.as_bytes()),
                    "{shape:?} row {i}"
                );
                bytes += v.len();
            }
        }
        eprintln!(
            "SELECT of {ROWS} rows ({bytes} bytes of values): {} bytes on the wire over {transport:?} {} {accept:?}, {took:.2?}",
            outcome.answer.body.len(),
            if json { "JSON" } else { "proto" },
        );
    }
}
