//! Ferry's shim: the canonical psdb API (Connect unary, `application/proto`,
//! uncompressed) in front of MySQL. It owns everything MySQL: per-credential
//! pools, statement policy, column type mapping and `QueryResult` encoding.
//! Client framing, codecs and compression live in the Envoy filter, never here.

pub mod account;
pub mod auth;
pub mod auth_clause;
pub mod config;
pub mod connect_error;
pub mod error_map;
pub mod execute;
pub mod log;
pub mod message_body;
pub mod pool;
pub mod result;
pub mod seal;
pub mod server;
pub mod session;
pub use ferry_wire::statement;
pub mod type_map;
