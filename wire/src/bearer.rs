//! `Authorization: Bearer <token>`: a token for Envoy's jwt_authn to verify
//! (envoy/tokens.yaml). The filter lets it through to that filter; the shim never
//! sees one where tokens are verified (jwt_authn removes it), and refuses one that
//! reaches it unverified.

/// Whether the header uses the Bearer scheme with a non-empty token.
pub fn is_bearer(header: &[u8]) -> bool {
    let h = header.trim_ascii();
    match (h.get(..7), h.get(7..)) {
        (Some(scheme), Some(token)) => {
            scheme.eq_ignore_ascii_case(b"bearer ") && !token.trim_ascii().is_empty()
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scheme_and_a_token() {
        assert!(is_bearer(b"Bearer a.b.c"));
        assert!(is_bearer(b" bearer x "));
        assert!(!is_bearer(b"Bearer "));
        assert!(!is_bearer(b"Bearer"));
        assert!(!is_bearer(b"Basic dTpw"));
        assert!(!is_bearer(b""));
    }
}
