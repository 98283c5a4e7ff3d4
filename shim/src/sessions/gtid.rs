//! GTID positions for read-your-writes (docs/design/shim.md "Read replicas").
//!
//! A primary shim with `FERRY_TRACK_GTID` on reads, after a statement that is
//! not replay-safe commits outside a transaction (an autocommit write, or the
//! COMMIT of a pinned session), the position of that write on the same
//! connection, and the session carries it (`read_after_write_gtid`, sealed:
//! sessions/seal.rs). A replica shim waits for its server to reach it before a read.
//!
//! Flavours, told apart by the server version mysql_async reports (MariaDB
//! reports 10.x and up; MySQL is below 10):
//! - MariaDB: `@@last_gtid` (this connection's last GTID, e.g. `0-1-42`;
//!   empty without a binary log) and `MASTER_GTID_WAIT(pos, secs)`. Tried on
//!   10.11: 0 once reached, -1 on timeout; the timeout is in seconds and may be
//!   fractional (0.25 waits 0.25 s); a position in a domain the replica never
//!   sees times out; an unparsable one is error 1941. On a server that is not a
//!   replica it waits on `gtid_slave_pos`, so it never sees the server's own
//!   writes and times out: only replica shims wait.
//! - MySQL 8: `@@global.gtid_executed` (a GTID set) and
//!   `WAIT_FOR_EXECUTED_GTID_SET(set, secs)`: 0 once reached, 1 on timeout.
//!
//! - Vitess (vtgate): no position. A write through vtgate lands on one shard's
//!   primary or several, and its MySQL protocol hands a client no GTID (it does
//!   not offer `CLIENT_SESSION_TRACK`). Its own read-after-write settings
//!   (`read_after_write_gtid`, `_timeout`, `session_track_gtids`) are accepted and
//!   stored in vtgate's session but nothing acts on them in vitess 24.0.4
//!   (`go/vt/vtgate`: read only by `SELECT @@...`; nothing waits). So a primary
//!   tracking writes marks the session [`PRIMARY_ONLY`] instead, and a replica
//!   sends every later read of that session to the primary (role::behind).
//!
//! A position is spliced into the SQL as a string literal only after
//! `valid()` allowed its characters (digits, hex, `-`, `:`, `,`, whitespace):
//! no quote or backslash can get in. It comes from a sealed session anyway.
use crate::settings::{Setting, Vars};
use mysql_async::prelude::Queryable;
use mysql_async::Conn;
use std::time::Duration;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavour {
    MariaDb,
    Mysql,
}

impl Flavour {
    pub fn of(server_version: (u16, u16, u16)) -> Flavour {
        if server_version.0 >= 10 {
            Flavour::MariaDb
        } else {
            Flavour::Mysql
        }
    }

    /// The query reading the position of this connection's last write.
    pub fn position_sql(self) -> &'static str {
        match self {
            Flavour::MariaDb => "SELECT @@last_gtid",
            Flavour::Mysql => "SELECT @@global.gtid_executed",
        }
    }

    /// The query waiting for `gtid`, at most `wait`; `None` if it is not a
    /// position this module accepts.
    pub fn wait_sql(self, gtid: &str, wait: Duration) -> Option<String> {
        if !valid(gtid) {
            return None;
        }
        let secs = wait.as_secs_f64();
        Some(match self {
            Flavour::MariaDb => format!("SELECT MASTER_GTID_WAIT('{gtid}', {secs:.3})"),
            Flavour::Mysql => format!("SELECT WAIT_FOR_EXECUTED_GTID_SET('{gtid}', {secs:.3})"),
        })
    }

    /// Whether the wait's answer means the position was reached.
    pub fn reached(self, answer: Option<i64>) -> bool {
        answer == Some(0)
    }
}

/// What a session carries after a write through Vitess in place of a position:
/// its reads go to the primary from then on. Not a position ([`valid`] refuses it).
pub const PRIMARY_ONLY: &str = "primary";

