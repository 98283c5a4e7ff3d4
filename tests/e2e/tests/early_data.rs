//! HTTP/3 0-RTT is on by default (FERRY_EARLY_DATA=true) and safe: Envoy marks requests
//! that arrive before the QUIC handshake completes (`early-data: 1`) and the filter lets
//! only replay-safe ones go on. Here a resumed quinn connection sends its requests as
//! early data (`into_0rtt`, before any answer):
//! - an INSERT gets 425 Too Early (Connect) and is not executed,
//! - a SELECT in the same flight (Connect JSON and proto) is answered 200 with the right row,
//! - once the handshake is done, an INSERT on the same (now 1-RTT) connection runs,
//! - a gRPC INSERT in early data gets grpc-status 14 (UNAVAILABLE) and is not executed,
//! - Connect's GET form of a read (as quic-go and browsers send in 0-RTT) is answered,
//!   and a write via GET is refused (405) and not executed.
mod common;
use bytes::{Buf, Bytes, BytesMut};
use common::*;
use ferry_e2e::connect::EXECUTE;
use ferry_e2e::Answer;
use ferry_proto::psdb::v1alpha1::{ExecuteRequest, ExecuteResponse};
use prost::Message;
use rustls::client::{ClientSessionMemoryCache, ClientSessionStore, Tls13ClientSessionValue};
use rustls::NamedGroup;
use rustls_pki_types::ServerName;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A session cache that counts the tickets that allow early data and are not used yet.
#[derive(Debug)]
struct TicketStore {
    inner: ClientSessionMemoryCache,
    early_tickets: AtomicUsize,
}

impl ClientSessionStore for TicketStore {
    fn set_kx_hint(&self, name: ServerName<'static>, group: NamedGroup) {
        self.inner.set_kx_hint(name, group)
    }
    fn kx_hint(&self, name: &ServerName<'_>) -> Option<NamedGroup> {
        self.inner.kx_hint(name)
    }
    fn set_tls12_session(
        &self,
        name: ServerName<'static>,
        value: rustls::client::Tls12ClientSessionValue,
    ) {
        self.inner.set_tls12_session(name, value)
    }
    fn tls12_session(
        &self,
        name: &ServerName<'_>,
    ) -> Option<rustls::client::Tls12ClientSessionValue> {
        self.inner.tls12_session(name)
    }
    fn remove_tls12_session(&self, name: &ServerName<'static>) {
        self.inner.remove_tls12_session(name)
    }
    fn insert_tls13_ticket(&self, name: ServerName<'static>, value: Tls13ClientSessionValue) {
        if value.max_early_data_size() > 0 {
            self.early_tickets.fetch_add(1, Ordering::SeqCst);
        }
        self.inner.insert_tls13_ticket(name, value)
    }
    fn take_tls13_ticket(&self, name: &ServerName<'static>) -> Option<Tls13ClientSessionValue> {
        let ticket = self.inner.take_tls13_ticket(name);
        if ticket.as_ref().is_some_and(|t| t.max_early_data_size() > 0) {
            let _ = self
                .early_tickets
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
        }
        ticket
    }
}

/// A QUIC client endpoint that remembers the gateway's tickets and sends early data.
struct Client {
    endpoint: quinn::Endpoint,
    addr: SocketAddr,
    store: Arc<TicketStore>,
    authority: String,
}

impl Client {
    fn new() -> Client {
        let cfg = cfg();
        let store = Arc::new(TicketStore {
            inner: ClientSessionMemoryCache::new(8),
            early_tickets: AtomicUsize::new(0),
        });
        let mut tls = ferry_e2e::h3_client::tls_config(&cfg).unwrap();
        tls.enable_early_data = true;
        tls.resumption = rustls::client::Resumption::store(store.clone());
        let quic = quinn::crypto::rustls::QuicClientConfig::try_from(tls).unwrap();
        let addr = (cfg.host.as_str(), cfg.port)
            .to_socket_addrs()
            .unwrap()
            .next()
            .unwrap();
        let bind = if addr.is_ipv6() {
            "[::]:0"
        } else {
            "0.0.0.0:0"
        };
        let mut endpoint = quinn::Endpoint::client(bind.parse().unwrap()).unwrap();
        endpoint.set_default_client_config(quinn::ClientConfig::new(Arc::new(quic)));
        Client {
            endpoint,
            addr,
            store,
            authority: format!("{}:{}", cfg.host, cfg.port),
        }
    }

