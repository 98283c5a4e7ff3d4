//! Binary-protocol rows (the answer to COM_STMT_EXECUTE) → the bytes the text
//! protocol gives for the same values, so a statement with bind variables
//! answers exactly what the same statement with literals answers.
//!
//! The binary protocol sends numbers, dates and times as binary values
//! (mysql_async decodes them into `Value::Int`, `UInt`, `Float`, `Double`,
//! `Date`, `Time`); strings, DECIMAL, BIT, JSON, ENUM, SET and GEOMETRY come
//! as bytes, the same bytes as in the text protocol. Each binary value is
//! written here as the server writes it in a text result, per the column's
//! definition (type, decimals, length, ZEROFILL):
//!
//! - integers in decimal; ZEROFILL pads with zeros to the column's length
//!   (YEAR has it: `0000`);
//! - DOUBLE with unspecified decimals (31 and up): the shortest digits that
//!   read back as the same double, ties to the even digit; plain notation
//!   when the decimal point falls between 10^-15 and 10^15 (or inside the
//!   digits), else `d.ddde±x` without a `+` (`1e15`, `1.5e-16`); `-0` for
//!   negative zero. FLOAT: the same, with the float's value rounded to 6
//!   significant digits;
//! - fixed decimals (DOUBLE(M,D), ROUND(x, D), AVG...): the shortest digits
//!   padded with zeros to D places after the point when they fit, else the
//!   value rounded exactly to D places, ties to even;
//! - DATE `YYYY-MM-DD`; DATETIME and TIMESTAMP `YYYY-MM-DD hh:mm:ss` and as
//!   many fraction digits as the column's decimals (above 6, the server's
//!   "unknown": six digits when the fraction is not zero, else none); TIME
//!   `[-]hh:mm:ss[.f]` with hours past 24 (`838:59:59`).
//!
//! Verified value by value against MariaDB 10.11 and MySQL 8.0's own text
//! results (tests/binds.rs runs the comparison). One difference cannot be
//! made up: MySQL 8 writes a negative TIME that rounds to zero as
//! `-00:00:00` in text, and its binary form carries no sign.
use mysql_async::consts::{ColumnFlags, ColumnType};
use mysql_async::{Column, Row as MysqlRow, Value};
use std::fmt::Write;

/// Decimals at or above this mean "not fixed" for floating-point columns.
const FLOATING_NOT_FIXED: u8 = 31;
/// Significant digits of a FLOAT in text (FLT_DIG).
const FLOAT_DIGITS: usize = 6;
/// Plain notation is used while the decimal point sits within these bounds.
const MIN_PLAIN_DECPT: i32 = -14;
const MAX_PLAIN_DECPT: i32 = 15;

/// Rewrites a binary-protocol row in place: every value becomes its text
/// bytes (or stays NULL).
pub fn to_text(row: &mut MysqlRow) {
    let columns = row.columns();
    for (i, col) in columns.iter().enumerate() {
        let text = match row.as_ref(i) {
            Some(Value::NULL | Value::Bytes(_)) | None => continue,
            Some(v) => text_of(v, col),
        };
        row.place(i, Value::Bytes(text));
    }
}

