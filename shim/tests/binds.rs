//! Bind variables and Prepare, straight at the shim binary against a real
//! MySQL/MariaDB (skipped without one, as mysql.rs): every vitess type bound
//! through the binary protocol answers what the unbound literal answers,
//! lists, refused binds, injection payloads kept as data, binary-protocol
//! rows byte-identical to text-protocol ones, Prepare, and binds in
//! transactions, session state, StreamExecute and the limits.
// Exact floating-point ties are part of what is tested.
#![allow(clippy::excessive_precision)]
mod common;

use common::{start_shim, values, Client, Db, Shim};
use ferry_proto::psdb::v1alpha1::{
    ExecuteRequest, ExecuteResponse, PrepareRequest, PrepareResponse, Session,
};
use ferry_proto::vitess::query::{BindVariable, Field, QueryResult, Type, Value as VtValue};
use ferry_proto::vitess::vtrpc::Code;
use prost::Message;
use std::collections::HashMap;

const EXECUTE: &str = "/psdb.v1alpha1.Database/Execute";
const STREAM: &str = "/psdb.v1alpha1.Database/StreamExecute";
const PREPARE: &str = "/psdb.v1alpha1.Database/Prepare";

async fn setup(name: &str, env: &[(&str, &str)]) -> Option<(Db, Shim, Client)> {
    let Some(db) = Db::from_env() else {
        eprintln!("skipped: set FERRY_TEST_MYSQL_SOCKET or FERRY_TEST_MYSQL_PORT to run the shim against MySQL");
        return None;
    };
    let shim = start_shim(&db, name, env).await;
    let c = Client::connect(shim.port, &db.user, &db.password).await;
    Some((db, shim, c))
}

fn bv(ty: Type, value: &[u8]) -> BindVariable {
    BindVariable {
        r#type: ty as i32,
        value: value.to_vec(),
        values: Vec::new(),
    }
}

fn tuple(values: &[(Type, &[u8])]) -> BindVariable {
    BindVariable {
        r#type: Type::Tuple as i32,
        value: Vec::new(),
        values: values
            .iter()
            .map(|(t, v)| VtValue {
                r#type: *t as i32,
                value: v.to_vec(),
            })
            .collect(),
    }
}

type Binds = HashMap<String, BindVariable>;

fn binds(list: &[(&str, BindVariable)]) -> Binds {
    list.iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect()
}

fn request(query: &str, binds: Binds, session: Option<Session>) -> Vec<u8> {
    ExecuteRequest {
        query: query.into(),
        bind_variables: binds,
        session,
        ..Default::default()
    }
    .encode_to_vec()
}

async fn exec(c: &mut Client, query: &str, b: Binds, session: Option<Session>) -> ExecuteResponse {
    let a = c
        .post(EXECUTE, "application/proto", request(query, b, session))
        .await;
    assert_eq!(a.status, 200, "{query}: {:?}", a.body);
    ExecuteResponse::decode(a.body).expect("ExecuteResponse")
}

async fn ok(c: &mut Client, query: &str, b: &[(&str, BindVariable)]) -> QueryResult {
    let r = exec(c, query, binds(b), None).await;
    assert!(r.error.is_none(), "{query}: {:?}", r.error);
    r.result.expect("result")
}

async fn bad(c: &mut Client, query: &str, b: &[(&str, BindVariable)]) -> (Code, String) {
    let r = exec(c, query, binds(b), None).await;
    assert!(r.result.is_none(), "{query}");
    let e = r.error.unwrap_or_else(|| panic!("{query} should fail"));
    (Code::try_from(e.code).unwrap(), e.message)
}

async fn prepare(
    c: &mut Client,
    query: &str,
    b: Binds,
    session: Option<Session>,
) -> PrepareResponse {
    let msg = PrepareRequest {
        session,
        query: query.into(),
        bind_variables: b,
    };
    let a = c
        .post(PREPARE, "application/proto", msg.encode_to_vec())
        .await;
    assert_eq!(
        (a.status, a.content_type.as_str()),
        (200, "application/proto"),
        "{query}: {:?}",
        a.body
    );
    PrepareResponse::decode(a.body).expect("PrepareResponse")
}

/// A StreamExecute answer: its data messages and its end message.
async fn stream(
    c: &mut Client,
    query: &str,
    b: Binds,
    session: Option<Session>,
) -> (Vec<ExecuteResponse>, serde_json::Value) {
    let a = c
        .post(STREAM, "application/proto", request(query, b, session))
        .await;
    assert_eq!(
        (a.status, a.content_type.as_str()),
        (200, "application/connect+proto"),
        "{query}: {:?}",
        a.body
    );
    let mut msgs = Vec::new();
    let mut at = &a.body[..];
    loop {
        let flags = at[0];
        let len = u32::from_be_bytes(at[1..5].try_into().unwrap()) as usize;
        let payload = &at[5..5 + len];
        at = &at[5 + len..];
        if flags & 2 != 0 {
            assert!(at.is_empty(), "data after the end message");
            return (msgs, serde_json::from_slice(payload).unwrap());
        }
        msgs.push(ExecuteResponse::decode(payload).unwrap());
    }
}

