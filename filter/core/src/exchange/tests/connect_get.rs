// ----- Connect GET -----

use super::*;

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
