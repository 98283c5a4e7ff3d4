//! MySQL column definitions → what a vitess `Field` says about them.
//!
//! - The vitess type, as vitess does it (`sqltypes.MySQLToType` + `modifyType`):
//!   a base table, then the UNSIGNED, BINARY, ENUM and SET flags refine integer
//!   and string types.
//! - The flags, with `NUM_FLAG` added to numeric types as vitess's
//!   `readColumnDefinition` does (after libmysqlclient): MySQL and MariaDB do
//!   not send it, PlanetScale's answers carry it.
//! - A column type text (`int unsigned`, `varchar(20)`, `datetime(6)`) derived
//!   from the definition alone, written the way the server's
//!   `information_schema.COLUMNS.COLUMN_TYPE` writes it (MariaDB keeps integer
//!   display widths, MySQL 8 drops them). The definition cannot tell an ENUM's
//!   or SET's values, a spatial subtype (POINT...) or MariaDB's JSON (a
//!   LONGTEXT): types/column_types.rs asks information_schema, and uses this only
//!   when it cannot.
use ferry_proto::vitess::query::Type;

/// Column definition flags that change the vitess type or the column type text.
pub const UNSIGNED_FLAG: u16 = 32;
pub const ZEROFILL_FLAG: u16 = 64;
pub const BINARY_FLAG: u16 = 128;
pub const ENUM_FLAG: u16 = 256;
pub const SET_FLAG: u16 = 2048;
/// "Field is numeric", set by clients (and vitess), never by the server.
pub const NUM_FLAG: u32 = 32768;

/// The `binary` character set / collation.
pub const BINARY_CHARSET: u16 = 63;

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

/// vitess's `IsNum` (MySQL's `IS_NUM`): the integer, decimal, float, NULL and
/// YEAR codes, not TIMESTAMP (7) although it sits among them.
pub fn is_num(mysql_type: u8) -> bool {
    (mysql_type <= 9 && mysql_type != 7) || mysql_type == 13 || mysql_type == 246
}

/// The flags a vitess `Field` carries: the server's, plus `NUM_FLAG` on numeric
/// types. Like vitess, a definition without a length or a character set (one
/// the server did not fill in) carries no flags.
pub fn field_flags(mysql_type: u8, flags: u16, column_length: u32, charset: u16) -> u32 {
    if column_length == 0 && charset == 0 {
        return 0;
    }
    let num = if is_num(mysql_type) { NUM_FLAG } else { 0 };
    u32::from(flags) | num
}

/// The flags of a field vtgate sent over its MySQL protocol, as vtgate's own `Field`
/// has them (what its gRPC Execute answers). vtgate writes a field's flags as they
/// are, and a tablet's numeric fields already carry `NUM_FLAG` (vttablet's own
/// `readColumnDefinition` added it): nothing is added here. A field vtgate made
/// itself (an aggregate it merged, an expression it evaluated) may have flags 0,
/// which its `writeColumnDefinition` sends as the flags `sqltypes.TypeToMySQL` gives
/// the type: a numeric field without `NUM_FLAG` that carries exactly those is one of
/// them, and its flags are 0. A non-numeric one (BINARY on a DATE) cannot be told
/// from a field that has those flags, and keeps them.
pub fn vitess_field_flags(mysql_type: u8, flags: u16, ty: Type) -> u32 {
    let flags = u32::from(flags);
    if !is_num(mysql_type) || flags & NUM_FLAG != 0 {
        return flags;
    }
    // sqltypes.TypeToMySQL's flags of the numeric types.
    let of_type = match ty {
        Type::Uint8 | Type::Uint16 | Type::Uint24 | Type::Uint32 | Type::Uint64 | Type::Year => {
            u32::from(UNSIGNED_FLAG)
        }
        Type::NullType => u32::from(BINARY_FLAG),
        _ => 0,
    };
    if flags == of_type {
        0
    } else {
        flags
    }
}

