//! Idempotency keys (`Idempotency-Key`, draft-ietf-httpapi-idempotency-key-header) for
//! Execute and TRANSACTION batches: a write retried with the same key runs once.
//!
//! The key, a fingerprint of the request and the answer are stored in MySQL, in table
//! `ferry_idempotency` (shim/sql/idempotency.sql), by an INSERT inside the same
//! transaction as the write, just before its COMMIT (rpc/batch/run.rs): the write and
//! its record commit or vanish together. A request with a key first looks its record up:
//! - found, same fingerprint: the stored answer, not run again (`idempotent-replayed`);
//! - found, another fingerprint: `failed_precondition`, naming the key;
//! - none: it runs. A concurrent request with the same key blocks on the record's row
//!   lock at its INSERT until the first commits (then it answers the stored answer) or
//!   rolls back (then it commits its own).
//!
//! Records are scoped by user, tagged with the session keys (a record written by
//! anyone else is refused, never replayed), and forgotten after
//! `FERRY_IDEMPOTENCY_RETENTION_SECS`.
pub mod cleaner;
pub mod fingerprint;
pub mod key;
pub mod settings;
pub mod store;
