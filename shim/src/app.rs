//! The shim's state, shared by every request: its pools and pins, the sealer,
//! its limits and policies, metrics and tracing. Built once from the settings
//! (config.rs); everything below the RPCs reads it, nothing in it knows them.
use crate::config::Config;
use crate::mysql::pool::Pools;
use crate::mysql::role::Role;
use crate::rows::result::ResultLimits;
use crate::rows::sink::ChunkPolicy;
use crate::rows::spill::SpillPolicy;
use crate::sessions::pins::Pins;
use crate::sessions::seal::Sealer;
use crate::sessions::settings_pool::SettingsPool;
use crate::sessions::state::StateSettings;
use crate::telemetry::metrics::Metrics;
use crate::telemetry::trace::Tracing;
use crate::types::column_types::ColumnTypes;
use std::time::Duration;

pub struct App {
    pub pools: Pools,
    pub pins: Pins,
    /// Connections kept with a session's state on them (sessions/settings_pool.rs).
    pub kept: SettingsPool,
    pub sealer: Sealer,
    /// How much state a session may carry (sessions/state.rs).
    pub state: StateSettings,
    /// This process, in every session it seals (a restart shows as a new one).
    pub instance: [u8; 8],
    pub max_request_bytes: usize,
    pub result_limits: ResultLimits,
    /// Password guessing, throttled before MySQL (throttle/).
    pub throttle: crate::throttle::limiter::Throttle,
    /// Tokens verified by Envoy, mapped to MySQL accounts (tokens/); `None`: off.
    pub tokens: Option<crate::tokens::accounts::TokenAccounts>,
    /// Idempotency keys' retention and limits (idempotency/).
    pub idempotency: crate::idempotency::settings::IdempotencySettings,
    /// When records past the retention are deleted.
    pub idempotency_cleaner: crate::idempotency::cleaner::Cleaner,
    /// ExecuteBatch's limits (rpc/batch/).
    pub batch: crate::rpc::batch::settings::BatchSettings,
    pub stream_chunks: ChunkPolicy,
    /// When an Execute answer goes out in pieces (rows/spill.rs).
    pub unary_spill: SpillPolicy,
    /// Tables' column types from information_schema (types/column_types.rs).
    pub column_types: ColumnTypes,
    /// The earliest an `unauthenticated` answer may leave (mysql/account.rs).
    pub auth_failure_delay: Duration,
    /// The database target this shim serves (mysql/role.rs).
    pub role: Role,
    /// `FERRY_TRACK_GTID`: sessions carry their last write's GTID (sessions/gtid.rs).
    pub track_gtid: bool,
    /// `FERRY_READ_AFTER_WRITE_WAIT_MS`: a replica's longest wait for one.
    pub read_after_write_wait: Duration,
    pub metrics: Metrics,
    /// Spans to an OTLP collector (`FERRY_OTLP_ENDPOINT`; telemetry/trace.rs); `None`: off.
    pub tracing: Option<Tracing>,
}

impl App {
    pub fn new(cfg: &Config, sealer: Sealer) -> Self {
        let pools = Pools::new(&cfg.pool);
        App {
            metrics: Metrics::new(cfg.role, &pools.metrics),
            role: cfg.role,
            track_gtid: cfg.gtid.track,
            read_after_write_wait: cfg.gtid.wait,
            pools,
            pins: Pins::new(&cfg.pins),
            kept: SettingsPool::new(&cfg.settings_pool),
            sealer,
            state: cfg.state,
            instance: crate::sessions::seal::random(),
            max_request_bytes: cfg.listen.max_request_bytes,
            result_limits: cfg.result_limits,
            batch: cfg.batch,
            idempotency: cfg.idempotency,
            throttle: crate::throttle::limiter::Throttle::new(cfg.throttle),
            tokens: None,
            idempotency_cleaner: Default::default(),
            stream_chunks: cfg.stream_chunks,
            unary_spill: cfg.unary_spill,
            column_types: ColumnTypes::new(cfg.column_types),
            auth_failure_delay: cfg.listen.auth_failure_delay,
            tracing: None,
        }
    }
}

impl App {
    /// This process's instance, as sessions and the `ferry-shim-instance` header show it.
    pub fn instance_hex(&self) -> String {
        crate::sessions::seal::hex(&self.instance)
    }
}
