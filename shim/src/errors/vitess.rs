//! Errors Vitess's vtgate sends over the MySQL protocol. Its own errors arrive as
//! errno 1105 (ER_UNKNOWN_ERROR) with the vitess code in the message, in one of
//! two forms: a `VTnnnnn:` error id (each id's family has one code, as
//! `go/vt/vterrors/code.go` assigns them) or a tablet's gRPC status, `code = Name
//! desc = ...`; PlanetScale answers with that code, and so does Ferry (tables below).
//! A tablet's error also quotes the statement vtgate sent it and its bind variables
//! (`(CallerID: u): Sql: "...", BindVars: {...}`): values a client never sees from
//! Ferry, so that tail is cut from the message ([`redacted`]).
use ferry_proto::vitess::vtrpc::Code;

/// `VTnn...` error id families → code (`go/vt/vterrors/code.go`: every id of a family
/// carries the same code).
const FAMILIES: &[(&str, Code)] = &[
    ("VT03", Code::InvalidArgument),
    ("VT05", Code::NotFound),
    ("VT06", Code::AlreadyExists),
    ("VT07", Code::PermissionDenied),
    ("VT09", Code::FailedPrecondition),
    ("VT10", Code::Aborted),
    ("VT12", Code::Unimplemented),
    ("VT13", Code::Internal),
    ("VT14", Code::Unavailable),
];

/// gRPC status names (`code = Name desc = ...`) → code.
const STATUS: &[(&str, Code)] = &[
    ("Canceled", Code::Canceled),
    ("Unknown", Code::Unknown),
    ("InvalidArgument", Code::InvalidArgument),
    ("DeadlineExceeded", Code::DeadlineExceeded),
    ("NotFound", Code::NotFound),
    ("AlreadyExists", Code::AlreadyExists),
    ("PermissionDenied", Code::PermissionDenied),
    ("ResourceExhausted", Code::ResourceExhausted),
    ("FailedPrecondition", Code::FailedPrecondition),
    ("Aborted", Code::Aborted),
    ("OutOfRange", Code::OutOfRange),
    ("Unimplemented", Code::Unimplemented),
    ("Internal", Code::Internal),
    ("Unavailable", Code::Unavailable),
    ("DataLoss", Code::DataLoss),
    ("Unauthenticated", Code::Unauthenticated),
];

/// vtgate's own messages that carry neither form (its parser's, its planner's): how
/// they start and end. Not `table X not found` with errno 1105: that is vtgate's
/// `vindexes.NotFoundError`, a plain Go error with no code, which vtgate's own gRPC
/// Execute answers as UNKNOWN (the planner's coded form, NOT_FOUND, arrives as
/// errno 1109 ER_UNKNOWN_TABLE and takes MySQL's table).
const MESSAGES: &[(&str, &str, Code)] = &[("syntax error at position", "", Code::InvalidArgument)];

/// How vtgate quotes a tablet's gRPC status, whatever errno it chose for it (1317
/// for vttablet's `Row count exceeded`, whose code is `Aborted`).
const TABLET_STATUS: &str = "vttablet: rpc error: code = ";

/// The code of a vtgate error from its message, when it names one: any form for
/// errno 1105; for any other errno, a tablet's gRPC status, or vtgate's own error id
/// when the message starts with one (vtgate sends the errno of the id's state:
/// `VT05003: unknown database` as 1049 ER_BAD_DB_ERROR, whose code in MySQL's table
/// is not vtgate's).
pub fn code(errno: u16, message: &str) -> Option<Code> {
    if errno != 1105 {
        return match message.split(TABLET_STATUS).nth(1) {
            Some(rest) => status(rest),
            None => error_id(message.split_whitespace().next()?)
                .and_then(family)
                .or_else(|| planner_column(errno, message)),
        };
    }
    if let Some(code) = message
        .split_whitespace()
        .find_map(error_id)
        .and_then(family)
    {
        return Some(code);
    }
    if let Some(code) = message.split("code = ").nth(1).and_then(status) {
        return Some(code);
    }
    MESSAGES
        .iter()
        .find(|(starts, ends, _)| message.starts_with(starts) && message.ends_with(ends))
        .map(|(_, _, code)| *code)
}

/// vtgate's planner's unknown column (`semantics.ColumnNotFoundError`: INVALID_ARGUMENT,
/// sent as 1054 ER_BAD_FIELD_ERROR without an id): `column 'c' not found` or `column 'c'
/// not found in table 't'`. MySQL's own (from a tablet) says `Unknown column`.
fn planner_column(errno: u16, message: &str) -> Option<Code> {
    (errno == 1054 && message.starts_with("column '") && message.contains("' not found"))
        .then_some(Code::InvalidArgument)
}

/// The family (`VT05`) of a word that is a vtgate error id (`VT05003:`).
fn error_id(word: &str) -> Option<&str> {
    let id = word.trim_end_matches(':');
    let is_id =
        id.len() == 7 && id.starts_with("VT") && id.bytes().skip(2).all(|b| b.is_ascii_digit());
    is_id.then(|| id.get(..4)).flatten()
}

