//! The type table: one column per MySQL type, and for each what a vitess server
//! says about it (type, column_type, charset, flags) and the value's bytes — on
//! the server behind the stack, MariaDB or MySQL 8.0 (scripts/e2e.sh runs this
//! against both). The columns come from a table, so column_type is the server's
//! own (`information_schema.COLUMNS`): MariaDB keeps integer display widths,
//! MySQL 8 drops them. The JS driver's view of the same table is
//! tests/driver/types.test.js.
mod common;
use common::*;
use ferry_e2e::rows::cells;
use ferry_proto::psdb::v1alpha1::ExecuteResponse;
use ferry_proto::vitess::query::{Field, QueryResult, Type};

fn result(r: &ExecuteResponse) -> &QueryResult {
    assert!(r.error.is_none(), "unexpected error {:?}", r.error);
    r.result.as_ref().expect("a result")
}

/// Charset ids: `binary`, and for text the collation of the shim's connections
/// (`SET NAMES utf8mb4`: MariaDB's utf8mb4_general_ci, MySQL 8's utf8mb4_0900_ai_ci).
const BIN: u32 = 63;
const TEXT: [u32; 2] = [45, 255];
/// Column definition flags (vitess adds NUM to numeric types).
const UNSIGNED: u32 = 32;
const ZEROFILL: u32 = 64;
const BINARY: u32 = 128;
const BLOB: u32 = 16;
const ENUM: u32 = 256;
const SET: u32 = 2048;
const NUM: u32 = 32768;

