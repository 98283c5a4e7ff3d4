//! Compression both ways: requests decompressed per protocol (and bombs refused at the
//! limit), answers compressed when the client accepts it and it pays.

use super::*;
use crate::envelope::{self, COMPRESSED};
use ferry_compress::Encoding;

pub(super) fn compressed(encoding: Encoding, bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    ferry_compress::compress(encoding, bytes, &mut out);
    out
}

fn enveloped(flags: u8, message: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    envelope::write(flags, message, &mut out);
    out
}

pub(super) fn with_encoding(mut h: RequestHead, name: &'static str, value: &str) -> RequestHead {
    h.encodings.push((name, value.into()));
    h
}

fn query_message() -> Vec<u8> {
    ExecuteRequest {
        query: "SELECT 1".into(),
        ..Default::default()
    }
    .encode_to_vec()
}

#[test]
fn requests_are_decompressed_in_every_protocol_and_codec() {
    let proto = query_message();
    let json = br#"{"query":"SELECT 1"}"#;
    for encoding in [
        Encoding::Gzip,
        Encoding::Zstd,
        Encoding::Snappy,
        Encoding::S2,
    ] {
        let name = encoding.name();
        // Connect unary: the whole body.
        let h = with_encoding(head(EXECUTE, "application/json"), "content-encoding", name);
        assert_eq!(
            send(&h, &compressed(encoding, json)).unwrap(),
            proto,
            "{name}"
        );
        let h = with_encoding(head(EXECUTE, "application/proto"), "content-encoding", name);
        assert_eq!(
            send(&h, &compressed(encoding, &proto)).unwrap(),
            proto,
            "{name}"
        );
        // gRPC: the flagged message.
        let h = with_encoding(head(EXECUTE, "application/grpc"), "grpc-encoding", name);
        let body = enveloped(COMPRESSED, &compressed(encoding, &proto));
        assert_eq!(send(&h, &body).unwrap(), proto, "{name}");
        // An uncompressed message under an encoding is fine too.
        assert_eq!(send(&h, &enveloped(0, &proto)).unwrap(), proto, "{name}");
        // Connect streaming: the flagged envelope.
        let h = with_encoding(
            head(STREAM_EXECUTE, "application/connect+json"),
            "connect-content-encoding",
            name,
        );
        let body = enveloped(COMPRESSED, &compressed(encoding, json));
        assert_eq!(send(&h, &body).unwrap(), proto, "{name}");
    }
}

#[test]
fn an_empty_compressed_body_is_an_empty_message() {
    // PlanetScale's Go client sends CreateSession as `content-encoding: s2` and no body.
    let h = with_encoding(
        head(CREATE_SESSION, "application/proto"),
        "content-encoding",
        "s2",
    );
    let (mut ex, step) = start(&h);
    assert!(matches!(
        step,
        RequestHeadersStep::Forward(_) | RequestHeadersStep::Hold(_)
    ));
    assert_eq!(ex.on_request_body(0, true), RequestBodyStep::Read);
    assert_eq!(ex.finish_request(Vec::new()).unwrap().as_slice(), b"");
    let mut ex = exchange(false);
    assert!(matches!(
        ex.on_request_headers(&h, true),
        RequestHeadersStep::Forward(_)
    ));
}

#[test]
fn bombs_are_refused_at_the_request_limit_in_every_codec() {
    // 1 MiB of zeros: far past the test limit (1000 bytes), a few hundred bytes packed.
    let zeros = vec![0u8; 1 << 20];
    for encoding in [
        Encoding::Gzip,
        Encoding::Zstd,
        Encoding::Snappy,
        Encoding::S2,
    ] {
        let bomb = compressed(encoding, &zeros);
        let name = encoding.name();
        let h = with_encoding(head(EXECUTE, "application/proto"), "content-encoding", name);
        let (status, code, message) = connect_error(&send(&h, &bomb).unwrap_err());
        assert_eq!(
            (status, code.as_str()),
            (429, "resource_exhausted"),
            "{name}"
        );
        assert!(message.contains("1000-byte limit"), "{message}");
        let h = with_encoding(head(EXECUTE, "application/grpc"), "grpc-encoding", name);
        let (status, message) = grpc_error(&send(&h, &enveloped(COMPRESSED, &bomb)).unwrap_err());
        assert_eq!(status, 8, "{name}: {message}");
        // Corrupt data is invalid, not a crash.
        let (status, _) =
            grpc_error(&send(&h, &enveloped(COMPRESSED, b"\xff\x00junk")).unwrap_err());
        assert_eq!(status, 3, "{name}");
    }
}

