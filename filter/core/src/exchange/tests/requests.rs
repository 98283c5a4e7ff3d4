// ----- request: conversions -----

use super::*;

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
fn grpc_timeout_becomes_the_shims_deadline_and_a_malformed_one_is_refused() {
    let mut h = head(EXECUTE, "application/grpc");
    h.grpc_timeout = Some("1500u".into());
    let (_, step) = start(&h);
    let (RequestHeadersStep::Forward(edits) | RequestHeadersStep::Hold(edits)) = step else {
        panic!("{step:?}")
    };
    assert_eq!(edits.get("connect-timeout-ms"), Some("2"), "rounded up");
    for bad in ["1.5S", "300", "123456789m"] {
        h.grpc_timeout = Some(bad.into());
        let (status, message) = grpc_error(&reply_of_headers(&h));
        assert_eq!(status, 3, "{bad}");
        assert!(message.starts_with("grpc-timeout must be"), "{message}");
    }
}

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
        Some("Bearer "),
        Some("Digest x"),
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
