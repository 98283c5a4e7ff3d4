// ----- session affinity -----

use super::*;

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

/// A pinned Execute in `content_type` answered by Envoy's `head` (no shim): its headers
/// go on as a 200, the body Envoy sends is discarded, and the lost-pin answer replaces it.
fn lost_execute(
    head: &ResponseHead,
    content_type: &str,
    body_len: usize,
) -> (HeaderEdits, ExecuteResponse) {
    let mut ex = pinned(content_type);
    let ResponseHeadersStep::Forward(edits) = ex.on_response_headers(head, false) else {
        panic!("forward")
    };
    assert_eq!(edits.get(":status"), Some("200"), "{content_type}");
    assert_eq!(ex.on_response_body(10, false), ResponseBodyStep::Discard);
    let ResponseBodyStep::Finish(edit) = ex.on_response_body(body_len, true) else {
        panic!("finish")
    };
    let answer = if content_type == "application/json" {
        serde_json::from_slice(replaced(&edit)).unwrap()
    } else {
        ExecuteResponse::decode(replaced(&edit)).unwrap()
    };
    (edits, answer)
}

#[test]
fn envoys_503_to_a_pinned_request_is_a_lost_transaction() {
    let lost = "transaction lost, rolled back: the shim holding this session is unavailable";
    // Connect: the RPC's own answer, as a shim gives it for a lost pin (lost.rs):
    // 200, error ABORTED, and the same session, so later statements fail too.
    for ct in ["application/proto", "application/json"] {
        let (edits, answer) = lost_execute(&envoy_503(), ct, 19);
        assert_eq!(edits.get("content-type"), Some(ct));
        assert!(edits.remove.contains(&"x-ferry-host"));
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
fn a_pinned_statement_past_envoys_route_timeout_is_a_lost_transaction() {
    // Envoy's 504 "upstream request timeout" (UT): it reset the stream, and the shim
    // stopped the statement and ended the pin. The INSERT (autocommit, proto) may have
    // been applied: unknown; the SELECT (JSON): rolled back. Before, both were
    // `unavailable` "upstream answered HTTP 504", the session's loss unsaid.
    let timeout = ResponseHead {
        status: Some("504".into()),
        content_type: Some("text/plain".into()),
        content_length: Some("24".into()),
        envoy: crate::lost::EnvoyAnswer {
            flags: 0x4,
            details: Some("upstream_response_timeout".into()),
        },
        ..ResponseHead::default()
    };
    for (ct, code, message) in [
        ("application/proto", 2, crate::lost::TIMED_OUT_COMMIT),
        ("application/json", 10, crate::lost::TIMED_OUT),
    ] {
        let (_, answer) = lost_execute(&timeout, ct, 24);
        let e = answer.error.expect("an error");
        assert_eq!((e.code, e.message.as_str()), (code, message), "{ct}");
        assert_eq!(
            answer.session.expect("session").signature,
            pinned_session("127.0.0.1:18084").signature,
            "{ct}: the session the client sent"
        );
    }
    let mut ex = pinned("application/grpc");
    assert!(matches!(
        ex.on_response_headers(&timeout, false),
        ResponseHeadersStep::Forward(_)
    ));
    let ResponseBodyStep::Finish(edit) = ex.on_response_body(24, true) else {
        panic!("finish")
    };
    assert_eq!(edit.trailers[0], ("grpc-status", "2".to_owned()));
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
