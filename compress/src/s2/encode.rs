//! The stream writer. Blocks are compressed with Snappy's block encoder (`snap`): S2's
//! block format is a superset of Snappy's, so every S2 reader decodes them (proved
//! against klauspost/compress by `make s2-vectors`). That gives up S2's extensions
//! (repeat offsets, long copies): some ratio on highly repetitive data, no compatibility.

use super::crc::masked_crc;
use super::frame::{
    CHECKSUM_LEN, CHUNK_HEADER_LEN, COMPRESSED, S2_MAGIC, STREAM_IDENTIFIER, UNCOMPRESSED,
};
use crate::blocks::Blocks;

/// klauspost's default block size (S2 allows up to 4 MiB).
const BLOCK_SIZE: usize = 1 << 20;

/// Appends a complete S2 stream holding `input` to `out`: the stream identifier
/// (even for empty input, so the stream names itself), then one chunk per block,
/// compressed only where that is smaller.
pub(super) fn encode_stream(input: &[u8], out: &mut Vec<u8>) {
    let mut writer = Writer::new();
    writer.write(input, out);
    writer.finish(out);
}

/// An S2 stream written as its input arrives, for answers sent chunk by chunk: the
/// same bytes as [`encode_stream`] of all the input, each block going out once it is
/// full.
pub struct Writer {
    encoder: snap::raw::Encoder,
    blocks: Blocks,
    scratch: Vec<u8>,
    started: bool,
}

impl Default for Writer {
    fn default() -> Self {
        Self::new()
    }
}

impl Writer {
    pub fn new() -> Self {
        Writer {
            encoder: snap::raw::Encoder::new(),
            blocks: Blocks::new(BLOCK_SIZE),
            scratch: Vec::new(),
            started: false,
        }
    }

    /// Takes `input`, appending the chunks of the blocks it completes to `out`.
    pub fn write(&mut self, input: &[u8], out: &mut Vec<u8>) {
        self.start(out);
        let (encoder, scratch) = (&mut self.encoder, &mut self.scratch);
        self.blocks
            .feed(input, |block| push_block(encoder, scratch, block, out));
    }

    /// Ends the stream: the last, partial block.
    pub fn finish(mut self, out: &mut Vec<u8>) {
        self.start(out);
        let block = self.blocks.rest();
        if !block.is_empty() {
            push_block(&mut self.encoder, &mut self.scratch, block, out);
        }
    }

    fn start(&mut self, out: &mut Vec<u8>) {
        if !self.started {
            self.started = true;
            push_chunk(out, STREAM_IDENTIFIER, &[], S2_MAGIC);
        }
    }
}

/// One block's chunk: compressed only where that is smaller.
fn push_block(
    encoder: &mut snap::raw::Encoder,
    scratch: &mut Vec<u8>,
    block: &[u8],
    out: &mut Vec<u8>,
) {
    let checksum = masked_crc(block).to_le_bytes();
    scratch.resize(snap::raw::max_compress_len(block.len()), 0);
    match encoder.compress(block, scratch) {
        Ok(len) if len < block.len() => {
            let data = scratch.get(..len).unwrap_or_default();
            push_chunk(out, COMPRESSED, &checksum, data);
        }
        // Incompressible (or, impossibly for 1 MiB blocks, too large for snap).
        _ => push_chunk(out, UNCOMPRESSED, &checksum, block),
    }
}

/// A chunk: type, 3-byte little-endian length of the body, then the body (here split
/// into its checksum, if any, and data).
fn push_chunk(out: &mut Vec<u8>, kind: u8, checksum: &[u8], data: &[u8]) {
    // Bodies are at most a checksum and a 1 MiB block's worst case: far below 2^24.
    let len = (checksum.len() + data.len()) as u32;
    let [len0, len1, len2, _] = len.to_le_bytes();
    out.reserve(CHUNK_HEADER_LEN + CHECKSUM_LEN + data.len());
    out.extend_from_slice(&[kind, len0, len1, len2]);
    out.extend_from_slice(checksum);
    out.extend_from_slice(data);
}

#[cfg(test)]
mod tests {
    use super::super::decompress;
    use super::*;

    fn chunk_kinds(stream: &[u8]) -> Vec<u8> {
        let mut kinds = vec![];
        let mut rest = stream;
        while let [kind, a, b, c, tail @ ..] = rest {
            kinds.push(*kind);
            rest = &tail[usize::from(*a) | usize::from(*b) << 8 | usize::from(*c) << 16..];
        }
        kinds
    }

    fn round_trip(input: &[u8]) -> Vec<u8> {
        let mut stream = b"prefix".to_vec();
        encode_stream(input, &mut stream);
        let stream = stream.split_off(6);
        let mut out = vec![];
        decompress(&stream, input.len(), &mut out).unwrap();
        assert_eq!(out, input);
        chunk_kinds(&stream)
    }

    #[test]
    fn chunks_per_block() {
        assert_eq!(round_trip(b""), [STREAM_IDENTIFIER]);
        assert_eq!(round_trip(b"x"), [STREAM_IDENTIFIER, UNCOMPRESSED]);
        assert_eq!(round_trip(&[1; 1000]), [STREAM_IDENTIFIER, COMPRESSED]);
        let mut mixed = vec![3; BLOCK_SIZE];
        let mut x = 1u32;
        mixed.extend((0..BLOCK_SIZE + 1).map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        }));
        assert_eq!(
            round_trip(&mixed),
            [STREAM_IDENTIFIER, COMPRESSED, UNCOMPRESSED, UNCOMPRESSED]
        );
    }

    #[test]
    fn written_in_pieces_it_is_the_same_stream() {
        let mut x = 7u32;
        let mut input: Vec<u8> = (0..BLOCK_SIZE * 2 + 12_345)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                if i % 3 == 0 {
                    x as u8
                } else {
                    b'a' + (i % 7) as u8
                }
            })
            .collect();
        input.extend(vec![9; BLOCK_SIZE]);
        let mut whole = Vec::new();
        encode_stream(&input, &mut whole);
        for cut in [
            1,
            1000,
            65_536,
            BLOCK_SIZE - 1,
            BLOCK_SIZE,
            BLOCK_SIZE + 1,
            3 * BLOCK_SIZE,
        ] {
            let mut writer = Writer::new();
            let mut out = Vec::new();
            // Uneven pieces: `cut`, then a little, alternately.
            let mut rest = input.as_slice();
            let mut turn = 0;
            while !rest.is_empty() {
                let n = if turn % 2 == 0 { cut } else { 17 }.min(rest.len());
                let (piece, tail) = rest.split_at(n);
                writer.write(piece, &mut out);
                rest = tail;
                turn += 1;
            }
            writer.finish(&mut out);
            assert!(out == whole, "cut {cut}");
        }
        let mut out = Vec::new();
        Writer::new().finish(&mut out);
        let mut empty = Vec::new();
        encode_stream(b"", &mut empty);
        assert_eq!(out, empty);
    }
}
