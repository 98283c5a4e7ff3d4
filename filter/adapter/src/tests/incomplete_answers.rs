// ----- answers that cannot be completed -----

use super::*;

#[test]
fn a_connect_answer_that_cannot_be_completed_is_reset() {
    // Malformed protobuf from the shim: read at the end, then reset.
    let mut s = stream();
    assert_eq!(
        s.request_headers(&post(EXECUTE, "application/json"), false),
        Action::Pause
    );
    assert_eq!(s.request_body(b"{}", true), Action::Continue);
    assert_eq!(s.response_headers(&shim_ok("2"), false), Action::Continue);
    assert_eq!(s.response_body(&[0x12, 0x05], true), Action::Pause);
    assert!(s.host().reset);
    assert!(matches!(
        s.host().calls.last(),
        Some((
            Phase::ResponseBody {
                end_of_stream: true
            },
            Call::ResetResponse
        ))
    ));
    assert!(s.host().response.sent_body.is_empty());
    s.assert_no_violations();

    // Oversized while streaming in (its 200 is out): reset before the end.
    let mut s = stream();
    assert_eq!(
        s.request_headers(&post(EXECUTE, "application/json"), false),
        Action::Pause
    );
    assert_eq!(s.request_body(b"{}", true), Action::Continue);
    assert_eq!(s.response_headers(&shim_ok("0"), false), Action::Continue);
    assert_eq!(s.response_body(&[0; 2001], false), Action::Pause);
    assert!(s.host().reset);
    assert_eq!(reads_of(s.host(), Body::Response), 0);
    s.assert_no_violations();
}

/// A Connect JSON answer that may be compressed with a codec judged on a sample (s2):
/// its headers are held until the body's start says whether compression pays.
/// (headers action, stream.)
fn held_answer(limits: Limits) -> (Action, Stream) {
    let mut s = stream_with(limits, false);
    let mut headers = post(EXECUTE, "application/json");
    headers.push(("accept-encoding", "s2"));
    assert_eq!(s.request_headers(&headers, false), Action::Pause);
    assert_eq!(s.request_body(b"{}", true), Action::Continue);
    // No content-length: the answer may be large enough to compress.
    let answer = [
        (":status", "200"),
        ("content-type", "application/proto"),
        ("ferry-shim-instance", "0123456789abcdef"),
    ];
    let action = s.response_headers(&answer, false);
    (action, s)
}

#[test]
fn held_response_headers_are_completed_from_the_body_callback() {
    let (action, mut s) = held_answer(roomy());
    assert_eq!(action, Action::Pause, "held");
    assert_eq!(s.host().response.sent_headers, None);
    let mut answer = execute_response();
    if let Some(result) = answer.result.as_mut() {
        result.rows = vec![
            Row {
                lengths: vec![1],
                values: b"1".to_vec(),
            };
            200
        ];
    }
    let answer = answer.encode_to_vec();
    let (start, rest) = answer.split_at(answer.len() / 2);
    assert_eq!(s.response_body(start, false), Action::Pause);
    assert_eq!(s.response_body(rest, true), Action::Continue);
    let downstream = &s.host().response;
    assert_eq!(
        downstream.sent_header("content-type"),
        Some("application/json")
    );
    assert_eq!(downstream.sent_header("content-encoding"), Some("s2"));
    assert!(
        downstream.sent_body.starts_with(b"\xff\x06\x00\x00S2sTwO"),
        "s2"
    );
    // The encoding was named from the last body callback, while the headers were held.
    assert!(s
        .host()
        .calls_in(|p| p
            == Phase::ResponseBody {
                end_of_stream: true
            })
        .iter()
        .any(|call| matches!(
            call,
            Call::SetHeader {
                map: Map::ResponseHeaders,
                ..
            }
        )));
    s.assert_no_violations();

    // Too small to pay: the headers go out as they were held.
    let (action, mut s) = held_answer(roomy());
    assert_eq!(action, Action::Pause);
    let answer = execute_response().encode_to_vec();
    assert_eq!(s.response_body(&answer, true), Action::Continue);
    let downstream = &s.host().response;
    assert_eq!(downstream.sent_header("content-encoding"), None);
    assert_eq!(
        serde_json::from_slice::<ExecuteResponse>(&downstream.sent_body).unwrap(),
        execute_response()
    );
    s.assert_no_violations();
}

#[test]
fn held_response_headers_go_out_with_the_sample_and_the_rest_streams() {
    // Larger than the 64 KiB sample: judged on it, the headers go out with its s2
    // chunks from a body callback before the end, and the rest follows compressed.
    let (action, mut s) = held_answer(roomy());
    assert_eq!(action, Action::Pause, "held");
    let answer = compressible_answer();
    let chunks: Vec<&[u8]> = answer.chunks(40_000).collect();
    assert!(chunks.len() >= 4);
    assert_eq!(s.response_body(chunks[0], false), Action::Pause, "sampling");
    assert_eq!(s.host().response.sent_headers, None);
    assert_eq!(
        s.response_body(chunks[1], false),
        Action::Continue,
        "judged"
    );
    let downstream = &s.host().response;
    assert_eq!(downstream.sent_header("content-encoding"), Some("s2"));
    assert_eq!(
        downstream.sent_header("content-type"),
        Some("application/json")
    );
    for (i, chunk) in chunks.iter().enumerate().skip(2) {
        let action = s.response_body(chunk, i + 1 == chunks.len());
        assert_eq!(action, Action::Continue);
    }
    let mut json = Vec::new();
    ferry_compress::decompress(
        ferry_compress::Encoding::S2,
        &s.host().response.sent_body,
        1 << 24,
        &mut json,
    )
    .unwrap();
    let back: ExecuteResponse = serde_json::from_slice(&json).unwrap();
    assert_eq!(back.result.unwrap().rows.len(), 4000);
    s.assert_no_violations();
}

