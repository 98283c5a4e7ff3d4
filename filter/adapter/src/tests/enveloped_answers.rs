// ----- enveloped unary answers: never buffered whole by Envoy -----

use super::*;

/// A gRPC or gRPC-Web `Execute` forwarded; `text`: gRPC-Web text both ways.
fn enveloped_stream(content_type: &str, text: bool, buffer_limit: usize) -> Stream {
    use base64::Engine as _;
    let mut s = stream_with(roomy(), false);
    s.host_mut().buffer_limit = Some(buffer_limit);
    let mut headers = post(EXECUTE, content_type);
    if text {
        headers.push(("accept", "application/grpc-web-text"));
    }
    s.request_headers(&headers, false);
    let message = ExecuteRequest {
        query: "SELECT 2".into(),
        ..Default::default()
    }
    .encode_to_vec();
    let body = if text {
        base64::engine::general_purpose::STANDARD
            .encode(framed(&message))
            .into_bytes()
    } else {
        framed(&message)
    };
    assert_eq!(s.request_body(&body, true), Action::Continue);
    s
}

/// A large SQL error answer: an `ExecuteResponse` with its error (and rows).
fn sql_error_answer() -> Vec<u8> {
    let mut answer = ExecuteResponse::decode(compressible_answer().as_slice()).unwrap();
    answer.error = Some(ferry_proto::vitess::vtrpc::RpcError {
        message: "Table 'ferry.nope' doesn't exist (errno 1146) (sqlstate 42S02)".into(),
        code: 5,
    });
    answer.encode_to_vec()
}

#[test]
fn enveloped_unary_answers_never_wait_whole_in_envoys_buffer() {
    // Envoy's limit (16 KiB) far below the answers (~200 KB): declared or not, gRPC,
    // gRPC-Web binary and text, success and SQL error, ended with the last chunk or
    // by an empty one, nothing over a chunk (and its header) is ever buffered by
    // Envoy, and the client gets the whole message and its status.
    const LIMIT: usize = 16 * 1024;
    const CHUNK: usize = 10_000;
    for (content_type, text) in [
        ("application/grpc", false),
        ("application/grpc-web+proto", false),
        ("application/grpc-web-text", true),
    ] {
        for answer in [compressible_answer(), sql_error_answer()] {
            assert!(answer.len() > 10 * LIMIT, "{}", answer.len());
            let len = answer.len().to_string();
            for declared in [true, false] {
                for empty_end in [false, true] {
                    let case = format!("{content_type} declared={declared} empty_end={empty_end}");
                    let mut s = enveloped_stream(content_type, text, LIMIT);
                    let head = if declared {
                        shim_ok(&len)
                    } else {
                        shim_undeclared()
                    };
                    assert_eq!(s.response_headers(&head, false), Action::Continue);
                    let chunks: Vec<&[u8]> = answer.chunks(CHUNK).collect();
                    for (i, chunk) in chunks.iter().enumerate() {
                        let end = !empty_end && i + 1 == chunks.len();
                        let action = s.response_body(chunk, end);
                        // The chunk that completes a declared answer before its end
                        // is held, so the end follows a paused callback.
                        let holds = declared && !text && empty_end && i + 1 == chunks.len();
                        let want = if holds {
                            Action::Pause
                        } else {
                            Action::Continue
                        };
                        assert_eq!(action, want, "{case}: chunk {i}");
                    }
                    if empty_end {
                        assert_eq!(s.response_body(&[], true), Action::Continue, "{case}");
                    }
                    let host = s.host();
                    assert!(!host.response_too_large, "{case}");
                    assert!(!host.reset, "{case}");
                    assert!(
                        host.response_buffered_peak <= CHUNK + 5,
                        "{case}: {}",
                        host.response_buffered_peak
                    );
                    let downstream = &host.response;
                    assert!(downstream.ended, "{case}");
                    if content_type == "application/grpc" {
                        assert_eq!(downstream.sent_body, framed(&answer), "{case}");
                        assert_eq!(
                            downstream.sent_trailers,
                            Some(vec![("grpc-status".into(), "0".into())]),
                            "{case}"
                        );
                    } else {
                        assert_eq!(
                            web_frames(&downstream.sent_body, text),
                            vec![(0, answer.clone()), (0x80, b"grpc-status:0\r\n".to_vec())],
                            "{case}"
                        );
                    }
                    // A declared binary answer never enters the VM.
                    if declared && !text {
                        assert_eq!(reads_of(host, Body::Response), 0, "{case}");
                    }
                    s.assert_no_violations();
                }
            }
        }
    }
}

