//! The shim's settings, all from the environment (defaults match scripts/env.sh).
use crate::mysql::account::AccountPolicy;
use crate::mysql::role::Role;
use crate::mysql::target::MysqlTarget;
use crate::mysql::tls::MysqlTls;
use crate::rows::result::ResultLimits;
use crate::rows::sink::ChunkPolicy;
use crate::telemetry::log::Level;
use crate::tls::listen::ListenTls;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Sessions: sealing and pins (sessions/seal.rs, sessions/pins.rs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionSettings {
    /// `FERRY_SESSION_KEYS_FILE` (unset: a random key per process, logged as a warning).
    pub keys_file: Option<PathBuf>,
    /// `FERRY_SESSION_TTL_SECS` (86400): a session unused this long is refused.
    pub ttl: Duration,
    /// `FERRY_TXN_IDLE_SECS` (20, as PlanetScale): an open transaction idle this long is rolled back.
    pub txn_idle: Duration,
    /// `FERRY_SESSION_STATE_IDLE_SECS` (60): a pin holding session state only.
    pub state_idle: Duration,
    /// `FERRY_SESSION_QUEUE_MAX` (64): requests of one session that may wait for it.
    pub queue_max: usize,
    /// `FERRY_POOL_MAX_PINNED` (3/4 of FERRY_POOL_MAX, rounded down): pins per user,
    /// so unpinned statements always have connections left; 0 refuses transactions.
    pub max_pinned: usize,
}

#[derive(Clone, Debug)]
pub struct Config {
    /// `FERRY_SHIM_ADDR` (127.0.0.1:8081): h2c + HTTP/1.1 listener.
    pub listen: SocketAddr,
    /// `FERRY_SHIM_ADVERTISE` (the TCP listen address): this shim's address as Envoy's
    /// cluster knows it, sealed into sessions so a pinned one is routed back here.
    pub advertise: String,
    /// `FERRY_SHIM_THREADS` (1): the runtime's worker threads.
    pub threads: usize,
    /// `FERRY_SHIM_TLS_CERT` / `_KEY` / `_CLIENT_CA` (unset: plain h2c): TLS, and
    /// optionally client certificates, on the TCP listener (tls/listen.rs).
    pub listen_tls: Option<ListenTls>,
    /// `FERRY_SHIM_UNIX` (unset): an extra unix-socket listener.
    pub unix_listen: Option<PathBuf>,
    /// `FERRY_MYSQL_SOCKET`, else `FERRY_MYSQL_HOST` (127.0.0.1) / `FERRY_MYSQL_PORT` (33306).
    pub mysql: MysqlTarget,
    /// `FERRY_MYSQL_TLS` (verify_identity for a MySQL on another host, else disabled),
    /// `FERRY_MYSQL_TLS_CA`, `_SERVER_NAME`, `_CERT`, `_KEY` (mysql/tls.rs).
    pub mysql_tls: MysqlTls,
    /// `FERRY_MYSQL_DATABASE` (ferry).
    pub database: String,
    /// `FERRY_POOL_MAX` (16): MySQL connections per credential.
    pub pool_max: usize,
    /// `FERRY_MAX_POOLS` (64): credentials with a pool; the least recently used goes first.
    pub max_pools: usize,
    /// `FERRY_POOL_IDLE_SECS` (60): idle connections and unused pools are closed after this.
    pub pool_idle: Duration,
    /// `FERRY_POOL_CONN_LIFETIME_SECS` (600): a connection is replaced after this, so a
    /// changed password or dropped user stops working within a bounded time.
    pub conn_lifetime: Duration,
    /// `FERRY_POOL_WAIT_SECS` (10): wait for a connection (pool full or MySQL slow to accept).
    pub pool_wait: Duration,
    /// `FERRY_SHIM_MAX_REQUEST_BYTES` (64 MiB).
    pub max_request_bytes: usize,
    /// `FERRY_SHIM_MAX_RESULT_BYTES` (64 MiB): the row data one Execute may buffer;
    /// `FERRY_SHIM_MAX_RESULT_ROWS` (100,000): its rows.
    pub result_limits: ResultLimits,
    /// `FERRY_STREAM_CHUNK_ROWS` (1000) / `FERRY_STREAM_CHUNK_BYTES` (262144): a
    /// StreamExecute message holds at most this many rows / bytes of rows
    /// (whichever is reached first; a single larger row goes alone). Streams
    /// have no row cap; each holds a few chunks in memory at most.
    pub stream_chunks: ChunkPolicy,
    /// `FERRY_SHIM_UNARY_STREAM_AFTER_BYTES` (1 MiB): an Execute answer whose rows
    /// pass this many bytes goes out in pieces while MySQL still sends them
    /// (rows/spill.rs); 0 sends every answer whole. Smaller answers, and every failure
    /// before this point, are answered whole with their HTTP status.
    pub unary_stream_after: usize,
    /// `FERRY_COLUMN_TYPE_CACHE` (1024): tables whose column types (and MariaDB JSON
    /// columns) are kept from information_schema; 0 never looks them up
    /// (types/column_types.rs). `FERRY_COLUMN_TYPE_TTL_SECS` (30): how long one is kept.
    pub column_type_cache: usize,
    pub column_type_ttl: Duration,
    /// `FERRY_DENY_USERS`, `FERRY_PASSWORD_PLUGINS`, `FERRY_VERIFY_ACCOUNT`: who is served.
    pub account: AccountPolicy,
    /// `FERRY_AUTH_FAILURE_DELAY_MS` (250): every `unauthenticated` answer leaves no
    /// sooner than this after the request arrived, so a refusal before MySQL is
    /// asked and one after a login look alike (and password guessing is slowed).
    pub auth_failure_delay: Duration,
    pub sessions: SessionSettings,
    /// `FERRY_LOG` (info).
    pub log_level: Level,
    /// `FERRY_SHIM_ROLE` (primary): which database target this shim serves (mysql/role.rs).
    pub role: Role,
    /// `FERRY_TRACK_GTID` (off): a primary puts the GTID of a session's last write
    /// in its session (`read_after_write_gtid`), for read-your-writes on replicas.
    pub track_gtid: bool,
    /// `FERRY_READ_AFTER_WRITE_WAIT_MS` (500): how long a replica waits to reach a
    /// session's GTID before answering 503 (the read then goes to the primary).
    pub read_after_write_wait: Duration,
    /// `FERRY_OTLP_ENDPOINT` (unset: no tracing): an OTLP/gRPC collector,
    /// `http://host:port`, that gets the shim's spans (telemetry/trace.rs).
    pub otlp_endpoint: Option<String>,
    /// `FERRY_TRACE_SQL` (off): spans carry the statement's text (`db.query.text`).
    pub trace_sql: bool,
}

impl Config {
    pub fn from_env() -> Result<Config, String> {
        Config::from_lookup(|name| std::env::var(name).ok())
    }

    /// Builds the settings from any variable source (tests pass their own).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Config, String> {
        let var = |name: &str| lookup(name).filter(|v| !v.is_empty());
        let parsed = |name: &str, default: u64| -> Result<u64, String> {
            match var(name) {
                None => Ok(default),
                Some(v) => v
                    .parse()
                    .map_err(|_| format!("{name}={v:?} is not a number")),
            }
        };
        let secs = |name: &str, default: u64| {
            parsed(name, default).map(|s| Duration::from_secs(s).max(Duration::from_secs(1)))
        };
        let size = |name: &str, default: usize| {
            parsed(name, default as u64).map(|n| usize::try_from(n).unwrap_or(usize::MAX))
        };
        let mysql = match var("FERRY_MYSQL_SOCKET") {
            Some(path) => MysqlTarget::Socket(path.into()),
            None => MysqlTarget::Tcp {
                host: var("FERRY_MYSQL_HOST").unwrap_or_else(|| "127.0.0.1".into()),
                port: match var("FERRY_MYSQL_PORT") {
                    None => 33306,
                    Some(v) => v
                        .parse()
                        .map_err(|_| format!("FERRY_MYSQL_PORT={v:?} is not a port"))?,
                },
            },
        };
        let mysql_tls = MysqlTls::from_vars(var, &mysql)?;
        let pool_max = size("FERRY_POOL_MAX", 16)?;
        if pool_max == 0 {
            return Err("FERRY_POOL_MAX must be at least 1".into());
        }
        // A comma-separated list; `none` empties it.
        let list = |name: &str, default: &[&str]| -> Vec<String> {
            match var(name) {
                None => default.iter().map(|s| s.to_string()).collect(),
                Some(v) if v.trim().eq_ignore_ascii_case("none") => Vec::new(),
                Some(v) => v
                    .split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
                    .collect(),
            }
        };
        let verify_account = match var("FERRY_VERIFY_ACCOUNT").as_deref() {
            None | Some("true" | "1" | "yes") => true,
            Some("false" | "0" | "no") => false,
            Some(v) => return Err(format!("FERRY_VERIFY_ACCOUNT={v:?} is not true or false")),
        };
        let serve_global_privileges = match var("FERRY_SERVE_GLOBAL_PRIVILEGES").as_deref() {
            None | Some("false" | "0" | "no") => false,
            Some("true" | "1" | "yes") => true,
            Some(v) => {
                return Err(format!(
                    "FERRY_SERVE_GLOBAL_PRIVILEGES={v:?} is not true or false"
                ))
            }
        };
        let account = AccountPolicy {
            deny_users: list(
                "FERRY_DENY_USERS",
                crate::mysql::account::DEFAULT_DENY_USERS,
            ),
            password_plugins: list(
                "FERRY_PASSWORD_PLUGINS",
                crate::mysql::account::DEFAULT_PASSWORD_PLUGINS,
            )
            .into_iter()
            .map(|p| p.to_ascii_lowercase())
            .collect(),
            verify_account,
            serve_global_privileges,
        };
        let log_level = match var("FERRY_LOG") {
            None => Level::Info,
            Some(v) => Level::parse(&v)
                .ok_or_else(|| format!("FERRY_LOG={v:?} is not one of error, warn, info, debug"))?,
        };
        let role = match var("FERRY_SHIM_ROLE") {
            None => Role::Primary,
            Some(v) => Role::parse(&v).ok_or_else(|| {
                format!("FERRY_SHIM_ROLE={v:?} is not primary or replica (the database target this shim serves)")
            })?,
        };
        let track_gtid = match var("FERRY_TRACK_GTID").as_deref() {
            None | Some("false" | "0" | "no" | "off") => false,
            Some("true" | "1" | "yes" | "on") => true,
            Some(v) => return Err(format!("FERRY_TRACK_GTID={v:?} is not true or false")),
        };
        let otlp_endpoint = var("FERRY_OTLP_ENDPOINT");
        if let Some(e) = &otlp_endpoint {
            // Plain gRPC only (a collector next to the shim): no TLS is built in.
            if !e.starts_with("http://") {
                return Err(format!(
                    "FERRY_OTLP_ENDPOINT={e:?} is not an http://host:port OTLP/gRPC endpoint"
                ));
            }
        }
        let trace_sql = match var("FERRY_TRACE_SQL").as_deref() {
            None | Some("false" | "0" | "no" | "off") => false,
            Some("true" | "1" | "yes" | "on") => true,
            Some(v) => return Err(format!("FERRY_TRACE_SQL={v:?} is not true or false")),
        };
        let listen = match var("FERRY_SHIM_ADDR") {
            None => SocketAddr::from(([127, 0, 0, 1], 8081)),
            Some(v) => v
                .parse()
                .map_err(|_| format!("FERRY_SHIM_ADDR={v:?} is not an ip:port"))?,
        };
        Ok(Config {
            listen,
            advertise: var("FERRY_SHIM_ADVERTISE").unwrap_or_else(|| listen.to_string()),
            listen_tls: ListenTls::from_vars(var)?,
            unix_listen: var("FERRY_SHIM_UNIX").map(PathBuf::from),
            mysql,
            mysql_tls,
            database: var("FERRY_MYSQL_DATABASE").unwrap_or_else(|| "ferry".into()),
            pool_max,
            max_pools: size("FERRY_MAX_POOLS", 64)?.max(1),
            threads: size("FERRY_SHIM_THREADS", 1)?.max(1),
            pool_idle: secs("FERRY_POOL_IDLE_SECS", 60)?,
            conn_lifetime: secs("FERRY_POOL_CONN_LIFETIME_SECS", 600)?,
            pool_wait: secs("FERRY_POOL_WAIT_SECS", 10)?,
            max_request_bytes: size("FERRY_SHIM_MAX_REQUEST_BYTES", 64 << 20)?,
            result_limits: ResultLimits {
                bytes: size("FERRY_SHIM_MAX_RESULT_BYTES", 64 << 20)?,
                rows: size("FERRY_SHIM_MAX_RESULT_ROWS", 100_000)?.max(1),
            },
            stream_chunks: ChunkPolicy {
                rows: size("FERRY_STREAM_CHUNK_ROWS", 1000)?.max(1),
                bytes: size("FERRY_STREAM_CHUNK_BYTES", 256 << 10)?.max(1),
            },
            unary_stream_after: size("FERRY_SHIM_UNARY_STREAM_AFTER_BYTES", 1 << 20)?,
            column_type_cache: size("FERRY_COLUMN_TYPE_CACHE", 1024)?,
            column_type_ttl: secs("FERRY_COLUMN_TYPE_TTL_SECS", 30)?,
            account,
            sessions: SessionSettings {
                keys_file: var("FERRY_SESSION_KEYS_FILE").map(PathBuf::from),
                ttl: secs("FERRY_SESSION_TTL_SECS", 86_400)?,
                txn_idle: secs("FERRY_TXN_IDLE_SECS", 20)?,
                state_idle: secs("FERRY_SESSION_STATE_IDLE_SECS", 60)?,
                queue_max: size("FERRY_SESSION_QUEUE_MAX", 64)?.max(1),
                max_pinned: size("FERRY_POOL_MAX_PINNED", pool_max * 3 / 4)?.min(pool_max),
            },
            auth_failure_delay: Duration::from_millis(parsed("FERRY_AUTH_FAILURE_DELAY_MS", 250)?),
            log_level,
            role,
            track_gtid,
            read_after_write_wait: Duration::from_millis(parsed(
                "FERRY_READ_AFTER_WRITE_WAIT_MS",
                500,
            )?),
            otlp_endpoint,
            trace_sql,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_overrides() {
        let c = Config::from_lookup(|_| None).unwrap();
        assert_eq!(c.listen.to_string(), "127.0.0.1:8081");
        assert_eq!(
            c.mysql,
            MysqlTarget::Tcp {
                host: "127.0.0.1".into(),
                port: 33306
            }
        );
        assert_eq!(
            (c.database.as_str(), c.pool_max, c.max_pools),
            ("ferry", 16, 64)
        );
        assert_eq!(c.max_request_bytes, 64 << 20);
        assert_eq!(
            c.stream_chunks,
            ChunkPolicy {
                rows: 1000,
                bytes: 262_144
            }
        );
        assert_eq!(c.account, AccountPolicy::default());
        assert!(c.account.deny_users.iter().any(|u| u == "root"));
        assert_eq!(c.auth_failure_delay, Duration::from_millis(250));
        assert_eq!(
            (
                c.sessions.txn_idle,
                c.sessions.max_pinned,
                c.sessions.keys_file
            ),
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
        assert_eq!(c.mysql, MysqlTarget::Socket("/tmp/my.sock".into()));
        assert_eq!((c.pool_max, c.log_level), (4, Level::Debug));
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
        assert!(c.account.serve_global_privileges);
        assert_eq!(c.account.deny_users, ["admin", "ops"]);
        assert_eq!(c.account.password_plugins, ["ed25519"]);
        assert!(!c.account.verify_account);
        let c = Config::from_lookup(|n| (n == "FERRY_DENY_USERS").then(|| "none".into())).unwrap();
        assert!(c.account.deny_users.is_empty());
        assert!(
            Config::from_lookup(|n| (n == "FERRY_VERIFY_ACCOUNT").then(|| "maybe".into())).is_err()
        );

        assert_eq!(
            (c.role, c.track_gtid, c.read_after_write_wait),
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
            (c.role, c.track_gtid, c.read_after_write_wait),
            (Role::Replica, true, Duration::from_millis(50))
        );
        let e = Config::from_lookup(|n| (n == "FERRY_SHIM_ROLE").then(|| "secondary".into()))
            .unwrap_err();
        assert!(e.contains("FERRY_SHIM_ROLE=\"secondary\""), "{e}");
        assert!(
            Config::from_lookup(|n| (n == "FERRY_TRACK_GTID").then(|| "maybe".into())).is_err()
        );
        assert!(Config::from_lookup(|n| (n == "FERRY_POOL_MAX").then(|| "0".to_string())).is_err());
        assert_eq!((c.otlp_endpoint, c.trace_sql), (None, false));
        let env = |name: &str| match name {
            "FERRY_OTLP_ENDPOINT" => Some("http://127.0.0.1:4317".to_string()),
            "FERRY_TRACE_SQL" => Some("1".to_string()),
            _ => None,
        };
        let c = Config::from_lookup(env).unwrap();
        assert_eq!(
            (c.otlp_endpoint.as_deref(), c.trace_sql),
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
}
