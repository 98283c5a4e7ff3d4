//! The credential check the filter does itself: an `Authorization: Basic` header with
//! base64 `user:password`. Whether the credentials are right is the shim's business
//! (they are the database's); the filter refuses requests that cannot carry any.

use base64::{
    alphabet,
    engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig},
    Engine,
};

use crate::errors::{Code, Rejection};

/// Standard base64, padding optional.
const BASE64: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// Checks the `Authorization` header: `Basic base64(user:password)` with a non-empty
/// user (the password may be empty).
pub fn check_basic(header: Option<&str>) -> Result<(), Rejection> {
    let header = header.ok_or_else(|| unauthenticated("missing Authorization header"))?;
    let (scheme, credentials) = header.trim().split_once(' ').unwrap_or((header.trim(), ""));
    if !scheme.eq_ignore_ascii_case("basic") {
        return Err(unauthenticated("Authorization must use the Basic scheme"));
    }
    let decoded = BASE64
        .decode(credentials.trim())
        .map_err(|_| unauthenticated("Basic credentials are not valid base64"))?;
    match decoded.iter().position(|&b| b == b':') {
        Some(0) => Err(unauthenticated("Basic credentials have an empty user name")),
        Some(_) => Ok(()),
        None => Err(unauthenticated("Basic credentials must be user:password")),
    }
}

fn unauthenticated(message: &str) -> Rejection {
    Rejection::new(Code::Unauthenticated, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(header: Option<&str>) -> String {
        check_basic(header).unwrap_err().message
    }

    #[test]
    fn accepts_basic_user_password() {
        assert!(check_basic(Some("Basic dXNlcjpwYXNz")).is_ok()); // user:pass
        assert!(check_basic(Some("basic  dXNlcjpwYXNz ")).is_ok());
        assert!(check_basic(Some("Basic dXNlcjo=")).is_ok()); // user: (empty password)
        assert!(check_basic(Some("Basic dXNlcjo")).is_ok()); // unpadded
    }

    #[test]
    fn refuses_everything_else() {
        assert_eq!(msg(None), "missing Authorization header");
        assert_eq!(msg(Some("")), "Authorization must use the Basic scheme");
        assert_eq!(
            msg(Some("Bearer abc")),
            "Authorization must use the Basic scheme"
        );
        assert_eq!(
            msg(Some("Basic")),
            "Basic credentials must be user:password"
        );
        assert_eq!(
            msg(Some("Basic !!!")),
            "Basic credentials are not valid base64"
        );
        assert_eq!(
            msg(Some("Basic dXNlcg==")),
            "Basic credentials must be user:password"
        );
        assert_eq!(
            msg(Some("Basic OnBhc3M=")),
            "Basic credentials have an empty user name"
        );
        assert_eq!(check_basic(None).unwrap_err().code, Code::Unauthenticated);
    }
}
