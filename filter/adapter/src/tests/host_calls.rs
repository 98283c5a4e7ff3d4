// ----- host failures -----

use super::*;

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
