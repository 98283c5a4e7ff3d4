//! Tracing end to end: a gateway of its own (scripts/e2e.sh, `tracing_gateway`) runs
//! envoy/tracing.yaml (Envoy's OpenTelemetry tracer) and a shim with
//! FERRY_OTLP_ENDPOINT, both exporting to the OTLP/gRPC receiver this test runs on
//! FERRY_E2E_OTLP_ADDR (the official opentelemetry-proto service, served by tonic; it
//! only keeps what it gets). After reads, an SQL error and a stream over HTTP/2, a read
//! over HTTP/3 and one in Connect's GET form, all carrying a marker in their SQL:
//! - each shim RPC span hangs from Envoy's upstream span (same trace id, parent = that
//!   span), which hangs from Envoy's request span;
//! - the statement spans hang from the RPC spans and carry their attributes (db.system,
//!   class, role, pool wait, rows, codes and the MySQL errno);
//! - neither Envoy's spans nor the shim's hold the SQL text, nor the credentials.
//!
//! Run alone against that gateway: `cargo test -p ferry-e2e --test tracing -- --ignored`.
mod common;
use common::*;
use ferry_e2e::connect::{ConnectClient, EXECUTE};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use opentelemetry_proto::tonic::trace::v1::Span;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The receiver: every export request, as it came.
#[derive(Clone, Default)]
struct Receiver(Arc<Mutex<Vec<ExportTraceServiceRequest>>>);

#[tonic::async_trait]
impl TraceService for Receiver {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        self.0.lock().unwrap().push(request.into_inner());
        Ok(tonic::Response::new(ExportTraceServiceResponse {
            partial_success: None,
        }))
    }
}

/// A span with the `service.name` of the process that sent it.
#[derive(Clone, Debug)]
struct Got {
    service: String,
    span: Span,
}

impl Receiver {
    fn spans(&self) -> Vec<Got> {
        let mut out = Vec::new();
        for req in self.0.lock().unwrap().iter() {
            for rs in &req.resource_spans {
                let service = rs
                    .resource
                    .as_ref()
                    .and_then(|r| text(&r.attributes, "service.name"))
                    .unwrap_or_default();
                for ss in &rs.scope_spans {
                    for span in &ss.spans {
                        out.push(Got {
                            service: service.clone(),
                            span: span.clone(),
                        });
                    }
                }
            }
        }
        out
    }

    /// Everything received, as text (to look for what must not be there).
    fn dump(&self) -> String {
        format!("{:?}", self.0.lock().unwrap())
    }
}

fn attr<'a>(attrs: &'a [KeyValue], key: &str) -> Option<&'a Value> {
    attrs
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref()?.value.as_ref())
}

fn text(attrs: &[KeyValue], key: &str) -> Option<String> {
    match attr(attrs, key)? {
        Value::StringValue(s) => Some(s.clone()),
        _ => None,
    }
}

fn int(attrs: &[KeyValue], key: &str) -> Option<i64> {
    match attr(attrs, key)? {
        Value::IntValue(i) => Some(*i),
        _ => None,
    }
}

fn hex(id: &[u8]) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}

const SHIM: &str = "ferry-shim";
const GATEWAY: &str = "ferry-gateway";

/// A statement span of the shim, its RPC span, and Envoy's upstream and request
/// spans above it, checked to form one trace.
struct Chain<'a> {
    statement: &'a Span,
    rpc: &'a Span,
    upstream: &'a Span,
    request: &'a Span,
}

fn chain<'a>(spans: &'a [Got], statement: &'a Span) -> Chain<'a> {
    let find = |id: &[u8], service: &str| {
        spans
            .iter()
            .find(|g| g.span.span_id == id && g.service == service)
            .map(|g| &g.span)
    };
    let rpc = find(&statement.parent_span_id, SHIM)
        .unwrap_or_else(|| panic!("the RPC span above {statement:?}"));
    assert!(rpc.name.starts_with("psdb.v1alpha1.Database/"), "{rpc:?}");
    assert_eq!(rpc.kind, SpanKind::Server as i32);
    assert_eq!(rpc.trace_id, statement.trace_id);
    let upstream = find(&rpc.parent_span_id, GATEWAY).unwrap_or_else(|| {
        panic!(
            "the shim's RPC span's parent {} is none of Envoy's spans (trace {})",
            hex(&rpc.parent_span_id),
            hex(&rpc.trace_id)
        )
    });
    assert_eq!(upstream.trace_id, rpc.trace_id, "one trace id");
    assert_eq!(upstream.kind, SpanKind::Client as i32, "{upstream:?}");
    let request = find(&upstream.parent_span_id, GATEWAY)
        .unwrap_or_else(|| panic!("Envoy's request span above {upstream:?}"));
    assert_eq!(request.kind, SpanKind::Server as i32, "{request:?}");
    assert_eq!(request.trace_id, rpc.trace_id);
    Chain {
        statement,
        rpc,
        upstream,
        request,
    }
}