    /// Waits (while `conn` is open) until a ticket that allows early data is stored.
    async fn await_ticket(&self) {
        for _ in 0..100 {
            if self.store.early_tickets.load(Ordering::SeqCst) > 0 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!(
            "the gateway issued no session ticket that allows early data (is FERRY_EARLY_DATA on?)"
        );
    }

    /// A full handshake, kept open until a ticket for the next connection arrived.
    async fn get_ticket(&self) {
        let conn = self
            .endpoint
            .connect(self.addr, "localhost")
            .unwrap()
            .await
            .unwrap();
        self.await_ticket().await;
        conn.close(0u32.into(), b"done");
    }

    /// A resumed connection that may send early data at once, its HTTP/3 client, and
    /// the future that says whether the gateway accepted the early data.
    async fn connect_0rtt(&self) -> (EarlyConn, quinn::ZeroRttAccepted) {
        self.await_ticket().await;
        let connecting = self.endpoint.connect(self.addr, "localhost").unwrap();
        let (conn, accepted) = match connecting.into_0rtt() {
            Ok(pair) => pair,
            Err(_) => panic!("no 0-RTT connection possible with a ticket that allows it"),
        };
        let (mut driver, send) = h3::client::new(h3_quinn::Connection::new(conn.clone()))
            .await
            .expect("HTTP/3 over a 0-RTT connection");
        let driver = tokio::spawn(async move {
            let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
        });
        let early = EarlyConn {
            conn,
            send,
            authority: self.authority.clone(),
            _driver: driver,
        };
        (early, accepted)
    }
}

struct EarlyConn {
    conn: quinn::Connection,
    send: h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>,
    authority: String,
    _driver: tokio::task::JoinHandle<()>,
}

type Stream = h3::client::RequestStream<h3_quinn::BidiStream<Bytes>, Bytes>;

impl EarlyConn {
    /// Sends a whole POST (headers, body, end) without waiting for any answer.
    async fn send(&mut self, headers: &[(&str, &str)], body: Vec<u8>) -> Stream {
        let mut req = http::Request::post(format!("https://{}{}", self.authority, EXECUTE));
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let mut stream = self.send.send_request(req.body(()).unwrap()).await.unwrap();
        stream.send_data(Bytes::from(body)).await.unwrap();
        stream.finish().await.unwrap();
        stream
    }

    /// Sends a GET (no body; `path` carries the query) without waiting for the answer.
    async fn get(&mut self, path: &str, headers: &[(&str, &str)]) -> Stream {
        let mut req = http::Request::get(format!("https://{}{}", self.authority, path));
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let mut stream = self.send.send_request(req.body(()).unwrap()).await.unwrap();
        stream.finish().await.unwrap();
        stream
    }

