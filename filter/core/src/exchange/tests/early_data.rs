// ----- request: HTTP/3 early data (0-RTT) -----

use super::*;

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
    let body = json!({"query": "SELECT 1", "session": {"vitessSession": {"inTransaction": false, "autocommit": true}}});
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
