//! One bounded MySQL pool per credential. MySQL is the source of truth for
//! users and passwords: a credential is good when MySQL accepts a connection
//! made with it, and a pooled connection is only ever reused by requests that
//! carry the same user and password.
//!
//! Pools are keyed by user + a keyed hash of the password (the password itself
//! is kept only to build connections and to confirm a match; it is never
//! logged). A new credential's pool is admitted once MySQL accepts its first
//! connection; at most `max_pools` are admitted, the least recently used is
//! dropped to make room, and pools unused for `pool_idle` are dropped by
//! `sweep`. A dropped pool closes its idle connections once its in-flight ones
//! return.
//!
//! Before a new credential's pool is admitted, its first connection must show
//! that the client's password is what let it in (mysql/account.rs): the pool of an
//! account that MySQL would let in by the shim's own OS identity is never
//! admitted, and no request is served from it.
//!
//! Every connection handed out is armed to be reset (COM_RESET_CONNECTION)
//! when it goes back to the pool; the executor disarms it only after proving
//! the statement left nothing behind. So a request that is cancelled halfway,
//! or a path that forgets, costs a reset, never a leaked transaction.
use crate::connect::error::ConnectError;
use crate::credentials::{constant_time_eq, Credentials};
use crate::errors::mysql::connect_code;
use crate::mysql::account::{AccountPolicy, Kind, Refusal, Served, VerifyError, AUTH_FAILED};
use crate::mysql::pool_metrics::{PoolMetrics, NEW_CREDENTIAL};
use crate::mysql::pool_settings::PoolSettings;
use crate::mysql::target::MysqlTarget;
use crate::mysql::tls::TlsMode;
use crate::telemetry::log::Level;
use ferry_proto::vitess::vtrpc::Code;
use mysql_async::prelude::Queryable as _;
use mysql_async::{Conn, OptsBuilder, Pool, PoolConstraints, PoolOpts};
use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct Key {
    user: String,
    password_hash: u64,
}

struct Entry {
    pool: Pool,
    password: String,
    last_used: Instant,
    id: u64,
}

#[derive(Default)]
struct State {
    /// Credentials MySQL has accepted.
    pools: HashMap<Key, Entry>,
    /// New credentials whose first connection is being opened.
    pending: HashMap<Key, Entry>,
    next_id: u64,
}

pub struct Pools {
    target: MysqlTarget,
    tls: Option<mysql_async::SslOpts>,
    tls_mode: TlsMode,
    database: String,
    pool_max: usize,
    max_pools: usize,
    idle: Duration,
    lifetime: Duration,
    wait: Duration,
    policy: AccountPolicy,
    /// Random per process: the hashes mean nothing outside it.
    hasher: RandomState,
    state: Mutex<State>,
    /// The server is Vitess's vtgate (FERRY_MYSQL_KIND, or seen on the first connection
    /// of each new credential): see [`Pools::is_vitess`].
    vitess: AtomicBool,
    /// A replica's shim (`FERRY_SHIM_ROLE=replica`): on Vitess, see [`Pools::db_name`].
    replica: bool,
    /// Wait times, timeouts and connect errors (telemetry/metrics.rs).
    pub metrics: PoolMetrics,
}

impl Pools {
    pub fn new(cfg: &PoolSettings) -> Self {
        Pools {
            target: cfg.target.clone(),
            tls: cfg.tls.ssl_opts(),
            tls_mode: cfg.tls.mode,
            database: cfg.database.clone(),
            pool_max: cfg.pool_max,
            max_pools: cfg.max_pools,
            idle: cfg.idle,
            lifetime: cfg.lifetime,
            wait: cfg.wait,
            policy: cfg.account.clone(),
            hasher: RandomState::new(),
            state: Mutex::new(State::default()),
            vitess: AtomicBool::new(cfg.account.kind == Kind::Vitess),
            replica: cfg.replica,
            metrics: PoolMetrics::default(),
        }
    }

    /// Whether the server is Vitess's vtgate. Known before any statement runs (a
    /// credential is served only after its first connection was seen). vtgate's
    /// COM_RESET_CONNECTION ends transactions and reserved connections but keeps
    /// the session's user variables, system settings and workload (vitess 24.0.4,
    /// `vtgateHandler.ComResetConnection`), so on Vitess a connection that may
    /// carry state is closed instead of reset (statement/source.rs).
    pub fn is_vitess(&self) -> bool {
        self.vitess.load(Ordering::Relaxed)
    }