#[test]
fn compressed_requests_are_kept_chunk_by_chunk_and_inflated_at_their_end() {
    // A message that packs well: its compressed form is a few chunks, inflated whole.
    let query = format!("INSERT INTO t VALUES ('{}')", "ab".repeat(400));
    let proto = ExecuteRequest {
        query: query.clone(),
        ..Default::default()
    }
    .encode_to_vec();
    let zeros = vec![0u8; 1 << 20];
    for encoding in [Encoding::Gzip, Encoding::S2, Encoding::Zstd] {
        let name = encoding.name();
        for (h, body, bomb) in [
            (
                with_encoding(head(EXECUTE, "application/grpc"), "grpc-encoding", name),
                enveloped(COMPRESSED, &compressed(encoding, &proto)),
                enveloped(COMPRESSED, &compressed(encoding, &zeros)),
            ),
            (
                with_encoding(head(EXECUTE, "application/proto"), "content-encoding", name),
                compressed(encoding, &proto),
                compressed(encoding, &zeros),
            ),
        ] {
            for size in [3, 16, 100] {
                let (mut ex, _) = start(&h);
                assert_eq!(
                    super::send_chunked(&mut ex, &body, size).unwrap(),
                    proto,
                    "{name} in chunks of {size}"
                );
                // A bomb is still refused at the limit, from the kept bytes.
                let (mut ex, _) = start(&h);
                let reply = super::send_chunked(&mut ex, &bomb, size).unwrap_err();
                assert!(
                    reply.status == 429 || reply.header("grpc-status") == Some("8"),
                    "{name}: {reply:?}"
                );
            }
        }
    }
}

/// An answer of `rows` rows: compressible text, a few KB.
pub(super) fn large_answer(rows: usize) -> Vec<u8> {
    let mut response = execute_response();
    let result = response.result.as_mut().unwrap();
    result.rows = (0..rows)
        .map(|i| {
            let value = format!("{i}: the quick brown fox jumps over the lazy dog");
            Row {
                lengths: vec![value.len() as i64, -1],
                values: value.into_bytes(),
            }
        })
        .collect();
    response.encode_to_vec()
}

