//! Which statements may run on a pooled connection.
//!
//! Interactive transactions and session state are not supported yet, and a
//! pooled connection is shared by every request of one credential, so a
//! statement that would leave a transaction or session state behind (BEGIN,
//! SET, LOCK TABLES, USE, PREPARE, temporary tables, GET_LOCK...) is refused
//! before it runs. Statements that are allowed but may still leave state we
//! cannot rule out from the text (user variables, CALL, several statements,
//! executable comments, SET GLOBAL) are run and the connection is reset after.
//! The executor also checks the server status flags after every statement, so
//! this file is the first line of defence, not the only one.
//!
//! The scan is a small lexer, not a parser (`lexer.rs`, shared with `replay.rs`): it
//! skips whitespace, comments and quoted strings/identifiers, case-insensitively, and
//! this file looks at the leading keywords of each `;`-separated statement.

use crate::lexer::{eq, Lexer, Tok};

/// What to do with a statement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Leaves no session state: the connection goes back to the pool as is.
    Clean,
    /// Allowed, but reset the connection (COM_RESET_CONNECTION) after it.
    Reset,
    /// Refused before running; the label names the statement for the message.
    Refuse(&'static str),
}

/// The message a refused statement gets (with code UNIMPLEMENTED).
pub fn refusal_message(label: &str) -> String {
    format!("interactive transactions and session state are not supported yet (statement: {label})")
}

/// Classifies a query, which may hold several statements.
pub fn classify(sql: &str) -> Verdict {
    classify_with(sql, true)
}

/// As [`classify`], except that mentioning a user variable does not by itself
/// ask for a reset: for a statement whose assignments were read otherwise
/// (`session_state::assigned` found none, or the shim carries them in the session).
pub fn classify_user_variables_read(sql: &str) -> Verdict {
    classify_with(sql, false)
}

fn classify_with(sql: &str, user_vars_reset: bool) -> Verdict {
    let mut lexer = Lexer::new(sql);
    let fresh = || Stmt {
        user_vars_reset,
        ..Stmt::default()
    };
    let mut stmt = fresh();
    let mut statements = 0;
    let mut reset = false;
    loop {
        let tok = lexer.next();
        let end = match tok {
            None => true,
            // Inside a stored-program body a `;` does not end the statement.
            Some(Tok::Sym(b';')) => !stmt.compound,
            _ => false,
        };
        if end {
            if stmt.len > 0 {
                statements += 1;
                match stmt.verdict() {
                    Verdict::Refuse(label) => return Verdict::Refuse(label),
                    Verdict::Reset => reset = true,
                    Verdict::Clean => {}
                }
            }
            match tok {
                None => break,
                Some(_) => stmt = fresh(),
            }
        } else if let Some(tok) = tok {
            stmt.push(tok);
        }
    }
    if reset || statements > 1 || lexer.unsure {
        Verdict::Reset
    } else {
        Verdict::Clean
    }
}

/// A plain `ROLLBACK` (or `ROLLBACK WORK`): what a client sends to end a
/// transaction, and what may succeed on a session whose transaction is already
/// gone (rolled back when its connection was lost).
pub fn is_plain_rollback(sql: &str) -> bool {
    first_keyword(sql) == "ROLLBACK" && classify(sql) == Verdict::Clean
}

/// The first keyword of a query, upper-cased, for messages ("" if none).
pub fn first_keyword(sql: &str) -> String {
    for tok in Lexer::new(sql) {
        match tok {
            Tok::Word(w) => return w.to_ascii_uppercase(),
            Tok::Sym(b'(') => continue,
            _ => break,
        }
    }
    String::new()
}

const HEAD: usize = 4;

/// What we keep of one statement: its first tokens and a few facts.
#[derive(Default)]
struct Stmt<'a> {
    head: [Option<Tok<'a>>; HEAD],
    len: usize,
    prev_get_lock: bool,
    get_lock: bool,
    user_var: bool,
    /// A user variable asks for a reset ([`classify`]; not [`classify_user_variables_read`]).
    user_vars_reset: bool,
    lock_word: bool,
    /// CREATE PROCEDURE/FUNCTION/TRIGGER/EVENT: the body has its own `;`s.
    compound: bool,
    create_decided: bool,
}