    /// Each admitted pool's user and its connection counts, for /metrics.
    pub fn snapshot(&self) -> Vec<(String, std::sync::Arc<mysql_async::Metrics>)> {
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state
            .pools
            .iter()
            .map(|(k, e)| (k.user.clone(), e.pool.metrics()))
            .collect()
    }

    /// Idle connections of this credential's admitted pool right now (`None`: none
    /// is admitted).
    pub fn idle(&self, creds: &Credentials) -> Option<usize> {
        let key = Key {
            user: creds.user.clone(),
            password_hash: self.hasher.hash_one(&creds.password),
        };
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let entry = state.pools.get(&key)?;
        Some(
            entry
                .pool
                .metrics()
                .connections_in_pool
                .load(Ordering::Relaxed),
        )
    }

    /// An admitted pool with an idle connection right now, if any (for the
    /// health check: a ping on it costs no login).
    pub fn idle_pool(&self) -> Option<Pool> {
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state
            .pools
            .values()
            .find(|e| {
                e.pool
                    .metrics()
                    .connections_in_pool
                    .load(std::sync::atomic::Ordering::Relaxed)
                    > 0
            })
            .map(|e| e.pool.clone())
    }

    pub fn database(&self) -> &str {
        &self.database
    }

    /// Whether a login of `creds` would go to MySQL: the policy refuses some before
    /// (an empty password, a deny-listed name), with answers of their own.
    pub fn asks_mysql(&self, creds: &Credentials) -> bool {
        self.policy.precheck(creds).is_ok()
    }

    /// The database a connection opens. On Vitess a replica's shim names vtgate's
    /// tablet type with it (`ferry@replica`): vtgate then routes every statement of the
    /// connection to replica tablets (its `@replica` target; a reset keeps it, and
    /// clients cannot change it: `USE` is refused, ferry-wire statement.rs).
    fn db_name(&self) -> String {
        if self.replica && self.is_vitess() {
            format!("{}@replica", self.database)
        } else {
            self.database.clone()
        }
    }

    pub fn target(&self) -> &MysqlTarget {
        &self.target
    }

    /// A connection for these credentials, armed for reset on return (see the
    /// module comment). Errors are Connect errors: 401 when the credential is
    /// refused (by the policy or by MySQL, one message for all), 503 when MySQL
    /// cannot be reached, 429 when no connection of the pool frees up in time.
    pub async fn conn(&self, creds: &Credentials) -> Result<Conn, ConnectError> {
        self.policy
            .precheck(creds)
            .map_err(|r| refused(&creds.user, &r))?;
        let key = Key {
            user: creds.user.clone(),
            password_hash: self.hasher.hash_one(&creds.password),
        };
        let (pool, id, pending) = self.pool_for(&key, creds);
        let label = if pending {
            NEW_CREDENTIAL
        } else {
            creds.user.as_str()
        };
        let asked = Instant::now();
        let got = tokio::time::timeout(self.wait, pool.get_conn()).await;
        self.metrics
            .wait
            .with_label_values(&[label])
            .observe(asked.elapsed().as_secs_f64());
        match &got {
            Ok(Err(_)) => self
                .metrics
                .connect_errors
                .with_label_values(&[label])
                .inc(),
            Err(_) => self.metrics.wait_timeouts.with_label_values(&[label]).inc(),
            Ok(Ok(_)) => {}
        }
        let err = match got {
            Ok(Ok(conn)) if !pending => return Ok(conn),
            Ok(Ok(mut conn)) => match self.verify(&mut conn, creds).await {
                Ok(()) => {
                    self.promote(&key, id);
                    return Ok(conn);
                }
                Err(VerifyError::Refused(r)) => {
                    let _ = conn.disconnect().await;
                    refused(&creds.user, &r)
                }
                Err(VerifyError::Mysql(e)) => ConnectError::new(
                    Code::Unavailable,
                    format!("lost the MySQL connection while checking the account: {e}"),
                ),
            },
            Ok(Err(e)) => self.connect_failure(&e, &creds.user),
            // Every connection of this credential is busy (statements or pins).
            Err(_) => ConnectError::new(
                Code::ResourceExhausted,
                format!(
                    "no MySQL connection of user {:?} became free within {:?} (FERRY_POOL_MAX={}, FERRY_POOL_WAIT_SECS)",
                    creds.user, self.wait, self.pool_max
                ),
            ),
        };
        // A refused credential must not keep a pool; neither does a new pool
        // that never managed to open a connection.
        if pending || err.code == Code::Unauthenticated {
            self.forget(&key, id);
        }
        Err(err)
    }

