//! The authentication methods of a MySQL account, read from the `IDENTIFIED`
//! clause of `SHOW CREATE USER` as MariaDB and MySQL 8 print it:
//!
//! ```text
//! MariaDB: ... IDENTIFIED BY PASSWORD '*hash'                       → mysql_native_password
//!          ... IDENTIFIED VIA mysql_native_password USING '*h' OR unix_socket
//! MySQL 8: ... IDENTIFIED WITH 'caching_sha2_password' AS '...' [AND IDENTIFIED WITH '...']
//! ```
//!
//! Every method is returned, because MariaDB tries each in turn: an account with
//! `... OR unix_socket` lets in any password through the socket. Anything the
//! grammar does not expect is an error, so the caller can refuse (fail closed).

/// One lexical token of the statement. Quoted strings and identifiers are
/// unquoted, so a user name can never be mistaken for a keyword.
#[derive(Debug, PartialEq)]
enum Token {
    Word(String),
    Quoted(String),
    Punct(char),
}

fn tokens(sql: &str) -> Result<Vec<Token>, String> {
    let mut out = Vec::new();
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_whitespace() {
            continue;
        }
        if c.is_ascii_alphanumeric() || c == '_' || c == '$' {
            let mut word = String::from(c);
            while let Some(&n) = chars.peek() {
                if !(n.is_ascii_alphanumeric() || n == '_' || n == '$') {
                    break;
                }
                word.push(n);
                chars.next();
            }
            out.push(Token::Word(word));
        } else if matches!(c, '\'' | '"' | '`') {
            let mut text = String::new();
            loop {
                match chars.next() {
                    None => return Err("unterminated quoted string".into()),
                    // '' inside '...' (and `` inside `...`) is one quote.
                    Some(q) if q == c => {
                        if chars.peek() == Some(&c) {
                            text.push(c);
                            chars.next();
                        } else {
                            break;
                        }
                    }
                    Some('\\') if c != '`' => match chars.next() {
                        Some(e) => text.push(e),
                        None => return Err("unterminated quoted string".into()),
                    },
                    Some(other) => text.push(other),
                }
            }
            out.push(Token::Quoted(text));
        } else {
            out.push(Token::Punct(c));
        }
    }
    Ok(out)
}

/// `0x` and one or more hex digits.
fn is_hex_literal(w: &str) -> bool {
    w.len() > 2
        && (w.starts_with("0x") || w.starts_with("0X"))
        && w[2..].bytes().all(|b| b.is_ascii_hexdigit())
}

struct Parser {
    tokens: Vec<Token>,
    at: usize,
}

impl Parser {
    fn keyword(&mut self, words: &[&str]) -> Option<String> {
        match self.tokens.get(self.at) {
            Some(Token::Word(w)) if words.iter().any(|k| w.eq_ignore_ascii_case(k)) => {
                self.at += 1;
                Some(w.to_ascii_uppercase())
            }
            _ => None,
        }
    }

    fn quoted(&mut self) -> Option<String> {
        match self.tokens.get(self.at) {
            Some(Token::Quoted(s)) => {
                let s = s.clone();
                self.at += 1;
                Some(s)
            }
            _ => None,
        }
    }

    /// A plugin name: a bare word (MariaDB) or a quoted one (MySQL).
    fn plugin(&mut self) -> Result<String, String> {
        let name = match self.tokens.get(self.at) {
            Some(Token::Word(w) | Token::Quoted(w)) => w.to_ascii_lowercase(),
            other => {
                return Err(format!(
                    "expected an authentication plugin, found {other:?}"
                ))
            }
        };
        self.at += 1;
        Ok(name)
    }

    /// `USING '...'` / `AS '...'` after a plugin: the stored secret, skipped.
    /// MySQL 8 prints it three ways: quoted; as a hex literal (`AS 0x2441...`,
    /// with `print_identified_with_as_hex`); and, to an account that may not
    /// read `mysql.user` (any ordinary one, asking about itself), as `AS <secret>`.
    fn skip_secret(&mut self) -> Result<(), String> {
        if self.keyword(&["USING", "AS", "BY"]).is_none() || self.quoted().is_some() {
            return Ok(());
        }
        match self.tokens.get(self.at..self.at + 3) {
            Some([Token::Punct('<'), Token::Word(w), Token::Punct('>')]) if w == "secret" => {
                self.at += 3;
                return Ok(());
            }
            _ => {}
        }
        match self.tokens.get(self.at) {
            Some(Token::Word(w)) if is_hex_literal(w) => {
                self.at += 1;
                Ok(())
            }
            _ => Err("expected a quoted authentication string".into()),
        }
    }

    /// One method after `IDENTIFIED` (with MariaDB's `OR` alternatives).
    fn method(&mut self, plugins: &mut Vec<String>) -> Result<(), String> {
        match self.keyword(&["BY", "VIA", "WITH"]).as_deref() {
            Some("BY") => {
                self.keyword(&["PASSWORD"]);
                self.quoted().ok_or("expected a password hash after BY")?;
                plugins.push("mysql_native_password".into());
            }
            Some(_) => loop {
                plugins.push(self.plugin()?);
                self.skip_secret()?;
                if self.keyword(&["OR"]).is_none() {
                    break;
                }
            },
            None => return Err("expected BY, VIA or WITH after IDENTIFIED".into()),
        }
        Ok(())
    }
}