/// The most bytes one character takes in a result character set (the
/// collation id a column definition carries), for the ones a connection may
/// use: lengths of text columns come in bytes of it. `None` when unknown.
pub fn mbmaxlen(collation: u16) -> Option<u32> {
    Some(match collation {
        63 => 1,
        // utf8mb4: MariaDB and MySQL 5.x ids, MySQL 8's *_0900_* and later.
        45 | 46 | 224..=247 | 255..=323 => 4,
        // utf8mb3
        33 | 76 | 83 | 192..=215 | 223 => 3,
        // latin1, ascii
        5 | 8 | 15 | 31 | 47 | 48 | 49 | 94 | 11 | 65 => 1,
        // ucs2 (2), utf16 and utf32 (4)
        35 | 90 | 128..=151 | 159 => 2,
        54 | 55 | 56 | 62 | 101..=124 | 60 | 61 | 160..=183 => 4,
        _ => return None,
    })
}

/// The parts of a column definition the type text is derived from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ColumnDef {
    pub mysql_type: u8,
    pub flags: u16,
    pub column_length: u32,
    pub charset: u16,
    pub decimals: u8,
}

/// MySQL's "not a fixed number of decimals" (FLOAT/DOUBLE without (M,D), strings).
const NOT_FIXED_DEC: u8 = 31;

