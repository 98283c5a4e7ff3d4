//! Which queries are safe to replay: what the gateway may run when it arrives in TLS
//! early data (HTTP/3 0-RTT), which an attacker can capture and send again.
//!
//! Conservative by construction: `true` only for exactly one read statement (`SELECT`,
//! `SHOW`, `DESCRIBE`/`DESC`, `EXPLAIN` without `ANALYZE`, `WITH ... SELECT`) with
//!
//! - no locking clause (`FOR UPDATE`, `FOR SHARE`, `LOCK IN SHARE MODE`),
//! - no `INTO` (`OUTFILE`, `DUMPFILE`, variables), no `SET`, no user variables at all
//!   (neither `@v := ...` nor reads of `@v`: that is session state),
//! - no executable comment (`/*! ... */`, `/*M! ... */`),
//! - and no call of anything but a built-in function known to have no effect (an
//!   allow-list: `GET_LOCK`, `SLEEP`, `BENCHMARK`, `NEXTVAL`, `LOAD_FILE`,
//!   `LAST_INSERT_ID(expr)`, `NEXT VALUE FOR`, any stored or loadable function... are
//!   not on it).
//!
//! The text is lexed twice, once with backslash escapes in strings (MySQL's default)
//! and once without (`NO_BACKSLASH_ESCAPES`), and both readings must be safe: a string
//! cannot hide a second statement from one of them. Anything the scan does not
//! recognise is not safe; the price of a false "not safe" is one retry after the
//! handshake, the price of a false "safe" is a replayed write.

use crate::lexer::{eq, Lexer, Tok};

/// Whether `sql` may be executed more than once without harm (see the module doc).
pub fn replay_safe(sql: &str) -> bool {
    [true, false]
        .into_iter()
        .all(|escapes| safe_reading(Lexer::with_backslash_escapes(sql, escapes)))
}

/// Statements that only read.
const READS: &[&str] = &["SELECT", "SHOW", "DESCRIBE", "DESC", "EXPLAIN", "WITH"];

/// Words that make any statement unsafe (all reserved words, so never a bare name):
/// locking reads, `INTO`, writes after `WITH`, `EXPLAIN ANALYZE` (it runs the query),
/// `SELECT ... PROCEDURE ANALYSE()`, and anything that sets state.
const DENIED_WORDS: &[&str] = &[
    "INTO",
    "UPDATE",
    "DELETE",
    "LOCK",
    "ANALYZE",
    "PROCEDURE",
    "CALL",
    "HANDLER",
];

/// Words that may stand before `(` without being a function call.
const KEYWORDS_BEFORE_PAREN: &[&str] = &[
    "SELECT",
    "FROM",
    "JOIN",
    "STRAIGHT_JOIN",
    "ON",
    "USING",
    "WHERE",
    "AND",
    "OR",
    "NOT",
    "XOR",
    "IN",
    "EXISTS",
    "ALL",
    "ANY",
    "SOME",
    "AS",
    "OVER",
    "BY",
    "CASE",
    "WHEN",
    "THEN",
    "ELSE",
    "UNION",
    "INTERSECT",
    "EXCEPT",
    "HAVING",
    "IS",
    "LIKE",
    "RLIKE",
    "REGEXP",
    "SOUNDS",
    "ESCAPE",
    "BETWEEN",
    "DISTINCT",
    "DISTINCTROW",
    "INTERVAL",
    "ROW",
    "LATERAL",
    "LIMIT",
    "OFFSET",
    "INDEX",
    "KEY",
    "PARTITION",
    "AGAINST",
    "COLUMNS",
    "OF",
    "DIV",
    "BINARY",
    "VALUES",
    "WITH",
    "RECURSIVE",
    "EXPLAIN",
    "DESCRIBE",
    "DESC",
    // Types after `AS` in CAST/CONVERT/JSON_TABLE columns.
    "CHAR",
    "NCHAR",
    "VARCHAR",
    "DECIMAL",
    "DEC",
    "NUMERIC",
    "FLOAT",
    "DOUBLE",
    "REAL",
    "DATETIME",
];