/// The authentication plugins of the account `show_create_user` describes, in
/// order. An account without an `IDENTIFIED` clause has no password and uses
/// `mysql_native_password`.
pub fn auth_plugins(show_create_user: &str) -> Result<Vec<String>, String> {
    let tokens = tokens(show_create_user)?;
    let start = tokens
        .iter()
        .position(|t| matches!(t, Token::Word(w) if w.eq_ignore_ascii_case("IDENTIFIED")));
    let Some(start) = start else {
        return Ok(vec!["mysql_native_password".into()]);
    };
    let mut p = Parser {
        tokens,
        at: start + 1,
    };
    let mut plugins = Vec::new();
    p.method(&mut plugins)?;
    // MySQL's multi-factor accounts: `AND IDENTIFIED WITH ...`.
    while p.keyword(&["AND"]).is_some() {
        p.keyword(&["IDENTIFIED"])
            .ok_or("expected IDENTIFIED after AND")?;
        p.method(&mut plugins)?;
    }
    Ok(plugins)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plugins(s: &str) -> Vec<String> {
        auth_plugins(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn mariadb_forms() {
        // Each line as MariaDB 10.11 printed it (SHOW CREATE USER / SHOW GRANTS).
        assert_eq!(
            plugins("CREATE USER `ferry`@`localhost` IDENTIFIED BY PASSWORD '*820FCA908732BBB406007708B416E40E194CB857'"),
            ["mysql_native_password"]
        );
        assert_eq!(
            plugins("GRANT USAGE ON *.* TO `sock`@`localhost` IDENTIFIED VIA unix_socket"),
            ["unix_socket"]
        );
        assert_eq!(
            plugins("CREATE USER `combo`@`localhost` IDENTIFIED VIA mysql_native_password USING '*D821809F681A40A6E379B50D0463EFAE20BDD122' OR unix_socket"),
            ["mysql_native_password", "unix_socket"]
        );
        assert_eq!(
            plugins("CREATE USER `root`@`localhost` IDENTIFIED VIA mysql_native_password USING 'invalid' OR unix_socket WITH GRANT OPTION"),
            ["mysql_native_password", "unix_socket"]
        );
        assert_eq!(
            plugins("CREATE USER `e`@`%` IDENTIFIED VIA ed25519 USING 'ZIgUREUg5PVgQ6LskhXmO+eZLS0nC8be6HPjYWR4YJY' PASSWORD EXPIRE NEVER"),
            ["ed25519"]
        );
        assert_eq!(plugins("CREATE USER `nopw`@`%`"), ["mysql_native_password"]);
    }

    #[test]
    fn mysql8_forms() {
        assert_eq!(
            plugins("CREATE USER `u`@`%` IDENTIFIED WITH 'caching_sha2_password' AS '$A$005$x\\'y' REQUIRE NONE PASSWORD EXPIRE DEFAULT ACCOUNT UNLOCK"),
            ["caching_sha2_password"]
        );
        assert_eq!(
            plugins("CREATE USER 'ops'@'localhost' IDENTIFIED WITH 'auth_socket' REQUIRE NONE"),
            ["auth_socket"]
        );
        assert_eq!(
            plugins("CREATE USER `m`@`%` IDENTIFIED WITH 'caching_sha2_password' AS '<secret>' AND IDENTIFIED WITH 'authentication_fido'"),
            ["caching_sha2_password", "authentication_fido"]
        );
        // As MySQL 8.0.33 printed it to the account itself (no SELECT on mysql.user).
        assert_eq!(
            plugins("CREATE USER `ferry`@`localhost` IDENTIFIED WITH 'caching_sha2_password' AS <secret> REQUIRE NONE PASSWORD EXPIRE DEFAULT ACCOUNT UNLOCK PASSWORD HISTORY DEFAULT PASSWORD REUSE INTERVAL DEFAULT PASSWORD REQUIRE CURRENT DEFAULT"),
            ["caching_sha2_password"]
        );
        // print_identified_with_as_hex=ON, for a hash with unprintable bytes.
        assert_eq!(
            plugins("CREATE USER `u`@`%` IDENTIFIED WITH 'caching_sha2_password' AS 0x244124303035240A7F REQUIRE NONE"),
            ["caching_sha2_password"]
        );
    }

    #[test]
    fn names_and_secrets_are_never_keywords() {
        // A user or host named like a keyword, and a secret that looks like a clause.
        assert_eq!(
            plugins(
                "CREATE USER `IDENTIFIED`@`VIA` IDENTIFIED VIA ed25519 USING 'x OR unix_socket'"
            ),
            ["ed25519"]
        );
        assert_eq!(
            plugins("CREATE USER 'it''s'@'h' IDENTIFIED WITH 'mysql_native_password' AS '*A'"),
            ["mysql_native_password"]
        );
    }

    #[test]
    fn anything_unexpected_is_an_error() {
        for bad in [
            "CREATE USER `u`@`%` IDENTIFIED",
            "CREATE USER `u`@`%` IDENTIFIED SOMEHOW",
            "CREATE USER `u`@`%` IDENTIFIED VIA",
            "CREATE USER `u`@`%` IDENTIFIED VIA x USING",
            "CREATE USER `u`@`%` IDENTIFIED BY PASSWORD",
            "CREATE USER `u`@`%` IDENTIFIED VIA x OR",
            "CREATE USER `u`@`%` IDENTIFIED WITH 'x' AND WITH 'y'",
            "CREATE USER `u`@`%` IDENTIFIED VIA x USING 'unterminated",
            "CREATE USER `u`@`%` IDENTIFIED WITH 'x' AS <other>",
            "CREATE USER `u`@`%` IDENTIFIED WITH 'x' AS 0x",
            "CREATE USER `u`@`%` IDENTIFIED WITH 'x' AS 0xZZ",
            "CREATE USER `u`@`%` IDENTIFIED WITH 'x' AS secret",
        ] {
            assert!(auth_plugins(bad).is_err(), "{bad}");
        }
    }
}
