//! The exchange driven with byte vectors, as the host layer drives it.

use super::*;
use ferry_proto::psdb::v1alpha1::{
    CloseSessionRequest, CloseSessionResponse, CreateSessionResponse, ExecuteRequest,
    ExecuteResponse, Session, User,
};
use ferry_proto::vitess::query::{Field, QueryResult, Row, Type};
use ferry_proto::vitess::vtrpc::{Code as VtCode, RpcError};
use prost::Message;
use serde_json::{json, Value};

const EXECUTE: &str = "/psdb.v1alpha1.Database/Execute";
const CREATE_SESSION: &str = "/psdb.v1alpha1.Database/CreateSession";
const CLOSE_SESSION: &str = "/psdb.v1alpha1.Database/CloseSession";
const STREAM_EXECUTE: &str = "/psdb.v1alpha1.Database/StreamExecute";
/// `user:pass`
const AUTH: &str = "Basic dXNlcjpwYXNz";

fn limits() -> Limits {
    Limits {
        max_request_bytes: 1000,
        max_response_bytes: 2000,
    }
}

/// An exchange under the test limits, session affinity on or off.
fn exchange(affinity: bool) -> Exchange {
    Exchange::new(std::rc::Rc::new(Config {
        limits: limits(),
        session_affinity: affinity,
        ..Config::default()
    }))
}

fn head(path: &str, content_type: &str) -> RequestHead {
    RequestHead {
        method: Some("POST".into()),
        path: Some(path.into()),
        content_type: Some(content_type.into()),
        authorization: Some(AUTH.into()),
        ..RequestHead::default()
    }
}

fn framed(message: &[u8]) -> Vec<u8> {
    let mut body = crate::envelope::header(0, message.len()).unwrap().to_vec();
    body.extend_from_slice(message);
    body
}

fn json_of(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).unwrap()
}

/// Runs a request head (with a body to follow) and returns the exchange and the step.
fn start(head: &RequestHead) -> (Exchange, RequestHeadersStep) {
    let mut ex = exchange(false);
    let step = ex.on_request_headers(head, false);
    (ex, step)
}

/// Sends `body` through a buffering exchange in one chunk; the canonical body or the reply.
fn send(head: &RequestHead, body: &[u8]) -> Result<Vec<u8>, Reply> {
    let (mut ex, step) = start(head);
    if let RequestHeadersStep::Reply(reply) = step {
        return Err(reply);
    }
    match ex.on_request_body(body.len(), true) {
        RequestBodyStep::Read => ex
            .finish_request(body.to_vec())
            .map(|p| p.as_slice().to_vec()),
        RequestBodyStep::Reply(reply) => Err(reply),
        other => panic!("expected Read, got {other:?}"),
    }
}

fn reply_of_headers(head: &RequestHead) -> Reply {
    match start(head).1 {
        RequestHeadersStep::Reply(reply) => reply,
        other => panic!("expected a reply, got {other:?}"),
    }
}

/// A Connect error reply's (HTTP status, code, message).
fn connect_error(reply: &Reply) -> (u16, String, String) {
    assert_eq!(reply.header("content-type"), Some("application/json"));
    let body = json_of(&reply.body);
    (
        reply.status,
        body["code"].as_str().unwrap().into(),
        body["message"].as_str().unwrap_or("").into(),
    )
}

/// A trailers-only gRPC error reply's (grpc-status, grpc-message).
fn grpc_error(reply: &Reply) -> (u32, String) {
    assert_eq!(reply.status, 200);
    assert!(reply.body.is_empty());
    assert!(reply
        .header("content-type")
        .unwrap()
        .starts_with("application/grpc"));
    (
        reply.header("grpc-status").unwrap().parse().unwrap(),
        reply.header("grpc-message").unwrap_or("").into(),
    )
}

// ----- helpers shared by the section files -----

