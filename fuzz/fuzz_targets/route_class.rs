//! The route class the filter gives a request from its untrusted canonical message
//! (`route_class::of_execute`, `of_batch`, `of_request`), and the early-data checks
//! built on the same rules (filter/core/src/early_data.rs is a private module; its
//! `execute` is `in_transaction` + `is_pinned` + `replay_safe`, all public, and its
//! `execute_batch` is `of_batch == Read`). No panic, and:
//! - `of_request` through the reader agrees with `of_message` on the whole message;
//! - Read means: it decodes, outside a transaction, not pinned, every statement
//!   replay-safe and Clean; Session means it decodes; an undecodable message is Write.
//! (It found an empty pipeline batch classed Read whatever its session: fixed in
//! route_class.rs, asserted here since.)
#![no_main]

use ferry_filter_core::affinity::is_pinned;
use ferry_filter_core::route_class::{
    in_transaction, of_batch, of_execute, of_message, of_request, Class,
};
use ferry_proto::ferry::v1alpha1::{BatchMode, ExecuteBatchRequest};
use ferry_proto::psdb::v1alpha1::{ExecuteRequest, Session};
use ferry_wire::replay::replay_safe;
use ferry_wire::statement::{classify, Verdict};
use libfuzzer_sys::fuzz_target;
use prost::Message;

const RPCS: &[&str] = &[
    "Execute",
    "StreamExecute",
    "ExecuteBatch",
    "Prepare",
    "CloseSession",
];

fn outside(session: Option<&Session>) -> bool {
    !in_transaction(session) && !session.is_some_and(|s| is_pinned(&s.signature))
}

fn read_statement(query: &str) -> bool {
    replay_safe(query) && classify(query) == Verdict::Clean
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, message)) = data.split_first() else {
        return;
    };
    let rpc = RPCS[usize::from(selector) % RPCS.len()];
    let read = |offset: usize, max: usize| {
        let end = offset.saturating_add(max).min(message.len());
        message.get(offset..end).map(<[u8]>::to_vec)
    };
    let class = of_request(rpc, read, message.len());
    if matches!(rpc, "Execute" | "StreamExecute" | "ExecuteBatch") {
        assert_eq!(class, of_message(rpc, message));
    } else {
        assert_eq!(class, Class::Write);
    }

    let execute = of_execute(message);
    match ExecuteRequest::decode(message) {
        Ok(request) => {
            let session = request.session.as_ref();
            let want = if !outside(session) || classify(&request.query) != Verdict::Clean {
                Class::Session
            } else if replay_safe(&request.query) {
                Class::Read
            } else {
                Class::Write
            };
            assert_eq!(execute, want);
            // early_data::execute accepts exactly a replay-safe read outside.
            let early_ok = outside(session) && replay_safe(&request.query);
            if execute == Class::Read {
                assert!(early_ok);
            }
        }
        Err(_) => assert_eq!(execute, Class::Write),
    }

    let batch = of_batch(message);
    match ExecuteBatchRequest::decode(message) {
        Ok(request) => {
            let pipeline = request.mode == BatchMode::Pipeline as i32;
            if batch == Class::Read {
                assert!(outside(request.session.as_ref()));
                assert!(request.statements.iter().all(|s| read_statement(&s.query)));
                assert!(!request.statements.is_empty());
                if !pipeline {
                    assert!(request.transaction.is_some_and(|t| t.read_only));
                }
            }
        }
        Err(_) => assert_eq!(batch, Class::Write),
    }
});
