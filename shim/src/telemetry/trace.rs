//! Tracing (OpenTelemetry), off unless `FERRY_OTLP_ENDPOINT` is set.
//!
//! The shim continues the trace of each request: it reads the W3C `traceparent`
//! header (Envoy's OpenTelemetry tracer sends it, from the router's upstream span:
//! envoy/tracing.yaml) and records
//! - one span per RPC (kind SERVER, named `psdb.v1alpha1.Database/<Rpc>`), a child
//!   of the caller's span; a request without `traceparent` starts a trace. It ends
//!   with the answer, or for StreamExecute with the stream. Attributes: `rpc.system`
//!   (`connect_rpc`), `rpc.service`, `rpc.method`, `ferry.role` (primary | replica),
//!   `ferry.class` (read | write | session: the filter's `x-ferry-class`), and at the
//!   end `ferry.code` (the Connect code the metrics count, `ok` included) and
//!   `http.response.status_code`;
//! - one span per MySQL statement (Execute, StreamExecute; kind CLIENT, named after
//!   the statement's first keyword, e.g. `SELECT`), a child of the RPC span, from
//!   asking for a connection to the last row: `db.system` / `db.system.name`
//!   (`mysql`), `db.operation.name` (the first keyword of a known statement type,
//!   else `OTHER`), `ferry.role`, `ferry.class`, `ferry.pool.wait_ms` (getting the
//!   connection: the pool, a new login, or the queue of the session's pin),
//!   `ferry.pinned`, on a replica `ferry.read_after_write.wait_ms`, and at the end
//!   `db.response.returned_rows`, `ferry.rows_affected`, `ferry.code` and, for an SQL
//!   error, `db.response.status_code` (the MySQL errno).
//!
//! Never recorded: the SQL text (unless `FERRY_TRACE_SQL=1`: `db.query.text`, bind
//! variables' values never), credentials (no user name, no password), error
//! messages (MySQL's quote the statement). A failed span's status says its code.
//!
//! Spans leave in batches over OTLP/gRPC to `FERRY_OTLP_ENDPOINT` (`http://host:port`,
//! a collector's 4317) from the SDK's own thread; the SDK's `OTEL_*` variables apply
//! (`OTEL_TRACES_SAMPLER`: by default a traced caller's decision is followed and other
//! requests are all sampled; `OTEL_BSP_SCHEDULE_DELAY`: 5 s between batches;
//! `OTEL_SERVICE_NAME`: `ferry-shim`; `OTEL_RESOURCE_ATTRIBUTES`). Off, nothing
//! is started and each hook below is a test of an `Option`.
use crate::connect::error::ConnectError;
use crate::mysql::role::Role;
use crate::settings::{Setting, Vars};
use ferry_proto::psdb::v1alpha1::ExecuteResponse;
use http::HeaderMap;
use opentelemetry::propagation::{Extractor, TextMapPropagator};
use opentelemetry::trace::{
    Span as _, SpanKind, Status, TraceContextExt, Tracer as _, TracerProvider as _,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider, Span};
use opentelemetry_sdk::Resource;
use std::time::Duration;

/// `service.name` unless `OTEL_SERVICE_NAME` says otherwise.
pub const SERVICE_NAME: &str = "ferry-shim";
/// The filter's classification of a request (envoy/ferry.yaml routes on it).
const CLASS_HEADER: &str = "x-ferry-class";

/// The exporter and the tracer: one per process.
#[derive(Clone)]
pub struct Tracing {
    provider: SdkTracerProvider,
    tracer: SdkTracer,
    sql: bool,
    role: Role,
}

