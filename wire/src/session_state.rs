//! Session state a statement makes that can travel in the session instead of on
//! a held connection: user variables and session system variables that are safe
//! to set again on another connection. The shim reads their values after the
//! statement and sets them again before the session's next statement on any
//! pooled connection. What this file cannot read from the text — or what is not
//! safe to set again — is `None`, and the statement pins as before (statement.rs).
//!
//! The table of system variables is kept as vitess keeps its own
//! (`go/vt/sysvars`): a variable is listed only when setting it again on a fresh
//! connection gives the same session, it affects nothing outside the session,
//! and an ordinary account may set it.

use crate::lexer::{eq, Lexer, Tok};

/// What a statement assigns, by name (lower case).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Assigned {
    /// User variables (`@name`).
    pub user: Vec<String>,
    /// Session system variables, by the name the server reads them under.
    pub system: Vec<&'static str>,
}

/// A session system variable that may travel in the session.
pub struct SystemVariable {
    /// As MySQL 8 names it.
    pub name: &'static str,
    /// As MariaDB names it, when it differs.
    pub mariadb: Option<&'static str>,
}

const fn same(name: &'static str) -> SystemVariable {
    SystemVariable {
        name,
        mariadb: None,
    }
}

/// The session system variables that travel in the session.
pub const SYSTEM_VARIABLES: &[SystemVariable] = &[
    // Off: each statement opens a transaction, which pins until it ends (the shim
    // reads that from the status flags); between transactions nothing is held.
    same("autocommit"),
    same("time_zone"),
    same("sql_mode"),
    same("character_set_client"),
    same("character_set_connection"),
    same("character_set_results"),
    same("collation_connection"),
    same("sql_select_limit"),
    SystemVariable {
        name: "max_execution_time",
        mariadb: Some("max_statement_time"),
    },
    same("foreign_key_checks"),
    same("unique_checks"),
    same("sql_safe_updates"),
    same("sql_auto_is_null"),
    same("sql_big_selects"),
    same("sql_notes"),
    same("sql_warnings"),
    same("sql_quote_show_create"),
    same("group_concat_max_len"),
    same("div_precision_increment"),
    same("default_week_format"),
    same("lc_time_names"),
    same("lc_messages"),
    same("lock_wait_timeout"),
    same("innodb_lock_wait_timeout"),
    same("big_tables"),
    SystemVariable {
        name: "transaction_isolation",
        mariadb: Some("tx_isolation"),
    },
    SystemVariable {
        name: "transaction_read_only",
        mariadb: Some("tx_read_only"),
    },
];

/// The variable a name (either server's spelling, any case) stands for.
pub fn system_variable(name: &str) -> Option<&'static SystemVariable> {
    SYSTEM_VARIABLES
        .iter()
        .find(|v| eq(v.name, name) || v.mariadb.is_some_and(|m| eq(m, name)))
}

/// `SET NAMES` and `SET CHARACTER SET` change these.
const CHARSET: [&str; 4] = [
    "character_set_client",
    "character_set_connection",
    "character_set_results",
    "collation_connection",
];

/// What `sql` (one statement) assigns, when every session change it makes is a
/// user variable or a listed system variable; `None` when it may make another,
/// or when the text is not certain (an executable comment, several statements).
pub fn assigned(sql: &str) -> Option<Assigned> {
    let mut lexer = Lexer::new(sql);
    let tokens: Vec<Tok<'_>> = lexer.by_ref().collect();
    if lexer.unsure || lexer.exec_comment {
        return None;
    }
    let mut tokens = tokens.as_slice();
    while let [rest @ .., Tok::Sym(b';')] = tokens {
        tokens = rest;
    }
    if tokens.contains(&Tok::Sym(b';')) {
        return None;
    }
    match tokens.first() {
        Some(Tok::Word(w)) if eq(w, "SET") => set(tokens.get(1..).unwrap_or_default()),
        // A procedure's OUT and INOUT parameters: every user variable among its
        // arguments may be assigned (what else the procedure does is not read here).
        Some(Tok::Word(w)) if eq(w, "CALL") => Some(Assigned {
            user: call_arguments(tokens)?,
            system: Vec::new(),
        }),
        _ => Some(Assigned {
            user: assigned_in_expressions(tokens)?,
            system: Vec::new(),
        }),
    }
}

