//! An Execute answer from the shim (`application/proto`, arbitrary bytes of declared
//! or undeclared size, cut into arbitrary chunks) through the real exchange to a unary
//! client — Connect proto or JSON, or gRPC — accepting identity, gzip, s2, snappy or zstd,
//! Envoy's part played as it is: a paused callback keeps its (edited) buffer, a
//! continued one sends it. No panic; a proto client that gets to the end receives
//! exactly the shim's bytes, once its encoding (and gRPC's envelope) is undone.
#![no_main]

use std::rc::Rc;

use ferry_compress::{decompress, Encoding, Policy};
use ferry_filter_core::config::Config;
use ferry_filter_core::exchange::{
    BodyEdit, Exchange, RequestBodyStep, RequestHead, ResponseBodyStep, ResponseHead,
    ResponseHeadersStep,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let (cuts, answer) = rest.split_at(rest.len().min(4));
    let grpc = selector & 16 == 16;
    let json = !grpc && selector & 1 == 1;
    let accept = if selector & 32 == 32 {
        "zstd"
    } else {
        ["identity", "gzip", "s2", "snappy"][usize::from(selector >> 1) & 3]
    };
    let declared = selector & 8 == 8;
    // A small sample and threshold, so fuzzed answers cross them.
    let config = Config {
        compression: Policy {
            min_bytes: 32,
            sample_bytes: 200,
            ..Policy::default()
        },
        ..Config::default()
    };
    let (content_type, accept_header, request): (&str, &str, &[u8]) = if grpc {
        ("application/grpc", "grpc-accept-encoding", &[0, 0, 0, 0, 0])
    } else if json {
        ("application/json", "accept-encoding", b"{}")
    } else {
        ("application/proto", "accept-encoding", b"")
    };
    let head = RequestHead {
        method: Some("POST".into()),
        path: Some("/psdb.v1alpha1.Database/Execute".into()),
        content_type: Some(content_type.into()),
        authorization: Some("Basic dXNlcjpwYXNz".into()),
        encodings: vec![(accept_header, accept.into())],
        ..RequestHead::default()
    };
    let mut exchange = Exchange::new(Rc::new(config));
    exchange.on_request_headers(&head, request.is_empty());
    if !request.is_empty() {
        assert_eq!(exchange.on_request_body(request.len(), true), RequestBodyStep::Read);
        exchange.finish_request(request.to_vec()).ok();
    }
    let response = ResponseHead {
        status: Some("200".into()),
        content_type: Some("application/proto".into()),
        content_length: declared.then(|| answer.len().to_string()),
        shim_instance: Some("0123456789abcdef".into()),
        ..ResponseHead::default()
    };
    let mut encoding = None;
    let mut note = |set: &[(&str, String)]| {
        for (name, value) in set {
            if *name == "content-encoding" || *name == "grpc-encoding" {
                encoding = Encoding::parse(value);
            }
        }
    };
    match exchange.on_response_headers(&response, answer.is_empty()) {
        ResponseHeadersStep::Forward(edits) | ResponseHeadersStep::Hold(edits) => {
            note(&edits.set)
        }
        ResponseHeadersStep::Reply(_) => return,
    }
    if answer.is_empty() {
        return;
    }
    let mut out = Vec::new();
    let mut buffered = Vec::new();
    let mut rest = answer;
    let mut cuts = cuts.iter().cycle();
    while !rest.is_empty() {
        let n = usize::from(*cuts.next().unwrap_or(&64)).max(1).min(rest.len());
        let (chunk, tail) = rest.split_at(n);
        rest = tail;
        buffered.extend_from_slice(chunk);
        let edit = match exchange.on_response_body(buffered.len(), rest.is_empty()) {
            ResponseBodyStep::Continue => {
                out.append(&mut buffered);
                continue;
            }
            ResponseBodyStep::Wait => continue,
            ResponseBodyStep::Read(max) => {
                let take = max.min(buffered.len());
                let Ok(edit) = exchange.finish_response(&buffered[..take]) else {
                    return; // reset: a malformed answer for a JSON client
                };
                edit
            }
            ResponseBodyStep::Finish(edit) => edit,
            // Too large, or refused: an error, not the answer.
            ResponseBodyStep::Discard | ResponseBodyStep::Reply(_) | ResponseBodyStep::Reset(_) => {
                return
            }
        };
        note(&edit.headers.set);
        if edit.trailers.iter().any(|(n, v)| *n == "grpc-status" && v != "0") {
            return; // an error told in trailers
        }
        match edit.body {
            BodyEdit::Keep => {}
            BodyEdit::Replace(bytes) => buffered = bytes,
            BodyEdit::Prepend(header) => {
                buffered.splice(0..0, header);
            }
            BodyEdit::Append(tail) => buffered.extend_from_slice(&tail),
            // gRPC-Web served by the filter: the envelope in front, the trailer frame after.
            BodyEdit::Wrap(header, tail) => {
                buffered.splice(0..0, header);
                buffered.extend_from_slice(&tail);
            }
        }
        if !edit.pause {
            out.append(&mut buffered);
        }
    }
    if json {
        return;
    }
    let (compressed, message) = if grpc {
        // One envelope: flag, length, message.
        let Some((&flag, rest)) = out.split_first() else {
            panic!("a gRPC answer without its message")
        };
        let (len, message) = rest.split_at(4);
        assert_eq!(
            u32::from_be_bytes([len[0], len[1], len[2], len[3]]) as usize,
            message.len(),
            "one whole envelope"
        );
        (flag == 1, message.to_vec())
    } else {
        (encoding.is_some_and(|e| e != Encoding::Identity), out)
    };
    let plain = match encoding.filter(|_| compressed) {
        None | Some(Encoding::Identity) => message,
        Some(enc) => {
            let mut plain = Vec::new();
            decompress(enc, &message, usize::MAX, &mut plain).expect("our own stream decodes");
            plain
        }
    };
    assert!(plain == answer, "the proto answer arrives as the shim sent it");
});
