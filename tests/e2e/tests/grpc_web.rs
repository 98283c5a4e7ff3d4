//! gRPC-Web against the real stack, whatever the order of Envoy's filters: on the
//! stack's own gateway Envoy's grpc_web filter (envoy/ferry.yaml) in front of the Ferry
//! filter turns `application/grpc-web[+proto]` and `-text` (base64) into gRPC and the
//! answer back; on the gateways listed in `FERRY_E2E_GRPC_WEB_PORTS` (grpc_web after the
//! Ferry filter, as Istio and Envoy Gateway place it, or absent) the Ferry filter serves
//! gRPC-Web itself. Either way: the status in a trailer frame (flag 0x80) at the end of
//! the body, never in HTTP trailers. Unary and server streaming, binary and text,
//! HTTP/2 and HTTP/3, successes and errors (from the shim, and the filter's own
//! trailers-only answers, which stay in the headers as the gRPC-Web spec allows).
mod common;

use base64::Engine as _;
use bytes::Bytes;
use common::grpc_web_gateways;
use ferry_e2e::config::{basic_auth, Config};
use ferry_e2e::connect::{ConnectClient, EXECUTE};
use ferry_e2e::framed::{Transport, STREAM_EXECUTE};
use ferry_e2e::h3_client::H3Client;
use ferry_e2e::Answer;
use ferry_proto::psdb::v1alpha1::{ExecuteRequest, ExecuteResponse};
use prost::Message;

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

/// How a gRPC-Web client sends and what it asks back.
#[derive(Clone, Copy, Debug)]
struct Web {
    /// The gateway's port.
    port: u16,
    content_type: &'static str,
    /// `accept: application/grpc-web-text`: the answer in base64.
    text_answer: bool,
    transport: Transport,
}

const FORMS: &[(&str, bool)] = &[
    ("application/grpc-web", false),
    ("application/grpc-web+proto", false),
    ("application/grpc-web-text", true),
    ("application/grpc-web-text+proto", true),
    // A text request with a binary answer (no text accept): allowed by the spec.
    ("application/grpc-web-text", false),
];

fn every_web(cfg: &Config) -> Vec<Web> {
    let mut out = Vec::new();
    for transport in [Transport::H2, Transport::H3] {
        for &(content_type, text_answer) in FORMS {
            out.push(Web {
                port: cfg.port,
                content_type,
                text_answer,
                transport,
            });
        }
    }
    out
}

/// A decoded gRPC-Web answer: its messages and its trailer frame (`None`: no trailer
/// frame; a trailers-only answer has its status in the headers).
struct Outcome {
    answer: Answer,
    messages: Vec<Vec<u8>>,
    trailer: Option<Vec<(String, String)>>,
}

impl Outcome {
    fn status(&self) -> (i32, String) {
        let from = |pairs: &[(String, String)], name: &str| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        };
        let (status, message) = match &self.trailer {
            Some(t) => (from(t, "grpc-status"), from(t, "grpc-message")),
            None => (
                self.answer.header("grpc-status").map(str::to_owned),
                self.answer.header("grpc-message").map(str::to_owned),
            ),
        };
        let status = status.expect("a grpc-status").parse().expect("a number");
        (status, message.unwrap_or_default())
    }

    fn responses(&self) -> Vec<ExecuteResponse> {
        self.messages
            .iter()
            .map(|m| ExecuteResponse::decode(m.as_slice()).expect("an ExecuteResponse"))
            .collect()
    }
}

