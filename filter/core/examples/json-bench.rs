//! Protobuf → protojson throughput of an `ExecuteResponse` shaped like the benchmark's
//! large SELECT (10,000 rows × 11 columns, ~27.5 MB), natively or inside wasm:
//!
//! ```text
//! cargo run --release -p ferry-filter-core --example json-bench [ROWS]
//! cargo build --release -p ferry-filter-core --example json-bench --target wasm32-wasip1
//! node --no-warnings -e "..."   # any WASI host; V8 is Envoy's engine
//! ```
//!
//! Prints ms per conversion for the pbjson path (`json::from_proto`), the transcoder
//! on the whole body, and the transcoder fed 64 KiB chunks (as Envoy hands them over);
//! then the same two for the shim's streamed form of the same answer (a `result` per
//! ~64 KiB of rows, merged by the transcoder).

use std::time::Instant;

use ferry_filter_core::codec::json::from_proto;
use ferry_filter_core::codec::json_stream::{execute_to_json, Transcoder};
use ferry_proto::psdb::v1alpha1::ExecuteResponse;
use ferry_proto::vitess::query::{QueryResult, Row};
use prost::Message;

fn answer(rows: usize) -> Vec<u8> {
    message(rows).encode_to_vec()
}

/// The shim's streamed form: a head `result`, one `result` per ~64 KiB of rows, then
/// timing.
fn streamed_answer(rows: usize) -> Vec<u8> {
    let whole = message(rows);
    let mut out = Vec::new();
    let result = |out: &mut Vec<u8>, r: QueryResult| {
        ExecuteResponse {
            result: Some(r),
            ..Default::default()
        }
        .encode(out)
    };
    let mut chunk = QueryResult::default();
    let all = whole.result.unwrap_or_default();
    result(&mut out, QueryResult::default()).unwrap();
    for row in all.rows {
        chunk.rows.push(row);
        if chunk.encoded_len() >= 64 << 10 {
            result(&mut out, std::mem::take(&mut chunk)).unwrap();
        }
    }
    if !chunk.rows.is_empty() {
        result(&mut out, chunk).unwrap();
    }
    ExecuteResponse {
        timing: whole.timing,
        ..Default::default()
    }
    .encode(&mut out)
    .unwrap();
    out
}

fn message(rows: usize) -> ExecuteResponse {
    let mut result = QueryResult::default();
    for i in 0..rows {
        let mut row = Row::default();
        for c in 0..11 {
            let value = format!("{i}-{c}:{}", "lorem ipsum dolor sit amet ".repeat(9));
            row.lengths.push(value.len() as i64);
            row.values.extend_from_slice(value.as_bytes());
        }
        result.rows.push(row);
    }
    ExecuteResponse {
        result: Some(result),
        timing: 0.01,
        ..Default::default()
    }
}

fn time(name: &str, bytes: usize, mut f: impl FnMut() -> usize) {
    let mut best = f64::MAX;
    let mut out = 0;
    for _ in 0..5 {
        let t = Instant::now();
        out = f();
        best = best.min(t.elapsed().as_secs_f64());
    }
    println!(
        "{name:<22} {:8.1} ms  {:7.0} MB/s of proto  ({out} bytes of JSON)",
        best * 1e3,
        bytes as f64 / best / 1e6
    );
}

fn main() {
    let rows = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10_000);
    let proto = answer(rows);
    println!("{rows} rows, {} bytes of protobuf", proto.len());
    time("pbjson (from_proto)", proto.len(), || {
        let mut out = Vec::new();
        from_proto::<ExecuteResponse>(&proto, &mut out, usize::MAX).unwrap();
        out.len()
    });
    time("transcoder, whole", proto.len(), || {
        let mut out = Vec::new();
        execute_to_json(&proto, &mut out, usize::MAX).unwrap();
        out.len()
    });
    time("transcoder, 64 KiB", proto.len(), || chunked(&proto));
    let streamed = streamed_answer(rows);
    println!("streamed form: {} bytes of protobuf", streamed.len());
    time("streamed, whole", streamed.len(), || {
        let mut out = Vec::new();
        execute_to_json(&streamed, &mut out, usize::MAX).unwrap();
        out.len()
    });
    time("streamed, 64 KiB", streamed.len(), || chunked(&streamed));
}

/// The transcoder fed 64 KiB chunks: the JSON's length.
fn chunked(proto: &[u8]) -> usize {
    let mut t = Transcoder::new(usize::MAX);
    let mut total = 0;
    for chunk in proto.chunks(64 << 10) {
        let mut out = Vec::new();
        t.feed(chunk, &mut out).unwrap();
        total += out.len();
    }
    let mut out = Vec::new();
    t.finish(&mut out).unwrap();
    total + out.len()
}
