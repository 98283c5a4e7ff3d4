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

// ----- request: conversions -----

#[test]
fn connect_json_execute_becomes_canonical_proto() {
    let (_, step) = start(&head(EXECUTE, "application/json"));
    let (RequestHeadersStep::Forward(edits) | RequestHeadersStep::Hold(edits)) = step else {
        panic!("{step:?}")
    };
    assert_eq!(edits.get("content-type"), Some("application/proto"));
    assert_eq!(edits.get("x-ferry-rpc"), Some("Execute"));
    assert_eq!(edits.get("x-ferry-protocol"), Some("connect-json"));
    for removed in [
        "content-length",
        "te",
        "grpc-encoding",
        "grpc-accept-encoding",
        "accept-encoding",
    ] {
        assert!(edits.remove.contains(&removed), "{removed}");
    }
    assert!(!edits.remove.contains(&"authorization"));

    // database-js: null session, unknown fields ignored.
    let body = br#"{"query":"SELECT 1","session":null,"somethingNew":{"x":1}}"#;
    let proto = send(&head(EXECUTE, "application/json; charset=utf-8"), body).unwrap();
    let req = ExecuteRequest::decode(&proto[..]).unwrap();
    assert_eq!(req.query, "SELECT 1");
    assert!(req.session.is_none());

    let with_session = json!({
        "query": "COMMIT",
        "session": {"signature": "c2ln", "vitessSession": {"inTransaction": true, "autocommit": true}}
    });
    let proto = send(
        &head(EXECUTE, "application/json"),
        with_session.to_string().as_bytes(),
    )
    .unwrap();
    let req = ExecuteRequest::decode(&proto[..]).unwrap();
    let session = req.session.unwrap();
    assert_eq!(session.signature, b"sig");
    assert!(session.vitess_session.unwrap().in_transaction);
}

#[test]
fn connect_json_create_and_close_session() {
    let proto = send(&head(CREATE_SESSION, "application/json"), b"{}").unwrap();
    assert!(proto.is_empty(), "CreateSessionRequest is empty");
    let body = br#"{"session":{"signature":"AQI="}}"#;
    let proto = send(&head(CLOSE_SESSION, "application/json"), body).unwrap();
    let req = CloseSessionRequest::decode(&proto[..]).unwrap();
    assert_eq!(req.session.unwrap().signature, vec![1, 2]);
}

#[test]
fn connect_proto_streams_untouched() {
    let (mut ex, step) = start(&head(EXECUTE, "application/proto"));
    let (RequestHeadersStep::Forward(edits) | RequestHeadersStep::Hold(edits)) = step else {
        panic!("{step:?}")
    };
    assert_eq!(edits.get("x-ferry-protocol"), Some("connect-proto"));
    assert!(
        !edits.remove.contains(&"content-length"),
        "the body is not rewritten"
    );
    // Held (not rewritten) until its statement is read for `x-ferry-class`.
    assert_eq!(ex.on_request_body(400, false), RequestBodyStep::Wait);
    assert_eq!(ex.on_request_body(800, true), RequestBodyStep::Route(800));
    assert_eq!(
        ex.on_request_body(0, true),
        RequestBodyStep::Continue,
        "done: passes"
    );
}

#[test]
fn connect_proto_without_body_is_an_empty_message() {
    let mut ex = exchange(false);
    let step = ex.on_request_headers(&head(CREATE_SESSION, "application/proto"), true);
    assert!(
        matches!(
            step,
            RequestHeadersStep::Forward(_) | RequestHeadersStep::Hold(_)
        ),
        "{step:?}"
    );
}

#[test]
fn grpc_proto_drops_the_frame_header_without_copying() {
    let msg = ExecuteRequest {
        query: "SELECT 2".into(),
        ..Default::default()
    }
    .encode_to_vec();
    for ct in ["application/grpc", "application/grpc+proto"] {
        let (_, step) = start(&head(EXECUTE, ct));
        let (RequestHeadersStep::Forward(edits) | RequestHeadersStep::Hold(edits)) = step else {
            panic!("{step:?}")
        };
        assert_eq!(edits.get("x-ferry-protocol"), Some("grpc-proto"));
        assert_eq!(send(&head(EXECUTE, ct), &framed(&msg)).unwrap(), msg);
    }
    // The payload is a view into the body the host handed over.
    let (mut ex, _) = start(&head(EXECUTE, "application/grpc"));
    let body = framed(&msg);
    let ptr = body.as_ptr();
    assert_eq!(ex.on_request_body(body.len(), true), RequestBodyStep::Read);
    let payload = ex.finish_request(body).unwrap();
    assert_eq!(payload.as_slice().as_ptr(), ptr.wrapping_add(5));
}

