// ----- gRPC-Web served by the filter (Envoy's grpc_web after it, or absent) -----

use super::*;

#[test]
fn a_grpc_web_unary_answer_gets_its_header_in_front_and_its_trailer_frame_after() {
    let mut s = stream();
    let message = ExecuteRequest {
        query: "SELECT 2".into(),
        ..Default::default()
    }
    .encode_to_vec();
    let headers = post(EXECUTE, "application/grpc-web+proto");
    assert_eq!(s.request_headers(&headers, false), Action::Pause);
    assert_eq!(s.request_body(&framed(&message), true), Action::Continue);
    let upstream = &s.host().request;
    assert_eq!(
        upstream.sent_header("content-type"),
        Some("application/proto")
    );
    assert_eq!(
        upstream.sent_header("x-ferry-protocol"),
        Some("grpc-web-proto")
    );
    assert_eq!(upstream.sent_body, message);

    let answer = execute_response().encode_to_vec();
    let len = answer.len().to_string();
    assert_eq!(s.response_headers(&shim_ok(&len), false), Action::Continue);
    let downstream = &s.host().response;
    assert_eq!(
        downstream.sent_header("content-type"),
        Some("application/grpc-web+proto")
    );
    assert_eq!(downstream.sent_header("content-length"), None);
    let (start, rest) = answer.split_at(10);
    assert_eq!(s.response_body(start, false), Action::Continue);
    assert_eq!(s.response_body(rest, true), Action::Continue);
    let downstream = &s.host().response;
    assert_eq!(
        web_frames(&downstream.sent_body, false),
        vec![(0, answer.clone()), (0x80, b"grpc-status:0\r\n".to_vec())]
    );
    assert_eq!(downstream.sent_trailers, None, "no HTTP trailers");
    // The message never entered the VM: a header prepended, the frame appended.
    assert_eq!(reads_of(s.host(), Body::Response), 0);
    let writes: Vec<(usize, usize, usize)> = body_writes(s.host())
        .iter()
        .filter_map(|(_, call)| match call {
            Call::SetBody {
                body: Body::Response,
                start,
                size,
                bytes,
            } => Some((*start, *size, bytes.len())),
            _ => None,
        })
        .collect();
    assert_eq!(writes, vec![(0, 0, 5), (WHOLE_BODY, 0, 20)]);
    s.log();
    let name = &s.host().metrics[0].0;
    assert!(name.contains(";protocol=grpc_web;codec=proto;"), "{name}");
    assert!(name.ends_with(";code=ok"), "{name}");
    s.assert_no_violations();
}

#[test]
fn a_grpc_web_text_stream_is_base64_chunk_by_chunk_with_its_trailer_frame_last() {
    use base64::Engine as _;
    let mut s = stream_with(roomy(), false);
    let mut headers = post(STREAM_EXECUTE, "application/grpc-web-text");
    headers.push(("accept", "application/grpc-web-text"));
    assert_eq!(s.request_headers(&headers, false), Action::Pause);
    let request = ExecuteRequest {
        query: "SELECT * FROM t".into(),
        ..Default::default()
    }
    .encode_to_vec();
    let text = base64::engine::general_purpose::STANDARD.encode(framed(&request));
    // In two callbacks, cut inside a 4-character group.
    let (a, b) = text.as_bytes().split_at(7);
    assert_eq!(s.request_body(a, false), Action::Pause);
    assert_eq!(s.request_body(b, true), Action::Continue);
    assert_eq!(s.host().request.sent_body, request);

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
    shim.extend(envelope(
        2,
        br#"{"error":{"code":"aborted","message":"stopped"}}"#,
    ));
    let head = [
        (":status", "200"),
        ("content-type", "application/connect+proto"),
        ("ferry-shim-instance", "0123456789abcdef"),
    ];
    assert_eq!(s.response_headers(&head, false), Action::Continue);
    assert_eq!(
        s.host().response.sent_header("content-type"),
        Some("application/grpc-web-text+proto")
    );
    let chunks: Vec<&[u8]> = shim.chunks(11).collect();
    let mut sent = Vec::new();
    for chunk in &chunks {
        s.response_body(chunk, false);
        let now = s.host().response.sent_body.len();
        sent.push(now);
    }
    // The shim's own empty last chunk ends it.
    assert_eq!(s.response_body(b"", true), Action::Continue);
    let downstream = &s.host().response;
    assert!(downstream.ended);
    assert_eq!(downstream.sent_trailers, None, "no HTTP trailers");
    // Messages went on as they completed, each piece base64 on its own.
    assert!(sent.windows(2).any(|w| w[0] > 0 && w[1] > w[0]), "{sent:?}");
    assert!(downstream
        .sent_body
        .iter()
        .all(|b| b.is_ascii_alphanumeric() || b"+/=".contains(b)));
    let mut want: Vec<(u8, Vec<u8>)> = messages.iter().map(|m| (0, m.clone())).collect();
    want.push((0x80, b"grpc-status:10\r\ngrpc-message:stopped\r\n".to_vec()));
    assert_eq!(web_frames(&downstream.sent_body, true), want);
    s.log();
    let name = &s.host().metrics[0].0;
    assert!(name.contains(";protocol=grpc_web;"), "{name}");
    assert!(name.ends_with(";code=aborted"), "{name}");
    s.assert_no_violations();
}

/// Envoy drops the content type of a body-less local reply to a request it does not
/// take for gRPC (`prepareLocalReply`): a gRPC-Web trailers-only refusal gets it back
/// as it passes the filter's response callback.
#[test]
fn a_grpc_web_refusal_keeps_its_content_type() {
    let mut s = stream();
    let headers = vec![
        (":method", "POST"),
        (":path", EXECUTE),
        ("content-type", "application/grpc-web-text"),
        ("accept", "application/grpc-web-text"),
    ];
    assert_eq!(s.request_headers(&headers, false), Action::Pause);
    // Envoy sends it out through the filter's response callbacks.
    let reply = s.host_mut().local_reply.take().expect("a local reply");
    assert_eq!(reply.status, 200);
    assert!(reply.body.is_empty());
    let status = reply.status.to_string();
    let mut out = vec![(":status", status.as_str())];
    out.extend(
        reply
            .headers
            .iter()
            .filter(|(n, _)| n != "content-type")
            .map(|(n, v)| (n.as_str(), v.as_str())),
    );
    assert!(out.contains(&("grpc-status", "16")));
    s.response_headers(&out, true);
    assert_eq!(
        s.host().response.sent_header("content-type"),
        Some("application/grpc-web-text+proto")
    );
    s.assert_no_violations();
}