/// Sends `body` in chunks of `size` bytes, keeping each as the host does; the canonical
/// body or the reply (at whichever chunk it came).
fn send_chunked(ex: &mut Exchange, body: &[u8], size: usize) -> Result<Vec<u8>, Reply> {
    let chunks: Vec<&[u8]> = body.chunks(size).collect();
    let (last, rest) = chunks.split_last().unwrap();
    for chunk in rest {
        match ex.on_request_body(chunk.len(), false) {
            RequestBodyStep::Keep { .. } => ex.keep_request(chunk.to_vec()),
            RequestBodyStep::Reply(reply) => return Err(reply),
            other => panic!("expected Keep, got {other:?}"),
        }
    }
    match ex.on_request_body(last.len(), true) {
        RequestBodyStep::Read => ex
            .finish_request(last.to_vec())
            .map(|p| p.as_slice().to_vec()),
        RequestBodyStep::Reply(reply) => Err(reply),
        other => panic!("expected Read, got {other:?}"),
    }
}

fn response(status: &str, content_type: &str) -> ResponseHead {
    ResponseHead {
        status: Some(status.into()),
        content_type: Some(content_type.into()),
        content_length: None,
        shim_instance: Some("0123456789abcdef".into()),
        grpc_status: None,
        ..Default::default()
    }
}

/// An exchange whose request (`content_type`) has been forwarded.
fn forwarded(path: &str, content_type: &str) -> Exchange {
    let (mut ex, step) = start(&head(path, content_type));
    assert!(
        matches!(
            step,
            RequestHeadersStep::Forward(_) | RequestHeadersStep::Hold(_)
        ),
        "{step:?}"
    );
    let body: &[u8] = match content_type {
        "application/proto" => return ex,
        "application/grpc+json" => &[0, 0, 0, 0, 2, b'{', b'}'],
        "application/json" => b"{}",
        _ => &[0, 0, 0, 0, 0],
    };
    assert_eq!(ex.on_request_body(body.len(), true), RequestBodyStep::Read);
    ex.finish_request(body.to_vec()).unwrap();
    ex
}

/// Drives a response with a body through an exchange: the header edits and the edit
/// that completes the body.
fn respond(ex: &mut Exchange, head: &ResponseHead, body: &[u8]) -> (HeaderEdits, ResponseEdit) {
    let ResponseHeadersStep::Forward(edits) = ex.on_response_headers(head, false) else {
        panic!("expected Forward")
    };
    assert!(edits.remove.contains(&"content-length"));
    let edit = match ex.on_response_body(body.len(), true) {
        ResponseBodyStep::Read(max) => ex.finish_response(body.get(..max).unwrap_or(body)).unwrap(),
        ResponseBodyStep::Finish(edit) => edit,
        other => panic!("{other:?}"),
    };
    (edits, edit)
}

/// The response header edits of an answer that passes: only `x-ferry-host` (Envoy's
/// stateful_session names the upstream in it) is removed.
fn stripped() -> HeaderEdits {
    HeaderEdits {
        set: Vec::new(),
        remove: vec!["x-ferry-host"],
    }
}

fn replaced(edit: &ResponseEdit) -> &[u8] {
    match &edit.body {
        BodyEdit::Replace(body) => body,
        other => panic!("{other:?}"),
    }
}

fn ok_trailers() -> Vec<Header> {
    vec![("grpc-status", "0".to_owned())]
}

fn execute_response() -> ExecuteResponse {
    ExecuteResponse {
        session: Some(Session {
            signature: b"sig".to_vec(),
            vitess_session: None,
        }),
        result: Some(QueryResult {
            fields: vec![
                Field {
                    name: "id".into(),
                    r#type: Type::Int64 as i32,
                    column_length: 20,
                    ..Default::default()
                },
                Field {
                    name: "n".into(),
                    ..Default::default()
                },
            ],
            rows_affected: 3,
            insert_id: 7,
            rows: vec![Row {
                lengths: vec![1, -1],
                values: b"1".to_vec(),
            }],
            ..Default::default()
        }),
        error: None,
        timing: 0.25,
    }
}

fn pinned_session(holder: &str) -> Session {
    let mut signature = vec![1u8];
    signature.extend_from_slice(&[7; 4 + 16 + 8 + 16 + 8]);
    signature.push(1);
    signature.push(holder.len() as u8);
    signature.extend_from_slice(holder.as_bytes());
    signature.extend_from_slice(&[9; 32]);
    Session {
        signature,
        vitess_session: None,
    }
}

mod affinity;
mod compression;
mod connect_get;
mod early_data;
mod grpc_web;
mod header_hold;
mod requests;
mod responses;
mod streams;
