//! Short-lived tokens instead of passwords (docs/guides/tokens.md). Envoy verifies the
//! token (its `jwt_authn` filter: signature against a JWKS, issuer, audience, expiry;
//! envoy/tokens.yaml), removes it from the request and hands the shim its verified
//! claims in `x-ferry-token-claims` (a client's own value of that header is removed
//! before, by envoy/ferry.yaml and the scenarios made from it). One claim (`FERRY_TOKEN_CLAIM`) names
//! an account; `FERRY_TOKEN_ACCOUNTS` maps its values to MySQL users, whose passwords
//! are in a file only the shim can read (`FERRY_TOKEN_SECRETS_FILE`). The request then
//! runs as that user, under the same rules as a password's: the token never reaches
//! MySQL, and administrators are not served.
//!
//! The shim trusts the claims header from whoever reaches it: with tokens on, only
//! Envoy may (a unix socket, loopback, or the mesh's mTLS).
pub mod accounts;
mod claims;
pub mod settings;

use crate::connect::error::ConnectError;
use crate::credentials::{self, Credentials};
use accounts::TokenAccounts;
use ferry_proto::vitess::vtrpc::Code;

/// How a request authenticated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Via {
    Password,
    Token,
}

/// The request's MySQL credentials: its own `Authorization: Basic`, or the account its
/// verified token maps to.
pub fn request_credentials(
    tokens: Option<&TokenAccounts>,
    authorization: Option<&[u8]>,
    claims: Option<&[u8]>,
) -> Result<(Credentials, Via), ConnectError> {
    let refused = |msg: String| ConnectError::new(Code::Unauthenticated, msg);
    match (claims, authorization) {
        (Some(_), Some(_)) => Err(refused(
            "a request carries both an Authorization header and a verified token's claims: Envoy's jwt_authn must remove the token it verified (forward: false)".into(),
        )),
        (Some(claims), None) => match tokens {
            Some(t) => t.credentials(claims).map(|c| (c, Via::Token)).map_err(refused),
            None => Err(refused(
                "this gateway maps no token to a MySQL account (FERRY_TOKEN_ACCOUNTS is empty); use Basic credentials".into(),
            )),
        },
        (None, Some(a)) if ferry_wire::bearer::is_bearer(a) => Err(refused(
            "a Bearer token reached the shim unverified: this gateway's Envoy does not verify tokens (envoy/tokens.yaml does); use Basic credentials".into(),
        )),
        (None, authorization) => credentials::parse_basic(authorization)
            .map(|c| (c, Via::Password))
            .map_err(|m| refused(m.into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_token_or_neither() {
        let (c, via) = request_credentials(None, Some(b"Basic dTpwdw"), None).unwrap();
        assert_eq!((c.user.as_str(), via), ("u", Via::Password));
        let msg = |r: Result<(Credentials, Via), ConnectError>| r.unwrap_err().message;
        assert!(msg(request_credentials(None, Some(b"Bearer a.b.c"), None)).contains("unverified"));
        assert!(msg(request_credentials(None, None, Some(b"e30"))).contains("FERRY_TOKEN_ACCOUNTS"));
        assert!(msg(request_credentials(
            None,
            Some(b"Basic dTpwdw"),
            Some(b"e30")
        ))
        .contains("both"));
        assert!(msg(request_credentials(None, None, None)).contains("missing"));
    }
}
