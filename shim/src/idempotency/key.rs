//! The `Idempotency-Key` request header.
use crate::connect::error::ConnectError;
use ferry_proto::vitess::vtrpc::Code;

/// The request header (lower case, as HTTP/2 carries it).
pub const HEADER: &str = "idempotency-key";
/// The answer's header when the stored answer is replayed.
pub const REPLAYED: &str = "idempotent-replayed";

/// Longest key accepted (the record's column).
pub const MAX_LEN: usize = 255;

/// A client's key: 1 to 255 visible ASCII characters. The draft makes it a structured
/// field string (`"..."`); the quotes are taken off when present.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Key(pub String);

impl Key {
    pub fn parse(value: &[u8]) -> Result<Key, ConnectError> {
        let bad =
            |why: &str| ConnectError::new(Code::InvalidArgument, format!("Idempotency-Key: {why}"));
        let value = match value {
            [b'"', inner @ .., b'"'] => inner,
            v => v,
        };
        if value.is_empty() {
            return Err(bad("empty"));
        }
        if value.len() > MAX_LEN {
            return Err(bad(&format!("longer than {MAX_LEN} characters")));
        }
        if !value.iter().all(|b| b.is_ascii_graphic() || *b == b' ') {
            return Err(bad("only visible ASCII characters"));
        }
        Ok(Key(String::from_utf8_lossy(value).into_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_as_the_draft_writes_them() {
        assert_eq!(Key::parse(b"abc-123").unwrap().0, "abc-123");
        assert_eq!(Key::parse(b"\"8e03978e-40d5\"").unwrap().0, "8e03978e-40d5");
        for bad in [&b""[..], b"\"\"", &[b'a'; 256], b"caf\xc3\xa9", b"a\nb"] {
            assert_eq!(
                Key::parse(bad).unwrap_err().code,
                Code::InvalidArgument,
                "{bad:?}"
            );
        }
    }
}
