//! The pools' settings (mysql/pool.rs): where MySQL is and how to reach it, who
//! is served, and how many connections each credential gets.
use crate::mysql::account::AccountPolicy;
use crate::mysql::target::MysqlTarget;
use crate::mysql::tls::MysqlTls;
use crate::settings::{Setting, Vars};
use std::time::Duration;

/// The pools' settings: where MySQL is and how to reach it, who is served,
/// and how many connections each credential gets.
#[derive(Clone, Debug)]
pub struct PoolSettings {
    pub target: MysqlTarget,
    pub tls: MysqlTls,
    pub account: AccountPolicy,
    pub database: String,
    pub pool_max: usize,
    pub max_pools: usize,
    pub idle: Duration,
    pub lifetime: Duration,
    pub wait: Duration,
    /// This shim serves a replica (`FERRY_SHIM_ROLE=replica`, set by config.rs): on
    /// Vitess its connections target vtgate's replica tablets (`<database>@replica`).
    pub replica: bool,
}

pub const SETTINGS: &[Setting] = &[
    Setting {
        name: "FERRY_MYSQL_DATABASE",
        default: "ferry",
        about: "the database of every connection (the session's branch)",
    },
    Setting {
        name: "FERRY_POOL_MAX",
        default: "16",
        about: "MySQL connections per credential (at least 1)",
    },
    Setting {
        name: "FERRY_MAX_POOLS",
        default: "64",
        about: "credentials with a pool; the least recently used goes first",
    },
    Setting {
        name: "FERRY_POOL_IDLE_SECS",
        default: "60",
        about: "idle connections and unused pools are closed after this",
    },
    Setting {
        name: "FERRY_POOL_CONN_LIFETIME_SECS",
        default: "600",
        about: "a connection is replaced after this, so a changed password or a dropped user stops working within a bounded time",
    },
    Setting {
        name: "FERRY_POOL_WAIT_SECS",
        default: "10",
        about: "the longest wait for a connection (pool full, MySQL slow to accept), then `resource_exhausted` (429)",
    },
];

impl PoolSettings {
    pub fn from_vars(vars: &Vars<'_>) -> Result<Self, String> {
        let target = MysqlTarget::from_vars(vars)?;
        let pool_max = vars.size("FERRY_POOL_MAX")?;
        if pool_max == 0 {
            return Err("FERRY_POOL_MAX must be at least 1".into());
        }
        Ok(PoolSettings {
            tls: MysqlTls::from_vars(vars, &target)?,
            target,
            account: AccountPolicy::from_vars(vars)?,
            database: vars.text("FERRY_MYSQL_DATABASE").unwrap_or_default(),
            pool_max,
            max_pools: vars.size("FERRY_MAX_POOLS")?.max(1),
            idle: vars.secs("FERRY_POOL_IDLE_SECS")?,
            lifetime: vars.secs("FERRY_POOL_CONN_LIFETIME_SECS")?,
            wait: vars.secs("FERRY_POOL_WAIT_SECS")?,
            replica: false,
        })
    }
}
