//! Codec throughput on MySQL-result-like bodies, natively or inside wasm:
//!
//! ```text
//! cargo run --release -p ferry-compress --bin codec-bench [MiB]
//! cargo build --release -p ferry-compress --bin codec-bench --target wasm32-wasip1
//! wasmtime target/wasm32-wasip1/release/codec-bench.wasm [MiB]
//! ```
//!
//! Bodies: `proto` (vitess `QueryResult` rows as protobuf: packed zigzag lengths and
//! concatenated column text, as the shim sends them), `json` (the same rows as
//! protojson, values base64 as protojson writes bytes), `random`. Each codec
//! compresses and decompresses the whole body (default 10 MiB) and 16 KiB messages;
//! MB/s are of uncompressed bytes (1 MB = 10^6 bytes). `BENCH_MS` sets the time
//! per measurement (default 1500); `BENCH_DUMP=dir` also writes the bodies there.

use std::time::{Duration, Instant};

use ferry_compress::{compress_level, decompress, Encoding, Level};

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// The columns of one row of an orders-like table.
fn row_columns(i: u64) -> Vec<Option<String>> {
    let statuses = ["pending", "shipped", "delivered", "cancelled", "returned"];
    let cities = [
        "Lisbon", "Porto", "Berlin", "Paris", "Madrid", "Austin", "Osaka",
    ];
    let h = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 20;
    vec![
        Some(format!("{}", 100_000 + i)),
        Some(format!("{}", 1 + h % 50_000)),
        Some(format!("customer{}@example.com", h % 50_000)),
        Some(format!("{}.{:02}", h % 10_000, h % 100)),
        Some(statuses[(h % 5) as usize].to_string()),
        Some(cities[(h % 7) as usize].to_string()),
        Some(format!(
            "2024-{:02}-{:02} {:02}:{:02}:{:02}",
            1 + h % 12,
            1 + h % 28,
            h % 24,
            h % 60,
            (h >> 8) % 60
        )),
        if h.is_multiple_of(3) {
            None
        } else {
            Some(format!("note {} for order {}", h % 977, i))
        },
    ]
}

fn base64(data: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s = String::with_capacity(data.len().div_ceil(3) * 4);
    for c in data.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for k in 0..4 {
            if k <= c.len() {
                s.push(A[((n >> (18 - 6 * k)) & 63) as usize] as char);
            } else {
                s.push('=');
            }
        }
    }
    s
}

/// `QueryResult.rows` (field 4) as protobuf, `size` bytes.
fn proto_rows(size: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(size + 256);
    let mut i = 0;
    while out.len() < size {
        let mut lengths = Vec::new();
        let mut values = Vec::new();
        for col in row_columns(i) {
            let len: i64 = col.as_ref().map_or(-1, |c| c.len() as i64);
            varint(&mut lengths, ((len << 1) ^ (len >> 63)) as u64);
            values.extend_from_slice(col.unwrap_or_default().as_bytes());
        }
        let mut row = vec![0x0a];
        varint(&mut row, lengths.len() as u64);
        row.extend(lengths);
        row.push(0x12);
        varint(&mut row, values.len() as u64);
        row.extend(values);
        out.push(0x22);
        varint(&mut out, row.len() as u64);
        out.extend(row);
        i += 1;
    }
    out.truncate(size);
    out
}

/// The same rows as protojson (`{"rows":[{"lengths":["6",...],"values":"..."}]}`).
fn json_rows(size: usize) -> Vec<u8> {
    let mut out = String::from("{\"rows\":[");
    let mut i = 0;
    while out.len() < size {
        let cols = row_columns(i);
        let lengths: Vec<String> = cols
            .iter()
            .map(|c| format!("\"{}\"", c.as_ref().map_or(-1, |c| c.len() as i64)))
            .collect();
        let values: Vec<u8> = cols
            .into_iter()
            .flatten()
            .flat_map(String::into_bytes)
            .collect();
        if i > 0 {
            out.push(',');
        }
        out.push_str(&format!(
            "{{\"lengths\":[{}],\"values\":\"{}\"}}",
            lengths.join(","),
            base64(&values)
        ));
        i += 1;
    }
    let mut out = out.into_bytes();
    out.truncate(size);
    out
}

fn random(size: usize) -> Vec<u8> {
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    (0..size)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// Runs `f` repeatedly for about `budget` (at least once); the seconds per run.
fn time(budget: Duration, mut f: impl FnMut()) -> f64 {
    let start = Instant::now();
    let mut runs = 0u32;
    while runs == 0 || start.elapsed() < budget {
        f();
        runs += 1;
    }
    start.elapsed().as_secs_f64() / f64::from(runs)
}

fn main() {
    let mib: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10);
    let size = mib << 20;
    let budget = Duration::from_millis(
        std::env::var("BENCH_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(1500),
    );
    let codecs = [
        ("gzip-1", Encoding::Gzip, Level::Fastest),
        ("gzip-6", Encoding::Gzip, Level::Default),
        ("zstd", Encoding::Zstd, Level::Fastest),
        ("snappy", Encoding::Snappy, Level::Fastest),
        ("s2", Encoding::S2, Level::Fastest),
    ];
    println!(
        "{:<7} {:<7} {:>7} {:>10} {:>10} {:>11} {:>11}",
        "body", "codec", "ratio", "comp MB/s", "dec MB/s", "16K comp", "16K dec"
    );
    for (kind, body) in [
        ("proto", proto_rows(size)),
        ("json", json_rows(size)),
        ("random", random(size)),
    ] {
        if let Ok(dir) = std::env::var("BENCH_DUMP") {
            std::fs::write(format!("{dir}/{kind}.bin"), &body).expect("dump");
        }
        let small = &body[..16 << 10];
        for (name, enc, level) in codecs {
            let mut packed = Vec::new();
            let c = time(budget, || {
                packed.clear();
                compress_level(enc, level, &body, &mut packed);
            });
            let mut out = Vec::new();
            let d = time(budget, || {
                out.clear();
                decompress(enc, &packed, body.len(), &mut out).expect("decodes");
            });
            assert!(out == body);
            let mut small_packed = Vec::new();
            let sc = time(budget / 3, || {
                small_packed.clear();
                compress_level(enc, level, small, &mut small_packed);
            });
            let sd = time(budget / 3, || {
                out.clear();
                decompress(enc, &small_packed, small.len(), &mut out).expect("decodes");
            });
            let mbs = |bytes: usize, secs: f64| bytes as f64 / secs / 1e6;
            println!(
                "{kind:<7} {name:<7} {:>7.3} {:>10.1} {:>10.1} {:>11.1} {:>11.1}",
                packed.len() as f64 / body.len() as f64,
                mbs(body.len(), c),
                mbs(body.len(), d),
                mbs(small.len(), sc),
                mbs(small.len(), sd),
            );
        }
    }
}
