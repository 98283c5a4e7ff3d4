//! Ferry's shim: the canonical psdb API (Connect unary, `application/proto`,
//! uncompressed; StreamExecute as Connect streaming, `application/connect+proto`)
//! in front of MySQL. It owns everything MySQL: per-credential pools, statement
//! policy, column type mapping and `QueryResult` encoding.
//! Client framing, codecs and compression live in the Envoy filter, never here.

mod app;
mod config;
mod connect;
mod credentials;
mod errors;
mod http;
mod idempotency;
mod mysql;
mod rows;
mod rpc;
mod sessions;
mod settings;
mod statement;
mod telemetry;
mod throttle;
mod tls;
mod tokens;
mod types;

pub use app::App;
pub use config::Config;
pub use http::serve;
pub use sessions::seal::Sealer;
pub use telemetry::log;
pub use telemetry::trace::Tracing;
pub use tokens::accounts::TokenAccounts;