/// Built-in functions without an effect: they read their arguments, the clock, the
/// session's identity or the server's version, and change nothing. (`RAND` and `UUID`
/// differ per call, which a replay does not make harmful.)
const PURE_FUNCTIONS: &[&str] = &[
    // aggregates and windows
    "COUNT",
    "SUM",
    "AVG",
    "MIN",
    "MAX",
    "GROUP_CONCAT",
    "JSON_ARRAYAGG",
    "JSON_OBJECTAGG",
    "STD",
    "STDDEV",
    "STDDEV_POP",
    "STDDEV_SAMP",
    "VARIANCE",
    "VAR_POP",
    "VAR_SAMP",
    "BIT_AND",
    "BIT_OR",
    "BIT_XOR",
    "ANY_VALUE",
    "GROUPING",
    "ROW_NUMBER",
    "RANK",
    "DENSE_RANK",
    "PERCENT_RANK",
    "CUME_DIST",
    "NTILE",
    "LAG",
    "LEAD",
    "FIRST_VALUE",
    "LAST_VALUE",
    "NTH_VALUE",
    // control flow and comparison
    "IF",
    "IFNULL",
    "NULLIF",
    "COALESCE",
    "ISNULL",
    "NVL",
    "NVL2",
    "GREATEST",
    "LEAST",
    "INTERVAL",
    "CAST",
    "CONVERT",
    "DEFAULT",
    // strings
    "CONCAT",
    "CONCAT_WS",
    "SUBSTRING",
    "SUBSTR",
    "MID",
    "SUBSTRING_INDEX",
    "LEFT",
    "RIGHT",
    "LENGTH",
    "LENGTHB",
    "OCTET_LENGTH",
    "BIT_LENGTH",
    "CHAR_LENGTH",
    "CHARACTER_LENGTH",
    "LOWER",
    "UPPER",
    "LCASE",
    "UCASE",
    "TRIM",
    "LTRIM",
    "RTRIM",
    "REPLACE",
    "INSERT",
    "LOCATE",
    "INSTR",
    "POSITION",
    "LPAD",
    "RPAD",
    "REPEAT",
    "REVERSE",
    "SPACE",
    "FORMAT",
    "HEX",
    "UNHEX",
    "ASCII",
    "ORD",
    "CHAR",
    "CHR",
    "BIN",
    "OCT",
    "CONV",
    "FIELD",
    "FIND_IN_SET",
    "ELT",
    "MAKE_SET",
    "EXPORT_SET",
    "QUOTE",
    "SOUNDEX",
    "STRCMP",
    "REGEXP_LIKE",
    "REGEXP_REPLACE",
    "REGEXP_INSTR",
    "REGEXP_SUBSTR",
    "WEIGHT_STRING",
    "CHARSET",
    "COLLATION",
    "COERCIBILITY",
    "TO_BASE64",
    "FROM_BASE64",
    "MATCH",
    // numbers
    "ABS",
    "CEIL",
    "CEILING",
    "FLOOR",
    "ROUND",
    "TRUNCATE",
    "MOD",
    "POW",
    "POWER",
    "SQRT",
    "EXP",
    "LN",
    "LOG",
    "LOG2",
    "LOG10",
    "SIGN",
    "PI",
    "SIN",
    "COS",
    "TAN",
    "COT",
    "ASIN",
    "ACOS",
    "ATAN",
    "ATAN2",
    "DEGREES",
    "RADIANS",
    "RAND",
    "BIT_COUNT",
    "CRC32",
    "MD5",
    "SHA",
    "SHA1",
    "SHA2",
    // dates and times
    "NOW",
    "CURDATE",
    "CURTIME",
    "CURRENT_DATE",
    "CURRENT_TIME",
    "CURRENT_TIMESTAMP",
    "UTC_DATE",
    "UTC_TIME",
    "UTC_TIMESTAMP",
    "SYSDATE",
    "LOCALTIME",
    "LOCALTIMESTAMP",
    "UNIX_TIMESTAMP",
    "FROM_UNIXTIME",
    "DATE",
    "TIME",
    "TIMESTAMP",
    "YEAR",
    "MONTH",
    "DAY",
    "DAYOFMONTH",
    "DAYOFWEEK",
    "DAYOFYEAR",
    "DAYNAME",
    "MONTHNAME",
    "HOUR",
    "MINUTE",
    "SECOND",
    "MICROSECOND",
    "WEEK",
    "WEEKDAY",
    "WEEKOFYEAR",
    "YEARWEEK",
    "QUARTER",
    "DATE_ADD",
    "DATE_SUB",
    "ADDDATE",
    "SUBDATE",
    "ADDTIME",
    "SUBTIME",
    "DATEDIFF",
    "TIMEDIFF",
    "TIMESTAMPDIFF",
    "TIMESTAMPADD",
    "DATE_FORMAT",
    "TIME_FORMAT",
    "STR_TO_DATE",
    "EXTRACT",
    "LAST_DAY",
    "MAKEDATE",
    "MAKETIME",
    "PERIOD_ADD",
    "PERIOD_DIFF",
    "TO_DAYS",
    "FROM_DAYS",
    "TO_SECONDS",
    "SEC_TO_TIME",
    "TIME_TO_SEC",
    "CONVERT_TZ",
    "GET_FORMAT",
    // JSON (the modifying ones return a new document; they write nothing)
    "JSON_ARRAY",
    "JSON_OBJECT",
    "JSON_QUOTE",
    "JSON_UNQUOTE",
    "JSON_EXTRACT",
    "JSON_VALUE",
    "JSON_CONTAINS",
    "JSON_CONTAINS_PATH",
    "JSON_KEYS",
    "JSON_LENGTH",
    "JSON_DEPTH",
    "JSON_TYPE",
    "JSON_VALID",
    "JSON_SEARCH",
    "JSON_OVERLAPS",
    "JSON_PRETTY",
    "JSON_SET",
    "JSON_INSERT",
    "JSON_REPLACE",
    "JSON_REMOVE",
    "JSON_ARRAY_APPEND",
    "JSON_ARRAY_INSERT",
    "JSON_MERGE",
    "JSON_MERGE_PATCH",
    "JSON_MERGE_PRESERVE",
    "JSON_TABLE",
    // identity and information
    "DATABASE",
    "SCHEMA",
    "USER",
    "CURRENT_USER",
    "SESSION_USER",
    "SYSTEM_USER",
    "VERSION",
    "CONNECTION_ID",
    "FOUND_ROWS",
    "ROW_COUNT",
    "UUID",
    "UUID_SHORT",
    "INET_ATON",
    "INET_NTOA",
    "INET6_ATON",
    "INET6_NTOA",
    "IS_IPV4",
    "IS_IPV6",
];