/// The columns as the answer describes them, for comparing two answers.
fn described(fields: &[Field]) -> Vec<(String, Type, u32, u32, u32, u32)> {
    fields
        .iter()
        .map(|f| {
            (
                f.name.clone(),
                Type::try_from(f.r#type).unwrap(),
                f.decimals,
                f.flags,
                f.column_length,
                f.charset,
            )
        })
        .collect()
}

fn raw_values(r: &QueryResult) -> Vec<Vec<Option<Vec<u8>>>> {
    r.rows
        .iter()
        .map(|row| {
            let mut at = 0;
            row.lengths
                .iter()
                .map(|&len| {
                    (len >= 0).then(|| {
                        let v = row.values[at..at + len as usize].to_vec();
                        at += len as usize;
                        v
                    })
                })
                .collect()
        })
        .collect()
}

/// Every bound type answers what the literal vitess would have written in
/// the SQL text answers: the same vitess type and the same bytes.
#[tokio::test]
async fn every_type_binds_as_its_literal() {
    let Some((_db, _shim, mut c)) = setup("binds-types", &[]).await else {
        return;
    };
    use Type::*;
    let version = ok(&mut c, "SELECT VERSION()", &[]).await;
    let mariadb = values(&version)[0][0]
        .as_deref()
        .unwrap_or("")
        .contains("MariaDB");
    // Integers are bound as 64-bit parameters: their answer is INT64 or
    // UINT64 whatever the literal's width; everything else has the literal's type.
    let cases: &[(Type, &[u8], &str, Option<Type>)] = &[
        (NullType, b"", "NULL", None),
        (Int8, b"-128", "-128", Some(Int64)),
        (Int16, b"32767", "32767", Some(Int64)),
        (Int24, b"-8388608", "-8388608", Some(Int64)),
        (Int32, b"2147483647", "2147483647", Some(Int64)),
        (Int64, b"-9223372036854775808", "-9223372036854775808", None),
        (Uint8, b"255", "255", Some(Uint64)),
        (Uint16, b"65535", "65535", Some(Uint64)),
        (Uint24, b"16777215", "16777215", Some(Uint64)),
        (Uint32, b"4294967295", "4294967295", Some(Uint64)),
        (
            Uint64,
            b"18446744073709551615",
            "18446744073709551615",
            None,
        ),
        (Year, b"2024", "2024", Some(Uint64)),
        (Bit, b"\x05", "5", Some(Uint64)),
        (Float32, b"0.1", "0.1e0", None),
        (Float64, b"-1.5e-7", "-1.5e-7", None),
        (Float64, b"1e20", "1e20", None),
        (
            Float64,
            b"0.30000000000000004",
            "0.30000000000000004e0",
            None,
        ),
        (Decimal, b"-12.50", "-12.50", None),
        (Decimal, b"0.001", "0.001", None),
        (
            Decimal,
            b"12345678901234567890.123456789",
            "12345678901234567890.123456789",
            None,
        ),
        (Varchar, "héllo".as_bytes(), "'héllo'", None),
        (Char, b"abc", "'abc'", None),
        (Text, b"some text", "'some text'", None),
        (Enum, b"b", "'b'", None),
        (Set, b"x,y", "'x,y'", None),
        (Json, br#"{"k": [1, 2]}"#, r#"'{"k": [1, 2]}'"#, None),
        (Varbinary, b"bytes", "'bytes'", None),
        (Binary, b"ab", "'ab'", None),
        (Blob, b"blob", "'blob'", None),
        (Date, b"2024-02-29", "'2024-02-29'", None),
        (Time, b"-838:59:59", "'-838:59:59'", None),
        (
            Datetime,
            b"2024-02-29 12:34:56.789",
            "'2024-02-29 12:34:56.789'",
            None,
        ),
        (
            Timestamp,
            b"2030-01-19 03:14:07",
            "'2030-01-19 03:14:07'",
            None,
        ),
        (Hexnum, b"0x4142", "0x4142", None),
        (Hexval, b"x'4142'", "X'4142'", None),
        (Bitnum, b"0b1000001", "0b1000001", None),
    ];
    for &(ty, value, literal, bound_type) in cases {
        let bound = ok(&mut c, "SELECT :x AS v", &[("x", bv(ty, value))]).await;
        let unbound = ok(&mut c, &format!("SELECT {literal} AS v"), &[]).await;
        let what = format!("{ty:?} {:?} vs {literal}", String::from_utf8_lossy(value));
        let literal_type = Type::try_from(unbound.fields[0].r#type).unwrap();
        let want = match (ty, mariadb) {
            // MySQL 8 types a NULL parameter without context as VARCHAR.
            (NullType, false) => Varchar,
            _ => bound_type.unwrap_or(literal_type),
        };
        assert_eq!(
            Type::try_from(bound.fields[0].r#type).unwrap(),
            want,
            "{what}"
        );
        assert_eq!(raw_values(&bound), raw_values(&unbound), "{what}");
    }
    // The same with ? (v1...) and as elements of a list.
    let r = ok(
        &mut c,
        "SELECT ?, ?, 1 IN ::l",
        &[
            ("v1", bv(Int64, b"1")),
            ("v2", bv(Varchar, b"two")),
            ("l", tuple(&[(Decimal, b"1.0"), (Int64, b"2")])),
        ],
    )
    .await;
    assert_eq!(
        values(&r),
        [[Some("1".into()), Some("two".into()), Some("1".into())]]
    );
}

/// The same statement with values of other types, one after the other on
/// the only connection: each answers its own value (a reused prepared
/// statement would convert them to the first one's type on MySQL 8).
#[tokio::test]
async fn a_statement_is_prepared_for_each_request() {
    let Some((_db, _shim, mut c)) = setup("binds-reuse", &[("FERRY_POOL_MAX", "1")]).await else {
        return;
    };
    use Type::*;
    let cases: &[(Type, &[u8], Option<&str>)] = &[
        (Float64, b"1.5", Some("1.5")),
        (Varchar, b"2x", Some("2x")),
        (Int64, b"7", Some("7")),
        (NullType, b"", None),
        (Date, b"2024-01-02", Some("2024-01-02")),
        (Float64, b"2.5", Some("2.5")),
    ];
    for &(ty, value, want) in cases {
        let r = ok(&mut c, "SELECT :x", &[("x", bv(ty, value))]).await;
        assert_eq!(values(&r), [[want.map(str::to_owned)]], "{ty:?}");
    }
}

/// A table with every column type: a row inserted with binds equals one
/// inserted with literals, bound comparisons find both, and a bound SELECT
/// (binary protocol) answers the same fields and bytes as an unbound one.
#[tokio::test]
async fn binds_store_compare_and_read_like_literals() {
    let Some((_db, _shim, mut c)) = setup("binds-table", &[]).await else {
        return;
    };
    use Type::*;
    ok(&mut c, "DROP TABLE IF EXISTS bind_types", &[]).await;
    ok(
        &mut c,
        "CREATE TABLE bind_types (id INT PRIMARY KEY, i8 TINYINT, u8 TINYINT UNSIGNED,
          i16 SMALLINT, u24 MEDIUMINT UNSIGNED, i32 INT, u64 BIGINT UNSIGNED, dec_ DECIMAL(10,2),
          f32 FLOAT, f64 DOUBLE, d DATE, dt DATETIME(3), ts TIMESTAMP(6) NULL, t TIME(1), y YEAR,
          c CHAR(3), vc VARCHAR(10), b BINARY(2), vb VARBINARY(8), tx TEXT, bl BLOB,
          e ENUM('a','b'), s SET('x','y'), bt BIT(8), j JSON, iz INT(5) ZEROFILL, fz FLOAT(7,2),
          dz DOUBLE(12,4) UNSIGNED ZEROFILL, n INT NULL)",
        &[],
    )
    .await;
    ok(
        &mut c,
        r#"INSERT INTO bind_types VALUES (1, -1, 255, -300, 16777215, -70000,
          18446744073709551615, 12.34, 1.5, 2.25, '2024-02-29', '2024-02-29 12:34:56.789',
          '2030-01-19 03:14:07.000001', '-01:02:03.5', 2024, 'abc', 'hé', 'xy', 0x00ff27,
          'text', 0x0001, 'b', 'x,y', b'101', '{"k": 1}', 42, 3.14159, 2.5, NULL)"#,
        &[],
    )
    .await;
    let row: Vec<(&str, BindVariable)> = vec![
        ("i8", bv(Int8, b"-1")),
        ("u8", bv(Uint8, b"255")),
        ("i16", bv(Int16, b"-300")),
        ("u24", bv(Uint24, b"16777215")),
        ("i32", bv(Int32, b"-70000")),
        ("u64", bv(Uint64, b"18446744073709551615")),
        ("dec", bv(Decimal, b"12.34")),
        ("f32", bv(Float32, b"1.5")),
        ("f64", bv(Float64, b"2.25")),
        ("d", bv(Date, b"2024-02-29")),
        ("dt", bv(Datetime, b"2024-02-29 12:34:56.789")),
        ("ts", bv(Timestamp, b"2030-01-19 03:14:07.000001")),
        ("t", bv(Time, b"-01:02:03.5")),
        ("y", bv(Year, b"2024")),
        ("c", bv(Char, b"abc")),
        ("vc", bv(Varchar, "hé".as_bytes())),
        ("b", bv(Binary, b"xy")),
        ("vb", bv(Varbinary, b"\x00\xff'")),
        ("tx", bv(Text, b"text")),
        ("bl", bv(Blob, b"\x00\x01")),
        ("e", bv(Enum, b"b")),
        ("s", bv(Set, b"x,y")),
        ("bt", bv(Bit, b"\x05")),
        ("j", bv(Json, br#"{"k": 1}"#)),
        ("iz", bv(Uint32, b"42")),
        ("fz", bv(Float64, b"3.14159")),
        ("dz", bv(Decimal, b"2.5")),
        ("n", bv(NullType, b"")),
    ];
    let names: Vec<String> = row.iter().map(|(n, _)| format!(":{n}")).collect();
    let mut with_id = row.clone();
    with_id.push(("id", bv(Int64, b"2")));
    let r = ok(
        &mut c,
        &format!("INSERT INTO bind_types VALUES (:id, {})", names.join(", ")),
        &with_id,
    )
    .await;
    assert_eq!(r.rows_affected, 1);
    let one = ok(&mut c, "SELECT * FROM bind_types WHERE id = 1", &[]).await;
    let two = ok(&mut c, "SELECT * FROM bind_types WHERE id = 2", &[]).await;
    assert_eq!(raw_values(&one)[0][1..], raw_values(&two)[0][1..]);

    // Bound comparisons with every column find both rows.
    let conds: Vec<String> = row
        .iter()
        .filter(|(n, _)| !matches!(*n, "n" | "j" | "f32" | "fz"))
        .map(|(n, _)| {
            let col = if *n == "dec" { "dec_" } else { n };
            format!("{col} = :{n}")
        })
        .collect();
    let cond_binds: Vec<(&str, BindVariable)> = row
        .iter()
        .filter(|(n, _)| !matches!(*n, "n" | "j" | "f32" | "fz"))
        .cloned()
        .collect();
    let found = ok(
        &mut c,
        &format!(
            "SELECT id FROM bind_types WHERE {} ORDER BY id",
            conds.join(" AND ")
        ),
        &cond_binds,
    )
    .await;
    assert_eq!(values(&found), [[Some("1".into())], [Some("2".into())]]);

    // The binary protocol's rows and fields are the text protocol's.
    let bound = ok(
        &mut c,
        "SELECT * FROM bind_types WHERE id = :id",
        &[("id", bv(Int64, b"1"))],
    )
    .await;
    assert_eq!(described(&bound.fields), described(&one.fields));
    assert_eq!(raw_values(&bound), raw_values(&one));
    assert_eq!(bound.rows[0].lengths, one.rows[0].lengths);
}

/// Floating-point and temporal values and expressions: the binary protocol
/// gives binary values, written back here as the server writes them in text.
#[tokio::test]
async fn binary_rows_are_text_rows() {
    let Some((_db, _shim, mut c)) = setup("binds-rows", &[]).await else {
        return;
    };
    use Type::*;
    ok(&mut c, "DROP TABLE IF EXISTS bind_floats", &[]).await;
    ok(
        &mut c,
        "CREATE TABLE bind_floats (id INT PRIMARY KEY, d DOUBLE, f FLOAT, d3 DOUBLE(20,3),
         f2 FLOAT(12,2), dz DOUBLE UNSIGNED ZEROFILL)",
        &[],
    )
    .await;
    // A spread of doubles: every magnitude, both signs, ties, powers of ten.
    let mut doubles = vec![
        0.0,
        -0.0,
        1.0,
        0.1,
        0.1 + 0.2,
        1.0 / 3.0,
        1e15,
        1e16,
        1e-15,
        1e-16,
        1234565.0,
        765651181881608.25,
        910.60894775390625,
        5e-324,
        1.7976931348623157e308,
        2.5,
        0.125,
    ];
    let mut x: u64 = 0x9e3779b97f4a7c15;
    for _ in 0..1200 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let exp = ((x >> 40) % 60) as i32 - 30;
        let mantissa = (x >> 11) as f64 / (1u64 << 53) as f64;
        let sign = if x & 1 == 1 { -1.0 } else { 1.0 };
        doubles.push(sign * mantissa * 10f64.powi(exp));
    }
    for (batch, chunk) in doubles.chunks(300).enumerate() {
        let mut rows = Vec::new();
        let mut b = Vec::new();
        for (i, v) in chunk.iter().enumerate() {
            let id = (batch * 300 + i).to_string();
            let text = format!("{v:e}");
            let small = if v.abs() < 1e8 {
                format!("{:e}", v.abs())
            } else {
                "0".into()
            };
            let f = if (v.abs() as f32).is_finite() {
                text.clone()
            } else {
                "0".into()
            };
            let name = format!("r{i}");
            rows.push(format!("::{name}"));
            b.push((
                name,
                tuple(&[
                    (Int64, id.as_bytes()),
                    (Float64, text.as_bytes()),
                    (Float32, f.as_bytes()),
                    (Float64, small.as_bytes()),
                    (Float64, small.as_bytes()),
                    (Float64, text.trim_start_matches('-').as_bytes()),
                ]),
            ));
        }
        let b: Vec<(&str, BindVariable)> = b.iter().map(|(n, v)| (n.as_str(), v.clone())).collect();
        ok(
            &mut c,
            &format!("INSERT INTO bind_floats VALUES {}", rows.join(", ")),
            &b,
        )
        .await;
    }
    let select =
        "SELECT id, d, f, d3, f2, dz, d * 1e0, f * 1, -f, d / 3, ROUND(d, 2), TRUNCATE(d, 4),
        ROUND(f, 3), d3 * 1, f2 + 0.5e0, SQRT(ABS(d)) FROM bind_floats";
    let text = ok(&mut c, &format!("{select} WHERE id >= 0 ORDER BY id"), &[]).await;
    let binary = ok(
        &mut c,
        &format!("{select} WHERE id >= :min ORDER BY id"),
        &[("min", bv(Int64, b"0"))],
    )
    .await;
    assert_eq!(text.rows.len(), doubles.len());
    assert_eq!(described(&binary.fields), described(&text.fields));
    for (t, b) in raw_values(&text).iter().zip(raw_values(&binary).iter()) {
        assert_eq!(
            t,
            b,
            "{:?}",
            String::from_utf8_lossy(t[0].as_ref().unwrap())
        );
    }
    // Aggregates with fixed decimals round the shortest digits half up.
    let agg = "SELECT id % 7, AVG(d3), SUM(f2), AVG(f), STD(d3), MIN(d) FROM bind_floats";
    let text = ok(
        &mut c,
        &format!("{agg} WHERE id >= 0 GROUP BY id % 7 ORDER BY 1"),
        &[],
    )
    .await;
    let binary = ok(
        &mut c,
        &format!("{agg} WHERE id >= ? GROUP BY id % 7 ORDER BY 1"),
        &[("v1", bv(Int64, b"0"))],
    )
    .await;
    assert_eq!(raw_values(&binary), raw_values(&text));

    // Dates and times, columns and expressions, zero dates, fractions.
    ok(&mut c, "DROP TABLE IF EXISTS bind_times", &[]).await;
    ok(
        &mut c,
        "CREATE TABLE bind_times (id INT, d DATE, dt DATETIME, dt3 DATETIME(3), dt6 DATETIME(6),
         ts TIMESTAMP NULL, ts2 TIMESTAMP(2) NULL, t TIME, t1 TIME(1), t6 TIME(6), y YEAR,
         iz INT(6) ZEROFILL, bz BIGINT UNSIGNED ZEROFILL)",
        &[],
    )
    .await;
    ok(
        &mut c,
        "INSERT INTO bind_times VALUES
         (1, '2024-02-29', '2024-02-29 12:34:56', '2024-02-29 12:34:56.789', '2024-02-29 12:34:56.000001',
          '2024-02-29 12:34:56', '2024-02-29 12:34:56.5', '-838:59:59', '12:00:00.5', '-00:00:00.000001', 0, 7, 1),
         (2, '1000-01-01', '1000-01-01 00:00:00', '9999-12-31 23:59:59.999', '2024-01-01 00:00:00.100000',
          '1971-01-01 00:00:01', '2030-01-19 03:14:07.99', '838:59:59', '-1:00:00', '01:02:03.123456', 1901, 123456, 18446744073709551615),
         (3, NULL, NULL, NULL, NULL, NULL, NULL, '-00:00:01', NULL, NULL, 2155, 0, 0)",
        &[],
    )
    .await;
    let select = "SELECT *, DATE(dt), dt + INTERVAL 1 SECOND, dt3 + INTERVAL 1 DAY, ADDTIME(t, '01:00:00.5'),
        TIMEDIFF(dt3, dt), SEC_TO_TIME(-3600.25), CAST(dt3 AS DATETIME(6)), MAKETIME(-1, 2, 3.5),
        FROM_UNIXTIME(1.5) > 0, GREATEST(dt, dt3), IF(id = 1, d, t), TIME(dt6), d + 0, t + 0,
        STR_TO_DATE('2024-01-02 03:04:05.123', '%Y-%m-%d %H:%i:%s.%f') FROM bind_times";
    let text = ok(&mut c, &format!("{select} WHERE id > 0 ORDER BY id"), &[]).await;
    let binary = ok(
        &mut c,
        &format!("{select} WHERE id > :z ORDER BY id"),
        &[("z", bv(Int64, b"0"))],
    )
    .await;
    assert_eq!(described(&binary.fields), described(&text.fields));
    assert_eq!(raw_values(&binary), raw_values(&text));
}

#[tokio::test]
async fn lists_and_refused_binds() {
    let Some((_db, _shim, mut c)) = setup("binds-refused", &[]).await else {
        return;
    };
    use Type::*;
    ok(&mut c, "DROP TABLE IF EXISTS bind_list", &[]).await;
    ok(
        &mut c,
        "CREATE TABLE bind_list (id INT PRIMARY KEY, name VARCHAR(10))",
        &[],
    )
    .await;
    ok(
        &mut c,
        "INSERT INTO bind_list VALUES (1, 'a'), (2, 'b'), (3, 'c'), (4, 'd')",
        &[],
    )
    .await;
    let r = ok(
        &mut c,
        "SELECT id FROM bind_list WHERE id IN ::ids AND name NOT IN ::names ORDER BY id",
        &[
            ("ids", tuple(&[(Int64, b"1"), (Uint64, b"3"), (Int8, b"4")])),
            ("names", tuple(&[(Varchar, b"d")])),
        ],
    )
    .await;
    assert_eq!(values(&r), [[Some("1".into())], [Some("3".into())]]);
    // A list as rows of an INSERT.
    let r = ok(
        &mut c,
        "INSERT INTO bind_list VALUES ::a, ::b",
        &[
            ("a", tuple(&[(Int64, b"5"), (Varchar, b"e")])),
            ("b", tuple(&[(Int64, b"6"), (NullType, b"")])),
        ],
    )
    .await;
    assert_eq!(r.rows_affected, 2);

    type Case<'a> = (&'a str, Vec<(&'a str, BindVariable)>, &'a str);
    let cases: &[Case] = &[
        (
            "SELECT :a, :b",
            vec![("a", bv(Int64, b"1"))],
            "missing bind variable \"b\" (:b)",
        ),
        (
            "SELECT ?, ?",
            vec![("v1", bv(Int64, b"1"))],
            "\"v2\" (the query's 2nd ?)",
        ),
        (
            "SELECT :a",
            vec![("a", bv(Int64, b"1")), ("extra", bv(Int64, b"2"))],
            "bind variable \"extra\" is not used",
        ),
        (
            "SELECT 1",
            vec![("a", bv(Int64, b"1"))],
            "\"a\" is not used",
        ),
        (
            "SELECT ::l",
            vec![("l", bv(Int64, b"1"))],
            "must be a TUPLE, not INT64",
        ),
        (
            "SELECT :l",
            vec![("l", tuple(&[(Int64, b"1")]))],
            "write ::l",
        ),
        ("SELECT ::l", vec![("l", tuple(&[]))], "empty TUPLE"),
        (
            "SELECT :a",
            vec![("a", bv(Int8, b"300"))],
            "\"300\" is not an INT8",
        ),
        (
            "SELECT :a",
            vec![("a", bv(Uint64, b"-1"))],
            "is not a UINT64",
        ),
        (
            "SELECT :a",
            vec![("a", bv(Float64, b"NaN"))],
            "is not a FLOAT64",
        ),
        (
            "SELECT :a",
            vec![("a", bv(Decimal, b"1e5"))],
            "is not a DECIMAL",
        ),
        (
            "SELECT :a",
            vec![("a", bv(Date, b"2024-01-01' OR '1"))],
            "is not a DATE",
        ),
        (
            "SELECT :a",
            vec![("a", bv(Raw, b"NOW()"))],
            "RAW cannot be bound",
        ),
        (
            "SELECT :a",
            vec![("a", bv(Expression, b"1"))],
            "EXPRESSION cannot be bound",
        ),
        (
            "SELECT ::l",
            vec![("l", tuple(&[(Int64, b"1"), (Int64, b"x")]))],
            "\"l\", value 2 of the TUPLE",
        ),
    ];
    for (query, b, want) in cases {
        let (code, message) = bad(&mut c, query, b).await;
        assert_eq!(code, Code::InvalidArgument, "{query}: {message}");
        assert!(message.contains(want), "{query}: {message}");
        assert!(
            message.ends_with("(errno 1210) (sqlstate HY000)"),
            "{message}"
        );
    }
    // A placeholder inside a string or comment is text, not a placeholder.
    let r = ok(
        &mut c,
        "SELECT ':a ?', :a /* :b */ -- ?\n",
        &[("a", bv(Int64, b"1"))],
    )
    .await;
    assert_eq!(values(&r), [[Some(":a ?".into()), Some("1".into())]]);
    // SQL errors of a bound statement are SQL errors.
    let (code, message) = bad(
        &mut c,
        "SELECT * FROM no_such_table WHERE id = :id",
        &[("id", bv(Int64, b"1"))],
    )
    .await;
    assert_eq!(code, Code::NotFound, "{message}");
    // Without binds the text goes to MySQL as it is (MySQL's own syntax error).
    let (_, message) = bad(&mut c, "SELECT :a", &[]).await;
    assert!(message.contains("errno 1064"), "{message}");
}

/// Payloads that would break out of a string literal are data: stored and
/// read back byte for byte, and the table is still there.
#[tokio::test]
async fn injection_payloads_are_data() {
    let Some((db, _shim, mut c)) = setup("binds-injection", &[]).await else {
        return;
    };
    use Type::*;
    ok(&mut c, "DROP TABLE IF EXISTS bind_victim", &[]).await;
    ok(
        &mut c,
        "CREATE TABLE bind_victim (id INT PRIMARY KEY, s TEXT, b VARBINARY(64)) DEFAULT CHARSET=utf8mb4",
        &[],
    )
    .await;
    let payloads: &[&[u8]] = &[
        b"'",
        b"\\",
        b"\\'",
        b"'; DROP TABLE bind_victim; --",
        b"\" OR 1=1 -- ",
        b"a\0b",
        b"\0",
        b"' OR '1'='1",
        b"?:a::b",
        b"\x1a\r\n\t",
        "é€𝄞".as_bytes(),
    ];
    for (i, p) in payloads.iter().enumerate() {
        let id = (i + 1).to_string();
        ok(
            &mut c,
            "INSERT INTO bind_victim VALUES (:id, :s, :b)",
            &[
                ("id", bv(Int64, id.as_bytes())),
                ("s", bv(Varchar, p)),
                ("b", bv(Varbinary, p)),
            ],
        )
        .await;
        let r = ok(
            &mut c,
            "SELECT s, b, :p FROM bind_victim WHERE s = :p AND b = :p",
            &[("p", bv(Varbinary, p))],
        )
        .await;
        let want = Some(p.to_vec());
        assert_eq!(
            raw_values(&r),
            [[want.clone(), want.clone(), want]],
            "{p:?}"
        );
    }
    // Invalid UTF-8 in a VARBINARY bind: kept exactly in a binary column.
    let junk: &[u8] = b"\xff\xfe\x00\x80'\\\xc3";
    ok(
        &mut c,
        "INSERT INTO bind_victim (id, b) VALUES (100, :b)",
        &[("b", bv(Varbinary, junk))],
    )
    .await;
    let r = ok(
        &mut c,
        "SELECT b, HEX(b) FROM bind_victim WHERE id = 100",
        &[],
    )
    .await;
    assert_eq!(raw_values(&r)[0][0].as_deref(), Some(junk));
    assert_eq!(values(&r)[0][1].as_deref(), Some("FFFE0080275CC3"));
    let r = ok(&mut c, "SELECT :b", &[("b", bv(Varbinary, junk))]).await;
    assert_eq!(raw_values(&r)[0][0].as_deref(), Some(junk));
    assert_eq!(
        common::count(&db, "bind_victim").await,
        payloads.len() as i64 + 1
    );
}

#[tokio::test]
async fn prepare_reports_fields_and_parameters() {
    let Some((db, _shim, mut c)) = setup("binds-prepare", &[]).await else {
        return;
    };
    use Type::*;
    ok(&mut c, "DROP TABLE IF EXISTS bind_prep", &[]).await;
    ok(
        &mut c,
        "CREATE TABLE bind_prep (id INT UNSIGNED PRIMARY KEY, name VARCHAR(20), price DECIMAL(8,2))",
        &[],
    )
    .await;
    let p = prepare(
        &mut c,
        "SELECT id, name, price FROM bind_prep WHERE id = :id AND name IN ::names",
        binds(&[(
            "names",
            tuple(&[(Varchar, b"a"), (Varchar, b"b"), (Varchar, b"c")]),
        )]),
        None,
    )
    .await;
    assert!(p.error.is_none(), "{:?}", p.error);
    assert_eq!(p.params_count, 4);
    let exec = ok(
        &mut c,
        "SELECT id, name, price FROM bind_prep WHERE id = 1",
        &[],
    )
    .await;
    assert_eq!(described(&p.fields), described(&exec.fields));
    assert_eq!(
        p.fields
            .iter()
            .map(|f| Type::try_from(f.r#type).unwrap())
            .collect::<Vec<_>>(),
        [Uint32, Varchar, Decimal]
    );
    assert!(p.session.is_some());
    // `?` without binds; a statement without a result has no fields.
    let p = prepare(
        &mut c,
        "INSERT INTO bind_prep VALUES (?, ?, ?)",
        Binds::new(),
        None,
    )
    .await;
    assert_eq!((p.params_count, p.fields.len(), p.error), (3, 0, None));
    // Nothing ran.
    assert_eq!(common::count(&db, "bind_prep").await, 0);
    // Errors: SQL errors inside the answer, a list without its TUPLE.
    let p = prepare(&mut c, "SELECT * FROM no_such_table", Binds::new(), None).await;
    assert_eq!(p.error.unwrap().code, Code::NotFound as i32);
    let p = prepare(&mut c, "SELEC 1", Binds::new(), None).await;
    assert!(p.error.unwrap().message.contains("errno 1064"));
    let p = prepare(&mut c, "SELECT ::l", Binds::new(), None).await;
    let e = p.error.unwrap();
    assert_eq!(e.code, Code::InvalidArgument as i32);
    assert!(e.message.contains("\"l\""), "{}", e.message);
    // Preparing SET workload does not switch the session (it only describes it).
    let p = prepare(&mut c, "SET workload = 'olap'", Binds::new(), None).await;
    let workload = p
        .session
        .and_then(|s| s.vitess_session)
        .and_then(|v| v.options)
        .map_or(0, |o| o.workload);
    assert_eq!(workload, 0);
}

/// Binds in a transaction and in session state: they run on the session's
/// pin; Prepare too (a temporary table is visible there only).
#[tokio::test]
async fn binds_in_transactions_and_session_state() {
    let Some((db, _shim, mut c)) = setup("binds-txn", &[]).await else {
        return;
    };
    use Type::*;
    ok(&mut c, "DROP TABLE IF EXISTS bind_txn", &[]).await;
    ok(
        &mut c,
        "CREATE TABLE bind_txn (id INT PRIMARY KEY, v VARCHAR(10))",
        &[],
    )
    .await;
    let begin = exec(&mut c, "BEGIN", Binds::new(), None).await;
    let mut session = begin.session;
    assert!(
        session
            .as_ref()
            .unwrap()
            .vitess_session
            .as_ref()
            .unwrap()
            .in_transaction
    );
    let r = exec(
        &mut c,
        "INSERT INTO bind_txn VALUES (:id, :v)",
        binds(&[("id", bv(Int64, b"1")), ("v", bv(Varchar, b"in txn"))]),
        session.clone(),
    )
    .await;
    assert!(r.error.is_none(), "{:?}", r.error);
    session = r.session;
    let r = exec(
        &mut c,
        "SELECT v FROM bind_txn WHERE id = ?",
        binds(&[("v1", bv(Int64, b"1"))]),
        session.clone(),
    )
    .await;
    assert_eq!(
        values(r.result.as_ref().unwrap()),
        [[Some("in txn".into())]]
    );
    session = r.session;
    assert_eq!(common::count(&db, "bind_txn").await, 0, "not committed yet");
    // A stream of the same session sees it too.
    let (msgs, end) = stream(
        &mut c,
        "SELECT id, v FROM bind_txn WHERE v = :v",
        binds(&[("v", bv(Varchar, b"in txn"))]),
        session.clone(),
    )
    .await;
    assert_eq!(end, serde_json::json!({}));
    let rows: usize = msgs
        .iter()
        .filter_map(|m| m.result.as_ref())
        .map(|r| r.rows.len())
        .sum();
    assert_eq!(rows, 1);
    session = msgs.last().unwrap().session.clone();
    let p = prepare(
        &mut c,
        "SELECT * FROM bind_txn WHERE id = ?",
        Binds::new(),
        session.clone(),
    )
    .await;
    assert_eq!((p.params_count, p.fields.len()), (1, 2));
    assert!(
        p.session
            .as_ref()
            .unwrap()
            .vitess_session
            .as_ref()
            .unwrap()
            .in_transaction
    );
    let r = exec(&mut c, "ROLLBACK", Binds::new(), p.session).await;
    assert!(!r.session.unwrap().vitess_session.unwrap().in_transaction);
    assert_eq!(common::count(&db, "bind_txn").await, 0);

    // Session state made with a bind pins; the session reads it back.
    let r = exec(
        &mut c,
        "SET @bound = :v",
        binds(&[("v", bv(Varchar, b"kept"))]),
        None,
    )
    .await;
    assert!(r.error.is_none(), "{:?}", r.error);
    let r = exec(&mut c, "SELECT @bound", Binds::new(), r.session).await;
    assert_eq!(values(r.result.as_ref().unwrap()), [[Some("kept".into())]]);
    let other = ok(&mut c, "SELECT @bound", &[]).await;
    assert_eq!(values(&other), [[None]], "another session does not see it");
    let r = exec(
        &mut c,
        "CREATE TEMPORARY TABLE bind_tmp (id INT, v VARCHAR(5))",
        Binds::new(),
        r.session,
    )
    .await;
    let p = prepare(
        &mut c,
        "SELECT v FROM bind_tmp WHERE id = :id",
        Binds::new(),
        r.session.clone(),
    )
    .await;
    assert!(p.error.is_none(), "{:?}", p.error);
    assert_eq!((p.params_count, p.fields[0].name.as_str()), (1, "v"));
    let p = prepare(&mut c, "SELECT v FROM bind_tmp", Binds::new(), None).await;
    assert!(p.error.is_some(), "no temporary table outside the session");
}

#[tokio::test]
async fn binds_in_streams_and_limits() {
    let Some((_db, _shim, mut c)) = setup(
        "binds-stream",
        &[
            ("FERRY_SHIM_MAX_RESULT_ROWS", "50"),
            ("FERRY_STREAM_CHUNK_ROWS", "100"),
        ],
    )
    .await
    else {
        return;
    };
    use Type::*;
    ok(&mut c, "DROP TABLE IF EXISTS bind_seq", &[]).await;
    ok(
        &mut c,
        "CREATE TABLE bind_seq (n INT PRIMARY KEY, f DOUBLE, d DATETIME(2))",
        &[],
    )
    .await;
    let mut sql = String::from("INSERT INTO bind_seq VALUES ");
    let mut b = Vec::new();
    for i in 0..500 {
        if i > 0 {
            sql.push_str(", ");
        }
        sql.push_str("(?, ?, ?)");
        b.push(bv(Int64, i.to_string().as_bytes()));
        b.push(bv(Float64, format!("{}", i as f64 / 7.0).as_bytes()));
        b.push(bv(
            Datetime,
            format!("2024-01-01 00:00:{:02}.{:02}", i % 60, i % 100).as_bytes(),
        ));
    }
    let named: Vec<(String, BindVariable)> = b
        .into_iter()
        .enumerate()
        .map(|(i, v)| (format!("v{}", i + 1), v))
        .collect();
    let named: Vec<(&str, BindVariable)> =
        named.iter().map(|(n, v)| (n.as_str(), v.clone())).collect();
    assert_eq!(ok(&mut c, &sql, &named).await.rows_affected, 500);

    let (msgs, end) = stream(
        &mut c,
        "SELECT n, f, d FROM bind_seq WHERE n >= :min ORDER BY n",
        binds(&[("min", bv(Int64, b"100"))]),
        None,
    )
    .await;
    assert_eq!(end, serde_json::json!({}));
    let fields = msgs[0].result.as_ref().unwrap().fields.clone();
    assert_eq!(fields.len(), 3);
    let streamed: Vec<_> = msgs[1..]
        .iter()
        .filter_map(|m| m.result.as_ref())
        .flat_map(raw_values)
        .collect();
    assert_eq!(streamed.len(), 400);
    assert!(msgs.len() >= 5, "chunks of 100 rows: {}", msgs.len());
    let (text_msgs, _) = stream(
        &mut c,
        "SELECT n, f, d FROM bind_seq WHERE n >= 100 ORDER BY n",
        Binds::new(),
        None,
    )
    .await;
    let text: Vec<_> = text_msgs[1..]
        .iter()
        .filter_map(|m| m.result.as_ref())
        .flat_map(raw_values)
        .collect();
    assert_eq!(streamed, text);
    // A refused bind ends the stream with the error and the session.
    let (msgs, end) = stream(&mut c, "SELECT :a", binds(&[("b", bv(Int64, b"1"))]), None).await;
    assert_eq!(end, serde_json::json!({}));
    assert_eq!(msgs.len(), 1);
    assert_eq!(
        msgs[0].error.as_ref().unwrap().code,
        Code::InvalidArgument as i32
    );
    assert!(msgs[0].session.is_some());

    // Execute's row limit holds for bound statements.
    let (code, message) = bad(
        &mut c,
        "SELECT n FROM bind_seq WHERE n < :max",
        &[("max", bv(Int64, b"100"))],
    )
    .await;
    assert_eq!(code, Code::ResourceExhausted, "{message}");
    assert!(message.contains("row count exceeded"), "{message}");
}
