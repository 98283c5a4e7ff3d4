//! `Authorization: Basic base64(user:password)`: the MySQL credentials of a request,
//! read exactly as the filter reads them (ferry-wire's `basic_auth`).
pub use ferry_wire::basic_auth::Credentials;

/// Secret comparison that does not stop at the first differing byte.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The request's credentials, or the client's message saying why there are none.
pub fn parse_basic(header: Option<&[u8]>) -> Result<Credentials, &'static str> {
    ferry_wire::basic_auth::parse(header).map_err(|e| e.message())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filters_reading() {
        // Unpadded base64 passes the filter, so the shim takes it too.
        let c = parse_basic(Some(b"Basic dTpwdw")).unwrap();
        assert_eq!((c.user.as_str(), c.password.as_str()), ("u", "pw"));
        assert!(parse_basic(None).is_err());
        assert!(parse_basic(Some(b"Bearer x")).is_err());
    }

    #[test]
    fn constant_time_eq_compares() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
    }
}
