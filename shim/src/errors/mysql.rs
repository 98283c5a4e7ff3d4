//! MySQL error numbers → vtrpc codes, by table.
//!
//! `SQL` follows vitess (`tabletserver.convertErrorCode`), so clients that
//! branch on `RPCError.code` behave as they do against PlanetScale: e.g. unknown
//! table/column is NOT_FOUND, syntax and bad values are INVALID_ARGUMENT,
//! constraint/FK/read-only failures are FAILED_PRECONDITION, a duplicate key is
//! ALREADY_EXISTS. Additions beyond vitess are marked. Anything else: UNKNOWN.
//!
//! `CONNECT` classifies errors MySQL reports while a connection is being
//! opened: they become Connect errors (HTTP 401/429/...), not SQL errors.
use ferry_proto::vitess::vtrpc::Code;

/// Sorted by errno (checked by a test) so lookups can binary-search.
const SQL: &[(u16, Code)] = &[
    (1007, Code::AlreadyExists),      // ER_DB_CREATE_EXISTS (added)
    (1021, Code::ResourceExhausted),  // ER_DISK_FULL
    (1022, Code::AlreadyExists),      // ER_DUP_KEY (added)
    (1029, Code::NotFound),           // ER_FORM_NOT_FOUND
    (1032, Code::NotFound),           // ER_KEY_NOT_FOUND
    (1037, Code::ResourceExhausted),  // ER_OUTOFMEMORY
    (1038, Code::ResourceExhausted),  // ER_OUT_OF_SORTMEMORY
    (1040, Code::ResourceExhausted),  // ER_CON_COUNT_ERROR
    (1041, Code::ResourceExhausted),  // ER_OUT_OF_RESOURCES
    (1044, Code::PermissionDenied),   // ER_DBACCESS_DENIED_ERROR
    (1045, Code::PermissionDenied),   // ER_ACCESS_DENIED_ERROR
    (1046, Code::FailedPrecondition), // ER_NO_DB_ERROR
    (1047, Code::InvalidArgument),    // ER_UNKNOWN_COM_ERROR
    (1048, Code::InvalidArgument),    // ER_BAD_NULL_ERROR
    (1049, Code::InvalidArgument),    // ER_BAD_DB_ERROR
    (1050, Code::AlreadyExists),      // ER_TABLE_EXISTS_ERROR
    (1051, Code::InvalidArgument),    // ER_BAD_TABLE_ERROR
    (1052, Code::InvalidArgument),    // ER_NON_UNIQ_ERROR
    (1053, Code::Unavailable),        // ER_SERVER_SHUTDOWN
    (1054, Code::NotFound),           // ER_BAD_FIELD_ERROR
    (1055, Code::InvalidArgument),    // ER_WRONG_FIELD_WITH_GROUP
    (1056, Code::InvalidArgument),    // ER_WRONG_GROUP_FIELD
    (1057, Code::InvalidArgument),    // ER_WRONG_SUM_SELECT
    (1058, Code::InvalidArgument),    // ER_WRONG_VALUE_COUNT
    (1059, Code::InvalidArgument),    // ER_TOO_LONG_IDENT
    (1060, Code::InvalidArgument),    // ER_DUP_FIELDNAME
    (1061, Code::InvalidArgument),    // ER_DUP_KEYNAME
    (1062, Code::AlreadyExists),      // ER_DUP_ENTRY
    (1063, Code::InvalidArgument),    // ER_WRONG_FIELD_SPEC
    (1064, Code::InvalidArgument),    // ER_PARSE_ERROR
    (1065, Code::InvalidArgument),    // ER_EMPTY_QUERY
    (1066, Code::InvalidArgument),    // ER_NONUNIQ_TABLE
    (1067, Code::InvalidArgument),    // ER_INVALID_DEFAULT
    (1068, Code::InvalidArgument),    // ER_MULTIPLE_PRI_KEY
    (1069, Code::InvalidArgument),    // ER_TOO_MANY_KEYS
    (1070, Code::InvalidArgument),    // ER_TOO_MANY_KEY_PARTS
    (1071, Code::InvalidArgument),    // ER_TOO_LONG_KEY
    (1072, Code::InvalidArgument),    // ER_KEY_COLUMN_DOES_NOT_EXITS
    (1073, Code::InvalidArgument),    // ER_BLOB_USED_AS_KEY
    (1074, Code::InvalidArgument),    // ER_TOO_BIG_FIELDLENGTH
    (1075, Code::InvalidArgument),    // ER_WRONG_AUTO_KEY
    (1078, Code::Aborted),            // ER_GOT_SIGNAL
    (1080, Code::Aborted),            // ER_FORCING_CLOSE
    (1082, Code::FailedPrecondition), // ER_NO_SUCH_INDEX
    (1083, Code::InvalidArgument),    // ER_WRONG_FIELD_TERMINATORS
    (1084, Code::InvalidArgument),    // ER_BLOBS_AND_NO_TERMINATED
    (1085, Code::InvalidArgument),    // ER_TEXTFILE_NOT_READABLE
    (1086, Code::AlreadyExists),      // ER_FILE_EXISTS_ERROR
    (1089, Code::InvalidArgument),    // ER_WRONG_SUB_KEY
    (1090, Code::InvalidArgument),    // ER_CANT_REMOVE_ALL_FIELDS
    (1091, Code::FailedPrecondition), // ER_CANT_DROP_FIELD_OR_KEY
    (1093, Code::InvalidArgument),    // ER_UPDATE_TABLE_USED
    (1094, Code::NotFound),           // ER_NO_SUCH_THREAD
    (1095, Code::PermissionDenied),   // ER_KILL_DENIED_ERROR
    (1096, Code::InvalidArgument),    // ER_NO_TABLES_USED
    (1097, Code::InvalidArgument),    // ER_TOO_BIG_SET
    (1099, Code::FailedPrecondition), // ER_TABLE_NOT_LOCKED_FOR_WRITE
    (1100, Code::FailedPrecondition), // ER_TABLE_NOT_LOCKED
    (1101, Code::InvalidArgument),    // ER_BLOB_CANT_HAVE_DEFAULT
    (1102, Code::InvalidArgument),    // ER_WRONG_DB_NAME
    (1103, Code::InvalidArgument),    // ER_WRONG_TABLE_NAME
    (1104, Code::FailedPrecondition), // ER_TOO_BIG_SELECT
    (1106, Code::InvalidArgument),    // ER_UNKNOWN_PROCEDURE
    (1107, Code::InvalidArgument),    // ER_WRONG_PARAMCOUNT_TO_PROCEDURE
    (1108, Code::InvalidArgument),    // ER_WRONG_PARAMETERS_TO_PROCEDURE
    (1109, Code::NotFound),           // ER_UNKNOWN_TABLE
    (1110, Code::InvalidArgument),    // ER_FIELD_SPECIFIED_TWICE
    (1111, Code::InvalidArgument),    // ER_INVALID_GROUP_FUNC_USE
    (1113, Code::InvalidArgument),    // ER_TABLE_MUST_HAVE_COLUMNS
    (1114, Code::ResourceExhausted),  // ER_RECORD_FILE_FULL
    (1115, Code::InvalidArgument),    // ER_UNKNOWN_CHARACTER_SET
    (1116, Code::InvalidArgument),    // ER_TOO_MANY_TABLES
    (1117, Code::InvalidArgument),    // ER_TOO_MANY_FIELDS
    (1118, Code::InvalidArgument),    // ER_TOO_BIG_ROWSIZE
    (1120, Code::InvalidArgument),    // ER_WRONG_OUTER_JOIN
    (1121, Code::InvalidArgument),    // ER_NULL_COLUMN_IN_INDEX
    (1122, Code::NotFound),           // ER_CANT_FIND_UDF
    (1125, Code::AlreadyExists),      // ER_UDF_EXISTS
    (1128, Code::InvalidArgument),    // ER_FUNCTION_NOT_DEFINED
    (1129, Code::ResourceExhausted),  // ER_HOST_IS_BLOCKED
    (1135, Code::ResourceExhausted),  // ER_CANT_CREATE_THREAD
    (1136, Code::InvalidArgument),    // ER_WRONG_VALUE_COUNT_ON_ROW
    (1138, Code::InvalidArgument),    // ER_INVALID_USE_OF_NULL
    (1139, Code::InvalidArgument),    // ER_REGEXP_ERROR
    (1140, Code::InvalidArgument),    // ER_MIX_OF_GROUP_FUNC_AND_FIELDS
    (1141, Code::NotFound),           // ER_NONEXISTING_GRANT
    (1142, Code::PermissionDenied),   // ER_TABLEACCESS_DENIED_ERROR (added)
    (1143, Code::PermissionDenied),   // ER_COLUMNACCESS_DENIED_ERROR (added)
    (1144, Code::InvalidArgument),    // ER_ILLEGAL_GRANT_FOR_TABLE
    (1146, Code::NotFound),           // ER_NO_SUCH_TABLE
    (1147, Code::NotFound),           // ER_NONEXISTING_TABLE_GRANT
    (1148, Code::FailedPrecondition), // ER_NOT_ALLOWED_COMMAND
    (1149, Code::InvalidArgument),    // ER_SYNTAX_ERROR
    (1151, Code::ResourceExhausted),  // ER_TOO_MANY_DELAYED_THREADS
    (1152, Code::Aborted),            // ER_ABORTING_CONNECTION
    (1153, Code::ResourceExhausted),  // ER_NET_PACKET_TOO_LARGE
    (1162, Code::FailedPrecondition), // ER_TOO_LONG_STRING
    (1165, Code::FailedPrecondition), // ER_DELAYED_INSERT_TABLE_LOCKED
    (1166, Code::InvalidArgument),    // ER_WRONG_COLUMN_NAME
    (1167, Code::InvalidArgument),    // ER_WRONG_KEY_COLUMN
    (1169, Code::FailedPrecondition), // ER_DUP_UNIQUE
    (1170, Code::InvalidArgument),    // ER_BLOB_KEY_WITHOUT_LENGTH
    (1171, Code::InvalidArgument),    // ER_PRIMARY_CANT_HAVE_NULL
    (1172, Code::InvalidArgument),    // ER_TOO_MANY_ROWS
    (1173, Code::FailedPrecondition), // ER_REQUIRES_PRIMARY_KEY
    (1176, Code::NotFound),           // ER_KEY_DOES_NOT_EXITS
    (1179, Code::FailedPrecondition), // ER_CANT_DO_THIS_DURING_AN_TRANSACTION
    (1193, Code::InvalidArgument),    // ER_UNKNOWN_SYSTEM_VARIABLE
    (1203, Code::ResourceExhausted),  // ER_TOO_MANY_USER_CONNECTIONS
    (1204, Code::InvalidArgument),    // ER_SET_CONSTANTS_ONLY
    (1205, Code::DeadlineExceeded),   // ER_LOCK_WAIT_TIMEOUT
    (1206, Code::ResourceExhausted),  // ER_LOCK_TABLE_FULL
    (1207, Code::FailedPrecondition), // ER_READ_ONLY_TRANSACTION
    (1210, Code::InvalidArgument),    // ER_WRONG_ARGUMENTS
    (1211, Code::PermissionDenied),   // ER_NO_PERMISSION_TO_CREATE_USER
    (1213, Code::Aborted),            // ER_LOCK_DEADLOCK (the transaction was rolled back)
    (1215, Code::FailedPrecondition), // ER_CANNOT_ADD_FOREIGN
    (1216, Code::FailedPrecondition), // ER_NO_REFERENCED_ROW
    (1217, Code::FailedPrecondition), // ER_ROW_IS_REFERENCED
    (1221, Code::InvalidArgument),    // ER_WRONG_USAGE
    (1222, Code::InvalidArgument),    // ER_WRONG_NUMBER_OF_COLUMNS_IN_SELECT
    (1223, Code::FailedPrecondition), // ER_CANT_UPDATE_WITH_READLOCK
    (1225, Code::InvalidArgument),    // ER_DUP_ARGUMENT
    (1226, Code::ResourceExhausted),  // ER_USER_LIMIT_REACHED
    (1227, Code::PermissionDenied),   // ER_SPECIFIC_ACCESS_DENIED_ERROR
    (1228, Code::InvalidArgument),    // ER_LOCAL_VARIABLE
    (1229, Code::InvalidArgument),    // ER_GLOBAL_VARIABLE
    (1230, Code::FailedPrecondition), // ER_NO_DEFAULT
    (1231, Code::InvalidArgument),    // ER_WRONG_VALUE_FOR_VAR
    (1232, Code::InvalidArgument),    // ER_WRONG_TYPE_FOR_VAR
    (1233, Code::InvalidArgument),    // ER_VAR_CANT_BE_READ
    (1234, Code::InvalidArgument),    // ER_CANT_USE_OPTION_HERE
    (1235, Code::Unimplemented),      // ER_NOT_SUPPORTED_YET
    (1238, Code::InvalidArgument),    // ER_INCORRECT_GLOBAL_LOCAL_VAR
    (1239, Code::InvalidArgument),    // ER_WRONG_FK_DEF
    (1240, Code::InvalidArgument),    // ER_KEY_REF_DO_NOT_MATCH_TABLE_REF
    (1241, Code::FailedPrecondition), // ER_OPERAND_COLUMNS
    (1242, Code::FailedPrecondition), // ER_SUBQUERY_NO_1_ROW
    (1245, Code::InvalidArgument),    // ER_CYCLIC_REFERENCE
    (1247, Code::InvalidArgument),    // ER_ILLEGAL_REFERENCE
    (1248, Code::InvalidArgument),    // ER_DERIVED_MUST_HAVE_ALIAS
    (1250, Code::InvalidArgument),    // ER_TABLENAME_NOT_ALLOWED_HERE
    (1253, Code::InvalidArgument),    // ER_COLLATION_CHARSET_MISMATCH
    (1264, Code::FailedPrecondition), // ER_WARN_DATA_OUT_OF_RANGE
    (1267, Code::InvalidArgument),    // ER_CANT_AGGREGATE_2COLLATIONS
    (1270, Code::InvalidArgument),    // ER_CANT_AGGREGATE_3COLLATIONS
    (1271, Code::InvalidArgument),    // ER_CANT_AGGREGATE_NCOLLATIONS
    (1272, Code::InvalidArgument),    // ER_VARIABLE_IS_NOT_STRUCT
    (1273, Code::InvalidArgument),    // ER_UNKNOWN_COLLATION
    (1280, Code::InvalidArgument),    // ER_WRONG_NAME_FOR_INDEX
    (1281, Code::InvalidArgument),    // ER_WRONG_NAME_FOR_CATALOG
    (1283, Code::InvalidArgument),    // ER_BAD_FT_COLUMN
    (1288, Code::FailedPrecondition), // ER_NON_UPDATABLE_TABLE
    (1289, Code::FailedPrecondition), // ER_FEATURE_DISABLED
    // ER_OPTION_PREVENTS_STATEMENT: almost always --read-only after a failover
    // (vitess checks the message for "read-only"; the other causes are rare).
    (1290, Code::FailedPrecondition),
    (1291, Code::FailedPrecondition), // ER_DUPLICATED_VALUE_IN_TYPE
    (1292, Code::InvalidArgument),    // ER_TRUNCATED_WRONG_VALUE
    (1293, Code::InvalidArgument),    // ER_TOO_MUCH_AUTO_TIMESTAMP_COLS
    (1294, Code::InvalidArgument),    // ER_INVALID_ON_UPDATE
    (1298, Code::InvalidArgument),    // ER_UNKNOWN_TIME_ZONE
    (1300, Code::InvalidArgument),    // ER_INVALID_CHARACTER_STRING
    (1366, Code::InvalidArgument),    // ER_TRUNCATED_WRONG_VALUE_FOR_FIELD
    (1370, Code::PermissionDenied),   // ER_PROCACCESS_DENIED_ERROR (added)
    (1406, Code::InvalidArgument),    // ER_DATA_TOO_LONG
    (1451, Code::FailedPrecondition), // ER_ROW_IS_REFERENCED_2
    (1452, Code::FailedPrecondition), // ER_NO_REFERENCED_ROW_2
    (1586, Code::AlreadyExists),      // ER_DUP_ENTRY_WITH_KEY_NAME (added)
    (1690, Code::InvalidArgument),    // ER_DATA_OUT_OF_RANGE
    (1792, Code::FailedPrecondition), // ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION (added)
    (1836, Code::FailedPrecondition), // ER_READ_ONLY_MODE (added)
    (1874, Code::FailedPrecondition), // ER_INNODB_READ_ONLY (added)
    (1969, Code::DeadlineExceeded),   // MariaDB ER_STATEMENT_TIMEOUT, max_statement_time (added)
    (2006, Code::Unavailable),        // CR_SERVER_GONE_ERROR
    (2013, Code::Unavailable),        // CR_SERVER_LOST (vitess: CANCELED, a killed query)
    (3024, Code::DeadlineExceeded),   // MySQL ER_QUERY_TIMEOUT, max_execution_time (added)
    (3819, Code::InvalidArgument),    // MySQL ER_CHECK_CONSTRAINT_VIOLATED (added)
    (4025, Code::InvalidArgument),    // MariaDB ER_CONSTRAINT_FAILED (added)
];

