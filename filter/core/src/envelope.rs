//! The 5-byte message envelope shared by gRPC and Connect streaming: a flags byte and
//! a 4-byte big-endian length, then the message. gRPC flags: bit 0 = compressed.
//! Connect streaming flags: bit 0 = compressed, bit 1 = end of stream.
//!
//! [`Decoder`] is incremental: it is fed body chunks of any size as they arrive and
//! yields each envelope once complete, keeping only the partial tail between chunks
//! (complete envelopes inside a chunk are handed out without a copy).

use std::fmt;
use std::ops::Range;

use crate::errors::{Code, Rejection};

use ferry_wire::envelope::parse_header;
pub use ferry_wire::envelope::{header, COMPRESSED, END_STREAM, HEADER_LEN};

/// Appends one envelope to `out`; `false` (and nothing appended) above 4 GiB - 1.
pub fn write(flags: u8, message: &[u8], out: &mut Vec<u8>) -> bool {
    let Some(header) = header(flags, message.len()) else {
        return false;
    };
    out.reserve(HEADER_LEN.saturating_add(message.len()));
    out.extend_from_slice(&header);
    out.extend_from_slice(message);
    true
}

/// Checks that a request body is exactly one envelope of `protocol` ("gRPC", "Connect
/// streaming") with no flag but [`COMPRESSED`]: its flags and the message's range.
pub fn single(body: &[u8], protocol: &str) -> Result<(u8, Range<usize>), Rejection> {
    let invalid = |message: String| Err(Rejection::new(Code::InvalidArgument, message));
    let Some((flags, declared)) = parse_header(body) else {
        return if body.is_empty() {
            invalid(format!(
                "missing {protocol} message: the request body is empty"
            ))
        } else {
            invalid(format!(
                "incomplete {protocol} frame header: {} of 5 bytes",
                body.len()
            ))
        };
    };
    if flags & !COMPRESSED != 0 {
        return invalid(format!("invalid {protocol} frame flags 0x{flags:02x}"));
    }
    let received = body.len().saturating_sub(HEADER_LEN);
    if received < declared {
        return invalid(format!(
            "truncated {protocol} message: the frame declares {declared} bytes, {received} arrived"
        ));
    }
    if received > declared {
        let extra = received - declared;
        return if extra >= HEADER_LEN {
            invalid(format!("more than one message in a {protocol} request"))
        } else {
            invalid(format!(
                "{extra} trailing bytes after the {protocol} message"
            ))
        };
    }
    Ok((flags, HEADER_LEN..body.len()))
}

/// Why a body's envelopes could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EnvelopeError {
    /// An envelope declares more than the decoder's limit; nothing of it was buffered.
    TooLarge { declared: usize, limit: usize },
    /// The body ended inside an envelope.
    Truncated { missing: usize },
}

impl fmt::Display for EnvelopeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EnvelopeError::TooLarge { declared, limit } => write!(
                f,
                "a message of {declared} bytes is larger than the {limit}-byte limit"
            ),
            EnvelopeError::Truncated { missing } => {
                write!(
                    f,
                    "the body ended {missing} bytes short of a complete message"
                )
            }
        }
    }
}

/// Reads envelopes out of a body that arrives in chunks.
#[derive(Debug)]
pub struct Decoder {
    limit: usize,
    /// The incomplete envelope carried over from earlier chunks (header included).
    tail: Vec<u8>,
}

impl Decoder {
    /// A decoder that refuses messages larger than `limit` bytes.
    pub fn new(limit: usize) -> Self {
        Decoder {
            limit,
            tail: Vec::new(),
        }
    }