impl<'a> Stmt<'a> {
    fn push(&mut self, tok: Tok<'a>) {
        // A leading `(` (as in `(SELECT ...) UNION ...`) is not a keyword.
        if self.len == 0 && tok == Tok::Sym(b'(') {
            return;
        }
        if let Some(slot) = self.head.get_mut(self.len) {
            *slot = Some(tok);
        }
        self.len += 1;
        match tok {
            Tok::Word(w) => {
                if self.word(0, "CREATE") && !self.create_decided && self.len > 1 {
                    self.decide_create(w);
                }
                self.lock_word |= eq(w, "LOCK") || eq(w, "EXPORT");
                self.prev_get_lock = eq(w, "GET_LOCK");
                return;
            }
            Tok::UserVar(_) => self.user_var = true,
            Tok::Sym(b'(') if self.prev_get_lock && !self.compound => self.get_lock = true,
            _ => {}
        }
        self.prev_get_lock = false;
    }

    /// After CREATE, the first object-type word says whether a body follows.
    fn decide_create(&mut self, w: &str) {
        const BODY: &[&str] = &["PROCEDURE", "FUNCTION", "TRIGGER", "EVENT", "PACKAGE"];
        const NO_BODY: &[&str] = &[
            "TABLE",
            "TEMPORARY",
            "VIEW",
            "INDEX",
            "UNIQUE",
            "FULLTEXT",
            "SPATIAL",
            "DATABASE",
            "SCHEMA",
            "USER",
            "ROLE",
            "SEQUENCE",
            "SERVER",
            "TABLESPACE",
            "LOGFILE",
            "RESOURCE",
        ];
        if BODY.iter().any(|k| eq(w, k)) {
            self.compound = true;
            self.create_decided = true;
        } else if NO_BODY.iter().any(|k| eq(w, k)) {
            self.create_decided = true;
        }
    }

    fn word(&self, i: usize, keyword: &str) -> bool {
        matches!(self.head.get(i), Some(Some(Tok::Word(w))) if eq(w, keyword))
    }

    fn verdict(&self) -> Verdict {
        let w = |i, k| self.word(i, k);
        let refuse = if w(0, "BEGIN") {
            Some("BEGIN")
        } else if w(0, "START") && w(1, "TRANSACTION") {
            Some("START TRANSACTION")
        } else if w(0, "SET") {
            return self.set_verdict();
        } else if w(0, "LOCK") {
            Some("LOCK")
        } else if w(0, "USE") {
            Some("USE")
        } else if w(0, "PREPARE")
            || w(0, "EXECUTE")
            || w(0, "DEALLOCATE")
            || (w(0, "DROP") && w(1, "PREPARE"))
        {
            Some("PREPARE/EXECUTE")
        } else if w(0, "XA") {
            Some("XA")
        } else if w(0, "SAVEPOINT") || (w(0, "RELEASE") && w(1, "SAVEPOINT")) {
            Some("SAVEPOINT")
        } else if w(0, "ROLLBACK") && (w(1, "TO") || (w(1, "WORK") && w(2, "TO"))) {
            Some("ROLLBACK TO SAVEPOINT")
        } else if w(0, "HANDLER") {
            Some("HANDLER")
        } else if w(0, "CREATE")
            && (w(1, "TEMPORARY") || (w(1, "OR") && w(2, "REPLACE") && w(3, "TEMPORARY")))
        {
            Some("CREATE TEMPORARY TABLE")
        } else if w(0, "FLUSH") && self.lock_word {
            Some("FLUSH ... LOCK")
        } else if w(0, "BACKUP") {
            Some("BACKUP")
        } else if self.get_lock {
            Some("GET_LOCK()")
        } else {
            None
        };
        match refuse {
            Some(label) => Verdict::Refuse(label),
            None if (self.user_var && self.user_vars_reset)
                || self.compound
                || w(0, "CALL")
                || w(0, "KILL") =>
            {
                Verdict::Reset
            }
            // COMMIT/ROLLBACK are no-ops here (autocommit), but AND CHAIN opens a
            // transaction and RELEASE closes the connection: reset (or discard).
            None if (w(0, "COMMIT") || w(0, "ROLLBACK"))
                && self.len > 1 + usize::from(w(1, "WORK")) =>
            {
                Verdict::Reset
            }
            None => Verdict::Clean,
        }
    }

