//! The shim's own Prometheus metrics, served at `GET /metrics` on its
//! listener (text format 0.0.4). Envoy's routes only match
//! `/psdb.v1alpha1.Database/`, so clients never reach it through the gateway.
//!
//! | metric | labels | what |
//! |---|---|---|
//! | `ferry_shim_info` | `role`, `version` | 1; the shim's role (primary, replica) |
//! | `ferry_shim_requests_total` | `rpc`, `code` | RPC answers: `ok`, a Connect code, or for Execute/StreamExecute answered 200 with an SQL error, that error's code |
//! | `ferry_shim_pools` | | credential pools held |
//! | `ferry_shim_pool_connections` | `user` | MySQL connections of the user's pools (size) |
//! | `ferry_shim_pool_connections_in_use` | `user` | ... handed out (statements, pins) |
//! | `ferry_shim_pool_connections_idle` | `user` | ... idle in the pool |
//! | `ferry_shim_pool_waiting_requests` | `user` | requests waiting for a connection now |
//! | `ferry_shim_pool_wait_seconds` | `user` | histogram of the time to get a connection (`_sum`, `_count`) |
//! | `ferry_shim_pool_wait_timeouts_total` | `user` | no connection within `FERRY_POOL_WAIT_SECS` |
//! | `ferry_shim_pool_connect_errors_total` | `user` | MySQL could not be reached or refused a connection |
//! | `ferry_shim_pinned_sessions` | | sessions holding a connection (transactions, session state) |
//! | `ferry_shim_read_after_write_waits_total` | `outcome` | a replica's waits for a session's GTID: `reached`, `behind` |
//! | `ferry_shim_session_state_total` | `way` | statements of sessions with variables or settings on a pooled connection: `set` first, or `kept` on a connection that carried them (sessions/settings_pool.rs) |
//! | `ferry_shim_settings_pool_connections` | | connections kept with a session's state on them |
//! | `ferry_shim_auth_throttled_total` | `reason` | logins answered without MySQL: `address` or `user` (429, too many failures), `repeated_password` (401, that password just failed) |
//! | `ferry_shim_idempotency_total` | `outcome` | requests with an `Idempotency-Key`: `stored` (ran, committed with its record), `replayed` (the stored answer), `waited` (met another request's record of the key at its INSERT; looked again) |
//!
//! `user` is the MySQL user of an admitted pool; a credential MySQL has not
//! accepted yet counts as `user="-"`, so made-up user names cannot grow the
//! label set. No password, statement or session appears in any label.
use crate::mysql::pool_metrics::PoolMetrics;
use crate::mysql::role::Role;
use prometheus::{Encoder, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry, TextEncoder};
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

fn counter(name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    IntCounterVec::new(Opts::new(name, help), labels)
        .unwrap_or_else(|_| unreachable!("a valid counter"))
}

fn gauge(name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
    IntGaugeVec::new(Opts::new(name, help), labels)
        .unwrap_or_else(|_| unreachable!("a valid gauge"))
}

pub struct Metrics {
    registry: Registry,
    requests: IntCounterVec,
    read_after_write: IntCounterVec,
    session_state: IntCounterVec,
    idempotency: IntCounterVec,
    throttled: IntCounterVec,
    kept: IntGauge,
    pools: IntGauge,
    connections: IntGaugeVec,
    in_use: IntGaugeVec,
    idle: IntGaugeVec,
    waiting: IntGaugeVec,
    pinned: IntGauge,
}