/// An exchange whose request (`content_type`, accepting `accept`) has been forwarded,
/// under a 1 MiB response limit.
fn compressing(content_type: &str, accept: (&'static str, &str)) -> Exchange {
    compressing_with(content_type, accept, Vec::new())
}

/// [`compressing`], with `envoy` as the codecs Envoy's compressor applies
/// (`compression.envoy`).
fn compressing_with(
    content_type: &str,
    accept: (&'static str, &str),
    envoy: Vec<Encoding>,
) -> Exchange {
    compressing_at(content_type, accept, envoy, (None, None))
}

/// [`compressing_with`], from a client whose distance Envoy gave as `(round trip in
/// ms, address)` (`None`: not given), under the default `compression.min_rtt_ms` (5)
/// and `near_networks` (loopback).
fn compressing_at(
    content_type: &str,
    accept: (&'static str, &str),
    envoy: Vec<Encoding>,
    (rtt_ms, addr): (Option<&str>, Option<&str>),
) -> Exchange {
    let mut ex = Exchange::new(std::rc::Rc::new(Config {
        limits: Limits {
            max_request_bytes: 1000,
            max_response_bytes: 1 << 20,
        },
        envoy_compression: envoy,
        ..Config::default()
    }));
    let mut request = with_encoding(head(EXECUTE, content_type), accept.0, accept.1);
    request.client_rtt = rtt_ms.map(str::to_owned);
    request.client_addr = addr.map(str::to_owned);
    let step = ex.on_request_headers(&request, false);
    assert!(
        matches!(
            step,
            RequestHeadersStep::Forward(_) | RequestHeadersStep::Hold(_)
        ),
        "{step:?}"
    );
    if content_type != "application/proto" {
        let body: &[u8] = match content_type {
            "application/json" => b"{}",
            _ => &[0, 0, 0, 0, 0],
        };
        assert_eq!(ex.on_request_body(body.len(), true), RequestBodyStep::Read);
        ex.finish_request(body.to_vec()).unwrap();
    }
    ex
}

#[test]
fn grpc_answers_are_compressed_per_message_when_it_pays() {
    let answer = large_answer(25);
    assert!(answer.len() > 1024, "{}", answer.len());
    let mut ex = compressing("application/grpc", ("grpc-accept-encoding", "gzip, s2"));
    let (edits, edit) = respond(&mut ex, &response("200", "application/proto"), &answer);
    // Our preference (s2, snappy, gzip, zstd) among what the client accepts.
    assert_eq!(edits.get("grpc-encoding"), Some("s2"));
    let body = replaced(&edit);
    let (flags, range) = envelope::single(body, "gRPC").unwrap();
    assert_eq!(flags, COMPRESSED);
    let mut plain = Vec::new();
    ferry_compress::decompress(Encoding::S2, &body[range], 1 << 20, &mut plain).unwrap();
    assert_eq!(plain, answer);
    assert_eq!(edit.trailers, ok_trailers());

    // A small answer goes uncompressed (flag 0) under the same header.
    let mut ex = compressing("application/grpc", ("grpc-accept-encoding", "gzip"));
    let small = execute_response().encode_to_vec();
    let (edits, edit) = respond(&mut ex, &response("200", "application/proto"), &small);
    assert_eq!(edits.get("grpc-encoding"), Some("gzip"));
    let mut framed = envelope::header(0, small.len()).unwrap().to_vec();
    framed.extend_from_slice(&small);
    assert_eq!(
        edit.body,
        BodyEdit::Prepend(envelope::header(0, small.len()).unwrap())
    );
}

#[test]
fn a_near_client_gets_identity_answers() {
    let answer = large_answer(25);
    // 4 ms away as measured (TCP), or on this host without a measure (HTTP/3 from
    // loopback): no grpc-encoding, the message flagged 0.
    for near in [(Some("4"), Some("192.0.2.1")), (None, Some("127.0.0.1"))] {
        let mut ex = compressing_at(
            "application/grpc",
            ("grpc-accept-encoding", "gzip, s2"),
            vec![],
            near,
        );
        let (edits, edit) = respond(&mut ex, &response("200", "application/proto"), &answer);
        assert_eq!(edits.get("grpc-encoding"), None);
        assert_eq!(
            edit.body,
            BodyEdit::Prepend(envelope::header(0, answer.len()).unwrap())
        );
        // Connect proto: the shim's answer passes as it is, nothing held.
        let mut ex = compressing_at("application/proto", ("accept-encoding", "s2"), vec![], near);
        let ResponseHeadersStep::Forward(edits) =
            ex.on_response_headers(&response("200", "application/proto"), false)
        else {
            panic!("a near client's answer is not held for a sample")
        };
        assert_eq!(edits.get("content-encoding"), None);
        assert_eq!(
            ex.on_response_body(answer.len(), true),
            ResponseBodyStep::Continue
        );
        // Connect JSON left to Envoy's zstd: transcoded, and Envoy is told to leave it.
        let mut ex = compressing_at(
            "application/json",
            ("accept-encoding", "zstd"),
            vec![Encoding::Zstd],
            near,
        );
        let (edits, json) = streamed_json(&mut ex, &answer, 1000);
        assert_eq!(edits.get("cache-control"), Some("no-transform"));
        assert_eq!(edits.get("content-encoding"), None);
        assert_eq!(
            json_of(&json)["result"]["rows"].as_array().unwrap().len(),
            25
        );
    }
    // 5 ms or more away (even from a near network: the measure decides), or of
    // unknown distance (HTTP/3 from elsewhere): compressed as before.
    for rtt in [
        (Some("5"), None),
        (Some("40"), Some("127.0.0.1")),
        (None, None),
        (Some("-"), Some("192.0.2.1")),
        (None, Some("2001:db8::1")),
    ] {
        let mut ex = compressing_at(
            "application/grpc",
            ("grpc-accept-encoding", "gzip, s2"),
            vec![],
            rtt,
        );
        let (edits, _) = respond(&mut ex, &response("200", "application/proto"), &answer);
        assert_eq!(edits.get("grpc-encoding"), Some("s2"), "{rtt:?}");
        let mut ex = compressing_at(
            "application/json",
            ("accept-encoding", "zstd"),
            vec![Encoding::Zstd],
            rtt,
        );
        let (edits, _) = streamed_json(&mut ex, &answer, 1000);
        assert_eq!(edits.get("cache-control"), None, "{rtt:?}");
    }
}

#[test]
fn incompressible_answers_go_as_identity() {
    // Random bytes in a row: nothing to gain, so the message is sent as it is.
    let mut message = execute_response();
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let noise: Vec<u8> = (0..1500)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed as u8
        })
        .collect();
    message.result.as_mut().unwrap().rows = vec![Row {
        lengths: vec![noise.len() as i64, -1],
        values: noise,
    }];
    let answer = message.encode_to_vec();
    let mut ex = compressing("application/grpc", ("grpc-accept-encoding", "zstd"));
    let (edits, edit) = respond(&mut ex, &response("200", "application/proto"), &answer);
    assert_eq!(edits.get("grpc-encoding"), Some("zstd"));
    let body = replaced(&edit);
    assert_eq!(body[0], 0, "sent uncompressed");
    assert_eq!(&body[5..], answer.as_slice());
}

#[test]
fn connect_unary_answers_hold_their_headers_to_name_the_encoding() {
    let answer = large_answer(25);
    // Proto under any codec, and JSON under the LZ-only ones (S2), wait for the sample
    // (here: the whole, smaller answer); JSON under gzip or zstd does not (below).
    for (content_type, codec, enc) in [
        ("application/proto", "proto", Encoding::Zstd),
        ("application/json", "json", Encoding::S2),
    ] {
        let accept = format!("br, {};q=0.5", enc.name());
        let mut ex = compressing(content_type, ("accept-encoding", &accept));
        let step = ex.on_response_headers(&response("200", "application/proto"), false);
        let ResponseHeadersStep::Hold(edits) = step else {
            panic!("{codec}: {step:?}")
        };
        assert_eq!(edits.get("content-type"), Some(content_type));
        assert_eq!(edits.get("content-encoding"), None);
        assert_eq!(
            ex.on_response_body(answer.len(), false),
            ResponseBodyStep::Wait
        );
        let ResponseBodyStep::Read(n) = ex.on_response_body(answer.len(), true) else {
            panic!()
        };
        let edit = ex.finish_response(&answer[..n]).unwrap();
        assert_eq!(
            edit.headers.get("content-encoding"),
            Some(enc.name()),
            "{codec}"
        );
        let mut plain = Vec::new();
        ferry_compress::decompress(enc, replaced(&edit), 1 << 20, &mut plain).unwrap();
        if codec == "proto" {
            assert_eq!(plain, answer);
        } else {
            let json = json_of(&plain);
            assert_eq!(json["result"]["rows"].as_array().unwrap().len(), 25);
        }
    }
    // Small (declared) answers and clients that accept nothing we have pass untouched.
    let mut ex = compressing("application/proto", ("accept-encoding", "zstd"));
    let mut small = response("200", "application/proto");
    small.content_length = Some("100".into());
    assert_eq!(
        ex.on_response_headers(&small, false),
        ResponseHeadersStep::Forward(stripped())
    );
    let mut ex = compressing("application/proto", ("accept-encoding", "br, deflate"));
    assert_eq!(
        ex.on_response_headers(&response("200", "application/proto"), false),
        ResponseHeadersStep::Forward(stripped())
    );
}

#[test]
fn a_held_connect_answer_that_does_not_pay_keeps_its_body() {
    let mut ex = compressing("application/proto", ("accept-encoding", "s2"));
    let answer = execute_response().encode_to_vec(); // under min_bytes once read
    let step = ex.on_response_headers(&response("200", "application/proto"), false);
    assert!(matches!(step, ResponseHeadersStep::Hold(_)));
    let ResponseBodyStep::Read(n) = ex.on_response_body(answer.len(), true) else {
        panic!()
    };
    let edit = ex.finish_response(&answer[..n]).unwrap();
    assert_eq!(edit.body, BodyEdit::Keep);
    assert!(edit.headers.is_empty());
}

#[test]
fn an_oversized_held_answer_is_replaced_whole() {
    let mut ex = compressing("application/json", ("accept-encoding", "s2"));
    let step = ex.on_response_headers(&response("200", "application/proto"), false);
    assert!(matches!(step, ResponseHeadersStep::Hold(_)));
    let ResponseBodyStep::Reply(reply) = ex.on_response_body((1 << 20) + 1, false) else {
        panic!()
    };
    assert_eq!(connect_error(&reply).1, "resource_exhausted");
}

/// A held Connect unary answer, through to its edit.
fn held_answer(ex: &mut Exchange, answer: &[u8]) -> ResponseEdit {
    let step = ex.on_response_headers(&response("200", "application/proto"), false);
    let ResponseHeadersStep::Hold(edits) = step else {
        panic!("{step:?}")
    };
    assert_eq!(edits.get("cache-control"), None);
    let ResponseBodyStep::Read(n) = ex.on_response_body(answer.len(), true) else {
        panic!()
    };
    ex.finish_response(&answer[..n]).unwrap()
}

#[test]
fn connect_unary_leaves_envoys_codecs_to_envoy() {
    let envoy = || vec![Encoding::Zstd, Encoding::Gzip];
    let answer = large_answer(25);
    // Accepted by Envoy's compressor: ours (s2) is passed over, the body goes as it
    // is and unmarked, and Envoy compresses it. A proto answer is held for a sample;
    // large JSON is transcoded as it comes, nothing held (and so is JSON of no
    // declared size: connect_json_goes_out_as_it_arrives_identity_envoy_zstd_or_gzip).
    let mut ex = compressing_with(
        "application/proto",
        ("accept-encoding", "s2, gzip"),
        envoy(),
    );
    let edit = held_answer(&mut ex, &answer);
    assert_eq!(edit.headers.get("content-encoding"), None);
    assert_eq!(edit.headers.get("cache-control"), None);
    assert_eq!(edit.body, BodyEdit::Keep);
    let mut ex = compressing_with("application/json", ("accept-encoding", "zstd, s2"), envoy());
    let (edits, json) = streamed_json(&mut ex, &answer, 1000);
    assert_eq!(edits.get("content-encoding"), None);
    assert_eq!(edits.get("cache-control"), None);
    assert_eq!(
        json_of(&json)["result"]["rows"].as_array().unwrap().len(),
        25
    );
    // Judged not worth it (too small once read): marked so Envoy leaves it alone.
    let mut ex = compressing_with("application/proto", ("accept-encoding", "zstd"), envoy());
    let edit = held_answer(&mut ex, &execute_response().encode_to_vec());
    assert_eq!(edit.headers.get("cache-control"), Some("no-transform"));
    assert_eq!(edit.body, BodyEdit::Keep);
    // Declared small: not held, marked at once.
    let mut ex = compressing_with("application/json", ("accept-encoding", "gzip"), envoy());
    let mut small = response("200", "application/proto");
    small.content_length = Some("100".into());
    let (ResponseHeadersStep::Forward(edits) | ResponseHeadersStep::Hold(edits)) =
        ex.on_response_headers(&small, false)
    else {
        panic!()
    };
    assert_eq!(edits.get("cache-control"), Some("no-transform"));
    // ... and its body edit touches no header: they are out already.
    let small_answer = execute_response().encode_to_vec();
    let ResponseBodyStep::Read(n) = ex.on_response_body(small_answer.len(), true) else {
        panic!()
    };
    let edit = ex.finish_response(&small_answer[..n]).unwrap();
    assert!(edit.headers.is_empty(), "{:?}", edit.headers);
    // A client that accepts none of Envoy's codecs gets ours, as before.
    let mut ex = compressing_with("application/proto", ("accept-encoding", "s2"), envoy());
    let edit = held_answer(&mut ex, &answer);
    assert_eq!(edit.headers.get("content-encoding"), Some("s2"));
    assert_eq!(edit.headers.get("cache-control"), None);
    // Enveloped messages are always ours to compress.
    let mut ex = compressing_with(
        "application/grpc",
        ("grpc-accept-encoding", "zstd"),
        envoy(),
    );
    let (edits, edit) = respond(&mut ex, &response("200", "application/proto"), &answer);
    assert_eq!(edits.get("grpc-encoding"), Some("zstd"));
    assert_eq!(edits.get("cache-control"), None);
    assert_eq!(replaced(&edit)[0], COMPRESSED);
}

#[test]
fn an_incompressible_connect_answer_is_kept_from_envoys_compressor() {
    let mut message = execute_response();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let noise: Vec<u8> = (0..4000)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed as u8
        })
        .collect();
    message.result.as_mut().unwrap().rows = vec![Row {
        lengths: vec![noise.len() as i64, -1],
        values: noise,
    }];
    let answer = message.encode_to_vec();
    let mut ex = compressing_with(
        "application/proto",
        ("accept-encoding", "gzip"),
        vec![Encoding::Gzip],
    );
    let edit = held_answer(&mut ex, &answer);
    assert_eq!(edit.headers.get("cache-control"), Some("no-transform"));
    assert_eq!(edit.headers.get("content-encoding"), None);
    assert_eq!(edit.body, BodyEdit::Keep);
}

