//! StreamExecute: the shim's Connect streaming envelopes → the client's stream,
//! converted chunk by chunk whatever the chunking.

use super::*;
use crate::envelope::{self, Decoder, EnvelopeError, COMPRESSED, END_STREAM};
use ferry_compress::Encoding;

/// The shim's stream: fields first, rows in chunks, then the end message.
fn shim_stream(messages: &[ExecuteResponse], end: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    for m in messages {
        envelope::write(0, &m.encode_to_vec(), &mut out);
    }
    envelope::write(END_STREAM, end, &mut out);
    out
}

fn chunked_messages() -> Vec<ExecuteResponse> {
    let first = execute_response();
    let rows = |from: usize| ExecuteResponse {
        result: Some(QueryResult {
            rows: (from..from + 30)
                .map(|i| {
                    let value = format!("row {i} of a long stream, compressible text");
                    Row {
                        lengths: vec![value.len() as i64, -1],
                        values: value.into_bytes(),
                    }
                })
                .collect(),
            ..Default::default()
        }),
        ..Default::default()
    };
    vec![first, rows(0), rows(30)]
}

fn streaming(content_type: &str, encodings: Vec<(&'static str, String)>) -> Exchange {
    let mut h = head(STREAM_EXECUTE, content_type);
    h.encodings = encodings;
    let mut ex = Exchange::new(std::rc::Rc::new(Config {
        limits: Limits {
            max_request_bytes: 1000,
            max_response_bytes: 1 << 16,
        },
        ..Config::default()
    }));
    let step = ex.on_request_headers(&h, false);
    assert!(
        matches!(
            step,
            RequestHeadersStep::Forward(_) | RequestHeadersStep::Hold(_)
        ),
        "{step:?}"
    );
    let body: &[u8] = if content_type.ends_with("json") {
        &[0, 0, 0, 0, 2, b'{', b'}']
    } else {
        &[0, 0, 0, 0, 0]
    };
    assert_eq!(ex.on_request_body(body.len(), true), RequestBodyStep::Read);
    ex.finish_request(body.to_vec()).unwrap();
    ex
}

/// Runs the shim's stream through in chunks of `chunk` bytes: the response header
/// edits, the client's body and the trailers.
fn run(ex: &mut Exchange, stream: &[u8], chunk: usize) -> (HeaderEdits, Vec<u8>, Vec<Header>) {
    let step = ex.on_response_headers(&response("200", "application/connect+proto"), false);
    let ResponseHeadersStep::Forward(edits) = step else {
        panic!("{step:?}")
    };
    let mut body = Vec::new();
    let mut trailers = Vec::new();
    let pieces: Vec<&[u8]> = stream.chunks(chunk).collect();
    for (i, piece) in pieces.iter().enumerate() {
        let last = i + 1 == pieces.len();
        let ResponseBodyStep::Read(n) = ex.on_response_body(piece.len(), last) else {
            panic!("streams read every chunk")
        };
        assert_eq!(n, piece.len());
        let edit = ex.finish_response(piece).unwrap();
        body.extend_from_slice(replaced(&edit));
        assert!(edit.trailers.is_empty() || last);
        trailers.extend(edit.trailers);
    }
    (edits, body, trailers)
}

fn envelopes(body: &[u8]) -> Vec<(u8, Vec<u8>)> {
    let mut decoder = Decoder::new(1 << 20);
    let mut out = Vec::new();
    decoder
        .feed::<EnvelopeError>(body, |flags, m| {
            out.push((flags, m.to_vec()));
            Ok(())
        })
        .unwrap();
    decoder.finish().unwrap();
    out
}

#[test]
fn grpc_proto_streams_arrive_whole_whatever_the_chunking() {
    let messages = chunked_messages();
    let stream = shim_stream(&messages, b"{}");
    for chunk in [1, 3, 5, 64, 1000, stream.len()] {
        let mut ex = streaming("application/grpc", Vec::new());
        let (edits, body, trailers) = run(&mut ex, &stream, chunk);
        assert_eq!(edits.get("content-type"), Some("application/grpc"));
        assert_eq!(edits.get("grpc-encoding"), None);
        let got: Vec<Vec<u8>> = envelopes(&body)
            .into_iter()
            .map(|(f, m)| {
                assert_eq!(f, 0);
                m
            })
            .collect();
        let want: Vec<Vec<u8>> = messages.iter().map(Message::encode_to_vec).collect();
        assert_eq!(got, want, "chunk {chunk}");
        assert_eq!(trailers, ok_trailers());
    }
}

#[test]
fn connect_json_streams_end_with_their_end_message() {
    let messages = chunked_messages();
    let stream = shim_stream(&messages, b"{}");
    let mut ex = streaming("application/connect+json", Vec::new());
    let (edits, body, trailers) = run(&mut ex, &stream, 7);
    assert_eq!(edits.get("content-type"), Some("application/connect+json"));
    assert!(trailers.is_empty());
    let got = envelopes(&body);
    assert_eq!(got.len(), 4);
    let first = json_of(&got[0].1);
    assert_eq!(first["result"]["fields"][0]["name"], "id");
    assert_eq!(
        json_of(&got[2].1)["result"]["rows"]
            .as_array()
            .unwrap()
            .len(),
        30
    );
    assert_eq!(got[3], (END_STREAM, b"{}".to_vec()));
}

#[test]
fn stream_errors_reach_the_client_at_the_end() {
    let messages = chunked_messages();
    let end = br#"{"error":{"code":"deadline_exceeded","message":"the statement ran past its deadline"}}"#;
    let stream = shim_stream(&messages[..1], end);
    let mut ex = streaming("application/grpc+proto", Vec::new());
    let (_, body, trailers) = run(&mut ex, &stream, 10);
    assert_eq!(envelopes(&body).len(), 1);
    assert_eq!(
        trailers,
        crate::protocol::grpc::status(
            Some(Code::DeadlineExceeded),
            "the statement ran past its deadline"
        )
    );
    let mut ex = streaming("application/connect+proto", Vec::new());
    let (_, body, _) = run(&mut ex, &stream, 10);
    let got = envelopes(&body);
    assert_eq!(got.last().unwrap().0, END_STREAM);
    assert_eq!(
        json_of(&got.last().unwrap().1)["error"]["code"],
        "deadline_exceeded"
    );
}

#[test]
fn a_stream_cut_short_is_an_error_not_a_short_result() {
    let messages = chunked_messages();
    let full = shim_stream(&messages, b"{}");
    // Cut inside the last row message, and cut cleanly before the end message.
    let end_len = 5 + 2;
    for cut in [full.len() - end_len - 3, full.len() - end_len] {
        let mut ex = streaming("application/grpc", Vec::new());
        let (_, _, trailers) = run(&mut ex, &full[..cut], 16);
        let status = trailers.iter().find(|(n, _)| *n == "grpc-status").unwrap();
        assert_ne!(status.1, "0", "cut at {cut}");
    }
}

#[test]
fn shim_errors_before_the_stream_take_the_clients_shape() {
    let body = br#"{"code":"unauthenticated","message":"bad credentials"}"#;
    let mut ex = streaming("application/connect+proto", Vec::new());
    let (edits, edit) = respond(&mut ex, &response("401", "application/json"), body);
    assert_eq!(edits.get(":status"), Some("200"));
    assert_eq!(edits.get("content-type"), Some("application/connect+proto"));
    let got = envelopes(replaced(&edit));
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0, END_STREAM);
    assert_eq!(json_of(&got[0].1)["error"]["code"], "unauthenticated");
    let mut ex = streaming("application/grpc", Vec::new());
    let (_, edit) = respond(&mut ex, &response("401", "application/json"), body);
    assert_eq!(
        edit.trailers,
        crate::protocol::grpc::status(Some(Code::Unauthenticated), "bad credentials")
    );
}

