//! Compression both ways, every codec × protocol × transport, against the real stack:
//! compressed requests are understood, answers come back compressed with what the
//! client accepts when it pays (and as identity when it does not), results are
//! byte-exact, and decompression bombs are refused at the limit while the stack
//! keeps serving.
mod common;

use common::{cfg, execute, tcp_gateway, Way};
use ferry_compress::Encoding;
use ferry_e2e::connect::EXECUTE;
use ferry_e2e::framed::{Outcome, Protocol, Shape, Transport, STREAM_EXECUTE};
use ferry_proto::psdb::v1alpha1::{ExecuteRequest, ExecuteResponse};
use prost::Message;

const CODECS: [Encoding; 4] = [
    Encoding::Gzip,
    Encoding::Zstd,
    Encoding::Snappy,
    Encoding::S2,
];

/// ~60 KB of compressible rows (repeated text with a counter).
const TEXT_ROWS: &str =
    "WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < 300) \
     SELECT n, REPEAT(CONCAT('row ', n, ' of a compressible answer; '), 6) AS t FROM s";

/// ~200 KB of random bytes: compression does not pay.
const NOISE_ROWS: &str =
    "WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < 200) \
     SELECT n, RANDOM_BYTES(1024) AS b FROM s";

fn request(query: &str, json: bool) -> Vec<u8> {
    if json {
        serde_json::json!({ "query": query })
            .to_string()
            .into_bytes()
    } else {
        ExecuteRequest {
            query: query.into(),
            ..Default::default()
        }
        .encode_to_vec()
    }
}

/// Every row of an outcome's messages (fields from the first), as text cells.
fn rows(outcome: &Outcome, json: bool) -> Vec<Vec<Option<Vec<u8>>>> {
    let mut rows = Vec::new();
    for (_, message) in &outcome.messages {
        let response: ExecuteResponse = if json {
            serde_json::from_slice(message).expect("protojson ExecuteResponse")
        } else {
            ExecuteResponse::decode(&message[..]).expect("proto ExecuteResponse")
        };
        assert!(response.error.is_none(), "{:?}", response.error);
        if let Some(result) = response.result {
            rows.extend(result.rows.iter().map(ferry_e2e::rows::cells));
        }
    }
    rows
}

fn assert_ok(shape: &Shape, outcome: &Outcome) {
    let a = &outcome.answer;
    assert_eq!(
        a.status,
        200,
        "{shape:?}: {:?}",
        String::from_utf8_lossy(&a.body)
    );
    match shape.protocol {
        Protocol::Grpc => assert_eq!(a.grpc_status(), Some((0, String::new())), "{shape:?}"),
        Protocol::ConnectStream => {
            assert_eq!(outcome.end, Some(serde_json::json!({})), "{shape:?}")
        }
        Protocol::ConnectUnary => {}
    }
}

fn shapes(transport: Transport) -> Vec<(Protocol, bool, &'static str)> {
    let mut out = vec![
        (Protocol::ConnectUnary, false, EXECUTE),
        (Protocol::ConnectUnary, true, EXECUTE),
        (Protocol::ConnectStream, false, STREAM_EXECUTE),
        (Protocol::ConnectStream, true, STREAM_EXECUTE),
    ];
    // reqwest gives no trailers: gRPC over HTTP/2 is tonic's (grpc_compression below).
    if transport == Transport::H3 {
        out.push((Protocol::Grpc, false, EXECUTE));
        out.push((Protocol::Grpc, false, STREAM_EXECUTE));
    }
    out
}

/// TEXT_ROWS' cells, as the main gateway answers them uncompressed (Connect proto).
async fn text_rows() -> Vec<Vec<Option<Vec<u8>>>> {
    let r = execute(Way::ConnectProtoH2, TEXT_ROWS).await;
    r.result
        .unwrap()
        .rows
        .iter()
        .map(ferry_e2e::rows::cells)
        .collect()
}

/// The gateway under test has Envoy's zstd compressor for Connect unary answers
/// (`FERRY_E2E_ENVOY_ZSTD`, default 1; scripts/e2e-meshes.sh sets 0).
fn envoy_zstd() -> bool {
    std::env::var("FERRY_E2E_ENVOY_ZSTD").as_deref() != Ok("0")
}

