//! Ferry's shim: the canonical psdb API (Connect unary, `application/proto`,
//! uncompressed; StreamExecute as Connect streaming, `application/connect+proto`)
//! in front of MySQL. It owns everything MySQL: per-credential pools, statement
//! policy, column type mapping and `QueryResult` encoding.
//! Client framing, codecs and compression live in the Envoy filter, never here.

pub mod account;
pub mod answer;
pub mod auth;
pub mod auth_clause;
pub mod binary_row;
pub mod bind;
pub mod cancel;
pub mod column_types;
pub mod config;
pub mod connect_error;
pub mod deadline;
pub mod envelope;
pub mod error_map;
pub mod execute;
pub mod gtid;
pub mod health;
pub mod listen_tls;
pub mod log;
pub mod message_body;
pub mod metrics;
pub mod mysql_target;
pub mod mysql_tls;
pub mod olap;
pub mod pem_files;
pub mod pool;
pub mod prepare;
pub mod result;
pub mod role;
pub mod seal;
pub mod server;
pub mod session;
pub mod sink;
pub mod spill;
pub use ferry_wire::statement;
pub mod stream;
pub mod trace;
pub mod type_map;
