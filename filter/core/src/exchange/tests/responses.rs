// ----- response -----

use super::*;

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
        // Envoy's jwt_authn refusing a token (envoy/tokens.yaml).
        ("401", "Jwt is expired", "unauthenticated", 401, 16),
    ];
    for (status, text, code, http, grpc_status) in cases {
        let expected = match (status, text.is_empty()) {
            ("401", _) => format!("authentication failed at the gateway: {text}"),
            (_, true) => format!("upstream answered HTTP {status}"),
            (_, false) => format!("upstream answered HTTP {status}: {text}"),
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
    // jwt_authn's 403 (a token for another audience) is a refused token too: 401.
    let mut head = response("403", "text/plain");
    head.shim_instance = None;
    head.envoy.details = Some("jwt_authn_access_denied{Audiences_in_Jwt_are_not_allowed}".into());
    let mut ex = forwarded(EXECUTE, "application/json");
    let (edits, edit) = respond(&mut ex, &head, b"Audiences in Jwt are not allowed");
    assert_eq!(edits.get(":status"), Some("401"));
    let v = json_of(replaced(&edit));
    assert_eq!(v["code"], "unauthenticated");
    assert_eq!(
        v["message"],
        "authentication failed at the gateway: Audiences in Jwt are not allowed"
    );
    // The same refusal as Envoy answers a gRPC request: trailers-only, grpc-status 7.
    let mut head = response("200", "application/grpc");
    head.shim_instance = None;
    head.grpc_status = Some("7".into());
    head.envoy.details = Some("jwt_authn_access_denied{Audiences_in_Jwt_are_not_allowed}".into());
    let mut ex = forwarded(EXECUTE, "application/grpc");
    let ResponseHeadersStep::Forward(edits) = ex.on_response_headers(&head, true) else {
        panic!()
    };
    assert_eq!(edits.get("grpc-status"), Some("16"));
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