/// Longest position accepted (a MySQL GTID set lists one range per server).
const MAX_LEN: usize = 16 << 10;

/// A position as the servers print them: MariaDB `domain-server-seq[,...]`,
/// MySQL `uuid:1-5[:7-9][,\nuuid:...]`.
pub fn valid(gtid: &str) -> bool {
    !gtid.trim().is_empty()
        && gtid.len() <= MAX_LEN
        && gtid
            .bytes()
            .all(|b| b.is_ascii_hexdigit() || matches!(b, b'-' | b':' | b',' | b' ' | b'\n'))
}

/// The position of this connection's last write (`None`: the server has
/// none, e.g. MariaDB without a binary log).
pub async fn position(conn: &mut Conn) -> Result<Option<String>, mysql_async::Error> {
    let flavour = Flavour::of(conn.server_version());
    let pos: Option<Option<String>> = conn.query_first(flavour.position_sql()).await?;
    Ok(pos.flatten().filter(|p| valid(p)))
}

/// The position a session carries after a write at `new`, when it carried `old`.
///
/// MariaDB's `@@last_gtid` is the last write *of the connection*, and pooled
/// connections are shared: after a statement that wrote nothing it can be
/// another session's older write. So positions merge per replication domain,
/// keeping the higher sequence number, and a session's position never moves
/// back. MySQL's `gtid_executed` is the server's whole set: always the newer.
pub fn merge(flavour: Flavour, old: &str, new: &str) -> String {
    if flavour == Flavour::Mysql || old.trim().is_empty() {
        return new.to_owned();
    }
    let mut by_domain: std::collections::BTreeMap<u32, (u64, &str)> = Default::default();
    for gtid in old.split(',').chain(new.split(',')).map(str::trim) {
        let mut parts = gtid.split('-');
        let (Some(domain), Some(_server), Some(seq), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return new.to_owned();
        };
        let (Ok(domain), Ok(seq)) = (domain.parse::<u32>(), seq.parse::<u64>()) else {
            return new.to_owned();
        };
        let entry = by_domain.entry(domain).or_insert((seq, gtid));
        if seq > entry.0 {
            *entry = (seq, gtid);
        }
    }
    by_domain
        .values()
        .map(|(_, gtid)| *gtid)
        .collect::<Vec<_>>()
        .join(",")
}

/// Why a replica could not confirm a position.
#[derive(Debug)]
pub enum WaitError {
    /// The wait ran out (or the server could not wait for it: an unknown
    /// domain, GTIDs off); the read must go elsewhere.
    NotReached(String),
    /// The connection failed.
    Mysql(mysql_async::Error),
}

/// Waits until the server has applied `gtid`, at most `wait`.
pub async fn wait_for(conn: &mut Conn, gtid: &str, wait: Duration) -> Result<(), WaitError> {
    let flavour = Flavour::of(conn.server_version());
    let Some(sql) = flavour.wait_sql(gtid, wait) else {
        return Err(WaitError::NotReached("not a GTID position".into()));
    };
    match conn.query_first::<Option<i64>, _>(sql).await {
        Ok(answer) if flavour.reached(answer.flatten()) => Ok(()),
        Ok(answer) => Err(WaitError::NotReached(format!(
            "the wait answered {:?}",
            answer.flatten()
        ))),
        Err(mysql_async::Error::Server(se)) => Err(WaitError::NotReached(format!(
            "the server could not wait: {} (errno {})",
            se.message, se.code
        ))),
        Err(e) => Err(WaitError::Mysql(e)),
    }
}

/// Read-your-writes on replicas ([read replicas](../guides/read-replicas.md)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GtidSettings {
    pub track: bool,
    pub wait: std::time::Duration,
}

