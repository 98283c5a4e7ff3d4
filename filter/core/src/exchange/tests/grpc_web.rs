//! gRPC-Web served by this filter itself (Envoy's grpc_web filter after it, or absent):
//! binary and text requests become the canonical request; answers are gRPC's with the
//! status in a last body frame (flag 0x80) and, for text, every body byte in base64.

use super::compression::{enveloped_received, large_answer};
use super::*;
use crate::envelope::{self, COMPRESSED, END_STREAM};
use crate::protocol::grpc_web::text;
use ferry_compress::Encoding;

const WEB: &str = "application/grpc-web";
const WEB_PROTO: &str = "application/grpc-web+proto";
const WEB_TEXT: &str = "application/grpc-web-text";
const WEB_TEXT_PROTO: &str = "application/grpc-web-text+proto";

/// A gRPC-Web request head; `text_answer`: `accept: application/grpc-web-text`.
fn web_head(path: &str, content_type: &str, text_answer: bool) -> RequestHead {
    RequestHead {
        accept: text_answer.then(|| WEB_TEXT.to_owned()),
        ..head(path, content_type)
    }
}

/// The body a client sends: the framed message, in base64 for a text content type.
fn web_body(content_type: &str, framed: &[u8]) -> Vec<u8> {
    if content_type.starts_with(WEB_TEXT) {
        text::encode(framed)
    } else {
        framed.to_vec()
    }
}

fn web_exchange(max_response_bytes: usize) -> Exchange {
    Exchange::new(std::rc::Rc::new(Config {
        limits: Limits {
            max_request_bytes: 1000,
            max_response_bytes,
        },
        ..Config::default()
    }))
}

/// An exchange whose gRPC-Web request (an empty message) has been forwarded.
fn web_forwarded(head: &RequestHead) -> Exchange {
    let mut ex = web_exchange(1 << 20);
    let step = ex.on_request_headers(head, false);
    assert!(
        matches!(
            step,
            RequestHeadersStep::Forward(_) | RequestHeadersStep::Hold(_)
        ),
        "{step:?}"
    );
    let ct = head.content_type.as_deref().unwrap();
    let body = web_body(ct, &[0, 0, 0, 0, 0]);
    assert_eq!(ex.on_request_body(body.len(), true), RequestBodyStep::Read);
    ex.finish_request(body).unwrap();
    ex
}

/// Runs a request through; the canonical body or the reply.
fn web_send(head: &RequestHead, body: &[u8]) -> Result<Vec<u8>, Reply> {
    let mut ex = web_exchange(1 << 20);
    if let RequestHeadersStep::Reply(reply) = ex.on_request_headers(head, false) {
        return Err(reply);
    }
    match ex.on_request_body(body.len(), true) {
        RequestBodyStep::Read => ex
            .finish_request(body.to_vec())
            .map(|p| p.as_slice().to_vec()),
        RequestBodyStep::Reply(reply) => Err(reply),
        other => panic!("{other:?}"),
    }
}

/// A gRPC-Web trailers-only answer's (content type, grpc-status, grpc-message).
fn trailers_only(reply: &Reply) -> (String, u32, String) {
    assert_eq!(reply.status, 200);
    assert!(reply.body.is_empty());
    (
        reply.header("content-type").unwrap().to_owned(),
        reply.header("grpc-status").unwrap().parse().unwrap(),
        reply.header("grpc-message").unwrap_or("").to_owned(),
    )
}