/// Errors while opening a connection, as Connect codes. Absent: UNAVAILABLE
/// (MySQL is there but cannot serve us now).
const CONNECT: &[(u16, Code)] = &[
    (1040, Code::ResourceExhausted), // ER_CON_COUNT_ERROR: too many connections
    (1044, Code::Unauthenticated),   // ER_DBACCESS_DENIED_ERROR: no access to the database
    (1045, Code::Unauthenticated),   // ER_ACCESS_DENIED_ERROR: wrong user or password
    (1049, Code::Internal),          // ER_BAD_DB_ERROR: FERRY_MYSQL_DATABASE does not exist
    (1129, Code::ResourceExhausted), // ER_HOST_IS_BLOCKED
    (1130, Code::Unauthenticated),   // ER_HOST_NOT_PRIVILEGED: user not allowed from this host
    (1203, Code::ResourceExhausted), // ER_TOO_MANY_USER_CONNECTIONS
    (1226, Code::ResourceExhausted), // ER_USER_LIMIT_REACHED
    (1251, Code::Unauthenticated),   // ER_NOT_SUPPORTED_AUTH_MODE
    (1698, Code::Unauthenticated),   // ER_ACCESS_DENIED_NO_PASSWORD_ERROR
    (1820, Code::Unauthenticated),   // ER_MUST_CHANGE_PASSWORD
    (1862, Code::Unauthenticated),   // ER_MUST_CHANGE_PASSWORD_LOGIN (password expired)
    (3118, Code::Unauthenticated),   // MySQL ER_ACCOUNT_HAS_BEEN_LOCKED
    (4151, Code::Unauthenticated),   // MariaDB ER_ACCOUNT_HAS_BEEN_LOCKED
];

