//! Without the header hold (`header_hold.rs`: Envoy without
//! `allow_on_headers_stop_iteration`, or `header_hold: "off"`) no headers callback
//! waits: requests go on at once as `write`, answers name their encoding from the
//! headers alone. While the hold is unknown, requests may hold (probes), answers not.

use super::compression::{compressed, large_answer, received, with_encoding};
use super::*;
use crate::header_hold::Hold;
use ferry_compress::Encoding;

fn exchange_with(hold: Hold, affinity: bool) -> Exchange {
    Exchange::new(std::rc::Rc::new(Config {
        limits: Limits {
            max_request_bytes: 1000,
            max_response_bytes: 1 << 20,
        },
        session_affinity: affinity,
        ..Config::default()
    }))
    .with_hold(hold)
}

const EVERY_FORM: &[(&str, &str)] = &[
    (EXECUTE, "application/json"),
    (EXECUTE, "application/proto"),
    (EXECUTE, "application/grpc"),
    (EXECUTE, "application/grpc+json"),
    (STREAM_EXECUTE, "application/connect+json"),
    (STREAM_EXECUTE, "application/grpc"),
    (CLOSE_SESSION, "application/json"),
    ("/psdb.v1alpha1.Database/Prepare", "application/proto"),
    (CREATE_SESSION, "application/json"),
];

#[test]
fn without_the_hold_no_request_waits_and_each_goes_as_write() {
    for &(path, content_type) in EVERY_FORM {
        let mut ex = exchange_with(Hold::Missing, true);
        let step = ex.on_request_headers(&head(path, content_type), false);
        let RequestHeadersStep::Forward(edits) = step else {
            panic!("{path} {content_type}: {step:?}")
        };
        assert_eq!(edits.get(route_class::HEADER), Some("write"), "{path}");
        assert!(!ex.request_held());
        // The body is still checked and converted, and never routes anything.
        match ex.on_request_body(2, true) {
            RequestBodyStep::Continue => assert_eq!(content_type, "application/proto"),
            RequestBodyStep::Read => {}
            RequestBodyStep::Reply(reply) => assert_ne!(reply.status, 200, "{reply:?}"),
            other => panic!("{path} {content_type}: {other:?}"),
        }
        assert!(ex.route_request(|_, _| None, 0).is_empty());
    }
}

#[test]
fn with_the_hold_known_or_unknown_session_requests_wait_for_their_body() {
    for hold in [Hold::Works, Hold::Unknown] {
        let mut ex = exchange_with(hold, true);
        let step = ex.on_request_headers(&head(EXECUTE, "application/json"), false);
        assert!(matches!(step, RequestHeadersStep::Hold(_)), "{hold:?}");
        assert!(ex.request_held());
        let mut ex = exchange_with(hold, true);
        let step = ex.on_request_headers(&head(CREATE_SESSION, "application/json"), false);
        assert!(matches!(step, RequestHeadersStep::Forward(_)), "{hold:?}");
    }
}

#[test]
fn headers_the_host_released_are_never_edited_again() {
    let mut ex = exchange_with(Hold::Unknown, true);
    let request = ExecuteRequest {
        query: "SELECT 1".into(),
        ..Default::default()
    }
    .encode_to_vec();
    assert!(matches!(
        ex.on_request_headers(&head(EXECUTE, "application/proto"), false),
        RequestHeadersStep::Hold(_)
    ));
    ex.release_request_headers();
    assert!(!ex.request_held());
    // What Envoy buffered meanwhile comes in one callback, and the rest streams.
    let (first, rest) = request.split_at(4);
    assert_eq!(
        ex.on_request_body(first.len(), false),
        RequestBodyStep::Continue
    );
    assert_eq!(
        ex.on_request_body(rest.len(), true),
        RequestBodyStep::Continue
    );
    let len = request.len();
    let edits = ex.route_request(
        |o, m| {
            request
                .get(o..(o + m).min(request.len()))
                .map(<[u8]>::to_vec)
        },
        len,
    );
    assert!(edits.is_empty(), "{edits:?}");
}

/// An exchange whose Execute request (Connect, `content_type`, accepting `accept` from
/// a client of unknown distance) has gone on.
fn answering(hold: Hold, content_type: &str, accept: &str, envoy: Vec<Encoding>) -> Exchange {
    let mut ex = Exchange::new(std::rc::Rc::new(Config {
        limits: Limits {
            max_request_bytes: 1000,
            max_response_bytes: 1 << 20,
        },
        envoy_compression: envoy,
        ..Config::default()
    }))
    .with_hold(hold);
    let request = with_encoding(head(EXECUTE, content_type), "accept-encoding", accept);
    ex.on_request_headers(&request, false);
    if content_type == "application/json" {
        assert_eq!(ex.on_request_body(2, true), RequestBodyStep::Read);
        ex.finish_request(b"{}".to_vec()).unwrap();
    }
    ex
}

#[test]
fn without_the_hold_answers_name_their_encoding_from_the_headers() {
    let answer = large_answer(3000);
    for hold in [Hold::Unknown, Hold::Missing] {
        for (content_type, accept) in [
            ("application/proto", "s2"),
            ("application/proto", "snappy"),
            ("application/proto", "gzip"),
            ("application/json", "s2"),
        ] {
            let enc = Encoding::parse(accept).unwrap();
            let mut ex = answering(hold, content_type, accept, Vec::new());
            let (edits, body, waited) = received(&mut ex, &answer, 10_000);
            assert_eq!(waited, 0, "{hold:?} {content_type} {accept}: no wait");
            assert_eq!(edits.get("content-encoding"), Some(accept));
            let mut plain = Vec::new();
            ferry_compress::decompress(enc, &body, 4 << 20, &mut plain).unwrap();
            if content_type == "application/proto" {
                assert!(plain == answer, "{accept}");
                if enc != Encoding::Gzip {
                    assert!(body == compressed(enc, &answer), "one stream");
                }
            } else {
                let rows = json_of(&plain)["result"]["rows"].as_array().unwrap().len();
                assert_eq!(rows, 3000);
            }
        }
        // Left to Envoy's compressor: not judged, not marked no-transform.
        let mut ex = answering(hold, "application/proto", "zstd", vec![Encoding::Zstd]);
        let (edits, body, waited) = received(&mut ex, &answer, 10_000);
        assert_eq!(waited, 0);
        assert_eq!(edits.get("cache-control"), None, "{edits:?}");
        assert_eq!(edits.get("content-encoding"), None);
        assert!(body == answer);
    }
    // Known to work: the sample is waited for, as before.
    let mut ex = answering(Hold::Works, "application/proto", "s2", Vec::new());
    let (_, _, waited) = received(&mut ex, &answer, 10_000);
    assert_eq!(waited, 6);
}

#[test]
fn without_the_hold_small_json_answers_go_uncompressed_and_unheld() {
    let mut ex = exchange_with(Hold::Missing, false);
    let request = with_encoding(
        head(CREATE_SESSION, "application/json"),
        "accept-encoding",
        "gzip",
    );
    ex.on_request_headers(&request, false);
    assert_eq!(ex.on_request_body(2, true), RequestBodyStep::Read);
    ex.finish_request(b"{}".to_vec()).unwrap();
    let step = ex.on_response_headers(&response("200", "application/proto"), false);
    let ResponseHeadersStep::Forward(edits) = step else {
        panic!("{step:?}")
    };
    assert_eq!(edits.get("content-encoding"), None);
}
