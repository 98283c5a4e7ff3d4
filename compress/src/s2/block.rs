//! S2 block decoding: Snappy's block format plus S2's extensions.
//!
//! A block is a uvarint of the decoded length, then tags; the low two bits of a tag
//! byte select its kind:
//! - `00` literal: `len - 1` in the upper six bits, or (60..=63) in the next 1..=4 bytes;
//! - `01` copy, 1-byte offset: length 4..=11 and an 11-bit offset. S2: offset 0 means
//!   "repeat the previous copy's offset", and its length code 5..=7 reads 1..=3 more
//!   length bytes (lengths up to 65540 + 2^24 - 1);
//! - `10` copy, 2-byte offset, and `11` copy, 4-byte offset: length 1..=64.
//!
//! Copies may overlap what they produce (offset < length repeats a pattern). The
//! repeat offset starts unset in every block, and no copy reaches before the block.

use crate::DecompressError;

fn corrupt(why: &str) -> DecompressError {
    DecompressError::Corrupt(format!("s2 block: {why}"))
}

/// Splits a block into its declared decoded length and its tags. Like s2: a uvarint of
/// at most 5 bytes whose value fits in 32 bits.
pub(super) fn split_header(block: &[u8]) -> Result<(usize, &[u8]), DecompressError> {
    let mut value = 0u64;
    for (i, &byte) in block.iter().take(5).enumerate() {
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte < 0x80 {
            let len = u32::try_from(value)
                .ok()
                .and_then(|v| usize::try_from(v).ok())
                .ok_or_else(|| corrupt("decoded length over 32 bits"))?;
            return Ok((len, block.get(i + 1..).unwrap_or_default()));
        }
    }
    Err(corrupt("bad decoded length"))
}

/// Reads tag operands from the front of the block.
struct Tags<'a>(&'a [u8]);

impl Tags<'_> {
    fn bytes<const N: usize>(&mut self) -> Result<[u8; N], DecompressError> {
        let (head, rest) = self
            .0
            .split_first_chunk::<N>()
            .ok_or_else(|| corrupt("tag past the end of the block"))?;
        self.0 = rest;
        Ok(*head)
    }

    /// A little-endian integer of `n` (1..=4) bytes.
    fn uint(&mut self, n: u8) -> Result<usize, DecompressError> {
        let value = match n {
            1 => {
                let [a] = self.bytes()?;
                u32::from(a)
            }
            2 => u32::from(u16::from_le_bytes(self.bytes()?)),
            3 => {
                let [a, b, c] = self.bytes()?;
                u32::from_le_bytes([a, b, c, 0])
            }
            _ => u32::from_le_bytes(self.bytes()?),
        };
        usize::try_from(value).map_err(|_| corrupt("length or offset over usize"))
    }
}

/// Short literals and copies move this many bytes at once where the block has room
/// (what lands past their end is overwritten by the next tag): one fixed-size move
/// instead of a `memcpy` call per tag.
const WIDE: usize = 16;

/// Appends the decoding of `tags` to `out`, which must come to exactly `len` bytes.
/// The caller has checked `len` against its budget and reserved room for it.
pub(super) fn decode(tags: &[u8], len: usize, out: &mut Vec<u8>) -> Result<(), DecompressError> {
    let start = out.len();
    // Zeroed first (cheap next to decoding), so tags write in place.
    out.resize(start.saturating_add(len), 0);
    decode_into(Tags(tags), out.get_mut(start..).unwrap_or_default())
}