/// Drives a streamed Connect JSON answer: its header edits, and the JSON its chunks
/// (cut every `cut` bytes) were replaced with.
fn streamed_json(ex: &mut Exchange, answer: &[u8], cut: usize) -> (HeaderEdits, Vec<u8>) {
    let mut head = response("200", "application/proto");
    head.content_length = Some(answer.len().to_string());
    let step = ex.on_response_headers(&head, false);
    let ResponseHeadersStep::Forward(edits) = step else {
        panic!("{step:?}")
    };
    let mut json = Vec::new();
    let chunks: Vec<&[u8]> = answer.chunks(cut).collect();
    for (i, chunk) in chunks.iter().enumerate() {
        let step = ex.on_response_body(chunk.len(), i + 1 == chunks.len());
        assert_eq!(step, ResponseBodyStep::Read(chunk.len()));
        let edit = ex.finish_response(chunk).unwrap();
        assert!(!edit.pause && edit.trailers.is_empty() && edit.headers.is_empty());
        json.extend_from_slice(replaced(&edit));
    }
    (edits, json)
}

#[test]
fn connect_json_goes_out_as_it_arrives_identity_envoy_zstd_or_gzip() {
    let answer = large_answer(300);
    let want = json_of(&{
        let mut out = Vec::new();
        crate::codec::json::from_proto::<ExecuteResponse>(&answer, &mut out, usize::MAX).unwrap();
        out
    });
    // Identity; and zstd, which Envoy's compressor applies (judged by the declared
    // size: protojson always pays), so the answer is not marked `no-transform`.
    for (accept, envoy, marked) in [
        ("identity", vec![Encoding::Zstd], false),
        ("zstd", vec![Encoding::Zstd], false),
    ] {
        let mut ex = compressing_with("application/json", ("accept-encoding", accept), envoy);
        let (edits, json) = streamed_json(&mut ex, &answer, 1000);
        assert_eq!(edits.get("content-type"), Some("application/json"));
        assert!(edits.remove.contains(&"content-length"));
        assert_eq!(edits.get("content-encoding"), None);
        assert_eq!(edits.get("cache-control").is_some(), marked, "{accept}");
        assert_eq!(json_of(&json), want, "{accept}");
    }
    // gzip (what Node's fetch, under @planetscale/database, asks for) and the filter's
    // zstd, declared: the filter names it at once and compresses the JSON as it goes
    // (one gzip member; zstd frames).
    for (accept, enc) in [("gzip, deflate", Encoding::Gzip), ("zstd", Encoding::Zstd)] {
        let mut ex = compressing_with("application/json", ("accept-encoding", accept), Vec::new());
        let (edits, packed) = streamed_json(&mut ex, &answer, 1000);
        assert_eq!(edits.get("content-encoding"), Some(enc.name()));
        assert!(edits.remove.contains(&"content-length"));
        let mut json = Vec::new();
        ferry_compress::decompress(enc, &packed, 1 << 24, &mut json).unwrap();
        assert_eq!(json_of(&json), want, "{accept}");
        assert!(
            packed.len() < json.len() / 2,
            "{accept}: {} of {}",
            packed.len(),
            json.len()
        );
    }
    // Without a declared size (the shim sends a large answer in pieces as MySQL
    // sends it), gzip and zstd go out as they come all the same; an LZ-only codec (s2)
    // holds the headers for its sample.
    for accept in ["gzip", "zstd"] {
        let mut ex = compressing_with("application/json", ("accept-encoding", accept), Vec::new());
        let step = ex.on_response_headers(&response("200", "application/proto"), false);
        let ResponseHeadersStep::Forward(edits) = step else {
            panic!("{step:?}")
        };
        assert_eq!(edits.get("content-encoding"), Some(accept));
    }
    let mut ex = compressing_with("application/json", ("accept-encoding", "s2"), Vec::new());
    let step = ex.on_response_headers(&response("200", "application/proto"), false);
    assert!(matches!(step, ResponseHeadersStep::Hold(_)), "{step:?}");
}