#[test]
fn a_declared_answer_that_does_not_match_its_size_is_reset() {
    let answer = compressible_answer();
    for content_type in ["application/grpc", "application/grpc-web+proto"] {
        // Longer than declared: reset at the chunk that passes it, before it goes on.
        let mut s = enveloped_stream(content_type, false, 16 * 1024);
        let len = (answer.len() - 1).to_string();
        s.response_headers(&shim_ok(&len), false);
        let chunks: Vec<&[u8]> = answer.chunks(10_000).collect();
        for (i, chunk) in chunks.iter().enumerate() {
            let action = s.response_body(chunk, i + 1 == chunks.len());
            if s.host().reset {
                assert_eq!(action, Action::Pause);
                assert_eq!(i + 1, chunks.len(), "{content_type}");
                break;
            }
        }
        assert!(s.host().reset, "{content_type}");
        assert!(s.host().response.sent_body.len() < answer.len());
        assert_eq!(s.host().response.sent_trailers, None);
        s.assert_no_violations();
        // Shorter: reset at its end, with no status (a client sees a broken call).
        let mut s = enveloped_stream(content_type, false, 16 * 1024);
        let len = (answer.len() + 10).to_string();
        s.response_headers(&shim_ok(&len), false);
        for chunk in answer.chunks(10_000) {
            assert_eq!(s.response_body(chunk, false), Action::Continue);
        }
        assert_eq!(s.response_body(&[], true), Action::Pause);
        assert!(s.host().reset, "{content_type}");
        assert_eq!(s.host().response.sent_trailers, None);
        assert!(!s.host().response.ended);
        s.assert_no_violations();
    }
}

#[test]
fn the_shims_connect_error_becomes_a_status_within_envoys_buffer_limit() {
    let error = br#"{"code":"unauthenticated","message":"bad password"}"#;
    for content_type in ["application/grpc", "application/grpc-web+proto"] {
        let mut s = enveloped_stream(content_type, false, 1024);
        let len = error.len().to_string();
        let head = vec![
            (":status", "401"),
            ("content-type", "application/json"),
            ("content-length", len.as_str()),
            ("ferry-shim-instance", "0123456789abcdef"),
        ];
        assert_eq!(s.response_headers(&head, false), Action::Continue);
        assert_eq!(s.response_body(error, true), Action::Continue);
        let host = s.host();
        assert!(!host.response_too_large && !host.reset);
        let downstream = &host.response;
        if content_type == "application/grpc" {
            assert!(downstream.sent_body.is_empty());
            assert_eq!(downstream.sent_trailer("grpc-status"), Some("16"));
            assert_eq!(
                downstream.sent_trailer("grpc-message"),
                Some("bad password")
            );
        } else {
            assert_eq!(
                web_frames(&downstream.sent_body, false),
                vec![(
                    0x80,
                    b"grpc-status:16\r\ngrpc-message:bad password\r\n".to_vec()
                )]
            );
        }
        s.assert_no_violations();
    }
}

#[test]
fn a_unary_answer_for_envoys_grpc_web_text_filter_reaches_it_whole() {
    // Envoy's grpc_web filter in front converted a gRPC-Web text request to gRPC and
    // encodes our answer after us: it stops on any chunk without a whole frame, after
    // which trailers we add would pass it unconverted. So nothing goes on before the
    // end (each chunk moves into the VM, the callback pauses on the emptied chunk:
    // Envoy buffers nothing), and the end writes the frame with the trailers.
    let answer = compressible_answer();
    for declared in [true, false] {
        let mut s = stream_with(roomy(), false);
        let mut headers = post(EXECUTE, "application/grpc");
        headers.push(("accept", "application/grpc-web-text"));
        headers.push(("x-grpc-web", "1"));
        s.request_headers(&headers, false);
        let message = ExecuteRequest {
            query: "SELECT 2".into(),
            ..Default::default()
        }
        .encode_to_vec();
        assert_eq!(s.request_body(&framed(&message), true), Action::Continue);
        let len = answer.len().to_string();
        let head = if declared {
            shim_ok(&len)
        } else {
            shim_undeclared()
        };
        assert_eq!(s.response_headers(&head, false), Action::Continue);
        let chunks: Vec<&[u8]> = answer.chunks(10_000).collect();
        for chunk in &chunks {
            assert_eq!(s.response_body(chunk, false), Action::Pause);
            assert!(s.host().response.body.is_empty(), "Envoy buffers nothing");
            assert!(s.host().response.sent_body.is_empty());
        }
        assert_eq!(s.response_body(&[], true), Action::Continue);
        let downstream = &s.host().response;
        assert_eq!(downstream.sent_body, framed(&answer), "declared={declared}");
        assert_eq!(
            downstream.sent_trailers,
            Some(vec![("grpc-status".into(), "0".into())])
        );
        s.assert_no_violations();
    }
}
