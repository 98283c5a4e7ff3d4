//! The filter (lib.rs's `Filter`, the adapter and the real `Exchange`) driven over
//! the mock host with real requests and answers, callback by callback as Envoy
//! delivers them. Every test also checks that no call broke a phase rule.

use std::rc::Rc;

use prost::Message;

use ferry_filter_core::config::Config;
use ferry_filter_core::exchange::Exchange;
use ferry_filter_core::header_hold::Hold;
use ferry_filter_core::limits::Limits;
use ferry_proto::psdb::v1alpha1::{CloseSessionRequest, ExecuteRequest, ExecuteResponse, Session};
use ferry_proto::vitess::query::{Field, QueryResult, Row, Type};

use crate::host::{Action, Body, Map, Status, WHOLE_BODY};
use crate::mock_host::{Call, MockHost, Phase, Stream};

const EXECUTE: &str = "/psdb.v1alpha1.Database/Execute";
const STREAM_EXECUTE: &str = "/psdb.v1alpha1.Database/StreamExecute";
const CLOSE_SESSION: &str = "/psdb.v1alpha1.Database/CloseSession";
/// `user:pass`
const AUTH: &str = "Basic dXNlcjpwYXNz";
/// `x-ferry-host` for the shim at 127.0.0.1:18084.
const HOLDER_B64: &str = "MTI3LjAuMC4xOjE4MDg0";

fn limits() -> Limits {
    Limits {
        max_request_bytes: 1000,
        max_response_bytes: 2000,
    }
}

fn stream_with(limits: Limits, session_affinity: bool) -> Stream {
    Stream::new(Exchange::new(Rc::new(Config {
        limits,
        session_affinity,
        ..Config::default()
    })))
}

fn stream() -> Stream {
    stream_with(limits(), false)
}

fn affine_stream() -> Stream {
    stream_with(limits(), true)
}

fn post<'a>(path: &'a str, content_type: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![
        (":method", "POST"),
        (":path", path),
        (":authority", "gateway.example"),
        ("content-type", content_type),
        ("authorization", AUTH),
    ]
}

/// The shim's success headers for a body of `len` bytes (`len` as text).
/// The shim's success without a declared size (a large answer it sends in pieces).
fn shim_undeclared() -> Vec<(&'static str, &'static str)> {
    vec![
        (":status", "200"),
        ("content-type", "application/proto"),
        ("ferry-shim-instance", "0123456789abcdef"),
    ]
}

fn shim_ok(len: &str) -> Vec<(&str, &str)> {
    vec![
        (":status", "200"),
        ("content-type", "application/proto"),
        ("content-length", len),
        ("ferry-shim-instance", "0123456789abcdef"),
        ("x-ferry-host", HOLDER_B64),
    ]
}

/// One envelope (gRPC frame, Connect streaming envelope): flags, length, message.
fn envelope(flags: u8, message: &[u8]) -> Vec<u8> {
    let mut body = vec![flags];
    body.extend_from_slice(&u32::try_from(message.len()).unwrap().to_be_bytes());
    body.extend_from_slice(message);
    body
}

fn framed(message: &[u8]) -> Vec<u8> {
    envelope(0, message)
}

fn json(bytes: &[u8]) -> serde_json::Value {
    serde_json::from_slice(bytes).unwrap()
}

fn execute_response() -> ExecuteResponse {
    ExecuteResponse {
        session: Some(Session {
            signature: b"sig".to_vec(),
            vitess_session: None,
        }),
        result: Some(QueryResult {
            fields: vec![Field {
                name: "id".into(),
                r#type: Type::Int64 as i32,
                ..Default::default()
            }],
            rows_affected: 3,
            rows: vec![Row {
                lengths: vec![1],
                values: b"1".to_vec(),
            }],
            ..Default::default()
        }),
        error: None,
        timing: 0.25,
    }
}

/// A session the shim at `holder` sealed as pinned (`shim/src/sessions/seal.rs`'s layout;
/// the MAC is not checked by the filter).
fn pinned_session(holder: &str) -> Session {
    let mut signature = vec![1u8];
    signature.extend_from_slice(&[7; 4 + 16 + 8 + 16 + 8]);
    signature.push(1);
    signature.push(u8::try_from(holder.len()).unwrap());
    signature.extend_from_slice(holder.as_bytes());
    signature.extend_from_slice(&[9; 32]);
    Session {
        signature,
        vitess_session: None,
    }
}

fn pinned_execute() -> Vec<u8> {
    ExecuteRequest {
        session: Some(pinned_session("127.0.0.1:18084")),
        query: "INSERT INTO t VALUES (1)".into(),
        ..Default::default()
    }
    .encode_to_vec()
}

/// The body writes made, with their phase.
fn body_writes(host: &MockHost) -> Vec<(Phase, &Call)> {
    host.calls
        .iter()
        .filter(|(_, call)| matches!(call, Call::SetBody { .. }))
        .map(|(phase, call)| (*phase, call))
        .collect()
}

fn reads_of(host: &MockHost, which: Body) -> usize {
    host.calls
        .iter()
        .filter(|(_, call)| matches!(call, Call::Body { body, .. } if *body == which))
        .count()
}

// ----- helpers shared by the section files -----

fn roomy() -> Limits {
    Limits {
        max_request_bytes: 1000,
        max_response_bytes: 1 << 20,
    }
}

/// An answer of 4,000 rows of text (~190 KB): past the 64 KiB sample, and it pays.
fn compressible_answer() -> Vec<u8> {
    let mut answer = execute_response();
    if let Some(result) = answer.result.as_mut() {
        result.rows = (0..4000)
            .map(|i| {
                let value = format!("{i}: the quick brown fox jumps over the lazy dog");
                Row {
                    lengths: vec![value.len() as i64],
                    values: value.into_bytes(),
                }
            })
            .collect();
    }
    answer.encode_to_vec()
}

/// A gRPC-Web answer's frames (base64-decoded first for text): (flags, payload).
fn web_frames(body: &[u8], text: bool) -> Vec<(u8, Vec<u8>)> {
    use base64::Engine as _;
    let bytes = if text {
        // Padded segments one after the other: decode up to each padding.
        let mut out = Vec::new();
        let mut rest = body;
        while !rest.is_empty() {
            let end = rest
                .iter()
                .position(|&b| b == b'=')
                .map_or(rest.len(), |i| {
                    i + rest[i..].iter().take_while(|&&b| b == b'=').count()
                });
            out.extend(
                base64::engine::general_purpose::STANDARD
                    .decode(&rest[..end])
                    .unwrap(),
            );
            rest = &rest[end..];
        }
        out
    } else {
        body.to_vec()
    };
    let mut frames = Vec::new();
    let mut rest = &bytes[..];
    while !rest.is_empty() {
        let len = u32::from_be_bytes(rest[1..5].try_into().unwrap()) as usize;
        frames.push((rest[0], rest[5..5 + len].to_vec()));
        rest = &rest[5 + len..];
    }
    frames
}

mod affinity;
mod chunked_requests;
mod enveloped_answers;
mod grpc_web;
mod host_calls;
mod incomplete_answers;
mod metrics;
mod requests;