/// The text bytes of one binary value that is not NULL or bytes.
pub fn text_of(v: &Value, col: &Column) -> Vec<u8> {
    let decimals = col.decimals();
    let text = match *v {
        Value::NULL => String::new(),
        Value::Bytes(ref b) => return b.clone(),
        Value::Int(i) => i.to_string(),
        Value::UInt(u) => u.to_string(),
        Value::Float(f) if decimals < FLOATING_NOT_FIXED => fixed(f64::from(f), decimals.into()),
        Value::Float(f) => general(f64::from(f), Some(FLOAT_DIGITS)),
        Value::Double(d) if decimals < FLOATING_NOT_FIXED => fixed(d, decimals.into()),
        Value::Double(d) => general(d, None),
        Value::Date(year, month, day, hour, minute, second, micros) => {
            let mut s = format!("{year:04}-{month:02}-{day:02}");
            if !matches!(
                col.column_type(),
                ColumnType::MYSQL_TYPE_DATE | ColumnType::MYSQL_TYPE_NEWDATE
            ) {
                let _ = write!(s, " {hour:02}:{minute:02}:{second:02}");
                fraction(&mut s, micros, decimals);
            }
            s
        }
        Value::Time(negative, days, hours, minutes, seconds, micros) => {
            let hours = u64::from(days) * 24 + u64::from(hours);
            let sign = if negative { "-" } else { "" };
            let mut s = format!("{sign}{hours:02}:{minutes:02}:{seconds:02}");
            fraction(&mut s, micros, decimals);
            s
        }
    };
    let mut bytes = text.into_bytes();
    if col.flags().contains(ColumnFlags::ZEROFILL_FLAG) {
        let width = usize::try_from(col.column_length()).unwrap_or(0);
        if bytes.len() < width {
            let mut padded = vec![b'0'; width - bytes.len()];
            padded.extend_from_slice(&bytes);
            bytes = padded;
        }
    }
    bytes
}

/// `.ffffff` cut to the column's decimals; above 6 (not fixed), six digits
/// unless the fraction is zero.
fn fraction(s: &mut String, micros: u32, decimals: u8) {
    let digits = match decimals {
        0 => 0,
        1..=6 => usize::from(decimals),
        _ if micros == 0 => 0,
        _ => 6,
    };
    if digits > 0 {
        let all = format!("{micros:06}");
        s.push('.');
        s.push_str(all.get(..digits).unwrap_or(&all));
    }
}

/// Significant digits (no leading or trailing zeros; "0" for zero) and the
/// position of the decimal point: the value is 0.DIGITS × 10^decpt.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Digits {
    digits: Vec<u8>,
    decpt: i32,
}

impl Digits {
    /// From Rust's `d.ddde±x` form of a positive finite number.
    fn from_exp(s: &str) -> Digits {
        let (mantissa, exp) = s.split_once('e').unwrap_or((s, "0"));
        let exp: i32 = exp.parse().unwrap_or(0);
        let mut digits: Vec<u8> = mantissa
            .bytes()
            .filter(u8::is_ascii_digit)
            .map(|b| b - b'0')
            .collect();
        while digits.len() > 1 && digits.last() == Some(&0) {
            digits.pop();
        }
        Digits {
            digits,
            decpt: exp + 1,
        }
    }

    fn len(&self) -> i32 {
        i32::try_from(self.digits.len()).unwrap_or(i32::MAX)
    }
}

/// The shortest digits of a positive finite double that read back as it,
/// the nearest such; an exact tie between two goes to the even one (as the
/// server's dtoa does; Rust's own shortest form picks the upper one).
fn shortest(x: f64) -> Digits {
    let d = Digits::from_exp(&format!("{x:e}"));
    match tie_to_even(x, &d) {
        Some(even) => even,
        None => d,
    }
}

