//! Raw calls in any client protocol (Connect unary, Connect streaming, gRPC), codec
//! and compression, over HTTP/2 (reqwest) or HTTP/3 (quinn + h3): the request is
//! built byte by byte and the answer taken apart the same way, so tests see exactly
//! what a client would (headers, envelope flags, end messages, trailers).
use bytes::Bytes;
use ferry_compress::Encoding;

use crate::config::Config;
use crate::connect::ConnectClient;
use crate::h3_client::H3Client;
use crate::Answer;

pub const STREAM_EXECUTE: &str = "/psdb.v1alpha1.Database/StreamExecute";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    ConnectUnary,
    ConnectStream,
    Grpc,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    H2,
    H3,
}

/// One call's shape.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    pub protocol: Protocol,
    pub json: bool,
    pub transport: Transport,
    /// How the request message is compressed (identity: not at all).
    pub send: Encoding,
    /// The accept list sent (`None`: no accept header).
    pub accept: Option<&'static str>,
}

/// A decoded answer: its HTTP head, each message (decompressed) with its envelope
/// flags, and how it ended.
#[derive(Debug)]
pub struct Outcome {
    pub answer: Answer,
    /// (flags, message) per envelope; a unary Connect answer is one message, flag 0.
    pub messages: Vec<(u8, Vec<u8>)>,
    /// The answer's encoding header (`content-encoding`, `connect-content-encoding`,
    /// `grpc-encoding`).
    pub encoding: Option<String>,
    /// Connect streaming's end message, parsed.
    pub end: Option<serde_json::Value>,
}

impl Shape {
    fn content_type(&self) -> &'static str {
        match (self.protocol, self.json) {
            (Protocol::ConnectUnary, true) => "application/json",
            (Protocol::ConnectUnary, false) => "application/proto",
            (Protocol::ConnectStream, true) => "application/connect+json",
            (Protocol::ConnectStream, false) => "application/connect+proto",
            (Protocol::Grpc, true) => "application/grpc+json",
            (Protocol::Grpc, false) => "application/grpc",
        }
    }

    fn encoding_headers(&self) -> (&'static str, &'static str) {
        match self.protocol {
            Protocol::ConnectUnary => ("content-encoding", "accept-encoding"),
            Protocol::ConnectStream => ("connect-content-encoding", "connect-accept-encoding"),
            Protocol::Grpc => ("grpc-encoding", "grpc-accept-encoding"),
        }
    }

    /// The request body for `message` (proto bytes, or JSON text when `json`).
    pub fn body(&self, message: &[u8]) -> Vec<u8> {
        let mut packed = Vec::new();
        let message = if self.send == Encoding::Identity {
            message
        } else {
            ferry_compress::compress(self.send, message, &mut packed);
            &packed
        };
        if self.protocol == Protocol::ConnectUnary {
            return message.to_vec();
        }
        let flags = u8::from(self.send != Encoding::Identity);
        let mut out = vec![flags];
        out.extend_from_slice(&(message.len() as u32).to_be_bytes());
        out.extend_from_slice(message);
        out
    }

    /// Sends `message` to `path` and takes the answer apart.
    pub async fn call(&self, cfg: &Config, path: &str, message: &[u8]) -> Outcome {
        let auth = cfg.basic_auth();
        let (content_header, accept_header) = self.encoding_headers();
        let mut headers = vec![
            ("content-type", self.content_type()),
            ("authorization", auth.as_str()),
        ];
        if self.protocol == Protocol::Grpc {
            headers.push(("te", "trailers"));
        }
        if self.send != Encoding::Identity {
            headers.push((content_header, self.send.name()));
        }
        if let Some(accept) = self.accept {
            headers.push((accept_header, accept));
        }
        let body = self.body(message);
        let answer = match self.transport {
            Transport::H2 => ConnectClient::http2(cfg).post(path, &headers, body).await,
            Transport::H3 => {
                let mut h3 = H3Client::connect(cfg).await.expect("HTTP/3 connection");
                let a = h3
                    .post(path, &headers, Bytes::from(body))
                    .await
                    .expect("HTTP/3 request");
                h3.close().await;
                a
            }
        };
        let encoding_header = if self.protocol == Protocol::ConnectUnary {
            "content-encoding"
        } else {
            content_header
        };
        let encoding = answer.header(encoding_header).map(str::to_owned);
        let codec = encoding
            .as_deref()
            .map(|name| Encoding::parse(name).expect("a known encoding"))
            .unwrap_or(Encoding::Identity);
        let mut messages = Vec::new();
        let mut end = None;
        if self.protocol == Protocol::ConnectUnary {
            messages.push((0, inflate(codec, &answer.body)));
        } else {
            let mut rest = &answer.body[..];
            while !rest.is_empty() {
                assert!(rest.len() >= 5, "a partial envelope header: {rest:?}");
                let flags = rest[0];
                let len = u32::from_be_bytes([rest[1], rest[2], rest[3], rest[4]]) as usize;
                assert!(rest.len() >= 5 + len, "a truncated envelope");
                let payload = &rest[5..5 + len];
                let payload = if flags & 1 != 0 {
                    assert_ne!(codec, Encoding::Identity, "compressed without an encoding");
                    inflate(codec, payload)
                } else {
                    payload.to_vec()
                };
                if flags & 2 != 0 {
                    end = Some(serde_json::from_slice(&payload).expect("JSON end message"));
                } else {
                    messages.push((flags, payload));
                }
                rest = &rest[5 + len..];
            }
        }
        Outcome {
            answer,
            messages,
            encoding,
            end,
        }
    }
}

fn inflate(codec: Encoding, bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    ferry_compress::decompress(codec, bytes, 1 << 30, &mut out)
        .expect("a valid compressed message");
    out
}