/// A received gRPC-Web body (base64 for text, decoded piece by piece as a client
/// reading segments would, and whole) → its frames: messages, then the trailer block.
fn frames(body: &[u8], text_answer: bool) -> (Vec<Vec<u8>>, Vec<(String, String)>) {
    let bytes = if text_answer {
        text::decode(body).unwrap()
    } else {
        body.to_vec()
    };
    let (mut messages, mut trailer) = (Vec::new(), None);
    let mut rest = &bytes[..];
    while !rest.is_empty() {
        assert!(trailer.is_none(), "nothing follows the trailer frame");
        let len = u32::from_be_bytes(rest[1..5].try_into().unwrap()) as usize;
        let payload = &rest[5..5 + len];
        match rest[0] {
            0 => messages.push(payload.to_vec()),
            0x80 => {
                let block = std::str::from_utf8(payload).unwrap();
                assert!(block.ends_with("\r\n"), "{block:?}");
                trailer = Some(
                    block
                        .split("\r\n")
                        .filter(|l| !l.is_empty())
                        .map(|l| {
                            let (k, v) = l.split_once(':').unwrap();
                            (k.to_owned(), v.to_owned())
                        })
                        .collect(),
                );
            }
            flags => panic!("frame flags 0x{flags:02x}"),
        }
        rest = &rest[5 + len..];
    }
    (messages, trailer.expect("a trailer frame"))
}

