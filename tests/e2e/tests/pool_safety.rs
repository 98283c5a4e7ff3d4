//! Pool safety: a statement that would leave a transaction or session state
//! behind is refused with a clear error, and the next request never inherits
//! another request's transaction. Checked from outside Ferry with the mariadb
//! client: rows are committed and no transaction stays open in the pool.
mod common;
use common::*;
use ferry_proto::vitess::vtrpc::Code;

fn open_transactions() -> u64 {
    mariadb_root("SELECT COUNT(*) FROM information_schema.innodb_trx")
        .parse()
        .expect("a count")
}

#[tokio::test]
async fn begin_then_insert_does_not_run_in_a_leftover_transaction() {
    let t = unique("tx");
    let r = execute(
        Way::ConnectJsonH2,
        &format!("CREATE TABLE {t} (id INT PRIMARY KEY) ENGINE=InnoDB"),
    )
    .await;
    assert!(r.error.is_none(), "{:?}", r.error);
    let starters = [
        "BEGIN",
        "begin work",
        "  /* leading comment */ START TRANSACTION",
        "START TRANSACTION READ ONLY",
        "SET autocommit = 0",
        "set @@autocommit=0",
        "SELECT 1; BEGIN",
        "XA START 'x'",
    ];
    let mut committed = 0;
    // Several rounds, so the statements land on different pooled connections.
    for round in 0..4 {
        for (i, starter) in starters.iter().enumerate() {
            let way = ALL_WAYS[(round + i) % ALL_WAYS.len()];
            let r = execute(way, starter).await;
            let e = r
                .error
                .as_ref()
                .unwrap_or_else(|| panic!("{starter:?} must be refused ({way:?})"));
            assert!(
                matches!(
                    e.code(),
                    Code::Unimplemented | Code::InvalidArgument | Code::FailedPrecondition
                ),
                "{starter:?}: {:?} {}",
                e.code(),
                e.message
            );
            assert!(!e.message.is_empty());
            let id = round * 100 + i;
            let r = execute(way, &format!("INSERT INTO {t} VALUES ({id})")).await;
            assert!(r.error.is_none(), "insert after {starter:?}: {:?}", r.error);
            committed += 1;
            let seen: usize = mariadb_root(&format!("SELECT COUNT(*) FROM {t}"))
                .parse()
                .unwrap();
            assert_eq!(
                seen, committed,
                "the insert after {starter:?} is committed and visible to others"
            );
            assert_eq!(
                open_transactions(),
                0,
                "no transaction left open after {starter:?}"
            );
        }
    }
}

#[tokio::test]
async fn session_state_is_refused_and_never_inherited() {
    for stmt in [
        "SET @v = 42",
        "SET NAMES latin1",
        "SET SESSION sql_mode = ''",
        "USE mysql",
        "LOCK TABLES dual READ",
    ] {
        let r = execute(Way::ConnectProtoH2, stmt).await;
        assert!(r.error.is_some(), "{stmt:?} must be refused");
    }
    let t = unique("tmp");
    let r = execute(
        Way::ConnectProtoH2,
        &format!("CREATE TEMPORARY TABLE {t} (id INT)"),
    )
    .await;
    assert!(r.error.is_some(), "temporary tables are session state");
    for _ in 0..20 {
        let r = execute(Way::ConnectProtoH2, "SELECT @v, DATABASE(), @@autocommit").await;
        let qr = r.result.expect("result");
        let row = ferry_e2e::rows::cells(&qr.rows[0]);
        assert_eq!(row[0], None, "no user variable leaks from another request");
        assert_eq!(
            row[1].as_deref(),
            Some(cfg().database.as_bytes()),
            "default database"
        );
        assert_eq!(row[2].as_deref(), Some(&b"1"[..]), "autocommit on");
    }
    assert_eq!(open_transactions(), 0);
}
