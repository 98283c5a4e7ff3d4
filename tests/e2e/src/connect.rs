//! Connect (unary) over HTTPS with reqwest: HTTP/2 by ALPN, or HTTP/1.1.
use crate::config::Config;
use crate::{Answer, BoxError};
use ferry_proto::psdb::v1alpha1::{ExecuteRequest, ExecuteResponse, Session};
use prost::Message;

pub const EXECUTE: &str = "/psdb.v1alpha1.Database/Execute";
pub const CREATE_SESSION: &str = "/psdb.v1alpha1.Database/CreateSession";
pub const CLOSE_SESSION: &str = "/psdb.v1alpha1.Database/CloseSession";

#[derive(Clone)]
pub struct ConnectClient {
    http: reqwest::Client,
    pub cfg: Config,
}

impl ConnectClient {
    /// HTTP/2 (negotiated by ALPN over TLS 1.3).
    pub fn http2(cfg: &Config) -> ConnectClient {
        Self::build(cfg, false)
    }

    pub fn http1(cfg: &Config) -> ConnectClient {
        Self::build(cfg, true)
    }

    fn build(cfg: &Config, http1: bool) -> ConnectClient {
        crate::config::install_crypto_provider();
        let roots = cfg
            .ca_der()
            .into_iter()
            .map(|der| reqwest::Certificate::from_der(&der).expect("CA certificate"));
        let mut b = reqwest::Client::builder()
            .tls_certs_only(roots)
            .https_only(true);
        if http1 {
            b = b.http1_only();
        }
        ConnectClient {
            http: b.build().expect("reqwest client"),
            cfg: cfg.clone(),
        }
    }

    /// Any request, as raw as the tests need it.
    pub async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        headers: &[(&str, &str)],
        body: Vec<u8>,
    ) -> Result<Answer, BoxError> {
        let resp = self.request(method, path, headers, body).send().await?;
        let status = resp.status().as_u16();
        let version = resp.version();
        let headers = resp.headers().clone();
        let body = resp.bytes().await?;
        Ok(Answer {
            status,
            version,
            headers,
            body,
            trailers: http::HeaderMap::new(),
        })
    }

    /// A POST whose answer is read by the caller as it comes (headers first).
    pub async fn open(
        &self,
        path: &str,
        headers: &[(&str, &str)],
        body: Vec<u8>,
    ) -> reqwest::Response {
        self.request(reqwest::Method::POST, path, headers, body)
            .send()
            .await
            .expect("request to Ferry")
    }

    fn request(
        &self,
        method: reqwest::Method,
        path: &str,
        headers: &[(&str, &str)],
        body: Vec<u8>,
    ) -> reqwest::RequestBuilder {
        let mut rb = self
            .http
            .request(method, format!("{}{}", self.cfg.base_url(), path));
        for (k, v) in headers {
            rb = rb.header(*k, *v);
        }
        rb.body(body)
    }

    pub async fn post(&self, path: &str, headers: &[(&str, &str)], body: Vec<u8>) -> Answer {
        self.send(reqwest::Method::POST, path, headers, body)
            .await
            .expect("request to Ferry")
    }

    /// Connect JSON, authenticated: the @planetscale/database shape.
    pub async fn execute_json(&self, query: &str) -> Answer {
        self.execute_json_in(None, query).await
    }

    /// [`ConnectClient::execute_json`] carrying a session, as the driver sends back the
    /// last one it got.
    pub async fn execute_json_in(&self, session: Option<&Session>, query: &str) -> Answer {
        let auth = self.cfg.basic_auth();
        let body = serde_json::json!({ "query": query, "session": session })
            .to_string()
            .into_bytes();
        self.post(
            EXECUTE,
            &[
                ("content-type", "application/json"),
                ("authorization", &auth),
            ],
            body,
        )
        .await
    }

    /// Connect proto, authenticated; asserts HTTP 200 and decodes the answer.
    pub async fn execute_proto(&self, query: &str) -> ExecuteResponse {
        let auth = self.cfg.basic_auth();
        let req = ExecuteRequest {
            query: query.into(),
            ..Default::default()
        };
        let a = self
            .post(
                EXECUTE,
                &[
                    ("content-type", "application/proto"),
                    ("authorization", &auth),
                ],
                req.encode_to_vec(),
            )
            .await;
        assert_eq!(
            a.status,
            200,
            "Connect proto answer: {:?}",
            String::from_utf8_lossy(&a.body)
        );
        assert_eq!(a.header("content-type"), Some("application/proto"));
        ExecuteResponse::decode(a.body).expect("ExecuteResponse proto")
    }
}