fn status_of(trailer: &[(String, String)]) -> (u32, String) {
    let get = |name: &str| {
        trailer
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    (
        get("grpc-status").unwrap().parse().unwrap(),
        get("grpc-message").unwrap_or_default(),
    )
}

/// Applies a whole answer's edit to the shim's `body` as Envoy would.
fn applied(edit: &ResponseEdit, body: &[u8]) -> Vec<u8> {
    assert!(edit.trailers.is_empty(), "gRPC-Web has no HTTP trailers");
    match &edit.body {
        BodyEdit::Keep => body.to_vec(),
        BodyEdit::Prepend(header) => [&header[..], body].concat(),
        BodyEdit::Wrap(header, end) => [&header[..], body, end].concat(),
        BodyEdit::Append(end) => [body, end].concat(),
        BodyEdit::Replace(bytes) => bytes.clone(),
    }
}

// ----- request -----

#[test]
fn binary_requests_become_canonical() {
    let message = ExecuteRequest {
        query: "SELECT 1".into(),
        ..Default::default()
    }
    .encode_to_vec();
    for ct in [WEB, WEB_PROTO, "application/grpc-web+proto; charset=utf-8"] {
        let (_, step) = start(&web_head(EXECUTE, ct, false));
        let (RequestHeadersStep::Forward(edits) | RequestHeadersStep::Hold(edits)) = step else {
            panic!("{step:?}")
        };
        assert_eq!(edits.get("content-type"), Some("application/proto"));
        assert_eq!(edits.get("x-ferry-protocol"), Some("grpc-web-proto"));
        assert!(edits.remove.contains(&"content-length"));
        assert_eq!(
            web_send(&web_head(EXECUTE, ct, false), &framed(&message)).unwrap(),
            message
        );
    }
}

#[test]
fn text_requests_are_decoded_even_in_padded_segments() {
    let message = ExecuteRequest {
        query: "SELECT 'a longer statement, so the frame spans groups'".into(),
        ..Default::default()
    }
    .encode_to_vec();
    let body = framed(&message);
    for ct in [WEB_TEXT, WEB_TEXT_PROTO] {
        let (_, step) = start(&web_head(EXECUTE, ct, false));
        let (RequestHeadersStep::Forward(edits) | RequestHeadersStep::Hold(edits)) = step else {
            panic!("{step:?}")
        };
        assert_eq!(edits.get("x-ferry-protocol"), Some("grpc-web-text-proto"));
        // One segment.
        let got = web_send(&web_head(EXECUTE, ct, false), &text::encode(&body)).unwrap();
        assert_eq!(got, message);
        // Several padded segments: the header alone (5 bytes: padded), then the message
        // in two pieces of 1 and 2 bytes past a group.
        let (header, rest) = body.split_at(5);
        let cut = rest.len() - rest.len() % 3 + 1 - 3;
        let mut segments = text::encode(header);
        segments.extend(text::encode(&rest[..cut]));
        segments.extend(text::encode(&rest[cut..]));
        assert!(segments.iter().filter(|&&b| b == b'=').count() >= 2);
        let got = web_send(&web_head(EXECUTE, ct, true), &segments).unwrap();
        assert_eq!(got, message);
    }
}

#[test]
fn bad_base64_is_invalid_argument() {
    for (body, why) in [
        (&b"AAAAAAA"[..], "7 characters"),
        (&b"AAAA*AAA"[..], "at character 4"),
        (&b"AAAAAA=A"[..], "at character"),
    ] {
        let reply = web_send(&web_head(EXECUTE, WEB_TEXT, true), body).unwrap_err();
        let (ct, status, message) = trailers_only(&reply);
        assert_eq!((ct.as_str(), status), (WEB_TEXT_PROTO, 3), "{message}");
        assert!(
            message.contains("not base64") && message.contains(why),
            "{message}"
        );
    }
    // Decoded but not one frame: as gRPC says it.
    let reply = web_send(&web_head(EXECUTE, WEB_TEXT, false), &text::encode(b"\0\0")).unwrap_err();
    let (ct, status, message) = trailers_only(&reply);
    assert_eq!((ct.as_str(), status), (WEB_PROTO, 3));
    assert!(message.contains("frame header"), "{message}");
}

#[test]
fn compressed_requests_follow_the_grpc_rules() {
    let message = ExecuteRequest {
        query: "SELECT 'compressed', 'compressed', 'compressed'".into(),
        ..Default::default()
    }
    .encode_to_vec();
    let mut packed = Vec::new();
    ferry_compress::compress(Encoding::Gzip, &message, &mut packed);
    let mut body = envelope::header(COMPRESSED, packed.len()).unwrap().to_vec();
    body.extend_from_slice(&packed);
    for ct in [WEB_PROTO, WEB_TEXT] {
        let mut h = web_head(EXECUTE, ct, false);
        h.encodings = vec![("grpc-encoding", "gzip".into())];
        assert_eq!(web_send(&h, &web_body(ct, &body)).unwrap(), message, "{ct}");
        // The flag without an encoding, as for gRPC: internal.
        let reply = web_send(&web_head(EXECUTE, ct, false), &web_body(ct, &body)).unwrap_err();
        assert_eq!(trailers_only(&reply).1, 13, "{ct}");
    }
}

#[test]
fn the_filters_own_refusals_are_trailers_only_in_the_answer_type() {
    let mut h = web_head(EXECUTE, WEB_TEXT, true);
    h.authorization = None;
    let (ct, status, _) = trailers_only(&reply_of_headers(&h));
    assert_eq!((ct.as_str(), status), (WEB_TEXT_PROTO, 16));
    let h = web_head("/psdb.v1alpha1.Database/Nope", WEB, false);
    let (ct, status, _) = trailers_only(&reply_of_headers(&h));
    assert_eq!((ct.as_str(), status), (WEB_PROTO, 12));
    // gRPC-Web JSON stays refused, saying why.
    let (status, code, message) = connect_error(&reply_of_headers(&head(
        EXECUTE,
        "application/grpc-web-text+json",
    )));
    assert_eq!((status, code.as_str()), (415, "unimplemented"));
    assert!(message.contains("protobuf only"), "{message}");
}

// ----- unary answers -----

#[test]
fn unary_success_binary_wraps_the_shims_body() {
    let body = execute_response().encode_to_vec();
    for ct in [WEB, WEB_PROTO, WEB_TEXT] {
        let mut ex = web_forwarded(&web_head(EXECUTE, ct, false));
        let (edits, edit) = respond(&mut ex, &response("200", "application/proto"), &body);
        assert_eq!(edits.get("content-type"), Some(WEB_PROTO), "{ct}");
        assert_eq!(edits.get(":status"), None);
        // The shim's body never enters the VM: a header in front, the frame after.
        assert!(matches!(edit.body, BodyEdit::Wrap(..)), "{:?}", edit.body);
        let (messages, trailer) = frames(&applied(&edit, &body), false);
        assert_eq!(messages, vec![body.clone()]);
        assert_eq!(status_of(&trailer), (0, String::new()));
        assert_eq!(
            ex.metric_labels("h2").map(|l| (l.protocol, l.code)),
            Some(("grpc_web", None))
        );
    }
}

#[test]
fn unary_success_text_is_base64_whole() {
    let body = execute_response().encode_to_vec();
    for ct in [WEB, WEB_TEXT_PROTO] {
        let mut ex = web_forwarded(&web_head(EXECUTE, ct, true));
        let (edits, edit) = respond(&mut ex, &response("200", "application/proto"), &body);
        assert_eq!(edits.get("content-type"), Some(WEB_TEXT_PROTO));
        let out = replaced(&edit);
        assert!(out
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || b"+/=".contains(b)));
        let (messages, trailer) = frames(out, true);
        assert_eq!(messages, vec![body.clone()]);
        assert_eq!(status_of(&trailer), (0, String::new()));
    }
}