    /// At start: the database must refuse a made-up user with a made-up password (one
    /// failed login; MariaDB counts it in Aborted_connects). `Err` when it lets one in;
    /// an unreachable database is logged and left to the health checks.
    pub async fn refuse_any_password(&self) -> Result<(), String> {
        if !self.policy.verify_account {
            return Ok(());
        }
        let random = || crate::sessions::seal::hex(&crate::sessions::seal::random::<8>());
        let made_up = Credentials {
            user: format!("ferry-probe-{}", random()),
            password: random(),
        };
        match Conn::new(self.side_opts(&made_up)).await {
            Ok(conn) => {
                let _ = conn.disconnect().await;
                Err(format!(
                    "{} at {} let a made-up user in with a made-up password: its authentication is off (Vitess: vtgate's --mysql-auth-server-impl none), so no password would prove anything; not served (FERRY_VERIFY_ACCOUNT=false skips this check)",
                    self.database, self.target
                ))
            }
            Err(mysql_async::Error::Server(_)) => Ok(()),
            Err(e) => {
                crate::log!(
                    Level::Warn,
                    "cannot check at start that MySQL refuses a wrong password",
                    mysql = self.target,
                    error = e
                );
                Ok(())
            }
        }
    }

    /// The account checks of a new credential (mysql/account.rs); on Vitess, also that
    /// vtgate refuses this user with a wrong password, so that its login proves one.
    async fn verify(&self, conn: &mut Conn, creds: &Credentials) -> Result<(), VerifyError> {
        let vitess = self
            .policy
            .is_vitess(conn)
            .await
            .map_err(VerifyError::Mysql)?;
        if vitess {
            self.vitess.store(true, Ordering::Relaxed);
            if self.replica {
                // Maybe opened before the server was known to be vtgate: its target now
                // (once per credential).
                conn.query_drop(format!("USE `{}`", self.db_name().replace('`', "``")))
                    .await
                    .map_err(VerifyError::Mysql)?;
            }
        }
        if self.policy.verify(conn, creds, vitess).await? == Served::Checked {
            return Ok(());
        }
        let wrong = Credentials {
            user: creds.user.clone(),
            password: crate::sessions::seal::hex(&crate::sessions::seal::random::<16>()),
        };
        match Conn::new(self.side_opts(&wrong)).await {
            Ok(probe) => {
                let _ = probe.disconnect().await;
                crate::log!(
                    Level::Error,
                    "vtgate accepts any password",
                    user = creds.user,
                    reason = Refusal::AnyPasswordAccepted
                );
                Err(VerifyError::Refused(Refusal::AnyPasswordAccepted))
            }
            // Access denied: vtgate checks passwords.
            Err(mysql_async::Error::Server(se)) if se.code == 1045 => Ok(()),
            Err(e) => Err(VerifyError::Mysql(e)),
        }
    }

