//! MySQL column type code + column flags → vitess `query.Type`, as vitess does
//! it (`sqltypes.MySQLToType` + `modifyType`): a base table, then the UNSIGNED,
//! BINARY, ENUM and SET flags refine integer and string types.
use ferry_proto::vitess::query::Type;

/// Column definition flags that change the vitess type.
pub const UNSIGNED_FLAG: u16 = 32;
pub const BINARY_FLAG: u16 = 128;
pub const ENUM_FLAG: u16 = 256;
pub const SET_FLAG: u16 = 2048;

/// MySQL protocol column type code → vitess type, before flags.
/// MariaDB reports JSON as a LONGTEXT (blob code), so it maps to TEXT there.
const BASE: &[(u8, Type)] = &[
    (0, Type::Decimal),    // DECIMAL
    (1, Type::Int8),       // TINY
    (2, Type::Int16),      // SHORT
    (3, Type::Int32),      // LONG
    (4, Type::Float32),    // FLOAT
    (5, Type::Float64),    // DOUBLE
    (6, Type::NullType),   // NULL
    (7, Type::Timestamp),  // TIMESTAMP
    (8, Type::Int64),      // LONGLONG
    (9, Type::Int24),      // INT24
    (10, Type::Date),      // DATE
    (11, Type::Time),      // TIME
    (12, Type::Datetime),  // DATETIME
    (13, Type::Year),      // YEAR
    (14, Type::Date),      // NEWDATE
    (15, Type::Varchar),   // VARCHAR
    (16, Type::Bit),       // BIT
    (17, Type::Timestamp), // TIMESTAMP2
    (18, Type::Datetime),  // DATETIME2
    (19, Type::Time),      // TIME2
    (242, Type::Vector),   // VECTOR
    (245, Type::Json),     // JSON
    (246, Type::Decimal),  // NEWDECIMAL
    (247, Type::Enum),     // ENUM
    (248, Type::Set),      // SET
    (249, Type::Text),     // TINY_BLOB
    (250, Type::Text),     // MEDIUM_BLOB
    (251, Type::Text),     // LONG_BLOB
    (252, Type::Text),     // BLOB
    (253, Type::Varchar),  // VAR_STRING
    (254, Type::Char),     // STRING
    (255, Type::Geometry), // GEOMETRY
];

/// (base type, flag, refined type), first match wins: vitess checks BINARY
/// before ENUM and SET for CHAR. YEAR carries UNSIGNED but stays YEAR (no row).
const REFINE: &[(Type, u16, Type)] = &[
    (Type::Int8, UNSIGNED_FLAG, Type::Uint8),
    (Type::Int16, UNSIGNED_FLAG, Type::Uint16),
    (Type::Int24, UNSIGNED_FLAG, Type::Uint24),
    (Type::Int32, UNSIGNED_FLAG, Type::Uint32),
    (Type::Int64, UNSIGNED_FLAG, Type::Uint64),
    (Type::Text, BINARY_FLAG, Type::Blob),
    (Type::Varchar, BINARY_FLAG, Type::Varbinary),
    (Type::Char, BINARY_FLAG, Type::Binary),
    (Type::Char, ENUM_FLAG, Type::Enum),
    (Type::Char, SET_FLAG, Type::Set),
];

/// The vitess type of a column. A code MySQL may add later is passed through
/// as VARBINARY: the text-protocol bytes are still the value.
pub fn vitess_type(mysql_type: u8, flags: u16) -> Type {
    let base = BASE
        .iter()
        .find(|(code, _)| *code == mysql_type)
        .map_or(Type::Varbinary, |(_, t)| *t);
    REFINE
        .iter()
        .find(|(from, flag, _)| *from == base && flags & flag != 0)
        .map_or(base, |(_, _, to)| *to)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_table() {
        let cases = [
            (0, Type::Decimal),
            (1, Type::Int8),
            (2, Type::Int16),
            (3, Type::Int32),
            (4, Type::Float32),
            (5, Type::Float64),
            (6, Type::NullType),
            (7, Type::Timestamp),
            (8, Type::Int64),
            (9, Type::Int24),
            (10, Type::Date),
            (11, Type::Time),
            (12, Type::Datetime),
            (13, Type::Year),
            (14, Type::Date),
            (15, Type::Varchar),
            (16, Type::Bit),
            (17, Type::Timestamp),
            (18, Type::Datetime),
            (19, Type::Time),
            (242, Type::Vector),
            (245, Type::Json),
            (246, Type::Decimal),
            (247, Type::Enum),
            (248, Type::Set),
            (249, Type::Text),
            (250, Type::Text),
            (251, Type::Text),
            (252, Type::Text),
            (253, Type::Varchar),
            (254, Type::Char),
            (255, Type::Geometry),
        ];
        for (code, want) in cases {
            assert_eq!(vitess_type(code, 0), want, "code {code}");
        }
        assert_eq!(
            vitess_type(20, 0),
            Type::Varbinary,
            "unknown codes pass through as bytes"
        );
    }

    #[test]
    fn unsigned_selects_uint_but_year_stays_year() {
        let u = UNSIGNED_FLAG;
        assert_eq!(vitess_type(1, u), Type::Uint8);
        assert_eq!(vitess_type(2, u), Type::Uint16);
        assert_eq!(vitess_type(9, u), Type::Uint24);
        assert_eq!(vitess_type(3, u), Type::Uint32);
        assert_eq!(vitess_type(8, u), Type::Uint64);
        assert_eq!(vitess_type(13, u | 64), Type::Year);
        assert_eq!(vitess_type(246, u), Type::Decimal);
        assert_eq!(vitess_type(5, u), Type::Float64);
    }

    #[test]
    fn binary_enum_and_set_flags() {
        assert_eq!(vitess_type(252, BINARY_FLAG), Type::Blob);
        assert_eq!(vitess_type(249, BINARY_FLAG), Type::Blob);
        assert_eq!(vitess_type(253, BINARY_FLAG), Type::Varbinary);
        assert_eq!(vitess_type(15, BINARY_FLAG), Type::Varbinary);
        assert_eq!(vitess_type(254, BINARY_FLAG), Type::Binary);
        assert_eq!(vitess_type(254, ENUM_FLAG), Type::Enum);
        assert_eq!(vitess_type(254, SET_FLAG), Type::Set);
        assert_eq!(vitess_type(254, BINARY_FLAG | ENUM_FLAG), Type::Binary);
        // Flags never turn numbers or dates into strings.
        assert_eq!(vitess_type(3, BINARY_FLAG), Type::Int32);
        assert_eq!(vitess_type(12, BINARY_FLAG), Type::Datetime);
    }
}