#[test]
fn stream_messages_are_compressed_when_it_pays() {
    let messages = chunked_messages();
    let stream = shim_stream(&messages, b"{}");
    let mut ex = streaming(
        "application/connect+proto",
        vec![("connect-accept-encoding", "zstd, gzip".into())],
    );
    let (edits, body, _) = run(&mut ex, &stream, 100);
    // Our preference among what the client accepts: gzip before zstd.
    assert_eq!(edits.get("connect-content-encoding"), Some("gzip"));
    let got = envelopes(&body);
    // The first message is small (under 1 KiB): uncompressed; the row chunks are not.
    assert_eq!(got[0].0, 0);
    for (i, (flags, message)) in got[1..3].iter().enumerate() {
        assert_eq!(*flags, COMPRESSED);
        let mut plain = Vec::new();
        ferry_compress::decompress(Encoding::Gzip, message, 1 << 20, &mut plain).unwrap();
        assert_eq!(plain, messages[i + 1].encode_to_vec());
    }
    assert_eq!(got[3], (END_STREAM, b"{}".to_vec()));
}

#[test]
fn unary_content_types_cannot_call_a_stream() {
    let reply = reply_of_headers(&head(STREAM_EXECUTE, "application/proto"));
    let (status, code, message) = connect_error(&reply);
    assert_eq!((status, code.as_str()), (415, "unimplemented"));
    assert!(message.contains("server-streaming"), "{message}");
}
