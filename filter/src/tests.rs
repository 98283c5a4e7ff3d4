//! The filter (lib.rs's `Filter`, the adapter and the real `Exchange`) driven over
//! the mock host with real requests and answers, callback by callback as Envoy
//! delivers them. Every test also checks that no call broke a phase rule.

use std::rc::Rc;

use prost::Message;
use proxy_wasm::types::{Action, Status};

use ferry_filter_core::config::Config;
use ferry_filter_core::exchange::Exchange;
use ferry_filter_core::header_hold::Hold;
use ferry_filter_core::limits::Limits;
use ferry_proto::psdb::v1alpha1::{CloseSessionRequest, ExecuteRequest, ExecuteResponse, Session};
use ferry_proto::vitess::query::{Field, QueryResult, Row, Type};

use crate::host::{Body, Map, WHOLE_BODY};
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

/// A session the shim at `holder` sealed as pinned (`shim/src/seal.rs`'s layout;
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

// ----- requests -----

#[test]
fn connect_json_unary_is_rewritten_to_proto_at_its_end_and_its_answer_to_json() {
    let mut s = stream();
    let body = br#"{"query":"SELECT 1","session":null}"#;
    let len = body.len().to_string();
    let mut headers = post(EXECUTE, "application/json");
    headers.extend([
        ("content-length", len.as_str()),
        ("accept-encoding", "gzip"),
        ("x-ferry-host", "c3Bvb2Zt"),
    ]);
    assert_eq!(s.request_headers(&headers, false), Action::Pause);

    // Each chunk moves into the VM and Envoy's is emptied; held headers pause (Envoy
    // keeps an empty body), then the last chunk is replaced by the message.
    let (start, rest) = body.split_at(12);
    assert_eq!(s.request_body(start, false), Action::Pause);
    assert!(s.host().request.sent_body.is_empty());
    assert!(s.host().request.body.is_empty(), "Envoy buffers nothing");
    assert_eq!(s.request_body(rest, true), Action::Continue);
    // The headers were held until the statement was read, then went on with its class.
    let upstream = &s.host().request;
    assert_eq!(
        upstream.sent_header("content-type"),
        Some("application/proto")
    );
    assert_eq!(upstream.sent_header("x-ferry-rpc"), Some("Execute"));
    assert_eq!(
        upstream.sent_header("x-ferry-protocol"),
        Some("connect-json")
    );
    assert_eq!(upstream.sent_header("authorization"), Some(AUTH));
    for removed in ["content-length", "accept-encoding", "x-ferry-host"] {
        assert_eq!(upstream.sent_header(removed), None, "{removed}");
    }
    assert_eq!(upstream.sent_header("x-ferry-class"), Some("read"));
    let upstream = &s.host().request;
    assert!(upstream.ended);
    let request = ExecuteRequest::decode(upstream.sent_body.as_slice()).unwrap();
    assert_eq!(request.query, "SELECT 1");
    let writes = body_writes(s.host());
    assert!(
        matches!(
            writes.as_slice(),
            [
                (Phase::RequestBody { end_of_stream: false }, Call::SetBody { body: Body::Request, start: 0, size: 12, bytes: emptied }),
                (Phase::RequestBody { end_of_stream: true }, Call::SetBody { body: Body::Request, start: 0, size, .. }),
            ] if emptied.is_empty() && *size == rest.len()
        ),
        "{writes:?}"
    );

    // The shim's proto answer becomes protojson as it arrives, chunk by chunk.
    let answer = execute_response().encode_to_vec();
    let len = answer.len().to_string();
    assert_eq!(s.response_headers(&shim_ok(&len), false), Action::Continue);
    let downstream = &s.host().response;
    assert_eq!(downstream.sent_header(":status"), Some("200"));
    assert_eq!(
        downstream.sent_header("content-type"),
        Some("application/json")
    );
    assert_eq!(downstream.sent_header("content-length"), None);
    assert_eq!(downstream.sent_header("x-ferry-host"), None, "internal");
    let (start, rest) = answer.split_at(7);
    assert_eq!(s.response_body(start, false), Action::Continue);
    assert!(!s.host().response.sent_body.is_empty(), "went on at once");
    assert_eq!(s.response_body(rest, true), Action::Continue);
    let downstream = &s.host().response;
    let answer: ExecuteResponse = serde_json::from_slice(&downstream.sent_body).unwrap();
    assert_eq!(answer, execute_response());
    assert_eq!(downstream.sent_trailers, None);
    assert!(downstream.ended);
    s.assert_no_violations();
}

#[test]
fn a_grpc_request_loses_its_frame_and_its_proto_answer_gets_one_with_trailers() {
    let mut s = stream();
    let message = ExecuteRequest {
        query: "SELECT 2".into(),
        ..Default::default()
    }
    .encode_to_vec();
    let mut headers = post(EXECUTE, "application/grpc");
    headers.push(("te", "trailers"));
    assert_eq!(s.request_headers(&headers, false), Action::Pause);
    assert_eq!(s.request_body(&framed(&message), true), Action::Continue);
    assert_eq!(s.host().request.sent_header("te"), None);
    assert_eq!(
        s.host().request.sent_header("x-ferry-protocol"),
        Some("grpc-proto")
    );
    assert_eq!(s.host().request.sent_header("x-ferry-class"), Some("read"));
    assert_eq!(s.host().request.sent_body, message);

    let answer = execute_response().encode_to_vec();
    let len = answer.len().to_string();
    assert_eq!(s.response_headers(&shim_ok(&len), false), Action::Continue);
    let downstream = &s.host().response;
    assert_eq!(
        downstream.sent_header("content-type"),
        Some("application/grpc")
    );
    assert_eq!(downstream.sent_header("content-length"), None);
    // Its size declared: the header goes in front of the first chunk, and each chunk
    // goes on as it comes.
    let (start, rest) = answer.split_at(10);
    assert_eq!(s.response_body(start, false), Action::Continue);
    assert_eq!(s.host().response.sent_body, framed(&answer)[..15]);
    assert_eq!(s.response_body(rest, true), Action::Continue);
    let downstream = &s.host().response;
    assert_eq!(downstream.sent_body, framed(&answer));
    assert_eq!(
        downstream.sent_trailers,
        Some(vec![("grpc-status".into(), "0".into())])
    );
    // Only the 5-byte header went in; the message never entered the VM.
    assert_eq!(reads_of(s.host(), Body::Response), 0);
    let writes: Vec<_> = body_writes(s.host())
        .into_iter()
        .filter(|(phase, _)| phase.is_response())
        .collect();
    assert!(matches!(
        writes.as_slice(),
        [(
            Phase::ResponseBody { end_of_stream: false },
            Call::SetBody { body: Body::Response, start: 0, size: 0, bytes }
        )] if bytes.len() == 5
    ));
    let trailer_adds = s.host().calls_in(|p| {
        p == Phase::ResponseBody {
            end_of_stream: true,
        }
    });
    assert!(trailer_adds.iter().any(|call| matches!(
        call,
        Call::AddHeader {
            map: Map::ResponseTrailers,
            ..
        }
    )));
    s.assert_no_violations();
}

