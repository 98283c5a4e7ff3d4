// ----- rewritten requests: moved into the VM chunk by chunk -----

use super::*;

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
