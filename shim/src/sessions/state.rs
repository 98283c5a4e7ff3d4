//! Session state carried in the session instead of on a held connection: user
//! variables (`user_defined_variables`, typed as vitess types them) and session
//! system variables (`system_variables`, each as the SQL literal that sets it
//! again), both covered by the seal (seal.rs). After a statement that assigns
//! them (ferry-wire's `session_state::assigned`) their values are read back in
//! one query; before a statement of the session on a pooled connection they are
//! set again in one `SET`, and the connection is reset when it goes back.
//!
//! Typed round trip: integers (signed and unsigned) and decimals as their digits,
//! doubles as their shortest exact text with an exponent (both servers send that
//! text), NULL as NULL, binary strings byte for byte. A character string keeps
//! its characters: it is read as utf8mb4 and set again as a utf8mb4 literal, so
//! its collation becomes utf8mb4's default (vitess keeps no collation either).
use crate::sessions::gtid::Flavour;
use crate::settings::{Setting, Vars};
use ferry_proto::vitess::query::execute_options::Workload;
use ferry_proto::vitess::query::{BindVariable, Type};
use ferry_proto::vitess::vtgate;
use ferry_wire::session_state::{plain_name, system_variable, Assigned};
use mysql_async::consts::{ColumnFlags, ColumnType};
use mysql_async::{Column, Value};

/// The character set number of `binary`.
const BINARY: u16 = 63;

/// How much state a session may carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StateSettings {
    pub max_bytes: usize,
}

pub const SETTINGS: &[Setting] = &[Setting {
    name: "FERRY_SESSION_STATE_MAX_BYTES",
    default: "16384",
    about: "the user variables and session settings one session may carry (names and values); a statement that would pass it is answered `resource_exhausted` and its session keeps its state as it was",
}];

impl StateSettings {
    pub fn from_vars(vars: &Vars<'_>) -> Result<Self, String> {
        Ok(StateSettings {
            max_bytes: vars.size("FERRY_SESSION_STATE_MAX_BYTES")?,
        })
    }
}

/// The workload to set on vtgate for a statement of the session: the session's
/// (`SET workload`, which the shim answers: sessions/olap.rs), or OLAP for a
/// `stream`: over the MySQL protocol vtgate streams a result only in OLAP mode,
/// and without streaming vttablet stops at its row limit (10,000 rows by default),
/// where psdb's StreamExecute, vtgate's own, streams whatever the workload.
pub fn vtgate_workload(session: &vtgate::Session, stream: bool) -> Workload {
    match session.options.as_ref().map(|o| o.workload()) {
        _ if stream => Workload::Olap,
        Some(w) => w,
        None => Workload::Unspecified,
    }
}

/// The session's state, with the workload vtgate would get (`Some` on Vitess), in
/// one canonical text: the `SET` that gives it (as for MySQL, names in order).
/// Equal text, equal state: the settings pool's key (sessions/settings_pool.rs).
/// `None`: no state.
pub fn key(session: &vtgate::Session, workload: Option<Workload>) -> Option<String> {
    apply_sql(session, Flavour::Mysql, workload)
}

/// The `SET` that gives a fresh connection the session's state: on Vitess the
/// `workload` first (`Some`, from [`vtgate_workload`]) unless it is vtgate's
/// default, OLTP; then system variables (in name order), then user variables.
pub fn apply_sql(
    session: &vtgate::Session,
    flavour: Flavour,
    workload: Option<Workload>,
) -> Option<String> {
    let mut items = Vec::new();
    if let Some(w @ (Workload::Olap | Workload::Dba)) = workload {
        items.push(format!("workload = '{}'", w.as_str_name()));
    }
    let mut system: Vec<_> = session.system_variables.iter().collect();
    system.sort();
    for (name, literal) in system {
        // Only names of the table: a sealed session holds no other, but a name is
        // never written into SQL unchecked.
        if let Some(var) = system_variable(name) {
            items.push(format!(
                "@@session.{} = {literal}",
                server_name(var, flavour)
            ));
        }
    }
    let mut user: Vec<_> = session.user_defined_variables.iter().collect();
    user.sort_by(|a, b| a.0.cmp(b.0));
    for (name, value) in user {
        if let Some(literal) = user_literal(value).filter(|_| plain_name(name)) {
            items.push(format!("@{name} = {literal}"));
        }
    }
    (!items.is_empty()).then(|| format!("SET {}", items.join(", ")))
}

