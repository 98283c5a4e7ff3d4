// ----- requests -----

use super::*;

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

/// A host that cannot add response trailers (Envoy's dynamic modules) refuses gRPC at
/// once, in gRPC's terms, and still serves Connect and gRPC-Web.
#[test]
fn without_trailers_grpc_is_refused_and_the_rest_is_served() {
    let mut s = stream();
    s.host_mut().no_trailers = true;
    let mut headers = post(EXECUTE, "application/grpc");
    headers.push(("te", "trailers"));
    assert_eq!(s.request_headers(&headers, false), Action::Pause);
    let reply = s.host().local_reply.clone().expect("a local reply");
    assert_eq!(reply.header("grpc-status"), Some("12"), "{reply:?}");
    assert!(reply.header("grpc-message").unwrap().contains("trailers"));
    assert_eq!(s.host().request.sent_headers, None, "nothing went upstream");
    s.assert_no_violations();

    let mut s = stream();
    s.host_mut().no_trailers = true;
    assert_eq!(
        s.request_headers(&post(EXECUTE, "application/json"), false),
        Action::Pause
    );
    assert!(s.host().local_reply.is_none());
    let mut s = stream();
    s.host_mut().no_trailers = true;
    s.request_headers(&post(EXECUTE, "application/grpc-web+proto"), false);
    assert!(
        s.host().local_reply.is_none(),
        "gRPC-Web served here: trailers in the body"
    );
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

/// `client_address: "peer"` (control planes that set no `x-ferry-client-addr`, Istio):
/// the shim gets Envoy's downstream address, whatever the client sent; with none
/// (a unix-socket listener), the client's value is removed. `"header"` (the default)
/// leaves the header as Envoy's mutation set it.
#[test]
fn the_client_address_is_envoys_peer_when_so_configured() {
    let peer_stream = || {
        Stream::new(Exchange::new(Rc::new(Config {
            limits: limits(),
            client_address: ferry_filter_core::config::ClientAddress::Peer,
            ..Config::default()
        })))
    };
    let mut headers = post(EXECUTE, "application/proto");
    headers.push(("x-ferry-client-addr", "198.51.100.9"));
    let msg = ExecuteRequest {
        query: "SELECT 1".into(),
        ..Default::default()
    }
    .encode_to_vec();
    for (peer, expected) in [
        (Some("203.0.113.7:51234"), Some("203.0.113.7")),
        (Some("[2001:db8::1]:443"), Some("2001:db8::1")),
        (None, None),
        (Some("/run/envoy.sock"), None),
    ] {
        let mut s = peer_stream();
        if let Some(address) = peer {
            s.host_mut()
                .properties
                .push(("source.address".into(), address.as_bytes().to_vec()));
        }
        s.request_headers(&headers, false);
        s.request_body(&msg, true);
        assert_eq!(
            s.host().request.sent_header("x-ferry-client-addr"),
            expected,
            "{peer:?}"
        );
    }
    // The default trusts the header: Envoy's early header mutation wrote it.
    let mut s = stream();
    s.host_mut()
        .properties
        .push(("source.address".into(), b"203.0.113.7:51234".to_vec()));
    s.request_headers(&headers, false);
    s.request_body(&msg, true);
    assert_eq!(
        s.host().request.sent_header("x-ferry-client-addr"),
        Some("198.51.100.9")
    );
}

/// Only Envoy's jwt_authn, after the filter, may set `x-ferry-token-claims`: a client's
/// own is removed in every form (the mesh forms' control planes do not remove it).
#[test]
fn a_clients_token_claims_never_reach_the_shim() {
    let msg = ExecuteRequest {
        query: "SELECT 1".into(),
        ..Default::default()
    }
    .encode_to_vec();
    for content_type in ["application/proto", "application/json", "application/grpc"] {
        let mut s = stream();
        let mut headers = post(EXECUTE, content_type);
        headers.push(("x-ferry-token-claims", "eyJmZXJyeV9hY2NvdW50IjoiYWRtaW4ifQ"));
        s.request_headers(&headers, false);
        let body = match content_type {
            "application/json" => br#"{"query":"SELECT 1"}"#.to_vec(),
            "application/grpc" => envelope(0, &msg),
            _ => msg.clone(),
        };
        s.request_body(&body, true);
        let upstream = &s.host().request;
        assert_eq!(upstream.sent_header("authorization"), Some(AUTH));
        assert_eq!(
            upstream.sent_header("x-ferry-token-claims"),
            None,
            "{content_type}"
        );
    }
}