#[test]
fn grpc_json_is_unframed_and_encoded() {
    let proto = send(
        &head(EXECUTE, "application/grpc+json"),
        &framed(br#"{"query":"SELECT 3"}"#),
    )
    .unwrap();
    assert_eq!(
        ExecuteRequest::decode(&proto[..]).unwrap().query,
        "SELECT 3"
    );
}

#[test]
fn a_rewritten_request_is_kept_chunk_by_chunk_until_its_end() {
    // Held headers (Execute's class): each chunk is kept and the callback pauses (a
    // `Continue` would let the headers go on).
    let (mut ex, step) = start(&head(EXECUTE, "application/json"));
    assert!(matches!(step, RequestHeadersStep::Hold(_)), "{step:?}");
    assert_eq!(
        ex.on_request_body(10, false),
        RequestBodyStep::Keep { pause: true }
    );
    assert_eq!(
        ex.on_request_body(20, false),
        RequestBodyStep::Keep { pause: true }
    );
    assert_eq!(ex.on_request_body(30, true), RequestBodyStep::Read);
    // Headers gone on (an RPC without a class): each emptied chunk goes on.
    let (mut ex, step) = start(&head(CREATE_SESSION, "application/json"));
    assert!(matches!(step, RequestHeadersStep::Forward(_)), "{step:?}");
    assert_eq!(
        ex.on_request_body(10, false),
        RequestBodyStep::Keep { pause: false }
    );
    assert_eq!(ex.on_request_body(0, true), RequestBodyStep::Read);
}

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

#[test]
fn kept_chunks_make_the_message_whatever_the_protocol() {
    let query = format!("INSERT INTO t VALUES ('{}')", "x".repeat(300));
    let msg = ExecuteRequest {
        query: query.clone(),
        ..Default::default()
    }
    .encode_to_vec();
    let json = serde_json::to_vec(&json!({ "query": query })).unwrap();
    for (ct, body) in [
        ("application/json", json.clone()),
        ("application/grpc", framed(&msg)),
        ("application/grpc+json", framed(&json)),
        ("application/connect+proto", framed(&msg)),
    ] {
        for size in [1, 7, 64, body.len()] {
            let path = if ct.starts_with("application/connect") {
                STREAM_EXECUTE
            } else {
                EXECUTE
            };
            let (mut ex, _) = start(&head(path, ct));
            let canonical = send_chunked(&mut ex, &body, size).unwrap();
            assert_eq!(
                ExecuteRequest::decode(&canonical[..]).unwrap().query,
                query,
                "{ct} in chunks of {size}"
            );
        }
    }
}

#[test]
fn kept_chunks_count_against_the_limit_as_they_arrive() {
    let json = serde_json::to_vec(&json!({ "query": "x".repeat(1100) })).unwrap();
    for affinity in [false, true] {
        let mut ex = exchange(affinity);
        ex.on_request_headers(&head(EXECUTE, "application/json"), false);
        // Refused at the chunk that passes the limit, before the end.
        let (mut kept, mut refused) = (0, None);
        for chunk in json.chunks(300) {
            match ex.on_request_body(chunk.len(), false) {
                RequestBodyStep::Keep { .. } => {
                    ex.keep_request(chunk.to_vec());
                    kept += chunk.len();
                }
                RequestBodyStep::Reply(reply) => {
                    refused = Some(reply);
                    break;
                }
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(kept, 900);
        let (status, code, message) = connect_error(&refused.unwrap());
        assert_eq!((status, code.as_str()), (429, "resource_exhausted"));
        assert!(message.contains("1000-byte limit"), "{message}");
        assert_eq!(ex.on_request_body(10, true), RequestBodyStep::Continue);
    }
}

#[test]
fn a_bad_message_is_found_at_the_end_of_the_kept_chunks() {
    let (mut ex, _) = start(&head(CREATE_SESSION, "application/json"));
    let (status, code, message) =
        connect_error(&send_chunked(&mut ex, br#"{"query": "SELECT 1""#, 5).unwrap_err());
    assert_eq!(
        (status, code.as_str()),
        (400, "invalid_argument"),
        "{message}"
    );
    let (mut ex, _) = start(&head(EXECUTE, "application/grpc"));
    let mut body = framed(b"\x0a\x02hi");
    body.push(0);
    let (status, message) = grpc_error(&send_chunked(&mut ex, &body, 3).unwrap_err());
    assert_eq!(status, 3, "{message}");
}

#[test]
fn request_trailers_end_a_kept_body() {
    // The last body callback paused (held headers): the host still has the (emptied)
    // body, which the message replaces.
    let (mut ex, _) = start(&head(EXECUTE, "application/grpc"));
    assert_eq!(
        ex.on_request_body(10, false),
        RequestBodyStep::Keep { pause: true }
    );
    assert_eq!(ex.on_request_trailers(), RequestBodyStep::Read);
    let (mut ex, _) = start(&head(EXECUTE, "application/proto"));
    assert_eq!(ex.on_request_trailers(), RequestBodyStep::Route(0));
    // The last chunk went on (headers not held): no body to write the message into.
    let msg = ExecuteRequest {
        query: "SELECT 1".into(),
        ..Default::default()
    }
    .encode_to_vec();
    let body = framed(&msg);
    let mut ex = exchange(false).with_hold(Hold::Missing);
    ex.on_request_headers(&head(EXECUTE, "application/grpc"), false);
    assert_eq!(
        ex.on_request_body(body.len(), false),
        RequestBodyStep::Keep { pause: false }
    );
    ex.keep_request(body);
    let RequestBodyStep::Reply(reply) = ex.on_request_trailers() else {
        panic!()
    };
    let (status, message) = grpc_error(&reply);
    assert_eq!(status, 3);
    assert!(message.contains("ended with trailers"), "{message}");
    // A message that is wrong anyway gets its own error.
    let mut ex = exchange(false).with_hold(Hold::Missing);
    ex.on_request_headers(&head(EXECUTE, "application/grpc"), false);
    assert_eq!(
        ex.on_request_body(3, false),
        RequestBodyStep::Keep { pause: false }
    );
    ex.keep_request(vec![0, 0, 0]);
    let RequestBodyStep::Reply(reply) = ex.on_request_trailers() else {
        panic!()
    };
    let (status, message) = grpc_error(&reply);
    assert_eq!(status, 3);
    assert!(!message.contains("trailers"), "{message}");
}

// ----- request: refusals -----

#[test]
fn unknown_paths_are_unimplemented_404() {
    for path in ["/psdb.v1alpha1.Database/Nope", "/nope"] {
        let (status, code, message) =
            connect_error(&reply_of_headers(&head(path, "application/json")));
        assert_eq!((status, code.as_str()), (404, "unimplemented"), "{path}");
        assert!(message.contains(path), "{message}");
        let (status, _) = grpc_error(&reply_of_headers(&head(path, "application/grpc")));
        assert_eq!(status, 12);
    }
    // Unknown content type too: the path is checked first.
    let (status, ..) = connect_error(&reply_of_headers(&head("/nope", "text/plain")));
    assert_eq!(status, 404);
}

#[test]
fn wrong_method_is_405() {
    let mut h = head(EXECUTE, "application/json");
    h.method = Some("GET".into());
    let reply = reply_of_headers(&h);
    assert_eq!(reply.header("allow"), Some("POST"));
    let (status, code, _) = connect_error(&reply);
    assert_eq!((status, code.as_str()), (405, "unimplemented"));
}

#[test]
fn content_types() {
    let mut missing = head(EXECUTE, "");
    missing.content_type = None;
    let reply = reply_of_headers(&missing);
    assert_eq!(reply.header("accept-post"), Some(protocol::ACCEPTED));
    assert_eq!(
        connect_error(&reply),
        (
            415,
            "invalid_argument".into(),
            "missing content-type".into()
        )
    );

    let reply = reply_of_headers(&head(EXECUTE, "text/plain"));
    assert_eq!(
        connect_error(&reply),
        (
            415,
            "invalid_argument".into(),
            "unsupported content-type \"text/plain\"".into()
        )
    );
    // gRPC-Web that Envoy's grpc_web filter did not convert is served here (JSON not).
    let reply = reply_of_headers(&head(EXECUTE, "application/grpc-web+json"));
    let (status, code, message) = connect_error(&reply);
    assert_eq!((status, code.as_str()), (415, "unimplemented"));
    assert!(
        message.starts_with("gRPC-Web with JSON is not served"),
        "{message}"
    );
    // A streaming content type for a unary RPC (and the reverse), as connect-go.
    let reply = reply_of_headers(&head(EXECUTE, "application/connect+json"));
    assert_eq!(
        connect_error(&reply),
        (
            415,
            "unimplemented".into(),
            "Execute is a unary RPC: use application/proto, application/json or gRPC, not application/connect+json".into()
        )
    );
    let reply = reply_of_headers(&head(STREAM_EXECUTE, "application/json"));
    assert_eq!(connect_error(&reply).0, 415);
}

#[test]
fn unknown_compression_is_unimplemented_and_lists_the_supported() {
    let mut h = head(EXECUTE, "application/json");
    h.encodings = vec![("content-encoding", "br".into())];
    let reply = reply_of_headers(&h);
    let (status, code, message) = connect_error(&reply);
    assert_eq!((status, code.as_str()), (501, "unimplemented"));
    assert_eq!(
        message,
        "content-encoding \"br\" is not supported (supported: identity, gzip, zstd, snappy, s2)"
    );
    assert_eq!(
        reply.header("accept-encoding"),
        Some("identity, gzip, zstd, snappy, s2")
    );
    for known in ["identity", "gzip", "zstd", "snappy", "s2"] {
        h.encodings = vec![("content-encoding", known.into())];
        assert!(
            matches!(
                start(&h).1,
                RequestHeadersStep::Forward(_) | RequestHeadersStep::Hold(_)
            ),
            "{known}"
        );
    }

    let mut h = head(EXECUTE, "application/grpc");
    h.encodings = vec![("grpc-encoding", "lz4".into())];
    let reply = reply_of_headers(&h);
    assert_eq!(grpc_error(&reply).0, 12);
    assert_eq!(
        reply.header("grpc-accept-encoding"),
        Some("identity, gzip, zstd, snappy, s2")
    );
    // A compressed frame without grpc-encoding (the gRPC spec: internal).
    let reply = send(&head(EXECUTE, "application/grpc"), &[1, 0, 0, 0, 0]).unwrap_err();
    assert_eq!(
        grpc_error(&reply),
        (
            13,
            "the gRPC message is flagged compressed but the request names no encoding".into()
        )
    );
}

#[test]
fn credentials_are_required() {
    for auth in [
        None,
        Some("Bearer x"),
        Some("Basic %%%"),
        Some("Basic dXNlcg=="),
    ] {
        let mut h = head(EXECUTE, "application/json");
        h.authorization = auth.map(Into::into);
        let (status, code, _) = connect_error(&reply_of_headers(&h));
        assert_eq!(
            (status, code.as_str()),
            (401, "unauthenticated"),
            "{auth:?}"
        );
        let mut h = head(EXECUTE, "application/grpc");
        h.authorization = auth.map(Into::into);
        assert_eq!(grpc_error(&reply_of_headers(&h)).0, 16);
    }
}

#[test]
fn oversized_requests_are_refused_early() {
    // Declared.
    let mut h = head(EXECUTE, "application/json");
    h.content_length = Some("1001".into());
    let (status, code, message) = connect_error(&reply_of_headers(&h));
    assert_eq!((status, code.as_str()), (429, "resource_exhausted"));
    assert_eq!(message, "request body is larger than the 1000-byte limit");
    h.content_type = Some("application/grpc".into());
    assert_eq!(grpc_error(&reply_of_headers(&h)).0, 8);
    h.content_length = Some("1000".into());
    assert!(matches!(start(&h).1, RequestHeadersStep::Hold(_)));

    // Arriving, before the end of the body.
    let (mut ex, _) = start(&head(EXECUTE, "application/json"));
    assert_eq!(
        ex.on_request_body(600, false),
        RequestBodyStep::Keep { pause: true }
    );
    let RequestBodyStep::Reply(reply) = ex.on_request_body(401, false) else {
        panic!()
    };
    assert_eq!(connect_error(&reply).0, 429);
    // The exchange is over: the local reply passes on its way out.
    assert_eq!(ex.on_request_body(1500, true), RequestBodyStep::Continue);
    let resp = ResponseHead {
        status: Some("429".into()),
        content_type: Some("application/json".into()),
        ..Default::default()
    };
    assert_eq!(
        ex.on_response_headers(&resp, false),
        ResponseHeadersStep::Forward(HeaderEdits::default())
    );
    assert_eq!(ex.on_response_body(100, true), ResponseBodyStep::Continue);

    // Held Connect proto (buffered by the host for its class): the buffered total.
    let (mut ex, _) = start(&head(EXECUTE, "application/proto"));
    assert_eq!(ex.on_request_body(600, false), RequestBodyStep::Wait);
    let RequestBodyStep::Reply(reply) = ex.on_request_body(1001, true) else {
        panic!()
    };
    assert_eq!(connect_error(&reply).1, "resource_exhausted");
}

#[test]
fn malformed_bodies_are_invalid_argument() {
    let json = |path: &str, body: &[u8]| {
        connect_error(&send(&head(path, "application/json"), body).unwrap_err())
    };
    let (status, code, message) = json(EXECUTE, b"{\"query\": ");
    assert_eq!((status, code.as_str()), (400, "invalid_argument"));
    assert!(
        message.starts_with("invalid Execute request: invalid JSON: EOF while parsing"),
        "{message}"
    );
    assert!(json(EXECUTE, br#"{"query": 5}"#).2.contains("invalid type"));
    assert!(json(EXECUTE, br#"{"query": "x"} trailing"#)
        .2
        .contains("trailing characters"));
    assert!(json(CREATE_SESSION, b"").2.contains("EOF while parsing"));
    assert!(json(CLOSE_SESSION, b"[]")
        .2
        .starts_with("invalid CloseSession request"));

    let grpc = |ct: &str, body: &[u8]| grpc_error(&send(&head(EXECUTE, ct), body).unwrap_err());
    assert_eq!(
        grpc("application/grpc", b""),
        (3, "missing gRPC message: the request body is empty".into())
    );
    assert_eq!(grpc("application/grpc", &[0, 0]).0, 3);
    assert_eq!(
        grpc("application/grpc", &[0, 0, 0, 0, 4, 1]).1,
        "truncated gRPC message: the frame declares 4 bytes, 1 arrived"
    );
    let mut two = framed(b"");
    two.extend(framed(b""));
    assert_eq!(
        grpc("application/grpc", &two).1,
        "more than one message in a gRPC request"
    );
    assert_eq!(
        grpc("application/grpc", &[0, 0, 0, 0, 0, 9]).1,
        "1 trailing bytes after the gRPC message"
    );
    // A frame whose message is not an ExecuteRequest (field 2 claims 5 bytes, has 1).
    let (status, message) = grpc("application/grpc+proto", &framed(&[0x12, 0x05, b'x']));
    assert_eq!(status, 3);
    assert!(
        message.starts_with("invalid Execute request: invalid protobuf:"),
        "{message}"
    );
    assert_eq!(grpc("application/grpc+json", &framed(b"{")).0, 3);
}

#[test]
fn missing_bodies() {
    let mut ex = exchange(false);
    let RequestHeadersStep::Reply(reply) =
        ex.on_request_headers(&head(EXECUTE, "application/json"), true)
    else {
        panic!()
    };
    assert_eq!(connect_error(&reply).1, "invalid_argument");
    let mut ex = exchange(false);
    let RequestHeadersStep::Reply(reply) =
        ex.on_request_headers(&head(EXECUTE, "application/grpc"), true)
    else {
        panic!()
    };
    assert_eq!(
        grpc_error(&reply),
        (3, "missing gRPC message: the request body is empty".into())
    );
}

// ----- response -----

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

#[test]
fn connect_proto_success_passes_untouched() {
    let mut ex = forwarded(EXECUTE, "application/proto");
    let step = ex.on_response_headers(&response("200", "application/proto"), false);
    assert_eq!(step, ResponseHeadersStep::Forward(stripped()));
    assert_eq!(ex.on_response_body(100, false), ResponseBodyStep::Continue);
    assert_eq!(
        ex.on_response_body(5000, true),
        ResponseBodyStep::Continue,
        "streams: no limit"
    );
}

#[test]
fn connect_json_success_is_protojson() {
    let mut ex = forwarded(EXECUTE, "application/json");
    let (edits, edit) = respond(
        &mut ex,
        &response("200", "application/proto"),
        &execute_response().encode_to_vec(),
    );
    assert_eq!(edits.get(":status"), None);
    assert_eq!(edits.get("content-type"), Some("application/json"));
    assert!(edit.trailers.is_empty());
    let v = json_of(replaced(&edit));
    assert_eq!(v["session"]["signature"], "c2ln");
    let r = &v["result"];
    assert_eq!(r["rowsAffected"], "3");
    assert_eq!(r["insertId"], "7");
    assert_eq!(r["fields"][0]["type"], "INT64");
    assert_eq!(r["fields"][0]["columnLength"], 20);
    assert!(r["fields"][1].get("type").is_none());
    assert_eq!(r["rows"][0]["lengths"], json!(["1", "-1"]));
    assert_eq!(r["rows"][0]["values"], "MQ==");
    assert_eq!(v["timing"], 0.25);
    assert!(v.get("error").is_none());
}

#[test]
fn json_round_trips_for_every_rpc() {
    let mut ex = forwarded(CREATE_SESSION, "application/json");
    let resp = CreateSessionResponse {
        branch: "main".into(),
        user: Some(User {
            username: "u".into(),
            psid: "p".into(),
            role: 2,
        }),
        session: Some(Session {
            signature: vec![0xff],
            vitess_session: None,
        }),
    };
    let (_, edit) = respond(
        &mut ex,
        &response("200", "application/proto"),
        &resp.encode_to_vec(),
    );
    assert_eq!(
        json_of(replaced(&edit)),
        json!({"branch": "main", "user": {"username": "u", "psid": "p", "role": "readwriter"},
               "session": {"signature": "/w=="}})
    );

    let mut ex = forwarded(CLOSE_SESSION, "application/json");
    let resp = CloseSessionResponse {
        session: Some(Session {
            signature: vec![1],
            vitess_session: None,
        }),
        error: None,
    };
    let (_, edit) = respond(
        &mut ex,
        &response("200", "application/proto"),
        &resp.encode_to_vec(),
    );
    assert_eq!(replaced(&edit), br#"{"session":{"signature":"AQ=="}}"#);
}

#[test]
fn sql_errors_are_successes() {
    let resp = ExecuteResponse {
        error: Some(RpcError {
            message: "syntax error".into(),
            code: VtCode::InvalidArgument as i32,
        }),
        ..Default::default()
    };
    let mut ex = forwarded(EXECUTE, "application/json");
    let (edits, edit) = respond(
        &mut ex,
        &response("200", "application/proto"),
        &resp.encode_to_vec(),
    );
    assert_eq!(edits.get(":status"), None);
    assert_eq!(
        json_of(replaced(&edit))["error"],
        json!({"message": "syntax error", "code": "INVALID_ARGUMENT"})
    );

    let mut ex = forwarded(EXECUTE, "application/grpc");
    let (_, edit) = respond(
        &mut ex,
        &response("200", "application/proto"),
        &resp.encode_to_vec(),
    );
    assert_eq!(edit.trailers, ok_trailers());
}

#[test]
fn grpc_proto_success_prepends_a_frame_header_and_adds_trailers() {
    for ct in ["application/grpc", "application/grpc+proto"] {
        let mut ex = forwarded(EXECUTE, ct);
        let body = execute_response().encode_to_vec();
        let (edits, edit) = respond(&mut ex, &response("200", "application/proto"), &body);
        assert_eq!(edits.get(":status"), None);
        assert_eq!(
            edits.get("content-type"),
            Some(ct),
            "echoes the request's media type"
        );
        assert_eq!(
            edit.body,
            BodyEdit::Prepend(crate::envelope::header(0, body.len()).unwrap())
        );
        assert_eq!(edit.trailers, ok_trailers());
    }
}

#[test]
fn grpc_json_success_is_framed_protojson() {
    let mut ex = forwarded(EXECUTE, "application/grpc+json");
    let (edits, edit) = respond(
        &mut ex,
        &response("200", "application/proto"),
        &execute_response().encode_to_vec(),
    );
    assert_eq!(edits.get("content-type"), Some("application/grpc+json"));
    let body = replaced(&edit);
    let (_, range) = crate::envelope::single(body, "gRPC").unwrap();
    assert_eq!(json_of(&body[range])["result"]["rowsAffected"], "3");
    assert_eq!(edit.trailers, ok_trailers());
}

#[test]
fn shim_connect_errors_pass_to_connect_clients() {
    for ct in ["application/json", "application/proto"] {
        let mut ex = forwarded(EXECUTE, ct);
        let step = ex.on_response_headers(&response("401", "application/json"), false);
        assert_eq!(step, ResponseHeadersStep::Forward(stripped()));
        assert_eq!(ex.on_response_body(50, true), ResponseBodyStep::Continue);
    }
}

#[test]
fn shim_connect_errors_become_grpc_statuses() {
    let mut ex = forwarded(EXECUTE, "application/grpc");
    let body = br#"{"code":"unauthenticated","message":"access denied for user 'x'@'%'"}"#;
    let (edits, edit) = respond(&mut ex, &response("401", "application/json"), body);
    assert_eq!(edits.get(":status"), Some("200"));
    assert_eq!(edits.get("content-type"), Some("application/grpc"));
    assert_eq!(edit.body, BodyEdit::Replace(Vec::new()));
    assert_eq!(
        edit.trailers,
        vec![
            ("grpc-status", "16".to_owned()),
            (
                "grpc-message",
                "access denied for user 'x'@'%25'".to_owned()
            )
        ]
    );
    // Not a Connect error after all: from the HTTP status.
    let mut ex = forwarded(EXECUTE, "application/grpc");
    let (_, edit) = respond(&mut ex, &response("403", "application/json"), b"[1]");
    assert_eq!(edit.trailers[0], ("grpc-status", "7".to_owned()));
}

#[test]
fn other_answers_become_errors_from_their_http_status() {
    let cases = [
        ("503", "no healthy upstream", "unavailable", 503, 14),
        ("504", "upstream request timeout", "unavailable", 503, 14),
        ("502", "", "unavailable", 503, 14),
        ("404", "not here", "unimplemented", 501, 12),
        ("400", "bad", "internal", 500, 13),
        ("500", "oops", "unknown", 500, 2),
    ];
    for (status, text, code, http, grpc_status) in cases {
        let expected = if text.is_empty() {
            format!("upstream answered HTTP {status}")
        } else {
            format!("upstream answered HTTP {status}: {text}")
        };
        for ct in ["application/json", "application/proto"] {
            let mut ex = forwarded(EXECUTE, ct);
            let (edits, edit) = respond(&mut ex, &response(status, "text/plain"), text.as_bytes());
            let http_string = http.to_string();
            let new_status = (http_string != status).then_some(http_string.as_str());
            assert_eq!(edits.get(":status"), new_status, "{status}");
            assert_eq!(edits.get("content-type"), Some("application/json"));
            let v = json_of(replaced(&edit));
            assert_eq!(v["code"], code);
            assert_eq!(v["message"], expected);
        }
        let mut ex = forwarded(EXECUTE, "application/grpc+proto");
        let (edits, edit) = respond(&mut ex, &response(status, "text/plain"), text.as_bytes());
        assert_eq!(edits.get(":status"), Some("200"));
        assert_eq!(edits.get("content-type"), Some("application/grpc+proto"));
        assert_eq!(edit.trailers[0], ("grpc-status", grpc_status.to_string()));
        assert_eq!(
            edit.trailers.get(1).map(|(_, m)| m.as_str()),
            Some(expected.as_str())
        );
    }
    // 200 with the wrong content type.
    let mut ex = forwarded(EXECUTE, "application/json");
    let (edits, edit) = respond(
        &mut ex,
        &response("200", "text/html"),
        b"<html>\n<body>hi</body>",
    );
    assert_eq!(edits.get(":status"), Some("500"));
    assert_eq!(
        json_of(replaced(&edit))["message"],
        "upstream answered HTTP 200: <html> <body>hi</body>"
    );
}

#[test]
fn only_the_start_of_a_foreign_error_body_is_read() {
    let mut ex = forwarded(EXECUTE, "application/json");
    let _ = ex.on_response_headers(&response("503", "text/html"), false);
    assert_eq!(ex.on_response_body(1500, true), ResponseBodyStep::Read(200));
}

#[test]
fn envoy_grpc_answers_pass_to_grpc_clients() {
    let mut ex = forwarded(EXECUTE, "application/grpc");
    let step = ex.on_response_headers(&response("200", "application/grpc"), true);
    assert_eq!(step, ResponseHeadersStep::Forward(stripped()));
}

#[test]
fn malformed_shim_responses() {
    // Connect: the 200 is out, so the stream is reset.
    let mut ex = forwarded(EXECUTE, "application/json");
    let _ = ex.on_response_headers(&response("200", "application/proto"), false);
    assert_eq!(ex.on_response_body(2, true), ResponseBodyStep::Read(2));
    let Err(Reset(reason)) = ex.finish_response(&[0x12, 0x05]) else {
        panic!()
    };
    assert!(reason.starts_with("the shim's Execute response is not valid: invalid protobuf"));
    // gRPC: an internal status in the trailers.
    let mut ex = forwarded(EXECUTE, "application/grpc+json");
    let (_, edit) = respond(
        &mut ex,
        &response("200", "application/proto"),
        &[0x12, 0x05],
    );
    assert_eq!(edit.body, BodyEdit::Replace(Vec::new()));
    assert_eq!(edit.trailers[0], ("grpc-status", "13".to_owned()));
}

#[test]
fn declared_oversized_responses_are_replaced_before_their_headers_go_out() {
    for ct in ["application/proto", "application/json"] {
        let mut ex = forwarded(EXECUTE, ct);
        let mut resp = response("200", "application/proto");
        resp.content_length = Some("2001".into());
        let ResponseHeadersStep::Reply(reply) = ex.on_response_headers(&resp, false) else {
            panic!()
        };
        let (status, code, message) = connect_error(&reply);
        assert_eq!((status, code.as_str()), (429, "resource_exhausted"));
        assert_eq!(message, "response body is larger than the 2000-byte limit");
        assert_eq!(
            ex.on_response_body(3000, true),
            ResponseBodyStep::Continue,
            "answered"
        );
    }
    let mut ex = forwarded(EXECUTE, "application/grpc");
    let mut resp = response("200", "application/proto");
    resp.content_length = Some("2001".into());
    let ResponseHeadersStep::Reply(reply) = ex.on_response_headers(&resp, false) else {
        panic!()
    };
    assert_eq!(grpc_error(&reply).0, 8);
}

#[test]
fn growing_oversized_responses() {
    // gRPC: each chunk moves into the VM; past the limit the rest is discarded and
    // the status says why.
    let mut ex = forwarded(EXECUTE, "application/grpc");
    let _ = ex.on_response_headers(&response("200", "application/proto"), false);
    assert_eq!(
        ex.on_response_body(2000, false),
        ResponseBodyStep::Read(2000)
    );
    let kept = ex.finish_response(&[0; 2000]).unwrap();
    assert_eq!(
        kept,
        ResponseEdit::replace(Vec::new(), Vec::new()),
        "emptied, goes on"
    );
    assert_eq!(ex.on_response_body(1, false), ResponseBodyStep::Discard);
    assert_eq!(ex.on_response_body(10, false), ResponseBodyStep::Discard);
    let ResponseBodyStep::Finish(edit) = ex.on_response_body(10, true) else {
        panic!()
    };
    assert_eq!(edit.body, BodyEdit::Replace(Vec::new()));
    assert_eq!(
        edit.trailers,
        vec![
            ("grpc-status", "8".to_owned()),
            (
                "grpc-message",
                "response body is larger than the 2000-byte limit".to_owned()
            )
        ]
    );
    // Upstream trailers end an overflowed body the same way.
    let mut ex = forwarded(EXECUTE, "application/grpc");
    let _ = ex.on_response_headers(&response("200", "application/proto"), false);
    assert_eq!(ex.on_response_body(2001, false), ResponseBodyStep::Discard);
    let ResponseBodyStep::Finish(edit) = ex.on_response_trailers() else {
        panic!()
    };
    assert_eq!(edit.trailers[0], ("grpc-status", "8".to_owned()));
    assert_eq!(ex.on_response_trailers(), ResponseBodyStep::Continue);
    // Connect success: a 200 is out; only a reset is left.
    let mut ex = forwarded(EXECUTE, "application/json");
    let _ = ex.on_response_headers(&response("200", "application/proto"), false);
    let ResponseBodyStep::Reset(reason) = ex.on_response_body(2001, false) else {
        panic!()
    };
    assert_eq!(reason, "response body is larger than the 2000-byte limit");
    assert_eq!(
        ex.on_response_body(10, true),
        ResponseBodyStep::Continue,
        "answered"
    );
    // Connect error from an HTTP status: the error stands, without a quote.
    let mut ex = forwarded(EXECUTE, "application/json");
    let _ = ex.on_response_headers(&response("503", "text/html"), false);
    assert_eq!(ex.on_response_body(2001, false), ResponseBodyStep::Discard);
    let ResponseBodyStep::Finish(edit) = ex.on_response_body(1, true) else {
        panic!()
    };
    assert_eq!(
        json_of(replaced(&edit))["message"],
        "upstream answered HTTP 503"
    );
}

#[test]
fn headers_only_answers() {
    // Connect JSON + an empty message with no body: the whole answer is replaced.
    let mut ex = forwarded(CLOSE_SESSION, "application/json");
    let ResponseHeadersStep::Reply(reply) =
        ex.on_response_headers(&response("200", "application/proto"), true)
    else {
        panic!()
    };
    assert_eq!((reply.status, reply.body.as_slice()), (200, &b"{}"[..]));
    assert_eq!(
        reply.headers,
        vec![("content-type", "application/json".to_owned())]
    );

    // A bodiless foreign error to a Connect client.
    let mut ex = forwarded(EXECUTE, "application/proto");
    let ResponseHeadersStep::Reply(reply) =
        ex.on_response_headers(&response("504", "text/plain"), true)
    else {
        panic!()
    };
    assert_eq!(
        connect_error(&reply),
        (
            503,
            "unavailable".into(),
            "upstream answered HTTP 504".into()
        )
    );

    // gRPC errors become trailers-only answers by editing the headers.
    let mut ex = forwarded(EXECUTE, "application/grpc");
    let ResponseHeadersStep::Forward(edits) =
        ex.on_response_headers(&response("401", "application/json"), true)
    else {
        panic!()
    };
    assert_eq!(edits.get(":status"), Some("200"));
    assert_eq!(edits.get("content-type"), Some("application/grpc"));
    assert_eq!(edits.get("grpc-status"), Some("16"));
    assert_eq!(
        edits.get("grpc-message"),
        Some("upstream answered HTTP 401")
    );

    // A gRPC message cannot be added to a headers-only answer: a clear internal error.
    let mut ex = forwarded(CLOSE_SESSION, "application/grpc");
    let ResponseHeadersStep::Forward(edits) =
        ex.on_response_headers(&response("200", "application/proto"), true)
    else {
        panic!()
    };
    assert_eq!(edits.get("grpc-status"), Some("13"));
    assert!(edits.get("grpc-message").unwrap().contains("headers only"));
}

#[test]
fn response_trailers_end_a_unary_answer_only_where_it_can_be_completed() {
    // Kept in the VM, the chunks went on emptied: the message cannot follow trailers.
    let mut ex = forwarded(EXECUTE, "application/grpc");
    let _ = ex.on_response_headers(&response("200", "application/proto"), false);
    assert_eq!(ex.on_response_body(10, false), ResponseBodyStep::Read(10));
    ex.finish_response(&[0; 10]).unwrap();
    assert!(matches!(
        ex.on_response_trailers(),
        ResponseBodyStep::Reset(_)
    ));
    // Declared: the chunk that completes it is held, and the trailers end it.
    let mut head = response("200", "application/proto");
    head.content_length = Some("3".into());
    let mut ex = forwarded(EXECUTE, "application/grpc");
    let _ = ex.on_response_headers(&head, false);
    let ResponseBodyStep::Finish(edit) = ex.on_response_body(3, false) else {
        panic!()
    };
    assert_eq!(edit.body, BodyEdit::Prepend([0, 0, 0, 0, 3]));
    assert!(edit.pause);
    let ResponseBodyStep::Finish(edit) = ex.on_response_trailers() else {
        panic!()
    };
    assert_eq!(edit.body, BodyEdit::Append(Vec::new()));
    assert_eq!(edit.trailers, ok_trailers());
    // Declared, its trailers before its declared end: reset.
    let mut ex = forwarded(EXECUTE, "application/grpc");
    let _ = ex.on_response_headers(&head, false);
    let _ = ex.on_response_body(2, false);
    assert!(matches!(
        ex.on_response_trailers(),
        ResponseBodyStep::Reset(m) if m.contains("shorter")
    ));
}

#[test]
fn host_failures_answer_internal_in_the_clients_protocol() {
    let mut ex = forwarded(EXECUTE, "application/grpc");
    let reply = ex.fail("boom").unwrap();
    assert_eq!(grpc_error(&reply), (13, "boom".into()));
    assert!(ex.fail("again").is_none());
    assert!(exchange(false).fail("x").is_none());
}

#[test]
fn callbacks_without_a_call_pass() {
    let mut ex = exchange(false);
    assert_eq!(ex.on_request_body(5, true), RequestBodyStep::Continue);
    assert_eq!(
        ex.on_response_headers(&response("200", "text/plain"), false),
        ResponseHeadersStep::Forward(HeaderEdits::default())
    );
    assert_eq!(ex.on_response_body(5, true), ResponseBodyStep::Continue);
    assert_eq!(ex.on_response_trailers(), ResponseBodyStep::Continue);
}

/// Protojson grows a message (bytes become base64): a proto answer under the limit can
/// convert to JSON over it, which must never be handed to Envoy.
#[test]
fn converted_answers_are_held_to_the_response_limit() {
    // ~1,490 bytes of proto (under the 2,000 limit) → 1,976 base64 characters + JSON.
    let big = ExecuteResponse {
        result: Some(QueryResult {
            rows: vec![Row {
                lengths: vec![1480],
                values: vec![b'a'; 1480],
            }],
            ..QueryResult::default()
        }),
        ..ExecuteResponse::default()
    }
    .encode_to_vec();
    assert!(big.len() < limits().max_response_bytes);
    let proto_head = response("200", "application/proto");

    // Connect JSON: the 200 is out, so the stream is reset with the reason.
    let mut ex = forwarded(EXECUTE, "application/json");
    let _ = ex.on_response_headers(&proto_head, false);
    assert_eq!(
        ex.on_response_body(big.len(), true),
        ResponseBodyStep::Read(big.len())
    );
    let Err(Reset(reason)) = ex.finish_response(&big) else {
        panic!("expected a reset")
    };
    assert!(
        reason.contains("over the 2000-byte response limit"),
        "{reason}"
    );

    // gRPC JSON: RESOURCE_EXHAUSTED in the trailers, no message.
    let mut ex = forwarded(EXECUTE, "application/grpc+json");
    let (_, edit) = respond(&mut ex, &proto_head, &big);
    assert_eq!(replaced(&edit), b"");
    assert!(
        edit.trailers.contains(&("grpc-status", "8".to_owned())),
        "{edit:?}"
    );

    // The same answer just under the limit converts as usual.
    let small = ExecuteResponse {
        result: Some(QueryResult {
            rows: vec![Row {
                lengths: vec![1000],
                values: vec![b'a'; 1000],
            }],
            ..QueryResult::default()
        }),
        ..ExecuteResponse::default()
    }
    .encode_to_vec();
    let mut ex = forwarded(EXECUTE, "application/json");
    let (_, edit) = respond(&mut ex, &proto_head, &small);
    assert!(json_of(replaced(&edit))["result"]["rows"].is_array());
}

// ----- request: HTTP/3 early data (0-RTT) -----

fn early(path: &str, content_type: &str) -> RequestHead {
    RequestHead {
        early_data: Some("1".into()),
        ..head(path, content_type)
    }
}

fn execute_message(query: &str, in_transaction: bool) -> Vec<u8> {
    ExecuteRequest {
        query: query.into(),
        session: in_transaction.then(|| Session {
            signature: b"sig".to_vec(),
            vitess_session: Some(ferry_proto::vitess::vtgate::Session {
                in_transaction: true,
                ..Default::default()
            }),
        }),
        ..Default::default()
    }
    .encode_to_vec()
}

fn assert_too_early_connect(reply: &Reply) {
    let (status, code, message) = connect_error(reply);
    assert_eq!((status, code.as_str()), (425, "unavailable"), "{message}");
    assert!(
        message.contains("sent as TLS early data (0-RTT); retry after the handshake"),
        "{message}"
    );
}

fn assert_too_early_grpc(reply: &Reply) {
    let (status, message) = grpc_error(reply);
    assert_eq!(status, 14, "{message}");
    assert!(message.contains("early data (0-RTT)"), "{message}");
}

#[test]
fn early_reads_go_on_in_every_protocol() {
    let query = "SELECT * FROM t WHERE id = 1";
    let msg = execute_message(query, false);
    let json = format!(r#"{{"query":"{query}"}}"#);
    for (ct, body) in [
        ("application/json", json.clone().into_bytes()),
        ("application/proto", msg.clone()),
        ("application/grpc", framed(&msg)),
        ("application/grpc+json", framed(json.as_bytes())),
    ] {
        let canonical = send(&early(EXECUTE, ct), &body).unwrap();
        assert_eq!(
            ExecuteRequest::decode(&canonical[..]).unwrap().query,
            query,
            "{ct}"
        );
    }
}

#[test]
fn early_writes_get_425_and_nothing_is_forwarded() {
    for query in [
        "INSERT INTO t VALUES (1)",
        "SELECT * FROM t FOR UPDATE",
        "SELECT GET_LOCK('x', 1)",
        "SELECT 1; DELETE FROM t",
    ] {
        let msg = execute_message(query, false);
        let json = serde_json::to_vec(&json!({ "query": query })).unwrap();
        for (ct, body) in [
            ("application/json", json.clone()),
            ("application/proto", msg.clone()),
        ] {
            assert_too_early_connect(&send(&early(EXECUTE, ct), &body).unwrap_err());
        }
        for (ct, body) in [
            ("application/grpc", framed(&msg)),
            ("application/grpc+json", framed(&json)),
        ] {
            assert_too_early_grpc(&send(&early(EXECUTE, ct), &body).unwrap_err());
        }
    }
}

#[test]
fn early_reads_inside_a_transaction_get_425() {
    let msg = execute_message("SELECT 1", true);
    let err = send(&early(EXECUTE, "application/proto"), &msg).unwrap_err();
    assert_too_early_connect(&err);
    assert!(connect_error(&err).2.contains("inside a transaction"));
    let body = json!({"query": "SELECT 1", "session": {"vitessSession": {"inTransaction": true}}});
    let err = send(
        &early(EXECUTE, "application/json"),
        body.to_string().as_bytes(),
    );
    assert_too_early_connect(&err.unwrap_err());
    // Outside a transaction, a session is fine.
    let body = json!({"query": "SELECT 1", "session": {"vitessSession": {"inTransaction": false}}});
    assert!(send(
        &early(EXECUTE, "application/json"),
        body.to_string().as_bytes()
    )
    .is_ok());
}

#[test]
fn early_connect_proto_is_held_until_checked() {
    // Not early: it streams. Early: the body is buffered (so none of it goes upstream
    // before the check) and rewritten whole.
    let (mut ex, step) = start(&early(EXECUTE, "application/proto"));
    let (RequestHeadersStep::Forward(edits) | RequestHeadersStep::Hold(edits)) = step else {
        panic!("{step:?}")
    };
    assert!(edits.remove.contains(&"content-length"));
    assert_eq!(
        ex.on_request_body(10, false),
        RequestBodyStep::Keep { pause: true }
    );
    assert_eq!(ex.on_request_body(20, true), RequestBodyStep::Read);
    // Headers only (an empty message: an empty query) is refused at once.
    let mut ex = exchange(false);
    let RequestHeadersStep::Reply(reply) =
        ex.on_request_headers(&early(EXECUTE, "application/proto"), true)
    else {
        panic!()
    };
    assert_too_early_connect(&reply);
    // The same request outside early data is held for its class only.
    let (mut ex, _) = start(&head(EXECUTE, "application/proto"));
    assert_eq!(ex.on_request_body(10, true), RequestBodyStep::Route(10));
}

#[test]
fn early_session_rpcs() {
    // CreateSession changes nothing: it goes on.
    assert!(send(&early(CREATE_SESSION, "application/json"), b"{}").is_ok());
    let mut ex = exchange(false);
    let step = ex.on_request_headers(&early(CREATE_SESSION, "application/proto"), true);
    assert!(
        matches!(
            step,
            RequestHeadersStep::Forward(_) | RequestHeadersStep::Hold(_)
        ),
        "{step:?}"
    );
    // CloseSession is refused from its headers: nothing at all is forwarded.
    let reply = reply_of_headers(&early(CLOSE_SESSION, "application/json"));
    assert_too_early_connect(&reply);
    assert!(connect_error(&reply).2.starts_with("CloseSession"));
    assert_too_early_grpc(&reply_of_headers(&early(CLOSE_SESSION, "application/grpc")));
}

#[test]
fn early_requests_get_their_usual_errors_first() {
    // A request that would be refused anyway says why, as outside early data.
    let reply = reply_of_headers(&early("/psdb.v1alpha1.Database/Nope", "application/json"));
    assert_eq!(reply.status, 404);
    let reply = reply_of_headers(&RequestHead {
        authorization: None,
        ..early(EXECUTE, "application/json")
    });
    assert_eq!(reply.status, 401);
    let err = send(&early(EXECUTE, "application/json"), b"{not json").unwrap_err();
    assert_eq!(err.status, 400);
}

#[test]
fn without_the_header_writes_go_on() {
    let msg = execute_message("INSERT INTO t VALUES (1)", false);
    assert_eq!(
        send(&head(EXECUTE, "application/grpc"), &framed(&msg)).unwrap(),
        msg
    );
    let body = br#"{"query":"INSERT INTO t VALUES (1)"}"#;
    assert!(send(&head(EXECUTE, "application/json"), body).is_ok());
    assert!(send(&head(CLOSE_SESSION, "application/json"), b"{}").is_ok());
}

// ----- session affinity -----

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

fn pinned_execute(holder: &str) -> Vec<u8> {
    ExecuteRequest {
        session: Some(pinned_session(holder)),
        query: "INSERT INTO t VALUES (1)".into(),
        ..Default::default()
    }
    .encode_to_vec()
}

fn affine(head: &RequestHead) -> (Exchange, RequestHeadersStep) {
    let mut ex = exchange(true);
    let step = ex.on_request_headers(head, false);
    (ex, step)
}

fn read_from(message: &[u8]) -> impl FnMut(usize, usize) -> Option<Vec<u8>> + '_ {
    |offset, max| {
        let end = (offset + max).min(message.len());
        message.get(offset..end).map(<[u8]>::to_vec)
    }
}

const HOLDER_B64: &str = "MTI3LjAuMC4xOjE4MDg0"; // 127.0.0.1:18084

#[test]
fn client_sent_x_ferry_host_is_removed() {
    for affinity in [false, true] {
        let mut ex = exchange(affinity);
        let (RequestHeadersStep::Forward(edits) | RequestHeadersStep::Hold(edits)) =
            ex.on_request_headers(&head(EXECUTE, "application/json"), false)
        else {
            panic!("forwarded")
        };
        assert!(edits.remove.contains(&"x-ferry-host"));
    }
}

#[test]
fn with_affinity_session_requests_hold_their_headers_until_routed() {
    // Connect proto: buffered by the host, not rewritten, routed at its end.
    let body = pinned_execute("127.0.0.1:18084");
    let (mut ex, step) = affine(&head(EXECUTE, "application/proto"));
    let RequestHeadersStep::Hold(edits) = step else {
        panic!("{step:?}")
    };
    assert!(
        !edits.remove.contains(&"content-length"),
        "the body is not rewritten"
    );
    assert_eq!(ex.on_request_body(10, false), RequestBodyStep::Wait);
    assert_eq!(
        ex.on_request_body(body.len(), true),
        RequestBodyStep::Route(body.len())
    );
    let edits = ex.route_request(read_from(&body), body.len());
    assert_eq!(edits.get("x-ferry-host"), Some(HOLDER_B64));
    assert!(
        ex.route_request(read_from(&body), body.len()).is_empty(),
        "decided once"
    );

    // JSON: rewritten, then routed from the canonical body.
    let json = serde_json::to_vec(&json!({
        "query": "SELECT 1",
        "session": {"signature": base64::Engine::encode(
            &base64::engine::general_purpose::STANDARD,
            pinned_session("127.0.0.1:18084").signature
        )}
    }))
    .unwrap();
    let (mut ex, step) = affine(&head(CLOSE_SESSION, "application/json"));
    assert!(matches!(step, RequestHeadersStep::Hold(_)), "{step:?}");
    assert_eq!(ex.on_request_body(json.len(), true), RequestBodyStep::Read);
    let payload = ex.finish_request(json).unwrap();
    let message = payload.as_slice().to_vec();
    let edits = ex.route_request(read_from(&message), message.len());
    assert_eq!(edits.get("x-ferry-host"), Some(HOLDER_B64));

    // Request trailers end a held body too.
    let (mut ex, _) = affine(&head(EXECUTE, "application/proto"));
    assert_eq!(ex.on_request_body(body.len(), false), RequestBodyStep::Wait);
    assert_eq!(ex.on_request_trailers(), RequestBodyStep::Route(body.len()));
}

#[test]
fn with_affinity_unpinned_and_sessionless_requests_balance() {
    let unpinned = ExecuteRequest {
        query: "SELECT 1".into(),
        ..Default::default()
    }
    .encode_to_vec();
    let (mut ex, step) = affine(&head(EXECUTE, "application/proto"));
    assert!(matches!(step, RequestHeadersStep::Hold(_)));
    assert_eq!(
        ex.on_request_body(unpinned.len(), true),
        RequestBodyStep::Route(unpinned.len())
    );
    let edits = ex.route_request(read_from(&unpinned), unpinned.len());
    assert_eq!(edits.get("x-ferry-host"), None, "balanced");
    assert!(edits.get("x-ferry-class").is_some());
    // CreateSession has no session; a request without a body has nothing to read.
    assert!(matches!(
        affine(&head(CREATE_SESSION, "application/proto")).1,
        RequestHeadersStep::Forward(_)
    ));
    let mut ex = exchange(true);
    assert!(matches!(
        ex.on_request_headers(&head(EXECUTE, "application/proto"), true),
        RequestHeadersStep::Forward(_)
    ));
    // Without affinity, held for the class only: a pinned session is not routed to
    // its holder (but is classified `session`).
    let (mut ex, step) = start(&head(EXECUTE, "application/proto"));
    assert!(matches!(step, RequestHeadersStep::Hold(_)));
    let body = pinned_execute("127.0.0.1:18084");
    assert_eq!(
        ex.on_request_body(body.len(), true),
        RequestBodyStep::Route(body.len())
    );
    let edits = ex.route_request(read_from(&body), body.len());
    assert_eq!(edits.get("x-ferry-host"), None);
    assert_eq!(edits.get("x-ferry-class"), Some("session"));
}

#[test]
fn with_affinity_held_bodies_keep_their_limit() {
    let (mut ex, _) = affine(&head(EXECUTE, "application/proto"));
    let RequestBodyStep::Reply(reply) = ex.on_request_body(1001, false) else {
        panic!("refused")
    };
    assert_eq!(reply.status, 429);
}

/// A pinned request routed to its shim, over `content_type`.
fn pinned(content_type: &str) -> Exchange {
    let body = pinned_execute("127.0.0.1:18084");
    let body = match content_type {
        "application/grpc" => framed(&body),
        "application/json" => serde_json::to_vec(&json!({
            "query": "SELECT 1",
            "session": {"signature": base64::Engine::encode(
                &base64::engine::general_purpose::STANDARD,
                pinned_session("127.0.0.1:18084").signature
            )}
        }))
        .unwrap(),
        _ => body,
    };
    let (mut ex, step) = affine(&head(EXECUTE, content_type));
    assert!(matches!(step, RequestHeadersStep::Hold(_)));
    let message = match ex.on_request_body(body.len(), true) {
        RequestBodyStep::Route(_) => body,
        RequestBodyStep::Read => ex.finish_request(body).unwrap().as_slice().to_vec(),
        other => panic!("{other:?}"),
    };
    let edits = ex.route_request(read_from(&message), message.len());
    assert_eq!(edits.get("x-ferry-host"), Some(HOLDER_B64));
    ex
}

fn envoy_503() -> ResponseHead {
    ResponseHead {
        status: Some("503".into()),
        content_type: Some("text/plain".into()),
        content_length: Some("19".into()),
        shim_instance: None,
        grpc_status: None,
        ..Default::default()
    }
}

#[test]
fn envoys_503_to_a_pinned_request_is_a_lost_transaction() {
    let lost = "transaction lost, rolled back: the shim holding this session is unavailable";
    // Connect: the RPC's own answer, as a shim gives it for a lost pin (lost.rs):
    // 200, error ABORTED, and the same session, so later statements fail too.
    for ct in ["application/proto", "application/json"] {
        let mut ex = pinned(ct);
        let ResponseHeadersStep::Forward(edits) = ex.on_response_headers(&envoy_503(), false)
        else {
            panic!("forward")
        };
        assert_eq!(edits.get(":status"), Some("200"));
        assert_eq!(edits.get("content-type"), Some(ct));
        assert!(edits.remove.contains(&"x-ferry-host"));
        assert_eq!(ex.on_response_body(10, false), ResponseBodyStep::Discard);
        let ResponseBodyStep::Finish(edit) = ex.on_response_body(19, true) else {
            panic!("finish")
        };
        let answer: ExecuteResponse = if ct == "application/json" {
            serde_json::from_slice(replaced(&edit)).unwrap()
        } else {
            ExecuteResponse::decode(replaced(&edit)).unwrap()
        };
        let e = answer.error.expect("an error");
        assert_eq!((e.code, e.message.as_str()), (10, lost), "{ct}");
        assert!(answer.result.is_none(), "{ct}");
        assert_eq!(
            answer.session.expect("session").signature,
            pinned_session("127.0.0.1:18084").signature,
            "{ct}: the session the client sent"
        );
    }
    // A plain ROLLBACK of the lost transaction succeeds, with a fresh unsealed session.
    let rollback = ExecuteRequest {
        session: Some(pinned_session("127.0.0.1:18084")),
        query: "ROLLBACK".into(),
        ..Default::default()
    }
    .encode_to_vec();
    let (mut ex, _) = affine(&head(EXECUTE, "application/proto"));
    assert!(matches!(
        ex.on_request_body(rollback.len(), true),
        RequestBodyStep::Route(_)
    ));
    assert!(!ex
        .route_request(read_from(&rollback), rollback.len())
        .is_empty());
    assert!(matches!(
        ex.on_response_headers(&envoy_503(), false),
        ResponseHeadersStep::Forward(_)
    ));
    let ResponseBodyStep::Finish(edit) = ex.on_response_body(19, true) else {
        panic!("finish")
    };
    let answer = ExecuteResponse::decode(replaced(&edit)).unwrap();
    assert!(answer.error.is_none() && answer.result.is_some());
    assert!(answer.session.expect("session").signature.is_empty());
    let mut ex = pinned("application/grpc");
    let ResponseHeadersStep::Forward(edits) = ex.on_response_headers(&envoy_503(), false) else {
        panic!("forward")
    };
    assert_eq!(edits.get(":status"), Some("200"));
    let ResponseBodyStep::Finish(edit) = ex.on_response_body(19, true) else {
        panic!("finish")
    };
    assert_eq!(edit.trailers[0], ("grpc-status", "10".to_owned()));
    assert_eq!(edit.trailers[1].1, lost);

    // Envoy's trailers-only gRPC UNAVAILABLE, headers only.
    let mut ex = pinned("application/grpc");
    let head = ResponseHead {
        status: Some("200".into()),
        content_type: Some("application/grpc".into()),
        grpc_status: Some("14".into()),
        ..ResponseHead::default()
    };
    let ResponseHeadersStep::Forward(edits) = ex.on_response_headers(&head, true) else {
        panic!("forward")
    };
    assert_eq!(edits.get("grpc-status"), Some("10"));
}

#[test]
fn a_pinned_write_whose_shim_went_away_mid_call_is_unknown() {
    // The pinned request is an INSERT outside a transaction (a session-state pin):
    // autocommit, so it may have been applied when the shim vanished after receiving
    // it (Envoy: UC). Refused before reaching it (UF): "transaction lost" as before.
    for (flags, code, grpc) in [(0x40u64, 2, "2"), (0x20, 10, "10")] {
        let mut head = envoy_503();
        head.envoy = crate::lost::EnvoyAnswer {
            flags,
            details: None,
        };
        let mut ex = pinned("application/proto");
        assert!(matches!(
            ex.on_response_headers(&head, false),
            ResponseHeadersStep::Forward(_)
        ));
        let ResponseBodyStep::Finish(edit) = ex.on_response_body(19, true) else {
            panic!("finish")
        };
        let e = ExecuteResponse::decode(replaced(&edit))
            .unwrap()
            .error
            .expect("an error");
        assert_eq!(e.code, code, "{flags:#x}: {}", e.message);
        if code == 2 {
            assert_eq!(e.message, crate::lost::UNKNOWN_COMMIT);
        }
        let mut ex = pinned("application/grpc");
        assert!(matches!(
            ex.on_response_headers(&head, false),
            ResponseHeadersStep::Forward(_)
        ));
        let ResponseBodyStep::Finish(edit) = ex.on_response_body(19, true) else {
            panic!("finish")
        };
        assert_eq!(
            edit.trailers[0],
            ("grpc-status", grpc.to_owned()),
            "{flags:#x}"
        );
    }
}

#[test]
fn a_shims_own_answers_and_unpinned_503s_are_not_lost_transactions() {
    // The shim's 503 (it names its instance) passes as usual.
    let mut ex = pinned("application/json");
    let mut head = response("503", "application/json");
    head.shim_instance = Some("0123456789abcdef".into());
    assert_eq!(
        ex.on_response_headers(&head, false),
        ResponseHeadersStep::Forward(stripped())
    );
    // Envoy's 503 to an unpinned request: unavailable, quoting Envoy.
    let (mut ex, _) = affine(&head_json_execute());
    let body = br#"{"query":"SELECT 1"}"#;
    assert_eq!(ex.on_request_body(body.len(), true), RequestBodyStep::Read);
    let message = ex
        .finish_request(body.to_vec())
        .unwrap()
        .as_slice()
        .to_vec();
    let edits = ex.route_request(read_from(&message), message.len());
    assert_eq!(edits.get("x-ferry-host"), None, "not pinned");
    let (edits, edit) = respond(&mut ex, &envoy_503(), b"no healthy upstream");
    assert_eq!(edits.get(":status"), None, "stays 503");
    assert_eq!(json_of(replaced(&edit))["code"], "unavailable");
}

fn head_json_execute() -> RequestHead {
    head(EXECUTE, "application/json")
}

// ----- Connect GET -----

fn get_head(query: &str) -> RequestHead {
    RequestHead {
        method: Some("GET".into()),
        path: Some(format!("{EXECUTE}?{query}")),
        authorization: Some(AUTH.into()),
        ..RequestHead::default()
    }
}

fn url_base64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// Runs a GET through headers and its (empty, opened by Envoy) body: the header edits
/// and the canonical body.
fn get(ex: &mut Exchange, query: &str) -> Result<(HeaderEdits, Vec<u8>), Reply> {
    let edits = match ex.on_request_headers(&get_head(query), false) {
        RequestHeadersStep::Forward(edits) => edits,
        RequestHeadersStep::Reply(reply) => return Err(reply),
        other => panic!("expected Forward, got {other:?}"),
    };
    match ex.on_request_body(0, true) {
        RequestBodyStep::Replace(body) => Ok((edits, body)),
        other => panic!("expected Replace, got {other:?}"),
    }
}

#[test]
fn get_json_becomes_the_canonical_post() {
    let mut ex = exchange(false);
    let (edits, body) = get(
        &mut ex,
        "connect=v1&encoding=json&message=%7B%22query%22%3A%22SELECT+1%22%7D",
    )
    .unwrap();
    assert_eq!(edits.get(":method"), Some("POST"));
    assert_eq!(edits.get(":path"), Some(EXECUTE));
    assert_eq!(edits.get("content-type"), Some("application/proto"));
    assert_eq!(edits.get("x-ferry-rpc"), Some("Execute"));
    assert_eq!(edits.get("x-ferry-protocol"), Some("connect-json"));
    assert!(edits.remove.contains(&"content-length"));
    assert_eq!(
        ExecuteRequest::decode(body.as_slice()).unwrap().query,
        "SELECT 1"
    );
    // The answer is converted to JSON as for a Connect JSON POST.
    let step = ex.on_response_headers(&shim_ok(), false);
    assert!(matches!(step, ResponseHeadersStep::Forward(_)));
}

fn shim_ok() -> ResponseHead {
    ResponseHead {
        status: Some("200".into()),
        content_type: Some("application/proto".into()),
        shim_instance: Some("a".into()),
        ..ResponseHead::default()
    }
}

#[test]
fn get_proto_base64() {
    let message = ExecuteRequest {
        query: "SELECT * FROM t WHERE id = 1".into(),
        ..Default::default()
    }
    .encode_to_vec();
    let mut ex = exchange(false);
    let (edits, body) = get(
        &mut ex,
        &format!(
            "connect=v1&encoding=proto&base64=1&message={}",
            url_base64(&message)
        ),
    )
    .unwrap();
    assert_eq!(edits.get("x-ferry-protocol"), Some("connect-proto"));
    assert_eq!(body, message);
}

#[test]
fn get_refuses_what_is_not_replay_safe() {
    let in_tx = ExecuteRequest {
        query: "SELECT 1".into(),
        session: Some(Session {
            signature: b"s".to_vec(),
            vitess_session: Some(ferry_proto::vitess::vtgate::Session {
                in_transaction: true,
                ..Default::default()
            }),
        }),
        ..Default::default()
    }
    .encode_to_vec();
    for query in [
        "encoding=json&message=%7B%22query%22%3A%22INSERT+INTO+t+VALUES+(1)%22%7D".to_owned(),
        "encoding=json&message=%7B%22query%22%3A%22SELECT+*+FROM+t+FOR+UPDATE%22%7D".to_owned(),
        format!("encoding=proto&base64=1&message={}", url_base64(&in_tx)),
    ] {
        let reply = get(&mut exchange(false), &query).unwrap_err();
        assert_eq!(reply.header("allow"), Some("POST"));
        let (status, code, message) = connect_error(&reply);
        assert_eq!((status, code.as_str()), (405, "unimplemented"), "{query}");
        assert!(message.contains("send it with POST"), "{message}");
    }
}

#[test]
fn get_errors() {
    // Bad query: a Connect error.
    let reply = get(&mut exchange(false), "connect=v1&encoding=json").unwrap_err();
    assert_eq!(connect_error(&reply).0, 400);
    let reply = get(&mut exchange(false), "encoding=json&message=%7B").unwrap_err();
    assert_eq!(connect_error(&reply).1, "invalid_argument");
    let message = format!("encoding=json&message={}", "a".repeat(1001));
    assert_eq!(
        connect_error(&get(&mut exchange(false), &message).unwrap_err()).0,
        429
    );
    let reply = get(&mut exchange(false), "encoding=proto&base64=1&message=_w").unwrap_err();
    assert_eq!(connect_error(&reply).1, "invalid_argument");
    // Credentials are checked.
    let mut h = get_head("encoding=json&message=%7B%7D");
    h.authorization = None;
    assert_eq!(connect_error(&reply_of_headers(&h)).0, 401);
    // Headers-only (Envoy without the Lua filter): no body can be given.
    let reply = match exchange(false).on_request_headers(
        &get_head("encoding=json&message=%7B%22query%22%3A%22SELECT+1%22%7D"),
        true,
    ) {
        RequestHeadersStep::Reply(reply) => reply,
        other => panic!("{other:?}"),
    };
    let (status, _, message) = connect_error(&reply);
    assert_eq!(status, 405);
    assert!(message.contains("not enabled on this gateway"), "{message}");
    // A declared body, or body bytes.
    let mut h = get_head("encoding=json&message=%7B%22query%22%3A%22SELECT+1%22%7D");
    h.content_length = Some("3".into());
    assert_eq!(connect_error(&reply_of_headers(&h)).0, 400);
    let mut ex = exchange(false);
    assert!(matches!(
        ex.on_request_headers(
            &get_head("encoding=json&message=%7B%22query%22%3A%22SELECT+1%22%7D"),
            false
        ),
        RequestHeadersStep::Forward(_)
    ));
    match ex.on_request_body(3, true) {
        RequestBodyStep::Reply(reply) => assert_eq!(connect_error(&reply).0, 400),
        other => panic!("{other:?}"),
    }
}

#[test]
fn get_other_forms_still_need_post() {
    // No Connect GET parameters, or an RPC without a GET form: the usual 405.
    for (path, query) in [
        (EXECUTE, "x=1"),
        (CREATE_SESSION, "encoding=json&message=%7B%7D"),
        (CLOSE_SESSION, "encoding=json&message=%7B%7D"),
    ] {
        let mut h = get_head("");
        h.path = Some(format!("{path}?{query}"));
        let reply = reply_of_headers(&h);
        let (status, _, message) = connect_error(&reply);
        assert_eq!(status, 405, "{path}");
        assert!(message.contains("needs POST"), "{message}");
    }
}

#[test]
fn get_refuses_a_statement_of_a_pinned_session() {
    // A GET runs only what early data may run: a pinned session holds a
    // transaction or session state, so its statements go by POST (and are
    // routed to their shim there, see the POST affinity tests).
    let message = ExecuteRequest {
        session: Some(pinned_session("10.0.0.1:8081")),
        query: "SELECT 1".into(),
        ..Default::default()
    }
    .encode_to_vec();
    let mut ex = exchange(true);
    let reply = get(
        &mut ex,
        &format!("encoding=proto&base64=1&message={}", url_base64(&message)),
    )
    .unwrap_err();
    let (status, _, message) = connect_error(&reply);
    assert_eq!(status, 405);
    assert!(message.contains("session state"), "{message}");
}

mod compression;
mod grpc_web;
mod header_hold;
mod streams;
