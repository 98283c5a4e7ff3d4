//! The `SET`s the gateway answers itself, of vitess session settings that are not MySQL
//! variables (MySQL would answer "unknown system variable"): `workload` (olap.rs) and
//! `query_timeout` (query_timeout.rs).
//!
//! Accepted as vitess accepts them: `SET [SESSION | LOCAL] name`, `SET @@name`,
//! `@@session.name`, `@@local.name`; `=` or `:=`; the value quoted or bare. A `SET` that
//! also assigns something else goes to MySQL as it is.
//!
//! The statement is read with ferry-wire's lexer, by MySQL's rules: comments
//! are skipped, but the text of an executable comment (`/*! ... */`) is SQL,
//! since MySQL runs it. It is read twice, with backslash escapes in strings
//! (MySQL's default) and without (`NO_BACKSLASH_ESCAPES`): the shim answers
//! only if both readings agree, and leaves anything else to MySQL.
use ferry_wire::lexer::{Lexer, Tok};

/// The value `sql` sets setting `name` to, when that is all it does.
pub fn value_of(sql: &str, name: &str) -> Option<String> {
    let escaped = reading(Lexer::with_backslash_escapes(sql, true), name);
    let plain = reading(Lexer::with_backslash_escapes(sql, false), name);
    if escaped == plain {
        escaped
    } else {
        None
    }
}

/// One reading of the statement (see [`value_of`]).
fn reading(mut toks: Lexer<'_>, name: &str) -> Option<String> {
    if !is_word(toks.next()?, "SET") {
        return None;
    }
    let mut target = toks.next()?;
    if is_word(target, "SESSION") || is_word(target, "LOCAL") {
        target = toks.next()?;
        if !is_word(target, name) {
            return None;
        }
    }
    let named = is_word(target, name)
        || matches!(target, Tok::SysVar(v) if [String::new(), "session.".into(), "local.".into()]
            .iter()
            .any(|scope| v.eq_ignore_ascii_case(&format!("{scope}{name}"))));
    if !named || !assign(&mut toks) {
        return None;
    }
    let value = match toks.next()? {
        Tok::Word(w) => w.to_owned(),
        Tok::Quoted => toks.quoted_value()?,
        _ => return None,
    };
    match toks.next() {
        None => {}
        Some(Tok::Sym(b';')) if toks.next().is_none() => {}
        Some(_) => return None,
    }
    Some(value)
}

fn is_word(tok: Tok<'_>, w: &str) -> bool {
    matches!(tok, Tok::Word(t) if t.eq_ignore_ascii_case(w))
}

/// `=`, or `:=` written as one token (nothing between the two characters).
fn assign(toks: &mut Lexer<'_>) -> bool {
    match toks.next() {
        Some(Tok::Sym(b'=')) => true,
        Some(Tok::Sym(b':')) => {
            // A symbol is one byte: `=` right after `:` ends one byte further.
            let colon_end = toks.offset();
            toks.next() == Some(Tok::Sym(b'=')) && toks.offset() == colon_end + 1
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_of_the_names_forms() {
        for sql in [
            "SET query_timeout = 500",
            "set @@session.query_timeout := '500';",
            "SET LOCAL query_timeout = `500`",
        ] {
            assert_eq!(
                value_of(sql, "query_timeout").as_deref(),
                Some("500"),
                "{sql}"
            );
        }
        assert_eq!(value_of("SET query_timeout = 5", "workload"), None);
        assert_eq!(
            value_of("SET @@global.query_timeout = 5", "query_timeout"),
            None
        );
    }
}