async fn call(web: Web, cfg: &Config, path: &str, auth: Option<&str>, message: &[u8]) -> Outcome {
    assert_eq!(web.port, cfg.port, "a form of this gateway");
    let mut frame = vec![0];
    frame.extend_from_slice(&(message.len() as u32).to_be_bytes());
    frame.extend_from_slice(message);
    let body = if web.content_type.starts_with("application/grpc-web-text") {
        B64.encode(&frame).into_bytes()
    } else {
        frame
    };
    let mut headers = vec![
        ("content-type", web.content_type),
        ("x-grpc-web", "1"),
        ("x-user-agent", "grpc-web-ferry-e2e/1"),
    ];
    if web.text_answer {
        headers.push(("accept", "application/grpc-web-text"));
    }
    if let Some(auth) = auth {
        headers.push(("authorization", auth));
    }
    let answer = match web.transport {
        Transport::H2 => ConnectClient::http2(cfg).post(path, &headers, body).await,
        Transport::H3 => {
            let mut h3 = H3Client::connect(cfg).await.expect("HTTP/3 connection");
            let a = h3
                .post(path, &headers, Bytes::from(body))
                .await
                .expect("HTTP/3 request");
            h3.close().await;
            assert!(
                a.trailers.is_empty(),
                "gRPC-Web has no HTTP trailers: {:?}",
                a.trailers
            );
            a
        }
    };
    assert_eq!(answer.status, 200, "{web:?}: {:?}", answer.body);
    let want_type = if web.text_answer {
        "application/grpc-web-text+proto"
    } else {
        "application/grpc-web+proto"
    };
    assert_eq!(answer.header("content-type"), Some(want_type), "{web:?}");
    let bytes = if web.text_answer {
        // Envoy encodes frame by frame: padded base64 pieces, one after the other.
        let mut out = Vec::new();
        let text = std::str::from_utf8(&answer.body).expect("base64 text");
        let mut rest = text;
        while !rest.is_empty() {
            let end = rest.find('=').map_or(rest.len(), |i| {
                i + rest[i..].bytes().take_while(|&b| b == b'=').count()
            });
            out.extend(B64.decode(&rest[..end]).expect("valid base64"));
            rest = &rest[end..];
        }
        out
    } else {
        answer.body.to_vec()
    };
    let mut messages = Vec::new();
    let mut trailer = None;
    let mut rest = &bytes[..];
    while !rest.is_empty() {
        assert!(
            trailer.is_none(),
            "{web:?}: nothing may follow the trailer frame"
        );
        assert!(rest.len() >= 5, "{web:?}: a partial frame header");
        let flags = rest[0];
        let len = u32::from_be_bytes([rest[1], rest[2], rest[3], rest[4]]) as usize;
        assert!(rest.len() >= 5 + len, "{web:?}: a truncated frame");
        let payload = &rest[5..5 + len];
        match flags {
            0 => messages.push(payload.to_vec()),
            0x80 => {
                let text = std::str::from_utf8(payload).expect("trailers are text");
                trailer = Some(
                    text.split("\r\n")
                        .filter(|l| !l.is_empty())
                        .map(|l| {
                            let (k, v) = l.split_once(':').expect("name:value");
                            (k.trim().to_ascii_lowercase(), v.trim().to_owned())
                        })
                        .collect(),
                );
            }
            other => panic!("{web:?}: unexpected frame flags 0x{other:02x}"),
        }
        rest = &rest[5 + len..];
    }
    Outcome {
        answer,
        messages,
        trailer,
    }
}

fn request(query: &str) -> Vec<u8> {
    ExecuteRequest {
        query: query.into(),
        ..Default::default()
    }
    .encode_to_vec()
}

#[tokio::test]
async fn execute_answers_with_its_status_in_a_trailer_frame() {
    for cfg in grpc_web_gateways() {
        execute_answers(&cfg).await;
    }
}

async fn execute_answers(cfg: &Config) {
    let auth = cfg.basic_auth();
    for web in every_web(cfg) {
        let o = call(
            web,
            cfg,
            EXECUTE,
            Some(&auth),
            &request("SELECT 1 AS a, 'x' AS b"),
        )
        .await;
        assert_eq!(o.status(), (0, String::new()), "{web:?}");
        let responses = o.responses();
        assert_eq!(responses.len(), 1, "{web:?}");
        let result = responses[0].result.as_ref().expect("a result");
        assert_eq!(
            ferry_e2e::rows::text_rows(result),
            vec![vec![Some("1".to_owned()), Some("x".to_owned())]],
            "{web:?}"
        );
        assert!(responses[0].session.is_some(), "{web:?}");
    }
}

#[tokio::test]
async fn stream_execute_streams_then_ends_with_a_trailer_frame() {
    for cfg in grpc_web_gateways() {
        stream_execute_streams(&cfg).await;
    }
}

async fn stream_execute_streams(cfg: &Config) {
    let auth = cfg.basic_auth();
    // Enough rows for several of the shim's chunks (recursive CTEs stop at 1,000
    // iterations in MariaDB: two of them, crossed).
    let n = 20_000u64;
    let thousand =
        "WITH RECURSIVE k(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM k WHERE n < 999) SELECT n FROM k";
    let query = format!(
        "SELECT n, CONCAT('row-', n) FROM \
         (SELECT a.n * 1000 + b.n + 1 AS n FROM ({thousand}) a, ({thousand}) b) s \
         WHERE n <= {n} ORDER BY n"
    );
    for web in every_web(cfg) {
        let o = call(web, cfg, STREAM_EXECUTE, Some(&auth), &request(&query)).await;
        assert_eq!(o.status(), (0, String::new()), "{web:?}");
        let responses = o.responses();
        assert!(responses.len() > 2, "{web:?}: {} messages", responses.len());
        let mut next = 1u64;
        for (i, r) in responses.iter().enumerate() {
            assert!(r.error.is_none(), "{web:?}: {:?}", r.error);
            let Some(result) = &r.result else { continue };
            assert_eq!(
                result.fields.is_empty(),
                i > 0,
                "{web:?}: fields come first"
            );
            for row in ferry_e2e::rows::text_rows(result) {
                assert_eq!(row[0].as_deref(), Some(next.to_string().as_str()));
                assert_eq!(row[1].as_deref(), Some(format!("row-{next}").as_str()));
                next += 1;
            }
        }
        assert_eq!(next - 1, n, "{web:?}: every row");
    }
}