impl Metrics {
    pub fn new(role: Role, pool: &PoolMetrics) -> Metrics {
        let m = Metrics {
            registry: Registry::new(),
            requests: counter(
                "ferry_shim_requests_total",
                "RPC answers by RPC and code",
                &["rpc", "code"],
            ),
            read_after_write: counter(
                "ferry_shim_read_after_write_waits_total",
                "A replica's waits for a session's writes (GTID), by outcome",
                &["outcome"],
            ),
            throttled: counter(
                "ferry_shim_auth_throttled_total",
                "Logins answered without asking MySQL (password guessing), by reason",
                &["reason"],
            ),
            idempotency: counter(
                "ferry_shim_idempotency_total",
                "Requests with an Idempotency-Key, by outcome",
                &["outcome"],
            ),
            session_state: counter(
                "ferry_shim_session_state_total",
                "Statements of sessions with state on a pooled connection: the state set first, or kept on it",
                &["way"],
            ),
            kept: IntGauge::new(
                "ferry_shim_settings_pool_connections",
                "Connections kept with a session's state on them",
            )
            .unwrap_or_else(|_| unreachable!("a valid gauge")),
            pools: IntGauge::new("ferry_shim_pools", "Credential pools held")
                .unwrap_or_else(|_| unreachable!("a valid gauge")),
            connections: gauge(
                "ferry_shim_pool_connections",
                "MySQL connections of the user's pools",
                &["user"],
            ),
            in_use: gauge(
                "ferry_shim_pool_connections_in_use",
                "MySQL connections handed out (statements, pins)",
                &["user"],
            ),
            idle: gauge(
                "ferry_shim_pool_connections_idle",
                "MySQL connections idle in the pool",
                &["user"],
            ),
            waiting: gauge(
                "ferry_shim_pool_waiting_requests",
                "Requests waiting for a MySQL connection",
                &["user"],
            ),
            pinned: IntGauge::new(
                "ferry_shim_pinned_sessions",
                "Sessions holding a MySQL connection (transactions, session state)",
            )
            .unwrap_or_else(|_| unreachable!("a valid gauge")),
        };
        let info = gauge(
            "ferry_shim_info",
            "The shim: its role (primary or replica) and version",
            &["role", "version"],
        );
        info.with_label_values(&[role.as_str(), env!("CARGO_PKG_VERSION")])
            .set(1);
        let r = &m.registry;
        for c in [
            Box::new(m.requests.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(m.read_after_write.clone()),
            Box::new(m.session_state.clone()),
            Box::new(m.idempotency.clone()),
            Box::new(m.throttled.clone()),
            Box::new(m.kept.clone()),
            Box::new(m.pools.clone()),
            Box::new(m.connections.clone()),
            Box::new(m.in_use.clone()),
            Box::new(m.idle.clone()),
            Box::new(m.waiting.clone()),
            Box::new(m.pinned.clone()),
            Box::new(info),
            Box::new(pool.wait.clone()),
            Box::new(pool.wait_timeouts.clone()),
            Box::new(pool.connect_errors.clone()),
        ] {
            // Names are distinct constants: registering cannot collide.
            let _ = r.register(c);
        }
        m
    }

    pub fn request(&self, rpc: &str, code: &str) {
        self.requests.with_label_values(&[rpc, code]).inc();
    }

    pub fn read_after_write(&self, reached: bool) {
        let outcome = if reached { "reached" } else { "behind" };
        self.read_after_write.with_label_values(&[outcome]).inc();
    }

    /// A login answered without MySQL (throttle/): `address`, `user`, `repeated_password`.
    pub fn auth_throttled(&self, reason: &'static str) {
        self.throttled.with_label_values(&[reason]).inc();
    }

    /// A request with an `Idempotency-Key`: `stored`, `replayed` or `waited`.
    pub fn idempotency(&self, outcome: &'static str) {
        self.idempotency.with_label_values(&[outcome]).inc();
    }

    /// A replica's read of a session that wrote through Vitess: no wait, to the primary.
    pub fn read_after_vitess_write(&self) {
        self.read_after_write
            .with_label_values(&["primary_only"])
            .inc();
    }

    /// A statement of a session with state on a pooled connection: `kept` on one that
    /// carried it, else set first.
    pub fn session_state(&self, kept: bool) {
        let way = if kept { "kept" } else { "set" };
        self.session_state.with_label_values(&[way]).inc();
    }

    /// The text exposition, with the pool gauges read now.
    /// `pools`: each pool's user and counters (`Pools::snapshot`); `pinned`, `kept`:
    /// pins and settings-pool connections now.
    pub fn render(
        &self,
        pools: &[(String, Arc<mysql_async::Metrics>)],
        pinned: usize,
        kept: usize,
    ) -> String {
        let mut per_user: BTreeMap<String, [i64; 4]> = BTreeMap::new();
        let snapshot = pools;
        self.pools
            .set(i64::try_from(snapshot.len()).unwrap_or(i64::MAX));
        for (user, m) in snapshot {
            let n = |a: &std::sync::atomic::AtomicUsize| {
                i64::try_from(a.load(Ordering::Relaxed)).unwrap_or(i64::MAX)
            };
            let e = per_user.entry(user.clone()).or_default();
            e[0] += n(&m.connection_count);
            e[1] += n(&m.connections_in_use);
            e[2] += n(&m.connections_in_pool);
            e[3] += n(&m.active_wait_requests);
        }
        // Users whose pools went are dropped, not left at their last value.
        for g in [&self.connections, &self.in_use, &self.idle, &self.waiting] {
            g.reset();
        }
        for (user, v) in &per_user {
            self.connections.with_label_values(&[user]).set(v[0]);
            self.in_use.with_label_values(&[user]).set(v[1]);
            self.idle.with_label_values(&[user]).set(v[2]);
            self.waiting.with_label_values(&[user]).set(v[3]);
        }
        self.pinned.set(i64::try_from(pinned).unwrap_or(i64::MAX));
        self.kept.set(i64::try_from(kept).unwrap_or(i64::MAX));
        let mut out = Vec::new();
        if let Err(e) = TextEncoder::new().encode(&self.registry.gather(), &mut out) {
            crate::log!(
                crate::telemetry::log::Level::Error,
                "cannot encode metrics",
                error = e
            );
        }
        String::from_utf8_lossy(&out).into_owned()
    }
}

/// The Content-Type of `render`'s text.
pub const CONTENT_TYPE: &str = prometheus::TEXT_FORMAT;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::mysql::pool::Pools;
    use crate::mysql::pool_metrics::NEW_CREDENTIAL;