/// One column: its definition, the literal inserted, the vitess type, the
/// column_type on [MariaDB, MySQL 8], charset and flags on [MariaDB, MySQL 8],
/// and the value's bytes as the server sends them.
struct Col {
    def: &'static str,
    literal: &'static str,
    ty: Type,
    column_type: [&'static str; 2],
    charset: [u32; 2],
    flags: [u32; 2],
    value: &'static [u8],
}

const fn col(
    def: &'static str,
    literal: &'static str,
    ty: Type,
    column_type: [&'static str; 2],
    charset: [u32; 2],
    flags: u32,
    value: &'static [u8],
) -> Col {
    Col {
        def,
        literal,
        ty,
        column_type,
        charset,
        flags: [flags; 2],
        value,
    }
}

/// POINT(1 2) as MySQL stores it: SRID 0, then WKB (little-endian point).
const POINT: &[u8] = b"\x00\x00\x00\x00\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\xf0\x3f\x00\x00\x00\x00\x00\x00\x00\x40";

#[rustfmt::skip]
const COLS: &[Col] = &[
    col("ti TINYINT", "-128", Type::Int8, ["tinyint(4)", "tinyint"], [BIN; 2], NUM, b"-128"),
    col("tiu TINYINT UNSIGNED", "255", Type::Uint8, ["tinyint(3) unsigned", "tinyint unsigned"], [BIN; 2], NUM | UNSIGNED, b"255"),
    col("si SMALLINT", "-32768", Type::Int16, ["smallint(6)", "smallint"], [BIN; 2], NUM, b"-32768"),
    col("siu SMALLINT UNSIGNED", "65535", Type::Uint16, ["smallint(5) unsigned", "smallint unsigned"], [BIN; 2], NUM | UNSIGNED, b"65535"),
    col("mi MEDIUMINT", "-8388608", Type::Int24, ["mediumint(9)", "mediumint"], [BIN; 2], NUM, b"-8388608"),
    col("miu MEDIUMINT UNSIGNED", "16777215", Type::Uint24, ["mediumint(8) unsigned", "mediumint unsigned"], [BIN; 2], NUM | UNSIGNED, b"16777215"),
    col("i INT", "-2147483648", Type::Int32, ["int(11)", "int"], [BIN; 2], NUM, b"-2147483648"),
    col("iu INT UNSIGNED", "4294967295", Type::Uint32, ["int(10) unsigned", "int unsigned"], [BIN; 2], NUM | UNSIGNED, b"4294967295"),
    col("bi BIGINT", "-9223372036854775808", Type::Int64, ["bigint(20)", "bigint"], [BIN; 2], NUM, b"-9223372036854775808"),
    col("biu BIGINT UNSIGNED", "18446744073709551615", Type::Uint64, ["bigint(20) unsigned", "bigint unsigned"], [BIN; 2], NUM | UNSIGNED, b"18446744073709551615"),
    col("iz INT(6) UNSIGNED ZEROFILL", "42", Type::Uint32, ["int(6) unsigned zerofill"; 2], [BIN; 2], NUM | UNSIGNED | ZEROFILL, b"000042"),
    col("bo BOOLEAN", "TRUE", Type::Int8, ["tinyint(1)"; 2], [BIN; 2], NUM, b"1"),
    col("de DECIMAL(10,2)", "-12345678.91", Type::Decimal, ["decimal(10,2)"; 2], [BIN; 2], NUM, b"-12345678.91"),
    col("fl FLOAT", "1.5", Type::Float32, ["float"; 2], [BIN; 2], NUM, b"1.5"),
    col("db DOUBLE", "-2.25", Type::Float64, ["double"; 2], [BIN; 2], NUM, b"-2.25"),
    col("bt BIT(8)", "b'101'", Type::Bit, ["bit(8)"; 2], [BIN; 2], UNSIGNED, b"\x05"),
    col("d DATE", "'2024-02-29'", Type::Date, ["date"; 2], [BIN; 2], BINARY, b"2024-02-29"),
    col("dt DATETIME(6)", "'2024-02-29 12:34:56.123456'", Type::Datetime, ["datetime(6)"; 2], [BIN; 2], BINARY, b"2024-02-29 12:34:56.123456"),
    // MariaDB marks TIMESTAMP UNSIGNED as well.
    Col { flags: [BINARY | UNSIGNED, BINARY],
        ..col("ts TIMESTAMP NULL", "'2024-02-29 12:34:56'", Type::Timestamp, ["timestamp"; 2], [BIN; 2], 0, b"2024-02-29 12:34:56") },
    col("tm TIME", "'-838:59:59'", Type::Time, ["time"; 2], [BIN; 2], BINARY, b"-838:59:59"),
    col("y YEAR", "2024", Type::Year, ["year(4)", "year"], [BIN; 2], NUM | UNSIGNED | ZEROFILL, b"2024"),
    col("c CHAR(5)", "'ch'", Type::Char, ["char(5)"; 2], TEXT, 0, b"ch"),
    col("vc VARCHAR(20)", "'h\u{e9}llo'", Type::Varchar, ["varchar(20)"; 2], TEXT, 0, "h\u{e9}llo".as_bytes()),
    col("b BINARY(4)", "x'0102'", Type::Binary, ["binary(4)"; 2], [BIN; 2], BINARY, b"\x01\x02\x00\x00"),
    col("vb VARBINARY(8)", "x'00ff'", Type::Varbinary, ["varbinary(8)"; 2], [BIN; 2], BINARY, b"\x00\xff"),
    col("tt TINYTEXT", "'tt'", Type::Text, ["tinytext"; 2], TEXT, BLOB, b"tt"),
    col("tx TEXT", "'tx'", Type::Text, ["text"; 2], TEXT, BLOB, b"tx"),
    col("mt MEDIUMTEXT", "'mt'", Type::Text, ["mediumtext"; 2], TEXT, BLOB, b"mt"),
    col("lt LONGTEXT", "'lt'", Type::Text, ["longtext"; 2], TEXT, BLOB, b"lt"),
    col("tb TINYBLOB", "x'01'", Type::Blob, ["tinyblob"; 2], [BIN; 2], BLOB | BINARY, b"\x01"),
    col("bl BLOB", "x'02'", Type::Blob, ["blob"; 2], [BIN; 2], BLOB | BINARY, b"\x02"),
    col("mb MEDIUMBLOB", "x'03'", Type::Blob, ["mediumblob"; 2], [BIN; 2], BLOB | BINARY, b"\x03"),
    col("lb LONGBLOB", "x'04'", Type::Blob, ["longblob"; 2], [BIN; 2], BLOB | BINARY, b"\x04"),
    col("e ENUM('a','b c')", "'b c'", Type::Enum, ["enum('a','b c')"; 2], TEXT, ENUM, b"b c"),
    col("st SET('x','y','z')", "'x,z'", Type::Set, ["set('x','y','z')"; 2], TEXT, SET, b"x,z"),
    // MariaDB's JSON is a utf8mb4_bin LONGTEXT with a json_valid CHECK: JSON by that
    // CHECK (column_types.rs), in the text charset it is sent in; MySQL's is binary.
    Col { charset: [TEXT[0], BIN],
        ..col("j JSON", "'{\"k\": [1, \"\u{e9}\"]}'", Type::Json, ["json"; 2], [BIN; 2], BLOB | BINARY, "{\"k\": [1, \"\u{e9}\"]}".as_bytes()) },
    col("g GEOMETRY", "ST_GeomFromText('POINT(1 2)')", Type::Geometry, ["geometry"; 2], [BIN; 2], BLOB | BINARY, POINT),
    col("pt POINT", "ST_GeomFromText('POINT(1 2)')", Type::Geometry, ["point"; 2], [BIN; 2], BLOB | BINARY, POINT),
    // A binary collation: the BINARY flag makes it VARBINARY (as vitess types it),
    // though its charset is text.
    col("vcb VARCHAR(20) COLLATE utf8mb4_bin", "'Bin'", Type::Varbinary, ["varchar(20)"; 2], TEXT, BINARY, b"Bin"),
];

/// 0 for MariaDB, 1 for MySQL: the index into the per-server expectations.
async fn server() -> usize {
    let r = execute(Way::ConnectProtoH2, "SELECT VERSION()").await;
    let version = cells(&result(&r).rows[0])[0].clone().expect("a version");
    let version = String::from_utf8(version).expect("text");
    usize::from(!version.contains("MariaDB"))
}

async fn type_table() -> (String, usize) {
    let t = unique("types");
    let defs: Vec<&str> = COLS.iter().map(|c| c.def).collect();
    let create = format!(
        "CREATE TABLE {t} (id INT AUTO_INCREMENT PRIMARY KEY, {}) DEFAULT CHARSET=utf8mb4",
        defs.join(", ")
    );
    result(&execute(Way::ConnectProtoH2, &create).await);
    let names: Vec<&str> = COLS
        .iter()
        .map(|c| c.def.split(' ').next().unwrap())
        .collect();
    let literals: Vec<&str> = COLS.iter().map(|c| c.literal).collect();
    let insert = format!(
        "INSERT INTO {t} ({}) VALUES ({})",
        names.join(", "),
        literals.join(", ")
    );
    result(&execute(Way::ConnectProtoH2, &insert).await);
    let nulls = format!("INSERT INTO {t} (id) VALUES (NULL)");
    result(&execute(Way::ConnectProtoH2, &nulls).await);
    (t, server().await)
}

fn check(field: &Field, c: &Col, s: usize, t: &str) {
    let def = c.def;
    let name = def.split(' ').next().unwrap();
    assert_eq!(field.name, name);
    assert_eq!(field.r#type(), c.ty, "type of {def}");
    assert_eq!(field.column_type, c.column_type[s], "column_type of {def}");
    assert_eq!(field.charset, c.charset[s], "charset of {def}");
    assert_eq!(field.flags, c.flags[s], "flags of {def}");
    assert_eq!(
        (field.table.as_str(), field.org_table.as_str()),
        (t, t),
        "table of {def}"
    );
    assert_eq!(field.database, cfg().database, "database of {def}");
    assert_eq!(field.org_name, name, "org_name of {def}");
}

#[tokio::test]
async fn every_type_as_vitess_describes_it() {
    let (t, s) = type_table().await;
    let select = format!("SELECT * FROM {t} ORDER BY id");
    let qr = result(&execute(Way::ConnectProtoH2, &select).await).clone();
    let f = &qr.fields;
    assert_eq!(f.len(), COLS.len() + 1);
    assert_eq!(f[0].r#type(), Type::Int32);
    assert_eq!(f[0].column_type, ["int(11)", "int"][s]);
    // NOT NULL | PRI_KEY | AUTO_INCREMENT | PART_KEY, and NUM.
    assert_eq!(f[0].flags, 1 | 2 | 512 | 16384 | NUM);
    let rows: Vec<_> = qr.rows.iter().map(cells).collect();
    assert_eq!(rows.len(), 2);
    let mut failures = Vec::new();
    for (i, c) in COLS.iter().enumerate() {
        let r = std::panic::catch_unwind(|| {
            check(&f[i + 1], c, s, &t);
            assert_eq!(
                rows[0][i + 1].as_deref(),
                Some(c.value),
                "value of {}",
                c.def
            );
            assert_eq!(rows[1][i + 1], None, "NULL {}", c.def);
        });
        if let Err(e) = r {
            let msg = e
                .downcast_ref::<String>()
                .cloned()
                .unwrap_or_else(|| "?".into());
            failures.push(msg);
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} columns differ on {}:\n{}",
        failures.len(),
        COLS.len(),
        ["MariaDB", "MySQL 8"][s],
        failures.join("\n")
    );
    // Every client form gets the same fields (column_type included).
    for &way in ALL_WAYS {
        let got = result(&execute(way, &select).await).clone();
        assert_eq!(got.fields, qr.fields, "{way:?}");
    }
}

#[tokio::test]
async fn aliases_keep_the_column_type_and_expressions_have_none() {
    let (t, _) = type_table().await;
    let r = execute(
        Way::ConnectJsonH2,
        &format!("SELECT e AS choice, j AS doc, i + 1 AS expr, CAST(de AS CHAR) AS txt, 1 AS one FROM {t} WHERE id = 1"),
    )
    .await;
    let f = &result(&r).fields;
    assert_eq!(
        (f[0].name.as_str(), f[0].org_name.as_str()),
        ("choice", "e")
    );
    assert_eq!(f[0].column_type, "enum('a','b c')");
    assert_eq!(
        (f[1].r#type(), f[1].column_type.as_str()),
        (Type::Json, "json")
    );
    // Expressions: no table, no column_type (as vitess: it sends none at all).
    for e in &f[2..] {
        assert!(e.org_table.is_empty(), "{}", e.name);
        assert_eq!(e.column_type, "", "{}", e.name);
    }
    assert_eq!(f[4].flags & NUM, NUM, "a number literal is NUM");
    assert_eq!(f[3].flags & NUM, 0, "a string is not");
}

/// A table changed through the gateway is described as it is now, not as the
/// cache last saw it.
#[tokio::test]
async fn a_changed_table_is_described_anew() {
    let t = unique("retype");
    let run =
        |sql: String| async move { result(&execute(Way::ConnectProtoH2, &sql).await).clone() };
    run(format!(
        "CREATE TABLE {t} (id INT PRIMARY KEY, v ENUM('a','b'), doc LONGTEXT)"
    ))
    .await;
    run(format!("INSERT INTO {t} VALUES (1, 'a', '[1]')")).await;
    let before = run(format!("SELECT v, doc FROM {t}")).await;
    assert_eq!(before.fields[0].column_type, "enum('a','b')");
    assert_eq!(before.fields[1].r#type(), Type::Text);
    run(format!(
        "ALTER TABLE {t} MODIFY v ENUM('a','b','c'), MODIFY doc JSON"
    ))
    .await;
    let after = run(format!("SELECT v, doc FROM {t}")).await;
    assert_eq!(after.fields[0].column_type, "enum('a','b','c')");
    assert_eq!(after.fields[1].r#type(), Type::Json);
    assert_eq!(after.fields[1].column_type, "json");
}

/// JSON wherever the server knows it is JSON: a temporary table's column, a view's,
/// and JSON functions' results (MariaDB says so in its extended column metadata, MySQL 8
/// with its own type); text functions stay text.
#[tokio::test]
async fn json_from_temporary_tables_views_and_functions() {
    let t = unique("jsonv");
    let run = |sql: String, s: Option<ferry_proto::psdb::v1alpha1::Session>| async move {
        let r = execute_in(Way::ConnectJsonH2, s.as_ref(), &sql).await;
        assert!(r.error.is_none(), "{sql}: {:?}", r.error);
        r
    };
    run(
        format!("CREATE TABLE {t} (id INT PRIMARY KEY, doc JSON)"),
        None,
    )
    .await;
    run(format!("INSERT INTO {t} VALUES (1, '{{\"a\": 1}}')"), None).await;
    run(
        format!("CREATE VIEW {t}_v AS SELECT id, doc FROM {t}"),
        None,
    )
    .await;
    let tmp = run(
        "CREATE TEMPORARY TABLE jsonv_tmp (doc JSON) SELECT '[1, 2]' AS doc".to_string(),
        None,
    )
    .await
    .session;
    let cases = [
        (format!("SELECT doc FROM {t}_v"), Type::Json),
        ("SELECT doc FROM jsonv_tmp".to_string(), Type::Json),
        ("SELECT JSON_OBJECT('a', 1)".to_string(), Type::Json),
        ("SELECT JSON_ARRAY(1, 'x')".to_string(), Type::Json),
        (
            format!("SELECT JSON_EXTRACT(doc, '$.a') FROM {t}"),
            Type::Json,
        ),
        ("SELECT JSON_QUOTE('x')".to_string(), Type::Text),
    ];
    for (sql, want) in cases {
        let r = run(sql.clone(), tmp.clone()).await;
        let f = &result(&r).fields[0];
        let got = f.r#type();
        if want == Type::Json {
            assert_eq!((got, f.column_type.as_str()), (Type::Json, "json"), "{sql}");
        } else {
            // A string (its exact type is the server's: VARCHAR, VARBINARY...), not JSON.
            assert_ne!(got, Type::Json, "{sql}");
        }
    }
    if let Some(s) = tmp {
        close_session(&s).await;
    }
    run(format!("DROP VIEW {t}_v"), None).await;
}