    fn close(&self) {
        self.conn.close(0u32.into(), b"done");
    }
}

async fn answer(mut stream: Stream) -> Answer {
    let resp = stream.recv_response().await.expect("an answer");
    let mut body = BytesMut::new();
    while let Some(mut chunk) = stream.recv_data().await.unwrap() {
        while chunk.has_remaining() {
            let c = chunk.chunk();
            body.extend_from_slice(c);
            let n = c.len();
            chunk.advance(n);
        }
    }
    let trailers = stream.recv_trailers().await.unwrap().unwrap_or_default();
    Answer {
        status: resp.status().as_u16(),
        version: resp.version(),
        headers: resp.headers().clone(),
        body: body.freeze(),
        trailers,
    }
}

fn json_execute(query: &str) -> Vec<u8> {
    serde_json::json!({ "query": query })
        .to_string()
        .into_bytes()
}

fn rows_in(table: &str) -> String {
    mariadb_root(&format!("SELECT GROUP_CONCAT(id ORDER BY id) FROM {table}"))
}

fn assert_too_early(a: &Answer) {
    assert_eq!(a.status, 425, "{:?}", String::from_utf8_lossy(&a.body));
    assert_eq!(a.header("content-type"), Some("application/json"));
    let body = a.json();
    assert_eq!(body["code"], "unavailable", "{body}");
    let message = body["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("sent as TLS early data (0-RTT); retry after the handshake"),
        "{message}"
    );
}

#[tokio::test]
async fn http3_0rtt_runs_only_replay_safe_requests() {
    let cfg = cfg();
    let auth = cfg.basic_auth();
    let table = unique("zrtt");
    let r = execute(
        Way::ConnectJsonH2,
        &format!("CREATE TABLE {table} (id INT PRIMARY KEY, name VARCHAR(20))"),
    )
    .await;
    assert!(r.error.is_none(), "{:?}", r.error);
    let r = execute(
        Way::ConnectJsonH2,
        &format!("INSERT INTO {table} VALUES (1, 'one')"),
    )
    .await;
    assert!(r.error.is_none(), "{:?}", r.error);
    let json = [
        ("content-type", "application/json"),
        ("authorization", auth.as_str()),
    ];
    let proto = [
        ("content-type", "application/proto"),
        ("authorization", auth.as_str()),
    ];
    let grpc = [
        ("content-type", "application/grpc"),
        ("te", "trailers"),
        ("authorization", auth.as_str()),
    ];

    let client = Client::new();
    client.get_ticket().await;

    // Early data: a write and a read in the first flight, before any answer.
    let (mut early, accepted) = client.connect_0rtt().await;
    let insert = early
        .send(
            &json,
            json_execute(&format!("INSERT INTO {table} VALUES (2, 'two')")),
        )
        .await;
    let select = early
        .send(
            &json,
            json_execute(&format!("SELECT id, name FROM {table} ORDER BY id")),
        )
        .await;
    // Connect proto, which otherwise streams, is held and checked whole in early data.
    let proto_select = ExecuteRequest {
        query: format!("SELECT name FROM {table} WHERE id = 1"),
        ..Default::default()
    };
    let proto_select = early.send(&proto, proto_select.encode_to_vec()).await;
    let (insert, select) = (answer(insert).await, answer(select).await);
    let proto_select = answer(proto_select).await;
    assert!(accepted.await, "the gateway rejected the early data");
    assert_eq!(insert.version, http::Version::HTTP_3);
    // (a) The write: 425, and not executed.
    assert_too_early(&insert);
    assert_eq!(rows_in(&table), "1", "the early INSERT must not run");
    // (b) The read: 200 and the row.
    assert_early_reads(select, proto_select);

    // (c) The handshake is done: the same connection is 1-RTT now, and a write runs.
    let insert = early
        .send(
            &json,
            json_execute(&format!("INSERT INTO {table} VALUES (3, 'three')")),
        )
        .await;
    let insert = answer(insert).await;
    assert_eq!(
        insert.status,
        200,
        "{:?}",
        String::from_utf8_lossy(&insert.body)
    );
    let r: ExecuteResponse = serde_json::from_slice(&insert.body).unwrap();
    assert!(r.error.is_none(), "{:?}", r.error);
    assert_eq!(rows_in(&table), "1,3");
    client.await_ticket().await; // the next connection resumes with it
    early.close();

    // gRPC: a write in early data gets UNAVAILABLE (gRPC has no 425) and does not run.
    let (mut early, accepted) = client.connect_0rtt().await;
    let request = ExecuteRequest {
        query: format!("INSERT INTO {table} VALUES (4, 'four')"),
        ..Default::default()
    };
    let insert = early
        .send(&grpc, grpc_frame(&request.encode_to_vec()))
        .await;
    let insert = answer(insert).await;
    assert!(accepted.await, "the gateway rejected the early data");
    assert_eq!(insert.status, 200);
    let (status, message) = insert.grpc_status().expect("a gRPC status");
    assert_eq!(status, 14, "{message}");
    assert!(message.contains("early data (0-RTT)"), "{message}");
    assert_eq!(rows_in(&table), "1,3", "the early gRPC INSERT must not run");
    early.close();
    client.endpoint.wait_idle().await;

    execute(Way::ConnectJsonH2, &format!("DROP TABLE {table}")).await;
}

/// The two reads of the early flight: the JSON one answers both columns, the
/// proto one the name (both 200, no error).
fn assert_early_reads(select: Answer, proto_select: Answer) {
    assert_eq!(
        select.status,
        200,
        "{:?}",
        String::from_utf8_lossy(&select.body)
    );
    let r: ExecuteResponse = serde_json::from_slice(&select.body).unwrap();
    assert!(r.error.is_none(), "{:?}", r.error);
    let rows = ferry_e2e::rows::text_rows(r.result.as_ref().unwrap());
    assert_eq!(rows, vec![vec![Some("1".into()), Some("one".into())]]);
    assert_eq!(proto_select.status, 200);
    assert_eq!(
        proto_select.header("content-type"),
        Some("application/proto")
    );
    let r = ExecuteResponse::decode(proto_select.body).unwrap();
    assert!(r.error.is_none(), "{:?}", r.error);
    let rows = ferry_e2e::rows::text_rows(r.result.as_ref().unwrap());
    assert_eq!(rows, vec![vec![Some("one".into())]]);
}

#[tokio::test]
async fn http3_0rtt_get_reads_in_one_flight() {
    use base64::Engine;
    let cfg = cfg();
    let auth = cfg.basic_auth();
    let table = unique("zrttget");
    for sql in [
        format!("CREATE TABLE {table} (id INT PRIMARY KEY, name VARCHAR(20))"),
        format!("INSERT INTO {table} VALUES (1, 'one')"),
    ] {
        let r = execute(Way::ConnectJsonH2, &sql).await;
        assert!(r.error.is_none(), "{:?}", r.error);
    }
    let json_get = |query: &str| {
        let message = serde_json::json!({ "query": query }).to_string();
        format!(
            "{EXECUTE}?connect=v1&encoding=json&message={}",
            percent_encode(message.as_bytes())
        )
    };
    let proto = ExecuteRequest {
        query: format!("SELECT name FROM {table} WHERE id = 1"),
        ..Default::default()
    }
    .encode_to_vec();
    let proto_get = format!(
        "{EXECUTE}?connect=v1&encoding=proto&base64=1&message={}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(proto)
    );
    let headers = [("authorization", auth.as_str())];

    let client = Client::new();
    client.get_ticket().await;
    let (mut early, accepted) = client.connect_0rtt().await;
    let select = early
        .get(
            &json_get(&format!("SELECT id, name FROM {table}")),
            &headers,
        )
        .await;
    let proto_select = early.get(&proto_get, &headers).await;
    let insert = early
        .get(
            &json_get(&format!("INSERT INTO {table} VALUES (2, 'two')")),
            &headers,
        )
        .await;
    // A POST write in the same flight: its 425 shows the flight was early data.
    let post_insert = early
        .send(
            &[
                ("content-type", "application/json"),
                ("authorization", auth.as_str()),
            ],
            json_execute(&format!("INSERT INTO {table} VALUES (3, 'three')")),
        )
        .await;
    let (select, proto_select) = (answer(select).await, answer(proto_select).await);
    let insert = answer(insert).await;
    assert_too_early(&answer(post_insert).await);
    assert!(accepted.await, "the gateway rejected the early data");
    assert_eq!(select.version, http::Version::HTTP_3);
    assert_early_reads(select, proto_select);
    // A write via GET: refused for good (405, not 425: resending it will not help).
    assert_eq!(
        insert.status,
        405,
        "{:?}",
        String::from_utf8_lossy(&insert.body)
    );
    assert_eq!(insert.header("allow"), Some("POST"));
    assert_eq!(rows_in(&table), "1", "a write via GET must not run");
    early.close();
}