/// `LAST_INSERT_ID()` reads; `LAST_INSERT_ID(expr)` sets the session's value.
const LAST_INSERT_ID: &str = "LAST_INSERT_ID";

fn is(tok: Option<&Tok<'_>>, keyword: &str) -> bool {
    matches!(tok, Some(Tok::Word(w)) if eq(w, keyword))
}

fn listed(list: &[&str], word: &str) -> bool {
    list.iter().any(|k| eq(word, k))
}

/// One reading of the text: exactly one safe statement (a trailing `;` allowed).
fn safe_reading(mut lexer: Lexer<'_>) -> bool {
    let mut toks = Vec::new();
    let mut ended = false;
    for tok in lexer.by_ref() {
        if ended {
            return false; // a second statement
        }
        if tok == Tok::Sym(b';') {
            ended = true;
        } else {
            toks.push(tok);
        }
    }
    !lexer.exec_comment && safe_statement(&toks)
}

fn safe_statement(toks: &[Tok<'_>]) -> bool {
    let Some(Tok::Word(lead)) = toks.iter().find(|t| **t != Tok::Sym(b'(')) else {
        return false;
    };
    if !listed(READS, lead) {
        return false;
    }
    let show = eq(lead, "SHOW");
    let with = eq(lead, "WITH");
    toks.iter().enumerate().all(|(i, tok)| {
        let prev = i.checked_sub(1).and_then(|p| toks.get(p));
        let next = toks.get(i + 1);
        match *tok {
            Tok::UserVar(_) => false,
            Tok::Sym(b':') => next != Some(&Tok::Sym(b'=')),
            // A quoted name called as a function: a stored function.
            Tok::Quoted => next != Some(&Tok::Sym(b'(')),
            Tok::Word(w) => {
                safe_word(w, prev, show)
                    && (next != Some(&Tok::Sym(b'(')) || safe_call(toks, i, w, prev, with))
            }
            Tok::SysVar(_) | Tok::Sym(_) => true,
        }
    })
}

/// A word on its own (not as a call).
fn safe_word(w: &str, prev: Option<&Tok<'_>>, show: bool) -> bool {
    if eq(w, "PROCEDURE") && show {
        return true; // SHOW PROCEDURE STATUS / CODE
    }
    if listed(DENIED_WORDS, w) {
        return false;
    }
    if eq(w, "SET") {
        // CHARACTER SET in CAST/CONVERT or SHOW CHARACTER SET; any other SET assigns.
        return is(prev, "CHARACTER");
    }
    if eq(w, "SHARE") {
        return !is(prev, "FOR");
    }
    if eq(w, "VALUE") {
        // NEXT VALUE FOR seq / PREVIOUS VALUE FOR seq (MariaDB sequences).
        return !is(prev, "NEXT") && !is(prev, "PREVIOUS");
    }
    true
}

/// A word followed by `(`: a built-in pure function, a keyword, or a name with a
/// column list; anything else may be a stored function, so it is not safe.
fn safe_call(toks: &[Tok<'_>], i: usize, w: &str, prev: Option<&Tok<'_>>, with: bool) -> bool {
    if prev == Some(&Tok::Sym(b'.')) {
        return false; // db.f(): a stored function
    }
    if eq(w, LAST_INSERT_ID) {
        return toks.get(i + 2) == Some(&Tok::Sym(b')'));
    }
    if listed(PURE_FUNCTIONS, w) || listed(KEYWORDS_BEFORE_PAREN, w) {
        return true;
    }
    // `... AS t(a, b)`: a derived table's column list, not a call.
    if is(prev, "AS") {
        return true;
    }
    // `WITH [RECURSIVE] cte (a, b) AS (...)`: a CTE's column list.
    with && cte_columns(toks, i + 1)
}

/// Whether the parenthesis at `open` closes and is followed by `AS (`.
fn cte_columns(toks: &[Tok<'_>], open: usize) -> bool {
    let mut depth = 0usize;
    for (j, tok) in toks.iter().enumerate().skip(open) {
        match tok {
            Tok::Sym(b'(') => depth += 1,
            Tok::Sym(b')') => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return is(toks.get(j + 1), "AS") && toks.get(j + 2) == Some(&Tok::Sym(b'('));
                }
            }
            _ => {}
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_reads_are_safe() {
        for sql in [
            "SELECT 1",
            "select 1;",
            "  SELECT 1 ;  -- done",
            "SELECT * FROM t WHERE id = 7",
            "SELECT a, b FROM t WHERE name = 'BEGIN; DELETE FROM t' ORDER BY a LIMIT 10",
            "/* hello */ SELECT `update`, `into` FROM `delete`",
            "SELECT COUNT(*), SUM(x), MAX(y) FROM t GROUP BY z HAVING COUNT(*) > 1",
            "SELECT CONCAT(a, '-', b), LOWER(c), REPLACE(d, 'x', 'y'), INSERT('abc', 1, 1, 'z') FROM t",
            "SELECT NOW(), CURRENT_TIMESTAMP, UUID(), RAND(), VERSION(), DATABASE(), CONNECTION_ID()",
            "SELECT LAST_INSERT_ID()",
            "SELECT last_insert_id ( )",
            "SELECT CAST(x AS DECIMAL(10, 2)), CONVERT(y USING utf8mb4), CAST(z AS CHAR CHARACTER SET utf8mb4)",
            "SELECT * FROM a JOIN b ON (a.id = b.id) LEFT JOIN c USING (id)",
            "SELECT * FROM t WHERE id IN (1, 2, 3) AND EXISTS (SELECT 1 FROM u WHERE u.t = t.id)",
            "SELECT * FROM t FORCE INDEX (idx) WHERE a BETWEEN 1 AND 2",
            "SELECT * FROM (SELECT 1 AS a) AS d (x)",
            "(SELECT 1) UNION ALL (SELECT 2)",
            "WITH x AS (SELECT 1 AS a) SELECT * FROM x",
            "WITH RECURSIVE cte (n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM cte WHERE n < 5) SELECT * FROM cte",
            "WITH a (x) AS (SELECT 1), b (y) AS (SELECT 2) SELECT * FROM a, b",
            "SELECT ROW_NUMBER() OVER (PARTITION BY a ORDER BY b) FROM t",
            "SELECT a, RANK() OVER w FROM t WINDOW w AS (ORDER BY a)",
            "SELECT MATCH (a, b) AGAINST ('x' IN BOOLEAN MODE) FROM t",
            "SELECT DATE_ADD(d, INTERVAL 1 DAY), EXTRACT(YEAR FROM d), SUBSTRING(s FROM 1 FOR 2) FROM t",
            "SELECT JSON_EXTRACT(doc, '$.a'), doc->>'$.b' FROM t",
            "SELECT * FROM JSON_TABLE('[1]', '$[*]' COLUMNS (id INT PATH '$', n FOR ORDINALITY, v VARCHAR(10) PATH '$')) AS j",
            "SELECT @@version, @@session.sql_mode",
            "SELECT 'it\\'s'",
            "SELECT 'a''b', \"c\"",
            "SELECT x'0a', _utf8mb4'abc', N'z'",
            "SHOW TABLES",
            "show columns from t like 'a%'",
            "SHOW CHARACTER SET",
            "SHOW PROCEDURE STATUS",
            "SHOW CREATE TABLE t",
            "DESCRIBE t",
            "DESC t",
            "EXPLAIN SELECT * FROM t",
            "EXPLAIN FORMAT=JSON SELECT 1",
            "SELECT 1 -- FOR UPDATE",
            "SELECT 1 # INTO OUTFILE\n",
            "SELECT /*+ MAX_EXECUTION_TIME(1000) */ 1",
            "SELECT IS_IPV4('1.2.3.4'), INET_ATON('1.2.3.4')",
            "SELECT * FROM t WHERE a IS NOT NULL AND b NOT IN (SELECT c FROM u)",
            "SELECT COALESCE(a, IFNULL(b, 0)), IF(c, 1, 2), GREATEST(1, 2) FROM t",
            "SELECT * FROM t LIMIT 10 OFFSET 5",
        ] {
            assert!(replay_safe(sql), "should be safe: {sql:?}");
        }
    }

    #[test]
    fn writes_and_state_are_not_safe() {
        for sql in [
            "",
            "   ",
            "-- only a comment",
            ";",
            "INSERT INTO t VALUES (1)",
            "UPDATE t SET a = 1",
            "DELETE FROM t",
            "REPLACE INTO t VALUES (1)",
            "CREATE TABLE t (a INT)",
            "DROP TABLE t",
            "TRUNCATE t",
            "BEGIN",
            "START TRANSACTION READ ONLY",
            "COMMIT",
            "ROLLBACK",
            "SET @x = 1",
            "SET NAMES utf8mb4",
            "CALL p()",
            "DO 1",
            "DO SLEEP(1)",
            "LOCK TABLES t READ",
            "USE other",
            "PREPARE s FROM 'SELECT 1'",
            "EXECUTE s",
            "HANDLER t READ FIRST",
            "TABLE t",
            "VALUES (1)",
            "ANALYZE TABLE t",
            "ANALYZE SELECT 1",
            "LOAD DATA INFILE 'x' INTO TABLE t",
            "KILL 1",
            "FLUSH TABLES",
            "SELECT 1; SELECT 2",
            "SELECT 1; DELETE FROM t",
            "SELECT 1;;",
            "SELECT ';'; DELETE FROM t",
        ] {
            assert!(!replay_safe(sql), "should not be safe: {sql:?}");
        }
    }

    #[test]
    fn locking_into_and_variables_are_not_safe() {
        for sql in [
            "SELECT * FROM t FOR UPDATE",
            "SELECT * FROM t WHERE id = 1 FOR UPDATE SKIP LOCKED",
            "SELECT * FROM t FOR UPDATE NOWAIT",
            "SELECT * FROM t FOR SHARE",
            "select * from t for share of t",
            "SELECT * FROM t LOCK IN SHARE MODE",
            "SELECT * FROM t INTO OUTFILE '/tmp/x'",
            "SELECT * FROM t INTO DUMPFILE '/tmp/x'",
            "SELECT a INTO @a FROM t",
            "SELECT a FROM t INTO @a",
            "SELECT @a := 1",
            "SELECT @a",
            "SELECT a FROM t WHERE b = @b",
            "SELECT @@x := 1",
            "SELECT 1 FROM t WHERE (@r := @r + 1)",
            "WITH x AS (SELECT 1) UPDATE t SET a = 1",
            "WITH x AS (SELECT 1) DELETE FROM t",
            "EXPLAIN ANALYZE SELECT * FROM t",
            "DESC ANALYZE SELECT 1",
            "EXPLAIN UPDATE t SET a = 1",
            "EXPLAIN DELETE FROM t",
            "SELECT a FROM t PROCEDURE ANALYSE()",
            "SELECT SET(1)",
        ] {
            assert!(!replay_safe(sql), "should not be safe: {sql:?}");
        }
    }

    #[test]
    fn functions_with_effects_or_unknown_are_not_safe() {
        for sql in [
            "SELECT GET_LOCK('a', 10)",
            "SELECT get_lock ('a', 10)",
            "SELECT RELEASE_LOCK('a')",
            "SELECT RELEASE_ALL_LOCKS()",
            "SELECT IS_FREE_LOCK('a')",
            "SELECT IS_USED_LOCK('a')",
            "SELECT SLEEP(1)",
            "SELECT * FROM t WHERE SLEEP(1) = 0",
            "SELECT BENCHMARK(1000000, MD5('x'))",
            "SELECT NEXTVAL(s)",
            "SELECT SETVAL(s, 10)",
            "SELECT LASTVAL(s)",
            "SELECT NEXT VALUE FOR s",
            "SELECT PREVIOUS VALUE FOR s",
            "SELECT LAST_INSERT_ID(42)",
            "SELECT LAST_INSERT_ID(id + 1) FROM t",
            "SELECT LOAD_FILE('/etc/passwd')",
            "SELECT MASTER_POS_WAIT('log', 4)",
            "SELECT my_func(1)",
            "SELECT a, my_func (a) AS b FROM t",
            "SELECT mydb.f(1)",
            "SELECT `f`(1)",
            "SELECT * FROM t WHERE id = audit_and_return(7)",
            "SELECT COUNT(*) FROM t WHERE f(a)",
            "WITH x AS (SELECT f(1)) SELECT * FROM x",
            "WITH cte (n) AS (SELECT 1) SELECT g(n) FROM cte",
            "SELECT x FROM t AS a WHERE a.f(1)",
        ] {
            assert!(!replay_safe(sql), "should not be safe: {sql:?}");
        }
    }

    #[test]
    fn comments_and_strings_cannot_hide_anything() {
        for sql in [
            // Executable comments run their content.
            "SELECT 1 /*! FOR UPDATE */",
            "/*!50000 SELECT 1 */",
            "SELECT /*M!100100 SLEEP(1), */ 1",
            // NO_BACKSLASH_ESCAPES reads this as two statements.
            "SELECT 'a\\'; DELETE FROM t; -- '",
            "SELECT \"a\\\"; DELETE FROM t; -- \"",
            // A comment that does not end hides nothing from us, but is still one
            // reading; the second statement is visible.
            "SELECT 1; /* DELETE */ DELETE FROM t",
        ] {
            assert!(!replay_safe(sql), "should not be safe: {sql:?}");
        }
        // Inside strings and quoted names, words are data.
        assert!(replay_safe(
            "SELECT 'FOR UPDATE', 'GET_LOCK(1)', `INTO` FROM t"
        ));
        assert!(replay_safe("SELECT 'unterminated /*!"));
    }

    #[test]
    fn never_panics_on_odd_input() {
        const PIECES: &[&str] = &[
            "'", "\"", "`", "\\", "/*", "*/", "/*!", "/*M!", "--", "-- ", "#", "\n", ";", "@",
            "@@", "(", ")", ":", "=", ".", "é", "€", "𝄞", " ", "SELECT", "WITH", "AS", "f",
            "COUNT", "FOR", "SHARE", "x", "1",
        ];
        let mut seed: u64 = 0x2545_F491_4F6C_DD1D;
        for _ in 0..20_000 {
            let mut sql = String::new();
            for _ in 0..(seed % 14) {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                sql.push_str(PIECES[(seed % PIECES.len() as u64) as usize]);
            }
            let _ = replay_safe(&sql);
        }
    }
}
