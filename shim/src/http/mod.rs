//! The shim's HTTP server: listeners, routing and the canonical request
//! checks, and its own endpoints (health, metrics).
mod admin;
mod listener;
mod routes;

pub mod settings;

pub use listener::serve;