/// The query that reads what `assigned` names: three columns per user variable
/// (the value with its type, its bytes, its characters as utf8mb4), then one per
/// system variable.
pub fn capture_sql(assigned: &Assigned, flavour: Flavour) -> String {
    let mut items = Vec::new();
    for name in &assigned.user {
        items.push(format!(
            "@{name}, HEX(@{name}), HEX(CONVERT(@{name} USING utf8mb4))"
        ));
    }
    for name in &assigned.system {
        if let Some(var) = system_variable(name) {
            items.push(format!("@@session.{}", server_name(var, flavour)));
        }
    }
    format!("SELECT {}", items.join(", "))
}

/// Why the state a statement assigned was not kept (the session is left as it was).
#[derive(Debug, PartialEq, Eq)]
pub enum Unkept {
    /// It would pass `max_bytes`: the client's to shrink.
    TooLarge(String),
    /// The server's answer to the read-back had fewer values than were asked for: a
    /// fault of the gateway or the server, not of the client.
    Unreadable,
}

/// Stores the captured values in `session`; `Err` says why nothing was kept.
pub fn store(
    session: &mut vtgate::Session,
    assigned: &Assigned,
    columns: &[Column],
    values: &[Value],
    max_bytes: usize,
) -> Result<(), Unkept> {
    let mut next = session.clone();
    let mut at = 0;
    for name in &assigned.user {
        let (Some(col), Some(value), Some(bytes), Some(text)) = (
            columns.get(at),
            values.get(at),
            values.get(at + 1),
            values.get(at + 2),
        ) else {
            return Err(Unkept::Unreadable);
        };
        next.user_defined_variables
            .insert(name.clone(), user_value(col, value, bytes, text));
        at += 3;
    }
    for name in &assigned.system {
        let Some(value) = values.get(at) else {
            return Err(Unkept::Unreadable);
        };
        next.system_variables
            .insert((*name).to_owned(), system_literal(value));
        at += 1;
    }
    let size = state_bytes(&next);
    if size > max_bytes {
        return Err(Unkept::TooLarge(format!(
            "the session's variables and settings would take {size} bytes, more than {max_bytes} (FERRY_SESSION_STATE_MAX_BYTES); nothing was kept"
        )));
    }
    *session = next;
    Ok(())
}

fn state_bytes(session: &vtgate::Session) -> usize {
    let user: usize = session
        .user_defined_variables
        .iter()
        .map(|(k, v)| k.len() + v.value.len())
        .sum();
    let system: usize = session
        .system_variables
        .iter()
        .map(|(k, v)| k.len() + v.len())
        .sum();
    user + system
}

fn server_name(var: &ferry_wire::session_state::SystemVariable, flavour: Flavour) -> &'static str {
    match (flavour, var.mariadb) {
        (Flavour::MariaDb, Some(name)) => name,
        _ => var.name,
    }
}

/// A user variable as vitess types it, from `SELECT @v, HEX(@v), HEX(CONVERT(@v USING utf8mb4))`.
fn user_value(col: &Column, value: &Value, bytes: &Value, text: &Value) -> BindVariable {
    let typed = |ty: Type, value: Vec<u8>| BindVariable {
        r#type: ty as i32,
        value,
        values: Vec::new(),
    };
    let raw = |v: &Value| match v {
        Value::Bytes(b) => b.clone(),
        _ => Vec::new(),
    };
    if *value == Value::NULL {
        return typed(Type::NullType, Vec::new());
    }
    match col.column_type() {
        ColumnType::MYSQL_TYPE_LONGLONG
        | ColumnType::MYSQL_TYPE_LONG
        | ColumnType::MYSQL_TYPE_INT24
        | ColumnType::MYSQL_TYPE_SHORT
        | ColumnType::MYSQL_TYPE_TINY => {
            let ty = if col.flags().contains(ColumnFlags::UNSIGNED_FLAG) {
                Type::Uint64
            } else {
                Type::Int64
            };
            typed(ty, raw(value))
        }
        ColumnType::MYSQL_TYPE_NEWDECIMAL | ColumnType::MYSQL_TYPE_DECIMAL => {
            typed(Type::Decimal, raw(value))
        }
        ColumnType::MYSQL_TYPE_DOUBLE | ColumnType::MYSQL_TYPE_FLOAT => {
            typed(Type::Float64, raw(value))
        }
        _ if col.character_set() == BINARY => typed(Type::Varbinary, unhex(&raw(bytes))),
        _ => typed(Type::Varchar, unhex(&raw(text))),
    }
}

