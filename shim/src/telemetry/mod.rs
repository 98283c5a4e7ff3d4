//! What the shim tells operators: logs, Prometheus metrics, OTLP traces.
pub mod log;
pub mod metrics;
pub mod trace;
