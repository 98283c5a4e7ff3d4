//! Ferry's shim: the canonical psdb API (Connect unary, `application/proto`,
//! uncompressed; StreamExecute as Connect streaming, `application/connect+proto`)
//! in front of MySQL. It owns everything MySQL: per-credential pools, statement
//! policy, column type mapping and `QueryResult` encoding.
//! Client framing, codecs and compression live in the Envoy filter, never here.

pub mod app;
pub mod config;
pub mod connect;
pub mod credentials;
pub mod errors;
pub mod http;
pub mod mysql;
pub mod olap;
pub mod rows;
pub mod rpc;
pub mod sessions;
pub mod statement;
pub mod telemetry;
pub mod tls;
pub mod types;