#[tokio::test]
async fn errors_end_in_a_trailer_frame_or_trailers_only_headers() {
    for cfg in grpc_web_gateways() {
        errors_end(&cfg).await;
    }
}

async fn errors_end(cfg: &Config) {
    let auth = cfg.basic_auth();
    let wrong = basic_auth(&cfg.user, "not-the-password");
    for web in every_web(cfg) {
        // The shim refuses the credentials: its error becomes the trailer frame.
        for path in [EXECUTE, STREAM_EXECUTE] {
            let o = call(web, cfg, path, Some(&wrong), &request("SELECT 1")).await;
            assert!(o.trailer.is_some(), "{web:?} {path}");
            assert!(o.messages.is_empty(), "{web:?} {path}");
            assert_eq!(o.status().0, 16, "{web:?} {path}: {:?}", o.status());
        }
        // The filter's own refusals are trailers-only: the status is in the headers
        // and the body is empty.
        let o = call(web, cfg, EXECUTE, None, &request("SELECT 1")).await;
        assert!(o.trailer.is_none() && o.messages.is_empty(), "{web:?}");
        assert_eq!(o.status().0, 16, "{web:?}");
        let o = call(
            web,
            cfg,
            "/psdb.v1alpha1.Database/Nope",
            Some(&auth),
            &request("SELECT 1"),
        )
        .await;
        assert!(o.trailer.is_none() && o.messages.is_empty(), "{web:?}");
        assert_eq!(o.status().0, 12, "{web:?}");
        // A SQL error is a successful call whose answer carries it (as for gRPC).
        let o = call(
            web,
            cfg,
            EXECUTE,
            Some(&auth),
            &request("SELECT * FROM no_such_table_here"),
        )
        .await;
        assert_eq!(o.status(), (0, String::new()), "{web:?}");
        let error = o.responses()[0].error.clone().expect("a SQL error");
        assert!(error.message.contains("no_such_table_here"), "{error:?}");
    }
}

/// gRPC-Web JSON is converted by no one: the Ferry filter refuses it, saying so.
#[tokio::test]
async fn grpc_web_json_is_refused_with_a_reason() {
    for cfg in grpc_web_gateways() {
        let auth = cfg.basic_auth();
        let a = ConnectClient::http2(&cfg)
            .post(
                EXECUTE,
                &[
                    ("content-type", "application/grpc-web+json"),
                    ("authorization", auth.as_str()),
                ],
                br#"{"query":"SELECT 1"}"#.to_vec(),
            )
            .await;
        assert_eq!(a.status, 415, "port {}", cfg.port);
        let message = a.json()["message"].as_str().unwrap_or_default().to_owned();
        assert!(message.contains("grpc_web"), "{message}");
    }
}

/// A gRPC-Web content type with parameters: Envoy's grpc_web filter converts exact
/// types only, so the Ferry filter serves it itself, whatever the order of the two.
#[tokio::test]
async fn a_content_type_with_parameters_is_served_too() {
    for cfg in grpc_web_gateways() {
        let auth = cfg.basic_auth();
        let mut frame = vec![0];
        let message = request("SELECT 7");
        frame.extend_from_slice(&(message.len() as u32).to_be_bytes());
        frame.extend_from_slice(&message);
        let a = ConnectClient::http2(&cfg)
            .post(
                EXECUTE,
                &[
                    ("content-type", "application/grpc-web+proto; charset=utf-8"),
                    ("authorization", auth.as_str()),
                ],
                frame,
            )
            .await;
        assert_eq!(a.status, 200, "port {}", cfg.port);
        assert_eq!(a.header("content-type"), Some("application/grpc-web+proto"));
        let body = &a.body[..];
        let len = u32::from_be_bytes([body[1], body[2], body[3], body[4]]) as usize;
        let r = ExecuteResponse::decode(&body[5..5 + len]).expect("an ExecuteResponse");
        assert_eq!(
            ferry_e2e::rows::text_rows(r.result.as_ref().expect("a result")),
            vec![vec![Some("7".to_owned())]]
        );
        assert_eq!(&body[5 + len..], b"\x80\0\0\0\x0fgrpc-status:0\r\n");
    }
}
