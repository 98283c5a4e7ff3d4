// ----- session affinity -----

use super::*;

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
