//! The client-facing header parsing of ferry-wire: Basic credentials
//! (`basic_auth::parse`, the filter's and the shim's), the 5-byte message envelope
//! header (`envelope::parse_header`) and the status names (`status::by_connect`,
//! `by_grpc`) read from an answer. No panic, and:
//! - accepted credentials have a non-empty user without `:`, come from a header of at
//!   most 4096 bytes, and encoding them again (`Basic base64(user:password)`) parses to
//!   the same credentials;
//! - credentials built from the input (user up to the first `:`, the rest as password)
//!   are parsed back exactly when they are valid and fit in the limit;
//! - an envelope header parses back to what `header` wrote; a status found by name or
//!   code has that name or code.
#![no_main]

use base64::Engine;
use ferry_wire::basic_auth::{self, AuthError, Credentials, MAX_HEADER_BYTES};
use ferry_wire::{envelope, status};
use libfuzzer_sys::fuzz_target;

fn basic(user: &str, password: &str) -> Vec<u8> {
    let encoded = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    format!("Basic {encoded}").into_bytes()
}

fuzz_target!(|data: &[u8]| {
    // The header as the client sent it.
    match basic_auth::parse(Some(data)) {
        Ok(c) => {
            assert!(data.len() <= MAX_HEADER_BYTES);
            assert!(!c.user.is_empty() && !c.user.contains(':'));
            let again = basic(&c.user, &c.password);
            assert_eq!(basic_auth::parse(Some(&again)), Ok(c.clone()));
            // Any case of the scheme, padding or not, spaces around.
            let lower = String::from_utf8(again)
                .unwrap()
                .replacen("Basic", "bAsIc", 1);
            let unpadded = format!("  {}  ", lower.trim_end_matches('='));
            assert_eq!(basic_auth::parse(Some(unpadded.as_bytes())), Ok(c));
        }
        Err(AuthError::TooLarge) => assert!(data.len() > MAX_HEADER_BYTES),
        Err(e) => {
            assert!(e != AuthError::Missing);
            assert!(!e.message().is_empty());
        }
    }

    // Credentials made from the input: parsed back exactly when valid.
    let text = String::from_utf8_lossy(data);
    let (user, password) = text.split_once(':').unwrap_or((&text, ""));
    let header = basic(user, password);
    let parsed = basic_auth::parse(Some(&header));
    if header.len() > MAX_HEADER_BYTES {
        assert_eq!(parsed, Err(AuthError::TooLarge));
    } else if user.is_empty() {
        assert_eq!(parsed, Err(AuthError::EmptyUser));
    } else {
        let want = Credentials {
            user: user.to_owned(),
            password: password.to_owned(),
        };
        assert_eq!(parsed, Ok(want));
    }

    // The envelope header.
    if let Some((flags, len)) = envelope::parse_header(data) {
        assert!(data.len() >= envelope::HEADER_LEN);
        let written = envelope::header(flags, len).expect("a u32 length");
        assert_eq!(&written[..], &data[..envelope::HEADER_LEN]);
    } else {
        assert!(data.len() < envelope::HEADER_LEN);
    }

    // Status names and codes from an answer.
    if let Some(s) = status::by_connect(&text) {
        assert_eq!(s.connect, text);
        assert_eq!(status::by_grpc(s.grpc), Some(s));
    }
    if let Some((head, _)) = data.split_first_chunk::<4>() {
        let code = u32::from_le_bytes(*head);
        if let Some(s) = status::by_grpc(code) {
            assert_eq!(s.grpc, code);
            assert_eq!(status::by_connect(s.connect), Some(s));
        }
    }
});