#[test]
fn a_streamed_connect_json_answer_that_goes_wrong_is_reset() {
    // Garbage after a good start: the 200 is out, so the stream is reset.
    let mut ex = compressing_with(
        "application/json",
        ("accept-encoding", "identity"),
        Vec::new(),
    );
    let mut head = response("200", "application/proto");
    head.content_length = Some("4".into());
    assert!(matches!(
        ex.on_response_headers(&head, false),
        ResponseHeadersStep::Forward(_)
    ));
    assert_eq!(ex.on_response_body(2, false), ResponseBodyStep::Read(2));
    assert!(ex.finish_response(&[0x12, 0x00]).is_ok());
    assert_eq!(ex.on_response_body(2, true), ResponseBodyStep::Read(2));
    let Err(Reset(message)) = ex.finish_response(&[0x0b, 0x00]) else {
        panic!()
    };
    assert!(message.contains("not valid"), "{message}");
    // JSON past the limit (base64 outgrows the proto): reset with the limit's message.
    let answer = large_answer(300);
    let mut ex = Exchange::new(std::rc::Rc::new(Config {
        limits: Limits {
            max_request_bytes: 1000,
            max_response_bytes: answer.len() + 10,
        },
        ..Config::default()
    }));
    let step = ex.on_request_headers(&head_json(), false);
    assert!(!matches!(step, RequestHeadersStep::Reply(_)));
    assert_eq!(ex.on_request_body(2, true), RequestBodyStep::Read);
    ex.finish_request(b"{}".to_vec()).unwrap();
    let mut head = response("200", "application/proto");
    head.content_length = Some(answer.len().to_string());
    assert!(matches!(
        ex.on_response_headers(&head, false),
        ResponseHeadersStep::Forward(_)
    ));
    assert_eq!(
        ex.on_response_body(answer.len(), true),
        ResponseBodyStep::Read(answer.len())
    );
    let Err(Reset(message)) = ex.finish_response(&answer) else {
        panic!()
    };
    assert!(message.contains("response limit"), "{message}");
    // A body past the limit is reset before it is read.
    let mut ex = compressing_with(
        "application/json",
        ("accept-encoding", "identity"),
        Vec::new(),
    );
    let mut head = response("200", "application/proto");
    head.content_length = Some("10".into());
    ex.on_response_headers(&head, false);
    assert!(matches!(
        ex.on_response_body((1 << 20) + 1, false),
        ResponseBodyStep::Reset(_)
    ));
}