impl Tracing {
    /// Starts exporting to `endpoint` (`http://host:port`, OTLP/gRPC). Runs inside
    /// the tokio runtime: the exporter's channel (connected lazily) lives there.
    pub fn start(endpoint: &str, sql: bool, role: Role, instance: &str) -> Result<Self, String> {
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_tonic()
            .with_endpoint(endpoint)
            .with_timeout(Duration::from_secs(5))
            .build()
            .map_err(|e| format!("OTLP exporter for {endpoint}: {e}"))?;
        let mut resource = Resource::builder();
        if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
            resource = resource.with_service_name(SERVICE_NAME);
        }
        let resource = resource
            .with_attributes([
                KeyValue::new("service.instance.id", instance.to_owned()),
                KeyValue::new("ferry.role", role.as_str()),
            ])
            .build();
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource)
            .build();
        Ok(Self::with_provider(provider, sql, role))
    }

    fn with_provider(provider: SdkTracerProvider, sql: bool, role: Role) -> Self {
        let tracer = provider.tracer("ferry-shim");
        Tracing {
            provider,
            tracer,
            sql,
            role,
        }
    }

    /// Sends what is still batched (blocks up to the export timeout).
    pub fn shutdown(&self) {
        let _ = self.provider.shutdown();
    }

    /// The span of one RPC (`rpc`: its name, e.g. `Execute`), continuing the
    /// request's `traceparent` if it has one.
    pub fn rpc(&self, headers: &HeaderMap, rpc: &str) -> Trace {
        let parent = TraceContextPropagator::new().extract(&Headers(headers));
        let class = class(headers);
        let mut attributes = vec![
            KeyValue::new("rpc.system", "connect_rpc"),
            KeyValue::new("rpc.service", "psdb.v1alpha1.Database"),
            KeyValue::new("rpc.method", rpc.to_owned()),
            KeyValue::new("ferry.role", self.role.as_str()),
        ];
        if let Some(c) = class {
            attributes.push(KeyValue::new("ferry.class", c));
        }
        let span = self
            .tracer
            .span_builder(format!("psdb.v1alpha1.Database/{rpc}"))
            .with_kind(SpanKind::Server)
            .with_attributes(attributes)
            .start_with_context(&self.tracer, &parent);
        Trace(Some(Active {
            tracer: self.tracer.clone(),
            cx: parent.with_span(span),
            sql: self.sql,
            role: self.role,
            class,
        }))
    }
}

/// One request's trace: its RPC span, for the statement's to hang from. The span
/// ends when the last clone is dropped (the answer; a stream's end). `Trace::off()`
/// when tracing is off: every method does nothing.
#[derive(Clone, Default)]
pub struct Trace(Option<Active>);

#[derive(Clone)]
struct Active {
    tracer: SdkTracer,
    /// The caller's context with the RPC span in it.
    cx: Context,
    sql: bool,
    role: Role,
    class: Option<&'static str>,
}

impl Trace {
    pub fn off() -> Trace {
        Trace(None)
    }

    /// The RPC's outcome: the Connect code the metrics count, and the HTTP status.
    pub fn answered(&self, code: &'static str, status: u16) {
        let Some(a) = &self.0 else { return };
        let span = a.cx.span();
        span.set_attribute(KeyValue::new("ferry.code", code));
        span.set_attribute(KeyValue::new(
            "http.response.status_code",
            i64::from(status),
        ));
        if code != "ok" {
            span.set_status(Status::error(code));
        }
    }

    /// The span of the request's MySQL statement, started now.
    pub fn statement(&self, sql: &str) -> Statement {
        let Some(a) = &self.0 else {
            return Statement(None);
        };
        let op = operation(sql);
        let mut attributes = vec![
            KeyValue::new("db.system", "mysql"),
            KeyValue::new("db.system.name", "mysql"),
            KeyValue::new("db.operation.name", op),
            KeyValue::new("ferry.role", a.role.as_str()),
        ];
        if let Some(c) = a.class {
            attributes.push(KeyValue::new("ferry.class", c));
        }
        if a.sql {
            attributes.push(KeyValue::new("db.query.text", sql.to_owned()));
        }
        let span = a
            .tracer
            .span_builder(op)
            .with_kind(SpanKind::Client)
            .with_attributes(attributes)
            .start_with_context(&a.tracer, &a.cx);
        Statement(Some(span))
    }
}

/// A statement's span; it ends when dropped (or by `answered` / `failed`).
pub struct Statement(Option<Span>);

