//! Message compression as the filter applies it (the codecs are `ferry-compress`):
//! a request's encoding is read from its protocol's header and undone up to the
//! request limit; an answer's encoding is negotiated from the client's accept list in
//! our preference order, and each message is compressed only when it pays
//! ([`Policy`]: not below a size, not when a sample does not shrink).

use ferry_compress::{DecompressError, Encoding, Policy, SUPPORTED};

use crate::errors::{Code, Rejection};

/// The encoding a request names in `header` (absent or empty: identity); an unknown
/// one is `unimplemented`, listing what is supported.
pub fn request_encoding(header_name: &str, value: Option<&str>) -> Result<Encoding, Rejection> {
    let name = value.map(str::trim).unwrap_or_default();
    if name.is_empty() {
        return Ok(Encoding::Identity);
    }
    Encoding::parse(name).ok_or_else(|| {
        Rejection::new(
            Code::Unimplemented,
            format!("{header_name} {name:?} is not supported (supported: {SUPPORTED})"),
        )
    })
}

/// Undoes a request message's compression, refusing output past `limit` bytes.
pub fn decompress(encoding: Encoding, message: &[u8], limit: usize) -> Result<Vec<u8>, Rejection> {
    let mut out = Vec::new();
    ferry_compress::decompress(encoding, message, limit, &mut out).map_err(|e| match e {
        DecompressError::TooLarge { limit } => Rejection::new(
            Code::ResourceExhausted,
            format!(
                "the {} request message decompresses past the {limit}-byte limit",
                encoding.name()
            ),
        ),
        DecompressError::Corrupt(why) => Rejection::new(
            Code::InvalidArgument,
            format!(
                "the request message is not valid {}: {why}",
                encoding.name()
            ),
        ),
    })?;
    Ok(out)
}

/// The encoding an answer's messages may use, from the client's accept list.
pub fn negotiate(policy: &Policy, accept: Option<&str>) -> Encoding {
    ferry_compress::choose(accept, &policy.preference)
}

/// The codec Envoy's compressor will give a Connect unary answer: the first of
/// `envoy` (config `compression.envoy`) the client accepts.
pub fn negotiate_envoy(envoy: &[Encoding], accept: Option<&str>) -> Option<Encoding> {
    Some(ferry_compress::choose(accept, envoy)).filter(|&e| e != Encoding::Identity)
}

/// The header edit that tells Envoy's compressor to leave an answer as it is.
pub fn no_transform() -> (&'static str, String) {
    ("cache-control", "no-transform".to_owned())
}

/// Compresses `message` with `encoding` into `out` if it pays; the encoding used
/// (identity: `out` untouched, send `message` itself).
pub fn compress(
    policy: &Policy,
    encoding: Encoding,
    message: &[u8],
    out: &mut Vec<u8>,
) -> Encoding {
    if encoding == Encoding::Identity {
        return encoding;
    }
    policy.compress_adaptive(Some(encoding.name()), message, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_encodings() {
        assert_eq!(
            request_encoding("grpc-encoding", None),
            Ok(Encoding::Identity)
        );
        assert_eq!(
            request_encoding("grpc-encoding", Some(" ")),
            Ok(Encoding::Identity)
        );
        assert_eq!(
            request_encoding("grpc-encoding", Some("S2")),
            Ok(Encoding::S2)
        );
        let e = request_encoding("content-encoding", Some("br")).unwrap_err();
        assert_eq!(e.code, Code::Unimplemented);
        assert_eq!(
            e.message,
            "content-encoding \"br\" is not supported (supported: identity, gzip, zstd, snappy, s2)"
        );
    }

    #[test]
    fn bombs_stop_at_the_limit() {
        let mut bomb = Vec::new();
        ferry_compress::compress(Encoding::Gzip, &vec![0; 1 << 20], &mut bomb);
        let e = decompress(Encoding::Gzip, &bomb, 1000).unwrap_err();
        assert_eq!(e.code, Code::ResourceExhausted);
        assert!(e.message.contains("1000-byte limit"), "{}", e.message);
        let e = decompress(Encoding::Zstd, b"not zstd", 1000).unwrap_err();
        assert_eq!(e.code, Code::InvalidArgument);
    }

    #[test]
    fn small_and_incompressible_messages_go_as_they_are() {
        let policy = Policy::default();
        let mut out = Vec::new();
        assert_eq!(
            compress(&policy, Encoding::Zstd, b"tiny", &mut out),
            Encoding::Identity
        );
        let text = b"SELECT * FROM t WHERE id = 1; ".repeat(100);
        assert_eq!(
            compress(&policy, Encoding::S2, &text, &mut out),
            Encoding::S2
        );
        assert!(out.len() < text.len() / 4);
        assert_eq!(negotiate(&policy, Some("gzip, s2")), Encoding::S2);
        let envoy = [Encoding::Zstd, Encoding::Gzip];
        assert_eq!(
            negotiate_envoy(&envoy, Some("s2, gzip")),
            Some(Encoding::Gzip)
        );
        assert_eq!(negotiate_envoy(&envoy, Some("s2, snappy")), None);
        assert_eq!(negotiate_envoy(&envoy, None), None);
        assert_eq!(negotiate_envoy(&[], Some("zstd")), None);
        assert_eq!(negotiate(&policy, None), Encoding::Identity);
    }
}
