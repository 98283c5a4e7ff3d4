use super::*;
use ferry_proto::vitess::query::Value as VtValue;

fn var(ty: Type, value: &[u8]) -> BindVariable {
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

fn vars(list: &[(&str, BindVariable)]) -> HashMap<String, BindVariable> {
    list.iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect()
}

fn ok(sql: &str, list: &[(&str, BindVariable)]) -> Bound {
    bind(sql, &vars(list), Mode::Execute).unwrap()
}

fn err(sql: &str, list: &[(&str, BindVariable)]) -> String {
    bind(sql, &vars(list), Mode::Execute).unwrap_err().0
}

#[test]
fn placeholders_become_question_marks_and_literals_stay() {
    let b = ok(
        "SELECT ':a', `::b`, :a /* :c */, ? -- :d\n FROM t WHERE id IN ::ids",
        &[
            ("a", var(Type::Int64, b"-7")),
            ("v1", var(Type::Varchar, b"x")),
            ("ids", tuple(&[(Type::Int64, b"1"), (Type::Uint64, b"2")])),
        ],
    );
    assert_eq!(
        b.sql,
        "SELECT ':a', `::b`, ? /* :c */, ? -- :d\n FROM t WHERE id IN (?, ?)"
    );
    assert_eq!(
        b.params,
        [
            Value::Int(-7),
            Value::Bytes(b"x".to_vec()),
            Value::Int(1),
            Value::UInt(2)
        ]
    );
}

#[test]
fn a_variable_used_twice_binds_twice() {
    let b = ok("SELECT :a, :a", &[("a", var(Type::Int8, b"1"))]);
    assert_eq!((b.sql.as_str(), b.params.len()), ("SELECT ?, ?", 2));
}

#[test]
fn missing_unused_and_misplaced_variables_are_named() {
    let e = err("SELECT :a", &[]);
    assert!(e.contains("missing bind variable \"a\" (:a)"), "{e}");
    let e = err("SELECT ?, ?", &[("v1", var(Type::Int64, b"1"))]);
    assert!(e.contains("\"v2\" (the query's 2nd ?)"), "{e}");
    let e = err(
        "SELECT 1",
        &[("b", var(Type::Int64, b"1")), ("a", var(Type::Int64, b"1"))],
    );
    assert_eq!(
        e,
        "bind variables \"a\", \"b\" are not used by the query (placeholders: ?, :name, ::list)"
    );
    let e = err(
        "SELECT * FROM t WHERE a IN ::ids",
        &[("ids", var(Type::Int64, b"1"))],
    );
    assert!(e.contains("must be a TUPLE, not INT64"), "{e}");
    let e = err("SELECT :ids", &[("ids", tuple(&[(Type::Int64, b"1")]))]);
    assert!(e.contains("write ::ids"), "{e}");
    let e = err("SELECT ::ids", &[("ids", tuple(&[]))]);
    assert!(e.contains("empty TUPLE"), "{e}");
    let e = err(
        "SELECT ::ids",
        &[("ids", tuple(&[(Type::Int64, b"1"), (Type::Int8, b"x")]))],
    );
    assert!(e.contains("\"ids\", value 2 of the TUPLE"), "{e}");
}

#[test]
fn prepare_needs_lists_only() {
    let b = bind("SELECT ?, :a", &HashMap::new(), Mode::Prepare).unwrap();
    assert_eq!((b.sql.as_str(), b.params.len()), ("SELECT ?, ?", 0));
    let e = bind("SELECT ::a", &HashMap::new(), Mode::Prepare).unwrap_err();
    assert!(e.0.contains("needed to prepare"), "{e}");
    let b = bind(
        "SELECT ::a",
        &vars(&[("a", tuple(&[(Type::Int64, b"1"), (Type::Int64, b"2")]))]),
        Mode::Prepare,
    )
    .unwrap();
    assert_eq!(b.sql, "SELECT (?, ?)");
}

fn one(ty: Type, value: &[u8]) -> Result<(Value, Slot), String> {
    scalar(ty as i32, value)
}

#[test]
fn integers_are_range_checked() {
    assert_eq!(one(Type::Int8, b"-128").unwrap().0, Value::Int(-128));
    assert!(one(Type::Int8, b"128").unwrap_err().contains("-128 to 127"));
    assert_eq!(one(Type::Int24, b"8388607").unwrap().0, Value::Int(8388607));
    assert!(one(Type::Int24, b"8388608").is_err());
    assert_eq!(
        one(Type::Int64, b"-9223372036854775808").unwrap().0,
        Value::Int(i64::MIN)
    );
    assert_eq!(
        one(Type::Uint64, b"18446744073709551615").unwrap().0,
        Value::UInt(u64::MAX)
    );
    assert!(one(Type::Uint64, b"18446744073709551616").is_err());
    assert!(one(Type::Uint8, b"-1").is_err());
    assert!(one(Type::Uint8, b"256").is_err());
    assert_eq!(one(Type::Year, b"2024").unwrap().0, Value::UInt(2024));
    for bad in [&b""[..], b" 1", b"1 ", b"1.0", b"0x10", b"1_000", b"\xff"] {
        assert!(one(Type::Int64, bad).is_err(), "{bad:?}");
    }
}

#[test]
fn floats_and_decimals() {
    assert_eq!(
        one(Type::Float64, b"1.5e3").unwrap().0,
        Value::Double(1500.0)
    );
    assert_eq!(one(Type::Float32, b"0.1").unwrap().0, Value::Double(0.1));
    for bad in [&b"nan"[..], b"inf", b"-infinity", b"1e400", b"", b"x"] {
        assert!(one(Type::Float64, bad).is_err(), "{bad:?}");
    }
    let cases: [(&[u8], (u32, u32)); 7] = [
        (b"1.50", (3, 2)),
        (b"-0.5", (1, 1)),
        (b"0", (1, 0)),
        (b"007.25", (3, 2)),
        (b".5", (1, 1)),
        (b"12.", (2, 0)),
        (b"+99.99", (4, 2)),
    ];
    for (text, (p, s)) in cases {
        let (v, slot) = one(Type::Decimal, text).unwrap();
        assert_eq!(
            (v, slot),
            (Value::Bytes(text.to_vec()), Slot::Decimal(p, s))
        );
    }
    for bad in [&b"1e5"[..], b"1.2.3", b"", b".", b"--1", b"1,5"] {
        assert!(one(Type::Decimal, bad).is_err(), "{bad:?}");
    }
    let big = "9".repeat(66);
    assert!(one(Type::Decimal, big.as_bytes())
        .unwrap_err()
        .contains("more digits"));
    let mut out = String::new();
    Slot::Decimal(3, 2).write(&mut out);
    assert_eq!(out, "CAST(? AS DECIMAL(3,2))");
}

#[test]
fn strings_are_bytes_as_given() {
    let payload = b"'; DROP TABLE t; -- \\ \0 \xff\xfe";
    for ty in [Type::Varchar, Type::Varbinary, Type::Blob, Type::Json] {
        assert_eq!(
            one(ty, payload).unwrap(),
            (Value::Bytes(payload.to_vec()), Slot::Plain)
        );
    }
    assert!(one(Type::Date, b"2024-01-02").is_ok());
    assert!(one(Type::Datetime, b"2024-01-02 03:04:05.123456").is_ok());
    assert!(one(Type::Time, b"-838:59:59").is_ok());
    assert!(one(Type::Date, b"2024-01-02'); DROP").is_err());
    assert!(one(Type::Timestamp, b"").is_err());
    assert_eq!(one(Type::NullType, b"ignored").unwrap().0, Value::NULL);
}

#[test]
fn bits_and_hex_literals() {
    assert_eq!(one(Type::Bit, b"\x01\x00").unwrap().0, Value::UInt(256));
    assert_eq!(one(Type::Bit, b"").unwrap().0, Value::UInt(0));
    assert!(one(Type::Bit, &[1; 9]).is_err());
    let bin = |ty, v: &[u8]| one(ty, v).map(|(v, s)| (v, s == Slot::Binary));
    assert_eq!(
        bin(Type::Hexnum, b"0x4142").unwrap(),
        (Value::Bytes(b"AB".to_vec()), true)
    );
    assert_eq!(
        bin(Type::Hexnum, b"0xA").unwrap().0,
        Value::Bytes(vec![0x0a])
    );
    assert_eq!(
        bin(Type::Hexval, b"x'ff00'").unwrap().0,
        Value::Bytes(vec![0xff, 0])
    );
    assert_eq!(bin(Type::Hexval, b"X''").unwrap().0, Value::Bytes(vec![]));
    assert!(bin(Type::Hexval, b"x'f'").is_err());
    assert_eq!(
        bin(Type::Bitnum, b"0b101").unwrap().0,
        Value::Bytes(vec![5])
    );
    assert_eq!(
        bin(Type::Bitnum, b"b'100000001'").unwrap().0,
        Value::Bytes(vec![1, 1])
    );
    assert!(bin(Type::Bitnum, b"0b102").is_err());
    assert!(bin(Type::Hexnum, b"0xzz").is_err());
}

#[test]
fn sql_text_types_are_refused() {
    for ty in [Type::Raw, Type::Expression, Type::RowTuple] {
        assert!(one(ty, b"now()")
            .unwrap_err()
            .contains("only values are bound"));
    }
    assert!(scalar(12345, b"1").unwrap_err().contains("unknown type"));
    let e = err("SELECT :a", &[("a", var(Type::Raw, b"1; DROP TABLE t"))]);
    assert!(e.contains("RAW cannot be bound"), "{e}");
}

#[test]
fn ordinals() {
    let got: Vec<String> = [1, 2, 3, 4, 11, 12, 13, 21, 22, 111].map(ordinal).to_vec();
    assert_eq!(
        got,
        ["1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "111th"]
    );
}
