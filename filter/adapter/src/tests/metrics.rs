// ----- issue 10: classification header, metrics, server-timing, unknown outcomes -----

use super::*;

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