impl Statement {
    /// The statement has its connection: `waited` getting it, `gtid_wait` seconds
    /// of a replica's wait for the session's writes; `pinned`: the session's own.
    pub fn connected(&mut self, waited: Duration, gtid_wait: f64, pinned: bool, role: Role) {
        let Some(span) = &mut self.0 else { return };
        let gtid = Duration::from_secs_f64(gtid_wait.max(0.0));
        span.set_attribute(KeyValue::new(
            "ferry.pool.wait_ms",
            millis(waited.saturating_sub(gtid)),
        ));
        span.set_attribute(KeyValue::new("ferry.pinned", pinned));
        if role == Role::Replica {
            span.set_attribute(KeyValue::new(
                "ferry.read_after_write.wait_ms",
                millis(gtid),
            ));
        }
    }

    /// The statement's answer (`rows`: how many it returned, when its result does
    /// not hold them: a stream sent them, an Execute's travel encoded), or the
    /// Connect error it ended with.
    pub fn finish(mut self, answer: Result<&ExecuteResponse, &ConnectError>, rows: Option<u64>) {
        let Some(span) = &mut self.0 else { return };
        let resp = match answer {
            Ok(resp) => resp,
            Err(e) => return fail(span, e.name()),
        };
        if let Some(result) = &resp.result {
            let returned = rows.unwrap_or(result.rows.len() as u64);
            span.set_attribute(KeyValue::new(
                "db.response.returned_rows",
                i64::try_from(returned).unwrap_or(i64::MAX),
            ));
            span.set_attribute(KeyValue::new(
                "ferry.rows_affected",
                i64::try_from(result.rows_affected).unwrap_or(i64::MAX),
            ));
        } else if let Some(n) = rows {
            span.set_attribute(KeyValue::new(
                "db.response.returned_rows",
                i64::try_from(n).unwrap_or(i64::MAX),
            ));
        }
        match &resp.error {
            None => span.set_attribute(KeyValue::new("ferry.code", "ok")),
            Some(e) => {
                if let Some(errno) = errno(&e.message) {
                    span.set_attribute(KeyValue::new("db.response.status_code", errno));
                }
                let code = u32::try_from(e.code)
                    .ok()
                    .and_then(ferry_wire::status::by_grpc)
                    .unwrap_or(ferry_wire::status::UNKNOWN);
                fail(span, code.connect);
            }
        }
    }

    /// Ended without an answer (a stream whose client went away).
    pub fn failed(mut self, code: &'static str) {
        if let Some(span) = &mut self.0 {
            fail(span, code);
        }
    }
}

fn fail(span: &mut Span, code: &'static str) {
    span.set_attribute(KeyValue::new("ferry.code", code));
    span.set_status(Status::error(code));
}

fn millis(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
}

/// `x-ferry-class`, if it is one of the filter's values.
fn class(headers: &HeaderMap) -> Option<&'static str> {
    match headers.get(CLASS_HEADER)?.as_bytes() {
        b"read" => Some("read"),
        b"write" => Some("write"),
        b"session" => Some("session"),
        _ => None,
    }
}

/// The statement's first keyword if it is a known statement type: nothing of
/// the client's own text (a table name, a typo) leaves in a span.
pub fn operation(sql: &str) -> &'static str {
    const KNOWN: &[&str] = &[
        "ALTER",
        "ANALYZE",
        "BEGIN",
        "CALL",
        "CHECKSUM",
        "COMMIT",
        "CREATE",
        "DEALLOCATE",
        "DELETE",
        "DESC",
        "DESCRIBE",
        "DO",
        "DROP",
        "EXECUTE",
        "EXPLAIN",
        "FLUSH",
        "GRANT",
        "HANDLER",
        "INSERT",
        "KILL",
        "LOAD",
        "LOCK",
        "OPTIMIZE",
        "PREPARE",
        "RELEASE",
        "RENAME",
        "REPLACE",
        "REVOKE",
        "ROLLBACK",
        "SAVEPOINT",
        "SELECT",
        "SET",
        "SHOW",
        "START",
        "TABLE",
        "TRUNCATE",
        "UNLOCK",
        "UPDATE",
        "USE",
        "VALUES",
        "WITH",
        "XA",
    ];
    let word = ferry_wire::statement::first_keyword(sql);
    KNOWN
        .iter()
        .find(|k| **k == word)
        .copied()
        .unwrap_or("OTHER")
}

