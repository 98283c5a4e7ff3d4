//! Connect GET (`/psdb.v1alpha1.Database/Execute?connect=v1&encoding=..&message=..`):
//! the query string, decoded by the filter (filter/core/src/connect_get.rs is private;
//! this drives it through the real exchange, as Envoy does). The input is the query
//! string (the first byte picks the path). No panic, and a GET that is accepted
//! becomes a POST whose injected message is a canonical ExecuteRequest with one
//! replay-safe statement outside a transaction or session state, labelled with its
//! route class (never write).
#![no_main]

use std::rc::Rc;

use ferry_filter_core::affinity::is_pinned;
use ferry_filter_core::config::Config;
use ferry_filter_core::exchange::{Exchange, RequestBodyStep, RequestHead, RequestHeadersStep};
use ferry_filter_core::route_class::{self, in_transaction};
use ferry_proto::psdb::v1alpha1::ExecuteRequest;
use ferry_wire::replay::replay_safe;
use libfuzzer_sys::fuzz_target;
use prost::Message;

const PATHS: &[&str] = &[
    "/psdb.v1alpha1.Database/Execute",
    "/psdb.v1alpha1.Database/StreamExecute",
];

fuzz_target!(|data: &[u8]| {
    let Some((&selector, query)) = data.split_first() else {
        return;
    };
    let path = PATHS[usize::from(selector & 1)];
    let query = String::from_utf8_lossy(query);
    let head = RequestHead {
        method: Some("GET".into()),
        path: Some(format!("{path}?{query}")),
        authorization: Some("Basic dXNlcjpwYXNz".into()),
        ..RequestHead::default()
    };
    let mut exchange = Exchange::new(Rc::new(Config::default()));
    let edits = match exchange.on_request_headers(&head, selector & 2 != 0) {
        RequestHeadersStep::Forward(edits) | RequestHeadersStep::Hold(edits) => edits,
        RequestHeadersStep::Reply(_) => return,
    };
    assert_eq!(path, PATHS[0], "GET accepted for {path}");
    let get = |name: &str| {
        edits
            .set
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.clone())
    };
    assert_eq!(get(":method").as_deref(), Some("POST"));
    assert_eq!(get(":path").as_deref(), Some(path));
    let class = get(route_class::HEADER).expect("a route class");
    assert_ne!(class, "write");
    let RequestBodyStep::Replace(message) = exchange.on_request_body(0, true) else {
        panic!("no message injected");
    };
    let request = ExecuteRequest::decode(message.as_slice()).expect("a canonical ExecuteRequest");
    let session = request.session.as_ref();
    assert!(!in_transaction(session));
    assert!(!session.is_some_and(|s| is_pinned(&s.signature)));
    assert!(replay_safe(&request.query), "{:?}", request.query);
    assert_eq!(class, route_class::of_execute(&message).as_str());
});