fn lookup(table: &[(u16, Code)], errno: u16) -> Option<Code> {
    table
        .binary_search_by_key(&errno, |(n, _)| *n)
        .ok()
        .map(|i| table[i].1)
}

/// The vtrpc code of a MySQL error returned by a statement.
pub fn sql_code(errno: u16) -> Code {
    lookup(SQL, errno).unwrap_or(Code::Unknown)
}

/// The Connect code of a MySQL error returned while connecting.
pub fn connect_code(errno: u16) -> Code {
    lookup(CONNECT, errno).unwrap_or(Code::Unavailable)
}

/// The message vitess gives a MySQL error, which clients show as is.
pub fn sql_message(message: &str, errno: u16, sqlstate: &str) -> String {
    let suffix = format!("(errno {errno}) (sqlstate {sqlstate})");
    // vtgate passes a tablet's error on already worded so.
    if message.ends_with(&suffix) {
        return message.to_owned();
    }
    format!("{message} {suffix}")
}

/// A MySQL error the shim reports itself, named as vitess's `sqlerror` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SqlError {
    pub errno: u16,
    pub sqlstate: &'static str,
}

/// Arguments that do not fit the statement (bind variables, placeholders).
pub const ER_WRONG_ARGUMENTS: SqlError = SqlError {
    errno: 1210,
    sqlstate: "HY000",
};
/// A value a variable cannot take (`SET workload = ...`).
pub const ER_WRONG_VALUE_FOR_VAR: SqlError = SqlError {
    errno: 1231,
    sqlstate: "42000",
};