/// The code of an error id family.
fn family(prefix: &str) -> Option<Code> {
    FAMILIES
        .iter()
        .find(|(p, _)| *p == prefix)
        .map(|(_, code)| *code)
}

/// The code a gRPC status name starting `rest` names.
fn status(rest: &str) -> Option<Code> {
    let name = rest.split_whitespace().next()?;
    STATUS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, code)| *code)
}

/// The message without the statement and bind variables a tablet's error quotes
/// (each line of a scatter error: one per shard).
pub fn redacted(message: &str) -> String {
    message
        .lines()
        .map(|line| match line.find(" (CallerID: ") {
            Some(at) => line.get(..at).unwrap_or(line),
            None => match line.find(": Sql: \"") {
                Some(at) => line.get(..at).unwrap_or(line),
                None => line,
            },
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// As vtgate 24.0.4 sent them (scripts/vitess.sh, the mysql client).
    const DUPLICATE: &str = r#"target: ferry.-80.primary: vttablet: rpc error: code = AlreadyExists desc = Duplicate entry '1' for key 't1.PRIMARY' (errno 1062) (sqlstate 23000) (CallerID: ferry): Sql: "insert into t1(id, v) values (:_id_0, :vtg2 /* INT64 */)", BindVars: {_id_0: "type:INT64 value:\"1\""vtg2: "type:INT64 value:\"2\""}"#;
    const SCATTER: &str = "target: ferry.-80.primary: vttablet: rpc error: code = NotFound desc = Unknown column 'bogus' in 'where clause' (errno 1054) (sqlstate 42S22) (CallerID: ferry): Sql: \"select :vtg2 /* VARCHAR */ from t1\", BindVars: {vtg2: \"type:VARCHAR value:\\\"secret_value\\\"\"}\ntarget: ferry.80-.primary: vttablet: rpc error: code = NotFound desc = Unknown column 'bogus' in 'where clause' (errno 1054) (sqlstate 42S22) (CallerID: ferry): Sql: \"select :vtg2 /* VARCHAR */ from t1\", BindVars: {vtg2: \"type:VARCHAR value:\\\"secret_value\\\"\"}";

    #[test]
    fn codes_from_vtgate_messages() {
        assert_eq!(
            code(1105, "syntax error at position 6 near 'selec'"),
            Some(Code::InvalidArgument)
        );
        // vtgate's uncoded NotFoundError: UNKNOWN, as over vtgate's gRPC.
        assert_eq!(code(1105, "table no_such_table not found"), None);
        assert_eq!(
            code(1105, "VT05006: unknown system variable '@@foo = 1'"),
            Some(Code::NotFound)
        );
        assert_eq!(
            code(1105, "VT07001: kill statement execution not permitted."),
            Some(Code::PermissionDenied)
        );
        assert_eq!(
            code(
                1105,
                "target: x: vttablet: rpc error: code = ResourceExhausted desc = pool full"
            ),
            Some(Code::ResourceExhausted)
        );
        // Another errno: the tablet's status when it is quoted (vtgate 24.0.4 sends
        // vttablet's row limit as 1317), else MySQL's own table (errors/mysql.rs).
        assert_eq!(code(1062, DUPLICATE), Some(Code::AlreadyExists));
        assert_eq!(
            code(1317, "target: ferry.-80.primary: vttablet: rpc error: code = Aborted desc = Row count exceeded 10000 (errno 1317) (sqlstate 70100)"),
            Some(Code::Aborted)
        );
        assert_eq!(code(1062, "Duplicate entry '1' for key 'PRIMARY'"), None);
        // vtgate's own id with its state's errno (vtgate 24.0.4: 1049), only at the start.
        assert_eq!(
            code(1049, "VT05003: unknown database 'nope' in vschema"),
            Some(Code::NotFound)
        );
        assert_eq!(code(1062, "Duplicate entry 'VT05003:' for key 't.u'"), None);
        assert_eq!(
            code(1054, "column 't.id' not found"),
            Some(Code::InvalidArgument)
        );
        assert_eq!(code(1054, "Unknown column 'x' in 'field list'"), None);
        assert_eq!(code(1317, "code = Aborted"), None);
        // Other 1105s are unknown.
        assert_eq!(code(1105, "something else"), None);
        assert_eq!(code(1105, "table t was found"), None);
    }

    #[test]
    fn no_statement_or_bind_value_is_left() {
        let d = redacted(DUPLICATE);
        assert!(
            d.ends_with("for key 't1.PRIMARY' (errno 1062) (sqlstate 23000)"),
            "{d}"
        );
        let s = redacted(SCATTER);
        assert!(!s.contains("secret_value") && !s.contains("Sql:"), "{s}");
        assert_eq!(s.lines().count(), 2);
        assert_eq!(redacted("plain MySQL message"), "plain MySQL message");
    }
}
