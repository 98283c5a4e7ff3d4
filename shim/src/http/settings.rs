//! The listener's settings: where the shim listens, with how many threads, and
//! what a request may be.
use crate::settings::{Setting, Vars};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Where the shim listens, with how many threads, and what a request may be.
#[derive(Clone, Debug)]
pub struct ListenSettings {
    pub addr: SocketAddr,
    /// This shim's address as Envoy's cluster knows it, sealed into sessions so
    /// a pinned one is routed back here.
    pub advertise: String,
    pub threads: usize,
    pub unix: Option<PathBuf>,
    pub max_request_bytes: usize,
    /// The earliest an `unauthenticated` answer leaves (mysql/account.rs).
    pub auth_failure_delay: Duration,
}

pub const SETTINGS: &[Setting] = &[
    Setting {
        name: "FERRY_SHIM_ADDR",
        default: "127.0.0.1:8081",
        about: "the TCP listener (HTTP/2 cleartext with prior knowledge, HTTP/1.1)",
    },
    Setting {
        name: "FERRY_SHIM_ADVERTISE",
        default: "",
        about: "this shim's address as Envoy's cluster knows it (unset: the TCP listener's), sealed into sessions so a pinned one is routed back here",
    },
    Setting {
        name: "FERRY_SHIM_UNIX",
        default: "",
        about: "also listen on this unix socket (a stale socket file is replaced)",
    },
    Setting {
        name: "FERRY_SHIM_THREADS",
        default: "1",
        about: "worker threads: one serves a request without cross-thread wake-ups, on tokio's current-thread runtime, which costs the least CPU per request ([cost per query](../benchmarks/cost.md)); raise it when one thread fills a core",
    },
    Setting {
        name: "FERRY_SHIM_MAX_REQUEST_BYTES",
        default: "67108864",
        about: "request body limit (64 MiB; else `resource_exhausted`, 429)",
    },
    Setting {
        name: "FERRY_AUTH_FAILURE_DELAY_MS",
        default: "250",
        about: "the earliest an `unauthenticated` answer (401) leaves after its request arrived, so a refusal before MySQL is asked and one after a login look alike",
    },
];

impl ListenSettings {
    pub fn from_vars(vars: &Vars<'_>) -> Result<Self, String> {
        let addr = vars
            .parsed("FERRY_SHIM_ADDR", "an ip:port", |v| v.parse().ok())?
            .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 8081)));
        Ok(ListenSettings {
            addr,
            advertise: vars
                .set("FERRY_SHIM_ADVERTISE")
                .unwrap_or_else(|| addr.to_string()),
            threads: vars.size("FERRY_SHIM_THREADS")?.max(1),
            unix: vars.set("FERRY_SHIM_UNIX").map(PathBuf::from),
            max_request_bytes: vars.size("FERRY_SHIM_MAX_REQUEST_BYTES")?,
            auth_failure_delay: vars.millis("FERRY_AUTH_FAILURE_DELAY_MS")?,
        })
    }
}