    /// The pool for a credential, and whether it is still pending: a new
    /// credential's pool is only admitted (and may only evict another) once
    /// MySQL has accepted a connection from it, so a stream of bad passwords
    /// cannot push good pools out.
    fn pool_for(&self, key: &Key, creds: &Credentials) -> (Pool, u64, bool) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        let matches =
            |e: &Entry| constant_time_eq(e.password.as_bytes(), creds.password.as_bytes());
        // (A key whose stored password differs is a 64-bit hash collision
        // between two passwords of one user: the newcomer gets its own pool.)
        if let Some(entry) = state.pools.get_mut(key).filter(|e| matches(e)) {
            entry.last_used = now;
            return (entry.pool.clone(), entry.id, false);
        }
        if let Some(entry) = state.pending.get(key).filter(|e| matches(e)) {
            return (entry.pool.clone(), entry.id, true);
        }
        state.next_id += 1;
        let id = state.next_id;
        let pool = Pool::new(self.opts(creds));
        let entry = Entry {
            pool: pool.clone(),
            password: creds.password.clone(),
            last_used: now,
            id,
        };
        state.pending.insert(key.clone(), entry);
        (pool, id, true)
    }

    /// Admits a pending pool, evicting the least recently used one if full.
    fn promote(&self, key: &Key, id: u64) {
        // An admitted user's counters exist from 0 on, so they are scraped (and rate()
        // works) before their first event.
        self.metrics.wait_timeouts.with_label_values(&[&key.user]);
        self.metrics.connect_errors.with_label_values(&[&key.user]);
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        // Another request may have promoted or forgotten it already.
        if state.pending.get(key).is_none_or(|e| e.id != id) {
            return;
        }
        let Some(mut entry) = state.pending.remove(key) else {
            return;
        };
        if !state.pools.contains_key(key) && state.pools.len() >= self.max_pools {
            let oldest = state
                .pools
                .iter()
                .min_by_key(|(_, e)| e.last_used)
                .map(|(k, _)| k.clone());
            if let Some(oldest) = oldest {
                state.pools.remove(&oldest);
                crate::log!(
                    Level::Info,
                    "pool evicted (FERRY_MAX_POOLS reached)",
                    user = oldest.user
                );
            }
        }
        entry.last_used = Instant::now();
        state.pools.insert(key.clone(), entry);
    }

    fn forget(&self, key: &Key, id: u64) {
        let mut guard = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let state = &mut *guard;
        for map in [&mut state.pools, &mut state.pending] {
            if map.get(key).is_some_and(|e| e.id == id) {
                map.remove(key);
            }
        }
    }

    /// Drops pools unused for the idle time (and pending ones whose request
    /// was abandoned); call it periodically.
    pub fn sweep(&self) {
        let mut guard = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let state = &mut *guard;
        let idle = self.idle;
        for map in [&mut state.pools, &mut state.pending] {
            map.retain(|_, e| e.last_used.elapsed() < idle);
        }
    }

    pub fn len(&self) -> usize {
        self.state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pools
            .len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How to open a connection of these credentials outside the pool, for
    /// `KILL QUERY` (mysql/cancel.rs): the pool may be exhausted by the very
    /// statement to stop. The credential was admitted already (the statement
    /// runs on its pool).
    pub fn side_opts(&self, creds: &Credentials) -> OptsBuilder {
        self.opts(creds)
    }

    fn opts(&self, creds: &Credentials) -> OptsBuilder {
        let constraints = PoolConstraints::new(0, self.pool_max).unwrap_or_default();
        let pool_opts = PoolOpts::default()
            .with_constraints(constraints)
            .with_inactive_connection_ttl(self.idle)
            .with_ttl_check_interval(Duration::from_secs(1).max(self.idle / 2))
            .with_abs_conn_ttl(Some(self.lifetime))
            .with_abs_conn_ttl_jitter(Some(self.lifetime / 10))
            // Armed by default; disarmed per connection once proven clean.
            .with_reset_connection(true);
        let builder = OptsBuilder::default()
            .user(Some(creds.user.clone()))
            .pass(Some(creds.password.clone()))
            .db_name(Some(self.db_name()))
            .pool_opts(pool_opts)
            // We chose the transport; do not switch to a socket found via @@socket.
            .prefer_socket(false)
            // utf8mb4 in the server's default collation, on every connection and again
            // after every reset: the handshake asks for utf8mb4_general_ci, but MySQL 8's
            // COM_RESET_CONNECTION restores the global utf8mb4_0900_ai_ci, so string
            // comparisons ('a' = 'A ', 'ß' = 'ss') and the charset ids of fields would
            // depend on a pooled connection's history. (Resets run in the pool's
            // recycler, off the request path.)
            .setup(vec!["SET NAMES utf8mb4"])
            .tcp_nodelay(true);
        match &self.target {
            MysqlTarget::Socket(path) => builder.socket(Some(path.to_string_lossy().into_owned())),
            MysqlTarget::Tcp { host, port } => builder
                .ip_or_hostname(host.clone())
                .tcp_port(*port)
                .ssl_opts(self.tls.clone()),
        }
    }

    fn connect_failure(&self, e: &mysql_async::Error, user: &str) -> ConnectError {
        match e {
            mysql_async::Error::Server(se) => {
                let code = connect_code(se.code);
                if code == Code::Unauthenticated {
                    // MySQL's own message (and errno: 1045 or 1698, 1044 for a
                    // right password without the database...) would tell which
                    // accounts exist: logged, not answered.
                    crate::log!(
                        Level::Warn,
                        "mysql refused the login",
                        user = user,
                        errno = se.code,
                        error = se.message
                    );
                    return ConnectError::new(code, AUTH_FAILED);
                }
                ConnectError::new(
                    code,
                    format!(
                        "MySQL refused a connection: {} (errno {})",
                        se.message, se.code
                    ),
                )
            }
            other => match crate::mysql::tls::handshake_failure(other) {
                Some(why) => ConnectError::new(
                    Code::Unavailable,
                    format!(
                        "MySQL at {} failed TLS (FERRY_MYSQL_TLS={}): {why}",
                        self.target,
                        self.tls_mode.as_str()
                    ),
                ),
                None => ConnectError::new(
                    Code::Unavailable,
                    format!("MySQL is unreachable at {}: {other}", self.target),
                ),
            },
        }
    }
}

