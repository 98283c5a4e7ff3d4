//! The shim's settings, all from the environment. Each module that has
//! settings owns them: its table (`SETTINGS`: name, default, meaning) and its
//! settings struct, parsed with settings.rs's helpers. This file gathers them:
//! [`SECTIONS`] is every setting the shim reads, in the order of
//! docs/reference/settings.md, which a test checks against it.
use crate::http::settings::{self as listen, ListenSettings};
use crate::idempotency::settings::{self as idempotency, IdempotencySettings};
use crate::mysql::pool_settings::{self as pool, PoolSettings};
use crate::mysql::role::{self, Role};
use crate::mysql::{account, target};
use crate::rows::result::{self, ResultLimits};
use crate::rows::sink::{self, ChunkPolicy};
use crate::rows::spill::{self, SpillPolicy};
use crate::rpc::batch::settings::{self as batch, BatchSettings};
use crate::sessions::gtid::{self, GtidSettings};
use crate::sessions::pins::{self, PinSettings};
use crate::sessions::seal::{self, SealSettings};
use crate::sessions::settings_pool::{self, SettingsPoolSettings};
use crate::sessions::state::{self, StateSettings};
use crate::settings::{Setting, Vars};
use crate::telemetry::log::{self, Level};
use crate::telemetry::trace::{self, TraceSettings};
use crate::throttle::settings::{self as throttle, ThrottleSettings};
use crate::tls::listen::{self as listen_tls, ListenTls};
use crate::tokens::settings::{self as tokens, TokenSettings};
use crate::types::column_types::{self, ColumnTypeSettings};

/// Every setting, by section (the reference's order).
pub const SECTIONS: &[(&str, &[Setting])] = &[
    ("The listener", listen::SETTINGS),
    ("TLS on the listener", listen_tls::SETTINGS),
    ("MySQL", target::SETTINGS),
    ("TLS to MySQL", crate::mysql::tls::SETTINGS),
    ("Pools", pool::SETTINGS),
    ("Who is served", account::SETTINGS),
    ("Password guessing", throttle::SETTINGS),
    ("Tokens", tokens::SETTINGS),
    ("Sessions", seal::SETTINGS),
    ("Pins", pins::SETTINGS),
    ("Session state", state::SETTINGS),
    ("Settings pool", settings_pool::SETTINGS),
    ("Role and read-your-writes", role::SETTINGS),
    ("Read-your-writes", gtid::SETTINGS),
    ("Results", result::SETTINGS),
    ("Streams", sink::SETTINGS),
    ("Large Execute answers", spill::SETTINGS),
    ("Batches", batch::SETTINGS),
    ("Idempotency keys", idempotency::SETTINGS),
    ("Column types", column_types::SETTINGS),
    ("Logs", log::SETTINGS),
    ("Tracing", trace::SETTINGS),
];

#[derive(Clone, Debug)]
pub struct Config {
    pub listen: ListenSettings,
    pub listen_tls: Option<ListenTls>,
    pub pool: PoolSettings,
    pub seal: SealSettings,
    pub pins: PinSettings,
    pub state: StateSettings,
    pub settings_pool: SettingsPoolSettings,
    pub role: Role,
    pub gtid: GtidSettings,
    pub result_limits: ResultLimits,
    pub stream_chunks: ChunkPolicy,
    pub unary_spill: SpillPolicy,
    pub column_types: ColumnTypeSettings,
    pub batch: BatchSettings,
    pub idempotency: IdempotencySettings,
    pub throttle: ThrottleSettings,
    pub tokens: TokenSettings,
    pub log_level: Level,
    pub trace: TraceSettings,
}

impl Config {
    pub fn from_env() -> Result<Config, String> {
        Config::from_lookup(|name| std::env::var(name).ok())
    }

