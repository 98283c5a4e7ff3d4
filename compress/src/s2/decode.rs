//! The stream reader: walks the chunks of one or more concatenated streams, checks
//! every checksum, and appends the data within the caller's limit.

use super::block;
use super::crc::masked_crc;
use super::frame::{
    CHECKSUM_LEN, CHUNK_HEADER_LEN, COMPRESSED, LAST_UNSKIPPABLE, MAX_BLOCK, MAX_COMPRESSED_CHUNK,
    MAX_SNAPPY_BLOCK, S2_MAGIC, SNAPPY_MAGIC, STREAM_IDENTIFIER, UNCOMPRESSED,
};
use crate::DecompressError;

fn corrupt(why: impl Into<String>) -> DecompressError {
    DecompressError::Corrupt(format!("s2 stream: {}", why.into()))
}

/// Appends the decoding of the stream `input` to `out`, failing once it would exceed
/// `limit` bytes. Every block's declared size is checked against what is left of the
/// limit before anything is allocated for it.
pub(super) fn decode_stream(
    mut input: &[u8],
    limit: usize,
    out: &mut Vec<u8>,
) -> Result<(), DecompressError> {
    let base = out.len();
    // Set by the first chunk, which must be a stream identifier.
    let mut max_block = None;
    while let Some((header, rest)) = input.split_first_chunk::<CHUNK_HEADER_LEN>() {
        let [kind, len0, len1, len2] = *header;
        let len = usize::from(len0) | usize::from(len1) << 8 | usize::from(len2) << 16;
        let (body, rest) = rest
            .split_at_checked(len)
            .ok_or_else(|| corrupt(format!("chunk {kind:#04x} truncated")))?;
        input = rest;
        if kind == STREAM_IDENTIFIER {
            max_block = Some(match body {
                b if b == S2_MAGIC => MAX_BLOCK,
                b if b == SNAPPY_MAGIC => MAX_SNAPPY_BLOCK,
                _ => return Err(corrupt("bad stream identifier")),
            });
            continue;
        }
        let max_block = max_block.ok_or_else(|| corrupt("missing stream identifier"))?;
        let left = limit.saturating_sub(out.len() - base);
        match kind {
            COMPRESSED => {
                if len > MAX_COMPRESSED_CHUNK {
                    return Err(corrupt("compressed chunk over the maximum size"));
                }
                let (checksum, block) = split_checksum(body)?;
                let (size, tags) = block::split_header(block)?;
                check_size(size, left, limit, max_block)?;
                reserve(out, base.saturating_add(limit), size);
                let start = out.len();
                block::decode(tags, size, out)?;
                verify(checksum, out.get(start..).unwrap_or_default())?;
            }
            UNCOMPRESSED => {
                let (checksum, data) = split_checksum(body)?;
                check_size(data.len(), left, limit, max_block)?;
                verify(checksum, data)?;
                reserve(out, base.saturating_add(limit), data.len());
                out.extend_from_slice(data);
            }
            0x02..=LAST_UNSKIPPABLE => {
                return Err(corrupt(format!("reserved unskippable chunk {kind:#04x}")));
            }
            // Padding and skippable chunks (such as S2's seek index).
            _ => {}
        }
    }
    if !input.is_empty() {
        return Err(corrupt("truncated chunk header"));
    }
    Ok(())
}

fn split_checksum(body: &[u8]) -> Result<(u32, &[u8]), DecompressError> {
    let (checksum, data) = body
        .split_first_chunk::<CHECKSUM_LEN>()
        .ok_or_else(|| corrupt("data chunk shorter than its checksum"))?;
    Ok((u32::from_le_bytes(*checksum), data))
}

/// The budget comes first: a bomb is reported as such even where its block is also
/// oversized.
fn check_size(
    size: usize,
    left: usize,
    limit: usize,
    max_block: usize,
) -> Result<(), DecompressError> {
    if size > left {
        return Err(DecompressError::TooLarge { limit });
    }
    if size > max_block {
        return Err(corrupt(format!("block of {size} bytes (max {max_block})")));
    }
    Ok(())
}