    #[test]
    fn the_exposition_has_every_metric() {
        let cfg = Config::from_lookup(|_| None).expect("default config");
        let pools = Pools::new(&cfg.pool);
        let m = Metrics::new(Role::Replica, &pools.metrics);
        m.request("Execute", "ok");
        m.request("Execute", "ok");
        m.request("Execute", "failed_precondition");
        m.read_after_write(false);
        pools
            .metrics
            .wait
            .with_label_values(&["ferry"])
            .observe(0.002);
        pools
            .metrics
            .wait_timeouts
            .with_label_values(&["ferry"])
            .inc();
        pools
            .metrics
            .connect_errors
            .with_label_values(&[NEW_CREDENTIAL])
            .inc();
        let text = m.render(&pools.snapshot(), 3, 0);
        for line in [
            "ferry_shim_requests_total{code=\"ok\",rpc=\"Execute\"} 2",
            "ferry_shim_requests_total{code=\"failed_precondition\",rpc=\"Execute\"} 1",
            "ferry_shim_read_after_write_waits_total{outcome=\"behind\"} 1",
            "ferry_shim_pool_wait_seconds_count{user=\"ferry\"} 1",
            "ferry_shim_pool_wait_timeouts_total{user=\"ferry\"} 1",
            "ferry_shim_pool_connect_errors_total{user=\"-\"} 1",
            "ferry_shim_pinned_sessions 3",
            "ferry_shim_pools 0",
            "# TYPE ferry_shim_pool_wait_seconds histogram",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in:\n{text}");
        }
        assert!(text.contains("ferry_shim_info{role=\"replica\",version=\""));
        assert_eq!(CONTENT_TYPE, "text/plain; version=0.0.4");
    }
}