/// When `x` lies exactly halfway between `d` and its neighbour with as many
/// digits, and the neighbour's last digit is the even one: that neighbour.
fn tie_to_even(x: f64, d: &Digits) -> Option<Digits> {
    // x = m × 2^e exactly, m odd.
    let bits = x.to_bits();
    let biased = i32::try_from((bits >> 52) & 0x7ff).ok()?;
    let fraction = bits & ((1 << 52) - 1);
    let (mut m, mut e) = if biased == 0 {
        (fraction, -1074)
    } else {
        (fraction | (1 << 52), biased - 1075)
    };
    if m == 0 {
        return None;
    }
    let tz = m.trailing_zeros();
    m >>= tz;
    e += i32::try_from(tz).ok()?;
    // A tie: 2x × 10^k is an odd integer N, k = digits after the point of
    // d's last digit, and N = 2·D ± 1 where D is d's digits as an integer.
    let k = d.len() - d.decpt;
    if e + 1 != -k {
        return None;
    }
    let m = u128::from(m);
    let n = if k >= 0 {
        5u128.checked_pow(u32::try_from(k).ok()?)?.checked_mul(m)?
    } else {
        let p = 5u128.checked_pow(u32::try_from(-k).ok()?)?;
        if m % p != 0 {
            return None;
        }
        m / p
    };
    let digits_value = d
        .digits
        .iter()
        .try_fold(0u128, |acc, &g| acc.checked_mul(10)?.checked_add(g.into()))?;
    let twice = digits_value.checked_mul(2)?;
    if n % 2 == 0 || (n + 1 != twice && n != twice + 1) {
        return None;
    }
    let (low, high) = ((n - 1) / 2, n.div_ceil(2));
    let even = if low % 2 == 0 { low } else { high };
    if even == digits_value {
        return None;
    }
    let text = even.to_string();
    let grew = i32::try_from(text.len()).ok()? - d.len();
    let candidate = Digits::from_exp(&format!("{text}e0"));
    let candidate = Digits {
        decpt: d.decpt + grew,
        ..candidate
    };
    // Both are equally near; keep it only if it reads back as x.
    let reread = format!("0.{}e{}", digit_text(&candidate.digits), candidate.decpt);
    (reread.parse::<f64>().ok() == Some(x)).then_some(candidate)
}

fn digit_text(digits: &[u8]) -> String {
    digits.iter().map(|&d| char::from(b'0' + d)).collect()
}

/// A floating-point value with unspecified decimals (the server's `%g`-like
/// form). `significant`: round to that many digits first (FLOAT).
fn general(x: f64, significant: Option<usize>) -> String {
    if !x.is_finite() {
        return "0".to_owned();
    }
    let negative = x.is_sign_negative();
    let sign = if negative { "-" } else { "" };
    if x == 0.0 {
        return format!("{sign}0");
    }
    let d = match significant {
        Some(n) => Digits::from_exp(&format!("{:.*e}", n.saturating_sub(1), x.abs())),
        None => shortest(x.abs()),
    };
    let digits = digit_text(&d.digits);
    let (len, decpt) = (d.len(), d.decpt);
    let mut s = String::from(sign);
    if decpt >= MIN_PLAIN_DECPT && (decpt <= MAX_PLAIN_DECPT || len > decpt) {
        if decpt <= 0 {
            s.push_str("0.");
            s.extend(std::iter::repeat_n('0', decpt.unsigned_abs() as usize));
            s.push_str(&digits);
        } else if decpt < len {
            let (int, frac) = digits.split_at(decpt.unsigned_abs() as usize);
            let _ = write!(s, "{int}.{frac}");
        } else {
            s.push_str(&digits);
            s.extend(std::iter::repeat_n(
                '0',
                (decpt - len).unsigned_abs() as usize,
            ));
        }
    } else {
        let (first, rest) = digits.split_at(1);
        s.push_str(first);
        if !rest.is_empty() {
            let _ = write!(s, ".{rest}");
        }
        let _ = write!(s, "e{}", decpt - 1);
    }
    s
}

/// A floating-point value with `places` digits after the point (the
/// server's dtoa mode 5): its shortest digits padded with zeros when they
/// fit, else the value rounded there exactly, half to even.
fn fixed(x: f64, places: usize) -> String {
    if !x.is_finite() {
        return "0".to_owned();
    }
    if x == 0.0 {
        let sign = if x.is_sign_negative() { "-" } else { "" };
        return format!("{sign}{:.places$}", 0.0);
    }
    let d = shortest(x.abs());
    let fraction_digits = usize::try_from((d.len() - d.decpt).max(0)).unwrap_or(usize::MAX);
    if fraction_digits > places {
        // Rust's fixed formatting rounds the exact value, ties to even.
        return format!("{x:.places$}");
    }
    let digits = digit_text(&d.digits);
    let mut s = String::new();
    if x.is_sign_negative() {
        s.push('-');
    }
    let pad = places - fraction_digits;
    if d.decpt <= 0 {
        s.push_str("0.");
        s.extend(std::iter::repeat_n('0', d.decpt.unsigned_abs() as usize));
        s.push_str(&digits);
    } else if d.decpt < d.len() {
        let (int, frac) = digits.split_at(d.decpt.unsigned_abs() as usize);
        let _ = write!(s, "{int}.{frac}");
    } else {
        s.push_str(&digits);
        s.extend(std::iter::repeat_n(
            '0',
            (d.decpt - d.len()).unsigned_abs() as usize,
        ));
        if places > 0 {
            s.push('.');
        }
    }
    s.extend(std::iter::repeat_n('0', pad));
    s
}