fn verify(checksum: u32, data: &[u8]) -> Result<(), DecompressError> {
    if masked_crc(data) != checksum {
        return Err(corrupt("checksum mismatch"));
    }
    Ok(())
}

/// Makes room for `size` more bytes: doubling (amortised growth over many blocks), but
/// never past `ceiling`, where the limit stops decoding anyway.
fn reserve(out: &mut Vec<u8>, ceiling: usize, size: usize) {
    let needed = out.len().saturating_add(size);
    if needed > out.capacity() {
        let target = out.capacity().saturating_mul(2).min(ceiling).max(needed);
        out.reserve_exact(target - out.len());
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::super::{compress, decompress};
    use super::*;

    const S2_ID: [u8; 10] = *b"\xff\x06\x00\x00S2sTwO";
    const SNAPPY_ID: [u8; 10] = *b"\xff\x06\x00\x00sNaPpY";

    fn chunk(kind: u8, body: &[u8]) -> Vec<u8> {
        let len = body.len().to_le_bytes();
        [&[kind, len[0], len[1], len[2]][..], body].concat()
    }

    fn data_chunk(kind: u8, checksum_of: &[u8], data: &[u8]) -> Vec<u8> {
        chunk(
            kind,
            &[&masked_crc(checksum_of).to_le_bytes()[..], data].concat(),
        )
    }

    fn corrupt_reason(input: &[u8]) -> String {
        let mut out = b"before".to_vec();
        match decompress(input, 1 << 30, &mut out) {
            Err(DecompressError::Corrupt(why)) => {
                assert_eq!(out, b"before", "out must be left as it was");
                why
            }
            other => panic!("expected Corrupt, got {other:?}"),
        }
    }

    fn decoded(input: &[u8]) -> Vec<u8> {
        let mut out = vec![];
        decompress(input, 1 << 30, &mut out).unwrap();
        out
    }

    /// A valid compressed block of `len` zero bytes (`len` >= 65549) in 14 bytes:
    /// a literal, a copy, and a repeat with a 3-byte length.
    fn zeros_block(len: usize) -> Vec<u8> {
        let rest = (len - 1 - 4 - 65540).to_le_bytes();
        let mut block = vec![];
        let mut n = len;
        while n >= 0x80 {
            block.push(n as u8 | 0x80);
            n >>= 7;
        }
        block.push(n as u8);
        block.extend_from_slice(&[0, 0, 0x01, 1, 0x1d, 0, rest[0], rest[1], rest[2]]);
        block
    }

    #[test]
    fn chunk_kinds() {
        let hello = b"hello, hello, hello";
        let mut stream = S2_ID.to_vec();
        stream.extend(data_chunk(UNCOMPRESSED, hello, hello));
        // Padding, a skippable chunk and an index are skipped.
        stream.extend(chunk(0xfe, &[0; 7]));
        stream.extend(chunk(0x80, b"skip me"));
        stream.extend(chunk(0x99, b"s2idx\0...\0xdi2s"));
        stream.extend(chunk(0xfd, b""));
        // "hello, " then a copy at offset 7 of 12 bytes (copy-2).
        let block = [
            19,
            6 << 2,
            b'h',
            b'e',
            b'l',
            b'l',
            b'o',
            b',',
            b' ',
            0x02 | (11 << 2),
            7,
            0,
        ];
        stream.extend(data_chunk(COMPRESSED, hello, &block));
        assert_eq!(decoded(&stream), [&hello[..], hello].concat());
    }

    #[test]
    fn concatenated_and_snappy_streams() {
        let mut stream = vec![];
        compress(b"first stream, ", &mut stream);
        stream.extend(SNAPPY_ID);
        stream.extend(data_chunk(UNCOMPRESSED, b"snappy, ", b"snappy, "));
        // The identifier of a later stream may be left out.
        let mut last = vec![];
        compress(b"last", &mut last);
        stream.extend(&last[S2_ID.len()..]);
        assert_eq!(decoded(&stream), b"first stream, snappy, last");
        assert_eq!(decoded(&[]), b"");
        assert_eq!(decoded(&S2_ID), b"");
    }

    #[test]
    fn corrupt_streams() {
        let data = b"some data";
        let good = [&S2_ID[..], &data_chunk(UNCOMPRESSED, data, data)].concat();
        assert_eq!(decoded(&good), data);

        let bad_crc = [&S2_ID[..], &data_chunk(UNCOMPRESSED, b"other", data)].concat();
        assert!(corrupt_reason(&bad_crc).contains("checksum"));
        let block = [
            9,
            8 << 2,
            b's',
            b'o',
            b'm',
            b'e',
            b' ',
            b'd',
            b'a',
            b't',
            b'a',
        ];
        let bad_crc = [&S2_ID[..], &data_chunk(COMPRESSED, b"other", &block)].concat();
        assert!(corrupt_reason(&bad_crc).contains("checksum"));

        for cut in 1..good.len() {
            if cut != S2_ID.len() {
                corrupt_reason(&good[..cut]);
            }
        }
        assert!(corrupt_reason(&good[S2_ID.len()..]).contains("missing stream identifier"));
        assert!(corrupt_reason(b"\xff\x06\x00\x00S2sTwo").contains("identifier"));
        assert!(corrupt_reason(b"\xff\x05\x00\x00S2sTw").contains("identifier"));
        let reserved = [&S2_ID[..], &chunk(0x02, b"")].concat();
        assert!(corrupt_reason(&reserved).contains("reserved"));
        let reserved = [&S2_ID[..], &chunk(0x7f, b"x")].concat();
        assert!(corrupt_reason(&reserved).contains("reserved"));
        // Data chunks shorter than their checksum, a compressed one with no block.
        corrupt_reason(&[&S2_ID[..], &chunk(UNCOMPRESSED, &[1, 2, 3])].concat());
        corrupt_reason(&[&S2_ID[..], &data_chunk(COMPRESSED, b"", b"")].concat());
        // A block that is itself corrupt (copy from before its start).
        let block = [5, 0, b'x', 0x01, 9];
        assert!(
            corrupt_reason(&[&S2_ID[..], &data_chunk(COMPRESSED, b"", &block)].concat())
                .contains("before the start")
        );
    }

    #[test]
    fn block_size_limits() {
        // Snappy streams: at most 64 KiB per block.
        let big = vec![7u8; MAX_SNAPPY_BLOCK + 1];
        let snappy = [&SNAPPY_ID[..], &data_chunk(UNCOMPRESSED, &big, &big)].concat();
        assert!(corrupt_reason(&snappy).contains("max 65536"));
        let s2 = [&S2_ID[..], &data_chunk(UNCOMPRESSED, &big, &big)].concat();
        assert_eq!(decoded(&s2), big);
        // S2 streams: at most 4 MiB.
        let block = zeros_block(MAX_BLOCK + 1);
        let zeros = vec![0; MAX_BLOCK + 1];
        let s2 = [&S2_ID[..], &data_chunk(COMPRESSED, &zeros, &block)].concat();
        assert!(corrupt_reason(&s2).contains("max 4194304"));
        let block = zeros_block(MAX_BLOCK);
        let s2 = [&S2_ID[..], &data_chunk(COMPRESSED, &zeros[1..], &block)].concat();
        assert_eq!(decoded(&s2).len(), MAX_BLOCK);
    }

    /// Decodes `input` with `limit`, expecting `TooLarge`; returns `out`'s capacity.
    fn too_large(input: &[u8], limit: usize) -> usize {
        let started = Instant::now();
        let mut out = vec![];
        assert_eq!(
            decompress(input, limit, &mut out),
            Err(DecompressError::TooLarge { limit })
        );
        assert!(out.is_empty());
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "took {:?}",
            started.elapsed()
        );
        out.capacity()
    }

    #[test]
    fn bomb_claiming_2_gib_stops_at_the_limit() {
        // 512 valid blocks of 4 MiB zeros (2 GiB), 13 KB in all.
        let block = zeros_block(MAX_BLOCK);
        let four_mib = data_chunk(COMPRESSED, &vec![0; MAX_BLOCK], &block);
        let mut bomb = S2_ID.to_vec();
        for _ in 0..512 {
            bomb.extend(&four_mib);
        }
        assert!(bomb.len() < 14_000);
        // The first block's declared size is over the limit: nothing is allocated.
        assert_eq!(too_large(&bomb, 1 << 20), 0);
        // Past a few blocks: stops there, holding no more than the limit.
        assert!(too_large(&bomb, 10 << 20) <= 10 << 20);

        // Declared sizes alone (the blocks are garbage) are enough.
        let liar = [
            &S2_ID[..],
            &chunk(COMPRESSED, &[0, 0, 0, 0, 0x80, 0x80, 0x80, 0x02]),
        ]
        .concat();
        assert_eq!(too_large(&liar, 1 << 20), 0);
        let liar = [
            &S2_ID[..],
            &chunk(COMPRESSED, &[0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f]),
        ]
        .concat();
        assert_eq!(too_large(&liar, 1 << 30), 0);
    }

    #[test]
    fn real_100_mib_stream_stops_at_1_mib() {
        // Our encoder's stream of 1 MiB of zeros, its data chunk repeated: 100 MiB.
        let mut one = vec![];
        compress(&vec![0; 1 << 20], &mut one);
        let data_chunk = &one[S2_ID.len()..];
        let mut stream = S2_ID.to_vec();
        for _ in 0..100 {
            stream.extend(data_chunk);
        }
        // Valid: each chunk decodes (concatenating them changes nothing for the reader).
        assert_eq!(decoded(&one), vec![0; 1 << 20]);

        assert!(too_large(&stream, 1 << 20) <= 1 << 20);
        assert!(too_large(&stream, (1 << 20) + 1) <= (1 << 20) + 1);
        assert!(too_large(&stream, (3 << 20) - 1) <= 3 << 20);
    }

    #[test]
    fn garbage_and_mutations_never_panic() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        // Random tags under random declared lengths: the block decoder runs before the
        // checksum is checked, so it sees all of them.
        for _ in 0..5000 {
            let mut body = vec![0, 0, 0, 0];
            body.extend(next().to_le_bytes().iter().take(1 + (next() % 3) as usize));
            body.extend((0..next() % 64).map(|_| next() as u8));
            let stream = [&S2_ID[..], &chunk(COMPRESSED, &body)].concat();
            let _ = decompress(&stream, 1 << 20, &mut vec![]);
        }
        // Bit flips in, and truncations of, a valid stream.
        let mut text = b"a repeat, a repeat, a repeated repeat; ".repeat(40);
        text.extend(vec![0; 3000]);
        let mut stream = vec![];
        compress(&text, &mut stream);
        for _ in 0..2000 {
            let mut bad = stream.clone();
            for _ in 0..1 + next() % 3 {
                let at = next() as usize % bad.len();
                bad[at] ^= 1 << (next() % 8);
            }
            bad.truncate(bad.len() - (next() % 2) as usize * (next() as usize % bad.len()));
            let _ = decompress(&bad, 1 << 20, &mut vec![]);
        }
    }

    #[test]
    fn growth_is_amortised_but_capped() {
        let mut out = Vec::with_capacity(10);
        reserve(&mut out, 1000, 5);
        assert_eq!(out.capacity(), 10);
        reserve(&mut out, 1000, 15);
        assert_eq!(out.capacity(), 20);
        out.resize(20, 0);
        reserve(&mut out, 30, 5);
        assert_eq!(out.capacity(), 30);
        out.resize(30, 0);
        reserve(&mut out, 30, 5);
        assert_eq!(out.capacity(), 35);
    }
}
