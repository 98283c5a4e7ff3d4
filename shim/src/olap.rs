//! Vitess's workload switch: `SET workload = 'olap'` (or `oltp`, `dba`).
//!
//! It is a vitess session setting, not a MySQL variable (MySQL would answer
//! "unknown system variable"), so the shim answers it itself: nothing runs in
//! MySQL, nothing is pinned, and the returned session's
//! `options.workload` says OLAP. Clients act on that: PlanetScale's psdbproxy
//! sends every later statement of an OLAP session through `StreamExecute`.
//!
//! Accepted as vitess accepts it: `SET [SESSION | LOCAL] workload`, `SET
//! @@workload`, `@@session.workload`, `@@local.workload`; `=` or `:=`; the
//! value quoted or bare, any case (`olap`, `'OLAP'`). A value vitess does not
//! know is `invalid workload: <value>`. A `SET` that also assigns something
//! else goes to MySQL as it is.
use ferry_proto::vitess::query::execute_options::Workload;

/// `Some(Ok(w))`: the statement sets the workload to `w`; `Some(Err(v))`: it
/// sets it to `v`, which is not a workload; `None`: it is another statement.
pub fn set_workload(sql: &str) -> Option<Result<Workload, String>> {
    let mut toks = Tokens {
        s: sql.as_bytes(),
        i: 0,
    };
    if !toks.next()?.is_word("SET") {
        return None;
    }
    let mut target = toks.next()?;
    if target.is_word("SESSION") || target.is_word("LOCAL") {
        target = toks.next()?;
        if !target.is_word("workload") {
            return None;
        }
    }
    let named = target.is_word("workload")
        || ["workload", "session.workload", "local.workload"]
            .iter()
            .any(|n| target.is_sysvar(n));
    if !named || !matches!(toks.next()?, Tok::Assign) {
        return None;
    }
    let value = match toks.next()? {
        Tok::Word(w) | Tok::Quoted(w) => w,
        _ => return None,
    };
    match toks.next() {
        None => {}
        Some(Tok::Semi) if toks.next().is_none() => {}
        Some(_) => return None,
    }
    let value = String::from_utf8_lossy(value).into_owned();
    Some(parse(&value).ok_or(value))
}

/// Vitess's names, any case.
fn parse(value: &str) -> Option<Workload> {
    Workload::from_str_name(&value.to_ascii_uppercase())
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tok<'a> {
    Word(&'a [u8]),
    /// `@@...`: the name after `@@`, scope included.
    SysVar(&'a [u8]),
    /// The text between the quotes.
    Quoted(&'a [u8]),
    /// `=` or `:=`.
    Assign,
    Semi,
    Other,
}

impl Tok<'_> {
    fn is_word(&self, w: &str) -> bool {
        matches!(self, Tok::Word(t) if t.eq_ignore_ascii_case(w.as_bytes()))
    }

    fn is_sysvar(&self, name: &str) -> bool {
        matches!(self, Tok::SysVar(t) if t.eq_ignore_ascii_case(name.as_bytes()))
    }
}

/// Just enough of a lexer for one short statement: words, `@@` variables,
/// quoted text, and plain comments skipped. An executable comment (`/*!`) is
/// `Other`: the server would read it, so the statement is not ours.
struct Tokens<'a> {
    s: &'a [u8],
    i: usize,
}

impl<'a> Tokens<'a> {
    fn at(&self, k: usize) -> u8 {
        self.s.get(self.i + k).copied().unwrap_or(0)
    }

    fn word_end(&self, from: usize, dots: bool) -> usize {
        let n = self.s[from.min(self.s.len())..]
            .iter()
            .take_while(|&&b| {
                b.is_ascii_alphanumeric() || b == b'_' || b == b'$' || (dots && b == b'.')
            })
            .count();
        from + n
    }

    fn next(&mut self) -> Option<Tok<'a>> {
        loop {
            while self.at(0).is_ascii_whitespace() {
                self.i += 1;
            }
            match (self.at(0), self.at(1), self.at(2)) {
                (0, _, _) if self.i >= self.s.len() => return None,
                (b'/', b'*', b'!') | (b'/', b'*', b'M') => {
                    self.i = self.s.len();
                    return Some(Tok::Other);
                }
                (b'/', b'*', _) => {
                    let body = &self.s[self.i + 2..];
                    self.i = match body.windows(2).position(|w| w == b"*/") {
                        Some(p) => self.i + 2 + p + 2,
                        None => self.s.len(),
                    };
                }
                (b'#', _, _) | (b'-', b'-', 0..=b' ') => {
                    let rest = &self.s[self.i..];
                    self.i += rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len());
                }
                (q @ (b'\'' | b'"' | b'`'), _, _) => {
                    let start = self.i + 1;
                    let len = self.s[start..].iter().position(|&b| b == q)?;
                    self.i = start + len + 1;
                    return Some(Tok::Quoted(&self.s[start..start + len]));
                }
                (b'@', b'@', _) => {
                    let end = self.word_end(self.i + 2, true);
                    let name = &self.s[self.i + 2..end];
                    self.i = end;
                    return Some(Tok::SysVar(name));
                }
                (b'=', _, _) => {
                    self.i += 1;
                    return Some(Tok::Assign);
                }
                (b':', b'=', _) => {
                    self.i += 2;
                    return Some(Tok::Assign);
                }
                (b';', _, _) => {
                    self.i += 1;
                    return Some(Tok::Semi);
                }
                _ => {
                    let end = self.word_end(self.i, false);
                    if end == self.i {
                        self.i += 1;
                        return Some(Tok::Other);
                    }
                    let w = &self.s[self.i..end];
                    self.i = end;
                    return Some(Tok::Word(w));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_forms_vitess_accepts() {
        for sql in [
            "SET workload = 'olap'",
            "set workload = olap",
            "SET workload='OLAP';",
            "SET workload := \"olap\" ; ",
            "SET @@workload = 'olap'",
            "SET @@session.workload = olap",
            "SET @@SESSION.WORKLOAD = 'olap'",
            "SET SESSION workload = 'olap'",
            "SET LOCAL workload = `olap`",
            "  /* psdbproxy */ SET workload = 'olap' -- switch\n",
        ] {
            assert_eq!(set_workload(sql), Some(Ok(Workload::Olap)), "{sql}");
        }
        assert_eq!(
            set_workload("SET workload = 'oltp'"),
            Some(Ok(Workload::Oltp))
        );
        assert_eq!(set_workload("set workload = dba"), Some(Ok(Workload::Dba)));
    }

    #[test]
    fn a_bad_value_is_an_error_and_other_statements_are_not_ours() {
        assert_eq!(
            set_workload("SET workload = 'fast'"),
            Some(Err("fast".into()))
        );
        assert_eq!(set_workload("SET workload = ''"), Some(Err(String::new())));
        for sql in [
            "SET autocommit = 0",
            "SET workload = 'olap', autocommit = 1",
            "SET GLOBAL workload = 'olap'",
            "SET @@global.workload = 'olap'",
            "SET @workload = 'olap'",
            "SET SESSION @@workload = 'olap'",
            "SET workload = 'olap'; SELECT 1",
            "SET workload",
            "SET workload = ",
            "SELECT 'SET workload = olap'",
            "/*!SET workload = 'olap' */",
            "SET workload = 'olap",
            "",
        ] {
            assert_eq!(set_workload(sql), None, "{sql}");
        }
    }
}