impl SqlError {
    /// `message` worded as vitess words this error ([`sql_message`]).
    pub fn message(self, message: &str) -> String {
        sql_message(message, self.errno, self.sqlstate)
    }
}

/// The message of a MySQL connection that broke while the shim used it.
pub fn lost_connection(e: &impl std::fmt::Display) -> String {
    format!(
        "lost the MySQL connection: {}",
        without_repeats(&e.to_string())
    )
}

/// The message of a statement whose MySQL connection broke under it, once it was sent:
/// the database may have applied it or not, and nobody can tell the client which.
pub fn lost_connection_during_statement(e: &impl std::fmt::Display) -> String {
    format!(
        "lost the MySQL connection during the statement, which may or may not have been applied: {}",
        without_repeats(&e.to_string())
    )
}

/// An error's text with a prefix its source repeats said once: mysql_async words an I/O
/// failure "Input/output error: Input/output error: connection closed".
fn without_repeats(text: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in text.split(": ") {
        if parts.last() != Some(&part) {
            parts.push(part);
        }
    }
    parts.join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shims_own_errors_map_as_mysqls() {
        for e in [ER_WRONG_ARGUMENTS, ER_WRONG_VALUE_FOR_VAR] {
            assert_eq!(sql_code(e.errno), Code::InvalidArgument);
        }
        assert_eq!(
            ER_WRONG_ARGUMENTS.message("bad"),
            "bad (errno 1210) (sqlstate HY000)"
        );
    }

    #[test]
    fn a_lost_connection_says_each_cause_once() {
        assert_eq!(
            lost_connection(&"Input/output error: Input/output error: connection closed"),
            "lost the MySQL connection: Input/output error: connection closed"
        );
        assert_eq!(
            lost_connection_during_statement(&"it is gone"),
            "lost the MySQL connection during the statement, which may or may not have been applied: it is gone"
        );
        // Only a part repeated next to itself goes.
        assert_eq!(
            lost_connection(&"a: b: a"),
            "lost the MySQL connection: a: b: a"
        );
    }

    #[test]
    fn tables_are_sorted_without_duplicates() {
        for table in [SQL, CONNECT] {
            assert!(
                table.windows(2).all(|w| w[0].0 < w[1].0),
                "sort the table by errno"
            );
        }
    }

    #[test]
    fn common_sql_errors() {
        assert_eq!(sql_code(1062), Code::AlreadyExists);
        assert_eq!(sql_code(1064), Code::InvalidArgument);
        assert_eq!(sql_code(1146), Code::NotFound);
        assert_eq!(sql_code(1054), Code::NotFound);
        assert_eq!(sql_code(1205), Code::DeadlineExceeded);
        assert_eq!(sql_code(1213), Code::Aborted);
        assert_eq!(sql_code(1142), Code::PermissionDenied);
        assert_eq!(sql_code(1227), Code::PermissionDenied);
        assert_eq!(sql_code(1290), Code::FailedPrecondition);
        assert_eq!(sql_code(1836), Code::FailedPrecondition);
        assert_eq!(sql_code(3024), Code::DeadlineExceeded);
        assert_eq!(sql_code(1969), Code::DeadlineExceeded);
        assert_eq!(sql_code(2006), Code::Unavailable);
        assert_eq!(sql_code(2013), Code::Unavailable);
        assert_eq!(sql_code(1644), Code::Unknown, "SIGNAL and unknown errnos");
    }

    #[test]
    fn connect_errors() {
        for errno in [1044, 1045, 1698, 1130] {
            assert_eq!(connect_code(errno), Code::Unauthenticated, "{errno}");
        }
        assert_eq!(connect_code(1040), Code::ResourceExhausted);
        assert_eq!(connect_code(1053), Code::Unavailable);
    }

    #[test]
    fn message_reads_like_vitess() {
        assert_eq!(
            sql_message("Table 'ferry.nope' doesn't exist", 1146, "42S02"),
            "Table 'ferry.nope' doesn't exist (errno 1146) (sqlstate 42S02)"
        );
    }
}
