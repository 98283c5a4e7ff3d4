//! Idempotency keys' settings.
use crate::settings::{Setting, Vars};
use std::time::Duration;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdempotencySettings {
    /// How long a record is kept (and replayed).
    pub retention: Duration,
    /// The largest answer stored; a larger one is refused and its write rolled back.
    pub max_answer_bytes: usize,
}

pub const SETTINGS: &[Setting] = &[
    Setting {
        name: "FERRY_IDEMPOTENCY_RETENTION_SECS",
        default: "86400",
        about: "how long an `Idempotency-Key`'s record is kept and its answer replayed; older ones are deleted in small batches after keyed writes, at most once a minute per user ([idempotency keys](../guides/idempotency.md))",
    },
    Setting {
        name: "FERRY_IDEMPOTENCY_MAX_ANSWER_BYTES",
        default: "1048576",
        about: "the largest answer stored with a key; a keyed write whose answer is larger is rolled back with `resource_exhausted`",
    },
];

impl IdempotencySettings {
    pub fn from_vars(vars: &Vars<'_>) -> Result<Self, String> {
        Ok(IdempotencySettings {
            retention: vars
                .secs("FERRY_IDEMPOTENCY_RETENTION_SECS")?
                .max(Duration::from_secs(1)),
            max_answer_bytes: vars.size("FERRY_IDEMPOTENCY_MAX_ANSWER_BYTES")?,
        })
    }
}
