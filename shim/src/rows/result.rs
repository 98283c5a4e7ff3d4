//! MySQL text-protocol results → vitess `QueryResult` (fields + rows).
//!
//! A vitess `Row` is the lengths of the values (-1 for NULL) and the values
//! concatenated; the text protocol already gives every value as its MySQL text
//! bytes, so each row is written straight into the answer's wire bytes as it is
//! read, with one copy of its values and no `Row` struct ([`EncodedRows`]).
use crate::settings::{Setting, Vars};
use crate::types::type_map::{field_flags, vitess_field_flags, vitess_type};
use ferry_proto::vitess::query::{Field, Type};
pub const SETTINGS: &[Setting] = &[
    Setting {
        name: "FERRY_SHIM_MAX_RESULT_BYTES",
        default: "67108864",
        about: "row data one Execute may hold (64 MiB; else `resource_exhausted`)",
    },
    Setting {
        name: "FERRY_SHIM_MAX_RESULT_ROWS",
        default: "100000",
        about: "rows one Execute may return (else `resource_exhausted`, \"row count exceeded\", as PlanetScale)",
    },
];

impl ResultLimits {
    pub fn from_vars(vars: &Vars<'_>) -> Result<Self, String> {
        Ok(ResultLimits {
            bytes: vars.size("FERRY_SHIM_MAX_RESULT_BYTES")?,
            rows: vars.size("FERRY_SHIM_MAX_RESULT_ROWS")?.max(1),
        })
    }
}

#[cfg(test)]
use ferry_proto::vitess::query::Row;
use mysql_async::{Column, Row as MysqlRow, Value};
use prost::encoding::{encode_key, encode_varint, encoded_len_varint, sint64, WireType};
use std::borrow::Cow;

/// A vitess `Field` from a column definition (all of it: clients such as
/// database-js look at `charset` and `flags`, not only name and type), with
/// the flags as vitess reports them (`NUM_FLAG` on numbers). `column_type`
/// is left for types/column_types.rs, which may also make a MariaDB LONGTEXT JSON.
/// From `vitess` (the server is vtgate): the flags as vtgate's own `Field` has
/// them (types/type_map.rs `vitess_field_flags`) and no `column_type`, as vtgate adds none.
pub fn field(col: &Column, vitess: bool) -> Field {
    let flags = col.flags().bits();
    let code = col.column_type() as u8;
    // MariaDB says which columns hold JSON (a table's, a temporary table's, a view's,
    // JSON_OBJECT()...) in its extended metadata: `format=json` (key 1).
    let ty = if col.mariadb_extended_type_info(1) == Some(&b"json"[..]) {
        Type::Json
    } else {
        vitess_type(code, flags)
    };
    Field {
        name: text(col.name_ref()),
        r#type: ty as i32,
        table: text(col.table_ref()),
        org_table: text(col.org_table_ref()),
        database: text(col.schema_ref()),
        org_name: text(col.org_name_ref()),
        column_length: col.column_length(),
        charset: u32::from(col.character_set()),
        decimals: u32::from(col.decimals()),
        flags: if vitess {
            vitess_field_flags(code, flags, ty)
        } else {
            field_flags(code, flags, col.column_length(), col.character_set())
        },
        // Expressions have no column of their own: only JSON is named.
        column_type: if ty == Type::Json && !vitess {
            "json".into()
        } else {
            String::new()
        },
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The text bytes of a value; `None` is SQL NULL. The text protocol only
/// produces `Bytes` and `NULL`; the other arms keep us total.
fn value_bytes(v: &Value) -> Option<Cow<'_, [u8]>> {
    Some(match v {
        Value::NULL => return None,
        Value::Bytes(b) => Cow::Borrowed(b.as_slice()),
        Value::Int(i) => Cow::Owned(i.to_string().into_bytes()),
        Value::UInt(u) => Cow::Owned(u.to_string().into_bytes()),
        Value::Float(f) => Cow::Owned(f.to_string().into_bytes()),
        Value::Double(d) => Cow::Owned(d.to_string().into_bytes()),
        other => Cow::Owned(other.as_sql(true).trim_matches('\'').as_bytes().to_vec()),
    })
}

/// One vitess row from the values of a row, in column order (what the encoded rows
/// are checked against).
#[cfg(test)]
pub fn row_from_values<'v>(values: impl Iterator<Item = Option<&'v Value>> + Clone) -> Row {
    let size: usize = values
        .clone()
        .map(|v| match v {
            Some(Value::Bytes(b)) => b.len(),
            _ => 0,
        })
        .sum();
    let mut lengths = Vec::with_capacity(values.size_hint().0);
    let mut buf = Vec::with_capacity(size);
    for v in values {
        match v.and_then(value_bytes) {
            None => lengths.push(-1),
            Some(b) => {
                lengths.push(b.len() as i64);
                buf.extend_from_slice(&b);
            }
        }
    }
    Row {
        lengths,
        values: buf,
    }
}

