//! The settings pool, as vitess keeps one: pooled connections that carry a
//! session's state (sessions/state.rs), kept after a request for the next request
//! of a session with the same state, which then runs with no `SET` before it.
//!
//! A connection is kept under its credential and the exact text of the `SET` that
//! gave it its state ([`state::key`](super::state::key): names in order, so equal
//! text is equal state). It only ever serves that credential (the password is
//! compared too) and a session whose state has that text. Only connections whose
//! state is exactly that `SET`'s are kept: a statement that assigned variables or
//! settings, failed, or was not proven clean is not (statement/run.rs).
//!
//! Bounded: at most `max` connections of a credential are kept (half its pool
//! by default), the least recently kept go first, none for longer than `idle`,
//! and when the credential's pool has no idle connection left a request takes one
//! back first (statement/start.rs), so kept connections never make a request
//! without state wait. A connection that leaves the settings pool goes back as any
//! connection with state does: reset (MariaDB, MySQL) or closed (Vitess, whose
//! reset keeps the state: mysql/pool.rs).
use crate::credentials::{constant_time_eq, Credentials};
use crate::sessions::pins::retire;
use crate::settings::{Setting, Vars};
use mysql_async::Conn;
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, RandomState};
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub const SETTINGS: &[Setting] = &[
    Setting {
        name: "FERRY_SETTINGS_POOL_MAX",
        default: "",
        about: "connections of one user kept with a session's variables and settings on them, for that session's next request (unset: half of `FERRY_POOL_MAX`; 0: none, every such request sets its state first)",
    },
    Setting {
        name: "FERRY_SETTINGS_POOL_IDLE_SECS",
        default: "10",
        about: "how long such a connection is kept unused",
    },
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SettingsPoolSettings {
    pub max: usize,
    pub idle: Duration,
}

impl SettingsPoolSettings {
    /// `pool_max`: the pools' `FERRY_POOL_MAX`, which bounds it.
    pub fn from_vars(vars: &Vars<'_>, pool_max: usize) -> Result<Self, String> {
        let max = match vars.set("FERRY_SETTINGS_POOL_MAX") {
            None => pool_max / 2,
            Some(_) => vars.size("FERRY_SETTINGS_POOL_MAX")?,
        };
        Ok(SettingsPoolSettings {
            max: max.min(pool_max),
            idle: vars.secs("FERRY_SETTINGS_POOL_IDLE_SECS")?,
        })
    }
}

/// A credential: its user and a keyed hash of its password (the password itself
/// is kept in each entry, to confirm).
type CredKey = (String, u64);

struct Kept {
    state: String,
    password: String,
    conn: Conn,
    since: Instant,
}

pub struct SettingsPool {
    kept: Mutex<HashMap<CredKey, VecDeque<Kept>>>,
    max: usize,
    idle: Duration,
    /// Random per process.
    hasher: RandomState,
}

impl SettingsPool {
    pub fn new(cfg: &SettingsPoolSettings) -> SettingsPool {
        SettingsPool {
            kept: Mutex::default(),
            max: cfg.max,
            idle: cfg.idle,
            hasher: RandomState::new(),
        }
    }

    fn key(&self, creds: &Credentials) -> CredKey {
        (creds.user.clone(), self.hasher.hash_one(&creds.password))
    }

    /// A kept connection of this credential that carries `state`.
    pub fn take(&self, creds: &Credentials, state: &str) -> Option<Conn> {
        if self.max == 0 {
            return None;
        }
        let key = self.key(creds);
        let mut kept = self.lock();
        let list = kept.get_mut(&key)?;
        let at = list.iter().rposition(|k| {
            k.state == state && constant_time_eq(k.password.as_bytes(), creds.password.as_bytes())
        })?;
        let found = list.remove(at).map(|k| k.conn);
        if list.is_empty() {
            kept.remove(&key);
        }
        found
    }

    /// Keeps `conn`, which carries exactly `state`, for the next request of a session
    /// with that state; the credential's oldest kept connection goes if there are
    /// `max`. `close`: what leaves is closed, not reset (Vitess).
    pub fn keep(&self, creds: &Credentials, state: String, conn: Conn, close: bool) {
        if self.max == 0 {
            retire(conn, close);
            return;
        }
        let out = {
            let mut kept = self.lock();
            let list = kept.entry(self.key(creds)).or_default();
            list.push_back(Kept {
                state,
                password: creds.password.clone(),
                conn,
                since: Instant::now(),
            });
            if list.len() > self.max {
                list.pop_front()
            } else {
                None
            }
        };
        if let Some(k) = out {
            retire(k.conn, close);
        }
    }

    /// Gives the credential's oldest kept connection back to its pool (reset) or
    /// closes it (`close`): for a request that would otherwise wait. Whether there was one.
    pub fn give_one_back(&self, creds: &Credentials, close: bool) -> bool {
        let out = {
            let mut kept = self.lock();
            let key = self.key(creds);
            let out = kept.get_mut(&key).and_then(VecDeque::pop_front);
            if kept.get(&key).is_some_and(VecDeque::is_empty) {
                kept.remove(&key);
            }
            out
        };
        match out {
            Some(k) => {
                retire(k.conn, close);
                true
            }
            None => false,
        }
    }

    /// Lets go of connections kept longer than `idle`.
    pub fn sweep(&self, close: bool) {
        let mut out = Vec::new();
        {
            let mut kept = self.lock();
            for list in kept.values_mut() {
                while list.front().is_some_and(|k| k.since.elapsed() > self.idle) {
                    out.extend(list.pop_front());
                }
            }
            kept.retain(|_, list| !list.is_empty());
        }
        for k in out {
            retire(k.conn, close);
        }
    }

    /// Connections kept now.
    pub fn len(&self) -> usize {
        self.lock().values().map(VecDeque::len).sum()
    }

    /// None kept now (a credential's list goes when it empties).
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<CredKey, VecDeque<Kept>>> {
        self.kept.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_the_pool_unless_set() {
        let none = |_: &str| None;
        let vars = Vars::new(&none, &[SETTINGS]);
        let s = SettingsPoolSettings::from_vars(&vars, 16).unwrap();
        assert_eq!((s.max, s.idle), (8, Duration::from_secs(10)));
        let zero = |n: &str| (n == "FERRY_SETTINGS_POOL_MAX").then(|| "0".to_owned());
        let vars = Vars::new(&zero, &[SETTINGS]);
        assert_eq!(SettingsPoolSettings::from_vars(&vars, 16).unwrap().max, 0);
        let big = |n: &str| (n == "FERRY_SETTINGS_POOL_MAX").then(|| "99".to_owned());
        let vars = Vars::new(&big, &[SETTINGS]);
        assert_eq!(SettingsPoolSettings::from_vars(&vars, 16).unwrap().max, 16);
    }
}
