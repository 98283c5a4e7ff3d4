//! The credential check the filter does itself, with the shim's own reading of
//! `Authorization: Basic` (ferry-wire): whether the credentials are right is the
//! shim's business (they are the database's); the filter refuses requests that cannot
//! carry any, and a header larger than the shim's limit, with a clear error. A
//! `Bearer` token passes: Envoy's jwt_authn, after this filter (envoy/tokens.yaml),
//! verifies it; where none runs, the shim refuses it.

use ferry_wire::basic_auth::{self, AuthError};
use ferry_wire::bearer;

use crate::errors::{Code, Rejection};

/// Checks the `Authorization` header: `Basic base64(user:password)` with a non-empty
/// user (the password may be empty: refusing that is the shim's policy).
pub fn check_credentials(header: Option<&str>) -> Result<(), Rejection> {
    let bytes = header.map(str::as_bytes);
    if bytes.is_some_and(|h| h.len() <= basic_auth::MAX_HEADER_BYTES && bearer::is_bearer(h)) {
        return Ok(());
    }
    match basic_auth::parse(bytes) {
        Ok(_) => Ok(()),
        // Not a credential problem: the request is too large to be served at all.
        Err(AuthError::TooLarge) => Err(Rejection::new(
            Code::ResourceExhausted,
            AuthError::TooLarge.message(),
        )
        .with_http_status(431)),
        Err(e) => Err(Rejection::new(Code::Unauthenticated, e.message())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(header: Option<&str>) -> String {
        check_credentials(header).unwrap_err().message
    }

    #[test]
    fn accepts_basic_user_password() {
        assert!(check_credentials(Some("Basic dXNlcjpwYXNz")).is_ok()); // user:pass
        assert!(check_credentials(Some("basic  dXNlcjpwYXNz ")).is_ok());
        assert!(check_credentials(Some("Basic dXNlcjo=")).is_ok()); // user: (empty password)
        assert!(check_credentials(Some("Basic dXNlcjo")).is_ok()); // unpadded
    }

    #[test]
    fn refuses_everything_else() {
        assert_eq!(
            msg(None),
            "missing Authorization header (Basic credentials required)"
        );
        assert_eq!(msg(Some("")), "Authorization must be Basic credentials (or a Bearer token where the gateway verifies tokens)");
        assert_eq!(
            msg(Some("Digest abc")),
            "Authorization must be Basic credentials (or a Bearer token where the gateway verifies tokens)"
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
        assert_eq!(
            check_credentials(None).unwrap_err().code,
            Code::Unauthenticated
        );
    }

    #[test]
    fn a_bearer_token_passes_to_envoys_jwt_authn() {
        assert!(check_credentials(Some("Bearer eyJ.eyJ.sig")).is_ok());
        assert_eq!(
            msg(Some("Bearer ")),
            "Authorization must be Basic credentials (or a Bearer token where the gateway verifies tokens)"
        );
        let huge = format!("Bearer {}", "a".repeat(5000));
        assert_eq!(
            check_credentials(Some(&huge)).unwrap_err().code,
            Code::ResourceExhausted
        );
    }

    #[test]
    fn an_oversized_header_is_refused_by_the_gateway() {
        let huge = format!("Basic {}", "QUFB".repeat(15_000)); // 60 KB
        let r = check_credentials(Some(&huge)).unwrap_err();
        assert_eq!(r.code, Code::ResourceExhausted);
        assert_eq!(r.connect_http_status(), 431);
        assert!(r.message.contains("4096-byte limit"), "{}", r.message);
    }
}
