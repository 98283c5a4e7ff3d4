//! Queries through every client form and transport: SELECT 1, every common MySQL
//! type, INSERT results and SQL errors must come back identical each way.
mod common;
use common::*;
use ferry_e2e::rows::cells;
use ferry_proto::vitess::query::{QueryResult, Type};
use ferry_proto::vitess::vtrpc::Code;

fn result(r: &ferry_proto::psdb::v1alpha1::ExecuteResponse) -> &QueryResult {
    assert!(r.error.is_none(), "unexpected error {:?}", r.error);
    r.result.as_ref().expect("a result")
}

#[tokio::test]
async fn select_one_every_way() {
    for &way in ALL_WAYS {
        let r = execute(way, "SELECT 1").await;
        let qr = result(&r);
        assert_eq!(qr.fields.len(), 1, "{way:?}");
        assert_eq!(qr.fields[0].name, "1", "{way:?}");
        // MariaDB types an integer literal INT, MySQL 8 BIGINT.
        assert!(
            matches!(qr.fields[0].r#type(), Type::Int32 | Type::Int64),
            "{way:?}"
        );
        assert_eq!(qr.rows.len(), 1, "{way:?}");
        assert_eq!(cells(&qr.rows[0]), vec![Some(b"1".to_vec())], "{way:?}");
        assert!(
            r.timing > 0.0 && r.timing < 10.0,
            "{way:?}: timing is seconds: {}",
            r.timing
        );
    }
}

/// (column definition, inserted literal, expected vitess type, expected value bytes)
const COLUMNS: &[(&str, &str, Type, &[u8])] = &[
    ("ti TINYINT", "-5", Type::Int8, b"-5"),
    ("tiu TINYINT UNSIGNED", "250", Type::Uint8, b"250"),
    ("si SMALLINT", "-300", Type::Int16, b"-300"),
    ("siu SMALLINT UNSIGNED", "65000", Type::Uint16, b"65000"),
    ("mi MEDIUMINT", "-8000000", Type::Int24, b"-8000000"),
    (
        "miu MEDIUMINT UNSIGNED",
        "16000000",
        Type::Uint24,
        b"16000000",
    ),
    ("i INT", "-2000000000", Type::Int32, b"-2000000000"),
    ("iu INT UNSIGNED", "4000000000", Type::Uint32, b"4000000000"),
    (
        "bi BIGINT",
        "-9000000000000000000",
        Type::Int64,
        b"-9000000000000000000",
    ),
    (
        "biu BIGINT UNSIGNED",
        "18000000000000000000",
        Type::Uint64,
        b"18000000000000000000",
    ),
    (
        "de DECIMAL(10,3)",
        "1234567.891",
        Type::Decimal,
        b"1234567.891",
    ),
    ("fl FLOAT", "1.5", Type::Float32, b"1.5"),
    ("db DOUBLE", "2.25", Type::Float64, b"2.25"),
    ("dt DATE", "'2024-02-29'", Type::Date, b"2024-02-29"),
    ("tm TIME", "'-12:34:56'", Type::Time, b"-12:34:56"),
    (
        "dtm DATETIME(6)",
        "'2024-02-29 12:34:56.123456'",
        Type::Datetime,
        b"2024-02-29 12:34:56.123456",
    ),
    (
        "ts TIMESTAMP NULL",
        "'2024-02-29 12:34:56'",
        Type::Timestamp,
        b"2024-02-29 12:34:56",
    ),
    ("yr YEAR", "2024", Type::Year, b"2024"),
    ("ch CHAR(5)", "'abc'", Type::Char, b"abc"),
    (
        "vc VARCHAR(20)",
        "'h\u{e9}llo'",
        Type::Varchar,
        "h\u{e9}llo".as_bytes(),
    ),
    ("tx TEXT", "'some text'", Type::Text, b"some text"),
    ("bn BINARY(4)", "'ab'", Type::Binary, b"ab\0\0"),
    (
        "vb VARBINARY(8)",
        "x'0001ff'",
        Type::Varbinary,
        b"\x00\x01\xff",
    ),
    ("bl BLOB", "x'000102'", Type::Blob, b"\x00\x01\x02"),
    ("en ENUM('a','b')", "'b'", Type::Enum, b"b"),
    ("st SET('x','y','z')", "'x,z'", Type::Set, b"x,z"),
    ("bt BIT(8)", "b'101'", Type::Bit, b"\x05"),
];

#[tokio::test]
async fn every_common_type_every_way() {
    let t = unique("types");
    let defs: Vec<&str> = COLUMNS.iter().map(|c| c.0).collect();
    let create = format!(
        "CREATE TABLE {t} (id INT AUTO_INCREMENT PRIMARY KEY, {}, js JSON)",
        defs.join(", ")
    );
    result(&execute(Way::ConnectProtoH2, &create).await);
    let names: Vec<&str> = COLUMNS
        .iter()
        .map(|c| c.0.split(' ').next().unwrap())
        .collect();
    let values: Vec<&str> = COLUMNS.iter().map(|c| c.1).collect();
    let insert = format!(
        "INSERT INTO {t} ({}, js) VALUES ({}, '{{\"k\": [1, 2]}}')",
        names.join(", "),
        values.join(", ")
    );
    let ins = execute(Way::ConnectProtoH2, &insert).await;
    assert_eq!(result(&ins).rows_affected, 1);
    result(
        &execute(
            Way::ConnectProtoH2,
            &format!("INSERT INTO {t} (id) VALUES (NULL)"),
        )
        .await,
    );

    let select = format!("SELECT * FROM {t} ORDER BY id");
    let reference = result(&execute(Way::ConnectProtoH2, &select).await).clone();
    for &way in ALL_WAYS {
        let got = result(&execute(way, &select).await).clone();
        assert_eq!(got, reference, "{way:?} differs from Connect proto");
    }

    let f = &reference.fields;
    assert_eq!(f.len(), COLUMNS.len() + 2);
    assert_eq!((f[0].name.as_str(), f[0].r#type()), ("id", Type::Int32));
    assert_eq!(f[0].table, t);
    assert_eq!(f[0].org_table, t);
    assert_eq!(f[0].database, cfg().database);
    assert_eq!(f[0].org_name, "id");
    let rows: Vec<_> = reference.rows.iter().map(cells).collect();
    assert_eq!(rows.len(), 2);
    for (i, (def, _, ty, value)) in COLUMNS.iter().enumerate() {
        let field = &f[i + 1];
        assert_eq!(field.r#type(), *ty, "type of {def}");
        assert_eq!(rows[0][i + 1].as_deref(), Some(*value), "value of {def}");
        assert_eq!(rows[1][i + 1], None, "NULL {def}");
        let binary = matches!(ty, Type::Binary | Type::Varbinary | Type::Blob);
        let textual = matches!(
            ty,
            Type::Char | Type::Varchar | Type::Text | Type::Enum | Type::Set
        );
        if binary {
            assert_eq!(field.charset, 63, "charset of {def}");
        } else if textual {
            assert_ne!(field.charset, 63, "charset of {def}");
        }
    }
    assert_eq!(f[1 + 10].decimals, 3, "DECIMAL(10,3) decimals");
    assert_ne!(f[2].flags & 32, 0, "UNSIGNED flag on tiu");
    assert!(
        f[20].column_length >= 20,
        "VARCHAR(20) length: {}",
        f[20].column_length
    );
    // JSON: MySQL 8 reports JSON (binary charset); MariaDB a utf8mb4_bin LONGTEXT
    // (text charset), which the shim types JSON by its json_valid CHECK.
    let js = f.last().unwrap();
    assert_eq!(js.r#type(), Type::Json);
    assert_eq!(js.column_type, "json");
    assert_eq!(
        rows[0].last().unwrap().as_deref(),
        Some(&b"{\"k\": [1, 2]}"[..])
    );
}

#[tokio::test]
async fn insert_reports_rows_affected_and_insert_id() {
    let t = unique("ins");
    result(
        &execute(
            Way::ConnectJsonH2,
            &format!("CREATE TABLE {t} (id BIGINT AUTO_INCREMENT PRIMARY KEY, v INT)"),
        )
        .await,
    );
    for (n, &way) in ALL_WAYS.iter().enumerate() {
        let r = execute(way, &format!("INSERT INTO {t} (v) VALUES (1), (2), (3)")).await;
        let qr = result(&r);
        assert_eq!(qr.rows_affected, 3, "{way:?}");
        assert_eq!(
            qr.insert_id,
            (n as u64) * 3 + 1,
            "{way:?}: first id of the batch"
        );
        assert!(qr.fields.is_empty() && qr.rows.is_empty());
    }
    let r = execute(
        Way::ConnectJsonH3,
        &format!("UPDATE {t} SET v = 9 WHERE v = 2"),
    )
    .await;
    assert_eq!(result(&r).rows_affected, ALL_WAYS.len() as u64);
}

#[tokio::test]
async fn sql_errors_come_back_in_the_error_field_every_way() {
    for &way in ALL_WAYS {
        let r = execute(way, "SELECT * FROM no_such_table_here").await;
        let e = r
            .error
            .as_ref()
            .unwrap_or_else(|| panic!("{way:?}: expected an error"));
        assert!(
            e.message.contains("doesn't exist"),
            "{way:?}: {}",
            e.message
        );
        assert!(
            e.message.contains("1146"),
            "{way:?}: errno in {}",
            e.message
        );
        assert_ne!(e.code(), Code::Ok);
        let r = execute(way, "SELEKT 1").await;
        let e = r.error.as_ref().expect("syntax error");
        assert_eq!(e.code(), Code::InvalidArgument, "{way:?}: {}", e.message);
    }
    let t = unique("dup");
    result(
        &execute(
            Way::GrpcH2,
            &format!("CREATE TABLE {t} (id INT PRIMARY KEY)"),
        )
        .await,
    );
    result(&execute(Way::GrpcH2, &format!("INSERT INTO {t} VALUES (1)")).await);
    let r = execute(Way::GrpcH2, &format!("INSERT INTO {t} VALUES (1)")).await;
    assert_eq!(
        r.error.as_ref().expect("duplicate key").code(),
        Code::AlreadyExists
    );
}

/// Rows are bounded by count as well as bytes (FERRY_SHIM_MAX_RESULT_ROWS, 100,000):
/// tiny rows cost memory of their own all the way to the client.
#[tokio::test]
async fn row_count_is_bounded() {
    // 10^5 rows from a digits table (MariaDB's seq_1_to_N tables are not in MySQL).
    let rows = "WITH d AS (SELECT 0 UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 \
        UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 \
        UNION ALL SELECT 8 UNION ALL SELECT 9) SELECT 1 FROM d a, d b, d c, d e, d f";
    let r = execute(Way::ConnectJsonH2, rows).await;
    assert_eq!(result(&r).rows.len(), 100_000);
    let r = execute(Way::ConnectJsonH2, &format!("{rows} UNION ALL SELECT 1")).await;
    let e = r.error.as_ref().expect("over the row limit");
    assert_eq!(e.code(), Code::ResourceExhausted);
    assert!(
        e.message.contains("row count exceeded 100000"),
        "{}",
        e.message
    );
}