/// How much of a result the shim keeps: row data bytes and rows. Rows cost memory
/// of their own all the way to the client (a decoded message per row in the filter,
/// an object per row in protojson), so tiny rows are bounded by count, as PlanetScale
/// bounds them ("row count exceeded").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResultLimits {
    pub bytes: usize,
    pub rows: usize,
}

/// Which limit a result passed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Overflow {
    Bytes,
    Rows,
}

/// The rows of a result as the wire bytes of `QueryResult.rows` (field 4), in
/// order: what prost writes for them, written once, as each row is read.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct EncodedRows {
    pub bytes: Vec<u8>,
    pub count: usize,
}

/// `QueryResult.rows`.
const ROWS_FIELD: u32 = 4;

impl EncodedRows {
    /// Appends one row (its values in column order; `None` is NULL), byte for byte
    /// as prost encodes `Row { lengths, values }` as a `rows` entry. `lengths` is
    /// scratch space, reused from row to row.
    pub fn push(&mut self, values: &[Option<Cow<'_, [u8]>>], lengths: &mut Vec<i64>) {
        let (row_len, total) = row_len(values, lengths);
        let out = &mut self.bytes;
        out.reserve(1 + encoded_len_varint(row_len as u64) + row_len);
        encode_key(ROWS_FIELD, WireType::LengthDelimited, out);
        encode_varint(row_len as u64, out);
        sint64::encode_packed(1, lengths, out);
        if total > 0 {
            encode_key(2, WireType::LengthDelimited, out);
            encode_varint(total as u64, out);
            for b in values.iter().flatten() {
                out.extend_from_slice(b);
            }
        }
        self.count += 1;
    }
}

/// The bytes one row adds to `bytes` when pushed.
pub fn entry_len(values: &[Option<Cow<'_, [u8]>>], lengths: &mut Vec<i64>) -> usize {
    let (row_len, _) = row_len(values, lengths);
    1 + encoded_len_varint(row_len as u64) + row_len
}

/// A row's encoded length and its values' total; leaves the lengths in `lengths`.
fn row_len(values: &[Option<Cow<'_, [u8]>>], lengths: &mut Vec<i64>) -> (usize, usize) {
    lengths.clear();
    lengths.extend(
        values
            .iter()
            .map(|v| v.as_ref().map_or(-1, |b| b.len() as i64)),
    );
    let total: usize = values.iter().flatten().map(|b| b.len()).sum();
    // Row: `repeated sint64 lengths = 1` (packed), `bytes values = 2`; proto3
    // writes neither when empty.
    let lengths_len = sint64::encoded_len_packed(1, lengths);
    let values_len = if total == 0 {
        0
    } else {
        1 + encoded_len_varint(total as u64) + total
    };
    (lengths_len + values_len, total)
}

/// A MySQL row's values as text bytes, in column order (`None`: NULL).
pub fn texts(r: &MysqlRow) -> Vec<Option<Cow<'_, [u8]>>> {
    (0..r.len())
        .map(|i| r.as_ref(i).and_then(value_bytes))
        .collect()
}

/// Collects the rows of one result set up to its limits, so one huge SELECT cannot
/// exhaust the shim's (or the filter's) memory.
pub struct Rows {
    pub encoded: EncodedRows,
    /// Row data counted against the limits, and rows kept: all of the result's so
    /// far, including rows already taken out of `encoded` (rows/spill.rs sends them on).
    bytes: usize,
    kept: usize,
    limits: ResultLimits,
    pub overflow: Option<Overflow>,
    lengths: Vec<i64>,
}

impl Rows {
    pub fn new(limits: ResultLimits) -> Self {
        Rows {
            encoded: EncodedRows::default(),
            bytes: 0,
            kept: 0,
            limits,
            overflow: None,
            lengths: Vec::new(),
        }
    }

    /// Adds a row; after the budget is exceeded rows are counted out, not kept.
    pub fn push(&mut self, r: &MysqlRow) {
        if self.overflow.is_none() {
            self.push_values(&texts(r));
        }
    }

    fn push_values(&mut self, values: &[Option<Cow<'_, [u8]>>]) {
        if self.overflow.is_some() {
            return;
        }
        let size: usize = values.iter().flatten().map(|b| b.len()).sum();
        self.bytes += size + 8 * values.len();
        self.overflow = if self.bytes > self.limits.bytes {
            Some(Overflow::Bytes)
        } else if self.kept >= self.limits.rows {
            Some(Overflow::Rows)
        } else {
            self.encoded.push(values, &mut self.lengths);
            self.kept += 1;
            return;
        };
        self.encoded = EncodedRows::default();
    }

    /// Rows kept so far (taken or not).
    pub fn kept(&self) -> usize {
        self.kept
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mysql_async::consts::{ColumnFlags, ColumnType};

    #[test]
    fn rows_concatenate_values_and_mark_null() {
        let values = [
            Value::Bytes(b"12".to_vec()),
            Value::NULL,
            Value::Bytes(Vec::new()),
            Value::Bytes(b"abc".to_vec()),
        ];
        let got = row_from_values(values.iter().map(Some));
        assert_eq!(got.lengths, vec![2, -1, 0, 3]);
        assert_eq!(got.values, b"12abc");
        assert_eq!(got.values.capacity(), 5, "one exact allocation");
    }

    #[test]
    fn field_carries_the_column_definition() {
        let col = Column::new(ColumnType::MYSQL_TYPE_LONG)
            .with_name(b"id")
            .with_org_name(b"id_col")
            .with_table(b"t")
            .with_org_table(b"things")
            .with_schema(b"ferry")
            .with_column_length(10)
            .with_character_set(63)
            .with_decimals(0)
            .with_flags(ColumnFlags::UNSIGNED_FLAG | ColumnFlags::NOT_NULL_FLAG);
        let f = field(&col, false);
        assert_eq!((f.name.as_str(), f.org_name.as_str()), ("id", "id_col"));
        assert_eq!(
            (f.table.as_str(), f.org_table.as_str(), f.database.as_str()),
            ("t", "things", "ferry")
        );
        assert_eq!(f.r#type, ferry_proto::vitess::query::Type::Uint32 as i32);
        assert_eq!((f.column_length, f.charset, f.flags), (10, 63, 33 | 32768));
    }

    fn bytes(b: &[u8]) -> Option<Cow<'_, [u8]>> {
        Some(Cow::Borrowed(b))
    }

    #[test]
    fn encoded_rows_are_what_prost_writes() {
        use ferry_proto::vitess::query::QueryResult;
        use prost::Message;
        let big = vec![b'y'; 300];
        let rows: Vec<Vec<Option<Cow<'_, [u8]>>>> = vec![
            vec![bytes(b"12"), None, bytes(b""), bytes(b"abc")],
            vec![],
            vec![None, None],
            vec![bytes(b""), bytes(b"")],
            vec![bytes(&big), bytes(b"z")],
        ];
        let mut encoded = EncodedRows::default();
        let mut scratch = Vec::new();
        let mut want = QueryResult::default();
        for values in &rows {
            encoded.push(values, &mut scratch);
            let text: Vec<Value> = values
                .iter()
                .map(|v| v.as_ref().map_or(Value::NULL, |b| Value::Bytes(b.to_vec())))
                .collect();
            want.rows.push(row_from_values(text.iter().map(Some)));
        }
        assert_eq!(encoded.count, rows.len());
        assert_eq!(encoded.bytes, want.encode_to_vec());
        let sizes: usize = rows.iter().map(|v| entry_len(v, &mut scratch)).sum();
        assert_eq!(sizes, encoded.bytes.len());
    }

    #[test]
    fn rows_respect_the_budget() {
        let value = [bytes(&[b'x'; 100])];
        let mut rows = Rows::new(ResultLimits {
            bytes: 250,
            rows: 10,
        });
        rows.push_values(&value);
        rows.push_values(&value);
        assert_eq!(rows.overflow, None);
        rows.push_values(&value);
        assert_eq!(rows.overflow, Some(Overflow::Bytes));
        assert_eq!(rows.encoded, EncodedRows::default());
    }

    #[test]
    fn rows_respect_the_row_limit() {
        let value = [bytes(b"x")];
        let mut rows = Rows::new(ResultLimits {
            bytes: 1000,
            rows: 2,
        });
        rows.push_values(&value);
        rows.push_values(&value);
        assert_eq!((rows.overflow, rows.encoded.count), (None, 2));
        rows.push_values(&value);
        assert_eq!(rows.overflow, Some(Overflow::Rows));
        assert_eq!(rows.encoded, EncodedRows::default());
    }

    #[test]
    fn rows_taken_out_still_count_against_the_limits() {
        // rows/spill.rs takes the encoded rows as it sends them.
        let value = [bytes(b"x")];
        let mut rows = Rows::new(ResultLimits {
            bytes: 1000,
            rows: 2,
        });
        rows.push_values(&value);
        rows.push_values(&value);
        let taken = std::mem::take(&mut rows.encoded);
        assert_eq!((taken.count, rows.kept()), (2, 2));
        rows.push_values(&value);
        assert_eq!(rows.overflow, Some(Overflow::Rows));
        let mut rows = Rows::new(ResultLimits {
            bytes: 20,
            rows: 100,
        });
        rows.push_values(&value); // 1 + 8 bytes
        rows.push_values(&value);
        rows.encoded = EncodedRows::default();
        rows.push_values(&value);
        assert_eq!(rows.overflow, Some(Overflow::Bytes));
    }
}