async fn every_codec_round_trips(transport: Transport) {
    let cfg = cfg();
    let reference = text_rows().await;
    assert_eq!(reference.len(), 300);
    for codec in CODECS {
        for (protocol, json, path) in shapes(transport) {
            let shape = Shape {
                protocol,
                json,
                transport,
                send: codec,
                accept: Some(codec.name()),
            };
            let outcome = shape.call(&cfg, path, &request(TEXT_ROWS, json)).await;
            assert_ok(&shape, &outcome);
            assert_eq!(
                outcome.encoding.as_deref(),
                Some(codec.name()),
                "{shape:?} {path}"
            );
            // Large messages go compressed; every envelope's flag says which.
            let compressed = outcome.messages.iter().filter(|(f, _)| f & 1 == 1).count();
            if protocol != Protocol::ConnectUnary {
                assert!(compressed >= 1, "{shape:?} {path}: no compressed message");
            }
            // Connect unary zstd is Envoy's compressor's (envoy/ferry.yaml,
            // `compression.envoy`), which adds `vary`; the other codecs are the filter's.
            // The mesh shapes have no Envoy compressor (FERRY_E2E_ENVOY_ZSTD=0): all the
            // filter's.
            if protocol == Protocol::ConnectUnary {
                let by_envoy = codec == Encoding::Zstd && envoy_zstd();
                assert_eq!(
                    outcome.answer.header("vary").is_some(),
                    by_envoy,
                    "{shape:?}: {:?}",
                    outcome.answer.headers
                );
            }
            assert_eq!(rows(&outcome, json), reference, "{shape:?} {path}");
        }
    }
}

#[tokio::test]
async fn every_codec_round_trips_over_http2() {
    every_codec_round_trips(Transport::H2).await;
}

#[tokio::test]
async fn every_codec_round_trips_over_http3() {
    every_codec_round_trips(Transport::H3).await;
}

#[tokio::test]
async fn a_client_on_loopback_gets_identity_answers() {
    // Envoy measures the TCP connection's round trip (0 ms here) and the filter, at
    // the default min_rtt_ms of 5, compresses nothing for it: whatever it accepts,
    // every shape's answer comes back identity (Envoy's zstd told `no-transform`),
    // byte-exact. HTTP/3 carries no measure in Envoy 1.40: there the client's address
    // decides, and loopback is in the default near_networks.
    // The TCP gateway keeps the shipped distance defaults (scripts/e2e.sh sets
    // min_rtt_ms 0 for the others, so their loopback clients get what they ask for).
    let cfg = tcp_gateway();
    let reference = text_rows().await;
    for transport in [Transport::H2, Transport::H3] {
        for codec in CODECS {
            for (protocol, json, path) in shapes(transport) {
                let shape = Shape {
                    protocol,
                    json,
                    transport,
                    send: codec,
                    accept: Some(codec.name()),
                };
                let outcome = shape.call(&cfg, path, &request(TEXT_ROWS, json)).await;
                assert_ok(&shape, &outcome);
                assert_eq!(rows(&outcome, json), reference, "{shape:?} {path}");
                let compressed = outcome.messages.iter().any(|(f, _)| f & 1 == 1);
                assert_eq!(outcome.encoding, None, "{shape:?} {path}");
                assert!(!compressed, "{shape:?} {path}");
                if protocol == Protocol::ConnectUnary {
                    let envoys = codec == Encoding::Zstd;
                    assert_eq!(
                        outcome.answer.header("cache-control"),
                        envoys.then_some("no-transform"),
                        "{shape:?}"
                    );
                }
            }
        }
    }
    // A client cannot claim to be far: Envoy replaces its x-ferry-client-rtt-ms and
    // x-ferry-client-addr, over TCP and QUIC.
    let auth = cfg.basic_auth();
    let headers = [
        ("authorization", auth.as_str()),
        ("content-type", "application/proto"),
        ("accept-encoding", "s2"),
        ("x-ferry-client-rtt-ms", "500"),
        ("x-ferry-client-addr", "192.0.2.1"),
    ];
    let body = request(TEXT_ROWS, false);
    let client = ferry_e2e::connect::ConnectClient::http2(&cfg);
    let over_h2 = client.post(EXECUTE, &headers, body.clone()).await;
    let mut h3 = ferry_e2e::h3_client::H3Client::connect(&cfg).await.unwrap();
    let over_h3 = h3.post(EXECUTE, &headers, body.into()).await.unwrap();
    h3.close().await;
    for answer in [over_h2, over_h3] {
        assert_eq!(answer.status, 200);
        assert_eq!(answer.header("content-encoding"), None);
        let rows = ExecuteResponse::decode(answer.body.as_ref())
            .unwrap()
            .result
            .unwrap()
            .rows;
        assert_eq!(rows.len(), 300);
    }
}

