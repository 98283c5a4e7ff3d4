//! The login throttle's settings (throttle/).
use crate::settings::{Setting, Vars};
use std::time::Duration;

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ThrottleSettings {
    /// Failures per user name (decayed) past which new logins wait; 0: off.
    pub user_failures: f64,
    /// Failures per client address (decayed) past which new logins wait; 0: off.
    pub addr_failures: f64,
    pub half_life: Duration,
    pub negative_cache: Duration,
    pub trusted: Duration,
}

pub const SETTINGS: &[Setting] = &[
    Setting {
        name: "FERRY_AUTH_THROTTLE_USER_FAILURES",
        default: "10",
        about: "failed logins of a user name (a score that halves every half-life) past which a new login of that name waits: 429 `resource_exhausted` with `Retry-After`, MySQL not asked; an address that logged in as that user before still may; 0: off ([password guessing](../guides/password-guessing.md))",
    },
    Setting {
        name: "FERRY_AUTH_THROTTLE_ADDR_FAILURES",
        default: "20",
        about: "the same per client address (`x-ferry-client-addr`, set by Envoy), whatever the user names; 0: off",
    },
    Setting {
        name: "FERRY_AUTH_THROTTLE_HALF_LIFE_SECS",
        default: "60",
        about: "how fast the failure scores decay: they halve in this time",
    },
    Setting {
        name: "FERRY_AUTH_NEGATIVE_CACHE_SECS",
        default: "30",
        about: "a password that just failed for a user is answered `unauthenticated` again for this long without asking MySQL (a success is never cached this way); 0: off",
    },
    Setting {
        name: "FERRY_AUTH_TRUSTED_SECS",
        default: "86400",
        about: "how long an address that logged in as a user may still log in as that user while the user name is throttled",
    },
];

impl ThrottleSettings {
    pub fn from_vars(vars: &Vars<'_>) -> Result<Self, String> {
        Ok(ThrottleSettings {
            user_failures: vars.size("FERRY_AUTH_THROTTLE_USER_FAILURES")? as f64,
            addr_failures: vars.size("FERRY_AUTH_THROTTLE_ADDR_FAILURES")? as f64,
            half_life: vars
                .secs("FERRY_AUTH_THROTTLE_HALF_LIFE_SECS")?
                .max(Duration::from_secs(1)),
            // 0 is off here (`secs` would make it 1 s).
            negative_cache: Duration::from_secs(vars.size("FERRY_AUTH_NEGATIVE_CACHE_SECS")? as u64),
            trusted: Duration::from_secs(vars.size("FERRY_AUTH_TRUSTED_SECS")? as u64),
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;
    use std::time::Duration;

    #[test]
    fn zero_turns_each_part_off() {
        let c =
            Config::from_lookup(|n| n.starts_with("FERRY_AUTH_").then(|| "0".to_owned())).unwrap();
        let t = c.throttle;
        assert_eq!((t.user_failures, t.addr_failures), (0.0, 0.0));
        assert_eq!(
            (t.negative_cache, t.trusted),
            (Duration::ZERO, Duration::ZERO)
        );
        let d = Config::from_lookup(|_| None).unwrap().throttle;
        assert_eq!((d.user_failures, d.addr_failures), (10.0, 20.0));
        assert_eq!(d.negative_cache, Duration::from_secs(30));
    }
}
