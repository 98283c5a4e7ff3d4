//! Bind variables and Prepare through the gateway (Envoy + filter + shim):
//! Connect JSON with protojson bind variables (`{"type": "INT64", "value":
//! "<base64>"}`), Connect proto, gRPC (tonic and gRPC+JSON), HTTP/2 and
//! HTTP/3; refused binds; injection payloads; Prepare in every form, in a
//! transaction and in early data; StreamExecute with binds.
mod common;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use common::*;
use ferry_compress::Encoding;
use ferry_e2e::framed::{Protocol, Shape, Transport, STREAM_EXECUTE};
use ferry_e2e::rows::{cells, json_rows};
use ferry_e2e::{connect::EXECUTE, grpc};
use ferry_proto::psdb::v1alpha1::{
    ExecuteRequest, ExecuteResponse, PrepareRequest, PrepareResponse,
};
use ferry_proto::vitess::query::{BindVariable, Type, Value as VtValue};
use prost::Message;
use serde_json::{json, Value};

const PREPARE: &str = "/psdb.v1alpha1.Database/Prepare";

fn shape(protocol: Protocol, json: bool, transport: Transport) -> Shape {
    Shape {
        protocol,
        json,
        transport,
        send: Encoding::Identity,
        accept: None,
    }
}

fn connect_json() -> Shape {
    shape(Protocol::ConnectUnary, true, Transport::H2)
}

/// A protojson BindVariable, written by hand as clients write it.
fn jbv(ty: &str, value: &[u8]) -> Value {
    json!({ "type": ty, "value": B64.encode(value) })
}

fn jtuple(values: &[(&str, &[u8])]) -> Value {
    let values: Vec<Value> = values.iter().map(|(t, v)| jbv(t, v)).collect();
    json!({ "type": "TUPLE", "values": values })
}

fn bv(ty: Type, value: &[u8]) -> BindVariable {
    BindVariable {
        r#type: ty as i32,
        value: value.to_vec(),
        values: Vec::new(),
    }
}

/// A Connect JSON call that must succeed at the HTTP level; its JSON answer.
async fn json_call(path: &str, body: Value) -> Value {
    json_call_with(connect_json(), path, body).await
}

async fn json_call_with(s: Shape, path: &str, body: Value) -> Value {
    let o = s.call(&cfg(), path, body.to_string().as_bytes()).await;
    assert_eq!(
        o.answer.status,
        200,
        "{path} {body}: {:?}",
        String::from_utf8_lossy(&o.answer.body)
    );
    serde_json::from_slice(&o.messages[0].1).expect("a JSON answer")
}

const QUERY: &str = "SELECT :i AS i, :u AS u, :dec AS dec_, :s AS s, :b AS b, ? AS p, \
                     2 IN ::l AS l, :dt AS dt, :n AS n, :f AS f";

fn want_cells() -> Vec<Option<Vec<u8>>> {
    vec![
        Some(b"-7".to_vec()),
        Some(b"18446744073709551615".to_vec()),
        Some(b"1.50".to_vec()),
        Some("héllo 'x'".as_bytes().to_vec()),
        Some(b"\xff\x00\xfe".to_vec()),
        Some(b"42".to_vec()),
        Some(b"1".to_vec()),
        Some(b"2024-02-29 12:34:56".to_vec()),
        None,
        Some(b"0.25".to_vec()),
    ]
}

fn json_binds() -> Value {
    json!({
        "i": jbv("INT64", b"-7"),
        "u": jbv("UINT64", b"18446744073709551615"),
        "dec": jbv("DECIMAL", b"1.50"),
        "s": jbv("VARCHAR", "héllo 'x'".as_bytes()),
        "b": jbv("VARBINARY", b"\xff\x00\xfe"),
        "v1": jbv("INT32", b"42"),
        "l": jtuple(&[("INT64", b"1"), ("INT64", b"2")]),
        "dt": jbv("DATETIME", b"2024-02-29 12:34:56"),
        "n": { "type": "NULL_TYPE" },
        "f": jbv("FLOAT64", b"0.25"),
    })
}

