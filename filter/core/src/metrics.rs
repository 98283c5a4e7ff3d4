//! Per-query metrics, through proxy-wasm's metrics API (the host adapter defines them
//! once per label set and caches the ids): a request counter and a latency histogram.
//!
//! | metric (Prometheus) | type | unit |
//! |---|---|---|
//! | `ferry_requests_total` | counter | requests |
//! | `ferry_request_duration_ms` | histogram | milliseconds, request headers to stream end |
//!
//! Labels: `rpc` (Execute, StreamExecute, CreateSession, CloseSession, Prepare),
//! `protocol` (connect | grpc | grpc_web), `codec` (json | proto), `http` (h1 | h2 | h3),
//! `class` (read | write | session, `route_class.rs`), `target` (primary | replica, the
//! answering shim's `ferry-target` header; `none` when no shim answered) and `code`
//! (the Connect code name, `ok` on success).
//!
//! Envoy 1.40 names a wasm metric `wasmcustom.<name>` and prints it in
//! `/stats/prometheus` without the `wasmcustom.` prefix and without `envoy_`. Labels are
//! Envoy tags: each label is written into the name as `;<label>=<value>`, and the
//! bootstrap's `stats_config.stats_tags` extracts it with the regex
//! `(;<label>=([^;]*))` (the whole match leaves the name, the inner group is the value),
//! so Prometheus sees `ferry_requests_total{rpc="Execute",...}`. Without those tags the
//! metrics still count, under their long names. Values come from fixed sets (never from
//! a client), so no value can hold `;`.

use crate::errors::Code;
use crate::http::Reply;
use crate::route_class::Class;

/// The counter's name.
pub const REQUESTS: &str = "ferry_requests_total";
/// The histogram's name.
pub const DURATION: &str = "ferry_request_duration_ms";

/// The label names, in the order they are written.
pub const LABELS: [&str; 7] = [
    "rpc", "protocol", "codec", "http", "class", "target", "code",
];

/// The labels of one finished call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Labels {
    pub rpc: &'static str,
    pub protocol: &'static str,
    pub codec: &'static str,
    pub http: &'static str,
    pub class: Class,
    pub target: &'static str,
    /// `None`: ok.
    pub code: Option<Code>,
}

impl Labels {
    /// The tag part of the metric names: `;rpc=Execute;protocol=connect;...`.
    pub fn series(&self) -> String {
        let values = [
            self.rpc,
            self.protocol,
            self.codec,
            self.http,
            self.class.as_str(),
            self.target,
            self.code.map_or("ok", Code::connect_name),
        ];
        let mut out = String::with_capacity(128);
        for (name, value) in LABELS.iter().zip(values) {
            out.push(';');
            out.push_str(name);
            out.push('=');
            out.push_str(value);
        }
        out
    }
}

/// The `http` label from Envoy's `request.protocol` property.
pub fn http_version(protocol: Option<&str>) -> &'static str {
    match protocol {
        Some("HTTP/3") => "h3",
        Some("HTTP/2") => "h2",
        Some("HTTP/1.1" | "HTTP/1.0") => "h1",
        _ => "unknown",
    }
}

/// The `target` label from the answer's `ferry-target` header.
pub fn target(header: Option<&str>) -> &'static str {
    match header.map(str::trim) {
        None => "none",
        Some("primary") => "primary",
        Some("replica") => "replica",
        Some(_) => "other",
    }
}

/// The code a local reply carries: `grpc-status` for gRPC, the JSON error's `code`
/// for Connect (unary, or a stream's end message); else from its HTTP status.
pub fn reply_code(reply: &Reply) -> Option<Code> {
    if let Some(status) = reply.header("grpc-status") {
        return grpc_code(status);
    }
    if reply.status == 200 {
        // A Connect stream: one end-of-stream envelope (5-byte header) with the error.
        let end = reply
            .body
            .get(crate::envelope::HEADER_LEN..)
            .unwrap_or_default();
        return json_code(end, true).or(None);
    }
    json_code(&reply.body, false).or(Some(Code::from_http_status(reply.status)))
}

/// The code of a `grpc-status` value (`None` for 0, ok).
pub fn grpc_code(status: &str) -> Option<Code> {
    let n: u32 = status.trim().parse().unwrap_or(2);
    if n == 0 {
        return None;
    }
    Some(ferry_wire::status::by_grpc(n).map_or(Code::Unknown, |row| {
        Code::from_connect_name(row.connect).unwrap_or(Code::Unknown)
    }))
}

fn json_code(body: &[u8], nested: bool) -> Option<Code> {
    let value: serde_json::Value = serde_json::from_slice(body).ok()?;
    let error = if nested { value.get("error")? } else { &value };
    Code::from_connect_name(error.get("code")?.as_str()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_names_every_label_in_order() {
        let labels = Labels {
            rpc: "Execute",
            protocol: "connect",
            codec: "json",
            http: "h2",
            class: Class::Read,
            target: "replica",
            code: None,
        };
        assert_eq!(
            labels.series(),
            ";rpc=Execute;protocol=connect;codec=json;http=h2;class=read;target=replica;code=ok"
        );
        let failed = Labels {
            code: Some(Code::FailedPrecondition),
            target: "none",
            class: Class::Session,
            ..labels
        };
        assert!(failed
            .series()
            .ends_with(";class=session;target=none;code=failed_precondition"));
    }

    #[test]
    fn http_and_target_labels() {
        assert_eq!(http_version(Some("HTTP/1.1")), "h1");
        assert_eq!(http_version(Some("HTTP/2")), "h2");
        assert_eq!(http_version(Some("HTTP/3")), "h3");
        assert_eq!(http_version(None), "unknown");
        assert_eq!(target(Some("primary")), "primary");
        assert_eq!(target(Some("replica")), "replica");
        assert_eq!(target(Some("x;y=1")), "other", "never a client's text");
        assert_eq!(target(None), "none");
    }

    #[test]
    fn codes_of_local_replies() {
        use crate::errors::Rejection;
        use crate::protocol;
        let rejection = Rejection::new(Code::Unavailable, "x");
        for ct in [
            "application/json",
            "application/grpc",
            "application/connect+json",
            "application/connect+proto",
        ] {
            let protocol::Detected::Served(client) = protocol::detect(Some(ct)) else {
                panic!("{ct}")
            };
            assert_eq!(
                reply_code(&client.reply(&rejection)),
                Some(Code::Unavailable),
                "{ct}"
            );
        }
        assert_eq!(grpc_code("0"), None);
        assert_eq!(grpc_code("9"), Some(Code::FailedPrecondition));
        assert_eq!(grpc_code("x"), Some(Code::Unknown));
    }
}