fn decode_into(mut tags: Tags<'_>, dst: &mut [u8]) -> Result<(), DecompressError> {
    // Bytes decoded so far.
    let mut d = 0usize;
    // 0: no copy yet, so a repeat is invalid.
    let mut offset = 0usize;
    while let Ok([tag]) = tags.bytes::<1>() {
        let room = dst.len() - d;
        let length = match tag & 0x03 {
            0x00 => {
                let length = match tag >> 2 {
                    short @ 0..=59 => usize::from(short),
                    long => tags.uint(long - 59)?,
                }
                .checked_add(1)
                .filter(|&length| length <= room)
                .ok_or_else(|| corrupt("literal past the declared length"))?;
                literal(&mut tags, length, dst, d)?;
                d += length;
                continue;
            }
            0x01 => {
                let code = (tag >> 2) & 0x07;
                let low = tags.uint(1)?;
                let copy_offset = usize::from(tag >> 5) << 8 | low;
                if copy_offset != 0 {
                    offset = copy_offset;
                    usize::from(code) + 4
                } else {
                    match code {
                        0..=4 => usize::from(code) + 4,
                        5 => tags.uint(1)? + 8,
                        6 => tags.uint(2)? + 260,
                        _ => tags.uint(3)? + 65540,
                    }
                }
            }
            0x02 => {
                offset = tags.uint(2)?;
                usize::from(tag >> 2) + 1
            }
            _ => {
                offset = tags.uint(4)?;
                usize::from(tag >> 2) + 1
            }
        };
        if offset == 0 {
            return Err(corrupt("copy with offset 0 (or a repeat before any copy)"));
        }
        if offset > d {
            return Err(corrupt("copy from before the start of the block"));
        }
        if length > room {
            return Err(corrupt("copy past the declared length"));
        }
        copy_back(dst, d, offset, length);
        d += length;
    }
    if d != dst.len() {
        return Err(corrupt("shorter than its declared length"));
    }
    Ok(())
}

/// Moves a literal of `length` bytes (`length <= dst.len() - d`) from the tags to `d`.
fn literal(
    tags: &mut Tags<'_>,
    length: usize,
    dst: &mut [u8],
    d: usize,
) -> Result<(), DecompressError> {
    let (literal, rest) = tags
        .0
        .split_at_checked(length)
        .ok_or_else(|| corrupt("literal past the end of the block"))?;
    match (dst.get_mut(d..d + WIDE), tags.0.get(..WIDE)) {
        (Some(to), Some(from)) if length <= WIDE => to.copy_from_slice(from),
        _ => {
            if let Some(to) = dst.get_mut(d..d + length) {
                to.copy_from_slice(literal);
            }
        }
    }
    tags.0 = rest;
    Ok(())
}