/// The MySQL errno in an answer's message (error_map::sql_message's `(errno N)`).
fn errno(message: &str) -> Option<i64> {
    let at = message.rfind("(errno ")? + "(errno ".len();
    let digits = message.get(at..)?.split(')').next()?;
    digits.parse().ok()
}

struct Headers<'a>(&'a HeaderMap);

impl Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key)?.to_str().ok()
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(http::HeaderName::as_str).collect()
    }
}

/// Where spans go, and what they carry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceSettings {
    /// `None`: no tracing.
    pub otlp_endpoint: Option<String>,
    pub sql: bool,
}

pub const SETTINGS: &[Setting] = &[
    Setting {
        name: "FERRY_OTLP_ENDPOINT",
        default: "",
        about: "`http://host:port`: export spans over OTLP/gRPC to this collector ([tracing](../guides/tracing.md)); unset: no tracing; anything else refuses to start",
    },
    Setting {
        name: "FERRY_TRACE_SQL",
        default: "false",
        about: "spans carry the statement's text (`db.query.text`; bind variables' values never)",
    },
];

impl TraceSettings {
    pub fn from_vars(vars: &Vars<'_>) -> Result<Self, String> {
        let otlp_endpoint = vars.set("FERRY_OTLP_ENDPOINT");
        if let Some(e) = &otlp_endpoint {
            // Plain gRPC only (a collector next to the shim): no TLS is built in.
            if !e.starts_with("http://") {
                return Err(format!(
                    "FERRY_OTLP_ENDPOINT={e:?} is not an http://host:port OTLP/gRPC endpoint"
                ));
            }
        }
        Ok(TraceSettings {
            otlp_endpoint,
            sql: vars.flag("FERRY_TRACE_SQL")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry_sdk::trace::InMemorySpanExporter;

    #[test]
    fn only_known_statement_types_are_named() {
        assert_eq!(operation("  select 1"), "SELECT");
        assert_eq!(operation("(SELECT 1) UNION (SELECT 2)"), "SELECT");
        assert_eq!(operation("insert into t values (1)"), "INSERT");
        assert_eq!(operation("hunter2 secret"), "OTHER");
        assert_eq!(operation(""), "OTHER");
    }

    #[test]
    fn errno_from_the_message() {
        assert_eq!(
            errno("You have an error near 'x' (errno 1064) (sqlstate 42000)"),
            Some(1064)
        );
        assert_eq!(errno("no number here"), None);
    }

    #[test]
    fn the_class_header_is_one_of_three() {
        let mut h = HeaderMap::new();
        assert_eq!(class(&h), None);
        h.insert(CLASS_HEADER, "read".parse().unwrap());
        assert_eq!(class(&h), Some("read"));
        h.insert(CLASS_HEADER, "anything".parse().unwrap());
        assert_eq!(class(&h), None);
    }

    fn traced(sql: bool) -> (Tracing, InMemorySpanExporter) {
        let exporter = InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(exporter.clone())
            .build();
        (
            Tracing::with_provider(provider, sql, Role::Replica),
            exporter,
        )
    }

    const PARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

    #[test]
    fn the_rpc_continues_the_callers_trace_and_the_statement_hangs_from_it() {
        let (tracing, exporter) = traced(false);
        let mut h = HeaderMap::new();
        h.insert("traceparent", PARENT.parse().unwrap());
        h.insert(CLASS_HEADER, "read".parse().unwrap());
        h.insert("authorization", "Basic dXNlcjpodW50ZXIy".parse().unwrap());
        let t = tracing.rpc(&h, "Execute");
        let mut s = t.statement("SELECT 'hunter2' FROM secret_table");
        s.connected(Duration::from_millis(7), 0.002, false, Role::Replica);
        let answer = ExecuteResponse {
            result: Some(ferry_proto::vitess::query::QueryResult {
                rows: vec![Default::default(); 3],
                ..Default::default()
            }),
            ..Default::default()
        };
        s.finish(Ok(&answer), None);
        t.answered("ok", 200);
        drop(t);
        let spans = exporter.get_finished_spans().unwrap();
        assert_eq!(spans.len(), 2);
        let (stmt, rpc) = (&spans[0], &spans[1]);
        assert_eq!(rpc.name, "psdb.v1alpha1.Database/Execute");
        assert_eq!(rpc.span_kind, SpanKind::Server);
        assert_eq!(
            rpc.span_context.trace_id().to_string(),
            "0af7651916cd43dd8448eb211c80319c"
        );
        assert_eq!(rpc.parent_span_id.to_string(), "b7ad6b7169203331");
        assert_eq!(stmt.span_context.trace_id(), rpc.span_context.trace_id());
        assert_eq!(stmt.parent_span_id, rpc.span_context.span_id());
        assert_eq!(
            (stmt.name.as_ref(), stmt.span_kind.clone()),
            ("SELECT", SpanKind::Client)
        );
        let attr = |span: &opentelemetry_sdk::trace::SpanData, key: &str| {
            span.attributes
                .iter()
                .find(|kv| kv.key.as_str() == key)
                .map(|kv| kv.value.to_string())
        };
        assert_eq!(attr(stmt, "db.system").as_deref(), Some("mysql"));
        assert_eq!(attr(stmt, "ferry.class").as_deref(), Some("read"));
        assert_eq!(attr(stmt, "ferry.role").as_deref(), Some("replica"));
        assert_eq!(
            attr(stmt, "db.response.returned_rows").as_deref(),
            Some("3")
        );
        assert_eq!(attr(stmt, "ferry.pool.wait_ms").as_deref(), Some("5"));
        assert_eq!(
            attr(stmt, "ferry.read_after_write.wait_ms").as_deref(),
            Some("2")
        );
        assert_eq!(attr(stmt, "ferry.code").as_deref(), Some("ok"));
        assert_eq!(attr(rpc, "ferry.code").as_deref(), Some("ok"));
        assert_eq!(attr(stmt, "db.query.text"), None);
        let everything = format!("{spans:?}");
        assert!(!everything.contains("hunter2") && !everything.contains("secret_table"));
        assert!(!everything.contains("dXNlcjpodW50ZXIy"));
    }

    #[test]
    fn sql_errors_and_opt_in_sql_text() {
        let (tracing, exporter) = traced(true);
        let t = tracing.rpc(&HeaderMap::new(), "Execute");
        let s = t.statement("SELEC 1");
        let answer = ExecuteResponse {
            error: Some(ferry_proto::vitess::vtrpc::RpcError {
                code: ferry_proto::vitess::vtrpc::Code::InvalidArgument as i32,
                message: "syntax near 'SELEC 1' (errno 1064) (sqlstate 42000)".into(),
            }),
            ..Default::default()
        };
        s.finish(Ok(&answer), None);
        t.answered("ok", 200);
        drop(t);
        let spans = exporter.get_finished_spans().unwrap();
        let stmt = &spans[0];
        // No traceparent: a trace of its own.
        assert_eq!(
            spans[1].parent_span_id,
            opentelemetry::trace::SpanId::INVALID
        );
        assert_eq!(stmt.name, "OTHER");
        assert_eq!(stmt.status, Status::error("invalid_argument"));
        let attrs = format!("{:?}", stmt.attributes);
        assert!(
            attrs.contains("1064") && attrs.contains("SELEC 1"),
            "{attrs}"
        );
        assert!(!attrs.contains("syntax near"), "{attrs}");
    }

    #[test]
    fn off_costs_nothing_and_records_nothing() {
        let t = Trace::off();
        t.answered("ok", 200);
        let mut s = t.statement("SELECT 1");
        assert!(s.0.is_none());
        s.connected(Duration::from_millis(1), 0.0, false, Role::Primary);
        s.finish(Ok(&ExecuteResponse::default()), None);
    }
}
