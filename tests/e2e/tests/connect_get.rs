//! Connect's GET form of unary Execute (`?connect=v1&encoding=…&message=…`, `base64=1`),
//! on the real stack: replay-safe reads are answered over HTTP/2 and HTTP/3 (JSON and
//! proto + base64); a write via GET is refused with 405 + `allow: POST` and not
//! executed; malformed forms get clear Connect errors. (0-RTT GET: early_data.rs.)
mod common;
use base64::Engine;
use common::*;
use ferry_e2e::connect::{ConnectClient, EXECUTE};
use ferry_e2e::h3_client::H3Client;
use ferry_e2e::Answer;
use ferry_proto::psdb::v1alpha1::{ExecuteRequest, ExecuteResponse};
use prost::Message;

fn json_get(query: &str) -> String {
    let message = serde_json::json!({ "query": query }).to_string();
    format!(
        "{EXECUTE}?connect=v1&encoding=json&message={}",
        percent_encode(message.as_bytes())
    )
}

fn proto_get(query: &str) -> String {
    let message = ExecuteRequest {
        query: query.into(),
        ..Default::default()
    }
    .encode_to_vec();
    let encoded = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(message);
    format!("{EXECUTE}?connect=v1&encoding=proto&base64=1&message={encoded}")
}

async fn h2_get(path: &str) -> Answer {
    let c = ConnectClient::http2(&cfg());
    let auth = c.cfg.basic_auth();
    c.send(
        reqwest::Method::GET,
        path,
        &[("authorization", &auth)],
        vec![],
    )
    .await
    .unwrap()
}

async fn h3_get(path: &str) -> Answer {
    let cfg = cfg();
    let auth = cfg.basic_auth();
    let mut h3 = H3Client::connect(&cfg).await.unwrap();
    let a = h3.get(path, &[("authorization", &auth)]).await.unwrap();
    h3.close().await;
    a
}

fn json_rows(a: &Answer) -> Vec<Vec<Option<String>>> {
    assert_eq!(a.status, 200, "{:?}", String::from_utf8_lossy(&a.body));
    assert_eq!(a.header("content-type"), Some("application/json"));
    let r: ExecuteResponse = serde_json::from_slice(&a.body).unwrap();
    assert!(r.error.is_none(), "{:?}", r.error);
    ferry_e2e::rows::text_rows(r.result.as_ref().unwrap())
}

fn proto_rows(a: &Answer) -> Vec<Vec<Option<String>>> {
    assert_eq!(a.status, 200, "{:?}", String::from_utf8_lossy(&a.body));
    assert_eq!(a.header("content-type"), Some("application/proto"));
    let r = ExecuteResponse::decode(a.body.clone()).unwrap();
    assert!(r.error.is_none(), "{:?}", r.error);
    ferry_e2e::rows::text_rows(r.result.as_ref().unwrap())
}

fn assert_use_post(a: &Answer) {
    assert_eq!(a.status, 405, "{:?}", String::from_utf8_lossy(&a.body));
    assert_eq!(a.header("allow"), Some("POST"));
    let body = a.json();
    assert_eq!(body["code"], "unimplemented", "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap_or_default()
            .contains("send it with POST"),
        "{body}"
    );
}

async fn table_with_one_row() -> String {
    let table = unique("cget");
    for sql in [
        format!("CREATE TABLE {table} (id INT PRIMARY KEY, name VARCHAR(20))"),
        format!("INSERT INTO {table} VALUES (1, 'one & ?=+/%')"),
    ] {
        let r = execute(Way::ConnectJsonH2, &sql).await;
        assert!(r.error.is_none(), "{:?}", r.error);
    }
    table
}

#[tokio::test]
async fn get_reads_over_http2_and_http3() {
    let table = table_with_one_row().await;
    let select = format!("SELECT id, name FROM {table} WHERE name LIKE 'one%'");
    let expected = vec![vec![Some("1".to_owned()), Some("one & ?=+/%".to_owned())]];

    let a = h2_get(&json_get(&select)).await;
    assert_eq!(a.version, http::Version::HTTP_2);
    assert_eq!(json_rows(&a), expected, "HTTP/2 JSON");
    let a = h2_get(&proto_get(&select)).await;
    assert_eq!(proto_rows(&a), expected, "HTTP/2 proto");
    let a = h3_get(&json_get(&select)).await;
    assert_eq!(a.version, http::Version::HTTP_3);
    assert_eq!(json_rows(&a), expected, "HTTP/3 JSON");
    let a = h3_get(&proto_get(&select)).await;
    assert_eq!(proto_rows(&a), expected, "HTTP/3 proto");
}

#[tokio::test]
async fn get_writes_are_refused_and_not_executed() {
    let table = table_with_one_row().await;
    let insert = format!("INSERT INTO {table} VALUES (2, 'two')");
    assert_use_post(&h2_get(&json_get(&insert)).await);
    assert_use_post(&h2_get(&proto_get(&insert)).await);
    assert_use_post(&h3_get(&json_get(&insert)).await);
    let locking = format!("SELECT id FROM {table} FOR UPDATE");
    assert_use_post(&h2_get(&json_get(&locking)).await);
    assert_eq!(
        mariadb_root(&format!("SELECT GROUP_CONCAT(id ORDER BY id) FROM {table}")),
        "1",
        "a write sent via GET must not run"
    );
}

#[tokio::test]
async fn get_errors_are_connect_errors() {
    let c = ConnectClient::http2(&cfg());
    let auth = c.cfg.basic_auth();
    let cases: &[(&str, u16, &str)] = &[
        ("connect=v1&encoding=json", 400, "invalid_argument"),
        ("connect=v1&message=%7B%7D", 400, "invalid_argument"),
        ("connect=v1&encoding=xml&message=x", 415, "invalid_argument"),
        (
            "connect=v1&encoding=json&message=%7B",
            400,
            "invalid_argument",
        ),
        (
            "connect=v1&encoding=json&compression=br&message=%7B%7D",
            501,
            "unimplemented",
        ),
        (
            "connect=v1&encoding=proto&base64=1&message=*",
            400,
            "invalid_argument",
        ),
    ];
    for (query, status, code) in cases {
        let a = c
            .send(
                reqwest::Method::GET,
                &format!("{EXECUTE}?{query}"),
                &[("authorization", &auth)],
                vec![],
            )
            .await
            .unwrap();
        assert_eq!(
            a.status,
            *status,
            "{query}: {:?}",
            String::from_utf8_lossy(&a.body)
        );
        assert_eq!(a.json()["code"], *code, "{query}");
    }
    // No credentials.
    let a = c
        .send(reqwest::Method::GET, &json_get("SELECT 1"), &[], vec![])
        .await
        .unwrap();
    assert_eq!(a.status, 401);
    // A GET with a body.
    let a = c
        .send(
            reqwest::Method::GET,
            &json_get("SELECT 1"),
            &[("authorization", &auth)],
            b"{}".to_vec(),
        )
        .await
        .unwrap();
    assert_eq!(a.status, 400, "{:?}", String::from_utf8_lossy(&a.body));
    assert_eq!(a.json()["code"], "invalid_argument");
}