/// The client's answer to a credential the policy refuses; the reason is logged.
fn refused(user: &str, reason: &Refusal) -> ConnectError {
    crate::log!(
        Level::Warn,
        "credential refused",
        user = user,
        reason = reason
    );
    let message = match reason {
        Refusal::EmptyPassword => {
            "empty passwords are not accepted: the account's password is what authenticates"
        }
        _ => AUTH_FAILED,
    };
    ConnectError::new(Code::Unauthenticated, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pools(max_pools: usize) -> Pools {
        let mut cfg = crate::config::Config::from_lookup(|_| None).expect("default config");
        cfg.pool.max_pools = max_pools;
        Pools::new(&cfg.pool)
    }

    fn creds(user: &str, password: &str) -> Credentials {
        Credentials {
            user: user.into(),
            password: password.into(),
        }
    }

    fn key(p: &Pools, c: &Credentials) -> Key {
        Key {
            user: c.user.clone(),
            password_hash: p.hasher.hash_one(&c.password),
        }
    }

    #[tokio::test]
    async fn pools_are_admitted_per_credential_with_lru_eviction() {
        let p = pools(2);
        let a = creds("a", "pw");
        let (_, id_a, pending) = p.pool_for(&key(&p, &a), &a);
        assert!(
            pending && p.is_empty(),
            "not admitted before MySQL accepts it"
        );
        let (_, again, pending) = p.pool_for(&key(&p, &a), &a);
        assert_eq!(
            (again, pending),
            (id_a, true),
            "concurrent first requests share it"
        );
        p.promote(&key(&p, &a), id_a);
        let (_, again, pending) = p.pool_for(&key(&p, &a), &a);
        assert_eq!((again, pending), (id_a, false));

        let a2 = creds("a", "other");
        let (_, id_a2, _) = p.pool_for(&key(&p, &a2), &a2);
        assert_ne!(id_a2, id_a, "another password never shares a pool");
        p.promote(&key(&p, &a2), id_a2);
        p.pool_for(&key(&p, &a), &a); // a is now the most recently used
        let b = creds("b", "pw");
        let (_, id_b, _) = p.pool_for(&key(&p, &b), &b);
        assert_eq!(p.len(), 2, "a pending pool evicts nothing");
        p.promote(&key(&p, &b), id_b);
        assert_eq!(p.len(), 2);
        let (_, id, pending) = p.pool_for(&key(&p, &a), &a);
        assert_eq!(
            (id, pending),
            (id_a, false),
            "the least recently used (a/other) went"
        );
        let (_, _, pending) = p.pool_for(&key(&p, &a2), &a2);
        assert!(pending);

        p.forget(&key(&p, &a), id_a + 100);
        assert_eq!(p.len(), 2, "forget only removes the pool it was given");
        p.forget(&key(&p, &a), id_a);
        assert_eq!(p.len(), 1);
    }
}
