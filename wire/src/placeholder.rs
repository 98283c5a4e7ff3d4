//! Bind-variable placeholders in a statement, as vitess writes them:
//!
//! - `?`: a positional value. Vitess's tokenizer names the n-th `?` of a statement
//!   `v<n>` (`:v1`, `:v2`, ... from 1), so its value is the bind variable `v<n>`.
//! - `:name`: one value, the bind variable `name`.
//! - `::name`: a list, the bind variable `name` (a TUPLE; `IN ::ids`).
//!
//! A name starts with an ASCII letter, `_` or `$` and goes on with letters, digits,
//! `_`, `$` and `.` (vitess's rule). A colon followed by anything else is not a
//! placeholder: `:=` (assignment), `:1` (vitess's offset argument), `label: BEGIN`.
//!
//! The statement is read with the classifiers' lexer, so placeholders inside string
//! literals, quoted identifiers and comments are not placeholders; inside an executable
//! comment (`/*! ... */`, `/*M! ... */`) they are, since the server runs what is there.
//! Strings are read with backslash escapes (MySQL's default `sql_mode`): a session with
//! `NO_BACKSLASH_ESCAPES` whose statement has a backslash in a string may be read
//! differently by the server, which can only make the statement fail (a placeholder
//! left in the text is a syntax error; a count that differs is refused by the server),
//! never bind a value somewhere else.

use crate::lexer::{Lexer, Tok};

/// One placeholder of a statement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placeholder<'a> {
    /// `?`, the n-th of the statement (from 1): its value is the bind variable `v<n>`.
    Positional(usize),
    /// `:name`.
    Value(&'a str),
    /// `::name`.
    List(&'a str),
}

impl Placeholder<'_> {
    /// The bind variable that gives its value(s).
    pub fn name(&self) -> std::borrow::Cow<'_, str> {
        match self {
            Placeholder::Positional(n) => std::borrow::Cow::Owned(positional_name(*n)),
            Placeholder::Value(name) | Placeholder::List(name) => std::borrow::Cow::Borrowed(name),
        }
    }
}

/// The name vitess gives the value of the n-th `?` (from 1).
pub fn positional_name(n: usize) -> String {
    format!("v{n}")
}

/// A placeholder and where it is: `sql[start..end]` is its text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Found<'a> {
    pub start: usize,
    pub end: usize,
    pub placeholder: Placeholder<'a>,
}

/// The placeholders of a statement, in order.
pub fn find(sql: &str) -> Vec<Found<'_>> {
    let bytes = sql.as_bytes();
    let mut lexer = Lexer::new(sql);
    let mut found = Vec::new();
    let mut positional = 0;
    while let Some(tok) = lexer.next() {
        // A symbol is one byte: it ends where the lexer stands.
        let after = lexer.offset();
        let start = after.saturating_sub(1);
        match tok {
            Tok::Sym(b'?') => {
                positional += 1;
                found.push(Found {
                    start,
                    end: after,
                    placeholder: Placeholder::Positional(positional),
                });
            }
            Tok::Sym(b':') => {
                let list = bytes.get(after) == Some(&b':');
                let name_start = if list { after + 1 } else { after };
                let name_end = name_start + name_len(bytes.get(name_start..).unwrap_or_default());
                let Some(name) = sql.get(name_start..name_end).filter(|n| !n.is_empty()) else {
                    continue;
                };
                // The name's bytes have no quotes or comments: skip their tokens.
                while lexer.offset() < name_end {
                    if lexer.next().is_none() {
                        break;
                    }
                }
                found.push(Found {
                    start,
                    end: name_end,
                    placeholder: if list {
                        Placeholder::List(name)
                    } else {
                        Placeholder::Value(name)
                    },
                });
            }
            _ => {}
        }
    }
    found
}

/// The length of the bind-variable name at the start of `rest` (0: none).
fn name_len(rest: &[u8]) -> usize {
    match rest.first() {
        Some(&b) if b.is_ascii_alphabetic() || b == b'_' || b == b'$' => rest
            .iter()
            .take_while(|&&b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'$' | b'.'))
            .count(),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Placeholder::{List, Positional, Value};

    fn kinds(sql: &str) -> Vec<Placeholder<'_>> {
        find(sql).into_iter().map(|f| f.placeholder).collect()
    }

    #[test]
    fn the_three_forms_and_their_spans() {
        let sql = "SELECT * FROM t WHERE a = :a AND b IN ::ids AND c = ? AND d = ?";
        let found = find(sql);
        let texts: Vec<&str> = found.iter().map(|f| &sql[f.start..f.end]).collect();
        assert_eq!(texts, [":a", "::ids", "?", "?"]);
        assert_eq!(
            kinds(sql),
            [Value("a"), List("ids"), Positional(1), Positional(2)]
        );
        assert_eq!(Positional(2).name(), "v2");
        assert_eq!(List("ids").name(), "ids");
    }

    #[test]
    fn names_follow_vitess() {
        assert_eq!(
            kinds("SELECT :a_1, :$x, :_y, :a.b.c, :ÿ, :1, : a, :é"),
            [Value("a_1"), Value("$x"), Value("_y"), Value("a.b.c")]
        );
        // The name stops at the first byte that cannot be in one.
        let sql = "SELECT :a+:b,:c)";
        let found = find(sql);
        let texts: Vec<&str> = found.iter().map(|f| &sql[f.start..f.end]).collect();
        assert_eq!(texts, [":a", ":b", ":c"]);
        assert_eq!(kinds("SELECT :v1, ?"), [Value("v1"), Positional(1)]);
    }

    #[test]
    fn colons_that_are_not_placeholders() {
        for sql in [
            "SELECT @a := 1",
            "SET @x:=5",
            "lbl: BEGIN END",
            "SELECT :1",
            "SELECT a ::= 1",
            "SELECT :",
            "SELECT ::",
        ] {
            assert!(find(sql).is_empty(), "{sql}: {:?}", find(sql));
        }
        // Vitess reads `lbl:BEGIN` as a bind variable too.
        assert_eq!(kinds("lbl:BEGIN END"), [Value("BEGIN")]);
    }

    #[test]
    fn strings_identifiers_and_comments_hide_placeholders() {
        let sql = r#"SELECT ':a ?', ":b ?", `:c ?`, 'it''s :d ?', 'x\':e ?' -- :f ?
            # :g ?
            /* :h ? */ FROM t WHERE x = :real AND y = ?"#;
        assert_eq!(kinds(sql), [Value("real"), Positional(1)]);
        // An unterminated string or comment hides the rest.
        assert!(find("SELECT 'abc :x ?").is_empty());
        assert!(find("SELECT /* :x ?").is_empty());
    }

    #[test]
    fn executable_comments_are_read() {
        assert_eq!(
            kinds("SELECT /*!50000 :a, */ ? /*M! , ::b */"),
            [Value("a"), Positional(1), List("b")]
        );
    }

    #[test]
    fn positional_numbers_count_question_marks_only() {
        assert_eq!(
            kinds("INSERT INTO t VALUES (?, :x, ?, '?', ?)"),
            [Positional(1), Value("x"), Positional(2), Positional(3)]
        );
    }

    #[test]
    fn any_text_is_safe() {
        for sql in [
            "", ":", "::", "?", "'", "\"", "`", "/*", "--", "#", "\u{0}:a", ":a\u{0}",
        ] {
            let _ = find(sql);
        }
        assert_eq!(kinds(":a\u{0}"), [Value("a")]);
    }
}
