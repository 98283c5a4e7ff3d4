//! Stopping a statement that must not run on: its stream's client went away,
//! or its deadline passed.
//!
//! Dropping our side is not enough: MySQL notices a vanished client only when
//! it next writes to it, so a `SELECT SLEEP(30)` or a long sort would run on.
//! `KILL QUERY <id>` from a second connection stops it; any account may kill
//! its own threads, so the second connection uses the same credentials (and
//! not the pool, which the very statement may have exhausted). The stopped
//! connection was left in the middle of a result: it is closed, never reused.
use crate::credentials::Credentials;
use crate::mysql::pool::Pools;
use crate::telemetry::log::Level;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, OptsBuilder};
use std::time::Duration;
use tokio::sync::oneshot;

/// How long the KILL may take before the answer goes out anyway.
const KILL_WAIT: Duration = Duration::from_secs(2);
/// How long closing the stopped connection may take (it first reads what is
/// left of the killed result); then it is dropped unread.
const CLOSE_WAIT: Duration = Duration::from_secs(5);

/// Kills the statement running on `conn` and waits until it has ended, so the
/// statement is gone once this returns `true`; `conn` is closed meanwhile.
/// The work runs in a task of its own: a caller that is dropped meanwhile (its
/// client gave up too) does not leave a connection half stopped. Whether it was
/// stopped: `false` when the KILL failed, or the statement had not ended within
/// KILL_WAIT (e.g. vtgate without `--allow-kill-statement`; MariaDB unwinding a
/// write on a full disk), and the statement may still run.
pub async fn stop(pools: &Pools, creds: &Credentials, conn: Conn, why: &str) -> bool {
    let opts = pools.side_opts(creds);
    // vtgate's connection ids are its own: a tablet's process list does not know them.
    let wait_until_ended = !pools.is_vitess();
    let (user, why) = (creds.user.clone(), why.to_owned());
    let (killed_tx, killed_rx) = oneshot::channel();
    tokio::spawn(async move {
        let id = conn.id();
        // Closed meanwhile (it first reads what is left of the result): a statement
        // blocked writing its rows to us ends only once they are read or the connection
        // is gone, so its end could not be awaited with the connection left unread.
        let closing = tokio::spawn(async move {
            let _ = tokio::time::timeout(CLOSE_WAIT, conn.disconnect()).await;
        });
        let (killed, outcome) =
            match tokio::time::timeout(KILL_WAIT, kill_query(opts, id, wait_until_ended)).await {
                Ok(Ok(())) => (true, "killed".to_owned()),
                Ok(Err(e)) => (false, format!("kill failed: {e}")),
                Err(_) => (false, "kill timed out".to_owned()),
            };
        crate::log!(
            Level::Info,
            "statement stopped",
            user = user,
            connection = id,
            reason = why,
            outcome = outcome
        );
        let _ = killed_tx.send(killed);
        let _ = closing.await;
    });
    killed_rx.await.unwrap_or(false)
}

/// `KILL QUERY`, then waits until the statement has ended: MySQL acknowledges a KILL
/// before the statement unwinds, which can take long (a commit waiting for disk
/// space; a rollback of a large write). Ended: the thread runs nothing (its `INFO` is
/// empty) or is gone. The caller's KILL_WAIT bounds the whole. Not on Vitess (`wait`
/// false): vtgate's connection ids are not in a tablet's process list, so there the
/// KILL's answer is taken as the end.
async fn kill_query(opts: OptsBuilder, id: u32, wait: bool) -> Result<(), mysql_async::Error> {
    let mut side = Conn::new(opts).await?;
    let killed = match side.query_drop(format!("KILL QUERY {id}")).await {
        // ER_NO_SUCH_THREAD: it ended by itself meanwhile.
        Err(mysql_async::Error::Server(se)) if se.code == 1094 => Ok(()),
        other => other,
    };
    let ended = match killed {
        Ok(()) if wait => until_ended(&mut side, id).await,
        Ok(()) => Ok(()),
        Err(e) => Err(e),
    };
    let _ = side.disconnect().await;
    ended
}

async fn until_ended(side: &mut Conn, id: u32) -> Result<(), mysql_async::Error> {
    // SHOW PROCESSLIST, not information_schema: that one needs a temporary table,
    // which a full disk refuses. An account sees its own threads.
    loop {
        let rows: Vec<mysql_async::Row> = side.query("SHOW FULL PROCESSLIST").await?;
        let running = rows.iter().any(|r| {
            r.get_opt::<u64, _>("Id").and_then(Result::ok) == Some(u64::from(id))
                && r.get_opt::<Option<String>, _>("Info")
                    .and_then(Result::ok)
                    .flatten()
                    .is_some()
        });
        if !running {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