pub const SETTINGS: &[Setting] = &[
    Setting {
        name: "FERRY_TRACK_GTID",
        default: "false",
        about: "a primary puts the GTID of a session's last write in its session (`read_after_write_gtid`; one extra round trip per write); on Vitess the mark `primary` instead, no round trip ([Vitess](../guides/vitess.md#replica-reads-and-read-your-writes))",
    },
    Setting {
        name: "FERRY_READ_AFTER_WRITE_WAIT_MS",
        default: "500",
        about: "a replica's longest wait for a session's GTID, then 503 `x-ferry-replica-behind: 1` (the read goes to the primary)",
    },
];

impl GtidSettings {
    pub fn from_vars(vars: &Vars<'_>) -> Result<Self, String> {
        Ok(GtidSettings {
            track: vars.flag("FERRY_TRACK_GTID")?,
            wait: vars.millis("FERRY_READ_AFTER_WRITE_WAIT_MS")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sessions_position_never_moves_back() {
        let m = |old, new| merge(Flavour::MariaDb, old, new);
        assert_eq!(m("", "0-1-42"), "0-1-42");
        assert_eq!(m("0-1-42", "0-1-43"), "0-1-43");
        // Another session's older write, read off a shared pooled connection.
        assert_eq!(m("0-1-42", "0-1-7"), "0-1-42");
        assert_eq!(m("0-1-42,1-1-5", "1-1-9"), "0-1-42,1-1-9");
        assert_eq!(m("1-1-5", "0-1-3"), "0-1-3,1-1-5");
        // Not MariaDB's form: the new one, as read.
        assert_eq!(m("0-1-42", "junk"), "junk");
        assert_eq!(merge(Flavour::Mysql, "u:1-5", "u:1-3"), "u:1-3");
        assert!(!valid(PRIMARY_ONLY), "the Vitess mark is never waited for");
    }

    #[test]
    fn flavours_come_from_the_version() {
        assert_eq!(Flavour::of((10, 11, 19)), Flavour::MariaDb);
        assert_eq!(Flavour::of((11, 4, 2)), Flavour::MariaDb);
        assert_eq!(Flavour::of((8, 0, 33)), Flavour::Mysql);
        assert_eq!(Flavour::of((9, 1, 0)), Flavour::Mysql);
    }

    #[test]
    fn positions_are_checked_before_they_reach_sql() {
        for ok in [
            "0-1-42",
            "0-1-42,1-2-7",
            "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5",
            "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5:7,\n4e11fa47-71ca-11e1-9e33-c80aa9429562:1",
        ] {
            assert!(valid(ok), "{ok}");
        }
        for bad in [
            "",
            " ",
            "0-1-1'); DROP TABLE t; --",
            "0-1-1\\",
            "x-y-z",
            "0-1-1'",
        ] {
            assert!(!valid(bad), "{bad}");
        }
        assert!(!valid(&"1".repeat(MAX_LEN + 1)));
        assert_eq!(
            Flavour::MariaDb
                .wait_sql("0-1-42", Duration::from_millis(500))
                .as_deref(),
            Some("SELECT MASTER_GTID_WAIT('0-1-42', 0.500)")
        );
        assert_eq!(
            Flavour::Mysql
                .wait_sql("u:1-3", Duration::from_millis(1250))
                .as_deref(),
            None,
            "u is not hex"
        );
        assert_eq!(
            Flavour::Mysql
                .wait_sql("ab:1-3", Duration::from_millis(1250))
                .as_deref(),
            Some("SELECT WAIT_FOR_EXECUTED_GTID_SET('ab:1-3', 1.250)")
        );
        assert_eq!(Flavour::MariaDb.wait_sql("0-1-1'", Duration::ZERO), None);
    }

    #[test]
    fn only_zero_means_reached() {
        for f in [Flavour::MariaDb, Flavour::Mysql] {
            assert!(f.reached(Some(0)));
            assert!(!f.reached(Some(-1)) && !f.reached(Some(1)) && !f.reached(None));
        }
    }
}