    /// SET changes the session, except SET GLOBAL/PERSIST (server-wide) and
    /// SET PASSWORD (the account); those run, with a reset after in case a
    /// session assignment hides in the same list.
    fn set_verdict(&self) -> Verdict {
        const SERVER_WIDE: &[&str] = &["GLOBAL", "PERSIST", "PERSIST_ONLY", "PASSWORD"];
        let allowed = match self.head.get(1).copied().flatten() {
            Some(Tok::Word(w)) => SERVER_WIDE.iter().any(|k| eq(w, k)),
            Some(Tok::SysVar(v)) => ["global.", "persist.", "persist_only."].iter().any(|p| {
                v.len() > p.len()
                    && v.as_bytes()
                        .get(..p.len())
                        .is_some_and(|s| s.eq_ignore_ascii_case(p.as_bytes()))
            }),
            _ => false,
        };
        if allowed {
            Verdict::Reset
        } else {
            Verdict::Refuse("SET")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_rollback() {
        for sql in ["ROLLBACK", " rollback work ", "/* c */ ROLLBACK"] {
            assert!(is_plain_rollback(sql), "{sql}");
        }
        for sql in [
            "ROLLBACK TO SAVEPOINT a",
            "ROLLBACK AND CHAIN",
            "COMMIT",
            "SELECT 1; ROLLBACK",
        ] {
            assert!(!is_plain_rollback(sql), "{sql}");
        }
    }
    use Verdict::*;

    #[test]
    fn ordinary_statements_are_clean() {
        for sql in [
            "SELECT 1",
            "select 1;",
            "  \n\tSELECT * FROM t WHERE a = 'BEGIN; SET x=1' -- BEGIN\n",
            "/* a comment */ INSERT INTO t VALUES (1, \"it's\")",
            "UPDATE t SET a = 1 WHERE b = 2",
            "DELETE FROM t",
            "WITH x AS (SELECT 1) SELECT * FROM x",
            "(SELECT 1) UNION (SELECT 2)",
            "SHOW TABLES",
            "EXPLAIN SELECT 1",
            "CREATE TABLE t (id INT PRIMARY KEY AUTO_INCREMENT, begin_at DATETIME)",
            "CREATE TABLE event (id INT)",
            "DROP TEMPORARY TABLE IF EXISTS t",
            "SELECT @@version, @@session.sql_mode",
            "SELECT * FROM t FOR UPDATE",
            "INSERT INTO users (email) VALUES ('a@example.com')",
            "COMMIT",
            "ROLLBACK",
            "commit work;",
            "UNLOCK TABLES",
            "SELECT release_lock('x')",
            "SELECT get_lock FROM t",
            "SELECT 1 -- trailing comment without newline",
            "# only a comment",
            "",
            "SELECT 1-- 1",
        ] {
            assert_eq!(classify(sql), Clean, "{sql:?}");
        }
    }

    #[test]
    fn session_state_is_refused() {
        for (sql, label) in [
            ("BEGIN", "BEGIN"),
            ("begin work", "BEGIN"),
            (
                "  /* hi */ -- there\n Start Transaction READ ONLY",
                "START TRANSACTION",
            ),
            ("SET autocommit = 0", "SET"),
            ("set names utf8mb4", "SET"),
            ("SET @x = 1", "SET"),
            ("SET SESSION sql_mode = ''", "SET"),
            ("SET @@session.sql_mode = ''", "SET"),
            ("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE", "SET"),
            ("SET STATEMENT max_statement_time=1 FOR SELECT 1", "SET"),
            ("LOCK TABLES t WRITE", "LOCK"),
            ("USE other", "USE"),
            ("PREPARE s FROM 'SELECT 1'", "PREPARE/EXECUTE"),
            ("EXECUTE s", "PREPARE/EXECUTE"),
            ("DEALLOCATE PREPARE s", "PREPARE/EXECUTE"),
            ("XA START 'x'", "XA"),
            ("SAVEPOINT a", "SAVEPOINT"),
            ("RELEASE SAVEPOINT a", "SAVEPOINT"),
            ("ROLLBACK TO SAVEPOINT a", "ROLLBACK TO SAVEPOINT"),
            ("ROLLBACK WORK TO a", "ROLLBACK TO SAVEPOINT"),
            ("HANDLER t OPEN", "HANDLER"),
            ("CREATE TEMPORARY TABLE t (a INT)", "CREATE TEMPORARY TABLE"),
            (
                "create or replace temporary table t (a int)",
                "CREATE TEMPORARY TABLE",
            ),
            ("FLUSH TABLES WITH READ LOCK", "FLUSH ... LOCK"),
            ("FLUSH TABLES t FOR EXPORT", "FLUSH ... LOCK"),
            ("BACKUP STAGE START", "BACKUP"),
            ("SELECT GET_LOCK('a', 10)", "GET_LOCK()"),
            ("DO get_lock ('a', 10)", "GET_LOCK()"),
            ("SELECT 1; BEGIN", "BEGIN"),
            ("SELECT ';'; SET @x = 1", "SET"),
            ("/*!40101 SET NAMES utf8 */", "SET"),
            ("/*M!100100 SET sql_mode = '' */", "SET"),
            ("(BEGIN)", "BEGIN"),
        ] {
            assert_eq!(classify(sql), Refuse(label), "{sql:?}");
        }
    }

    #[test]
    fn unprovable_statements_need_a_reset() {
        for sql in [
            "SELECT @x := 1",
            "SELECT 1 INTO @x",
            "SELECT @x",
            "SELECT 1; SELECT 2",
            "INSERT INTO t VALUES (1); INSERT INTO t VALUES (2);",
            "CALL p()",
            "SET GLOBAL max_connections = 100",
            "set @@global.max_connections = 100",
            "SET PERSIST max_connections = 100",
            "SET PASSWORD = PASSWORD('x')",
            "/*!50000 SELECT 1 */",
            "SELECT 'it\\'s'",
            "CREATE USER 'a'@'localhost'",
            "CREATE PROCEDURE p() BEGIN SET @x = 1; SELECT 1; END",
            "COMMIT AND CHAIN",
            "ROLLBACK WORK RELEASE",
            "KILL QUERY 42",
            "CREATE DEFINER = CURRENT_USER FUNCTION f() RETURNS INT BEGIN DECLARE x INT; SET x = 1; RETURN x; END",
        ] {
            assert_eq!(classify(sql), Reset, "{sql:?}");
        }
    }

    #[test]
    fn user_variables_read_otherwise_ask_for_no_reset() {
        for sql in [
            "SELECT @x",
            "SELECT @x := 1",
            "SELECT @a, @@time_zone FROM t WHERE id = @b",
        ] {
            assert_eq!(classify_user_variables_read(sql), Clean, "{sql:?}");
        }
        // Only the user variables are read otherwise: what else asks for a reset still does.
        for sql in [
            "CALL p(@x)",
            "SELECT @x; SELECT 1",
            "KILL QUERY 42",
            "/*!50000 SELECT @x */",
        ] {
            assert_eq!(classify_user_variables_read(sql), Reset, "{sql:?}");
        }
        assert_eq!(classify_user_variables_read("SELECT @x FOR UPDATE"), Clean);
        assert_eq!(
            classify_user_variables_read("SET @x = 1, @@session.time_zone = '+00:00'"),
            Refuse("SET")
        );
    }

    #[test]
    fn quoting_and_comments_hide_keywords() {
        assert_eq!(classify("SELECT `begin` FROM `set`"), Clean);
        assert_eq!(classify("SELECT 'a''b; BEGIN'"), Clean);
        assert_eq!(
            classify("SELECT \"\\\"; BEGIN\""),
            Reset,
            "backslash: we may read it differently"
        );
        assert_eq!(classify("/* BEGIN */ SELECT 1 /* unterminated"), Clean);
        assert_eq!(classify("SELECT 1 # BEGIN\n"), Clean);
        assert_eq!(classify("SELECT 'unterminated"), Clean);
        assert_eq!(first_keyword(" /* x */ (call p())"), "CALL");
        assert_eq!(
            refusal_message("BEGIN"),
            "interactive transactions and session state are not supported yet (statement: BEGIN)"
        );
    }

    #[test]
    fn never_panics_on_odd_input() {
        // Deterministic pseudo-random text from pieces that stress the lexer.
        const PIECES: &[&str] = &[
            "'",
            "\"",
            "`",
            "\\",
            "/*",
            "*/",
            "/*!",
            "/*M!",
            "--",
            "-- ",
            "#",
            "\n",
            ";",
            "@",
            "@@",
            "(",
            ")",
            "é",
            "€",
            "𝄞",
            " ",
            "SET",
            "BEGIN",
            "get_lock",
            "CREATE",
            "PROCEDURE",
            "x",
            "1",
        ];
        let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..20_000 {
            let mut sql = String::new();
            for _ in 0..(seed % 12) {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                sql.push_str(PIECES[(seed % PIECES.len() as u64) as usize]);
            }
            let _ = classify(&sql);
            let _ = first_keyword(&sql);
        }
    }
}