/// The column type text of a table column, as `information_schema.COLUMNS.
/// COLUMN_TYPE` would write it, from its definition alone; `mariadb` keeps
/// integer and YEAR display widths as MariaDB does. Empty when the definition
/// cannot tell (ENUM/SET values, NULL, an unknown character set or type).
pub fn derived_column_type(c: &ColumnDef, mariadb: bool) -> String {
    let unsigned = c.flags & UNSIGNED_FLAG != 0;
    let zerofill = c.flags & ZEROFILL_FLAG != 0;
    let len = c.column_length;
    let binary = c.charset == BINARY_CHARSET;
    let chars = || mbmaxlen(c.charset).map(|m| len / m);
    let sign = |base: String| {
        let mut t = base;
        if unsigned {
            t.push_str(" unsigned");
        }
        if zerofill {
            t.push_str(" zerofill");
        }
        t
    };
    let fsp = |name: &str| match c.decimals {
        0 | NOT_FIXED_DEC => name.to_owned(),
        d => format!("{name}({d})"),
    };
    let sized = |small: &str, medium: &str, large: &str, long: &str, n: u32| {
        match n {
            0..=255 => small,
            256..=65_535 => medium,
            65_536..=16_777_215 => large,
            _ => long,
        }
        .to_owned()
    };
    match c.mysql_type {
        1 | 2 | 3 | 8 | 9 => {
            let name = match c.mysql_type {
                1 => "tinyint",
                2 => "smallint",
                9 => "mediumint",
                3 => "int",
                _ => "bigint",
            };
            // MySQL 8.0.19+ shows a display width only with ZEROFILL and for tinyint(1).
            let width = mariadb || zerofill || (c.mysql_type == 1 && len == 1);
            sign(if width {
                format!("{name}({len})")
            } else {
                name.to_owned()
            })
        }
        0 | 246 => {
            let scale = u32::from(c.decimals);
            let point = u32::from(scale > 0);
            let minus = u32::from(!unsigned);
            let precision = len.saturating_sub(point + minus);
            sign(format!("decimal({precision},{scale})"))
        }
        4 | 5 => {
            let name = if c.mysql_type == 4 { "float" } else { "double" };
            sign(match c.decimals {
                NOT_FIXED_DEC => name.to_owned(),
                d => format!("{name}({len},{d})"),
            })
        }
        16 => format!("bit({len})"),
        10 | 14 => "date".into(),
        12 | 18 => fsp("datetime"),
        7 | 17 => fsp("timestamp"),
        11 | 19 => fsp("time"),
        13 if mariadb => format!("year({len})"),
        13 => "year".into(),
        254 if c.flags & (ENUM_FLAG | SET_FLAG) != 0 => String::new(),
        254 if binary => format!("binary({len})"),
        254 => chars().map_or_else(String::new, |n| format!("char({n})")),
        15 | 253 if binary => format!("varbinary({len})"),
        15 | 253 => chars().map_or_else(String::new, |n| format!("varchar({n})")),
        249..=252 if binary => sized("tinyblob", "blob", "mediumblob", "longblob", len),
        249..=252 => chars().map_or_else(String::new, |n| {
            sized("tinytext", "text", "mediumtext", "longtext", n)
        }),
        245 => "json".into(),
        255 => "geometry".into(),
        242 => format!("vector({})", len / 4),
        _ => String::new(),
    }
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

    #[test]
    fn num_flag_as_vitess_adds_it() {
        for code in [0, 1, 2, 3, 4, 5, 6, 8, 9, 13, 246] {
            assert!(is_num(code), "code {code}");
        }
        for code in [7, 10, 11, 12, 15, 16, 17, 18, 245, 252, 253, 254, 255] {
            assert!(!is_num(code), "code {code}");
        }
        // (PlanetScale's golden answer: INT8 32768, YEAR 32864, BIT 32, NULL 32896.)
        assert_eq!(field_flags(1, 0, 4, 63), 32768);
        assert_eq!(field_flags(13, 96, 4, 63), 32864);
        assert_eq!(field_flags(16, 32, 1, 63), 32);
        assert_eq!(field_flags(6, 128, 0, 63), 32896);
        assert_eq!(
            field_flags(3, 1, 0, 0),
            0,
            "no length, no charset: no flags"
        );
    }

    /// vtgate 24.0.4's fields over its MySQL protocol → its gRPC Execute's flags.
    #[test]
    fn vitess_flags_are_vtgates_own() {
        // A tablet's column: NUM_FLAG already there, kept as it is.
        assert_eq!(vitess_field_flags(8, 36865, Type::Int64), 36865);
        // vtgate's COUNT(DISTINCT e): NOT_NULL | BINARY, no NUM_FLAG added.
        assert_eq!(vitess_field_flags(8, 257, Type::Int64), 257);
        // vtgate's NULL literal and unsigned expressions had flags 0.
        assert_eq!(vitess_field_flags(6, 128, Type::NullType), 0);
        assert_eq!(vitess_field_flags(8, 32, Type::Uint64), 0);
        assert_eq!(vitess_field_flags(13, 32, Type::Year), 0);
        assert_eq!(vitess_field_flags(3, 0, Type::Int32), 0);
        // Not a number: as sent (vtgate's MIN(date) with flags 0 cannot be told apart).
        assert_eq!(vitess_field_flags(10, 128, Type::Date), 128);
        assert_eq!(vitess_field_flags(253, 0, Type::Varchar), 0);
    }

    /// Definitions as MariaDB 10.11 and MySQL 8.0.33 sent them (to a utf8mb4
    /// connection) for the columns of one table, and each server's
    /// `information_schema.COLUMNS.COLUMN_TYPE`: (definition, MariaDB, MySQL 8).
    /// The two servers sent the same definitions for all of these.
    #[allow(clippy::type_complexity)]
    const OBSERVED: &[((u8, u16, u32, u16, u8), &str, &str)] = &[
        ((1, 0, 4, 63, 0), "tinyint(4)", "tinyint"),
        ((1, 32, 3, 63, 0), "tinyint(3) unsigned", "tinyint unsigned"),
        ((2, 0, 6, 63, 0), "smallint(6)", "smallint"),
        (
            (2, 32, 5, 63, 0),
            "smallint(5) unsigned",
            "smallint unsigned",
        ),
        ((9, 0, 9, 63, 0), "mediumint(9)", "mediumint"),
        (
            (9, 32, 8, 63, 0),
            "mediumint(8) unsigned",
            "mediumint unsigned",
        ),
        ((3, 0, 11, 63, 0), "int(11)", "int"),
        ((3, 32, 10, 63, 0), "int(10) unsigned", "int unsigned"),
        ((8, 0, 20, 63, 0), "bigint(20)", "bigint"),
        ((8, 32, 20, 63, 0), "bigint(20) unsigned", "bigint unsigned"),
        ((246, 0, 12, 63, 2), "decimal(10,2)", "decimal(10,2)"),
        ((4, 0, 12, 63, 31), "float", "float"),
        ((5, 0, 22, 63, 31), "double", "double"),
        ((16, 32, 8, 63, 0), "bit(8)", "bit(8)"),
        ((10, 128, 10, 63, 0), "date", "date"),
        ((12, 128, 26, 63, 6), "datetime(6)", "datetime(6)"),
        ((7, 160, 19, 63, 0), "timestamp", "timestamp"),
        ((11, 128, 10, 63, 0), "time", "time"),
        ((13, 96, 4, 63, 0), "year(4)", "year"),
        ((254, 0, 20, 45, 0), "char(5)", "char(5)"),
        ((253, 0, 80, 45, 0), "varchar(20)", "varchar(20)"),
        ((254, 128, 4, 63, 0), "binary(4)", "binary(4)"),
        ((253, 128, 8, 63, 0), "varbinary(8)", "varbinary(8)"),
        ((252, 16, 1020, 45, 0), "tinytext", "tinytext"),
        ((252, 16, 262_140, 45, 0), "text", "text"),
        ((252, 16, 67_108_860, 45, 0), "mediumtext", "mediumtext"),
        ((252, 16, 4_294_967_295, 45, 0), "longtext", "longtext"),
        ((252, 144, 255, 63, 0), "tinyblob", "tinyblob"),
        ((252, 144, 65_535, 63, 0), "blob", "blob"),
        ((252, 144, 16_777_215, 63, 0), "mediumblob", "mediumblob"),
        ((252, 144, 4_294_967_295, 63, 0), "longblob", "longblob"),
        ((255, 144, 4_294_967_295, 63, 0), "geometry", "geometry"),
        // A binary-collated VARCHAR: the BINARY flag, but a text character set.
        ((253, 128, 80, 45, 0), "varchar(20)", "varchar(20)"),
        ((3, 16899, 11, 63, 0), "int(11)", "int"),
    ];

    #[test]
    fn column_type_text_matches_information_schema() {
        for &((mysql_type, flags, column_length, charset, decimals), maria, mysql8) in OBSERVED {
            let def = ColumnDef {
                mysql_type,
                flags,
                column_length,
                charset,
                decimals,
            };
            assert_eq!(derived_column_type(&def, true), maria, "{def:?}");
            assert_eq!(derived_column_type(&def, false), mysql8, "{def:?}");
        }
    }

    #[test]
    fn column_type_text_other_forms() {
        let def = |mysql_type, flags, column_length, charset, decimals| ColumnDef {
            mysql_type,
            flags,
            column_length,
            charset,
            decimals,
        };
        let mysql8 = |d: ColumnDef| derived_column_type(&d, false);
        assert_eq!(
            mysql8(def(1, 0, 1, 63, 0)),
            "tinyint(1)",
            "BOOLEAN keeps its width"
        );
        assert_eq!(mysql8(def(3, 96, 10, 63, 0)), "int(10) unsigned zerofill");
        assert_eq!(mysql8(def(246, 32, 11, 63, 2)), "decimal(10,2) unsigned");
        assert_eq!(mysql8(def(246, 0, 6, 63, 0)), "decimal(5,0)");
        assert_eq!(mysql8(def(4, 0, 7, 63, 3)), "float(7,3)");
        assert_eq!(mysql8(def(5, 32, 22, 63, 31)), "double unsigned");
        assert_eq!(mysql8(def(17, 128, 23, 63, 3)), "timestamp(3)");
        assert_eq!(mysql8(def(19, 128, 13, 63, 2)), "time(2)");
        assert_eq!(mysql8(def(245, 144, 4_294_967_295, 63, 0)), "json");
        assert_eq!(mysql8(def(253, 0, 60, 33, 0)), "varchar(20)", "utf8mb3");
        assert_eq!(mysql8(def(253, 0, 20, 8, 0)), "varchar(20)", "latin1");
        assert_eq!(mysql8(def(253, 0, 30, 255, 0)), "varchar(7)", "0900_ai_ci");
        assert_eq!(mysql8(def(242, 0, 16, 63, 0)), "vector(4)");
        // What the definition cannot tell.
        assert_eq!(mysql8(def(254, 256, 4, 45, 0)), "", "ENUM values");
        assert_eq!(mysql8(def(254, 2048, 12, 45, 0)), "", "SET values");
        assert_eq!(mysql8(def(6, 128, 0, 63, 0)), "", "NULL");
        assert_eq!(mysql8(def(253, 0, 20, 999, 0)), "", "unknown character set");
        assert_eq!(mysql8(def(20, 0, 1, 63, 0)), "", "unknown type");
    }
}
