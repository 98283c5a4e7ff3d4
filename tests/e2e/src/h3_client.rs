//! HTTP/3 over QUIC with quinn + h3 (curl here has no HTTP/3).
use crate::config::Config;
use crate::{Answer, BoxError};
use bytes::{Buf, Bytes, BytesMut};
use std::net::ToSocketAddrs;
use std::sync::Arc;

/// TLS 1.3 only, trusting the dev CA, ALPN h3: what every HTTP/3 client here uses.
pub fn tls_config(cfg: &Config) -> Result<rustls::ClientConfig, BoxError> {
    crate::config::install_crypto_provider();
    let mut roots = rustls::RootCertStore::empty();
    for der in cfg.ca_der() {
        roots.add(der)?;
    }
    let mut tls = rustls::ClientConfig::builder_with_protocol_versions(&[&rustls::version::TLS13])
        .with_root_certificates(roots)
        .with_no_client_auth();
    tls.alpn_protocols = vec![b"h3".to_vec()];
    Ok(tls)
}

/// The UDP receive buffer asked for (the kernel grants at most `net.core.rmem_max`).
const RECV_BUFFER: usize = 7 << 20;

pub struct H3Client {
    send: h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>,
    authority: String,
    _driver: tokio::task::JoinHandle<()>,
    endpoint: quinn::Endpoint,
}

impl H3Client {
    pub async fn connect(cfg: &Config) -> Result<H3Client, BoxError> {
        let quic = quinn::crypto::rustls::QuicClientConfig::try_from(tls_config(cfg)?)?;
        let addr = (cfg.host.as_str(), cfg.port)
            .to_socket_addrs()?
            .next()
            .ok_or("no address for FERRY_HOST")?;
        let bind: std::net::SocketAddr = if addr.is_ipv6() {
            "[::]:0"
        } else {
            "0.0.0.0:0"
        }
        .parse()?;
        // A receive buffer that holds a sender's burst: the kernel's default (~208 KiB)
        // drops part of Envoy's GSO bursts on a large answer
        // (docs/benchmarks/http3.md "HTTP/3 bulk transfer"). quic-go asks for 7 MiB the same way; capped by rmem_max.
        let socket = socket2::Socket::new(
            socket2::Domain::for_address(bind),
            socket2::Type::DGRAM,
            Some(socket2::Protocol::UDP),
        )?;
        let _ = socket.set_recv_buffer_size(RECV_BUFFER);
        socket.set_nonblocking(true)?;
        socket.bind(&bind.into())?;
        let mut endpoint = quinn::Endpoint::new(
            quinn::EndpointConfig::default(),
            None,
            socket.into(),
            Arc::new(quinn::TokioRuntime),
        )?;
        endpoint.set_default_client_config(quinn::ClientConfig::new(Arc::new(quic)));
        let conn = endpoint.connect(addr, "localhost")?.await?;
        let (mut driver, send) = h3::client::new(h3_quinn::Connection::new(conn)).await?;
        let driver = tokio::spawn(async move {
            let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
        });
        Ok(H3Client {
            send,
            authority: format!("{}:{}", cfg.host, cfg.port),
            _driver: driver,
            endpoint,
        })
    }

    pub async fn post(
        &mut self,
        path: &str,
        headers: &[(&str, &str)],
        body: Bytes,
    ) -> Result<Answer, BoxError> {
        self.request(http::Method::POST, path, headers, body).await
    }

    /// A GET without a body (`path` carries the query string).
    pub async fn get(&mut self, path: &str, headers: &[(&str, &str)]) -> Result<Answer, BoxError> {
        self.request(http::Method::GET, path, headers, Bytes::new())
            .await
    }

    pub async fn request(
        &mut self,
        method: http::Method,
        path: &str,
        headers: &[(&str, &str)],
        body: Bytes,
    ) -> Result<Answer, BoxError> {
        let mut req = http::Request::builder()
            .method(method)
            .uri(format!("https://{}{}", self.authority, path));
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let mut stream = self.send.send_request(req.body(())?).await?;
        if !body.is_empty() {
            stream.send_data(body).await?;
        }
        stream.finish().await?;
        let resp = stream.recv_response().await?;
        let mut out = BytesMut::new();
        while let Some(mut chunk) = stream.recv_data().await? {
            while chunk.has_remaining() {
                let c = chunk.chunk();
                out.extend_from_slice(c);
                let n = c.len();
                chunk.advance(n);
            }
        }
        let trailers = stream.recv_trailers().await?.unwrap_or_default();
        Ok(Answer {
            status: resp.status().as_u16(),
            version: resp.version(),
            headers: resp.headers().clone(),
            body: out.freeze(),
            trailers,
        })
    }

    pub async fn close(self) {
        self.endpoint.close(0u32.into(), b"done");
        self.endpoint.wait_idle().await;
    }
}