/// Writes `length` bytes at `d` (`length <= dst.len() - d`) copied from `offset`
/// bytes back (`0 < offset <= d`). Where the copy overlaps its own output it repeats
/// the last `offset` bytes; each pass copies everything available, doubling the span.
fn copy_back(dst: &mut [u8], d: usize, offset: usize, length: usize) {
    let from = d - offset;
    if offset >= length && length <= WIDE && d + WIDE <= dst.len() {
        // `copy_within` reads before it writes: bytes of [d, d + WIDE) read as source
        // only land past `d + length`.
        dst.copy_within(from..from + WIDE, d);
        return;
    }
    let mut done = 0;
    while done < length {
        let chunk = (length - done).min(d + done - from);
        dst.copy_within(from..from + chunk, d + done);
        done += chunk;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_block(block: &[u8]) -> Result<Vec<u8>, DecompressError> {
        let (len, tags) = split_header(block)?;
        let mut out = Vec::with_capacity(len);
        decode(tags, len, &mut out)?;
        Ok(out)
    }

    fn is_corrupt(result: Result<Vec<u8>, DecompressError>) -> bool {
        matches!(result, Err(DecompressError::Corrupt(_)))
    }

    #[test]
    fn literals_of_every_length_form() {
        assert_eq!(
            decode_block(&[3, 2 << 2, b'a', b'b', b'c']).unwrap(),
            b"abc"
        );
        for (header, len) in [
            (&[60 << 2, 99][..], 100usize),
            (&[61 << 2, 0x2b, 0x01], 300),
            (&[62 << 2, 0x00, 0x00, 0x01], 65537),
            (&[63 << 2, 0x00, 0x00, 0x01, 0x00], 65537),
        ] {
            let mut block = vec![];
            let mut n = len;
            while n >= 0x80 {
                block.push(n as u8 | 0x80);
                n >>= 7;
            }
            block.push(n as u8);
            block.extend_from_slice(header);
            block.extend((0..len).map(|i| i as u8));
            let out = decode_block(&block).unwrap();
            assert_eq!(out.len(), len);
            assert!(out.iter().enumerate().all(|(i, &b)| b == i as u8));
        }
    }

    #[test]
    fn copies_and_repeats() {
        // "abcd", copy-1 (offset 4, length 8), repeat (length 4), copy-2 (offset 2,
        // length 3: overlapping), copy-4 (offset 19, length 1).
        let block = [
            20,
            3 << 2,
            b'a',
            b'b',
            b'c',
            b'd',
            0x01 | (4 << 2),
            4,
            0x01,
            0,
            0x02 | (2 << 2),
            2,
            0,
            0x03,
            19,
            0,
            0,
            0,
        ];
        assert_eq!(decode_block(&block).unwrap(), b"abcdabcdabcdabcdcdca");
    }

    #[test]
    fn repeats_with_extra_length_bytes() {
        for (code, extra, len) in [
            (5u8, &[10u8][..], 18usize),
            (6, &[4, 1], 520),
            (7, &[1, 0, 1], 131_077),
        ] {
            let total = 1 + 4 + len;
            let mut block = vec![];
            let mut n = total;
            while n >= 0x80 {
                block.push(n as u8 | 0x80);
                n >>= 7;
            }
            block.push(n as u8);
            // "x", copy-1 offset 1 length 4, then the repeat.
            block.extend_from_slice(&[0, b'x', 0x01, 1, 0x01 | (code << 2), 0]);
            block.extend_from_slice(extra);
            assert_eq!(decode_block(&block).unwrap(), vec![b'x'; total]);
        }
    }

    #[test]
    fn corrupt_blocks() {
        // Repeat before any copy.
        assert!(is_corrupt(decode_block(&[5, 0, b'x', 0x01, 0])));
        // Offset 0 in a copy-2.
        assert!(is_corrupt(decode_block(&[5, 0, b'x', 0x02, 0, 0])));
        // Offset past the start of the output.
        assert!(is_corrupt(decode_block(&[5, 0, b'x', 0x01, 2])));
        assert!(is_corrupt(decode_block(&[
            5, 0, b'x', 0x03, 0xff, 0xff, 0xff, 0xff
        ])));
        // Literal and copy past the declared length.
        assert!(is_corrupt(decode_block(&[1, 1 << 2, b'a', b'b'])));
        assert!(is_corrupt(decode_block(&[4, 0, b'x', 0x01, 1])));
        // Repeat length past the declared length (max code 7: 16 MiB).
        assert!(is_corrupt(decode_block(&[
            9, 0, b'x', 0x01, 1, 0x1d, 0, 0xff, 0xff, 0xff
        ])));
        // Literal longer than the rest of the block (and a 4-byte length near u32::MAX).
        assert!(is_corrupt(decode_block(&[3, 2 << 2, b'a'])));
        assert!(is_corrupt(decode_block(&[
            3,
            63 << 2,
            0xff,
            0xff,
            0xff,
            0xff
        ])));
        // Truncated operands.
        assert!(is_corrupt(decode_block(&[5, 0, b'x', 0x02, 1])));
        assert!(is_corrupt(decode_block(&[5, 0, b'x', 0x01, 1, 0x15])));
        // Shorter than declared.
        assert!(is_corrupt(decode_block(&[3, 0, b'x'])));
        // Bad lengths: empty, unterminated, over 5 bytes, over 32 bits.
        assert!(is_corrupt(decode_block(&[])));
        assert!(is_corrupt(decode_block(&[0x80])));
        assert!(is_corrupt(decode_block(&[
            0x80, 0x80, 0x80, 0x80, 0x80, 0x00
        ])));
        assert!(is_corrupt(decode_block(&[0xff, 0xff, 0xff, 0xff, 0x1f])));
        assert_eq!(
            split_header(&[0xff, 0xff, 0xff, 0xff, 0x0f]).unwrap().0,
            u32::MAX as usize
        );
    }
}
