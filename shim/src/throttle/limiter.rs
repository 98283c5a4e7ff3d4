//! The throttle's state: decaying failure scores per user name and per address, the
//! passwords that just failed, and the addresses each user logged in from.
use super::score::Score;
use super::settings::ThrottleSettings;
use crate::connect::error::ConnectError;
use crate::credentials::Credentials;
use crate::mysql::account::AUTH_FAILED;
use ferry_proto::vitess::vtrpc::Code;
use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Entries per map past which the stale ones are dropped (and, if that is not enough,
/// all of that map: memory stays bounded whatever the user names a guesser makes up).
const MAX_ENTRIES: usize = 100_000;

/// Why a login is not tried.
#[derive(Debug, PartialEq)]
pub enum Refusal {
    /// Too many failures (this address, or this user name from an address it never
    /// logged in from): wait this long.
    Wait { by: &'static str, after: Duration },
    /// This password failed for this user just now.
    FailedJustNow,
}

impl Refusal {
    pub fn error(&self) -> ConnectError {
        match self {
            Refusal::Wait { after, .. } => {
                let secs = after.as_secs_f64().ceil().max(1.0) as u64;
                ConnectError::new(
                    Code::ResourceExhausted,
                    format!("too many failed logins: try again in {secs} s"),
                )
                .with_header("retry-after", secs.to_string())
            }
            Refusal::FailedJustNow => ConnectError::new(Code::Unauthenticated, AUTH_FAILED),
        }
    }

    /// The metric's label.
    pub fn reason(&self) -> &'static str {
        match self {
            Refusal::Wait { by, .. } => by,
            Refusal::FailedJustNow => "repeated_password",
        }
    }
}

/// A login let through, to be told how it went.
#[derive(Debug)]
pub struct Attempt {
    user: String,
    password: u64,
    addr: Option<IpAddr>,
}

#[derive(Default)]
struct State {
    users: HashMap<String, Score>,
    addrs: HashMap<IpAddr, Score>,
    failed: HashMap<(String, u64), Instant>,
    trusted: HashMap<(String, IpAddr), Instant>,
}

pub struct Throttle {
    s: ThrottleSettings,
    /// Random per process: a password's hash means nothing outside it.
    hasher: RandomState,
    state: Mutex<State>,
}

impl Throttle {
    pub fn new(s: ThrottleSettings) -> Throttle {
        Throttle {
            s,
            hasher: RandomState::new(),
            state: Mutex::new(State::default()),
        }
    }

    /// Whether a login of a credential not admitted yet may go to MySQL.
    pub fn check(&self, creds: &Credentials, addr: Option<IpAddr>) -> Result<Attempt, Refusal> {
        self.check_at(creds, addr, Instant::now())
    }

    fn check_at(
        &self,
        creds: &Credentials,
        addr: Option<IpAddr>,
        now: Instant,
    ) -> Result<Attempt, Refusal> {
        let a = Attempt {
            user: creds.user.clone(),
            password: self.hasher.hash_one(&creds.password),
            addr,
        };
        let s = &self.s;
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let just_failed = st
            .failed
            .get(&(a.user.clone(), a.password))
            .is_some_and(|t| now.saturating_duration_since(*t) < s.negative_cache);
        if just_failed {
            count(&mut st, s, &a, now);
            return Err(Refusal::FailedJustNow);
        }
        if let Some(addr) = addr.filter(|_| s.addr_failures > 0.0) {
            let score = st.addrs.entry(addr).or_insert_with(|| Score::new(now));
            if let Some(after) = over(score, now, s.half_life, s.addr_failures) {
                return Err(Refusal::Wait {
                    by: "address",
                    after,
                });
            }
        }
        if s.user_failures > 0.0 {
            let trusted = addr.is_some_and(|addr| {
                st.trusted
                    .get(&(a.user.clone(), addr))
                    .is_some_and(|t| now.saturating_duration_since(*t) < s.trusted)
            });
            if !trusted {
                let score = st
                    .users
                    .entry(a.user.clone())
                    .or_insert_with(|| Score::new(now));
                if let Some(after) = over(score, now, s.half_life, s.user_failures) {
                    return Err(Refusal::Wait { by: "user", after });
                }
            }
        }
        Ok(a)
    }

    /// The login was refused (unauthenticated).
    pub fn failed(&self, a: Attempt) {
        self.failed_at(a, Instant::now())
    }

    fn failed_at(&self, a: Attempt, now: Instant) {
        let s = &self.s;
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        count(&mut st, s, &a, now);
        if s.negative_cache > Duration::ZERO {
            st.failed.insert((a.user, a.password), now);
        }
        bound(&mut st, s, now);
    }

    /// The login went through: its address is trusted for its user, and the password
    /// is no longer one that just failed.
    pub fn succeeded(&self, a: Attempt) {
        let now = Instant::now();
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.failed.remove(&(a.user.clone(), a.password));
        if let Some(addr) = a.addr {
            st.trusted.insert((a.user, addr), now);
        }
        bound(&mut st, &self.s, now);
    }
}

/// The score below which one more attempt may go: a threshold of N lets a burst of N
/// failures through (scores decay, so N failures in a row leave a score just under N).
fn room(threshold: f64) -> f64 {
    (threshold - 1.0).max(0.5)
}

/// Past the threshold: the refused attempt adds to the score, and the wait is until one
/// more attempt may go.
fn over(score: &mut Score, now: Instant, half_life: Duration, threshold: f64) -> Option<Duration> {
    if score.at(now, half_life) <= room(threshold) {
        return None;
    }
    score.add(now, half_life);
    Some(score.wait_below(now, half_life, room(threshold)))
}

/// One failure on the user's and the address's scores.
fn count(st: &mut State, s: &ThrottleSettings, a: &Attempt, now: Instant) {
    st.users
        .entry(a.user.clone())
        .or_insert_with(|| Score::new(now))
        .add(now, s.half_life);
    if let Some(addr) = a.addr {
        st.addrs
            .entry(addr)
            .or_insert_with(|| Score::new(now))
            .add(now, s.half_life);
    }
}

/// Drops what no longer matters once a map is large.
fn bound(st: &mut State, s: &ThrottleSettings, now: Instant) {
    let live = |score: &Score| score.at(now, s.half_life) >= 0.5;
    if st.users.len() > MAX_ENTRIES {
        st.users.retain(|_, v| live(v));
        if st.users.len() > MAX_ENTRIES {
            st.users.clear();
        }
    }
    if st.addrs.len() > MAX_ENTRIES {
        st.addrs.retain(|_, v| live(v));
        if st.addrs.len() > MAX_ENTRIES {
            st.addrs.clear();
        }
    }
    if st.failed.len() > MAX_ENTRIES {
        st.failed
            .retain(|_, t| now.saturating_duration_since(*t) < s.negative_cache);
        if st.failed.len() > MAX_ENTRIES {
            st.failed.clear();
        }
    }
    if st.trusted.len() > MAX_ENTRIES {
        st.trusted
            .retain(|_, t| now.saturating_duration_since(*t) < s.trusted);
        if st.trusted.len() > MAX_ENTRIES {
            st.trusted.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> ThrottleSettings {
        ThrottleSettings {
            user_failures: 3.0,
            addr_failures: 5.0,
            half_life: Duration::from_secs(10),
            negative_cache: Duration::from_secs(30),
            trusted: Duration::from_secs(3600),
        }
    }

    fn creds(user: &str, pw: &str) -> Credentials {
        Credentials {
            user: user.into(),
            password: pw.into(),
        }
    }

    const A: Option<IpAddr> = Some(IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 1)));
    const B: Option<IpAddr> = Some(IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 2)));

    #[test]
    fn a_user_name_under_guessing_waits_except_from_where_it_logged_in() {
        let t = Throttle::new(settings());
        let now = Instant::now();
        // The owner logged in from B once.
        t.succeeded(t.check_at(&creds("u", "right"), B, now).unwrap());
        // Three different wrong passwords from A reach MySQL ...
        for pw in ["w1", "w2", "w3"] {
            let a = t.check_at(&creds("u", pw), A, now).unwrap();
            t.failed_at(a, now);
        }
        // ... the fourth waits, with a retry-after, and MySQL is not asked.
        let r = t.check_at(&creds("u", "w4"), A, now).unwrap_err();
        assert!(
            matches!(r, Refusal::Wait { by: "user", after } if after > Duration::ZERO),
            "{r:?}"
        );
        assert_eq!(r.error().code, Code::ResourceExhausted);
        assert!(r
            .error()
            .header
            .is_some_and(|(n, v)| n == "retry-after" && v.parse::<u64>().unwrap() >= 1));
        // The owner, from B, still logs in; a new address does not.
        assert!(t.check_at(&creds("u", "right"), B, now).is_ok());
        assert!(t
            .check_at(
                &creds("u", "right"),
                Some(IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 9))),
                now
            )
            .is_err());
        // Another user from A is not throttled by u's score (A's own is 3 of 5).
        assert!(t.check_at(&creds("v", "x"), A, now).is_ok());
        // The scores decay: after enough half-lives, u may try again from anywhere.
        let later = now + Duration::from_secs(40);
        assert!(t.check_at(&creds("u", "w5"), A, later).is_ok());
    }

    #[test]
    fn an_address_guessing_many_names_waits() {
        let t = Throttle::new(settings());
        let now = Instant::now();
        for i in 0..5 {
            let a = t
                .check_at(&creds(&format!("user{i}"), "x"), A, now)
                .unwrap();
            t.failed_at(a, now);
        }
        let r = t.check_at(&creds("user9", "x"), A, now).unwrap_err();
        assert!(matches!(r, Refusal::Wait { by: "address", .. }), "{r:?}");
        // Another address is not.
        assert!(t.check_at(&creds("user9", "x"), B, now).is_ok());
        // Hammering lengthens the wait.
        let w1 = match t.check_at(&creds("user9", "x"), A, now) {
            Err(Refusal::Wait { after, .. }) => after,
            r => panic!("{r:?}"),
        };
        let w2 = match t.check_at(&creds("user9", "x"), A, now) {
            Err(Refusal::Wait { after, .. }) => after,
            r => panic!("{r:?}"),
        };
        assert!(w2 > w1);
    }

    #[test]
    fn a_password_that_just_failed_is_not_tried_again_but_a_success_is_never_cached() {
        let t = Throttle::new(ThrottleSettings {
            user_failures: 100.0,
            addr_failures: 100.0,
            ..settings()
        });
        let now = Instant::now();
        let a = t.check_at(&creds("u", "wrong"), A, now).unwrap();
        t.failed_at(a, now);
        assert_eq!(
            t.check_at(&creds("u", "wrong"), B, now).unwrap_err(),
            Refusal::FailedJustNow
        );
        assert_eq!(Refusal::FailedJustNow.error().code, Code::Unauthenticated);
        // Another password is tried at once; after the window, the same one too.
        assert!(t.check_at(&creds("u", "other"), A, now).is_ok());
        assert!(t
            .check_at(&creds("u", "wrong"), A, now + Duration::from_secs(31))
            .is_ok());
        // A success clears it (the password was changed to it meanwhile).
        let a = t.check_at(&creds("v", "new"), A, now).unwrap();
        t.failed_at(a, now);
        let ok = Attempt {
            user: "v".into(),
            password: t.hasher.hash_one("new"),
            addr: A,
        };
        t.succeeded(ok);
        assert!(t.check_at(&creds("v", "new"), A, now).is_ok());
    }

    #[test]
    fn off_means_off() {
        let t = Throttle::new(ThrottleSettings {
            user_failures: 0.0,
            addr_failures: 0.0,
            negative_cache: Duration::ZERO,
            ..settings()
        });
        let now = Instant::now();
        for _ in 0..50 {
            let a = t.check_at(&creds("u", "w"), A, now).unwrap();
            t.failed_at(a, now);
        }
    }

    #[test]
    fn made_up_names_cannot_grow_the_maps_without_bound() {
        let t = Throttle::new(settings());
        let now = Instant::now();
        for i in 0..(MAX_ENTRIES + 10) {
            let a = Attempt {
                user: format!("u{i}"),
                password: 0,
                addr: None,
            };
            t.failed_at(a, now);
        }
        let st = t.state.lock().unwrap();
        assert!(st.users.len() <= MAX_ENTRIES && st.failed.len() <= MAX_ENTRIES);
    }
}