#[test]
fn upstream_trailers_end_a_converted_answer() {
    let mut s = stream();
    assert_eq!(
        s.request_headers(&post(EXECUTE, "application/grpc+json"), false),
        Action::Pause
    );
    assert_eq!(
        s.request_body(&framed(br#"{"query":"SELECT 1"}"#), false),
        Action::Pause
    );
    // Request trailers end the buffered body: read and replaced from the trailers callback.
    assert_eq!(s.request_trailers(&[("x-trailer", "1")]), Action::Continue);
    let upstream = &s.host().request;
    assert_eq!(
        ExecuteRequest::decode(upstream.sent_body.as_slice())
            .unwrap()
            .query,
        "SELECT 1"
    );
    assert_eq!(
        upstream.sent_trailers,
        Some(vec![("x-trailer".into(), "1".into())])
    );

    // A gRPC answer moves into the VM chunk by chunk (each goes on emptied): its
    // message cannot follow HTTP trailers (the shim never sends any): reset.
    let answer = execute_response().encode_to_vec();
    let len = answer.len().to_string();
    assert_eq!(s.response_headers(&shim_ok(&len), false), Action::Continue);
    assert_eq!(s.response_body(&answer, false), Action::Continue);
    assert!(s.host().response.sent_body.is_empty());
    assert_eq!(s.response_trailers(&[]), Action::Pause);
    assert!(s.host().reset);
    s.assert_no_violations();
}

#[test]
fn upstream_trailers_after_a_streamed_json_answer_reset_it() {
    // Connect unary JSON goes on chunk by chunk: its end cannot follow trailers (the
    // shim never sends any with a unary answer).
    let mut s = stream();
    assert_eq!(
        s.request_headers(&post(EXECUTE, "application/json"), false),
        Action::Pause
    );
    assert_eq!(s.request_body(b"{}", true), Action::Continue);
    let answer = execute_response().encode_to_vec();
    let len = answer.len().to_string();
    assert_eq!(s.response_headers(&shim_ok(&len), false), Action::Continue);
    assert_eq!(s.response_body(&answer, false), Action::Continue);
    s.response_trailers(&[]);
    assert!(s.host().reset);
    s.assert_no_violations();
}

#[test]
fn an_unknown_content_type_is_answered_415_from_the_headers_callback() {
    let mut s = stream();
    assert_eq!(
        s.request_headers(&post(EXECUTE, "text/plain"), false),
        Action::Pause
    );
    let reply = s.host().local_reply.clone().unwrap();
    assert_eq!(reply.status, 415);
    assert_eq!(reply.header("content-type"), Some("application/json"));
    assert!(reply.header("accept-post").is_some());
    assert_eq!(json(&reply.body)["code"], "invalid_argument");
    assert_eq!(s.host().request.sent_headers, None, "nothing went upstream");
    assert!(matches!(
        s.host().calls.last(),
        Some((Phase::RequestHeaders { .. }, Call::SendReply(_)))
    ));

    // The reply goes out through the filter's response callbacks, untouched.
    let before = s.host().calls.len();
    assert_eq!(
        s.local_reply_goes_out(),
        (Action::Continue, Some(Action::Continue))
    );
    let downstream = &s.host().response;
    assert_eq!(downstream.sent_header(":status"), Some("415"));
    assert_eq!(
        downstream.sent_header("content-type"),
        Some("application/json")
    );
    assert_eq!(downstream.sent_body, reply.body);
    // ... but for the gateway's server-timing entry.
    assert_eq!(
        downstream.sent_header("server-timing"),
        Some("gateway;dur=0.000")
    );
    let later = &s.host().calls[before..];
    assert!(
        later
            .iter()
            .all(|(_, call)| matches!(call, Call::Headers { .. })
                || matches!(call, Call::SetHeader { name, .. } if name == "server-timing")),
        "only reads: {later:?}"
    );
    s.assert_no_violations();
}

#[test]
fn a_connect_get_gets_its_message_as_the_body_envoy_opened() {
    let mut s = stream();
    let path =
        format!("{EXECUTE}?connect=v1&encoding=json&message=%7B%22query%22%3A%22SELECT+1%22%7D");
    let headers = [
        (":method", "GET"),
        (":path", path.as_str()),
        ("authorization", AUTH),
    ];
    assert_eq!(s.request_headers(&headers, false), Action::Continue);
    let upstream = &s.host().request;
    // Its message is in the query: classified at once (a GET runs only reads).
    assert_eq!(upstream.sent_header("x-ferry-class"), Some("read"));
    assert_eq!(upstream.sent_header(":method"), Some("POST"));
    assert_eq!(upstream.sent_header(":path"), Some(EXECUTE));
    // The Lua filter's empty body: the message is prepended to it.
    assert_eq!(s.request_body(b"", true), Action::Continue);
    let upstream = &s.host().request;
    let request = ExecuteRequest::decode(upstream.sent_body.as_slice()).unwrap();
    assert_eq!(request.query, "SELECT 1");
    s.assert_no_violations();
}

#[test]
fn a_grpc_stream_is_converted_chunk_by_chunk_as_it_goes() {
    let mut s = stream_with(roomy(), false);
    assert_eq!(
        s.request_headers(&post(STREAM_EXECUTE, "application/grpc"), false),
        Action::Pause
    );
    let request = ExecuteRequest {
        query: "SELECT * FROM t".into(),
        ..Default::default()
    };
    assert_eq!(
        s.request_body(&framed(&request.encode_to_vec()), true),
        Action::Continue
    );
    // The shim's Connect stream: three messages, then its end message.
    let messages: Vec<Vec<u8>> = (0..3)
        .map(|i| {
            let mut m = execute_response();
            m.timing = f64::from(i);
            m.encode_to_vec()
        })
        .collect();
    let mut shim = Vec::new();
    for m in &messages {
        shim.extend(envelope(0, m));
    }
    shim.extend(envelope(2, b"{}"));
    let headers = [
        (":status", "200"),
        ("content-type", "application/connect+proto"),
        ("ferry-shim-instance", "0123456789abcdef"),
    ];
    assert_eq!(s.response_headers(&headers, false), Action::Continue);
    assert_eq!(
        s.host().response.sent_header("content-type"),
        Some("application/grpc")
    );
    let chunks: Vec<&[u8]> = shim.chunks(7).collect();
    for (i, chunk) in chunks.iter().enumerate() {
        let last = i + 1 == chunks.len();
        assert_eq!(s.response_body(chunk, last), Action::Continue, "chunk {i}");
    }
    let downstream = &s.host().response;
    let want: Vec<u8> = messages.iter().flat_map(|m| framed(m)).collect();
    assert_eq!(downstream.sent_body, want);
    assert_eq!(downstream.sent_trailer("grpc-status"), Some("0"));
    // Each chunk was read and replaced in its own callback; nothing was buffered.
    assert_eq!(reads_of(s.host(), Body::Response), chunks.len());
    s.assert_no_violations();
}

#[test]
fn a_stream_ended_by_upstream_trailers_gets_its_end_there() {
    let mut s = stream_with(roomy(), false);
    assert_eq!(
        s.request_headers(&post(STREAM_EXECUTE, "application/grpc"), false),
        Action::Pause
    );
    assert_eq!(s.request_body(&framed(&[]), true), Action::Continue);
    let headers = [
        (":status", "200"),
        ("content-type", "application/connect+proto"),
        ("ferry-shim-instance", "0123456789abcdef"),
    ];
    assert_eq!(s.response_headers(&headers, false), Action::Continue);
    let message = execute_response().encode_to_vec();
    let mut shim = envelope(0, &message);
    shim.extend(envelope(2, b"{}"));
    // The end message is in this chunk: the rest is held (see the next test).
    assert_eq!(s.response_body(&shim, false), Action::Pause);
    assert_eq!(s.response_trailers(&[]), Action::Continue);
    let downstream = &s.host().response;
    assert_eq!(downstream.sent_body, framed(&message));
    assert_eq!(downstream.sent_trailer("grpc-status"), Some("0"));
    s.assert_no_violations();
}

/// A gRPC `StreamExecute` whose shim answer headers went out.
fn grpc_stream_answering() -> Stream {
    let mut s = stream_with(roomy(), false);
    assert_eq!(
        s.request_headers(&post(STREAM_EXECUTE, "application/grpc"), false),
        Action::Pause
    );
    assert_eq!(s.request_body(&framed(&[]), true), Action::Continue);
    let headers = [
        (":status", "200"),
        ("content-type", "application/connect+proto"),
        ("ferry-shim-instance", "0123456789abcdef"),
    ];
    assert_eq!(s.response_headers(&headers, false), Action::Continue);
    s
}

/// Envoy loses trailers added in a body callback when a later filter stops on that
/// chunk (grpc_web answering `grpc-web-text` stops on a chunk without a whole frame,
/// like a gRPC stream's empty last chunk): so once the end is known, the rest is held
/// and the end leaves from a paused filter, which Envoy resumes body then trailers.
#[test]
fn a_stream_whose_end_is_known_holds_the_rest_until_the_body_ends() {
    let mut s = grpc_stream_answering();
    let first = execute_response().encode_to_vec();
    let mut last = execute_response();
    last.timing = 1.0;
    let last = last.encode_to_vec();
    assert_eq!(
        s.response_body(&envelope(0, &first), false),
        Action::Continue
    );
    assert_eq!(s.host().response.sent_body, framed(&first), "streams on");
    // The last message and the end message in one chunk: held, nothing goes on.
    let mut chunk = envelope(0, &last);
    chunk.extend(envelope(2, b"{}"));
    assert_eq!(s.response_body(&chunk, false), Action::Pause);
    assert_eq!(s.host().response.sent_body, framed(&first));
    // The shim's own last chunk (empty, end of stream): everything goes on, then the
    // trailers.
    assert_eq!(s.response_body(b"", true), Action::Continue);
    let downstream = &s.host().response;
    let mut want = framed(&first);
    want.extend(framed(&last));
    assert_eq!(downstream.sent_body, want);
    assert_eq!(downstream.sent_trailer("grpc-status"), Some("0"));
    assert!(downstream.ended);
    s.assert_no_violations();
}

#[test]
fn a_stream_that_failed_holds_what_follows_and_ends_with_the_failure() {
    let mut s = grpc_stream_answering();
    let message = execute_response().encode_to_vec();
    // A message with flags the shim never sends: the stream fails here.
    let mut chunk = envelope(0, &message);
    chunk.extend(envelope(0x40, b"x"));
    assert_eq!(s.response_body(&chunk, false), Action::Pause);
    assert_eq!(s.host().response.sent_body, b"");
    assert_eq!(
        s.response_body(&envelope(0, &message), false),
        Action::Pause,
        "dropped, still held"
    );
    assert_eq!(s.response_body(b"", true), Action::Continue);
    let downstream = &s.host().response;
    assert_eq!(downstream.sent_body, framed(&message), "what came before");
    assert_eq!(downstream.sent_trailer("grpc-status"), Some("13"));
    s.assert_no_violations();
}

// ----- rewritten requests: moved into the VM chunk by chunk -----

/// A stream whose headers Envoy does not hold (a mesh: `header_hold` off or found
/// missing), with Envoy's buffer limit at `buffer_limit`.
fn unheld_stream(limits: Limits, buffer_limit: Option<usize>) -> Stream {
    let mut s = Stream::new(
        Exchange::new(Rc::new(Config {
            limits,
            ..Config::default()
        }))
        .with_hold(Hold::Missing),
    );
    s.host_mut().buffer_limit = buffer_limit;
    s
}

fn held_stream(limits: Limits, buffer_limit: Option<usize>) -> Stream {
    let mut s = stream_with(limits, false);
    s.host_mut().buffer_limit = buffer_limit;
    s
}

fn large_insert(rows: usize) -> ExecuteRequest {
    let values: Vec<String> = (0..rows).map(|i| format!("({i}, 'row {i}')")).collect();
    ExecuteRequest {
        query: format!("INSERT INTO t VALUES {}", values.join(", ")),
        ..Default::default()
    }
}

/// Sends `body` in chunks of `size`; the action of each callback.
fn send_body(s: &mut Stream, body: &[u8], size: usize) -> Vec<Action> {
    let chunks: Vec<&[u8]> = body.chunks(size).collect();
    let last = chunks.len() - 1;
    let mut actions = Vec::new();
    for (i, chunk) in chunks.into_iter().enumerate() {
        actions.push(s.request_body(chunk, i == last));
        if s.host().local_reply.is_some() {
            break;
        }
    }
    actions
}

#[test]
fn a_multi_chunk_json_request_is_kept_in_the_vm_past_envoys_buffer_limit() {
    // Envoy's limit (64 bytes) far below the message: Envoy never buffers more than an
    // empty chunk, so it never answers 413.
    let request = large_insert(20);
    let body = serde_json::to_vec(&request).unwrap();
    assert!(body.len() > 300 && body.len() < 1000, "{}", body.len());
    let mut s = unheld_stream(limits(), Some(64));
    assert_eq!(
        s.request_headers(&post(EXECUTE, "application/json"), false),
        Action::Continue,
        "not held: the headers go on at once"
    );
    let actions = send_body(&mut s, &body, 50);
    assert!(
        actions.iter().all(|a| *a == Action::Continue),
        "{actions:?}"
    );
    let upstream = &s.host().request;
    assert!(!s.host().payload_too_large);
    assert_eq!(s.host().local_reply, None);
    assert!(upstream.ended);
    assert_eq!(upstream.sent_header("x-ferry-class"), Some("write"));
    assert_eq!(
        ExecuteRequest::decode(upstream.sent_body.as_slice()).unwrap(),
        request,
        "the upstream got empty chunks, then the whole message with the last"
    );
    // Every chunk but the last was emptied; the last was replaced by the message.
    let writes = body_writes(s.host());
    assert_eq!(writes.len(), body.len().div_ceil(50));
    assert!(writes[..writes.len() - 1].iter().all(|(phase, call)| {
        *phase
            == Phase::RequestBody {
                end_of_stream: false,
            }
            && matches!(call, Call::SetBody { bytes, .. } if bytes.is_empty())
    }));
    s.assert_no_violations();

    // Held headers (Execute's class): the callbacks pause on emptied chunks, so the
    // body Envoy buffers stays empty; the end routes and writes the message, which
    // then goes through Envoy's buffer: its limit still bounds the message.
    let mut s = held_stream(limits(), Some(2000));
    assert_eq!(
        s.request_headers(&post(EXECUTE, "application/json"), false),
        Action::Pause
    );
    let chunks: Vec<&[u8]> = body.chunks(50).collect();
    for chunk in &chunks[..chunks.len() - 1] {
        assert_eq!(s.request_body(chunk, false), Action::Pause);
        assert!(s.host().request.body.is_empty(), "Envoy buffers nothing");
        assert_eq!(s.host().request.sent_headers, None, "still held");
    }
    assert_eq!(
        s.request_body(chunks[chunks.len() - 1], true),
        Action::Continue
    );
    let upstream = &s.host().request;
    assert_eq!(upstream.sent_header("x-ferry-class"), Some("write"));
    assert_eq!(
        ExecuteRequest::decode(upstream.sent_body.as_slice()).unwrap(),
        request
    );
    s.assert_no_violations();
    let mut s = held_stream(limits(), Some(64));
    s.request_headers(&post(EXECUTE, "application/json"), false);
    send_body(&mut s, &body, 50);
    assert!(s.host().payload_too_large, "the held message's write: 413");
}

#[test]
fn a_multi_chunk_compressed_grpc_request_is_inflated_at_its_end() {
    let request = large_insert(40);
    let message = request.encode_to_vec();
    let mut packed = Vec::new();
    ferry_compress::compress(ferry_compress::Encoding::Gzip, &message, &mut packed);
    assert!(packed.len() < message.len() / 2);
    let body = envelope(1, &packed);
    let limits = Limits {
        max_request_bytes: 4096,
        max_response_bytes: 4096,
    };
    assert!(message.len() < 4096);
    // Envoy's limit: far below the compressed body; held, room for the message only
    // (which the end writes into Envoy's buffer).
    for held in [false, true] {
        let mut s = if held {
            held_stream(limits, Some(message.len()))
        } else {
            unheld_stream(limits, Some(32))
        };
        let mut headers = post(EXECUTE, "application/grpc");
        headers.push(("grpc-encoding", "gzip"));
        s.request_headers(&headers, false);
        let actions = send_body(&mut s, &body, 16);
        let want = if held {
            Action::Pause
        } else {
            Action::Continue
        };
        assert!(
            actions[..actions.len() - 1].iter().all(|a| *a == want),
            "{actions:?}"
        );
        assert_eq!(actions.last(), Some(&Action::Continue));
        let upstream = &s.host().request;
        assert!(!s.host().payload_too_large);
        assert_eq!(upstream.sent_header("grpc-encoding"), None);
        assert_eq!(
            ExecuteRequest::decode(upstream.sent_body.as_slice()).unwrap(),
            request
        );
        s.assert_no_violations();
    }
}

#[test]
fn a_request_past_the_limit_mid_way_is_refused_before_any_byte_goes_on() {
    let body = serde_json::to_vec(&large_insert(100)).unwrap();
    assert!(body.len() > 1100, "{}", body.len());
    for held in [false, true] {
        let mut s = if held {
            held_stream(limits(), None)
        } else {
            unheld_stream(limits(), None)
        };
        s.request_headers(&post(EXECUTE, "application/json"), false);
        let actions = send_body(&mut s, &body, 100);
        assert_eq!(
            actions.len(),
            11,
            "refused at the chunk that passes 1000 bytes"
        );
        let reply = s.host().local_reply.clone().unwrap();
        assert_eq!(reply.status, 429);
        assert_eq!(json(&reply.body)["code"], "resource_exhausted");
        let upstream = &s.host().request;
        assert!(upstream.sent_body.is_empty(), "only empty chunks went on");
        assert!(
            !upstream.ended,
            "the upstream stream never ended: Envoy resets it"
        );
        assert_eq!(upstream.sent_headers.is_some(), !held);
        s.assert_no_violations();
    }
}

#[test]
fn a_bad_json_request_found_at_its_end_reaches_nothing_upstream() {
    let body = br#"{"query": "INSERT INTO t VALUES (1)", "bindVariables": ["#;
    for held in [false, true] {
        let mut s = if held {
            held_stream(limits(), None)
        } else {
            unheld_stream(limits(), None)
        };
        s.request_headers(&post(EXECUTE, "application/json"), false);
        let actions = send_body(&mut s, body, 8);
        assert_eq!(actions.last(), Some(&Action::Pause), "answered locally");
        let reply = s.host().local_reply.clone().unwrap();
        assert_eq!(reply.status, 400);
        assert_eq!(json(&reply.body)["code"], "invalid_argument");
        let upstream = &s.host().request;
        assert!(upstream.sent_body.is_empty());
        assert!(!upstream.ended);
        // Without the hold the headers went on (Envoy resets that upstream stream at
        // the local reply); with it nothing did.
        assert_eq!(upstream.sent_headers.is_some(), !held);
        s.assert_no_violations();
        // The reply goes out through the filter untouched.
        let (head, _) = s.local_reply_goes_out();
        assert_eq!(head, Action::Continue);
        assert_eq!(s.host().response.sent_header(":status"), Some("400"));
    }
}

#[test]
fn request_trailers_after_chunks_that_went_on_cannot_carry_the_message() {
    // Held: the last callback paused, so the trailers callback still has Envoy's
    // (emptied) body to write the message into.
    let message = ExecuteRequest {
        query: "SELECT 1".into(),
        ..Default::default()
    }
    .encode_to_vec();
    let mut s = held_stream(limits(), None);
    s.request_headers(&post(EXECUTE, "application/grpc"), false);
    assert_eq!(s.request_body(&framed(&message), false), Action::Pause);
    assert_eq!(s.request_trailers(&[]), Action::Continue);
    assert_eq!(s.host().request.sent_body, message);
    s.assert_no_violations();
    // Not held: the chunk went on, and Envoy gives a trailers callback no body to
    // write: refused (gRPC and Connect send no request trailers), nothing forwarded.
    let mut s = unheld_stream(limits(), None);
    s.request_headers(&post(EXECUTE, "application/grpc"), false);
    assert_eq!(s.request_body(&framed(&message), false), Action::Continue);
    assert_eq!(s.request_trailers(&[]), Action::Pause);
    let reply = s.host().local_reply.clone().unwrap();
    assert_eq!(reply.header("grpc-status"), Some("3"));
    assert!(s.host().request.sent_body.is_empty());
    assert!(body_writes(s.host())
        .iter()
        .all(|(phase, _)| *phase != Phase::RequestTrailers));
    s.assert_no_violations();
}

#[test]
fn a_held_canonical_request_stays_in_envoys_buffer_and_its_limit() {
    // Connect proto held for its route is not rewritten: Envoy buffers it (the session
    // is read from there), so Envoy's limit bounds it, as documented.
    let body = large_insert(30).encode_to_vec();
    assert!(body.len() > 200);
    let mut s = held_stream(limits(), Some(200));
    s.request_headers(&post(EXECUTE, "application/proto"), false);
    send_body(&mut s, &body, 100);
    assert!(s.host().payload_too_large);
    // Not held, it streams untouched and nothing is buffered.
    let mut s = unheld_stream(limits(), Some(200));
    s.request_headers(&post(EXECUTE, "application/proto"), false);
    let actions = send_body(&mut s, &body, 100);
    assert!(actions.iter().all(|a| *a == Action::Continue));
    assert_eq!(s.host().request.sent_body, body);
    assert!(body_writes(s.host()).is_empty());
    s.assert_no_violations();
}

// ----- session affinity -----

/// A pinned Connect proto `Execute`, held and routed; its body.
fn held_and_routed(s: &mut Stream) -> Vec<u8> {
    let body = pinned_execute();
    assert_eq!(
        s.request_headers(&post(EXECUTE, "application/proto"), false),
        Action::Pause,
        "held"
    );
    assert_eq!(s.host().request.sent_headers, None);
    let (start, rest) = body.split_at(body.len() / 2);
    assert_eq!(s.request_body(start, false), Action::Pause);
    assert_eq!(s.host().request.sent_headers, None, "still held");
    assert_eq!(s.request_body(rest, true), Action::Continue);
    body
}

#[test]
fn a_held_request_pauses_its_headers_and_continues_once_routed() {
    let mut s = affine_stream();
    let body = held_and_routed(&mut s);
    let upstream = &s.host().request;
    assert_eq!(upstream.sent_header("x-ferry-host"), Some(HOLDER_B64));
    assert_eq!(
        upstream.sent_header("x-ferry-protocol"),
        Some("connect-proto")
    );
    assert_eq!(upstream.sent_body, body, "forwarded untouched");
    // The session was read through windows of the host's buffer; nothing was written.
    assert!(reads_of(s.host(), Body::Request) > 0);
    assert!(body_writes(s.host()).is_empty());
    assert!(s
        .host()
        .calls_in(|p| p
            == Phase::RequestBody {
                end_of_stream: true
            })
        .contains(&&Call::SetHeader {
            map: Map::RequestHeaders,
            name: "x-ferry-host".into(),
            value: HOLDER_B64.into(),
        }));

    // JSON: rewritten, then routed from the canonical body, in the same callback.
    let mut s = affine_stream();
    let close = serde_json::to_vec(&CloseSessionRequest {
        session: Some(pinned_session("127.0.0.1:18084")),
    })
    .unwrap();
    assert_eq!(
        s.request_headers(&post(CLOSE_SESSION, "application/json"), false),
        Action::Pause
    );
    assert_eq!(s.request_body(&close, true), Action::Continue);
    let upstream = &s.host().request;
    assert_eq!(upstream.sent_header("x-ferry-host"), Some(HOLDER_B64));
    assert_eq!(
        CloseSessionRequest::decode(upstream.sent_body.as_slice()).unwrap(),
        CloseSessionRequest {
            session: Some(pinned_session("127.0.0.1:18084"))
        }
    );
    s.assert_no_violations();
}

#[test]
fn a_lost_pin_is_answered_from_the_body_callback() {
    let mut s = affine_stream();
    held_and_routed(&mut s);
    // Envoy's own 503: the shim holding the session is gone.
    let headers = [
        (":status", "503"),
        ("content-type", "text/plain"),
        ("content-length", "19"),
    ];
    assert_eq!(s.response_headers(&headers, false), Action::Continue);
    assert_eq!(s.host().response.sent_header(":status"), Some("200"));
    assert_eq!(
        s.response_body(b"no healthy upstream", true),
        Action::Continue
    );
    let answer = ExecuteResponse::decode(s.host().response.sent_body.as_slice()).unwrap();
    assert_eq!(answer.error.unwrap().code, 10, "ABORTED");
    assert_eq!(
        answer.session.unwrap(),
        pinned_session("127.0.0.1:18084"),
        "the session the client sent"
    );
    s.assert_no_violations();
}

// ----- answers that cannot be completed -----

#[test]
fn a_connect_answer_that_cannot_be_completed_is_reset() {
    // Malformed protobuf from the shim: read at the end, then reset.
    let mut s = stream();
    assert_eq!(
        s.request_headers(&post(EXECUTE, "application/json"), false),
        Action::Pause
    );
    assert_eq!(s.request_body(b"{}", true), Action::Continue);
    assert_eq!(s.response_headers(&shim_ok("2"), false), Action::Continue);
    assert_eq!(s.response_body(&[0x12, 0x05], true), Action::Pause);
    assert!(s.host().reset);
    assert!(matches!(
        s.host().calls.last(),
        Some((
            Phase::ResponseBody {
                end_of_stream: true
            },
            Call::ResetResponse
        ))
    ));
    assert!(s.host().response.sent_body.is_empty());
    s.assert_no_violations();

    // Oversized while streaming in (its 200 is out): reset before the end.
    let mut s = stream();
    assert_eq!(
        s.request_headers(&post(EXECUTE, "application/json"), false),
        Action::Pause
    );
    assert_eq!(s.request_body(b"{}", true), Action::Continue);
    assert_eq!(s.response_headers(&shim_ok("0"), false), Action::Continue);
    assert_eq!(s.response_body(&[0; 2001], false), Action::Pause);
    assert!(s.host().reset);
    assert_eq!(reads_of(s.host(), Body::Response), 0);
    s.assert_no_violations();
}

/// A Connect JSON answer that may be compressed with a codec judged on a sample (s2):
/// its headers are held until the body's start says whether compression pays.
/// (headers action, stream.)
fn held_answer(limits: Limits) -> (Action, Stream) {
    let mut s = stream_with(limits, false);
    let mut headers = post(EXECUTE, "application/json");
    headers.push(("accept-encoding", "s2"));
    assert_eq!(s.request_headers(&headers, false), Action::Pause);
    assert_eq!(s.request_body(b"{}", true), Action::Continue);
    // No content-length: the answer may be large enough to compress.
    let answer = [
        (":status", "200"),
        ("content-type", "application/proto"),
        ("ferry-shim-instance", "0123456789abcdef"),
    ];
    let action = s.response_headers(&answer, false);
    (action, s)
}

fn roomy() -> Limits {
    Limits {
        max_request_bytes: 1000,
        max_response_bytes: 1 << 20,
    }
}

#[test]
fn held_response_headers_are_completed_from_the_body_callback() {
    let (action, mut s) = held_answer(roomy());
    assert_eq!(action, Action::Pause, "held");
    assert_eq!(s.host().response.sent_headers, None);
    let mut answer = execute_response();
    if let Some(result) = answer.result.as_mut() {
        result.rows = vec![
            Row {
                lengths: vec![1],
                values: b"1".to_vec(),
            };
            200
        ];
    }
    let answer = answer.encode_to_vec();
    let (start, rest) = answer.split_at(answer.len() / 2);
    assert_eq!(s.response_body(start, false), Action::Pause);
    assert_eq!(s.response_body(rest, true), Action::Continue);
    let downstream = &s.host().response;
    assert_eq!(
        downstream.sent_header("content-type"),
        Some("application/json")
    );
    assert_eq!(downstream.sent_header("content-encoding"), Some("s2"));
    assert!(
        downstream.sent_body.starts_with(b"\xff\x06\x00\x00S2sTwO"),
        "s2"
    );
    // The encoding was named from the last body callback, while the headers were held.
    assert!(s
        .host()
        .calls_in(|p| p
            == Phase::ResponseBody {
                end_of_stream: true
            })
        .iter()
        .any(|call| matches!(
            call,
            Call::SetHeader {
                map: Map::ResponseHeaders,
                ..
            }
        )));
    s.assert_no_violations();

    // Too small to pay: the headers go out as they were held.
    let (action, mut s) = held_answer(roomy());
    assert_eq!(action, Action::Pause);
    let answer = execute_response().encode_to_vec();
    assert_eq!(s.response_body(&answer, true), Action::Continue);
    let downstream = &s.host().response;
    assert_eq!(downstream.sent_header("content-encoding"), None);
    assert_eq!(
        serde_json::from_slice::<ExecuteResponse>(&downstream.sent_body).unwrap(),
        execute_response()
    );
    s.assert_no_violations();
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

#[test]
fn held_response_headers_go_out_with_the_sample_and_the_rest_streams() {
    // Larger than the 64 KiB sample: judged on it, the headers go out with its s2
    // chunks from a body callback before the end, and the rest follows compressed.
    let (action, mut s) = held_answer(roomy());
    assert_eq!(action, Action::Pause, "held");
    let answer = compressible_answer();
    let chunks: Vec<&[u8]> = answer.chunks(40_000).collect();
    assert!(chunks.len() >= 4);
    assert_eq!(s.response_body(chunks[0], false), Action::Pause, "sampling");
    assert_eq!(s.host().response.sent_headers, None);
    assert_eq!(
        s.response_body(chunks[1], false),
        Action::Continue,
        "judged"
    );
    let downstream = &s.host().response;
    assert_eq!(downstream.sent_header("content-encoding"), Some("s2"));
    assert_eq!(
        downstream.sent_header("content-type"),
        Some("application/json")
    );
    for (i, chunk) in chunks.iter().enumerate().skip(2) {
        let action = s.response_body(chunk, i + 1 == chunks.len());
        assert_eq!(action, Action::Continue);
    }
    let mut json = Vec::new();
    ferry_compress::decompress(
        ferry_compress::Encoding::S2,
        &s.host().response.sent_body,
        1 << 24,
        &mut json,
    )
    .unwrap();
    let back: ExecuteResponse = serde_json::from_slice(&json).unwrap();
    assert_eq!(back.result.unwrap().rows.len(), 4000);
    s.assert_no_violations();
}

#[test]
fn a_large_grpc_answer_is_compressed_into_the_vm_and_framed_at_its_end() {
    // Each chunk moves into the VM (the sample, then compressed as it comes) and goes
    // on emptied; the last callback writes the frame and trailers. Envoy buffers
    // nothing, whatever its limit.
    let mut s = stream_with(roomy(), false);
    s.host_mut().buffer_limit = Some(1024);
    let message = ExecuteRequest {
        query: "SELECT 2".into(),
        ..Default::default()
    }
    .encode_to_vec();
    let mut headers = post(EXECUTE, "application/grpc");
    headers.push(("grpc-accept-encoding", "gzip"));
    assert_eq!(s.request_headers(&headers, false), Action::Pause);
    assert_eq!(s.request_body(&framed(&message), true), Action::Continue);
    let answer = compressible_answer();
    let len = answer.len().to_string();
    assert_eq!(s.response_headers(&shim_ok(&len), false), Action::Continue);
    assert_eq!(s.host().response.sent_header("grpc-encoding"), Some("gzip"));
    let chunks: Vec<&[u8]> = answer.chunks(40_000).collect();
    assert!(chunks.len() >= 4);
    for (i, chunk) in chunks.iter().enumerate() {
        let end = i + 1 == chunks.len();
        let action = s.response_body(chunk, end);
        assert_eq!(action, Action::Continue, "chunk {i}");
        if !end {
            assert!(
                s.host().response.sent_body.is_empty(),
                "nothing out before the end"
            );
        }
    }
    let downstream = &s.host().response;
    let body = &downstream.sent_body;
    assert_eq!(body[0], 1, "compressed");
    let len = u32::from_be_bytes([body[1], body[2], body[3], body[4]]) as usize;
    assert_eq!(len, body.len() - 5);
    let mut plain = Vec::new();
    ferry_compress::decompress(
        ferry_compress::Encoding::Gzip,
        &body[5..],
        1 << 24,
        &mut plain,
    )
    .unwrap();
    assert_eq!(plain, answer);
    assert_eq!(
        downstream.sent_trailers,
        Some(vec![("grpc-status".into(), "0".into())])
    );
    assert_eq!(s.host().response_buffered_peak, 0);
    assert!(!s.host().response_too_large);
    s.assert_no_violations();
}

#[test]
fn a_held_answer_that_outgrows_the_limit_is_replaced_by_a_local_reply() {
    let (action, mut s) = held_answer(limits());
    assert_eq!(action, Action::Pause);
    assert_eq!(s.response_body(&[0; 2001], false), Action::Pause);
    let reply = s.host().local_reply.clone().unwrap();
    assert_eq!(reply.status, 429);
    assert_eq!(json(&reply.body)["code"], "resource_exhausted");
    assert!(matches!(
        s.host().calls.last(),
        Some((
            Phase::ResponseBody {
                end_of_stream: false
            },
            Call::SendReply(_)
        ))
    ));
    assert!(!s.host().reset);
    assert_eq!(s.host().response.sent_headers, None, "replaced, never sent");
    s.assert_no_violations();
}

#[test]
fn a_held_connect_answer_that_fails_at_its_end_gets_an_error_status() {
    let (action, mut s) = held_answer(limits());
    assert_eq!(action, Action::Pause);
    let mut answer = execute_response();
    if let Some(result) = answer.result.as_mut() {
        result.rows = vec![
            Row {
                lengths: vec![1],
                values: b"1".to_vec(),
            };
            200
        ];
    }
    let answer = answer.encode_to_vec();
    assert!(answer.len() < 2000, "the proto fits, its JSON does not");
    assert_eq!(s.response_body(&answer, true), Action::Continue);
    let downstream = &s.host().response;
    assert_eq!(json(&downstream.sent_body)["code"], "resource_exhausted");
    assert_eq!(downstream.sent_header(":status"), Some("429"));
    s.assert_no_violations();
}

#[test]
fn an_oversized_grpc_answer_is_discarded_and_ends_with_status_8() {
    let mut s = stream();
    assert_eq!(
        s.request_headers(&post(EXECUTE, "application/grpc"), false),
        Action::Pause
    );
    assert_eq!(s.request_body(&framed(&[]), true), Action::Continue);
    assert_eq!(
        s.response_headers(&shim_undeclared(), false),
        Action::Continue
    );
    s.host_mut().buffer_limit = Some(1024);
    assert_eq!(s.response_body(&[1; 1500], false), Action::Continue, "kept");
    assert_eq!(
        s.response_body(&[2; 600], false),
        Action::Pause,
        "discarded"
    );
    assert!(s.host().response.body.is_empty());
    assert_eq!(s.response_body(&[3; 10], false), Action::Pause, "discarded");
    assert_eq!(s.response_body(&[4; 10], true), Action::Continue);
    let downstream = &s.host().response;
    assert!(downstream.sent_body.is_empty());
    assert_eq!(downstream.sent_trailer("grpc-status"), Some("8"));
    assert!(!s.host().reset);
    assert!(
        s.host().response_buffered_peak <= 10,
        "only a discarded chunk"
    );
    s.assert_no_violations();
}

// ----- host failures -----

#[test]
fn a_failing_host_call_becomes_an_internal_error_reply() {
    let mut s = stream();
    s.host_mut().fail_when(
        |call| {
            matches!(
                call,
                Call::SetBody {
                    body: Body::Request,
                    ..
                }
            )
        },
        Status::InternalFailure,
    );
    assert_eq!(
        s.request_headers(&post(EXECUTE, "application/json"), false),
        Action::Pause
    );
    assert_eq!(
        s.request_body(br#"{"query":"SELECT 1"}"#, true),
        Action::Pause
    );
    assert_eq!(s.host().faults.len(), 1);
    let reply = s.host().local_reply.clone().unwrap();
    assert_eq!(reply.status, 500);
    let body = json(&reply.body);
    assert_eq!(body["code"], "internal");
    assert_eq!(body["message"], "the proxy failed to process this request");
    assert!(s.host().request.sent_body.is_empty(), "nothing forwarded");
    // The reply passes on its way out.
    assert_eq!(
        s.local_reply_goes_out(),
        (Action::Continue, Some(Action::Continue))
    );
    s.assert_no_violations();

    // Before the exchange knows the client's protocol there is no answer to give: the
    // request goes on untouched.
    let mut s = stream();
    s.host_mut().fail_when(
        |call| matches!(call, Call::Headers { .. }),
        Status::InternalFailure,
    );
    assert_eq!(
        s.request_headers(&post(EXECUTE, "application/json"), false),
        Action::Continue
    );
    assert!(s.host().local_reply.is_none());
    assert_eq!(
        s.host().request.sent_header("content-type"),
        Some("application/json")
    );
    s.assert_no_violations();

    // The internal error reply itself failing: the callback continues.
    let mut s = stream();
    s.host_mut().fail_when(
        |call| matches!(call, Call::SetBody { .. } | Call::SendReply(_)),
        Status::InternalFailure,
    );
    assert_eq!(
        s.request_headers(&post(EXECUTE, "application/grpc"), false),
        Action::Pause
    );
    assert_eq!(s.request_body(&framed(&[]), true), Action::Continue);
    assert!(matches!(
        s.host().faults.as_slice(),
        [(_, Call::SetBody { .. }, _), (_, Call::SendReply(_), _)]
    ));
    assert!(s.host().local_reply.is_none());
    s.assert_no_violations();
}

// ----- configuration -----

#[test]
fn the_configuration_is_read_in_on_configure() {
    let mut host = MockHost::default();
    let config = host
        .configure(Some(
            br#"{"session_affinity": true, "max_request_bytes": 4096}"#,
        ))
        .unwrap();
    assert!(config.session_affinity);
    assert_eq!(config.limits.max_request_bytes, 4096);
    assert!(host.configure(None).is_some(), "all defaults");
    assert!(host.configure(Some(b"{\"typo\": 1}")).is_none());
    host.fail_when(|_| true, Status::InternalFailure);
    assert!(host.configure(Some(b"{}")).is_none());
    assert!(host.violations.is_empty(), "{:?}", host.violations);
}

// ----- issue 10: classification header, metrics, server-timing, unknown outcomes -----

fn execute_message(query: &str) -> Vec<u8> {
    ExecuteRequest {
        query: query.into(),
        ..Default::default()
    }
    .encode_to_vec()
}

#[test]
fn a_clients_class_is_removed_and_the_filters_is_set_once_the_statement_is_read() {
    for (query, class) in [
        ("SELECT 1", "read"),
        ("INSERT INTO t VALUES (1)", "write"),
        ("BEGIN", "session"),
    ] {
        let mut s = stream();
        let mut headers = post(EXECUTE, "application/proto");
        headers.push(("x-ferry-class", "read"));
        assert_eq!(s.request_headers(&headers, false), Action::Pause);
        assert_eq!(
            s.request_body(&execute_message(query), true),
            Action::Continue
        );
        let calls = s.host().calls_in(|p| p.is_request());
        let removed = calls.iter().any(|c| {
            matches!(c, Call::RemoveHeader { map: Map::RequestHeaders, name } if name == "x-ferry-class")
        });
        assert!(removed, "{query}: the client's value is removed");
        assert_eq!(
            s.host().request.sent_header("x-ferry-class"),
            Some(class),
            "{query}"
        );
        s.assert_no_violations();
    }
    // Other RPCs go on at once, as writes.
    let mut s = stream();
    let close = CloseSessionRequest::default().encode_to_vec();
    assert_eq!(
        s.request_headers(&post(CLOSE_SESSION, "application/proto"), false),
        Action::Continue
    );
    assert_eq!(s.host().request.sent_header("x-ferry-class"), Some("write"));
    assert_eq!(s.request_body(&close, true), Action::Continue);
    s.assert_no_violations();
}

#[test]
fn each_call_counts_once_with_its_labels_and_the_ids_are_defined_once() {
    let mut s = stream();
    s.host_mut().tick = 1_500_000; // 1.5 ms per clock read
    s.host_mut()
        .properties
        .push(("request.protocol".into(), b"HTTP/2".to_vec()));
    let mut headers = post(EXECUTE, "application/json");
    headers.push(("x-grpc-web", "1")); // not gRPC: the label stays connect
    assert_eq!(s.request_headers(&headers, false), Action::Pause);
    assert_eq!(
        s.request_body(br#"{"query":"SELECT 1"}"#, true),
        Action::Continue
    );
    let answer = execute_response().encode_to_vec();
    let len = answer.len().to_string();
    let mut head = shim_ok(&len);
    head.push(("ferry-target", "replica"));
    head.push(("server-timing", "db;dur=0.25"));
    s.response_headers(&head, false);
    s.response_body(&answer, true);
    // The shim's entry is kept and the gateway's added.
    let timing = s
        .host()
        .response
        .sent_header("server-timing")
        .unwrap()
        .to_owned();
    assert!(timing.starts_with("db;dur=0.25, gateway;dur="), "{timing}");
    // Envoy ends the stream (`on_done`), then may log it (`on_log`, never for
    // HTTP/3): the call counts once.
    assert!(s.done());
    s.log();
    let series =
        ";rpc=Execute;protocol=connect;codec=json;http=h2;class=read;target=replica;code=ok";
    let host = s.host();
    assert_eq!(host.metrics.len(), 2);
    assert_eq!(host.metrics[0].0, format!("ferry_requests_total{series}"));
    assert_eq!(
        host.metrics[1].0,
        format!("ferry_request_duration_ms{series}")
    );
    assert_eq!(host.counters, vec![(0, 1)]);
    assert_eq!(host.records.len(), 1);
    assert!(host.records[0].1 >= 1, "ms: {:?}", host.records);
    s.assert_no_violations();

    // The cache: a second stream of the same label set defines nothing new. (Each
    // MockHost is fresh, so the shared cache is shown through one Filter's ids.)
    let mut ids = crate::adapter::MetricIds::default();
    let mut host = MockHost::default();
    let ex = Exchange::new(Rc::new(Config::default()));
    let timing = crate::adapter::Timing::default();
    crate::adapter::record_metrics(&mut host, &ex, &timing, &mut ids);
    assert!(host.metrics.is_empty(), "no RPC, no metric");
}

#[test]
fn a_write_whose_shim_vanished_mid_call_is_unknown_and_a_refused_one_unavailable() {
    for (flags, code, says) in [
        (0x40u64, "unknown", "may or may not have been applied"),
        (0x20, "unavailable", "was not applied"),
    ] {
        let mut s = stream();
        s.host_mut()
            .properties
            .push(("response.flags".into(), flags.to_le_bytes().to_vec()));
        assert_eq!(
            s.request_headers(&post(EXECUTE, "application/json"), false),
            Action::Pause
        );
        s.request_body(br#"{"query":"INSERT INTO t VALUES (1)"}"#, true);
        let envoy = [
            (":status", "503"),
            ("content-type", "text/plain"),
            ("content-length", "5"),
        ];
        s.response_headers(&envoy, false);
        let reply = s.host().local_reply.clone().expect("a local reply");
        let body = json(&reply.body);
        assert_eq!(body["code"], code);
        assert!(body["message"].as_str().unwrap().contains(says), "{body}");
        s.log();
        let name = &s.host().metrics[0].0;
        assert!(
            name.ends_with(&format!(";class=write;target=none;code={code}")),
            "{name}"
        );
    }
    // A read that still fails after Envoy's retries: unavailable.
    let mut s = stream();
    s.host_mut()
        .properties
        .push(("response.flags".into(), 0x40u64.to_le_bytes().to_vec()));
    s.request_headers(&post(EXECUTE, "application/json"), false);
    s.request_body(br#"{"query":"SELECT 1"}"#, true);
    s.response_headers(&[(":status", "503"), ("content-type", "text/plain")], false);
    let reply = s.host().local_reply.clone().expect("a local reply");
    assert_eq!(json(&reply.body)["code"], "unavailable");
}

// ----- gRPC-Web served by the filter (Envoy's grpc_web after it, or absent) -----

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

#[test]
fn a_grpc_web_unary_answer_gets_its_header_in_front_and_its_trailer_frame_after() {
    let mut s = stream();
    let message = ExecuteRequest {
        query: "SELECT 2".into(),
        ..Default::default()
    }
    .encode_to_vec();
    let headers = post(EXECUTE, "application/grpc-web+proto");
    assert_eq!(s.request_headers(&headers, false), Action::Pause);
    assert_eq!(s.request_body(&framed(&message), true), Action::Continue);
    let upstream = &s.host().request;
    assert_eq!(
        upstream.sent_header("content-type"),
        Some("application/proto")
    );
    assert_eq!(
        upstream.sent_header("x-ferry-protocol"),
        Some("grpc-web-proto")
    );
    assert_eq!(upstream.sent_body, message);

    let answer = execute_response().encode_to_vec();
    let len = answer.len().to_string();
    assert_eq!(s.response_headers(&shim_ok(&len), false), Action::Continue);
    let downstream = &s.host().response;
    assert_eq!(
        downstream.sent_header("content-type"),
        Some("application/grpc-web+proto")
    );
    assert_eq!(downstream.sent_header("content-length"), None);
    let (start, rest) = answer.split_at(10);
    assert_eq!(s.response_body(start, false), Action::Continue);
    assert_eq!(s.response_body(rest, true), Action::Continue);
    let downstream = &s.host().response;
    assert_eq!(
        web_frames(&downstream.sent_body, false),
        vec![(0, answer.clone()), (0x80, b"grpc-status:0\r\n".to_vec())]
    );
    assert_eq!(downstream.sent_trailers, None, "no HTTP trailers");
    // The message never entered the VM: a header prepended, the frame appended.
    assert_eq!(reads_of(s.host(), Body::Response), 0);
    let writes: Vec<(usize, usize, usize)> = body_writes(s.host())
        .iter()
        .filter_map(|(_, call)| match call {
            Call::SetBody {
                body: Body::Response,
                start,
                size,
                bytes,
            } => Some((*start, *size, bytes.len())),
            _ => None,
        })
        .collect();
    assert_eq!(writes, vec![(0, 0, 5), (WHOLE_BODY, 0, 20)]);
    s.log();
    let name = &s.host().metrics[0].0;
    assert!(name.contains(";protocol=grpc_web;codec=proto;"), "{name}");
    assert!(name.ends_with(";code=ok"), "{name}");
    s.assert_no_violations();
}

#[test]
fn a_grpc_web_text_stream_is_base64_chunk_by_chunk_with_its_trailer_frame_last() {
    use base64::Engine as _;
    let mut s = stream_with(roomy(), false);
    let mut headers = post(STREAM_EXECUTE, "application/grpc-web-text");
    headers.push(("accept", "application/grpc-web-text"));
    assert_eq!(s.request_headers(&headers, false), Action::Pause);
    let request = ExecuteRequest {
        query: "SELECT * FROM t".into(),
        ..Default::default()
    }
    .encode_to_vec();
    let text = base64::engine::general_purpose::STANDARD.encode(framed(&request));
    // In two callbacks, cut inside a 4-character group.
    let (a, b) = text.as_bytes().split_at(7);
    assert_eq!(s.request_body(a, false), Action::Pause);
    assert_eq!(s.request_body(b, true), Action::Continue);
    assert_eq!(s.host().request.sent_body, request);

    let messages: Vec<Vec<u8>> = (0..3)
        .map(|i| {
            let mut m = execute_response();
            m.timing = f64::from(i);
            m.encode_to_vec()
        })
        .collect();
    let mut shim = Vec::new();
    for m in &messages {
        shim.extend(envelope(0, m));
    }
    shim.extend(envelope(
        2,
        br#"{"error":{"code":"aborted","message":"stopped"}}"#,
    ));
    let head = [
        (":status", "200"),
        ("content-type", "application/connect+proto"),
        ("ferry-shim-instance", "0123456789abcdef"),
    ];
    assert_eq!(s.response_headers(&head, false), Action::Continue);
    assert_eq!(
        s.host().response.sent_header("content-type"),
        Some("application/grpc-web-text+proto")
    );
    let chunks: Vec<&[u8]> = shim.chunks(11).collect();
    let mut sent = Vec::new();
    for chunk in &chunks {
        s.response_body(chunk, false);
        let now = s.host().response.sent_body.len();
        sent.push(now);
    }
    // The shim's own empty last chunk ends it.
    assert_eq!(s.response_body(b"", true), Action::Continue);
    let downstream = &s.host().response;
    assert!(downstream.ended);
    assert_eq!(downstream.sent_trailers, None, "no HTTP trailers");
    // Messages went on as they completed, each piece base64 on its own.
    assert!(sent.windows(2).any(|w| w[0] > 0 && w[1] > w[0]), "{sent:?}");
    assert!(downstream
        .sent_body
        .iter()
        .all(|b| b.is_ascii_alphanumeric() || b"+/=".contains(b)));
    let mut want: Vec<(u8, Vec<u8>)> = messages.iter().map(|m| (0, m.clone())).collect();
    want.push((0x80, b"grpc-status:10\r\ngrpc-message:stopped\r\n".to_vec()));
    assert_eq!(web_frames(&downstream.sent_body, true), want);
    s.log();
    let name = &s.host().metrics[0].0;
    assert!(name.contains(";protocol=grpc_web;"), "{name}");
    assert!(name.ends_with(";code=aborted"), "{name}");
    s.assert_no_violations();
}

/// Envoy drops the content type of a body-less local reply to a request it does not
/// take for gRPC (`prepareLocalReply`): a gRPC-Web trailers-only refusal gets it back
/// as it passes the filter's response callback.
#[test]
fn a_grpc_web_refusal_keeps_its_content_type() {
    let mut s = stream();
    let headers = vec![
        (":method", "POST"),
        (":path", EXECUTE),
        ("content-type", "application/grpc-web-text"),
        ("accept", "application/grpc-web-text"),
    ];
    assert_eq!(s.request_headers(&headers, false), Action::Pause);
    // Envoy sends it out through the filter's response callbacks.
    let reply = s.host_mut().local_reply.take().expect("a local reply");
    assert_eq!(reply.status, 200);
    assert!(reply.body.is_empty());
    let status = reply.status.to_string();
    let mut out = vec![(":status", status.as_str())];
    out.extend(
        reply
            .headers
            .iter()
            .filter(|(n, _)| n != "content-type")
            .map(|(n, v)| (n.as_str(), v.as_str())),
    );
    assert!(out.contains(&("grpc-status", "16")));
    s.response_headers(&out, true);
    assert_eq!(
        s.host().response.sent_header("content-type"),
        Some("application/grpc-web-text+proto")
    );
    s.assert_no_violations();
}

// ----- enveloped unary answers: never buffered whole by Envoy -----

/// A gRPC or gRPC-Web `Execute` forwarded; `text`: gRPC-Web text both ways.
fn enveloped_stream(content_type: &str, text: bool, buffer_limit: usize) -> Stream {
    use base64::Engine as _;
    let mut s = stream_with(roomy(), false);
    s.host_mut().buffer_limit = Some(buffer_limit);
    let mut headers = post(EXECUTE, content_type);
    if text {
        headers.push(("accept", "application/grpc-web-text"));
    }
    s.request_headers(&headers, false);
    let message = ExecuteRequest {
        query: "SELECT 2".into(),
        ..Default::default()
    }
    .encode_to_vec();
    let body = if text {
        base64::engine::general_purpose::STANDARD
            .encode(framed(&message))
            .into_bytes()
    } else {
        framed(&message)
    };
    assert_eq!(s.request_body(&body, true), Action::Continue);
    s
}

/// A large SQL error answer: an `ExecuteResponse` with its error (and rows).
fn sql_error_answer() -> Vec<u8> {
    let mut answer = ExecuteResponse::decode(compressible_answer().as_slice()).unwrap();
    answer.error = Some(ferry_proto::vitess::vtrpc::RpcError {
        message: "Table 'ferry.nope' doesn't exist (errno 1146) (sqlstate 42S02)".into(),
        code: 5,
    });
    answer.encode_to_vec()
}

#[test]
fn enveloped_unary_answers_never_wait_whole_in_envoys_buffer() {
    // Envoy's limit (16 KiB) far below the answers (~200 KB): declared or not, gRPC,
    // gRPC-Web binary and text, success and SQL error, ended with the last chunk or
    // by an empty one, nothing over a chunk (and its header) is ever buffered by
    // Envoy, and the client gets the whole message and its status.
    const LIMIT: usize = 16 * 1024;
    const CHUNK: usize = 10_000;
    for (content_type, text) in [
        ("application/grpc", false),
        ("application/grpc-web+proto", false),
        ("application/grpc-web-text", true),
    ] {
        for answer in [compressible_answer(), sql_error_answer()] {
            assert!(answer.len() > 10 * LIMIT, "{}", answer.len());
            let len = answer.len().to_string();
            for declared in [true, false] {
                for empty_end in [false, true] {
                    let case = format!("{content_type} declared={declared} empty_end={empty_end}");
                    let mut s = enveloped_stream(content_type, text, LIMIT);
                    let head = if declared {
                        shim_ok(&len)
                    } else {
                        shim_undeclared()
                    };
                    assert_eq!(s.response_headers(&head, false), Action::Continue);
                    let chunks: Vec<&[u8]> = answer.chunks(CHUNK).collect();
                    for (i, chunk) in chunks.iter().enumerate() {
                        let end = !empty_end && i + 1 == chunks.len();
                        let action = s.response_body(chunk, end);
                        // The chunk that completes a declared answer before its end
                        // is held, so the end follows a paused callback.
                        let holds = declared && !text && empty_end && i + 1 == chunks.len();
                        let want = if holds {
                            Action::Pause
                        } else {
                            Action::Continue
                        };
                        assert_eq!(action, want, "{case}: chunk {i}");
                    }
                    if empty_end {
                        assert_eq!(s.response_body(&[], true), Action::Continue, "{case}");
                    }
                    let host = s.host();
                    assert!(!host.response_too_large, "{case}");
                    assert!(!host.reset, "{case}");
                    assert!(
                        host.response_buffered_peak <= CHUNK + 5,
                        "{case}: {}",
                        host.response_buffered_peak
                    );
                    let downstream = &host.response;
                    assert!(downstream.ended, "{case}");
                    if content_type == "application/grpc" {
                        assert_eq!(downstream.sent_body, framed(&answer), "{case}");
                        assert_eq!(
                            downstream.sent_trailers,
                            Some(vec![("grpc-status".into(), "0".into())]),
                            "{case}"
                        );
                    } else {
                        assert_eq!(
                            web_frames(&downstream.sent_body, text),
                            vec![(0, answer.clone()), (0x80, b"grpc-status:0\r\n".to_vec())],
                            "{case}"
                        );
                    }
                    // A declared binary answer never enters the VM.
                    if declared && !text {
                        assert_eq!(reads_of(host, Body::Response), 0, "{case}");
                    }
                    s.assert_no_violations();
                }
            }
        }
    }
}

#[test]
fn a_declared_answer_that_does_not_match_its_size_is_reset() {
    let answer = compressible_answer();
    for content_type in ["application/grpc", "application/grpc-web+proto"] {
        // Longer than declared: reset at the chunk that passes it, before it goes on.
        let mut s = enveloped_stream(content_type, false, 16 * 1024);
        let len = (answer.len() - 1).to_string();
        s.response_headers(&shim_ok(&len), false);
        let chunks: Vec<&[u8]> = answer.chunks(10_000).collect();
        for (i, chunk) in chunks.iter().enumerate() {
            let action = s.response_body(chunk, i + 1 == chunks.len());
            if s.host().reset {
                assert_eq!(action, Action::Pause);
                assert_eq!(i + 1, chunks.len(), "{content_type}");
                break;
            }
        }
        assert!(s.host().reset, "{content_type}");
        assert!(s.host().response.sent_body.len() < answer.len());
        assert_eq!(s.host().response.sent_trailers, None);
        s.assert_no_violations();
        // Shorter: reset at its end, with no status (a client sees a broken call).
        let mut s = enveloped_stream(content_type, false, 16 * 1024);
        let len = (answer.len() + 10).to_string();
        s.response_headers(&shim_ok(&len), false);
        for chunk in answer.chunks(10_000) {
            assert_eq!(s.response_body(chunk, false), Action::Continue);
        }
        assert_eq!(s.response_body(&[], true), Action::Pause);
        assert!(s.host().reset, "{content_type}");
        assert_eq!(s.host().response.sent_trailers, None);
        assert!(!s.host().response.ended);
        s.assert_no_violations();
    }
}

#[test]
fn the_shims_connect_error_becomes_a_status_within_envoys_buffer_limit() {
    let error = br#"{"code":"unauthenticated","message":"bad password"}"#;
    for content_type in ["application/grpc", "application/grpc-web+proto"] {
        let mut s = enveloped_stream(content_type, false, 1024);
        let len = error.len().to_string();
        let head = vec![
            (":status", "401"),
            ("content-type", "application/json"),
            ("content-length", len.as_str()),
            ("ferry-shim-instance", "0123456789abcdef"),
        ];
        assert_eq!(s.response_headers(&head, false), Action::Continue);
        assert_eq!(s.response_body(error, true), Action::Continue);
        let host = s.host();
        assert!(!host.response_too_large && !host.reset);
        let downstream = &host.response;
        if content_type == "application/grpc" {
            assert!(downstream.sent_body.is_empty());
            assert_eq!(downstream.sent_trailer("grpc-status"), Some("16"));
            assert_eq!(
                downstream.sent_trailer("grpc-message"),
                Some("bad password")
            );
        } else {
            assert_eq!(
                web_frames(&downstream.sent_body, false),
                vec![(
                    0x80,
                    b"grpc-status:16\r\ngrpc-message:bad password\r\n".to_vec()
                )]
            );
        }
        s.assert_no_violations();
    }
}

#[test]
fn a_unary_answer_for_envoys_grpc_web_text_filter_reaches_it_whole() {
    // Envoy's grpc_web filter in front converted a gRPC-Web text request to gRPC and
    // encodes our answer after us: it stops on any chunk without a whole frame, after
    // which trailers we add would pass it unconverted. So nothing goes on before the
    // end (each chunk moves into the VM, the callback pauses on the emptied chunk:
    // Envoy buffers nothing), and the end writes the frame with the trailers.
    let answer = compressible_answer();
    for declared in [true, false] {
        let mut s = stream_with(roomy(), false);
        let mut headers = post(EXECUTE, "application/grpc");
        headers.push(("accept", "application/grpc-web-text"));
        headers.push(("x-grpc-web", "1"));
        s.request_headers(&headers, false);
        let message = ExecuteRequest {
            query: "SELECT 2".into(),
            ..Default::default()
        }
        .encode_to_vec();
        assert_eq!(s.request_body(&framed(&message), true), Action::Continue);
        let len = answer.len().to_string();
        let head = if declared {
            shim_ok(&len)
        } else {
            shim_undeclared()
        };
        assert_eq!(s.response_headers(&head, false), Action::Continue);
        let chunks: Vec<&[u8]> = answer.chunks(10_000).collect();
        for chunk in &chunks {
            assert_eq!(s.response_body(chunk, false), Action::Pause);
            assert!(s.host().response.body.is_empty(), "Envoy buffers nothing");
            assert!(s.host().response.sent_body.is_empty());
        }
        assert_eq!(s.response_body(&[], true), Action::Continue);
        let downstream = &s.host().response;
        assert_eq!(downstream.sent_body, framed(&answer), "declared={declared}");
        assert_eq!(
            downstream.sent_trailers,
            Some(vec![("grpc-status".into(), "0".into())])
        );
        s.assert_no_violations();
    }
}