/// The SQL that sets a user variable to `v` again, with its type.
fn user_literal(v: &BindVariable) -> Option<String> {
    let text = std::str::from_utf8(&v.value).unwrap_or_default();
    let number = |extra: &[u8]| {
        !text.is_empty()
            && text
                .bytes()
                .all(|b| b.is_ascii_digit() || b == b'-' || extra.contains(&b))
    };
    match Type::try_from(v.r#type).ok()? {
        Type::NullType => Some("NULL".into()),
        Type::Int64 if number(b"") => Some(format!("CAST({text} AS SIGNED)")),
        Type::Uint64 if number(b"") => Some(format!("CAST({text} AS UNSIGNED)")),
        Type::Decimal if number(b".") => Some(if text.contains('.') {
            text.to_owned()
        } else {
            format!("CAST({text} AS DECIMAL(65,0))")
        }),
        Type::Float64 if number(b".eE+") => Some(if text.contains(['e', 'E']) {
            text.to_owned()
        } else {
            format!("{text}e0")
        }),
        Type::Varbinary => Some(format!("X'{}'", hex(&v.value))),
        Type::Varchar => Some(format!("_utf8mb4 X'{}'", hex(&v.value))),
        _ => None,
    }
}

/// A system variable's value as the literal that sets it again.
fn system_literal(value: &Value) -> String {
    match value {
        Value::NULL => "NULL".into(),
        Value::Int(n) => n.to_string(),
        Value::UInt(n) => n.to_string(),
        Value::Double(d) => format!("{d:e}"),
        Value::Bytes(b) => {
            let numeric = !b.is_empty()
                && b.iter().all(|c| c.is_ascii_digit() || b".-".contains(c))
                && b.first().is_some_and(|c| c.is_ascii_digit() || *c == b'-');
            match std::str::from_utf8(b) {
                Ok(text) if numeric => text.to_owned(),
                _ => format!("_utf8mb4 X'{}'", hex(b)),
            }
        }
        other => other.as_sql(false),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02X}")).collect()
}

