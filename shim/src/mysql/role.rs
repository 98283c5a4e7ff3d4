//! Which database target this shim serves (`FERRY_SHIM_ROLE`): one shim per
//! target, Envoy routes between them (docs/design/shim.md "Read replicas").
//!
//! A `primary` shim runs everything. A `replica` shim serves reads only: a
//! statement that is not `ferry_wire::replay::replay_safe` (one read, no locks,
//! no user variables, no side effects), or any statement of a session that is
//! pinned or in a transaction, is refused with `failed_precondition` — the
//! filter never sends those here, so one arriving is a routing mistake, never
//! something to run on a read-only server. A read of a session that carries a
//! GTID (`read_after_write_gtid`, set by the primary after a write, sessions/gtid.rs)
//! first waits for the replica to reach it; if it does not within
//! `FERRY_READ_AFTER_WRITE_WAIT_MS`, the answer is 503 `unavailable` with
//! `x-ferry-replica-behind: 1`, which Envoy's retry policy for reads takes to
//! the primary. On Vitess (vtgate) a replica's connections target vtgate's replica
//! tablets (`<database>@replica`, mysql/pool.rs), and a session that has written
//! carries no position but a mark: all its reads go to the primary (sessions/gtid.rs).
use crate::connect::error::ConnectError;
use crate::settings::{Setting, Vars};
use ferry_proto::vitess::vtrpc::Code;
use std::time::Duration;

/// Response header naming the role of the shim that answered (every answer).
pub const TARGET_HEADER: &str = "ferry-target";
/// Response header of a replica's 503 when it has not reached a session's writes.
pub const BEHIND_HEADER: &str = "x-ferry-replica-behind";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Primary,
    Replica,
}

impl Role {
    pub fn parse(s: &str) -> Option<Role> {
        match s.trim().to_ascii_lowercase().as_str() {
            "primary" => Some(Role::Primary),
            "replica" => Some(Role::Replica),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Primary => "primary",
            Role::Replica => "replica",
        }
    }
}

/// What a replica answers to anything but a read outside a transaction.
pub fn only_reads() -> ConnectError {
    ConnectError::new(
        Code::FailedPrecondition,
        "this shim serves a read replica: only reads",
    )
}

/// Whether a replica may run this statement (of a session neither pinned nor in
/// a transaction; the caller checks those).
pub fn replica_may_run(sql: &str) -> bool {
    ferry_wire::replay::replay_safe(sql)
}

/// The replica has not applied the session's writes in time: 503, so Envoy's
/// retry policy for reads takes the read to the primary.
pub fn behind(wait: Duration) -> ConnectError {
    ConnectError::new(
        Code::Unavailable,
        format!(
            "replica has not applied this session's writes within {} ms",
            wait.as_millis()
        ),
    )
    .with_header(BEHIND_HEADER, "1")
}

/// A session that wrote through Vitess (it carries `gtid::PRIMARY_ONLY`): 503 like
/// [`behind`], so its reads go to the primary.
pub fn wrote_through_vitess() -> ConnectError {
    ConnectError::new(
        Code::Unavailable,
        "this session has written through Vitess, which gives no position to wait for: its reads go to the primary",
    )
    .with_header(BEHIND_HEADER, "1")
}

/// A request with an `Idempotency-Key` reached a replica (a keyed read the filter routed
/// as a read): 503 like [`behind`], so Envoy takes it to the primary, which records it.
pub fn keyed_to_the_primary() -> ConnectError {
    ConnectError::new(
        Code::Unavailable,
        "a request with an Idempotency-Key writes its record: the primary serves it",
    )
    .with_header(BEHIND_HEADER, "1")
}

pub const SETTINGS: &[Setting] = &[Setting {
    name: "FERRY_SHIM_ROLE",
    default: "primary",
    about: "the database target this shim serves: `primary`, or `replica` (reads only, each after the session's GTID: [read replicas](../guides/read-replicas.md); on Vitess vtgate's replica tablets, `<database>@replica`); anything else refuses to start",
}];

impl Role {
    pub fn from_vars(vars: &Vars<'_>) -> Result<Self, String> {
        vars.parsed(
            "FERRY_SHIM_ROLE",
            "primary or replica (the database target this shim serves)",
            Role::parse,
        )
        .map(|r| r.unwrap_or(Role::Primary))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_parse_and_print() {
        assert_eq!(Role::parse("primary"), Some(Role::Primary));
        assert_eq!(Role::parse(" Replica "), Some(Role::Replica));
        assert_eq!(Role::parse("secondary"), None);
        assert_eq!(Role::parse(""), None);
        assert_eq!(Role::Replica.as_str(), "replica");
    }

    #[test]
    fn a_replica_runs_safe_reads_only() {
        for sql in ["SELECT 1", "select * from t where a = 1", "SHOW TABLES"] {
            assert!(replica_may_run(sql), "{sql}");
        }
        for sql in [
            "INSERT INTO t VALUES (1)",
            "BEGIN",
            "SET @a = 1",
            "SELECT * FROM t FOR UPDATE",
            "SELECT GET_LOCK('x', 1)",
            "SELECT 1; DELETE FROM t",
            "COMMIT",
        ] {
            assert!(!replica_may_run(sql), "{sql}");
        }
        let e = only_reads();
        assert_eq!((e.status(), e.name()), (400, "failed_precondition"));
        assert_eq!(e.message, "this shim serves a read replica: only reads");
    }

    #[test]
    fn behind_is_a_503_with_its_header() {
        let e = behind(Duration::from_millis(500));
        assert_eq!((e.status(), e.name()), (503, "unavailable"));
        assert_eq!(
            e.message,
            "replica has not applied this session's writes within 500 ms"
        );
        assert_eq!(e.header, Some((BEHIND_HEADER, "1".to_owned())));
    }
}
