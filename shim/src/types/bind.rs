//! Typed bind variables: `ExecuteRequest.bind_variables` → a statement for
//! MySQL's binary protocol (COM_STMT_PREPARE / COM_STMT_EXECUTE) and its
//! parameters. Values are never written into the SQL text: every placeholder
//! becomes `?` and its value travels as a typed parameter.
//!
//! Placeholders are vitess's (ferry_wire::placeholder): `?` (the n-th is the
//! bind variable `v<n>`), `:name` (one value) and `::name` (a TUPLE's values,
//! written as `(?, ?, ?)` as vitess writes a list). The statement is rewritten
//! around them only, so string literals, identifiers and comments are kept
//! byte for byte.
//!
//! Each vitess type is bound as the value vitess itself would put in the SQL
//! text means (vitess's `EncodeSQL`: numbers bare, strings and dates quoted,
//! BIT as `b'…'`, hex literals bare):
//!
//! | vitess type | MySQL parameter |
//! |---|---|
//! | NULL_TYPE | NULL |
//! | INT8…INT64 | signed LONGLONG, range-checked for the type |
//! | UINT8…UINT64, YEAR | unsigned LONGLONG (YEAR: at most 4 digits) |
//! | FLOAT32, FLOAT64 | DOUBLE (the text's value; finite only) |
//! | DECIMAL | its text as a string, placeholder `CAST(? AS DECIMAL(p,s))` with the value's own digits, as the literal `1.50` is a DECIMAL(3,2) |
//! | VARCHAR, CHAR, TEXT, JSON, ENUM, SET, VARBINARY, BINARY, BLOB, GEOMETRY, VECTOR | string (bytes as given) |
//! | DATE, TIME, DATETIME, TIMESTAMP | string (digits and `-: ./T+` only), read by the server as it reads `'2024-01-02'` |
//! | BIT | unsigned LONGLONG of its big-endian bytes (at most 8) |
//! | HEXNUM `0x…`, HEXVAL `x'…'`, BITNUM `0b…` | the bytes they spell, placeholder `CAST(? AS BINARY)`: a binary string, as MySQL reads those literals |
//! | TUPLE | only for `::name`: each value as above |
//! | EXPRESSION, RAW, ROW_TUPLE | refused: they are SQL text, not values |
use ferry_proto::vitess::query::{BindVariable, Type};
use ferry_wire::placeholder::{self, Placeholder};
use mysql_async::Value;
use std::collections::{BTreeSet, HashMap};
use std::fmt::Write;

/// A statement ready for the binary protocol.
#[derive(Debug, Clone, PartialEq)]
pub struct Bound {
    /// The statement with `?` for every value.
    pub sql: String,
    /// One value per `?`, in order.
    pub params: Vec<Value>,
}

/// What the bind variables are for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Every placeholder needs its variable, and every variable a placeholder.
    Execute,
    /// Describing a statement (Prepare): a value placeholder without a
    /// variable is still a `?`; a list needs its TUPLE (its length decides
    /// the statement).
    Prepare,
}

/// Why the bind variables do not fit the statement; the message names the
/// variable and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindError(pub String);

