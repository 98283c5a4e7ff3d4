//! When records past the retention are deleted: after a keyed write commits, at most
//! once a minute per user, [`BATCH`] rows at a time (store::clean), so a cleanup never
//! holds many locks and a backlog drains over later writes.
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Rows deleted per cleanup.
pub const BATCH: u32 = 1000;
/// At most one cleanup per user this often.
pub const EVERY: Duration = Duration::from_secs(60);

#[derive(Default)]
pub struct Cleaner {
    last: Mutex<HashMap<String, Instant>>,
}

impl Cleaner {
    /// Whether a cleanup is due for `user` (and, if so, it is counted as started now).
    pub fn due(&self, user: &str) -> bool {
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        match last.get(user) {
            Some(t) if now.duration_since(*t) < EVERY => false,
            _ => {
                // Bounded: users that stopped sending keys are forgotten.
                last.retain(|_, t| now.duration_since(*t) < EVERY);
                last.insert(user.to_owned(), now);
                true
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn once_a_minute_per_user() {
        let c = Cleaner::default();
        assert!(c.due("a"));
        assert!(!c.due("a"));
        assert!(c.due("b"));
    }
}