    /// Builds the settings from any variable source (tests pass their own).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Config, String> {
        let tables: Vec<&[Setting]> = SECTIONS.iter().map(|(_, t)| *t).collect();
        let vars = Vars::new(&lookup, &tables);
        let role = Role::from_vars(&vars)?;
        let pool = PoolSettings {
            replica: role == Role::Replica,
            ..PoolSettings::from_vars(&vars)?
        };
        let stream_chunks = ChunkPolicy::from_vars(&vars)?;
        Ok(Config {
            listen: ListenSettings::from_vars(&vars)?,
            listen_tls: ListenTls::from_vars(&vars)?,
            seal: SealSettings::from_vars(&vars)?,
            pins: PinSettings::from_vars(&vars, pool.pool_max)?,
            state: StateSettings::from_vars(&vars)?,
            settings_pool: SettingsPoolSettings::from_vars(&vars, pool.pool_max)?,
            pool,
            role,
            gtid: GtidSettings::from_vars(&vars)?,
            result_limits: ResultLimits::from_vars(&vars)?,
            unary_spill: SpillPolicy::from_vars(&vars, stream_chunks.bytes)?,
            stream_chunks,
            column_types: ColumnTypeSettings::from_vars(&vars)?,
            batch: BatchSettings::from_vars(&vars)?,
            idempotency: IdempotencySettings::from_vars(&vars)?,
            throttle: ThrottleSettings::from_vars(&vars)?,
            tokens: TokenSettings::from_vars(&vars)?,
            log_level: Level::from_vars(&vars)?,
            trace: TraceSettings::from_vars(&vars)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mysql::target::MysqlTarget;
    use std::collections::BTreeSet;
    use std::sync::Mutex;
    use std::time::Duration;

    #[test]
    fn defaults_and_overrides() {
        let c = Config::from_lookup(|_| None).unwrap();
        assert_eq!(c.listen.addr.to_string(), "127.0.0.1:8081");
        assert_eq!(
            c.pool.target,
            MysqlTarget::Tcp {
                host: "127.0.0.1".into(),
                port: 33306
            }
        );
        assert_eq!(
            (c.pool.database.as_str(), c.pool.pool_max, c.pool.max_pools),
            ("ferry", 16, 64)
        );
        assert_eq!(c.listen.max_request_bytes, 64 << 20);
        assert_eq!(
            c.stream_chunks,
            ChunkPolicy {
                rows: 1000,
                bytes: 262_144
            }
        );
        assert_eq!(
            c.pool.account,
            crate::mysql::account::AccountPolicy::default()
        );
        assert!(c.pool.account.deny_users.iter().any(|u| u == "root"));
        assert_eq!(c.listen.auth_failure_delay, Duration::from_millis(250));
        assert_eq!(
            (c.pins.txn_idle, c.pins.max_pinned, c.seal.keys_file),
            (Duration::from_secs(20), 12, None)
        );

        let env = |name: &str| match name {
            "FERRY_MYSQL_SOCKET" => Some("/tmp/my.sock".to_string()),
            "FERRY_MYSQL_PORT" => Some("1".to_string()), // ignored: the socket wins
            "FERRY_POOL_MAX" => Some("4".to_string()),
            "FERRY_LOG" => Some("debug".to_string()),
            "FERRY_STREAM_CHUNK_ROWS" => Some("0".to_string()), // at least one
            "FERRY_STREAM_CHUNK_BYTES" => Some("4096".to_string()),
            _ => None,
        };
        let c = Config::from_lookup(env).unwrap();
        assert_eq!(c.pool.target, MysqlTarget::Socket("/tmp/my.sock".into()));
        assert_eq!((c.pool.pool_max, c.log_level), (4, Level::Debug));
        assert_eq!(
            c.stream_chunks,
            ChunkPolicy {
                rows: 1,
                bytes: 4096
            }
        );

        let env = |name: &str| match name {
            "FERRY_DENY_USERS" => Some(" admin, ,ops ".to_string()),
            "FERRY_PASSWORD_PLUGINS" => Some("ED25519".to_string()),
            "FERRY_VERIFY_ACCOUNT" => Some("false".to_string()),
            "FERRY_SERVE_GLOBAL_PRIVILEGES" => Some("true".to_string()),
            _ => None,
        };
        let c = Config::from_lookup(env).unwrap();
        assert!(c.pool.account.serve_global_privileges);
        assert_eq!(c.pool.account.deny_users, ["admin", "ops"]);
        assert_eq!(c.pool.account.password_plugins, ["ed25519"]);
        assert!(!c.pool.account.verify_account);
        let c = Config::from_lookup(|n| (n == "FERRY_DENY_USERS").then(|| "none".into())).unwrap();
        assert!(c.pool.account.deny_users.is_empty());
        assert!(
            Config::from_lookup(|n| (n == "FERRY_VERIFY_ACCOUNT").then(|| "maybe".into())).is_err()
        );

        assert_eq!(
            (c.role, c.gtid.track, c.gtid.wait),
            (Role::Primary, false, Duration::from_millis(500))
        );
        let env = |name: &str| match name {
            "FERRY_SHIM_ROLE" => Some("Replica".to_string()),
            "FERRY_TRACK_GTID" => Some("1".to_string()),
            "FERRY_READ_AFTER_WRITE_WAIT_MS" => Some("50".to_string()),
            _ => None,
        };
        let c = Config::from_lookup(env).unwrap();
        assert_eq!(
            (c.role, c.gtid.track, c.gtid.wait),
            (Role::Replica, true, Duration::from_millis(50))
        );
        let e = Config::from_lookup(|n| (n == "FERRY_SHIM_ROLE").then(|| "secondary".into()))
            .unwrap_err();
        assert!(e.contains("FERRY_SHIM_ROLE=\"secondary\""), "{e}");
        assert!(
            Config::from_lookup(|n| (n == "FERRY_TRACK_GTID").then(|| "maybe".into())).is_err()
        );
        assert!(Config::from_lookup(|n| (n == "FERRY_POOL_MAX").then(|| "0".to_string())).is_err());
        assert_eq!((c.trace.otlp_endpoint, c.trace.sql), (None, false));
        let env = |name: &str| match name {
            "FERRY_OTLP_ENDPOINT" => Some("http://127.0.0.1:4317".to_string()),
            "FERRY_TRACE_SQL" => Some("1".to_string()),
            _ => None,
        };
        let c = Config::from_lookup(env).unwrap();
        assert_eq!(
            (c.trace.otlp_endpoint.as_deref(), c.trace.sql),
            (Some("http://127.0.0.1:4317"), true)
        );
        assert!(Config::from_lookup(
            |n| (n == "FERRY_OTLP_ENDPOINT").then(|| "127.0.0.1:4317".to_string())
        )
        .is_err());
        assert!(
            Config::from_lookup(|n| (n == "FERRY_SHIM_ADDR").then(|| "nope".to_string())).is_err()
        );
    }

    #[test]
    fn every_flag_takes_the_same_spellings() {
        for name in [
            "FERRY_VERIFY_ACCOUNT",
            "FERRY_SERVE_GLOBAL_PRIVILEGES",
            "FERRY_TRACK_GTID",
            "FERRY_TRACE_SQL",
        ] {
            for (v, want) in [("on", true), ("Off", false), ("YES", true), ("0", false)] {
                let c = Config::from_lookup(|n| (n == name).then(|| v.to_owned())).unwrap();
                let got = match name {
                    "FERRY_VERIFY_ACCOUNT" => c.pool.account.verify_account,
                    "FERRY_SERVE_GLOBAL_PRIVILEGES" => c.pool.account.serve_global_privileges,
                    "FERRY_TRACK_GTID" => c.gtid.track,
                    _ => c.trace.sql,
                };
                assert_eq!(got, want, "{name}={v}");
            }
        }
    }

    /// Every variable the shim reads is in a table, and every one in a table is read.
    #[test]
    fn the_tables_are_what_is_read() {
        let read = Mutex::new(BTreeSet::new());
        let record = |name: &str, value: Option<String>| {
            read.lock().unwrap().insert(name.to_owned());
            value
        };
        Config::from_lookup(|name| record(name, None)).unwrap();
        // The listener's client CA is read only with its certificate and key.
        let _ = Config::from_lookup(|name| {
            let tls = matches!(name, "FERRY_SHIM_TLS_CERT" | "FERRY_SHIM_TLS_KEY");
            record(name, tls.then(|| "/nonexistent".to_owned()))
        });
        let read = read.into_inner().unwrap();
        let listed: BTreeSet<String> = SECTIONS
            .iter()
            .flat_map(|(_, t)| t.iter().map(|s| s.name.to_owned()))
            .collect();
        assert_eq!(read, listed);
    }

    /// docs/reference/settings.md shows the tables as they are, defaults included;
    /// on a difference, the expected text is printed.
    #[test]
    fn the_reference_is_the_code() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/reference/settings.md");
        let doc = std::fs::read_to_string(path).unwrap();
        let (begin, end) = (
            "<!-- shim settings: begin -->",
            "<!-- shim settings: end -->",
        );
        let start = doc.find(begin).expect("the begin marker") + begin.len();
        let stop = doc.find(end).expect("the end marker");
        let expected = crate::settings::reference(SECTIONS);
        assert!(
            doc[start..stop] == expected,
            "docs/reference/settings.md between the markers should read:\n{expected}"
        );
    }
}