#[tokio::test]
async fn incompressible_answers_go_as_identity() {
    let cfg = cfg();
    for transport in [Transport::H2, Transport::H3] {
        for (protocol, json, path) in shapes(transport) {
            let shape = Shape {
                protocol,
                json,
                transport,
                send: Encoding::Identity,
                accept: Some("zstd, s2"), // s2 is preferred
            };
            let outcome = shape.call(&cfg, path, &request(NOISE_ROWS, json)).await;
            assert_ok(&shape, &outcome);
            if json {
                // Base64 text of random bytes still compresses (to ~3/4): it pays.
                continue;
            }
            match protocol {
                // Connect unary names no encoding at all; zstd is Envoy's to apply
                // (it comes first), and the filter's judgement tells it not to.
                Protocol::ConnectUnary => {
                    assert_eq!(outcome.encoding, None, "{shape:?}");
                    assert_eq!(
                        outcome.answer.header("cache-control"),
                        Some("no-transform"),
                        "{shape:?}"
                    );
                }
                // Enveloped protocols name it, and send each message flagged identity.
                _ => {
                    assert_eq!(outcome.encoding.as_deref(), Some("s2"), "{shape:?}");
                    assert!(
                        outcome.messages.iter().all(|(f, _)| f & 1 == 0),
                        "{shape:?} {path}: compressed an incompressible message"
                    );
                }
            }
            assert_eq!(rows(&outcome, json).len(), 200, "{shape:?} {path}");
        }
    }
}

#[tokio::test]
async fn grpc_compression_with_tonic() {
    // The real gRPC client: tonic compresses its request and accepts gzip and zstd.
    let cfg = cfg();
    for codec in [
        tonic::codec::CompressionEncoding::Gzip,
        tonic::codec::CompressionEncoding::Zstd,
    ] {
        let channel = ferry_e2e::grpc::channel(&cfg).await;
        let mut grpc = tonic::client::Grpc::new(channel)
            .send_compressed(codec)
            .accept_compressed(codec);
        grpc.ready().await.unwrap();
        let mut req = tonic::Request::new(ExecuteRequest {
            query: TEXT_ROWS.into(),
            ..Default::default()
        });
        req.metadata_mut()
            .insert("authorization", cfg.basic_auth().parse().unwrap());
        let codec_impl = tonic_prost::ProstCodec::<ExecuteRequest, ExecuteResponse>::default();
        let response = grpc
            .unary(
                req,
                http::uri::PathAndQuery::from_static(EXECUTE),
                codec_impl,
            )
            .await
            .unwrap_or_else(|s| panic!("{codec:?}: {s:?}"));
        let encoding = response
            .metadata()
            .get("grpc-encoding")
            .map(|v| v.to_str().unwrap().to_owned());
        assert_eq!(encoding.as_deref(), Some(codec.to_string().as_str()));
        let result = response.into_inner().result.unwrap();
        assert_eq!(result.rows.len(), 300);
    }
}

#[tokio::test]
async fn bombs_are_refused_at_the_limit_and_the_stack_keeps_serving() {
    let cfg = cfg();
    // 64 MiB of one byte: far past the 8 MiB request limit once inflated.
    let mut message = ExecuteRequest {
        query: "SELECT 1".into(),
        ..Default::default()
    }
    .encode_to_vec();
    message.extend(std::iter::repeat_n(0u8, 64 << 20));
    for codec in CODECS {
        for (protocol, path) in [
            (Protocol::ConnectUnary, EXECUTE),
            (Protocol::ConnectStream, STREAM_EXECUTE),
            (Protocol::Grpc, EXECUTE),
        ] {
            let shape = Shape {
                protocol,
                json: false,
                transport: Transport::H3,
                send: codec,
                accept: None,
            };
            let sent = shape.body(&message).len();
            let started = std::time::Instant::now();
            let outcome = shape.call(&cfg, path, &message).await;
            let a = &outcome.answer;
            let limit = "8388608-byte limit";
            match protocol {
                Protocol::ConnectUnary => {
                    assert_eq!(a.status, 429, "{codec:?}");
                    let json = a.json();
                    assert_eq!(json["code"], "resource_exhausted");
                    assert!(json["message"].as_str().unwrap().contains(limit), "{json}");
                }
                Protocol::ConnectStream => {
                    let end = outcome.end.expect("an end message");
                    assert_eq!(end["error"]["code"], "resource_exhausted", "{codec:?}");
                }
                Protocol::Grpc => {
                    let (status, message) = a.grpc_status().unwrap();
                    assert_eq!(status, 8, "{codec:?}: {message}");
                    assert!(message.contains(limit), "{message}");
                }
            }
            eprintln!(
                "{codec:?} bomb over {protocol:?}: {sent} bytes sent, refused in {:?}",
                started.elapsed()
            );
        }
    }
    // Still serving.
    let r = execute(Way::GrpcH3, "SELECT 1").await;
    assert_eq!(r.result.unwrap().rows.len(), 1);
}