fn head_json() -> RequestHead {
    head(EXECUTE, "application/json")
}

/// What a client receives for an answer of undeclared size sent in `cut`-byte chunks,
/// Envoy's part played as it is: while the headers are held, each body callback sees
/// the whole body so far; after, each its own chunk, passed on as it is (`Continue`)
/// or replaced by what `finish_response` returns. The headers' edits (the held ones
/// and the decision's), the bytes received, and how many chunks went by before the
/// headers went out.
pub(super) fn received(
    ex: &mut Exchange,
    answer: &[u8],
    cut: usize,
) -> (HeaderEdits, Vec<u8>, usize) {
    let step = ex.on_response_headers(&response("200", "application/proto"), false);
    let (mut held, mut edits) = match step {
        ResponseHeadersStep::Hold(edits) => (true, edits),
        ResponseHeadersStep::Forward(edits) => (false, edits),
        other => panic!("{other:?}"),
    };
    let mut out = Vec::new();
    let mut buffered = Vec::new();
    let mut waited = 0;
    let chunks: Vec<&[u8]> = answer.chunks(cut).collect();
    for (i, chunk) in chunks.iter().enumerate() {
        let end = i + 1 == chunks.len();
        buffered.extend_from_slice(chunk);
        match ex.on_response_body(buffered.len(), end) {
            ResponseBodyStep::Wait => {
                assert!(held, "only held headers wait");
                waited += 1;
                continue;
            }
            ResponseBodyStep::Continue => out.append(&mut buffered),
            ResponseBodyStep::Read(n) => {
                assert_eq!(n, buffered.len());
                let edit = ex.finish_response(&buffered).unwrap();
                assert!(
                    held || edit.headers.is_empty(),
                    "headers edited after they went out"
                );
                edits.set.extend(edit.headers.set);
                edits.remove.extend(edit.headers.remove);
                assert!(!edit.pause && edit.trailers.is_empty());
                match edit.body {
                    BodyEdit::Keep => out.append(&mut buffered),
                    BodyEdit::Replace(body) => {
                        out.extend_from_slice(&body);
                        buffered.clear();
                    }
                    BodyEdit::Prepend(_) | BodyEdit::Wrap(..) | BodyEdit::Append(_) => {
                        panic!("a Connect answer has no envelope")
                    }
                }
            }
            other => panic!("chunk {i}: {other:?}"),
        }
        held = false;
    }
    (edits, out, waited)
}