/// The user variables of a `CALL`'s arguments.
fn call_arguments(tokens: &[Tok<'_>]) -> Option<Vec<String>> {
    let mut user = Vec::new();
    for tok in tokens {
        if let Tok::UserVar(name) = tok {
            if !plain_name(name) {
                return None;
            }
            push(&mut user, name.to_ascii_lowercase());
        }
    }
    Some(user)
}

/// `@v := ...` and `... INTO @a, @b` anywhere in a statement other than SET.
fn assigned_in_expressions(tokens: &[Tok<'_>]) -> Option<Vec<String>> {
    let mut user = Vec::new();
    let mut into = false;
    for (i, tok) in tokens.iter().enumerate() {
        match tok {
            Tok::Word(w) => into = eq(w, "INTO"),
            Tok::UserVar(name) => {
                let assigning = matches!(
                    tokens.get(i + 1..i + 3),
                    Some([Tok::Sym(b':'), Tok::Sym(b'=')])
                );
                if assigning || into {
                    if !plain_name(name) {
                        return None; // @'quoted', or a name the shim would have to quote
                    }
                    push(&mut user, name.to_ascii_lowercase());
                }
                continue;
            }
            Tok::Sym(b',') if into => continue,
            _ => into = false,
        }
    }
    Some(user)
}

/// The assignments of a SET statement (after `SET`).
fn set(tokens: &[Tok<'_>]) -> Option<Assigned> {
    let mut out = Assigned::default();
    let word = |i: usize, k: &str| matches!(tokens.get(i), Some(Tok::Word(w)) if eq(w, k));
    if (word(0, "SESSION") || word(0, "LOCAL")) && word(1, "TRANSACTION") {
        // One statement of comma-separated characteristics.
        assignment(tokens, &mut out)?;
        return Some(out);
    }
    for item in split_top_level(tokens) {
        assignment(item, &mut out)?;
    }
    Some(out)
}

fn assignment(item: &[Tok<'_>], out: &mut Assigned) -> Option<()> {
    let word = |i: usize, k: &str| matches!(item.get(i), Some(Tok::Word(w)) if eq(w, k));
    match item {
        [Tok::UserVar(name), rest @ ..] if plain_name(name) && assigns(rest) => {
            push(&mut out.user, name.to_ascii_lowercase());
        }
        [Tok::SysVar(name), rest @ ..] if assigns(rest) => {
            let name = session_scoped(name)?;
            push(&mut out.system, system_variable(name)?.name);
        }
        _ if word(0, "NAMES") || word(0, "CHARSET") || (word(0, "CHARACTER") && word(1, "SET")) => {
            for v in CHARSET {
                push(&mut out.system, v);
            }
        }
        // SET SESSION TRANSACTION ...: the session's default; without SESSION the
        // setting is for the next transaction only, which this cannot carry.
        _ if (word(0, "SESSION") || word(0, "LOCAL")) && word(1, "TRANSACTION") => {
            let rest = item.get(2..).unwrap_or_default();
            let has = |k: &str| rest.iter().any(|t| matches!(t, Tok::Word(w) if eq(w, k)));
            if has("ISOLATION") {
                push(&mut out.system, "transaction_isolation");
            }
            if has("READ") && (has("ONLY") || has("WRITE")) {
                push(&mut out.system, "transaction_read_only");
            }
        }
        [Tok::Word(scope), Tok::Word(name), rest @ ..]
            if (eq(scope, "SESSION") || eq(scope, "LOCAL")) && assigns(rest) =>
        {
            push(&mut out.system, system_variable(name)?.name);
        }
        [Tok::Word(name), rest @ ..] if assigns(rest) => {
            push(&mut out.system, system_variable(name)?.name);
        }
        _ => return None,
    }
    Some(())
}

/// A user variable name the shim can write back unquoted: ASCII letters, digits,
/// `_`, `$`, `.` (what `@name` is read as), up to 64 characters (MySQL's limit).
pub fn plain_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'$' | b'.'))
}

/// `= expr` or `:= expr`.
fn assigns(rest: &[Tok<'_>]) -> bool {
    matches!(
        rest,
        [Tok::Sym(b'='), _, ..] | [Tok::Sym(b':'), Tok::Sym(b'='), _, ..]
    )
}

/// `@@name`, `@@session.name`, `@@local.name`: the name; a global scope is `None`.
fn session_scoped(name: &str) -> Option<&str> {
    match name.split_once('.') {
        None => Some(name),
        Some((scope, name)) if eq(scope, "session") || eq(scope, "local") => Some(name),
        Some(_) => None,
    }
}

/// The items of a comma-separated list, commas inside parentheses kept.
fn split_top_level<'t, 'a>(tokens: &'t [Tok<'a>]) -> Vec<&'t [Tok<'a>]> {
    let mut items = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, tok) in tokens.iter().enumerate() {
        match tok {
            Tok::Sym(b'(') => depth += 1,
            Tok::Sym(b')') => depth = depth.saturating_sub(1),
            Tok::Sym(b',') if depth == 0 => {
                items.push(tokens.get(start..i).unwrap_or_default());
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(tokens.get(start..).unwrap_or_default());
    items
}

fn push<T: PartialEq>(list: &mut Vec<T>, item: T) {
    if !list.contains(&item) {
        list.push(item);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(sql: &str) -> Vec<String> {
        assigned(sql).unwrap().user
    }

    fn system(sql: &str) -> Vec<&'static str> {
        assigned(sql).unwrap().system
    }

    #[test]
    fn user_variables() {
        assert_eq!(user("SET @x = 1"), ["x"]);
        assert_eq!(
            user("set @A = 1, @b := 'x,y', @c = (SELECT 1, 2)"),
            ["a", "b", "c"]
        );
        assert_eq!(user("SELECT @v := 1"), ["v"]);
        assert_eq!(user("SELECT a, b INTO @a, @b FROM t"), ["a", "b"]);
        assert_eq!(user("SELECT a FROM t INTO @a;"), ["a"]);
        assert_eq!(user("UPDATE t SET n = @n := n + 1"), ["n"]);
        // A procedure's arguments may be OUT parameters.
        assert_eq!(user("CALL p(1, @out, @Io)"), ["out", "io"]);
        assert!(user("CALL p()").is_empty());
        assert_eq!(assigned("CALL p(@'quoted')"), None);
        // Reading is not assigning.
        assert!(user("SELECT @v, @w + 1 FROM t WHERE x = @v").is_empty());
        assert!(user("SELECT 1").is_empty());
    }

    #[test]
    fn system_variables_by_either_name() {
        assert_eq!(system("SET time_zone = '+05:00'"), ["time_zone"]);
        assert_eq!(
            system("SET SESSION sql_mode = 'ANSI', @@session.foreign_key_checks = 0, @@unique_checks = 0"),
            ["sql_mode", "foreign_key_checks", "unique_checks"]
        );
        assert_eq!(system("SET max_statement_time = 1"), ["max_execution_time"]);
        assert_eq!(system("set @@autocommit=0"), ["autocommit"]);
        assert_eq!(
            system("SET @@local.tx_isolation = 'READ-COMMITTED'"),
            ["transaction_isolation"]
        );
        assert_eq!(system("SET NAMES utf8mb4 COLLATE utf8mb4_bin"), CHARSET);
        assert_eq!(system("SET CHARACTER SET latin1"), CHARSET);
        assert_eq!(
            system("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED, READ ONLY"),
            ["transaction_isolation", "transaction_read_only"]
        );
        let both = assigned("SET @a = 1, time_zone = 'UTC'").unwrap();
        assert_eq!(
            (both.user, both.system),
            (vec!["a".to_owned()], vec!["time_zone"])
        );
    }

    #[test]
    fn what_cannot_travel_pins() {
        for sql in [
            // Next transaction only, server-wide, or not in the table.
            "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE",
            "SET GLOBAL time_zone = '+00:00'",
            "SET @@global.sql_mode = ''",
            "SET sql_log_bin = 0",
            "SET PASSWORD = 'x'",
            "SET ROLE r",
            "SET STATEMENT max_statement_time=1 FOR SELECT 1",
            "SET @'quoted' = 1",
            "SET @é = 1",
            "SET time_zone = '+00:00', sql_log_bin = 0",
            // Not certain from the text.
            "SET @a = 1; SET @b = 2",
            "/*!40101 SET @a = 1 */",
            "SET @a = 'x\\'; SET autocommit=0; -- '",
            "SET time_zone",
        ] {
            assert_eq!(assigned(sql), None, "{sql}");
        }
    }
}