#[test]
fn sql_errors_are_successes() {
    let mut answer = execute_response();
    answer.result = None;
    answer.error = Some(RpcError {
        code: VtCode::NotFound as i32,
        message: "Table 'x' doesn't exist".into(),
    });
    let body = answer.encode_to_vec();
    for text_answer in [false, true] {
        let mut ex = web_forwarded(&web_head(EXECUTE, WEB_PROTO, text_answer));
        let (_, edit) = respond(&mut ex, &response("200", "application/proto"), &body);
        let (messages, trailer) = frames(&applied(&edit, &body), text_answer);
        let got = ExecuteResponse::decode(&messages[0][..]).unwrap();
        assert!(got.error.unwrap().message.contains("doesn't exist"));
        assert_eq!(status_of(&trailer).0, 0);
    }
}

#[test]
fn shim_connect_errors_and_foreign_answers_end_in_the_trailer_frame() {
    let cases: [(&str, &str, &[u8], u32, &str); 3] = [
        (
            "401",
            "application/json",
            br#"{"code":"unauthenticated","message":"bad 100% password"}"#,
            16,
            "bad 100%25 password",
        ),
        (
            "503",
            "text/plain",
            b"no healthy upstream",
            14,
            "upstream answered HTTP 503: no healthy upstream",
        ),
        (
            "200",
            "text/html",
            b"<html>",
            2,
            "upstream answered HTTP 200: <html>",
        ),
    ];
    for (status, content_type, body, code, message) in cases {
        for text_answer in [false, true] {
            for path in [EXECUTE, STREAM_EXECUTE] {
                let mut ex = web_forwarded(&web_head(path, WEB, text_answer));
                let (edits, edit) = respond(&mut ex, &response(status, content_type), body);
                assert_eq!(edits.get(":status").unwrap_or("200"), "200");
                let want_type = if text_answer {
                    WEB_TEXT_PROTO
                } else {
                    WEB_PROTO
                };
                assert_eq!(edits.get("content-type"), Some(want_type));
                let (messages, trailer) = frames(&applied(&edit, body), text_answer);
                assert!(messages.is_empty());
                assert_eq!(status_of(&trailer), (code, message.to_owned()), "{status}");
                let noted = ex.metric_labels("h2").and_then(|l| l.code);
                assert_eq!(noted.map(Code::grpc), Some(code), "{status}");
            }
        }
    }
}

#[test]
fn bodiless_errors_and_envoys_grpc_answers_are_trailers_only() {
    // An upstream error without a body: its status goes into the headers.
    let mut ex = web_forwarded(&web_head(EXECUTE, WEB_TEXT, true));
    let ResponseHeadersStep::Forward(edits) =
        ex.on_response_headers(&response("504", "text/plain"), true)
    else {
        panic!()
    };
    assert_eq!(edits.get(":status"), Some("200"));
    assert_eq!(edits.get("content-type"), Some(WEB_TEXT_PROTO));
    assert_eq!(edits.get("grpc-status"), Some("14"));
    // Envoy's trailers-only gRPC answer passes, relabelled.
    let mut ex = web_forwarded(&web_head(EXECUTE, WEB, false));
    let mut grpc = response("200", "application/grpc");
    grpc.grpc_status = Some("14".into());
    let ResponseHeadersStep::Forward(edits) = ex.on_response_headers(&grpc, true) else {
        panic!()
    };
    assert_eq!(edits.get("content-type"), Some(WEB_PROTO));
    assert_eq!(edits.get("grpc-status"), None, "Envoy's own status stays");
    // A gRPC answer with a body would pass unconverted: it is an error instead.
    let mut ex = web_forwarded(&web_head(EXECUTE, WEB, true));
    let (_, edit) = respond(&mut ex, &response("200", "application/grpc"), b"\0\0\0\0\0");
    let (messages, trailer) = frames(&applied(&edit, b""), true);
    assert!(messages.is_empty());
    assert_ne!(status_of(&trailer).0, 0);
}

