//! The session decoder the filter runs on untrusted request bytes
//! (`affinity::session`, `route`, `is_pinned`, `pinned_holder`), reading the message
//! through its `read(offset, max)` windows as the filter does. No panic, and:
//! - a message prost decodes as an ExecuteRequest without a session has no session
//!   here; one `session` finds agrees with prost's (repeated fields merged);
//! - a read that fails part-way never yields another session than the whole read;
//! - a route is a pinned session's holder, base64 of an address of safe characters.
#![no_main]

use base64::Engine;
use ferry_filter_core::affinity::{self, header_value, is_pinned, pinned_holder};
use ferry_proto::psdb::v1alpha1::ExecuteRequest;
use libfuzzer_sys::fuzz_target;
use prost::Message;

fn reader(
    message: &[u8],
    fail_after: Option<usize>,
) -> impl FnMut(usize, usize) -> Option<Vec<u8>> + '_ {
    let mut calls = 0;
    move |offset, max| {
        calls += 1;
        if fail_after.is_some_and(|n| calls > n) {
            return None;
        }
        let end = offset.saturating_add(max).min(message.len());
        message.get(offset..end).map(<[u8]>::to_vec)
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, message)) = data.split_first() else {
        return;
    };
    let len = message.len();
    let session = affinity::session(reader(message, None), len);
    if let Ok(request) = ExecuteRequest::decode(message) {
        match (&request.session, &session) {
            (None, Some(s)) => panic!("a session prost does not see: {s:?}"),
            (Some(a), Some(b)) => assert_eq!(a, b),
            // Groups (not in these messages) end the walk: no affinity.
            _ => {}
        }
    }
    // Reads that fail after a few windows.
    let partial = affinity::session(reader(message, Some(usize::from(selector & 7))), len);
    if partial.is_some() {
        assert_eq!(partial, session);
    }

    let route = affinity::route(reader(message, None), len);
    let pinned_sig = session.as_ref().map(|s| s.signature.as_slice());
    match route {
        Some(value) => {
            let signature = pinned_sig.expect("a route without a session");
            assert!(is_pinned(signature));
            let holder = pinned_holder(signature).expect("a route without a holder");
            assert_eq!(value, header_value(holder));
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(&value)
                .unwrap();
            assert_eq!(decoded, holder.as_bytes());
            assert!(!holder.is_empty());
            assert!(holder
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b".:[]-_%".contains(&b)));
        }
        None => {
            if let Some(sig) = pinned_sig {
                assert!(pinned_holder(sig).is_none());
            }
        }
    }

    // The signature parsers on the raw bytes too.
    if let Some(holder) = pinned_holder(message) {
        assert!(is_pinned(message));
        assert!(message.len() >= holder.len() + 32);
    }
    if is_pinned(message) {
        assert_eq!(message.first(), Some(&1));
    }
});