#[cfg(test)]
// The exact values of the ties are the point of these tests.
#[allow(clippy::excessive_precision)]
mod tests {
    use super::*;

    fn col(ty: ColumnType, decimals: u8) -> Column {
        Column::new(ty).with_decimals(decimals)
    }

    fn text(v: Value, c: &Column) -> String {
        String::from_utf8(text_of(&v, c)).unwrap()
    }

    #[test]
    fn doubles_as_the_server_writes_them() {
        let c = col(ColumnType::MYSQL_TYPE_DOUBLE, 31);
        let cases: &[(f64, &str)] = &[
            (0.0, "0"),
            (-0.0, "-0"),
            (1.0, "1"),
            (-2.25, "-2.25"),
            (0.1 + 0.2, "0.30000000000000004"),
            (1.0 / 3.0, "0.3333333333333333"),
            (100000000000000.0, "100000000000000"),
            (1e15, "1e15"),
            (1000000000000000.8, "1000000000000000.8"),
            (1234567890123456.0, "1.234567890123456e15"),
            (1e16, "1e16"),
            (1e-15, "0.000000000000001"),
            (1.2345678901234002e-15, "0.0000000000000012345678901234002"),
            (1e-16, "1e-16"),
            (-2.3333333333333336e-16, "-2.3333333333333336e-16"),
            (1.7976931348623157e308, "1.7976931348623157e308"),
            (5e-324, "5e-324"),
            // Exact ties: the even neighbour, as the server's dtoa.
            (765651181881608.25, "765651181881608.2"),
            (910.60894775390625, "910.6089477539062"),
            (64.16421508789062, "64.16421508789062"),
        ];
        for &(x, want) in cases {
            assert_eq!(text(Value::Double(x), &c), want, "{x:e}");
        }
    }

    #[test]
    fn floats_have_six_digits() {
        let c = col(ColumnType::MYSQL_TYPE_FLOAT, 31);
        let cases: &[(f32, &str)] = &[
            (0.1, "0.1"),
            (1.5, "1.5"),
            (123456.79, "123457"),
            (1234567.9, "1234570"),
            (1e15, "1e15"),
            (100000000000000.0, "100000000000000"),
            (1.2345679e-15, "0.00000000000000123457"),
            (1e-16, "1e-16"),
            (-23333.334, "-23333.3"),
            (1.0507499e-44, "9.80909e-45"),
        ];
        for &(x, want) in cases {
            assert_eq!(text(Value::Float(x), &c), want, "{x:e}");
        }
    }