#[tokio::test]
#[ignore = "needs the tracing gateway of scripts/e2e.sh (FERRY_E2E_OTLP_ADDR)"]
async fn envoy_and_the_shim_share_one_trace_without_sql_text() {
    let addr = std::env::var("FERRY_E2E_OTLP_ADDR")
        .expect("FERRY_E2E_OTLP_ADDR: the OTLP receiver's address, as the gateway exports to it");
    let receiver = Receiver::default();
    let listener = tokio::net::TcpListener::bind(&addr)
        .await
        .unwrap_or_else(|e| panic!("bind {addr}: {e}"));
    let server = tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(TraceServiceServer::new(receiver.clone()))
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
    );

    let marker = unique("traced_secret");
    let cfg = cfg();
    let auth = cfg.basic_auth();

    // A read over HTTP/2 (Connect JSON) ...
    let read = execute(Way::ConnectJsonH2, &format!("SELECT '{marker}' AS m")).await;
    assert!(read.error.is_none(), "{read:?}");
    // ... and over HTTP/3 (the QUIC listener is traced too).
    let h3 = execute(Way::ConnectJsonH3, &format!("SELECT '{marker}' AS h3, 2")).await;
    assert!(h3.error.is_none(), "{h3:?}");
    // An SQL error (errno 1064), which MySQL's message would quote.
    let bad = execute(Way::ConnectJsonH2, &format!("SELEC '{marker}'")).await;
    assert!(bad.error.is_some(), "{bad:?}");
    // A stream of 3 rows.
    let c = ConnectClient::http2(&cfg);
    let msg = serde_json::json!({
        "query": format!("SELECT '{marker}' UNION ALL SELECT 'b' UNION ALL SELECT 'c'")
    })
    .to_string();
    let streamed = c
        .post(
            "/psdb.v1alpha1.Database/StreamExecute",
            &[
                ("content-type", "application/connect+json"),
                ("authorization", &auth),
            ],
            grpc_frame(msg.as_bytes()),
        )
        .await;
    assert_eq!(streamed.status, 200, "{streamed:?}");
    // Connect's GET form: the SQL is in the URL, which Envoy's span must not keep.
    let message = serde_json::json!({ "query": format!("SELECT '{marker}' AS get") }).to_string();
    let get = c
        .send(
            reqwest::Method::GET,
            &format!(
                "{EXECUTE}?connect=v1&encoding=json&message={}",
                percent_encode(message.as_bytes())
            ),
            &[("authorization", &auth)],
            vec![],
        )
        .await
        .expect("GET Execute");
    assert_eq!(get.status, 200, "{get:?}");

    // Envoy flushes every 5 s (or 5 spans), the shim's SDK every 5 s: wait for the
    // five statements with their whole chains.
    let deadline = Instant::now() + Duration::from_secs(40);
    let spans = loop {
        let spans = receiver.spans();
        let statements = spans
            .iter()
            .filter(|g| g.service == SHIM && g.span.kind == SpanKind::Client as i32)
            .count();
        // Every span's parent has arrived too (Envoy's request spans have none).
        let complete = spans.iter().all(|g| {
            g.span.parent_span_id.iter().all(|b| *b == 0)
                || spans
                    .iter()
                    .any(|p| p.span.span_id == g.span.parent_span_id)
        });
        if statements >= 5 && complete {
            break spans;
        }
        assert!(
            Instant::now() < deadline,
            "spans after 40 s: {} statement(s) of 5, every parent present: {complete}; got {:#?}",
            statements,
            spans
                .iter()
                .map(|g| (
                    &g.service,
                    &g.span.name,
                    hex(&g.span.span_id),
                    hex(&g.span.parent_span_id)
                ))
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    let statements: Vec<&Span> = spans
        .iter()
        .filter(|g| g.service == SHIM && g.span.kind == SpanKind::Client as i32)
        .map(|g| &g.span)
        .collect();
    for s in &statements {
        let a = &s.attributes;
        assert_eq!(text(a, "db.system").as_deref(), Some("mysql"), "{s:?}");
        assert_eq!(text(a, "ferry.role").as_deref(), Some("primary"), "{s:?}");
        assert!(
            matches!(attr(a, "ferry.pool.wait_ms"), Some(Value::DoubleValue(ms)) if *ms >= 0.0),
            "{s:?}"
        );
        assert!(
            text(a, "db.query.text").is_none(),
            "no SQL text by default: {s:?}"
        );
        chain(&spans, s);
    }
    let by_rows = |n: i64| {
        statements
            .iter()
            .filter(|s| int(&s.attributes, "db.response.returned_rows") == Some(n))
            .count()
    };
    // The three single-row reads (HTTP/2, HTTP/3, GET) and the stream's three rows.
    assert_eq!((by_rows(1), by_rows(3)), (3, 1), "{statements:#?}");
    for s in statements
        .iter()
        .filter(|s| int(&s.attributes, "db.response.returned_rows").is_some())
    {
        assert_eq!(s.name, "SELECT");
        assert_eq!(text(&s.attributes, "ferry.class").as_deref(), Some("read"));
        assert_eq!(text(&s.attributes, "ferry.code").as_deref(), Some("ok"));
    }
    let failed: Vec<_> = statements
        .iter()
        .filter(|s| text(&s.attributes, "ferry.code").as_deref() == Some("invalid_argument"))
        .collect();
    assert_eq!(failed.len(), 1, "{statements:#?}");
    assert_eq!(
        int(&failed[0].attributes, "db.response.status_code"),
        Some(1064)
    );
    assert_eq!(failed[0].name, "OTHER", "not the client's own word");
    assert_eq!(
        failed[0].status.as_ref().map(|s| s.message.as_str()),
        Some("invalid_argument")
    );

    // Envoy's side: the RPCs' request spans, one of them over HTTP/3; the stream's RPC
    // span ends with it and names its method.
    let chains: Vec<Chain> = statements.iter().map(|s| chain(&spans, s)).collect();
    let protocols: Vec<String> = chains
        .iter()
        .filter_map(|c| text(&c.request.attributes, "http.protocol"))
        .collect();
    assert!(
        protocols.iter().any(|p| p == "HTTP/3"),
        "a request span over HTTP/3: {protocols:?}"
    );
    assert!(
        chains
            .iter()
            .any(|c| c.rpc.name == "psdb.v1alpha1.Database/StreamExecute"
                && text(&c.rpc.attributes, "ferry.code").as_deref() == Some("ok")),
        "the stream's RPC span"
    );
    if let Some(c) = chains.first() {
        for (who, span) in [("request", c.request), ("upstream", c.upstream)] {
            let keys: Vec<&str> = span.attributes.iter().map(|kv| kv.key.as_str()).collect();
            eprintln!("Envoy's {who} span: {keys:?}");
        }
    }
    for c in &chains {
        eprintln!(
            "trace {} ({}): {} {:?} > {} {:?} > {} {:?} > {} {:?} ({:.2} ms)",
            hex(&c.request.trace_id),
            text(&c.request.attributes, "http.url").unwrap_or_default(),
            GATEWAY,
            c.request.name,
            GATEWAY,
            c.upstream.name,
            SHIM,
            c.rpc.name,
            SHIM,
            c.statement.name,
            (c.statement.end_time_unix_nano - c.statement.start_time_unix_nano) as f64 / 1e6
        );
        assert_eq!(
            text(&c.upstream.attributes, "upstream_cluster").as_deref(),
            Some("shim"),
            "{:?}",
            c.upstream
        );
        assert!(c.statement.start_time_unix_nano >= c.rpc.start_time_unix_nano);
        // Envoy's span names: the RPC's path, never a query string (the GET form's SQL).
        assert_eq!(c.request.name, c.rpc.name.replacen("psdb", "/psdb", 1));
        assert_eq!(c.upstream.name, format!("shim {}", c.request.name));
    }

    // Nothing of the SQL text or the credentials, anywhere.
    let dump = receiver.dump();
    assert!(!dump.contains(&marker), "the SQL text leaked into a span");
    assert!(
        !dump.contains(auth.trim_start_matches("Basic ")),
        "credentials in a span"
    );
    assert!(
        !dump.contains("authorization"),
        "an Authorization header in a span"
    );

    server.abort();
}
