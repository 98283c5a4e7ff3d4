//! What the pools count as they hand out connections, registered with the
//! shim's metrics (telemetry/metrics.rs).
use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, Opts};

/// The label of a credential that has no admitted pool.
pub const NEW_CREDENTIAL: &str = "-";

/// What the pools count as they hand out connections (mysql/pool.rs).
#[derive(Clone)]
pub struct PoolMetrics {
    pub wait: HistogramVec,
    pub wait_timeouts: IntCounterVec,
    pub connect_errors: IntCounterVec,
}

impl Default for PoolMetrics {
    fn default() -> Self {
        PoolMetrics {
            wait: HistogramVec::new(
                HistogramOpts::new(
                    "ferry_shim_pool_wait_seconds",
                    "Time to get a MySQL connection from a pool (a new one includes the login)",
                )
                .buckets(vec![
                    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                    10.0,
                ]),
                &["user"],
            )
            .unwrap_or_else(|_| unreachable!("a valid histogram")),
            wait_timeouts: counter(
                "ferry_shim_pool_wait_timeouts_total",
                "Requests that got no MySQL connection within FERRY_POOL_WAIT_SECS",
                &["user"],
            ),
            connect_errors: counter(
                "ferry_shim_pool_connect_errors_total",
                "MySQL connections that could not be opened (unreachable, refused)",
                &["user"],
            ),
        }
    }
}

fn counter(name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    IntCounterVec::new(Opts::new(name, help), labels)
        .unwrap_or_else(|_| unreachable!("a valid counter"))
}
