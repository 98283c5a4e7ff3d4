//! gRPC-Web text (`application/grpc-web-text`): the body is base64 (standard alphabet,
//! padded) of what a binary gRPC-Web body would be.
//!
//! A request may come as several padded segments, one after the other (a client
//! encoding frame by frame). Envoy's grpc_web filter decodes whatever whole 4-character
//! groups have arrived, so padding can end a segment at any group boundary; [`decode`]
//! accepts the same: it splits the body after each group that holds padding and
//! decodes the segments in turn. The output is never larger than 3/4 of the body,
//! which `max_request_bytes` bounds already.
//!
//! An answer is written as the filter produces it, each piece (one or more whole
//! frames) as one padded segment ([`encode`]), as Envoy pads each frame: a client
//! decoding segment by segment and one decoding the whole body both read it.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;

/// Decodes a text body: `Err` says why it is not base64.
pub fn decode(text: &[u8]) -> Result<Vec<u8>, String> {
    if !text.len().is_multiple_of(4) {
        return Err(format!(
            "{} characters, not a whole number of 4-character groups",
            text.len()
        ));
    }
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    let mut rest = text;
    while !rest.is_empty() {
        // The segment ends with the first group that holds padding, or with the body.
        let end = rest
            .iter()
            .position(|&b| b == b'=')
            .map_or(rest.len(), |at| {
                (at / 4 + 1).saturating_mul(4).min(rest.len())
            });
        let (segment, tail) = rest.split_at(end);
        let start = text.len() - rest.len();
        STANDARD
            .decode_vec(segment, &mut out)
            .map_err(|e| format!("at character {}: {e}", start.saturating_add(offset(&e))))?;
        rest = tail;
    }
    Ok(out)
}

/// Where in its segment a decoding error is.
fn offset(e: &base64::DecodeError) -> usize {
    match e {
        base64::DecodeError::InvalidByte(at, _) | base64::DecodeError::InvalidLastSymbol(at, _) => {
            *at
        }
        base64::DecodeError::InvalidLength(_) | base64::DecodeError::InvalidPadding => 0,
    }
}

/// One piece of an answer, as one padded segment.
pub fn encode(bytes: &[u8]) -> Vec<u8> {
    STANDARD.encode(bytes).into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_segment() {
        let body = b"\0\0\0\0\x03abc";
        assert_eq!(decode(&encode(body)).unwrap(), body);
        assert_eq!(decode(b"").unwrap(), b"");
    }

    #[test]
    fn padded_segments_one_after_the_other() {
        // Frame by frame, each padded (as Envoy writes answers, as some clients send).
        let (a, b, c) = (
            &b"\0\0\0\0\x02xy"[..],
            &b"\0\0\0\0\x03xyz"[..],
            &b"\x80\0\0\0\x01!"[..],
        );
        let mut text = encode(a);
        text.extend(encode(b));
        text.extend(encode(c));
        assert_eq!(
            text.iter().filter(|&&x| x == b'=').count(),
            3,
            "padded in the middle"
        );
        assert_eq!(decode(&text).unwrap(), [a, b, c].concat());
        // A one-byte segment ("xx==") and a two-byte one ("xxx=") between others.
        let mut text = encode(b"abc");
        text.extend(encode(b"d"));
        text.extend(encode(b"ef"));
        text.extend(encode(b"ghi"));
        assert_eq!(decode(&text).unwrap(), b"abcdefghi");
    }

    #[test]
    fn bad_base64_is_refused_with_where() {
        let e = decode(b"AAAAA").unwrap_err();
        assert!(e.contains("5 characters"), "{e}");
        let e = decode(b"AAAA!AAA").unwrap_err();
        assert!(e.contains("at character 4"), "{e}");
        // Padding that does not end its group, and a group of padding alone.
        assert!(decode(b"AA=A").is_err());
        assert!(decode(b"AAAA====").is_err());
        // Whitespace is not base64 (nor does Envoy skip it).
        assert!(decode(b"AAAA\r\nAA").is_err());
    }
}