impl std::fmt::Display for BindError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A statement and its bind variables → the statement for COM_STMT_PREPARE
/// and its parameters.
pub fn bind(
    sql: &str,
    vars: &HashMap<String, BindVariable>,
    mode: Mode,
) -> Result<Bound, BindError> {
    let mut out = String::with_capacity(sql.len() + 16);
    let mut params = Vec::new();
    let mut used = BTreeSet::new();
    let mut at = 0;
    for found in placeholder::find(sql) {
        out.push_str(sql.get(at..found.start).unwrap_or_default());
        at = found.end;
        let ph = found.placeholder;
        let name = ph.name();
        let Some(var) = vars.get(name.as_ref()) else {
            match (mode, ph) {
                (Mode::Prepare, Placeholder::Positional(_) | Placeholder::Value(_)) => {
                    out.push('?');
                    continue;
                }
                (Mode::Prepare, Placeholder::List(_)) => {
                    return Err(BindError(format!(
                        "bind variable {name:?} ({}) is needed to prepare the statement: a list's length decides it",
                        written(&ph)
                    )))
                }
                (Mode::Execute, _) => {
                    return Err(BindError(format!(
                        "missing bind variable {name:?} ({})",
                        written(&ph)
                    )))
                }
            }
        };
        used.insert(name.clone().into_owned());
        let ty = type_of(var.r#type);
        match ph {
            Placeholder::List(_) => {
                if ty != Some(Type::Tuple) {
                    return Err(BindError(format!(
                        "bind variable {name:?} is used as a list ({}) and must be a TUPLE, not {}",
                        written(&ph),
                        type_name(var.r#type)
                    )));
                }
                if var.values.is_empty() {
                    return Err(BindError(format!(
                        "bind variable {name:?} is an empty TUPLE; a list needs at least one value"
                    )));
                }
                out.push('(');
                for (i, v) in var.values.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    let (param, slot) = scalar(v.r#type, &v.value).map_err(|why| {
                        BindError(format!(
                            "bind variable {name:?}, value {} of the TUPLE: {why}",
                            i + 1
                        ))
                    })?;
                    slot.write(&mut out);
                    params.push(param);
                }
                out.push(')');
            }
            Placeholder::Value(_) | Placeholder::Positional(_) => {
                if ty == Some(Type::Tuple) {
                    return Err(BindError(format!(
                        "bind variable {name:?} is a TUPLE, which only a list placeholder takes: write ::{name}"
                    )));
                }
                let (param, slot) = scalar(var.r#type, &var.value)
                    .map_err(|why| BindError(format!("bind variable {name:?}: {why}")))?;
                slot.write(&mut out);
                params.push(param);
            }
        }
    }
    out.push_str(sql.get(at..).unwrap_or_default());
    let unused: Vec<String> = vars
        .keys()
        .filter(|k| !used.contains(k.as_str()))
        .map(|k| format!("{k:?}"))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    if !unused.is_empty() {
        let (what, verb) = if unused.len() == 1 {
            ("bind variable", "is")
        } else {
            ("bind variables", "are")
        };
        return Err(BindError(format!(
            "{what} {} {verb} not used by the query (placeholders: ?, :name, ::list)",
            unused.join(", ")
        )));
    }
    Ok(Bound { sql: out, params })
}

/// How a placeholder is written in the source, for messages.
fn written(ph: &Placeholder<'_>) -> String {
    match ph {
        Placeholder::Positional(n) => format!("the query's {} ?", ordinal(*n)),
        Placeholder::Value(name) => format!(":{name}"),
        Placeholder::List(name) => format!("::{name}"),
    }
}

fn ordinal(n: usize) -> String {
    let suffix = match (n % 10, n % 100) {
        (1, r) if r != 11 => "st",
        (2, r) if r != 12 => "nd",
        (3, r) if r != 13 => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

fn type_of(code: i32) -> Option<Type> {
    Type::try_from(code).ok()
}

fn type_name(code: i32) -> String {
    type_of(code).map_or_else(|| format!("type {code}"), |t| t.as_str_name().to_owned())
}

/// What stands in the statement for one value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    Plain,
    /// `CAST(? AS DECIMAL(p,s))`.
    Decimal(u32, u32),
    /// `CAST(? AS BINARY)`.
    Binary,
}

impl Slot {
    fn write(self, out: &mut String) {
        match self {
            Slot::Plain => out.push('?'),
            Slot::Decimal(p, s) => {
                let _ = write!(out, "CAST(? AS DECIMAL({p},{s}))");
            }
            Slot::Binary => out.push_str("CAST(? AS BINARY)"),
        }
    }
}

/// MySQL's DECIMAL: at most 65 digits, 30 of them after the point (MySQL 8;
/// MariaDB allows 38).
const DECIMAL_MAX_DIGITS: u32 = 65;
const DECIMAL_MAX_SCALE: u32 = 30;

/// One value of a vitess type → its parameter and how its placeholder is written.
fn scalar(code: i32, value: &[u8]) -> Result<(Value, Slot), String> {
    let Some(ty) = type_of(code) else {
        return Err(format!("unknown type {code}"));
    };
    let bytes = || Ok((Value::Bytes(value.to_vec()), Slot::Plain));
    match ty {
        Type::NullType => Ok((Value::NULL, Slot::Plain)),
        Type::Int8 => signed(ty, value, i8::MIN.into(), i8::MAX.into()),
        Type::Int16 => signed(ty, value, i16::MIN.into(), i16::MAX.into()),
        Type::Int24 => signed(ty, value, -(1 << 23), (1 << 23) - 1),
        Type::Int32 => signed(ty, value, i32::MIN.into(), i32::MAX.into()),
        Type::Int64 => signed(ty, value, i64::MIN, i64::MAX),
        Type::Uint8 => unsigned(ty, value, u8::MAX.into()),
        Type::Uint16 => unsigned(ty, value, u16::MAX.into()),
        Type::Uint24 => unsigned(ty, value, (1 << 24) - 1),
        Type::Uint32 => unsigned(ty, value, u32::MAX.into()),
        Type::Uint64 => unsigned(ty, value, u64::MAX),
        Type::Year => unsigned(ty, value, 9999),
        Type::Float32 | Type::Float64 => {
            let text = ascii(ty, value)?;
            match text.parse::<f64>() {
                Ok(f) if f.is_finite() => Ok((Value::Double(f), Slot::Plain)),
                _ => Err(format!(
                    "{text:?} is not a {} (a finite number)",
                    ty.as_str_name()
                )),
            }
        }
        Type::Decimal => {
            let text = ascii(ty, value)?;
            let (p, s) = decimal_shape(text).ok_or_else(|| {
                format!("{text:?} is not a DECIMAL (digits with at most one point, no exponent)")
            })?;
            if p > DECIMAL_MAX_DIGITS || s > DECIMAL_MAX_SCALE {
                return Err(format!(
                    "{text:?} has more digits than a DECIMAL holds ({DECIMAL_MAX_DIGITS}, {DECIMAL_MAX_SCALE} after the point)"
                ));
            }
            Ok((Value::Bytes(value.to_vec()), Slot::Decimal(p, s)))
        }
        Type::Varchar
        | Type::Char
        | Type::Text
        | Type::Json
        | Type::Enum
        | Type::Set
        | Type::Varbinary
        | Type::Binary
        | Type::Blob
        | Type::Geometry
        | Type::Vector => bytes(),
        Type::Date | Type::Time | Type::Datetime | Type::Timestamp => {
            let ok = value.iter().any(u8::is_ascii_digit)
                && value
                    .iter()
                    .all(|b| b.is_ascii_digit() || b"-:. T/+".contains(b));
            if ok {
                bytes()
            } else {
                Err(format!(
                    "{:?} is not a {} (digits and - : . / T + only)",
                    String::from_utf8_lossy(value),
                    ty.as_str_name()
                ))
            }
        }
        Type::Bit => {
            if value.len() > 8 {
                return Err(format!(
                    "a BIT value has at most 64 bits; this one has {} bytes",
                    value.len()
                ));
            }
            let n = value.iter().fold(0u64, |n, &b| (n << 8) | u64::from(b));
            Ok((Value::UInt(n), Slot::Plain))
        }
        Type::Hexnum | Type::Hexval | Type::Bitnum => literal_bytes(ty, value)
            .map(|b| (Value::Bytes(b), Slot::Binary))
            .ok_or_else(|| {
                let form = match ty {
                    Type::Hexnum => "0x followed by hex digits",
                    Type::Hexval => "x'…' with an even number of hex digits",
                    _ => "0b followed by binary digits",
                };
                format!(
                    "{:?} is not a {} ({form})",
                    String::from_utf8_lossy(value),
                    ty.as_str_name()
                )
            }),
        Type::Tuple => Err("a TUPLE cannot hold a TUPLE".to_owned()),
        Type::Expression | Type::Raw | Type::RowTuple => Err(format!(
            "type {} cannot be bound: it is SQL text, and only values are bound",
            ty.as_str_name()
        )),
    }
}

fn ascii(ty: Type, value: &[u8]) -> Result<&str, String> {
    std::str::from_utf8(value)
        .ok()
        .filter(|s| s.is_ascii() && !s.is_empty())
        .ok_or_else(|| {
            format!(
                "{:?} is not a {}",
                String::from_utf8_lossy(value),
                ty.as_str_name()
            )
        })
}

fn signed(ty: Type, value: &[u8], min: i64, max: i64) -> Result<(Value, Slot), String> {
    let text = ascii(ty, value)?;
    match text.parse::<i64>() {
        Ok(n) if (min..=max).contains(&n) => Ok((Value::Int(n), Slot::Plain)),
        _ => Err(format!(
            "{text:?} is not an {} (an integer from {min} to {max})",
            ty.as_str_name()
        )),
    }
}

fn unsigned(ty: Type, value: &[u8], max: u64) -> Result<(Value, Slot), String> {
    let text = ascii(ty, value)?;
    let digits = text.strip_prefix('+').unwrap_or(text);
    match digits.parse::<u64>() {
        Ok(n) if n <= max && digits.bytes().all(|b| b.is_ascii_digit()) => {
            Ok((Value::UInt(n), Slot::Plain))
        }
        _ => Err(format!(
            "{text:?} is not a {} (an integer from 0 to {max})",
            ty.as_str_name()
        )),
    }
}

/// (precision, scale) of a decimal number's text: its significant integer
/// digits plus its fraction digits, and its fraction digits. `None` if it is
/// not `[+-]digits[.digits]` (or `.digits`, `digits.`).
fn decimal_shape(text: &str) -> Option<(u32, u32)> {
    let unsigned = text.strip_prefix(['+', '-']).unwrap_or(text);
    let (int, frac) = unsigned.split_once('.').unwrap_or((unsigned, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if !digits(int) || !digits(frac) || (int.is_empty() && frac.is_empty()) {
        return None;
    }
    let int_digits = u32::try_from(int.trim_start_matches('0').len()).ok()?;
    let scale = u32::try_from(frac.len()).ok()?;
    Some(((int_digits + scale).max(1), scale))
}

/// The bytes a hex or bit literal spells: `0x1F`/`x'1F'`/`X'1F'`/`1F`
/// (HEXNUM, HEXVAL), `0b101`/`b'101'`/`101` (BITNUM). A hex number with an
/// odd number of digits, and a bit number, are padded on the left to whole
/// bytes, as MySQL reads them.
fn literal_bytes(ty: Type, value: &[u8]) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(value).ok()?;
    let quoted = |prefix: [char; 2]| {
        text.strip_prefix(prefix)
            .and_then(|t| t.strip_prefix('\''))
            .and_then(|t| t.strip_suffix('\''))
    };
    match ty {
        Type::Hexnum | Type::Hexval => {
            let digits = text
                .strip_prefix("0x")
                .or_else(|| text.strip_prefix("0X"))
                .or_else(|| quoted(['x', 'X']))
                .unwrap_or(text);
            if ty == Type::Hexval && digits.len() % 2 != 0 {
                return None;
            }
            radix_bytes(digits, 16)
        }
        _ => {
            let digits = text
                .strip_prefix("0b")
                .or_else(|| text.strip_prefix("0B"))
                .or_else(|| quoted(['b', 'B']))
                .unwrap_or(text);
            radix_bytes(digits, 2)
        }
    }
}

/// Digits of base 16 or 2 → big-endian bytes, padded on the left.
fn radix_bytes(digits: &str, radix: u32) -> Option<Vec<u8>> {
    if digits.is_empty() && radix == 16 {
        return Some(Vec::new());
    }
    let bits_per_digit = if radix == 16 { 4 } else { 1 };
    let per_byte = 8 / bits_per_digit;
    let values: Vec<u8> = digits
        .chars()
        .map(|c| c.to_digit(radix).and_then(|d| u8::try_from(d).ok()))
        .collect::<Option<_>>()?;
    if values.is_empty() {
        return None;
    }
    let pad = (per_byte - values.len() % per_byte) % per_byte;
    let padded: Vec<u8> = std::iter::repeat_n(0, pad).chain(values).collect();
    Some(
        padded
            .chunks(per_byte)
            .map(|chunk| {
                chunk
                    .iter()
                    .fold(0u8, |byte, &d| (byte << bits_per_digit) | d)
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests;
