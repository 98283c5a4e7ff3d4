//! A StreamExecute answer from the shim, as arbitrary bytes cut into arbitrary chunks,
//! through the real exchange to a gRPC or Connect streaming client (JSON or proto,
//! compressed or not). No panic, and what goes to the client is always whole
//! envelopes.
#![no_main]

use std::rc::Rc;

use ferry_filter_core::config::Config;
use ferry_filter_core::envelope::{Decoder, EnvelopeError};
use ferry_filter_core::exchange::{
    BodyEdit, Exchange, RequestBodyStep, RequestHead, ResponseBodyStep, ResponseHead,
};
use libfuzzer_sys::fuzz_target;

const CLIENTS: &[(&str, &str, &[u8])] = &[
    ("application/grpc", "grpc-accept-encoding", &[0, 0, 0, 0, 0]),
    ("application/grpc+json", "grpc-accept-encoding", &[0, 0, 0, 0, 2, b'{', b'}']),
    ("application/connect+proto", "connect-accept-encoding", &[0, 0, 0, 0, 0]),
    ("application/connect+json", "connect-accept-encoding", &[0, 0, 0, 0, 2, b'{', b'}']),
];

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let (cuts, stream) = rest.split_at(rest.len().min(4));
    let (content_type, accept, request) = CLIENTS[usize::from(selector & 3)];
    let accept_value = ["identity", "gzip", "s2", "snappy"][usize::from(selector >> 2) % 4];
    let head = RequestHead {
        method: Some("POST".into()),
        path: Some("/psdb.v1alpha1.Database/StreamExecute".into()),
        content_type: Some(content_type.into()),
        authorization: Some("Basic dXNlcjpwYXNz".into()),
        encodings: vec![(accept, accept_value.into())],
        ..RequestHead::default()
    };
    let mut exchange = Exchange::new(Rc::new(Config::default()));
    exchange.on_request_headers(&head, false);
    assert_eq!(exchange.on_request_body(request.len(), true), RequestBodyStep::Read);
    exchange.finish_request(request.to_vec()).ok();
    let response = ResponseHead {
        status: Some("200".into()),
        content_type: Some("application/connect+proto".into()),
        shim_instance: Some("0123456789abcdef".into()),
        ..ResponseHead::default()
    };
    exchange.on_response_headers(&response, false);
    let mut out = Vec::new();
    let mut rest = stream;
    let mut cuts = cuts.iter().cycle();
    loop {
        let n = usize::from(*cuts.next().unwrap_or(&64)).max(1).min(rest.len());
        let (chunk, tail) = rest.split_at(n);
        rest = tail;
        let end = rest.is_empty();
        match exchange.on_response_body(chunk.len(), end) {
            ResponseBodyStep::Read(max) => {
                let edit = exchange.finish_response(&chunk[..max.min(chunk.len())]).expect("streams never reset");
                if let BodyEdit::Replace(bytes) = edit.body {
                    out.extend_from_slice(&bytes);
                }
            }
            other => panic!("unexpected step {other:?}"),
        }
        if end {
            break;
        }
    }
    // The client gets whole envelopes only.
    let mut decoder = Decoder::new(usize::MAX);
    decoder.feed::<EnvelopeError>(&out, |_, _| Ok(())).expect("envelopes");
    decoder.finish().expect("no partial envelope");
});
