//! `Authorization: Basic base64(user:password)` (RFC 7617), read the same way by the
//! filter (which refuses what cannot carry credentials) and the shim (which uses
//! them): standard base64 with or without padding, UTF-8, a non-empty user. Whether
//! the credentials are right, or acceptable (an empty password), is the shim's call.

use std::fmt;

use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use base64::Engine;

/// The largest `Authorization` header accepted, in bytes. The gateway refuses a
/// larger one itself with a clear error; the shim accepts far larger headers, so its
/// HTTP server never answers 431 first.
pub const MAX_HEADER_BYTES: usize = 4096;

/// Standard base64, padding optional.
const BASE64: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

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

/// Why a header carries no usable credentials; the text is the client's message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthError {
    Missing,
    TooLarge,
    NotBasic,
    NotBase64,
    NotUtf8,
    NoColon,
    EmptyUser,
}

impl AuthError {
    pub fn message(self) -> &'static str {
        match self {
            AuthError::Missing => "missing Authorization header (Basic credentials required)",
            AuthError::TooLarge => "the Authorization header is larger than the 4096-byte limit",
            AuthError::NotBasic => "Authorization must be Basic credentials (or a Bearer token where the gateway verifies tokens)",
            AuthError::NotBase64 => "Basic credentials are not valid base64",
            AuthError::NotUtf8 => "Basic credentials are not UTF-8",
            AuthError::NoColon => "Basic credentials must be user:password",
            AuthError::EmptyUser => "Basic credentials have an empty user name",
        }
    }
}

impl fmt::Display for AuthError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

/// Reads the header's credentials.
pub fn parse(header: Option<&[u8]>) -> Result<Credentials, AuthError> {
    let header = header.ok_or(AuthError::Missing)?;
    if header.len() > MAX_HEADER_BYTES {
        return Err(AuthError::TooLarge);
    }
    let header = std::str::from_utf8(header)
        .map_err(|_| AuthError::NotBasic)?
        .trim();
    let (scheme, encoded) = header.split_once(' ').unwrap_or((header, ""));
    if !scheme.eq_ignore_ascii_case("basic") {
        return Err(AuthError::NotBasic);
    }
    let decoded = BASE64
        .decode(encoded.trim())
        .map_err(|_| AuthError::NotBase64)?;
    let decoded = String::from_utf8(decoded).map_err(|_| AuthError::NotUtf8)?;
    let (user, password) = decoded.split_once(':').ok_or(AuthError::NoColon)?;
    if user.is_empty() {
        return Err(AuthError::EmptyUser);
    }
    Ok(Credentials {
        user: user.to_owned(),
        password: password.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn basic(s: &str) -> Vec<u8> {
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(s)
        )
        .into_bytes()
    }

    fn err(h: &[u8]) -> AuthError {
        parse(Some(h)).unwrap_err()
    }

    #[test]
    fn reads_user_and_password() {
        let c = parse(Some(&basic("ferry:p:w"))).unwrap();
        assert_eq!((c.user.as_str(), c.password.as_str()), ("ferry", "p:w"));
        let c = parse(Some(b"basic   dTpw  ")).unwrap();
        assert_eq!((c.user.as_str(), c.password.as_str()), ("u", "p"));
        // Unpadded base64 is read as padded (one answer on both sides).
        assert_eq!(parse(Some(b"Basic dTpwdw")).unwrap().password, "pw");
        assert_eq!(parse(Some(b"Basic dTpwdw==")).unwrap().password, "pw");
        // An empty password parses: refusing it is the shim's policy.
        assert_eq!(parse(Some(&basic("u:"))).unwrap().password, "");
        assert!(!format!("{c:?}").contains('p'), "no password in Debug");
    }

    #[test]
    fn refusals() {
        assert_eq!(parse(None).unwrap_err(), AuthError::Missing);
        assert_eq!(err(b"Bearer x"), AuthError::NotBasic);
        assert_eq!(err(b"Basic"), AuthError::NoColon);
        assert_eq!(err(b"Basic %%%"), AuthError::NotBase64);
        assert_eq!(err(&basic("nocolon")), AuthError::NoColon);
        assert_eq!(err(&basic(":pw")), AuthError::EmptyUser);
        assert_eq!(err(b"Basic /w=="), AuthError::NotUtf8);
        assert_eq!(err(b"\xff\xfe"), AuthError::NotBasic);
        let huge = basic(&format!("u:{}", "x".repeat(60_000)));
        assert_eq!(err(&huge), AuthError::TooLarge);
        assert!(AuthError::TooLarge.message().contains("4096"));
    }
}