    /// Feeds the next chunk; calls `each(flags, message)` for every envelope it
    /// completes, in order. Stops at the first error (from the body or from `each`).
    pub fn feed<E: From<EnvelopeError>>(
        &mut self,
        mut chunk: &[u8],
        mut each: impl FnMut(u8, &[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        // First complete the envelope carried over, copying only what it still needs.
        if !self.tail.is_empty() {
            if self.tail.len() < HEADER_LEN {
                let (head, rest) = take(chunk, HEADER_LEN - self.tail.len());
                self.tail.extend_from_slice(head);
                chunk = rest;
            }
            let Some(total) = self.needed()? else {
                return Ok(()); // the chunk ended inside the header
            };
            let (head, rest) = take(chunk, total.saturating_sub(self.tail.len()));
            self.tail.extend_from_slice(head);
            chunk = rest;
            if self.tail.len() < total {
                return Ok(()); // the chunk ended inside the message
            }
            let tail = std::mem::take(&mut self.tail);
            let (flags, message) = split(&tail);
            each(flags, message)?;
        }
        // Then hand out the chunk's complete envelopes in place.
        loop {
            let Some((flags, len)) = parse_header(chunk) else {
                self.tail.extend_from_slice(chunk);
                return Ok(());
            };
            self.check(len)?;
            let total = HEADER_LEN.saturating_add(len);
            match (chunk.get(HEADER_LEN..total), chunk.get(total..)) {
                (Some(message), Some(rest)) => {
                    each(flags, message)?;
                    chunk = rest;
                }
                // Kept as it grows: a declared length is not trusted for an
                // allocation (found by fuzzing: a header alone reserved 64 MiB).
                _ => {
                    self.tail.extend_from_slice(chunk);
                    return Ok(());
                }
            }
        }
    }

    /// At the end of the body: an error if it stopped inside an envelope.
    pub fn finish(&self) -> Result<(), EnvelopeError> {
        if self.tail.is_empty() {
            return Ok(());
        }
        let total = match parse_header(&self.tail) {
            Some((_, len)) => HEADER_LEN.saturating_add(len),
            None => HEADER_LEN,
        };
        Err(EnvelopeError::Truncated {
            missing: total.saturating_sub(self.tail.len()),
        })
    }

    /// Bytes buffered in the partial tail.
    #[cfg(test)]
    pub fn buffered(&self) -> usize {
        self.tail.len()
    }

    /// The carried-over envelope's total length, once its header is complete.
    fn needed(&self) -> Result<Option<usize>, EnvelopeError> {
        match parse_header(&self.tail) {
            Some((_, len)) => {
                self.check(len)?;
                Ok(Some(HEADER_LEN.saturating_add(len)))
            }
            None => Ok(None),
        }
    }

    fn check(&self, declared: usize) -> Result<(), EnvelopeError> {
        if declared > self.limit {
            return Err(EnvelopeError::TooLarge {
                declared,
                limit: self.limit,
            });
        }
        Ok(())
    }
}

/// The first `n` bytes of `chunk` (or all of it) and the rest.
fn take(chunk: &[u8], n: usize) -> (&[u8], &[u8]) {
    chunk.split_at(n.min(chunk.len()))
}

fn split(envelope: &[u8]) -> (u8, &[u8]) {
    match envelope.split_first() {
        Some((&flags, rest)) => (flags, rest.get(HEADER_LEN - 1..).unwrap_or_default()),
        None => (0, &[]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn envelope(flags: u8, message: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        assert!(write(flags, message, &mut out));
        out
    }

    fn decode_in_chunks(body: &[u8], chunk: usize) -> Result<Vec<(u8, Vec<u8>)>, EnvelopeError> {
        let mut decoder = Decoder::new(1 << 20);
        let mut out = Vec::new();
        for piece in body.chunks(chunk.max(1)) {
            decoder.feed::<EnvelopeError>(piece, |flags, m| {
                out.push((flags, m.to_vec()));
                Ok(())
            })?;
        }
        decoder.finish()?;
        Ok(out)
    }

    fn err(body: &[u8]) -> (Code, String) {
        let r = single(body, "gRPC").unwrap_err();
        (r.code, r.message)
    }

    #[test]
    fn single_messages() {
        assert_eq!(single(&envelope(0, b"abc"), "gRPC"), Ok((0, 5..8)));
        assert_eq!(single(&envelope(0, b""), "gRPC"), Ok((0, 5..5)));
        assert_eq!(
            single(&envelope(COMPRESSED, b"z"), "gRPC"),
            Ok((COMPRESSED, 5..6))
        );
        let inv = Code::InvalidArgument;
        let e = |m: &str| (inv, m.to_owned());
        assert_eq!(
            err(b""),
            e("missing gRPC message: the request body is empty")
        );
        assert_eq!(
            err(&[0, 0, 0]),
            e("incomplete gRPC frame header: 3 of 5 bytes")
        );
        assert_eq!(
            err(&[0, 0, 0, 0, 9, 1, 2]),
            e("truncated gRPC message: the frame declares 9 bytes, 2 arrived")
        );
        assert_eq!(
            err(&[0, 0, 0, 0, 1, 1, 2]),
            e("1 trailing bytes after the gRPC message")
        );
        let mut two = envelope(0, b"a");
        two.extend(envelope(0, b"b"));
        assert_eq!(err(&two), e("more than one message in a gRPC request"));
        assert_eq!(err(&[2, 0, 0, 0, 0]), e("invalid gRPC frame flags 0x02"));
    }

    #[test]
    fn any_chunking_yields_the_same_envelopes() {
        let mut body = envelope(0, b"first");
        body.extend(envelope(COMPRESSED, b""));
        body.extend(envelope(0, &[7; 300]));
        body.extend(envelope(END_STREAM, b"{}"));
        let expected = vec![
            (0, b"first".to_vec()),
            (COMPRESSED, Vec::new()),
            (0, vec![7; 300]),
            (END_STREAM, b"{}".to_vec()),
        ];
        for chunk in [1, 2, 4, 5, 6, 9, 64, 299, 1000] {
            assert_eq!(decode_in_chunks(&body, chunk).unwrap(), expected, "{chunk}");
        }
    }

    #[test]
    fn truncated_bodies_say_how_much_is_missing() {
        let body = envelope(0, b"hello");
        assert_eq!(
            decode_in_chunks(&body[..7], 3),
            Err(EnvelopeError::Truncated { missing: 3 })
        );
        assert_eq!(
            decode_in_chunks(&body[..3], 3),
            Err(EnvelopeError::Truncated { missing: 2 })
        );
        assert_eq!(decode_in_chunks(b"", 3), Ok(vec![]));
    }

    #[test]
    fn oversized_messages_are_refused_from_their_header() {
        let mut decoder = Decoder::new(10);
        let header = header(0, 11).unwrap();
        // Split header: refused once the header completes, before any message byte.
        let r = decoder.feed::<EnvelopeError>(&header[..2], |_, _| Ok(()));
        assert_eq!(r, Ok(()));
        let r = decoder.feed::<EnvelopeError>(&header[2..], |_, _| Ok(()));
        assert_eq!(
            r,
            Err(EnvelopeError::TooLarge {
                declared: 11,
                limit: 10
            })
        );
        let mut decoder = Decoder::new(10);
        let r = decoder.feed::<EnvelopeError>(&[0, 0xff, 0xff, 0xff, 0xff], |_, _| Ok(()));
        assert!(matches!(r, Err(EnvelopeError::TooLarge { .. })));
        assert_eq!(decoder.buffered(), 0);
    }

    #[test]
    fn callback_errors_stop_decoding() {
        let mut body = envelope(0, b"a");
        body.extend(envelope(0, b"b"));
        let mut seen = 0;
        let r = Decoder::new(10).feed::<EnvelopeError>(&body, |_, _| {
            seen += 1;
            Err(EnvelopeError::Truncated { missing: 0 })
        });
        assert!(r.is_err());
        assert_eq!(seen, 1);
    }
}
