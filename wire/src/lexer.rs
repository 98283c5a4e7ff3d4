//! The small SQL lexer both classifiers share. It is not a parser: it skips whitespace,
//! comments and quoted strings/identifiers, and yields words, variables and symbols.
//! It never fails and never panics: any text is some sequence of tokens.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Tok<'a> {
    /// A keyword or unquoted identifier (or number).
    Word(&'a str),
    /// `@name`: a user variable, session state.
    UserVar,
    /// `@@[scope.]name`: a system variable (the text after `@@`).
    SysVar(&'a str),
    /// A string literal or a quoted identifier.
    Quoted,
    Sym(u8),
}

pub(crate) struct Lexer<'a> {
    src: &'a str,
    i: usize,
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
    pub(crate) fn new(src: &'a str) -> Self {
        Self::with_backslash_escapes(src, true)
    }

    /// A lexer for one reading of backslashes in strings: escapes (the default
    /// `sql_mode`) or plain characters (`NO_BACKSLASH_ESCAPES`).
    pub(crate) fn with_backslash_escapes(src: &'a str, backslash_escapes: bool) -> Self {
        Lexer {
            src,
            i: 0,
            backslash_escapes,
            in_exec_comment: false,
            unsure: false,
            exec_comment: false,
        }
    }

    /// The byte offset just past the last token returned (placeholder.rs).
    pub(crate) fn offset(&self) -> usize {
        self.i
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

    /// Skips a quoted run starting at the opening quote; `\` escapes except in
    /// backquoted identifiers (and with `NO_BACKSLASH_ESCAPES`); a doubled quote is
    /// a literal quote.
    fn skip_quoted(&mut self, quote: u8) {
        let len = self.bytes().len();
        self.i += 1;
        while let Some(&b) = self.bytes().get(self.i) {
            if b == b'\\' && quote != b'`' {
                self.unsure = true;
                self.i += if self.backslash_escapes { 2 } else { 1 };
            } else if b == quote {
                if self.at(1) == quote {
                    self.i += 2;
                } else {
                    self.i += 1;
                    return;
                }
            } else {
                self.i += 1;
            }
        }
        self.i = len;
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
                    self.skip_quoted(c);
                    return Some(Tok::Quoted);
                }
                (b'@', b'@') => {
                    let start = self.i + 2;
                    self.i = start + self.word_len(start, b".");
                    return Some(Tok::SysVar(self.text(start, self.i)));
                }
                (b'@', _) => {
                    self.i += 1 + self.word_len(self.i + 1, b".");
                    return Some(Tok::UserVar);
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
                Tok::UserVar,
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
}