#[test]
fn large_compressed_answers_get_the_frame_after_the_compressed_message() {
    let answer = large_answer(3000);
    for text_answer in [false, true] {
        let mut h = web_head(EXECUTE, WEB_PROTO, text_answer);
        h.encodings = vec![("grpc-accept-encoding", "gzip".into())];
        let mut ex = web_forwarded(&h);
        let (edits, out, trailers, _) = enveloped_received(&mut ex, &answer, 10_000);
        assert_eq!(edits.get("grpc-encoding"), Some("gzip"));
        assert!(trailers.is_empty());
        let bytes = if text_answer {
            text::decode(&out).unwrap()
        } else {
            out
        };
        assert_eq!(bytes[0], COMPRESSED);
        let len = u32::from_be_bytes(bytes[1..5].try_into().unwrap()) as usize;
        let mut plain = Vec::new();
        ferry_compress::decompress(Encoding::Gzip, &bytes[5..5 + len], 1 << 20, &mut plain)
            .unwrap();
        assert!(plain == answer);
        assert_eq!(&bytes[5 + len..], b"\x80\0\0\0\x0fgrpc-status:0\r\n");
    }
}

// ----- StreamExecute -----

fn stream_message(i: usize) -> ExecuteResponse {
    ExecuteResponse {
        result: Some(QueryResult {
            rows: (0..20)
                .map(|r| {
                    let value = format!("row {r} of chunk {i}");
                    Row {
                        lengths: vec![value.len() as i64],
                        values: value.into_bytes(),
                    }
                })
                .collect(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn shim_stream(messages: &[ExecuteResponse], end: Option<&[u8]>) -> Vec<u8> {
    let mut out = Vec::new();
    for m in messages {
        envelope::write(0, &m.encode_to_vec(), &mut out);
    }
    if let Some(end) = end {
        envelope::write(END_STREAM, end, &mut out);
    }
    out
}

/// The shim's stream in `chunk`-byte pieces (then its own empty last chunk), as Envoy
/// hands them: what the client receives, piece by piece.
fn streamed(ex: &mut Exchange, stream: &[u8], chunk: usize) -> (HeaderEdits, Vec<Vec<u8>>) {
    let step = ex.on_response_headers(&response("200", "application/connect+proto"), false);
    let ResponseHeadersStep::Forward(edits) = step else {
        panic!("{step:?}")
    };
    let mut pieces: Vec<&[u8]> = stream.chunks(chunk).collect();
    pieces.push(&[]);
    let (mut out, mut held) = (Vec::new(), Vec::new());
    for (i, piece) in pieces.iter().enumerate() {
        let last = i + 1 == pieces.len();
        held.extend_from_slice(piece);
        let ResponseBodyStep::Read(_) = ex.on_response_body(held.len(), last) else {
            panic!("streams read every chunk")
        };
        let edit = ex.finish_response(&held).unwrap();
        assert!(edit.trailers.is_empty(), "gRPC-Web has no HTTP trailers");
        let BodyEdit::Replace(bytes) = edit.body else {
            panic!("{:?}", edit.body)
        };
        held = bytes;
        if !edit.pause {
            out.push(std::mem::take(&mut held));
        }
    }
    (edits, out)
}

#[test]
fn streams_arrive_whole_in_binary_and_text_whatever_the_chunking() {
    let messages: Vec<ExecuteResponse> = (0..6).map(stream_message).collect();
    let stream = shim_stream(&messages, Some(b"{}"));
    let want: Vec<Vec<u8>> = messages.iter().map(Message::encode_to_vec).collect();
    for text_answer in [false, true] {
        for chunk in [1, 7, 100, 333, stream.len()] {
            let mut ex = web_forwarded(&web_head(STREAM_EXECUTE, WEB_TEXT, text_answer));
            let (edits, pieces) = streamed(&mut ex, &stream, chunk);
            let want_type = if text_answer {
                WEB_TEXT_PROTO
            } else {
                WEB_PROTO
            };
            assert_eq!(edits.get("content-type"), Some(want_type));
            assert!(edits.remove.contains(&"content-length"));
            if text_answer {
                // Each piece is base64 on its own: whole frames, padded.
                assert!(
                    pieces.iter().filter(|p| !p.is_empty()).count() > 1 || chunk == stream.len()
                );
                for piece in &pieces {
                    assert_eq!(piece.len() % 4, 0);
                    text::decode(piece).unwrap();
                }
            }
            let (got, trailer) = frames(&pieces.concat(), text_answer);
            assert_eq!(got, want, "chunk {chunk}");
            assert_eq!(status_of(&trailer), (0, String::new()));
        }
    }
}

#[test]
fn broken_streams_and_stream_errors_end_in_the_trailer_frame() {
    let messages: Vec<ExecuteResponse> = (0..3).map(stream_message).collect();
    // Cut before the end message, and inside the last message.
    let whole = shim_stream(&messages, None);
    let cuts = [
        (whole.clone(), Code::Unavailable, "incomplete"),
        (
            whole[..whole.len() - 3].to_vec(),
            Code::Internal,
            "short of a complete message",
        ),
    ];
    for (stream, code, why) in cuts {
        for text_answer in [false, true] {
            let mut ex = web_forwarded(&web_head(STREAM_EXECUTE, WEB_PROTO, text_answer));
            let (_, pieces) = streamed(&mut ex, &stream, 50);
            let (got, trailer) = frames(&pieces.concat(), text_answer);
            assert!(got.len() >= 2, "what came whole went on");
            let (status, message) = status_of(&trailer);
            assert_eq!(status, code.grpc(), "{message}");
            assert!(message.contains(why), "{message}");
            assert_eq!(ex.metric_labels("h2").and_then(|l| l.code), Some(code));
        }
    }
    // The shim's own error at the end.
    let end = br#"{"error":{"code":"deadline_exceeded","message":"too late"}}"#;
    let stream = shim_stream(&messages[..1], Some(end));
    let mut ex = web_forwarded(&web_head(STREAM_EXECUTE, WEB, true));
    let (_, pieces) = streamed(&mut ex, &stream, 64);
    let (got, trailer) = frames(&pieces.concat(), true);
    assert_eq!(got.len(), 1);
    assert_eq!(status_of(&trailer), (4, "too late".to_owned()));
}

#[test]
fn a_body_less_local_reply_gets_back_the_content_type_envoy_drops() {
    let mut h = web_head(EXECUTE, WEB, true);
    h.authorization = None;
    let mut ex = web_exchange(1 << 20);
    let RequestHeadersStep::Reply(reply) = ex.on_request_headers(&h, false) else {
        panic!()
    };
    ex.note_reply(&reply);
    // Envoy's local reply to a request it does not take for gRPC: no content type.
    let mut passing = response("200", "");
    passing.content_type = None;
    passing.shim_instance = None;
    passing.grpc_status = Some("16".into());
    let ResponseHeadersStep::Forward(edits) = ex.on_response_headers(&passing, true) else {
        panic!()
    };
    assert_eq!(edits.set, vec![("content-type", WEB_TEXT_PROTO.to_owned())]);
    // Once: and never over a content type that is there (gRPC's local replies).
    let ResponseHeadersStep::Forward(edits) = ex.on_response_headers(&passing, true) else {
        panic!()
    };
    assert!(edits.is_empty());
    let mut ex = exchange(false);
    let mut h = head(EXECUTE, "application/grpc");
    h.authorization = None;
    let RequestHeadersStep::Reply(reply) = ex.on_request_headers(&h, false) else {
        panic!()
    };
    ex.note_reply(&reply);
    let step = ex.on_response_headers(&response("200", "application/grpc"), true);
    assert_eq!(step, ResponseHeadersStep::Forward(HeaderEdits::default()));
}
