//! `ROW_COUNT()` and `FOUND_ROWS()` of a session without a pin: its statements
//! run on whichever pooled connection, whose own counters are another
//! session's. As vtgate does, the session keeps them (`rowCount`, `foundRows`,
//! sealed) and the shim answers `SELECT ROW_COUNT()` / `SELECT FOUND_ROWS()`
//! (an alias allowed) from it, without MySQL. On a pin they run in MySQL, exact.
//! `foundRows` is the number of rows of the session's last statement that
//! returned rows (`SQL_CALC_FOUND_ROWS`: the total the server counted).
use ferry_proto::vitess::query::{Field, QueryResult, Row, Type};
use ferry_proto::vitess::vtgate;
use ferry_wire::lexer::{Lexer, Tok};

/// Which counter a statement reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counter {
    RowCount,
    FoundRows,
}

/// `SELECT ROW_COUNT()` or `SELECT FOUND_ROWS()` alone, with an optional alias
/// (`AS x`, `x`, quoted): the counter and the column's name (the alias, or the
/// expression as written, as the server names it).
pub fn standalone(sql: &str) -> Option<(Counter, String)> {
    // The longest form is `SELECT f ( ) AS alias`. Every unpinned statement is asked,
    // so a text that cannot be one (another first word, more tokens) is read no further.
    const MOST_TOKENS: usize = 6;
    let mut lexer = Lexer::new(sql);
    let mut toks = Vec::new();
    let mut quoted = Vec::new();
    while let Some(tok) = lexer.next() {
        if tok == Tok::Sym(b';') {
            break;
        }
        let select = matches!(tok, Tok::Word(w) if w.eq_ignore_ascii_case("SELECT"));
        if toks.len() == MOST_TOKENS || (toks.is_empty() && !select) {
            return None;
        }
        quoted.push(lexer.quoted_value());
        toks.push(tok);
    }
    if lexer.next().is_some() || lexer.is_unsure() {
        return None; // another statement after the `;`, or an uncertain reading
    }
    let word = |i: usize| match toks.get(i) {
        Some(Tok::Word(w)) => Some(*w),
        _ => None,
    };
    if !word(0)?.eq_ignore_ascii_case("SELECT") {
        return None;
    }
    let name = word(1)?;
    let counter = if name.eq_ignore_ascii_case("ROW_COUNT") {
        Counter::RowCount
    } else if name.eq_ignore_ascii_case("FOUND_ROWS") {
        Counter::FoundRows
    } else {
        return None;
    };
    if toks.get(2..4) != Some(&[Tok::Sym(b'('), Tok::Sym(b')')]) {
        return None;
    }
    let written = format!("{name}()");
    let alias = match toks.get(4..) {
        Some([]) => return Some((counter, written)),
        Some([Tok::Word(a)]) if !is_keyword(a) => (*a).to_owned(),
        Some([Tok::Word(r#as), Tok::Word(a)]) if r#as.eq_ignore_ascii_case("AS") => (*a).to_owned(),
        Some([Tok::Quoted]) => quoted.get(4).cloned().flatten()?,
        Some([Tok::Word(r#as), Tok::Quoted]) if r#as.eq_ignore_ascii_case("AS") => {
            quoted.get(5).cloned().flatten()?
        }
        _ => return None,
    };
    Some((counter, alias))
}

/// Words after the expression that are not an alias (`SELECT ROW_COUNT() FROM dual`).
fn is_keyword(w: &str) -> bool {
    [
        "FROM", "WHERE", "LIMIT", "UNION", "INTO", "FOR", "LOCK", "GROUP", "ORDER", "HAVING",
    ]
    .iter()
    .any(|k| k.eq_ignore_ascii_case(w))
}

/// The answer, as MySQL types it: one BIGINT NOT NULL column.
pub fn answer(counter: Counter, name: String, session: &vtgate::Session) -> QueryResult {
    let value = match counter {
        Counter::RowCount => session.row_count.to_string(),
        Counter::FoundRows => session.found_rows.to_string(),
    };
    const NOT_NULL: u32 = 1;
    const BINARY: u32 = 128;
    const NUM: u32 = 32768;
    QueryResult {
        fields: vec![Field {
            name,
            r#type: Type::Int64 as i32,
            column_length: 21,
            charset: 63,
            flags: NOT_NULL | BINARY | NUM,
            column_type: "bigint(21)".into(),
            ..Default::default()
        }],
        rows: vec![Row {
            lengths: vec![value.len() as i64],
            values: value.into_bytes(),
        }],
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_lone_forms() {
        let rc = |name: &str| Some((Counter::RowCount, name.to_owned()));
        assert_eq!(standalone("SELECT ROW_COUNT()"), rc("ROW_COUNT()"));
        assert_eq!(standalone("select row_count();"), rc("row_count()"));
        assert_eq!(standalone("SELECT ROW_COUNT() AS n"), rc("n"));
        assert_eq!(standalone("SELECT ROW_COUNT() n"), rc("n"));
        assert_eq!(standalone("SELECT ROW_COUNT() AS `the n`"), rc("the n"));
        assert_eq!(
            standalone("/* c */ SELECT FOUND_ROWS()"),
            Some((Counter::FoundRows, "FOUND_ROWS()".into()))
        );
        for sql in [
            "SELECT ROW_COUNT() + 1",
            "SELECT ROW_COUNT(), 1",
            "SELECT ROW_COUNT() FROM dual",
            "SELECT ROW_COUNT(); SELECT 1",
            "SELECT LAST_INSERT_ID()",
            "SELECT ROW_COUNT",
            "/*!40101 SELECT ROW_COUNT() */",
        ] {
            assert_eq!(standalone(sql), None, "{sql}");
        }
    }

    #[test]
    fn answered_from_the_session() {
        let s = vtgate::Session {
            row_count: 3,
            found_rows: 7,
            ..Default::default()
        };
        let qr = answer(Counter::RowCount, "n".into(), &s);
        assert_eq!(
            (qr.fields[0].name.as_str(), &qr.rows[0].values[..]),
            ("n", &b"3"[..])
        );
        let qr = answer(Counter::FoundRows, "FOUND_ROWS()".into(), &s);
        assert_eq!(&qr.rows[0].values[..], b"7");
    }
}