/// An answer of `rows` rows of random bytes: nothing for a codec to find.
pub(super) fn noisy_answer(rows: usize) -> Vec<u8> {
    let mut response = execute_response();
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    response.result.as_mut().unwrap().rows = (0..rows)
        .map(|_| {
            let value: Vec<u8> = (0..200)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    seed as u8
                })
                .collect();
            Row {
                lengths: vec![value.len() as i64, -1],
                values: value,
            }
        })
        .collect();
    response.encode_to_vec()
}

#[test]
fn connect_proto_answers_are_compressed_as_they_arrive_after_a_sample() {
    // ~170 KB of text: past the 64 KiB sample, sent in 10 KB chunks.
    let answer = large_answer(3000);
    for accept in ["s2", "snappy", "gzip"] {
        let enc = Encoding::parse(accept).unwrap();
        let mut ex = compressing("application/proto", ("accept-encoding", accept));
        let (edits, body, waited) = received(&mut ex, &answer, 10_000);
        // The headers waited for 64 KiB (six chunks held, the seventh judged).
        assert_eq!(waited, 6, "{accept}");
        assert_eq!(edits.get("content-encoding"), Some(accept));
        assert!(edits.remove.contains(&"content-length"));
        assert!(body.len() < answer.len() / 2, "{accept}: {}", body.len());
        let mut plain = Vec::new();
        ferry_compress::decompress(enc, &body, 1 << 20, &mut plain).unwrap();
        assert!(plain == answer, "{accept}");
        // One stream, not one per chunk: for snappy and S2 the bytes of compressing
        // the answer whole (deflate's may depend on how its input came).
        if enc != Encoding::Gzip {
            assert!(body == compressed(enc, &answer), "{accept}");
        }
    }
    // Incompressible: judged on the sample, it goes as it is and the rest passes.
    let answer = noisy_answer(1000);
    let mut ex = compressing("application/proto", ("accept-encoding", "s2"));
    let (edits, body, waited) = received(&mut ex, &answer, 10_000);
    assert_eq!(waited, 6);
    assert_eq!(edits.get("content-encoding"), None);
    assert!(body == answer);
    assert!(matches!(
        ex.on_response_body(10, false),
        ResponseBodyStep::Continue
    ));
}

#[test]
fn connect_json_under_an_lz_codec_is_judged_on_a_sample_then_streamed() {
    let want = |answer: &[u8]| {
        let mut out = Vec::new();
        crate::codec::json::from_proto::<ExecuteResponse>(answer, &mut out, usize::MAX).unwrap();
        json_of(&out)
    };
    let answer = large_answer(3000);
    for accept in ["s2", "snappy"] {
        let enc = Encoding::parse(accept).unwrap();
        let mut ex = compressing("application/json", ("accept-encoding", accept));
        let (edits, body, waited) = received(&mut ex, &answer, 10_000);
        assert_eq!(waited, 6);
        assert_eq!(edits.get("content-type"), Some("application/json"));
        assert_eq!(edits.get("content-encoding"), Some(accept));
        let mut json = Vec::new();
        ferry_compress::decompress(enc, &body, 1 << 24, &mut json).unwrap();
        assert_eq!(json_of(&json), want(&answer), "{accept}");
    }
    // Base64 of random bytes gives an LZ codec nothing: identity JSON, still streamed.
    let answer = noisy_answer(1000);
    let mut ex = compressing("application/json", ("accept-encoding", "s2"));
    let (edits, body, _) = received(&mut ex, &answer, 10_000);
    assert_eq!(edits.get("content-encoding"), None);
    assert_eq!(json_of(&body), want(&answer));
    // gzip packs base64 whatever the bytes: named at once, nothing held.
    let mut ex = compressing("application/json", ("accept-encoding", "gzip"));
    let (edits, body, waited) = received(&mut ex, &answer, 10_000);
    assert_eq!((waited, edits.get("content-encoding")), (0, Some("gzip")));
    let mut json = Vec::new();
    ferry_compress::decompress(Encoding::Gzip, &body, 1 << 24, &mut json).unwrap();
    assert_eq!(json_of(&json), want(&answer));
}

#[test]
fn connect_proto_left_to_envoys_compressor_is_judged_on_a_sample_then_passes() {
    let envoy = || vec![Encoding::Zstd];
    for (answer, marked) in [(large_answer(3000), false), (noisy_answer(1000), true)] {
        let mut ex = compressing_with("application/proto", ("accept-encoding", "zstd"), envoy());
        let (edits, body, waited) = received(&mut ex, &answer, 10_000);
        assert_eq!(waited, 6);
        assert_eq!(edits.get("content-encoding"), None, "Envoy names it");
        assert_eq!(edits.get("cache-control").is_some(), marked);
        assert!(body == answer);
        assert!(matches!(
            ex.on_response_body(10, false),
            ResponseBodyStep::Continue
        ));
    }
}