    #[test]
    fn fixed_decimals_pad_the_shortest_digits_or_round_exactly() {
        let c2 = col(ColumnType::MYSQL_TYPE_DOUBLE, 2);
        let c4 = col(ColumnType::MYSQL_TYPE_DOUBLE, 4);
        let c7 = col(ColumnType::MYSQL_TYPE_DOUBLE, 7);
        // The shortest digits fit: padded, not the exact binary expansion.
        assert_eq!(
            text(Value::Double(909894424719022.375), &c2),
            "909894424719022.40"
        );
        assert_eq!(
            text(Value::Double(-1.695477817860994e18), &c2),
            "-1695477817860994000.00"
        );
        assert_eq!(text(Value::Double(1e-3), &c7), "0.0010000");
        // They do not: the exact value rounded, exact ties to even.
        assert_eq!(text(Value::Double(0.003 / 32.0), &c7), "0.0000938");
        assert_eq!(text(Value::Double(0.001 / 32.0), &c7), "0.0000313");
        assert_eq!(text(Value::Double(0.03125), &c4), "0.0312");
        assert_eq!(text(Value::Double(0.15625), &c4), "0.1562");
        assert_eq!(text(Value::Double(0.09375), &c4), "0.0938");
        assert_eq!(text(Value::Double(9.995), &c2), "9.99");
        assert_eq!(text(Value::Double(-0.001), &c2), "-0.00");
        assert_eq!(text(Value::Float(365533.625), &c2), "365533.62");
        assert_eq!(text(Value::Double(0.0), &c2), "0.00");
        assert_eq!(
            text(Value::Double(12.0), &col(ColumnType::MYSQL_TYPE_DOUBLE, 0)),
            "12"
        );
        assert_eq!(
            text(
                Value::Float(0.333_333_34),
                &col(ColumnType::MYSQL_TYPE_FLOAT, 10)
            ),
            "0.3333333433"
        );
    }

    #[test]
    fn zerofill_pads_to_the_column_length() {
        let c = Column::new(ColumnType::MYSQL_TYPE_LONG)
            .with_flags(ColumnFlags::ZEROFILL_FLAG | ColumnFlags::UNSIGNED_FLAG)
            .with_column_length(6);
        assert_eq!(text(Value::UInt(42), &c), "000042");
        let year = Column::new(ColumnType::MYSQL_TYPE_YEAR)
            .with_flags(ColumnFlags::ZEROFILL_FLAG | ColumnFlags::UNSIGNED_FLAG)
            .with_column_length(4);
        assert_eq!(text(Value::UInt(0), &year), "0000");
        assert_eq!(text(Value::UInt(2024), &year), "2024");
        let f = col(ColumnType::MYSQL_TYPE_FLOAT, 2)
            .with_flags(ColumnFlags::ZEROFILL_FLAG)
            .with_column_length(7);
        assert_eq!(text(Value::Float(1.5), &f), "0001.50");
        assert_eq!(
            text(Value::Int(-5), &col(ColumnType::MYSQL_TYPE_LONGLONG, 0)),
            "-5"
        );
    }

    #[test]
    fn dates_and_times() {
        let date = col(ColumnType::MYSQL_TYPE_DATE, 0);
        assert_eq!(
            text(Value::Date(2024, 2, 29, 0, 0, 0, 0), &date),
            "2024-02-29"
        );
        assert_eq!(text(Value::Date(0, 0, 0, 0, 0, 0, 0), &date), "0000-00-00");
        let dt = col(ColumnType::MYSQL_TYPE_DATETIME, 0);
        assert_eq!(
            text(Value::Date(2024, 2, 29, 12, 34, 56, 789000), &dt),
            "2024-02-29 12:34:56"
        );
        let dt3 = col(ColumnType::MYSQL_TYPE_TIMESTAMP, 3);
        assert_eq!(
            text(Value::Date(2024, 2, 29, 12, 34, 56, 789000), &dt3),
            "2024-02-29 12:34:56.789"
        );
        let unknown = col(ColumnType::MYSQL_TYPE_DATETIME, 39);
        assert_eq!(
            text(Value::Date(2024, 1, 2, 3, 4, 5, 123000), &unknown),
            "2024-01-02 03:04:05.123000"
        );
        assert_eq!(
            text(Value::Date(2024, 1, 2, 3, 4, 5, 0), &unknown),
            "2024-01-02 03:04:05"
        );
        let t = col(ColumnType::MYSQL_TYPE_TIME, 0);
        assert_eq!(text(Value::Time(true, 34, 22, 59, 59, 0), &t), "-838:59:59");
        assert_eq!(text(Value::Time(false, 0, 1, 2, 3, 0), &t), "01:02:03");
        let t6 = col(ColumnType::MYSQL_TYPE_TIME, 6);
        assert_eq!(
            text(Value::Time(true, 0, 0, 0, 0, 1), &t6),
            "-00:00:00.000001"
        );
    }
}
