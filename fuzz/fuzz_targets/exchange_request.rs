//! Request decoding as the filter does it: any body, in any served protocol and codec,
//! compressed with any codec, through the real exchange. No panic; a request that is
//! accepted is a valid canonical (protobuf) ExecuteRequest.
#![no_main]

use std::rc::Rc;

use ferry_filter_core::config::Config;
use ferry_filter_core::exchange::{Exchange, RequestBodyStep, RequestHead, RequestHeadersStep};
use ferry_proto::psdb::v1alpha1::ExecuteRequest;
use libfuzzer_sys::fuzz_target;
use prost::Message;

const CONTENT_TYPES: &[(&str, &str, &str)] = &[
    ("application/json", "content-encoding", "/psdb.v1alpha1.Database/Execute"),
    ("application/proto", "content-encoding", "/psdb.v1alpha1.Database/Execute"),
    ("application/grpc", "grpc-encoding", "/psdb.v1alpha1.Database/Execute"),
    ("application/grpc+json", "grpc-encoding", "/psdb.v1alpha1.Database/Execute"),
    ("application/connect+json", "connect-content-encoding", "/psdb.v1alpha1.Database/StreamExecute"),
    ("application/connect+proto", "connect-content-encoding", "/psdb.v1alpha1.Database/StreamExecute"),
    // gRPC-Web the filter serves itself (no grpc_web filter in front of it).
    ("application/grpc-web", "grpc-encoding", "/psdb.v1alpha1.Database/Execute"),
    ("application/grpc-web-text", "grpc-encoding", "/psdb.v1alpha1.Database/Execute"),
];
const ENCODINGS: &[&str] = &["identity", "gzip", "zstd", "snappy", "s2"];

fuzz_target!(|data: &[u8]| {
    let Some((&selector, body)) = data.split_first() else {
        return;
    };
    let (content_type, header, path) = CONTENT_TYPES[usize::from(selector & 0x0f) % CONTENT_TYPES.len()];
    let encoding = ENCODINGS[usize::from(selector >> 4) % ENCODINGS.len()];
    let head = RequestHead {
        method: Some("POST".into()),
        path: Some(path.into()),
        content_type: Some(content_type.into()),
        authorization: Some("Basic dXNlcjpwYXNz".into()),
        encodings: vec![(header, encoding.into())],
        ..RequestHead::default()
    };
    let mut exchange = Exchange::new(Rc::new(Config::default()));
    // Execute and StreamExecute hold their headers (their statement decides the route).
    if !matches!(
        exchange.on_request_headers(&head, false),
        RequestHeadersStep::Forward(_) | RequestHeadersStep::Hold(_)
    ) {
        return;
    }
    match exchange.on_request_body(body.len(), true) {
        RequestBodyStep::Read => {
            if let Ok(payload) = exchange.finish_request(body.to_vec()) {
                let canonical = payload.as_slice();
                // Connect proto is the shim's own form, which the shim checks.
                if !content_type.ends_with("/proto") {
                    assert!(ExecuteRequest::decode(canonical).is_ok());
                }
            }
        }
        RequestBodyStep::Continue | RequestBodyStep::Reply(_) | RequestBodyStep::Route(_) => {}
        other => panic!("unexpected step {other:?}"),
    }
});
