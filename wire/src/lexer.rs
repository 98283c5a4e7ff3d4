//! The small SQL lexer the classifiers, the placeholder scan and the shim's own
//! statements (`SET workload`) share. It is not a parser: it skips whitespace,
//! comments and quoted strings/identifiers, and yields words, variables and symbols.
//! It never fails and never panics: any text is some sequence of tokens.
//!
//! MySQL's rules: `#` and `-- ` (a space or control character after the dashes) end at
//! the line's end; `/* ... */` is skipped, but the text of an executable comment
//! (`/*! ... */`, `/*!50100 ... */` with any version, MariaDB's `/*M! ... */`) is read
//! as SQL, since the server runs it. In strings `\` escapes the next character (unless
//! `NO_BACKSLASH_ESCAPES`, see [`Lexer::with_backslash_escapes`]); in every quoted run a
//! doubled quote is one quote.

/// One token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tok<'a> {
    /// A keyword or unquoted identifier (or number).
    Word(&'a str),
    /// `@name`: a user variable, session state (its name as written; empty when
    /// the name is quoted, `@'name'`, and the quoted token follows).
    UserVar(&'a str),
    /// `@@[scope.]name`: a system variable (the text after `@@`).
    SysVar(&'a str),
    /// A string literal or a quoted identifier ([`Lexer::quoted_value`]: its value).
    Quoted,
    Sym(u8),
}

/// The tokens of a text, in order (an [`Iterator`]).
pub struct Lexer<'a> {
    src: &'a str,
    i: usize,
    /// Where the last token returned starts.
    start: usize,
    /// `\` escapes the next character in strings (MySQL's default). With
    /// `NO_BACKSLASH_ESCAPES` the server reads a backslash as a plain character.
    backslash_escapes: bool,
    in_exec_comment: bool,
    /// Set when the text has something the server may read differently from
    /// us: executable comments, or backslashes in strings (NO_BACKSLASH_ESCAPES).
    pub(crate) unsure: bool,
    /// Set when the text has an executable comment (`/*! ... */`, `/*M! ... */`).
    pub(crate) exec_comment: bool,
}

impl<'a> Lexer<'a> {
    /// A lexer that reads strings as the server does by default (backslash escapes).
    pub fn new(src: &'a str) -> Self {
        Self::with_backslash_escapes(src, true)
    }

    /// A lexer for one reading of backslashes in strings: escapes (the default
    /// `sql_mode`) or plain characters (`NO_BACKSLASH_ESCAPES`).
    pub fn with_backslash_escapes(src: &'a str, backslash_escapes: bool) -> Self {
        Lexer {
            src,
            i: 0,
            start: 0,
            backslash_escapes,
            in_exec_comment: false,
            unsure: false,
            exec_comment: false,
        }
    }

    /// Whether the text read so far has something the server may read otherwise:
    /// an executable comment, or a backslash in a string.
    pub fn is_unsure(&self) -> bool {
        self.unsure
    }

    /// The byte offset just past the last token returned (placeholder.rs).
    pub fn offset(&self) -> usize {
        self.i
    }

    /// The value of the last token returned if it is a closed [`Tok::Quoted`], as the
    /// server reads it: the text between the quotes, a doubled quote read as one, and in
    /// a string (not a backquoted identifier) backslash escapes decoded if this lexer
    /// reads them (`\n`, `\t`, `\0`...; `\%` and `\_` keep their backslash; any other
    /// `\c` is `c`). `None` for another token, or a quote left open.
    pub fn quoted_value(&self) -> Option<String> {
        let mut value = Vec::new();
        let run = self.read_quoted(self.start, Some(&mut value))?;
        (run.closed && run.end == self.i).then(|| String::from_utf8_lossy(&value).into_owned())
    }

    fn bytes(&self) -> &'a [u8] {
        self.src.as_bytes()
    }

    fn at(&self, k: usize) -> u8 {
        self.bytes()
            .get(self.i.saturating_add(k))
            .copied()
            .unwrap_or(0)
    }

    fn rest(&self, from: usize) -> &'a [u8] {
        self.bytes().get(from..).unwrap_or_default()
    }

    fn skip_line(&mut self) {
        let rest = self.rest(self.i);
        self.i += rest
            .iter()
            .position(|&b| b == b'\n')
            .map_or(rest.len(), |p| p + 1);
    }

    /// Skips a quoted run starting at the opening quote.
    fn skip_quoted(&mut self) {
        match self.read_quoted(self.i, None) {
            Some(run) => {
                self.unsure |= run.backslash;
                self.i = run.end;
            }
            None => self.i += 1,
        }
    }

    /// Reads the quoted run whose opening quote is at `from` (`None` if there is no
    /// quote there), pushing its value to `value` if asked: `\` escapes the next byte
    /// except in backquoted identifiers and with `NO_BACKSLASH_ESCAPES`; a doubled quote
    /// is a literal quote.
    fn read_quoted(&self, from: usize, mut value: Option<&mut Vec<u8>>) -> Option<QuotedRun> {
        let bytes = self.bytes();
        let quote = bytes
            .get(from)
            .copied()
            .filter(|q| matches!(q, b'\'' | b'"' | b'`'))?;
        let mut push = |b: &[u8]| {
            if let Some(v) = value.as_deref_mut() {
                v.extend_from_slice(b);
            }
        };
        let mut backslash = false;
        let mut i = from + 1;
        while let Some(&b) = bytes.get(i) {
            if b == b'\\' && quote != b'`' {
                backslash = true;
                if !self.backslash_escapes {
                    push(b"\\");
                    i += 1;
                    continue;
                }
                match bytes.get(i + 1) {
                    Some(b'0') => push(b"\0"),
                    Some(b'b') => push(b"\x08"),
                    Some(b'n') => push(b"\n"),
                    Some(b'r') => push(b"\r"),
                    Some(b't') => push(b"\t"),
                    Some(b'Z') => push(b"\x1a"),
                    Some(b'%') => push(b"\\%"),
                    Some(b'_') => push(b"\\_"),
                    Some(c) => push(std::slice::from_ref(c)),
                    None => {}
                }
                i += 2;
            } else if b == quote {
                if bytes.get(i + 1) == Some(&quote) {
                    push(std::slice::from_ref(&quote));
                    i += 2;
                } else {
                    return Some(QuotedRun {
                        end: i + 1,
                        closed: true,
                        backslash,
                    });
                }
            } else {
                push(std::slice::from_ref(&b));
                i += 1;
            }
        }
        Some(QuotedRun {
            end: bytes.len(),
            closed: false,
            backslash,
        })
    }

    fn word_len(&self, from: usize, extra: &[u8]) -> usize {
        self.rest(from)
            .iter()
            .take_while(|&&b| {
                b.is_ascii_alphanumeric()
                    || b == b'_'
                    || b == b'$'
                    || b >= 0x80
                    || extra.contains(&b)
            })
            .count()
    }

    /// The text between two byte offsets ("" if they do not fall on characters).
    fn text(&self, from: usize, to: usize) -> &'a str {
        self.src.get(from..to).unwrap_or_default()
    }

    fn token(&mut self) -> Option<Tok<'a>> {
        let bytes = self.bytes();
        loop {
            while bytes.get(self.i).is_some_and(u8::is_ascii_whitespace) {
                self.i += 1;
            }
            let c = *bytes.get(self.i)?;
            self.start = self.i;
            match (c, self.at(1)) {
                (b'#', _) => self.skip_line(),
                (b'-', b'-') if self.at(2) <= b' ' => self.skip_line(),
                (b'/', b'*')
                    if self.at(2) == b'!' || (self.at(2) == b'M' && self.at(3) == b'!') =>
                {
                    // Executable comment: the server runs what is inside.
                    self.unsure = true;
                    self.exec_comment = true;
                    self.in_exec_comment = true;
                    self.i += if self.at(2) == b'!' { 3 } else { 4 };
                    while bytes.get(self.i).is_some_and(u8::is_ascii_digit) {
                        self.i += 1;
                    }
                }
                (b'/', b'*') => {
                    let body = self.rest(self.i + 2);
                    self.i = match body.windows(2).position(|w| w == b"*/") {
                        Some(p) => self.i + 2 + p + 2,
                        None => bytes.len(),
                    };
                }
                (b'*', b'/') if self.in_exec_comment => {
                    self.in_exec_comment = false;
                    self.i += 2;
                }
                (b'\'' | b'"' | b'`', _) => {
                    self.skip_quoted();
                    return Some(Tok::Quoted);
                }
                (b'@', b'@') => {
                    let start = self.i + 2;
                    self.i = start + self.word_len(start, b".");
                    return Some(Tok::SysVar(self.text(start, self.i)));
                }
                (b'@', _) => {
                    let start = self.i + 1;
                    self.i = start + self.word_len(start, b".");
                    return Some(Tok::UserVar(self.text(start, self.i)));
                }
                _ => {
                    let n = self.word_len(self.i, b"");
                    if n == 0 {
                        self.i += 1;
                        return Some(Tok::Sym(c));
                    }
                    let start = self.i;
                    self.i += n;
                    return Some(Tok::Word(self.text(start, self.i)));
                }
            }
        }
    }
}