/// The bytes of the server's `HEX()` text.
fn unhex(text: &[u8]) -> Vec<u8> {
    std::str::from_utf8(text)
        .ok()
        .and_then(crate::sessions::seal::unhex)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bind(ty: Type, value: &[u8]) -> BindVariable {
        BindVariable {
            r#type: ty as i32,
            value: value.to_vec(),
            values: Vec::new(),
        }
    }

    #[test]
    fn literals_keep_the_type() {
        assert_eq!(
            user_literal(&bind(Type::Int64, b"-9223372036854775808")).unwrap(),
            "CAST(-9223372036854775808 AS SIGNED)"
        );
        assert_eq!(
            user_literal(&bind(Type::Uint64, b"18446744073709551615")).unwrap(),
            "CAST(18446744073709551615 AS UNSIGNED)"
        );
        assert_eq!(user_literal(&bind(Type::Decimal, b"1.50")).unwrap(), "1.50");
        assert_eq!(
            user_literal(&bind(Type::Decimal, b"5")).unwrap(),
            "CAST(5 AS DECIMAL(65,0))"
        );
        assert_eq!(
            user_literal(&bind(Type::Float64, b"0.30000000000000004")).unwrap(),
            "0.30000000000000004e0"
        );
        assert_eq!(user_literal(&bind(Type::Float64, b"1e20")).unwrap(), "1e20");
        assert_eq!(
            user_literal(&bind(Type::Varbinary, &[0, 255])).unwrap(),
            "X'00FF'"
        );
        assert_eq!(
            user_literal(&bind(Type::Varchar, "é'".as_bytes())).unwrap(),
            "_utf8mb4 X'C3A927'"
        );
        assert_eq!(user_literal(&bind(Type::NullType, b"")).unwrap(), "NULL");
        // A number that is not one never reaches SQL.
        assert_eq!(user_literal(&bind(Type::Int64, b"1; DROP TABLE t")), None);
        assert_eq!(user_literal(&bind(Type::Float64, b"1e0)")), None);
    }

    #[test]
    fn state_that_is_not_kept_leaves_the_session_as_it_was() {
        let mut s = vtgate::Session::default();
        s.system_variables
            .insert("time_zone".into(), "'+00:00'".into());
        let before = s.clone();

        let assigned = Assigned {
            user: vec!["a".into()],
            system: Vec::new(),
        };
        // Fewer values than asked for: the server's fault or ours, not the client's.
        assert_eq!(
            store(&mut s, &assigned, &[], &[], 16384),
            Err(Unkept::Unreadable)
        );
        let assigned = Assigned {
            user: Vec::new(),
            system: vec!["sql_mode"],
        };
        assert_eq!(
            store(&mut s, &assigned, &[], &[], 16384),
            Err(Unkept::Unreadable)
        );
        assert_eq!(s, before);
        // Past the limit: the client's to shrink.
        let big = Value::Bytes(vec![b'A'; 100]);
        assert!(matches!(
            store(&mut s, &assigned, &[], std::slice::from_ref(&big), 64),
            Err(Unkept::TooLarge(m)) if m.contains("FERRY_SESSION_STATE_MAX_BYTES")
        ));
        assert_eq!(s, before);
        assert_eq!(store(&mut s, &assigned, &[], &[big], 16384), Ok(()));
        assert!(s.system_variables.contains_key("sql_mode"));
    }

    #[test]
    fn system_values_as_literals() {
        assert_eq!(
            system_literal(&Value::Bytes(b"+05:00".to_vec())),
            "_utf8mb4 X'2B30353A3030'"
        );
        assert_eq!(system_literal(&Value::Bytes(b"1000".to_vec())), "1000");
        assert_eq!(system_literal(&Value::Int(0)), "0");
        assert_eq!(system_literal(&Value::NULL), "NULL");
    }

    #[test]
    fn the_set_names_each_server_its_way() {
        let mut s = vtgate::Session::default();
        assert_eq!(apply_sql(&s, Flavour::Mysql, None), None);
        s.system_variables
            .insert("max_execution_time".into(), "100".into());
        s.system_variables
            .insert("time_zone".into(), "_utf8mb4 X'2B30353A3030'".into());
        s.user_defined_variables
            .insert("b".into(), bind(Type::Int64, b"2"));
        s.user_defined_variables
            .insert("a".into(), bind(Type::NullType, b""));
        // A name outside the table is never written, whatever the session says.
        s.system_variables.insert("sql_log_bin".into(), "0".into());
        assert_eq!(
            apply_sql(&s, Flavour::MariaDb, None).unwrap(),
            "SET @@session.max_statement_time = 100, @@session.time_zone = _utf8mb4 X'2B30353A3030', @a = NULL, @b = CAST(2 AS SIGNED)"
        );
        assert!(apply_sql(&s, Flavour::Mysql, None)
            .unwrap()
            .starts_with("SET @@session.max_execution_time = 100"));
        // On Vitess, an OLAP session's workload goes first; OLTP is vtgate's default.
        s.options.get_or_insert_with(Default::default).workload = Workload::Olap as i32;
        let olap = Some(vtgate_workload(&s, false));
        assert!(apply_sql(&s, Flavour::Mysql, olap)
            .unwrap()
            .starts_with("SET workload = 'OLAP', @@session.max_execution_time = 100"));
        let plain = vtgate::Session::default();
        assert_eq!(
            apply_sql(&plain, Flavour::Mysql, Some(Workload::Oltp)),
            None
        );
        // A stream is OLAP on Vitess whatever the session's workload.
        let stream = Some(vtgate_workload(&plain, true));
        assert_eq!(
            apply_sql(&plain, Flavour::Mysql, stream).as_deref(),
            Some("SET workload = 'OLAP'")
        );
        assert_eq!(apply_sql(&plain, Flavour::Mysql, None), None);
    }

    #[test]
    fn the_capture_reads_each_name_once() {
        let assigned = Assigned {
            user: vec!["x".into()],
            system: vec!["transaction_isolation"],
        };
        assert_eq!(
            capture_sql(&assigned, Flavour::MariaDb),
            "SELECT @x, HEX(@x), HEX(CONVERT(@x USING utf8mb4)), @@session.tx_isolation"
        );
    }
}
