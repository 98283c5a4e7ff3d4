//! MySQL itself: the target and its role, credential pools and the account
//! checks of a new login, TLS to the server, health, and stopping a statement.
pub mod account;
pub mod auth_clause;
pub mod cancel;
pub mod health;
pub mod pool;
pub mod pool_metrics;
pub mod pool_settings;
pub mod role;
pub mod target;
pub mod tls;
