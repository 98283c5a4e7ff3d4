//! What the shim's integration tests share: the database under test, the
//! shim binary as a child process, and an h2c client of its canonical API.
#![allow(dead_code)] // each test binary uses a part

use base64::Engine;
use bytes::Bytes;
use ferry_proto::psdb::v1alpha1::{ExecuteRequest, ExecuteResponse};
use ferry_proto::vitess::query::QueryResult;
use ferry_proto::vitess::vtrpc::Code;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http2::SendRequest;
use hyper_util::rt::{TokioExecutor, TokioIo};
use mysql_async::prelude::Queryable;
use prost::Message;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub struct Db {
    pub socket: Option<String>,
    pub host: String,
    pub port: u16,
    pub user: String,
    pub password: String,
    pub database: String,
}

impl Db {
    pub fn from_env() -> Option<Db> {
        let var = |n: &str| std::env::var(n).ok().filter(|v| !v.is_empty());
        let socket = var("FERRY_TEST_MYSQL_SOCKET");
        let port = var("FERRY_TEST_MYSQL_PORT");
        if socket.is_none() && port.is_none() {
            return None;
        }
        Some(Db {
            socket,
            host: var("FERRY_TEST_MYSQL_HOST").unwrap_or_else(|| "127.0.0.1".into()),
            port: port.map_or(3306, |p| p.parse().expect("FERRY_TEST_MYSQL_PORT")),
            user: var("FERRY_TEST_MYSQL_USER").unwrap_or_else(|| "ferry".into()),
            password: var("FERRY_TEST_MYSQL_PASSWORD").unwrap_or_else(|| "ferry".into()),
            database: var("FERRY_TEST_MYSQL_DATABASE").unwrap_or_else(|| "ferry".into()),
        })
    }

    /// A direct connection, outside the shim, to see what is committed.
    pub async fn direct(&self) -> mysql_async::Conn {
        let mut b = mysql_async::OptsBuilder::default()
            .user(Some(self.user.clone()))
            .pass(Some(self.password.clone()))
            .db_name(Some(self.database.clone()))
            .prefer_socket(false);
        b = match &self.socket {
            Some(s) => b.socket(Some(s.clone())),
            None => b.ip_or_hostname(self.host.clone()).tcp_port(self.port),
        };
        mysql_async::Conn::new(b)
            .await
            .expect("direct MySQL connection")
    }
}

/// The shim process; killed when dropped.
pub struct Shim {
    pub child: Child,
    pub port: u16,
    pub unix: std::path::PathBuf,
}

impl Drop for Shim {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.unix);
    }
}

/// Starts the shim binary on a free port (and a unix socket named after
/// `name`) against `db`, with these extra settings.
pub async fn start_shim(db: &Db, name: &str, env: &[(&str, &str)]) -> Shim {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let unix = std::env::temp_dir().join(format!(
        "ferry-shim-test-{}-{name}.sock",
        std::process::id()
    ));
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ferry-shim"));
    cmd.env_clear()
        .env("FERRY_SHIM_ADDR", format!("127.0.0.1:{port}"))
        .env("FERRY_SHIM_UNIX", &unix)
        .env("FERRY_MYSQL_DATABASE", &db.database)
        .env("FERRY_LOG", "debug")
        .envs(env.iter().copied())
        .stdout(Stdio::null());
    match &db.socket {
        Some(s) => cmd.env("FERRY_MYSQL_SOCKET", s),
        None => cmd
            .env("FERRY_MYSQL_HOST", &db.host)
            .env("FERRY_MYSQL_PORT", db.port.to_string()),
    };
    let shim = Shim {
        child: cmd.spawn().expect("spawn ferry-shim"),
        port,
        unix,
    };
    for _ in 0..100 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            return shim;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("ferry-shim did not start listening on {port}");
}

pub struct Client {
    pub h2: SendRequest<Full<Bytes>>,
    pub auth: String,
}

pub struct Answer {
    pub status: u16,
    pub content_type: String,
    pub body: Bytes,
}

impl Answer {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|_| panic!("not JSON: {:?}", self.body))
    }
}

impl Client {
    pub async fn connect(port: u16, user: &str, password: &str) -> Client {
        let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .unwrap();
        let (h2, conn) =
            hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tcp))
                .await
                .expect("h2c handshake (prior knowledge)");
        tokio::spawn(conn);
        let auth = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
        );
        Client { h2, auth }
    }

    /// Sends a request (with these extra headers); the answer's body is unread.
    pub async fn send(
        &mut self,
        path: &str,
        content_type: &str,
        headers: &[(&str, &str)],
        body: Vec<u8>,
    ) -> hyper::Response<hyper::body::Incoming> {
        let mut req = hyper::Request::post(format!("http://shim{path}"))
            .header("content-type", content_type)
            .header("authorization", &self.auth);
        for (name, value) in headers {
            req = req.header(*name, *value);
        }
        let req = req.body(Full::new(Bytes::from(body))).unwrap();
        self.h2.send_request(req).await.expect("request")
    }

    pub async fn post(&mut self, path: &str, content_type: &str, body: Vec<u8>) -> Answer {
        let resp = self.send(path, content_type, &[], body).await;
        let status = resp.status().as_u16();
        let content_type = resp
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default();
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        Answer {
            status,
            content_type,
            body,
        }
    }

    pub async fn execute(&mut self, query: &str) -> ExecuteResponse {
        let req = ExecuteRequest {
            query: query.into(),
            ..Default::default()
        };
        let a = self
            .post(
                "/psdb.v1alpha1.Database/Execute",
                "application/proto",
                req.encode_to_vec(),
            )
            .await;
        assert_eq!(
            (a.status, a.content_type.as_str()),
            (200, "application/proto"),
            "{query}: {:?}",
            a.body
        );
        let resp = ExecuteResponse::decode(a.body).expect("ExecuteResponse");
        // A request without a session answers with autocommit on, unless it turned
        // it off (which travels in the session).
        let turned_off = query.to_ascii_lowercase().contains("autocommit = 0");
        assert!(resp
            .session
            .as_ref()
            .and_then(|s| s.vitess_session.as_ref())
            .is_some_and(|v| v.autocommit || turned_off));
        resp
    }

    /// Runs a query that must succeed; returns its result.
    pub async fn ok(&mut self, query: &str) -> QueryResult {
        let resp = self.execute(query).await;
        assert!(resp.error.is_none(), "{query}: {:?}", resp.error);
        assert!(resp.timing > 0.0);
        resp.result.expect("result")
    }

    /// Runs a query that must fail with an SQL error; returns (code, message).
    pub async fn err(&mut self, query: &str) -> (Code, String) {
        let resp = self.execute(query).await;
        let e = resp.error.unwrap_or_else(|| panic!("{query} should fail"));
        (Code::try_from(e.code).unwrap(), e.message)
    }
}

/// The values of a result, as strings (None for NULL).
pub fn values(r: &QueryResult) -> Vec<Vec<Option<String>>> {
    r.rows
        .iter()
        .map(|row| {
            let mut at = 0;
            row.lengths
                .iter()
                .map(|&len| {
                    if len < 0 {
                        return None;
                    }
                    let v = &row.values[at..at + len as usize];
                    at += len as usize;
                    Some(String::from_utf8_lossy(v).into_owned())
                })
                .collect()
        })
        .collect()
}

pub async fn count(db: &Db, table: &str) -> i64 {
    let mut c = db.direct().await;
    let n: Option<i64> = c
        .query_first(format!("SELECT COUNT(*) FROM {table}"))
        .await
        .unwrap();
    n.unwrap()
}
