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

/// Kills the statement running on `conn` and waits for the KILL, so the
/// statement is gone once this returns; then closes `conn` in the background.
/// The work runs in a task of its own: a caller that is dropped meanwhile (its
/// client gave up too) does not leave a connection half stopped. Whether it was
/// stopped: `false` when the KILL failed or timed out (e.g. vtgate without
/// `--allow-kill-statement`), and the statement may still run.
pub async fn stop(pools: &Pools, creds: &Credentials, conn: Conn, why: &str) -> bool {
    let opts = pools.side_opts(creds);
    let (user, why) = (creds.user.clone(), why.to_owned());
    let (killed_tx, killed_rx) = oneshot::channel();
    tokio::spawn(async move {
        let id = conn.id();
        let (killed, outcome) = match tokio::time::timeout(KILL_WAIT, kill_query(opts, id)).await {
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
        let _ = tokio::time::timeout(CLOSE_WAIT, conn.disconnect()).await;
    });
    killed_rx.await.unwrap_or(false)
}

async fn kill_query(opts: OptsBuilder, id: u32) -> Result<(), mysql_async::Error> {
    let mut side = Conn::new(opts).await?;
    let killed = side.query_drop(format!("KILL QUERY {id}")).await;
    let _ = side.disconnect().await;
    match killed {
        // ER_NO_SUCH_THREAD: it ended by itself meanwhile.
        Err(mysql_async::Error::Server(se)) if se.code == 1094 => Ok(()),
        other => other,
    }
}
