//! ExecuteBatch's limits.
use crate::settings::{Setting, Vars};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchSettings {
    /// Statements per batch.
    pub max_statements: usize,
}

pub const SETTINGS: &[Setting] = &[Setting {
    name: "FERRY_BATCH_MAX_STATEMENTS",
    default: "100",
    about: "statements in one ExecuteBatch; more is `resource_exhausted` (its request is bounded by `FERRY_SHIM_MAX_REQUEST_BYTES`; its answer, all statements together, by `FERRY_SHIM_MAX_RESULT_BYTES` and `FERRY_SHIM_MAX_RESULT_ROWS`)",
}];

impl BatchSettings {
    pub fn from_vars(vars: &Vars<'_>) -> Result<Self, String> {
        Ok(BatchSettings {
            max_statements: vars.size("FERRY_BATCH_MAX_STATEMENTS")?.max(1),
        })
    }
}
