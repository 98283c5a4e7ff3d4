//! `Authorization: Basic base64(user:password)`: the MySQL credentials of a request.
use base64::Engine;
use std::fmt;

#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    pub user: String,
    pub password: String,
}

// Never print a password, not even in debug output.
impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("user", &self.user)
            .finish_non_exhaustive()
    }
}

/// Secret comparison that does not stop at the first differing byte.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

pub fn parse_basic(header: Option<&[u8]>) -> Result<Credentials, &'static str> {
    let header = header.ok_or("missing Authorization header (Basic credentials required)")?;
    let header = std::str::from_utf8(header).map_err(|_| "Authorization header is not text")?;
    let (scheme, encoded) = header
        .trim()
        .split_once(' ')
        .ok_or("Authorization must be Basic credentials")?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return Err("Authorization must be Basic credentials");
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .map_err(|_| "Basic credentials are not valid base64")?;
    let decoded = String::from_utf8(decoded).map_err(|_| "Basic credentials are not UTF-8")?;
    let (user, password) = decoded
        .split_once(':')
        .ok_or("Basic credentials must be user:password")?;
    if user.is_empty() {
        return Err("Basic credentials have an empty user name");
    }
    Ok(Credentials {
        user: user.to_owned(),
        password: password.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b64(s: &str) -> String {
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(s)
        )
    }

    #[test]
    fn parses_user_and_password_with_colons_in_the_password() {
        let c = parse_basic(Some(b64("ferry:pa:ss").as_bytes())).unwrap();
        assert_eq!((c.user.as_str(), c.password.as_str()), ("ferry", "pa:ss"));
        let c = parse_basic(Some(format!("basic  {}", &b64("u:")[6..]).as_bytes())).unwrap();
        assert_eq!(c.password, "");
    }

    #[test]
    fn rejects_everything_else() {
        for bad in [
            None,
            Some("Bearer x"),
            Some("Basic !!!"),
            Some("Basic"),
            Some(&b64("nouser")[..]),
            Some(&b64(":pw")[..]),
        ] {
            assert!(parse_basic(bad.map(str::as_bytes)).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn constant_time_eq_compares() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
    }

    #[test]
    fn debug_output_hides_the_password() {
        let c = Credentials {
            user: "u".into(),
            password: "secret".into(),
        };
        assert!(!format!("{c:?}").contains("secret"));
    }
}