impl<'a> Iterator for Lexer<'a> {
    type Item = Tok<'a>;

    fn next(&mut self) -> Option<Tok<'a>> {
        self.token()
    }
}

/// A quoted run: where it ends, whether its closing quote is there, whether it has a
/// backslash (read differently with `NO_BACKSLASH_ESCAPES`).
struct QuotedRun {
    end: usize,
    closed: bool,
    backslash: bool,
}

/// Case-insensitive keyword comparison.
pub(crate) fn eq(a: &str, b: &str) -> bool {
    a.eq_ignore_ascii_case(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(sql: &str, escapes: bool) -> Vec<Tok<'_>> {
        Lexer::with_backslash_escapes(sql, escapes).collect()
    }

    #[test]
    fn backslashes_read_both_ways() {
        // Default: one string. NO_BACKSLASH_ESCAPES: the string ends at the second quote.
        let sql = r"SELECT 'a\'; DELETE FROM t; -- '";
        assert_eq!(tokens(sql, true), vec![Tok::Word("SELECT"), Tok::Quoted]);
        let plain = tokens(sql, false);
        assert!(plain.contains(&Tok::Word("DELETE")), "{plain:?}");
    }

    #[test]
    fn words_variables_symbols() {
        assert_eq!(
            tokens("SELECT @a, @@session.x, é(1) /* c */ -- d\n#e", true),
            vec![
                Tok::Word("SELECT"),
                Tok::UserVar("a"),
                Tok::Sym(b','),
                Tok::SysVar("session.x"),
                Tok::Sym(b','),
                Tok::Word("é"),
                Tok::Sym(b'('),
                Tok::Word("1"),
                Tok::Sym(b')'),
            ]
        );
        let mut lexer = Lexer::new("/*!50000 SELECT 1 */");
        assert_eq!(lexer.by_ref().count(), 2);
        assert!(lexer.exec_comment && lexer.unsure);
    }

    #[test]
    fn comments_by_mysqls_rules() {
        // `--` is a comment only before a space or control character.
        assert_eq!(
            tokens("--x\n--\tgone\n-- gone\n--", true),
            vec![Tok::Sym(b'-'), Tok::Sym(b'-'), Tok::Word("x")]
        );
        // The text of an executable comment is SQL, with or without a version.
        let set = vec![
            Tok::Word("SET"),
            Tok::Word("workload"),
            Tok::Sym(b'='),
            Tok::Quoted,
        ];
        for sql in [
            "/*!SET workload = 'olap' */",
            "/*!50100 SET workload = 'olap'*/",
            "/*M!100100 SET workload = 'olap' */",
            "SET /*! workload */ = /*!80000'olap'*/",
        ] {
            let mut lexer = Lexer::new(sql);
            assert_eq!(lexer.by_ref().collect::<Vec<_>>(), set, "{sql}");
            assert!(lexer.exec_comment, "{sql}");
        }
        // `/*M` without `!` is a plain comment.
        let mut lexer = Lexer::new("/*M SET workload = 'olap' */ /*Mx*/");
        assert_eq!(lexer.by_ref().count(), 0);
        assert!(!lexer.exec_comment && !lexer.unsure);
    }

    /// The value of the first token of `sql`, read with or without backslash escapes.
    fn value(sql: &str, escapes: bool) -> Option<String> {
        let mut lexer = Lexer::with_backslash_escapes(sql, escapes);
        lexer.next();
        lexer.quoted_value()
    }

    #[test]
    fn quoted_values_as_the_server_reads_them() {
        for (sql, escapes, want) in [
            ("'olap'", true, Some("olap")),
            ("''", true, Some("")),
            ("\"olap\"", true, Some("olap")),
            ("`olap`", true, Some("olap")),
            ("'o''lap'", true, Some("o'lap")),
            ("\"o\"\"lap\"", true, Some("o\"lap")),
            ("`o``lap`", true, Some("o`lap")),
            // Backslash escapes, MySQL's table.
            (r"'a\'b'", true, Some("a'b")),
            (r#"'\0\b\n\r\t\Z\\\"'"#, true, Some("\0\x08\n\r\t\x1a\\\"")),
            (r"'\%\_\q\é'", true, Some(r"\%\_qé")),
            // NO_BACKSLASH_ESCAPES: a backslash is a character.
            (r"'a\'", false, Some(r"a\")),
            (r"'\n\\'", false, Some(r"\n\\")),
            // Never in backquoted identifiers.
            (r"`a\`", true, Some(r"a\")),
            // A quote left open, an escaped last quote, a trailing backslash.
            ("'olap", true, None),
            (r"'olap\'", true, None),
            ("'olap\\", true, None),
            ("``", true, Some("")),
            // Not a quoted token.
            ("olap", true, None),
            ("@@workload", true, None),
        ] {
            assert_eq!(
                value(sql, escapes).as_deref(),
                want,
                "{sql} (escapes: {escapes})"
            );
        }
        // The value is the last token's, wherever it is.
        let mut lexer = Lexer::new("SET x = /* c */ 'a''b' ;");
        assert_eq!(lexer.quoted_value(), None);
        let toks: Vec<_> = lexer.by_ref().take(4).collect();
        assert_eq!(toks.last(), Some(&Tok::Quoted));
        assert_eq!(lexer.quoted_value().as_deref(), Some("a'b"));
        assert_eq!(lexer.next(), Some(Tok::Sym(b';')));
        assert_eq!(lexer.quoted_value(), None);
        // Before any token, a text that starts with a quote has no value yet.
        assert_eq!(Lexer::new("'a'").quoted_value(), None);
    }
}
