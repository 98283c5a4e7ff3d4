//! Requests that arrive in TLS early data (HTTP/3 0-RTT, replayable by an attacker),
//! through the real exchange: Execute and ExecuteBatch with an `early-data` header, any
//! body in a served protocol (filter/core/src/early_data.rs is private; this is how the
//! filter runs it). No panic, and a request the exchange accepts in early data is:
//! - for Execute, one replay-safe statement outside a transaction and not pinned;
//! - for ExecuteBatch, a batch that routes as Read;
//! - accepted the same without the early-data header.
#![no_main]

use std::rc::Rc;

use ferry_filter_core::affinity::is_pinned;
use ferry_filter_core::config::Config;
use ferry_filter_core::exchange::{Exchange, RequestBodyStep, RequestHead, RequestHeadersStep};
use ferry_filter_core::route_class::{in_transaction, of_batch, Class};
use ferry_proto::psdb::v1alpha1::ExecuteRequest;
use ferry_wire::replay::replay_safe;
use libfuzzer_sys::fuzz_target;
use prost::Message;

const CLIENTS: &[(&str, &str)] = &[
    ("application/proto", "/psdb.v1alpha1.Database/Execute"),
    ("application/json", "/psdb.v1alpha1.Database/Execute"),
    ("application/grpc", "/psdb.v1alpha1.Database/Execute"),
    ("application/proto", "/psdb.v1alpha1.Database/ExecuteBatch"),
    ("application/json", "/psdb.v1alpha1.Database/ExecuteBatch"),
    ("application/grpc", "/psdb.v1alpha1.Database/ExecuteBatch"),
];

/// The canonical message if the exchange accepts the request (None: refused).
fn run(content_type: &str, path: &str, early: bool, body: &[u8]) -> Option<Vec<u8>> {
    let head = RequestHead {
        method: Some("POST".into()),
        path: Some(path.into()),
        content_type: Some(content_type.into()),
        authorization: Some("Basic dXNlcjpwYXNz".into()),
        early_data: early.then(|| "1".into()),
        ..RequestHead::default()
    };
    let mut exchange = Exchange::new(Rc::new(Config::default()));
    match exchange.on_request_headers(&head, false) {
        RequestHeadersStep::Forward(_) | RequestHeadersStep::Hold(_) => {}
        RequestHeadersStep::Reply(_) => return None,
    }
    match exchange.on_request_body(body.len(), true) {
        RequestBodyStep::Read => exchange
            .finish_request(body.to_vec())
            .ok()
            .map(|p| p.as_slice().to_vec()),
        RequestBodyStep::Reply(_) => None,
        // The body goes on as it is (already canonical): never unchecked in early data.
        RequestBodyStep::Route(_) | RequestBodyStep::Continue if !early => Some(body.to_vec()),
        other => panic!("unexpected step {other:?} (early data: {early})"),
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, body)) = data.split_first() else {
        return;
    };
    let (content_type, path) = CLIENTS[usize::from(selector) % CLIENTS.len()];
    let Some(message) = run(content_type, path, true, body) else {
        return;
    };
    assert!(
        run(content_type, path, false, body).is_some(),
        "accepted only in early data"
    );
    if path.ends_with("/Execute") {
        let request =
            ExecuteRequest::decode(message.as_slice()).expect("an accepted Execute decodes");
        let session = request.session.as_ref();
        assert!(!in_transaction(session), "early data inside a transaction");
        assert!(
            !session.is_some_and(|s| is_pinned(&s.signature)),
            "early data, pinned session"
        );
        assert!(
            replay_safe(&request.query),
            "early data, not replay-safe: {:?}",
            request.query
        );
    } else {
        assert_eq!(of_batch(&message), Class::Read);
    }
});