#[test]
fn a_held_sample_past_the_limit_is_refused_whole() {
    // The headers still wait: the answer becomes a clear error, not a reset.
    let mut ex = compressing("application/proto", ("accept-encoding", "s2"));
    let step = ex.on_response_headers(&response("200", "application/proto"), false);
    assert!(matches!(step, ResponseHeadersStep::Hold(_)));
    assert_eq!(ex.on_response_body(1000, false), ResponseBodyStep::Wait);
    let ResponseBodyStep::Reply(reply) = ex.on_response_body((1 << 20) + 1, false) else {
        panic!()
    };
    assert_eq!(connect_error(&reply).1, "resource_exhausted");
    // Past it once streaming: the 200 is out, so the stream is reset.
    let mut ex = compressing("application/proto", ("accept-encoding", "s2"));
    ex.on_response_headers(&response("200", "application/proto"), false);
    let sample = large_answer(3000);
    assert!(matches!(
        ex.on_response_body(sample.len(), false),
        ResponseBodyStep::Read(_)
    ));
    ex.finish_response(&sample).unwrap();
    assert!(matches!(
        ex.on_response_body(1 << 20, false),
        ResponseBodyStep::Reset(_)
    ));
}

/// Envoy's part for an enveloped answer of undeclared size sent in `cut`-byte chunks:
/// a paused callback keeps the (edited) buffer, which later chunks join; a continued
/// one sends it. What the client receives, the trailers added, and how many callbacks
/// paused.
pub(super) fn enveloped_received(
    ex: &mut Exchange,
    answer: &[u8],
    cut: usize,
) -> (HeaderEdits, Vec<u8>, Vec<Header>, usize) {
    let step = ex.on_response_headers(&response("200", "application/proto"), false);
    let ResponseHeadersStep::Forward(edits) = step else {
        panic!("{step:?}")
    };
    let (mut out, mut buffered, mut trailers, mut paused) = (Vec::new(), Vec::new(), Vec::new(), 0);
    let chunks: Vec<&[u8]> = answer.chunks(cut).collect();
    for (i, chunk) in chunks.iter().enumerate() {
        buffered.extend_from_slice(chunk);
        let edit = match ex.on_response_body(buffered.len(), i + 1 == chunks.len()) {
            ResponseBodyStep::Continue => ResponseEdit::default(),
            ResponseBodyStep::Wait => ResponseEdit {
                pause: true,
                ..ResponseEdit::default()
            },
            ResponseBodyStep::Discard => {
                buffered.clear();
                ResponseEdit {
                    pause: true,
                    ..ResponseEdit::default()
                }
            }
            ResponseBodyStep::Read(n) => {
                assert_eq!(n, buffered.len());
                ex.finish_response(&buffered).unwrap()
            }
            ResponseBodyStep::Finish(edit) => edit,
            other => panic!("chunk {i}: {other:?}"),
        };
        assert!(edit.headers.is_empty(), "gRPC headers are out");
        match edit.body {
            BodyEdit::Keep => {}
            BodyEdit::Prepend(header) => {
                buffered.splice(0..0, header);
            }
            BodyEdit::Wrap(header, end) => {
                buffered.splice(0..0, header);
                buffered.extend_from_slice(&end);
            }
            BodyEdit::Append(end) => buffered.extend_from_slice(&end),
            BodyEdit::Replace(body) => buffered = body,
        }
        trailers.extend(edit.trailers);
        if edit.pause {
            paused += 1;
        } else {
            out.append(&mut buffered);
        }
    }
    (edits, out, trailers, paused)
}

#[test]
fn large_grpc_answers_are_compressed_as_they_arrive_and_framed_at_the_end() {
    let answer = large_answer(3000); // ~170 KB of text
    for accept in ["s2", "snappy", "gzip"] {
        let enc = Encoding::parse(accept).unwrap();
        let mut ex = compressing("application/grpc", ("grpc-accept-encoding", accept));
        let (edits, out, trailers, paused) = enveloped_received(&mut ex, &answer, 10_000);
        assert_eq!(edits.get("grpc-encoding"), Some(accept));
        // No chunk paused: each moved into the VM and went on emptied (Envoy
        // buffers nothing), the last carrying the whole frame.
        assert_eq!(paused, 0, "{accept}");
        let (flags, range) = envelope::single(&out, "gRPC").unwrap();
        assert_eq!(flags, COMPRESSED);
        assert!(range.len() < answer.len() / 2, "{accept}");
        let mut plain = Vec::new();
        ferry_compress::decompress(enc, &out[range], 1 << 20, &mut plain).unwrap();
        assert!(plain == answer, "{accept}");
        assert_eq!(trailers, ok_trailers());
    }
    // Incompressible: judged on the sample, the answer is kept as it is and goes
    // uncompressed at its end.
    let answer = noisy_answer(1000);
    let mut ex = compressing("application/grpc", ("grpc-accept-encoding", "s2"));
    let (_, out, trailers, _) = enveloped_received(&mut ex, &answer, 10_000);
    let (flags, range) = envelope::single(&out, "gRPC").unwrap();
    assert_eq!(flags, 0);
    assert!(out[range] == answer[..]);
    assert_eq!(trailers, ok_trailers());
    // Past the limit once kept: the rest is dropped and the status says why.
    let mut ex = compressing("application/grpc", ("grpc-accept-encoding", "gzip"));
    let big = large_answer(25_000);
    assert!(big.len() > 1 << 20);
    let (_, out, trailers, _) = enveloped_received(&mut ex, &big, 100_000);
    assert!(out.is_empty(), "{} bytes", out.len());
    assert_eq!(trailers[0], ("grpc-status", "8".to_owned()));
}
