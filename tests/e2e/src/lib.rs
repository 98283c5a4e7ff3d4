//! Clients for Ferry's public API, used by the end-to-end tests and the
//! `ferry-h3` command: Connect (JSON or proto) over HTTP/2 with reqwest, gRPC with
//! tonic, and any of them over HTTP/3 with quinn + h3.

pub mod config;
pub mod connect;
pub mod framed;
pub mod grpc;
pub mod h3_client;
pub mod rows;

/// One HTTP answer, whatever the transport.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub version: http::Version,
    pub headers: http::HeaderMap,
    pub body: bytes::Bytes,
    pub trailers: http::HeaderMap,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// grpc-status/grpc-message, from the trailers or (trailers-only) the headers.
    pub fn grpc_status(&self) -> Option<(i32, String)> {
        let pick = |m: &http::HeaderMap, k: &str| {
            m.get(k).and_then(|v| v.to_str().ok()).map(str::to_owned)
        };
        let status =
            pick(&self.trailers, "grpc-status").or_else(|| pick(&self.headers, "grpc-status"))?;
        let message =
            pick(&self.trailers, "grpc-message").or_else(|| pick(&self.headers, "grpc-message"));
        Some((status.parse().ok()?, message.unwrap_or_default()))
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "body is not JSON ({e}): {:?}",
                String::from_utf8_lossy(&self.body)
            )
        })
    }
}

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