#[test]
fn a_large_grpc_answer_is_compressed_into_the_vm_and_framed_at_its_end() {
    // Each chunk moves into the VM (the sample, then compressed as it comes) and goes
    // on emptied; the last callback writes the frame and trailers. Envoy buffers
    // nothing, whatever its limit.
    let mut s = stream_with(roomy(), false);
    s.host_mut().buffer_limit = Some(1024);
    let message = ExecuteRequest {
        query: "SELECT 2".into(),
        ..Default::default()
    }
    .encode_to_vec();
    let mut headers = post(EXECUTE, "application/grpc");
    headers.push(("grpc-accept-encoding", "gzip"));
    assert_eq!(s.request_headers(&headers, false), Action::Pause);
    assert_eq!(s.request_body(&framed(&message), true), Action::Continue);
    let answer = compressible_answer();
    let len = answer.len().to_string();
    assert_eq!(s.response_headers(&shim_ok(&len), false), Action::Continue);
    assert_eq!(s.host().response.sent_header("grpc-encoding"), Some("gzip"));
    let chunks: Vec<&[u8]> = answer.chunks(40_000).collect();
    assert!(chunks.len() >= 4);
    for (i, chunk) in chunks.iter().enumerate() {
        let end = i + 1 == chunks.len();
        let action = s.response_body(chunk, end);
        assert_eq!(action, Action::Continue, "chunk {i}");
        if !end {
            assert!(
                s.host().response.sent_body.is_empty(),
                "nothing out before the end"
            );
        }
    }
    let downstream = &s.host().response;
    let body = &downstream.sent_body;
    assert_eq!(body[0], 1, "compressed");
    let len = u32::from_be_bytes([body[1], body[2], body[3], body[4]]) as usize;
    assert_eq!(len, body.len() - 5);
    let mut plain = Vec::new();
    ferry_compress::decompress(
        ferry_compress::Encoding::Gzip,
        &body[5..],
        1 << 24,
        &mut plain,
    )
    .unwrap();
    assert_eq!(plain, answer);
    assert_eq!(
        downstream.sent_trailers,
        Some(vec![("grpc-status".into(), "0".into())])
    );
    assert_eq!(s.host().response_buffered_peak, 0);
    assert!(!s.host().response_too_large);
    s.assert_no_violations();
}

#[test]
fn a_held_answer_that_outgrows_the_limit_is_replaced_by_a_local_reply() {
    let (action, mut s) = held_answer(limits());
    assert_eq!(action, Action::Pause);
    assert_eq!(s.response_body(&[0; 2001], false), Action::Pause);
    let reply = s.host().local_reply.clone().unwrap();
    assert_eq!(reply.status, 429);
    assert_eq!(json(&reply.body)["code"], "resource_exhausted");
    assert!(matches!(
        s.host().calls.last(),
        Some((
            Phase::ResponseBody {
                end_of_stream: false
            },
            Call::SendReply(_)
        ))
    ));
    assert!(!s.host().reset);
    assert_eq!(s.host().response.sent_headers, None, "replaced, never sent");
    s.assert_no_violations();
}

#[test]
fn a_held_connect_answer_that_fails_at_its_end_gets_an_error_status() {
    let (action, mut s) = held_answer(limits());
    assert_eq!(action, Action::Pause);
    let mut answer = execute_response();
    if let Some(result) = answer.result.as_mut() {
        result.rows = vec![
            Row {
                lengths: vec![1],
                values: b"1".to_vec(),
            };
            200
        ];
    }
    let answer = answer.encode_to_vec();
    assert!(answer.len() < 2000, "the proto fits, its JSON does not");
    assert_eq!(s.response_body(&answer, true), Action::Continue);
    let downstream = &s.host().response;
    assert_eq!(json(&downstream.sent_body)["code"], "resource_exhausted");
    assert_eq!(downstream.sent_header(":status"), Some("429"));
    s.assert_no_violations();
}

#[test]
fn an_oversized_grpc_answer_is_discarded_and_ends_with_status_8() {
    let mut s = stream();
    assert_eq!(
        s.request_headers(&post(EXECUTE, "application/grpc"), false),
        Action::Pause
    );
    assert_eq!(s.request_body(&framed(&[]), true), Action::Continue);
    assert_eq!(
        s.response_headers(&shim_undeclared(), false),
        Action::Continue
    );
    s.host_mut().buffer_limit = Some(1024);
    assert_eq!(s.response_body(&[1; 1500], false), Action::Continue, "kept");
    assert_eq!(
        s.response_body(&[2; 600], false),
        Action::Pause,
        "discarded"
    );
    assert!(s.host().response.body.is_empty());
    assert_eq!(s.response_body(&[3; 10], false), Action::Pause, "discarded");
    assert_eq!(s.response_body(&[4; 10], true), Action::Continue);
    let downstream = &s.host().response;
    assert!(downstream.sent_body.is_empty());
    assert_eq!(downstream.sent_trailer("grpc-status"), Some("8"));
    assert!(!s.host().reset);
    assert!(
        s.host().response_buffered_peak <= 10,
        "only a discarded chunk"
    );
    s.assert_no_violations();
}
