//! End-to-end test of the shim binary against a real MySQL/MariaDB.
//!
//! Skipped (with a message) unless `FERRY_TEST_MYSQL_SOCKET` or
//! `FERRY_TEST_MYSQL_PORT` is set. Also read: `FERRY_TEST_MYSQL_HOST`
//! (127.0.0.1), `FERRY_TEST_MYSQL_USER` / `_PASSWORD` / `_DATABASE` (ferry).
//! The user needs all privileges on the database. Run with e.g.
//! `FERRY_TEST_MYSQL_SOCKET=/tmp/shimdb/sock cargo test -p ferry-shim --test mysql`.
mod common;

use common::{count, start_shim, values, Client, Db};
use ferry_proto::psdb::v1alpha1::{
    CloseSessionRequest, CloseSessionResponse, CreateSessionRequest, CreateSessionResponse,
    ExecuteRequest, Role,
};
use ferry_proto::vitess::query::Type;
use ferry_proto::vitess::vtrpc::Code;
use prost::Message;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[tokio::test]
async fn shim_against_mysql() {
    let Some(db) = Db::from_env() else {
        eprintln!("skipped: set FERRY_TEST_MYSQL_SOCKET or FERRY_TEST_MYSQL_PORT to run the shim against MySQL");
        return;
    };
    // One connection per credential: every request reuses the same MySQL
    // session, so anything left behind would show in the next request ...
    // which a pin would take from everyone else: no pins here (transactions
    // are tested through the gateway, tests/e2e, and in stream.rs).
    let shim = start_shim(
        &db,
        "mysql",
        &[("FERRY_POOL_MAX", "1"), ("FERRY_POOL_MAX_PINNED", "0")],
    )
    .await;
    let mut c = Client::connect(shim.port, &db.user, &db.password).await;

    // SELECT 1
    let r = c.ok("SELECT 1 AS one, NULL AS nothing, 'x' AS s").await;
    assert_eq!(
        r.fields.iter().map(|f| f.name.as_str()).collect::<Vec<_>>(),
        ["one", "nothing", "s"]
    );
    assert!(matches!(
        Type::try_from(r.fields[0].r#type).unwrap(),
        Type::Int32 | Type::Int64
    ));
    assert_eq!(Type::try_from(r.fields[1].r#type).unwrap(), Type::NullType);
    assert_eq!(Type::try_from(r.fields[2].r#type).unwrap(), Type::Varchar);
    assert_eq!(values(&r), [[Some("1".into()), None, Some("x".into())]]);
    assert_eq!(r.rows[0].lengths, [1, -1, 1]);
    assert_eq!(r.rows_affected, 0);

    // Types
    c.ok("DROP TABLE IF EXISTS shim_types").await;
    c.ok("CREATE TABLE shim_types (
        i8 TINYINT, u8 TINYINT UNSIGNED, i16 SMALLINT, u24 MEDIUMINT UNSIGNED, i32 INT,
        u64 BIGINT UNSIGNED, dec_ DECIMAL(10,2), f32 FLOAT, f64 DOUBLE, d DATE, dt DATETIME(3),
        ts TIMESTAMP NULL, t TIME, y YEAR, c CHAR(3), vc VARCHAR(10), b BINARY(2), vb VARBINARY(4),
        tx TEXT, bl BLOB, e ENUM('a','b'), s SET('x','y'), bt BIT(8), j JSON)")
        .await;
    c.ok("INSERT INTO shim_types VALUES (-1, 255, -300, 16777215, -70000, 18446744073709551615, 12.34,
        1.5, 2.25, '2024-02-29', '2024-02-29 12:34:56.789', NULL, '-01:02:03', 2024, 'abc', 'hé',
        'xy', 0x00ff, 'text', 0x0001, 'b', 'x,y', b'101', '{\"k\": 1}')")
        .await;
    let r = c.ok("SELECT * FROM shim_types").await;
    let types: Vec<Type> = r
        .fields
        .iter()
        .map(|f| Type::try_from(f.r#type).unwrap())
        .collect();
    use Type::*;
    // MySQL: JSON. MariaDB: a LONGTEXT, utf8mb4_bin collated, and a _bin
    // collation sets the BINARY flag, so vitess' rule makes it BLOB (the
    // charset, not 63, still tells clients it is text).
    let json_type = types[23];
    assert!(matches!(json_type, Json | Text | Blob), "{json_type:?}");
    assert_eq!(
        &types[..23],
        [
            Int8, Uint8, Int16, Uint24, Int32, Uint64, Decimal, Float32, Float64, Date, Datetime,
            Timestamp, Time, Year, Char, Varchar, Binary, Varbinary, Text, Blob, Enum, Set, Bit
        ]
    );
    let v = &values(&r)[0];
    assert_eq!(v[0].as_deref(), Some("-1"));
    assert_eq!(v[5].as_deref(), Some("18446744073709551615"));
    assert_eq!(v[6].as_deref(), Some("12.34"));
    assert_eq!(v[10].as_deref(), Some("2024-02-29 12:34:56.789"));
    assert_eq!(v[11], None);
    assert_eq!(v[12].as_deref(), Some("-01:02:03"));
    assert_eq!(v[15].as_deref(), Some("hé"));
    assert_eq!(
        r.rows[0].values.len() as i64,
        r.rows[0].lengths.iter().filter(|&&l| l > 0).sum::<i64>()
    );
    let f = &r.fields[0];
    assert_eq!(
        (f.table.as_str(), f.org_table.as_str(), f.database.as_str()),
        ("shim_types", "shim_types", db.database.as_str())
    );
    assert_eq!(r.fields[19].charset, 63, "BLOB is binary");

    // INSERT: rows affected, insert id, info
    c.ok("DROP TABLE IF EXISTS shim_rows").await;
    c.ok("CREATE TABLE shim_rows (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(20) UNIQUE)")
        .await;
    let r = c.ok("INSERT INTO shim_rows (v) VALUES ('a')").await;
    assert_eq!(
        (r.rows_affected, r.insert_id, r.insert_id_changed),
        (1, 1, true)
    );
    let r = c.ok("INSERT INTO shim_rows (v) VALUES ('b'), ('c')").await;
    assert_eq!((r.rows_affected, r.insert_id), (2, 2));
    assert!(r.info.contains("Records: 2"), "{:?}", r.info);
    let r = c
        .ok("UPDATE shim_rows SET v = CONCAT(v, '!') WHERE id > 1")
        .await;
    assert_eq!(
        (r.rows_affected, r.insert_id, r.insert_id_changed),
        (2, 0, false)
    );

    // SQL errors come back in the response, with vitess codes and messages.
    let (code, msg) = c.err("SELECT * FROM no_such_table").await;
    assert_eq!(code, Code::NotFound);
    assert!(msg.ends_with("(errno 1146) (sqlstate 42S02)"), "{msg}");
    let (code, msg) = c.err("INSERT INTO shim_rows (v) VALUES ('a')").await;
    assert_eq!(code, Code::AlreadyExists, "{msg}");
    assert_eq!(c.err("SELEC 1").await.0, Code::InvalidArgument);
    // An error in a later statement of a multi-statement query is the answer.
    assert_eq!(
        c.err("SELECT 1; SELECT * FROM no_such_table").await.0,
        Code::NotFound
    );
    // Multi-statement: the first result set is returned.
    assert_eq!(
        values(&c.ok("SELECT 7; SELECT 8").await),
        [[Some("7".into())]]
    );

    // Pool safety: with no pins allowed, BEGIN is refused before it runs, and
    // the next statement on the same (only) connection autocommits: visible
    // from an unrelated connection.
    let (code, msg) = c.err("BEGIN").await;
    assert_eq!(code, Code::ResourceExhausted);
    assert!(msg.contains("FERRY_POOL_MAX_PINNED"), "{msg}");
    // Autocommit travels in the session: setting it holds no connection (its
    // connection is reset before anyone else gets it).
    c.ok("SET autocommit = 0").await;
    c.ok("INSERT INTO shim_rows (v) VALUES ('after-begin')")
        .await;
    assert_eq!(count(&db, "shim_rows WHERE v = 'after-begin'").await, 1);

    // Defence in depth: a procedure that opens a transaction gets past the
    // statement policy and is caught by the status flags; with no pin
    // allowed it is rolled back, and the answer says so.
    c.ok("DROP PROCEDURE IF EXISTS shim_sneaky").await;
    c.ok("CREATE PROCEDURE shim_sneaky() BEGIN START TRANSACTION; INSERT INTO shim_rows (v) VALUES ('sneaky'); END")
        .await;
    let (code, msg) = c.err("CALL shim_sneaky()").await;
    assert_eq!(code, Code::ResourceExhausted, "{msg}");
    assert!(msg.contains("rolled back"), "{msg}");
    assert_eq!(
        count(&db, "shim_rows WHERE v = 'sneaky'").await,
        0,
        "rolled back"
    );
    let r = c.ok("SELECT @@in_transaction, @@autocommit").await;
    assert_eq!(
        values(&r),
        [[Some("0".into()), Some("1".into())]],
        "the next request starts clean"
    );
    c.ok("INSERT INTO shim_rows (v) VALUES ('after-sneaky')")
        .await;
    assert_eq!(count(&db, "shim_rows WHERE v = 'after-sneaky'").await, 1);

    // User variables set inside a SELECT are reset before the connection is reused.
    assert_eq!(
        values(&c.ok("SELECT @shim_v := 5").await),
        [[Some("5".into())]]
    );
    assert_eq!(values(&c.ok("SELECT @shim_v").await), [[None]]);

    // Many concurrent requests on one HTTP/2 connection share the one pooled
    // MySQL connection (FERRY_POOL_MAX=1): they queue, and each gets its answer.
    let mut tasks = Vec::new();
    for i in 0..32 {
        let mut c = Client {
            h2: c.h2.clone(),
            auth: c.auth.clone(),
        };
        tasks.push(tokio::spawn(async move {
            (i, values(&c.ok(&format!("SELECT {i}")).await))
        }));
    }
    for t in tasks {
        let (i, v) = t.await.unwrap();
        assert_eq!(v, [[Some(i.to_string())]]);
    }

    // A request cancelled mid-query (the client resets the stream) leaves a
    // usable connection behind: the pool drains it before reuse.
    let mut c2 = Client {
        h2: c.h2.clone(),
        auth: c.auth.clone(),
    };
    let cancelled = tokio::time::timeout(
        Duration::from_millis(200),
        c2.execute("SELECT SLEEP(1), @shim_c := 1"),
    )
    .await;
    assert!(cancelled.is_err(), "the query should still be running");
    let r = tokio::time::timeout(
        Duration::from_secs(10),
        c.ok("SELECT @shim_c, @@in_transaction"),
    )
    .await
    .unwrap();
    assert_eq!(values(&r), [[None, Some("0".into())]]);

    // Bad credentials: a Connect error, 401, without the password.
    let mut bad = Client::connect(shim.port, &db.user, "wrong-password-xyz").await;
    let a = bad
        .post(
            "/psdb.v1alpha1.Database/Execute",
            "application/proto",
            ExecuteRequest {
                query: "SELECT 1".into(),
                ..Default::default()
            }
            .encode_to_vec(),
        )
        .await;
    assert_eq!(
        (a.status, a.content_type.as_str()),
        (401, "application/json")
    );
    assert_eq!(a.json()["code"], "unauthenticated");
    assert!(!String::from_utf8_lossy(&a.body).contains("wrong-password-xyz"));

    // CreateSession / CloseSession
    let a = c
        .post(
            "/psdb.v1alpha1.Database/CreateSession",
            "application/proto",
            CreateSessionRequest {}.encode_to_vec(),
        )
        .await;
    assert_eq!(a.status, 200);
    let s = CreateSessionResponse::decode(a.body).unwrap();
    assert_eq!(s.branch, db.database);
    let user = s.user.unwrap();
    assert_eq!(
        (user.username.as_str(), user.role),
        (db.user.as_str(), Role::Readwriter as i32)
    );
    assert!(s.session.is_some());
    let a = c
        .post(
            "/psdb.v1alpha1.Database/CloseSession",
            "application/proto",
            CloseSessionRequest::default().encode_to_vec(),
        )
        .await;
    assert_eq!(a.status, 200);
    assert_eq!(
        CloseSessionResponse::decode(a.body).unwrap(),
        CloseSessionResponse::default()
    );

    // Canonical-form checks
    let a = c
        .post(
            "/psdb.v1alpha1.Database/Execute",
            "application/json",
            b"{}".to_vec(),
        )
        .await;
    assert_eq!(
        (a.status, &a.json()["code"]),
        (415, &serde_json::json!("invalid_argument"))
    );
    let a = c
        .post(
            "/psdb.v1alpha1.Database/Nope",
            "application/proto",
            Vec::new(),
        )
        .await;
    assert_eq!(
        (a.status, &a.json()["code"]),
        (404, &serde_json::json!("unimplemented"))
    );
    let a = c
        .post(
            "/psdb.v1alpha1.Database/Execute",
            "application/proto",
            vec![0xff, 0xff, 0xff],
        )
        .await;
    assert_eq!(
        (a.status, &a.json()["code"]),
        (400, &serde_json::json!("invalid_argument"))
    );

    // HTTP/1.1 on TCP and on the unix socket, and the health check.
    let mut tcp = tokio::net::TcpStream::connect(("127.0.0.1", shim.port))
        .await
        .unwrap();
    assert!(http1(&mut tcp, "/healthz")
        .await
        .starts_with("HTTP/1.1 200"));
    let mut unix = tokio::net::UnixStream::connect(&shim.unix).await.unwrap();
    let resp = http1(&mut unix, "/healthz").await;
    assert!(
        resp.starts_with("HTTP/1.1 200") && resp.ends_with("ok\n"),
        "{resp}"
    );
}

async fn http1<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(
    s: &mut S,
    path: &str,
) -> String {
    let req = format!("GET {path} HTTP/1.1\r\nhost: shim\r\nconnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    out
}
