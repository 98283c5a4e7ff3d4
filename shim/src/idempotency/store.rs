//! The records in MySQL (table `ferry_idempotency`, shim/sql/idempotency.sql): looked up
//! and cleaned on a pooled connection of the key's user; written inside the write's own
//! transaction (the statement built by [`insert`], run by rpc/batch/run.rs).
use super::key::Key;
use crate::connect::error::ConnectError;
use crate::credentials::Credentials;
use crate::mysql::pool::Pools;
use crate::sessions::seal::Sealer;
use ferry_proto::ferry::v1alpha1::BatchStatement;
use ferry_proto::vitess::query::{BindVariable, Type};
use ferry_proto::vitess::vtrpc::Code;
use mysql_async::prelude::Queryable;
use std::time::Duration;

pub const TABLE: &str = "ferry_idempotency";

/// The tag's domain: a record of one RPC is never taken for another's.
fn domain(rpc: &str) -> String {
    format!("idempotency/{rpc}")
}

/// A stored record: fingerprint, answer, tag, and whether it is past the retention.
type Row = (Vec<u8>, Vec<u8>, Vec<u8>, bool);

/// What a lookup found.
pub enum Found {
    None,
    /// Older than the retention: to be forgotten, then the request runs.
    Expired,
    /// The same request: its answer.
    Same(Vec<u8>),
}

/// The MySQL errors of a record's statements, in the client's words.
pub fn mysql_error(e: mysql_async::Error, database: &str) -> ConnectError {
    match e {
        mysql_async::Error::Server(se) if se.code == 1146 => ConnectError::new(
            Code::FailedPrecondition,
            format!("Idempotency-Key needs the table {database}.{TABLE} (shim/sql/idempotency.sql; docs/guides/idempotency.md)"),
        ),
        mysql_async::Error::Server(se) if matches!(se.code, 1142 | 1143 | 1044) => ConnectError::new(
            Code::PermissionDenied,
            format!("Idempotency-Key needs SELECT, INSERT and DELETE on {database}.{TABLE} for this user"),
        ),
        mysql_async::Error::Server(se) => ConnectError::new(
            Code::FailedPrecondition,
            format!("the idempotency record in {database}.{TABLE}: {} (errno {}; compare the table with shim/sql/idempotency.sql)", se.message, se.code),
        ),
        e => ConnectError::new(
            Code::Unavailable,
            format!("the idempotency record: {}", crate::errors::mysql::lost_connection(&e)),
        ),
    }
}

/// Looks the key up (user-scoped), checking the record's tag and fingerprint.
pub async fn lookup(
    pools: &Pools,
    sealer: &Sealer,
    creds: &Credentials,
    rpc: &str,
    key: &Key,
    fingerprint: &[u8; 32],
    retention: Duration,
) -> Result<Found, ConnectError> {
    let mut conn = pools.conn(creds).await?;
    let sql = format!(
        "SELECT fingerprint, answer, tag, created < NOW(6) - INTERVAL ? SECOND FROM {TABLE} WHERE user_name = ? AND idem_key = ?"
    );
    let row: Option<Row> = conn
        .exec_first(
            sql,
            (retention.as_secs(), creds.user.as_bytes(), key.0.as_bytes()),
        )
        .await
        .map_err(|e| mysql_error(e, pools.database()))?;
    conn.reset_connection(false); // a read: nothing left behind
    let Some((stored, answer, tag, expired)) = row else {
        return Ok(Found::None);
    };
    if expired {
        return Ok(Found::Expired);
    }
    let parts: [&[u8]; 4] = [creds.user.as_bytes(), key.0.as_bytes(), &stored, &answer];
    if !sealer.tag_holds(&domain(rpc), &parts, &tag) {
        // Written by something else (or under session keys this gateway no longer has):
        // its answer cannot be trusted, and the write it keys was applied once.
        return Err(ConnectError::new(
            Code::FailedPrecondition,
            format!(
                "Idempotency-Key {:?} has a record this gateway cannot verify (written by another party, by another request kind, or under other session keys): its write is not run again",
                key.0
            ),
        ));
    }
    if stored != fingerprint {
        return Err(ConnectError::new(
            Code::FailedPrecondition,
            format!(
                "Idempotency-Key {:?} was used for a different request; use a new key for this one",
                key.0
            ),
        ));
    }
    Ok(Found::Same(answer))
}

/// Deletes this key's record if it is past the retention (autocommit, by primary key).
pub async fn forget_expired(
    pools: &Pools,
    creds: &Credentials,
    key: &Key,
    retention: Duration,
) -> Result<(), ConnectError> {
    let mut conn = pools.conn(creds).await?;
    let sql = format!("DELETE FROM {TABLE} WHERE user_name = ? AND idem_key = ? AND created < NOW(6) - INTERVAL ? SECOND");
    conn.exec_drop(
        sql,
        (creds.user.as_bytes(), key.0.as_bytes(), retention.as_secs()),
    )
    .await
    .map_err(|e| mysql_error(e, pools.database()))?;
    conn.reset_connection(false);
    Ok(())
}

/// Deletes records past the retention, at most `limit` (any user's: the table is
/// shared), so a cleanup never holds many locks.
pub async fn clean(
    pools: &Pools,
    creds: &Credentials,
    retention: Duration,
    limit: u32,
) -> Result<u64, ConnectError> {
    let mut conn = pools.conn(creds).await?;
    let sql =
        format!("DELETE FROM {TABLE} WHERE created < NOW(6) - INTERVAL ? SECOND LIMIT {limit}");
    conn.exec_drop(sql, (retention.as_secs(),))
        .await
        .map_err(|e| mysql_error(e, pools.database()))?;
    let deleted = conn.affected_rows();
    conn.reset_connection(false);
    Ok(deleted)
}

fn binary(v: &[u8]) -> BindVariable {
    BindVariable {
        r#type: Type::Varbinary as i32,
        value: v.to_vec(),
        ..Default::default()
    }
}

/// The statement that records the key inside the write's transaction. A concurrent
/// request with the same key waits at it for the first one's outcome (the row lock);
/// a duplicate key (1062) means another committed first.
pub fn insert(
    sealer: &Sealer,
    creds: &Credentials,
    rpc: &str,
    key: &Key,
    fingerprint: &[u8; 32],
    answer: &[u8],
) -> BatchStatement {
    let parts: [&[u8]; 4] = [creds.user.as_bytes(), key.0.as_bytes(), fingerprint, answer];
    let tag = sealer.tag(&domain(rpc), &parts);
    let mut s = BatchStatement {
        query: format!("INSERT INTO {TABLE} (user_name, idem_key, fingerprint, answer, tag) VALUES (:u, :k, :f, :a, :t)"),
        ..Default::default()
    };
    for (name, value) in [
        ("u", parts[0]),
        ("k", parts[1]),
        ("f", parts[2]),
        ("a", parts[3]),
        ("t", &tag[..]),
    ] {
        s.bind_variables.insert(name.into(), binary(value));
    }
    s
}