fn proto_request(query: &str) -> ExecuteRequest {
    let b = |ty, v: &[u8]| bv(ty, v);
    let binds = [
        ("i", b(Type::Int64, b"-7")),
        ("u", b(Type::Uint64, b"18446744073709551615")),
        ("dec", b(Type::Decimal, b"1.50")),
        ("s", b(Type::Varchar, "héllo 'x'".as_bytes())),
        ("b", b(Type::Varbinary, b"\xff\x00\xfe")),
        ("v1", b(Type::Int32, b"42")),
        (
            "l",
            BindVariable {
                r#type: Type::Tuple as i32,
                value: Vec::new(),
                values: [b"1", b"2"]
                    .iter()
                    .map(|v| VtValue {
                        r#type: Type::Int64 as i32,
                        value: v.to_vec(),
                    })
                    .collect(),
            },
        ),
        ("dt", b(Type::Datetime, b"2024-02-29 12:34:56")),
        ("n", b(Type::NullType, b"")),
        ("f", b(Type::Float64, b"0.25")),
    ];
    ExecuteRequest {
        query: query.into(),
        bind_variables: binds.into_iter().map(|(k, v)| (k.to_owned(), v)).collect(),
        ..Default::default()
    }
}

#[tokio::test]
async fn connect_json_binds_over_h2_h1_and_h3() {
    for transport in [Transport::H2, Transport::H3] {
        let s = shape(Protocol::ConnectUnary, true, transport);
        let a = json_call_with(
            s,
            EXECUTE,
            json!({ "query": QUERY, "bindVariables": json_binds() }),
        )
        .await;
        assert!(a.get("error").is_none(), "{transport:?}: {a}");
        assert_eq!(json_rows(&a["result"]), [want_cells()], "{transport:?}");
        let types: Vec<&str> = a["result"]["fields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["type"].as_str().unwrap_or("NULL_TYPE"))
            .collect();
        assert_eq!(&types[..3], ["INT64", "UINT64", "DECIMAL"], "{transport:?}");
        assert_eq!(types[9], "FLOAT64");
    }
    // protojson's original field name is accepted too.
    let a = json_call(
        EXECUTE,
        json!({ "query": "SELECT :x", "bind_variables": { "x": jbv("INT64", b"5") } }),
    )
    .await;
    assert_eq!(json_rows(&a["result"]), [[Some(b"5".to_vec())]]);
}

#[tokio::test]
async fn connect_proto_and_grpc_binds() {
    let msg = proto_request(QUERY).encode_to_vec();
    for (protocol, transport) in [
        (Protocol::ConnectUnary, Transport::H2),
        (Protocol::ConnectUnary, Transport::H3),
        (Protocol::Grpc, Transport::H2),
        (Protocol::Grpc, Transport::H3),
    ] {
        let o = shape(protocol, false, transport)
            .call(&cfg(), EXECUTE, &msg)
            .await;
        assert_eq!(o.answer.status, 200, "{protocol:?} {transport:?}");
        // (reqwest gives no trailers: HTTP/2 gRPC's status is tonic's, below.)
        if (protocol, transport) == (Protocol::Grpc, Transport::H3) {
            assert_eq!(o.answer.grpc_status().map(|s| s.0), Some(0));
        }
        let r = ExecuteResponse::decode(o.messages[0].1.as_slice()).unwrap();
        assert!(
            r.error.is_none(),
            "{protocol:?} {transport:?}: {:?}",
            r.error
        );
        let result = r.result.unwrap();
        assert_eq!(
            cells(&result.rows[0]),
            want_cells(),
            "{protocol:?} {transport:?}"
        );
    }
    // tonic, the real gRPC client.
    let ch = grpc::channel(&cfg()).await;
    let r = grpc::execute_request(ch, &cfg(), proto_request(QUERY))
        .await
        .unwrap();
    assert_eq!(cells(&r.result.unwrap().rows[0]), want_cells());
    // gRPC with the JSON codec.
    let body = json!({ "query": QUERY, "bindVariables": json_binds() }).to_string();
    let o = shape(Protocol::Grpc, true, Transport::H3)
        .call(&cfg(), EXECUTE, body.as_bytes())
        .await;
    assert_eq!(o.answer.grpc_status().map(|s| s.0), Some(0));
    let a: Value = serde_json::from_slice(&o.messages[0].1).unwrap();
    assert_eq!(json_rows(&a["result"]), [want_cells()]);
}

#[tokio::test]
async fn refused_binds_are_invalid_argument() {
    let cases = [
        (
            json!({ "query": "SELECT :a, :b", "bindVariables": { "a": jbv("INT64", b"1") } }),
            "missing bind variable \"b\"",
        ),
        (
            json!({ "query": "SELECT 1", "bindVariables": { "a": jbv("INT64", b"1") } }),
            "\"a\" is not used",
        ),
        (
            json!({ "query": "SELECT :a", "bindVariables": { "a": jbv("INT8", b"300") } }),
            "is not an INT8",
        ),
        (
            json!({ "query": "SELECT ::l", "bindVariables": { "l": jbv("INT64", b"1") } }),
            "must be a TUPLE",
        ),
        (
            json!({ "query": "SELECT :a", "bindVariables": { "a": jbv("RAW", b"now()") } }),
            "RAW cannot be bound",
        ),
    ];
    for (body, want) in cases {
        let a = json_call(EXECUTE, body.clone()).await;
        assert_eq!(a["error"]["code"], "INVALID_ARGUMENT", "{body}: {a}");
        let message = a["error"]["message"].as_str().unwrap();
        assert!(message.contains(want), "{message}");
        assert!(
            a["session"]["signature"].is_string(),
            "the session comes back: {a}"
        );
    }
    // The same over gRPC: a successful call whose answer carries the error.
    let mut req = proto_request("SELECT :nope");
    req.bind_variables.clear();
    req.bind_variables
        .insert("other".into(), bv(Type::Int64, b"1"));
    let ch = grpc::channel(&cfg()).await;
    let r = grpc::execute_request(ch, &cfg(), req).await.unwrap();
    let e = r.error.unwrap();
    assert_eq!(e.code(), ferry_proto::vitess::vtrpc::Code::InvalidArgument);
    assert!(e.message.contains("\"nope\""), "{}", e.message);
    // A bind variable of an unknown type name is not protojson: the filter says so.
    let o = connect_json()
        .call(
            &cfg(),
            EXECUTE,
            json!({ "query": "SELECT :a", "bindVariables": { "a": { "type": "NOPE", "value": "MQ==" } } })
                .to_string()
                .as_bytes(),
        )
        .await;
    assert_eq!(o.answer.status, 400);
    assert_eq!(o.answer.json()["code"], "invalid_argument");
}

#[tokio::test]
async fn injection_payloads_through_the_gateway_are_data() {
    let table = unique("bind_inj");
    let create = format!(
        "CREATE TABLE {table} (id INT PRIMARY KEY, s TEXT, b VARBINARY(64)) DEFAULT CHARSET=utf8mb4"
    );
    let a = json_call(EXECUTE, json!({ "query": create })).await;
    assert!(a.get("error").is_none(), "{a}");
    let payloads: [&[u8]; 7] = [
        b"'; DROP TABLE x; --",
        b"\\'",
        b"a\0b",
        b"\" OR \"\"=\"",
        b"?:a::b -- ",
        b"*/ SELECT 1 /*",
        "\u{1F600}".as_bytes(),
    ];
    for (i, p) in payloads.iter().enumerate() {
        let a = json_call(
            EXECUTE,
            json!({
                "query": format!("INSERT INTO {table} VALUES (:id, :s, :b)"),
                "bindVariables": {
                    "id": jbv("INT64", (i + 1).to_string().as_bytes()),
                    "s": jbv("VARCHAR", p),
                    "b": jbv("VARBINARY", p),
                },
            }),
        )
        .await;
        assert!(a.get("error").is_none(), "{p:?}: {a}");
    }
    // Invalid UTF-8, in a binary column only.
    let junk: &[u8] = b"\xff\xfe\x00\x80'\\";
    let a = json_call(
        EXECUTE,
        json!({
            "query": format!("INSERT INTO {table} (id, b) VALUES (100, :b)"),
            "bindVariables": { "b": jbv("VARBINARY", junk) },
        }),
    )
    .await;
    assert!(a.get("error").is_none(), "{a}");
    let a = json_call(
        EXECUTE,
        json!({ "query": format!("SELECT s, b FROM {table} ORDER BY id") }),
    )
    .await;
    let rows = json_rows(&a["result"]);
    assert_eq!(rows.len(), payloads.len() + 1);
    for (row, p) in rows.iter().zip(payloads.iter()) {
        assert_eq!(row, &[Some(p.to_vec()), Some(p.to_vec())]);
    }
    assert_eq!(rows[payloads.len()], [None, Some(junk.to_vec())]);
    assert_eq!(
        count_rows(&table),
        payloads.len() + 1,
        "the table is still there"
    );
    let _ = json_call(EXECUTE, json!({ "query": format!("DROP TABLE {table}") })).await;
}

#[tokio::test]
async fn prepare_every_way() {
    let table = unique("bind_prep");
    let a = json_call(
        EXECUTE,
        json!({ "query": format!("CREATE TABLE {table} (id INT UNSIGNED PRIMARY KEY, name VARCHAR(20))") }),
    )
    .await;
    assert!(a.get("error").is_none(), "{a}");
    let query = format!("SELECT id, name FROM {table} WHERE id = :id AND name IN ::names");
    let names = jtuple(&[("VARCHAR", b"a"), ("VARCHAR", b"b")]);
    // Connect JSON.
    let a = json_call(
        PREPARE,
        json!({ "query": query, "bindVariables": { "names": names } }),
    )
    .await;
    assert!(a.get("error").is_none(), "{a}");
    assert_eq!(a["paramsCount"], 3);
    let fields: Vec<(&str, &str)> = a["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["name"].as_str().unwrap(), f["type"].as_str().unwrap()))
        .collect();
    assert_eq!(fields, [("id", "UINT32"), ("name", "VARCHAR")]);
    assert!(a["session"]["signature"].is_string());
    // Connect proto and gRPC, HTTP/2 and HTTP/3.
    let msg = PrepareRequest {
        query: format!("INSERT INTO {table} VALUES (?, ?)"),
        ..Default::default()
    }
    .encode_to_vec();
    for (protocol, transport) in [
        (Protocol::ConnectUnary, Transport::H2),
        (Protocol::ConnectUnary, Transport::H3),
        (Protocol::Grpc, Transport::H2),
        (Protocol::Grpc, Transport::H3),
    ] {
        let o = shape(protocol, false, transport)
            .call(&cfg(), PREPARE, &msg)
            .await;
        assert_eq!(o.answer.status, 200, "{protocol:?} {transport:?}");
        let p = PrepareResponse::decode(o.messages[0].1.as_slice()).unwrap();
        assert_eq!((p.params_count, p.fields.len(), p.error), (2, 0, None));
    }
    let ch = grpc::channel(&cfg()).await;
    let p: PrepareResponse = grpc::unary(
        ch,
        PREPARE,
        PrepareRequest {
            query: "SELECT ?, ? + 1 AS n".into(),
            ..Default::default()
        },
        Some(&cfg().basic_auth()),
    )
    .await
    .unwrap()
    .into_inner();
    assert_eq!((p.params_count, p.fields[1].name.as_str()), (2, "n"));
    assert_eq!(count_rows(&table), 0, "Prepare runs nothing");
    // SQL errors come inside the answer.
    let a = json_call(
        PREPARE,
        json!({ "query": "SELECT * FROM no_such_table_here" }),
    )
    .await;
    assert_eq!(a["error"]["code"], "NOT_FOUND", "{a}");
    // Preparing changes nothing, so it may come in TLS early data.
    let o = ferry_e2e::connect::ConnectClient::http2(&cfg())
        .post(
            PREPARE,
            &[
                ("content-type", "application/json"),
                ("authorization", cfg().basic_auth().as_str()),
                ("early-data", "1"),
            ],
            json!({ "query": "SELECT ?" }).to_string().into_bytes(),
        )
        .await;
    assert_eq!(o.status, 200, "{:?}", String::from_utf8_lossy(&o.body));
    assert_eq!(o.json()["paramsCount"], 1);
    // Execute with binds in early data: a read goes on, a write does not.
    let early = |query: &str| {
        let body = json!({ "query": query, "bindVariables": { "x": jbv("INT64", b"1") } });
        async move {
            ferry_e2e::connect::ConnectClient::http2(&cfg())
                .post(
                    EXECUTE,
                    &[
                        ("content-type", "application/json"),
                        ("authorization", cfg().basic_auth().as_str()),
                        ("early-data", "1"),
                    ],
                    body.to_string().into_bytes(),
                )
                .await
        }
    };
    assert_eq!(early("SELECT :x").await.status, 200);
    let refused = early(&format!("INSERT INTO {table} VALUES (:x, 'a')")).await;
    assert_eq!(refused.status, 425);
    assert_eq!(count_rows(&table), 0);
    let _ = json_call(EXECUTE, json!({ "query": format!("DROP TABLE {table}") })).await;
}

/// BEGIN, and wait until its pinned session reaches its shim: until Envoy's
/// first health check of the shim passes (a few seconds after Envoy starts),
/// the session-affinity route (`stateful_session`, strict) refuses the holder
/// and the filter answers "transaction lost ... unavailable" without the shim
/// seeing the request, so the same session is simply sent again.
async fn begin() -> Value {
    let a = json_call(EXECUTE, json!({ "query": "BEGIN" })).await;
    let session = a["session"].clone();
    assert_eq!(session["vitessSession"]["inTransaction"], true, "{a}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    loop {
        let probe = json_call(
            EXECUTE,
            json!({ "query": "SELECT 1", "session": session.clone() }),
        )
        .await;
        if probe.get("error").is_none() {
            return probe["session"].clone();
        }
        assert!(std::time::Instant::now() < deadline, "{probe}");
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
}

/// Binds and Prepare in a transaction: they run on the session's pin (the
/// filter routes the session to its shim), and ROLLBACK undoes them.
#[tokio::test]
async fn binds_in_a_transaction_and_a_stream() {
    let table = unique("bind_txn");
    let a = json_call(
        EXECUTE,
        json!({ "query": format!("CREATE TABLE {table} (id INT PRIMARY KEY, v VARCHAR(20))") }),
    )
    .await;
    assert!(a.get("error").is_none(), "{a}");
    let session = begin().await;
    let a = json_call(
        EXECUTE,
        json!({
            "query": format!("INSERT INTO {table} VALUES (:id, :v), ::row"),
            "bindVariables": {
                "id": jbv("INT64", b"1"),
                "v": jbv("VARCHAR", b"one"),
                "row": jtuple(&[("INT64", b"2"), ("VARCHAR", b"two")]),
            },
            "session": session,
        }),
    )
    .await;
    assert!(a.get("error").is_none(), "{a}");
    assert_eq!(a["result"]["rowsAffected"], "2");
    let session = a["session"].clone();
    let a = json_call(
        PREPARE,
        json!({ "query": format!("SELECT v FROM {table} WHERE id = ?"), "session": session }),
    )
    .await;
    assert_eq!(a["paramsCount"], 1, "{a}");
    assert_eq!(a["session"]["vitessSession"]["inTransaction"], true);
    let session = a["session"].clone();
    // StreamExecute in the transaction, Connect streaming JSON.
    let body = json!({
        "query": format!("SELECT id, v FROM {table} WHERE id >= :min ORDER BY id"),
        "bindVariables": { "min": jbv("INT64", b"1") },
        "session": session,
    });
    let o = shape(Protocol::ConnectStream, true, Transport::H2)
        .call(&cfg(), STREAM_EXECUTE, body.to_string().as_bytes())
        .await;
    assert_eq!(o.answer.status, 200);
    assert_eq!(o.end, Some(json!({})));
    let msgs: Vec<Value> = o
        .messages
        .iter()
        .map(|(_, m)| serde_json::from_slice(m).unwrap())
        .collect();
    let rows: Vec<_> = msgs.iter().flat_map(|m| json_rows(&m["result"])).collect();
    assert_eq!(
        rows,
        [
            [Some(b"1".to_vec()), Some(b"one".to_vec())],
            [Some(b"2".to_vec()), Some(b"two".to_vec())]
        ]
    );
    assert_eq!(count_rows(&table), 0, "not committed");
    let session = msgs.last().unwrap()["session"].clone();
    let a = json_call(EXECUTE, json!({ "query": "ROLLBACK", "session": session })).await;
    assert!(a.get("error").is_none(), "{a}");
    assert_eq!(count_rows(&table), 0);
    let _ = json_call(EXECUTE, json!({ "query": format!("DROP TABLE {table}") })).await;
}
