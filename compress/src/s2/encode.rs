//! The stream writer. Blocks are compressed with Snappy's block encoder (`snap`): S2's
//! block format is a superset of Snappy's, so every S2 reader decodes them (proved
//! against klauspost/compress by `make s2-vectors`). That gives up S2's extensions
//! (repeat offsets, long copies): some ratio on highly repetitive data, no compatibility.

use super::crc::masked_crc;
use super::frame::{
    CHECKSUM_LEN, CHUNK_HEADER_LEN, COMPRESSED, S2_MAGIC, STREAM_IDENTIFIER, UNCOMPRESSED,
};

/// klauspost's default block size (S2 allows up to 4 MiB).
const BLOCK_SIZE: usize = 1 << 20;

/// Appends a complete S2 stream holding `input` to `out`: the stream identifier
/// (even for empty input, so the stream names itself), then one chunk per block,
/// compressed only where that is smaller.
pub(super) fn encode_stream(input: &[u8], out: &mut Vec<u8>) {
    push_chunk(out, STREAM_IDENTIFIER, &[], S2_MAGIC);
    let mut encoder = snap::raw::Encoder::new();
    let mut scratch = Vec::new();
    for block in input.chunks(BLOCK_SIZE) {
        let checksum = masked_crc(block).to_le_bytes();
        scratch.resize(snap::raw::max_compress_len(block.len()), 0);
        match encoder.compress(block, &mut scratch) {
            Ok(len) if len < block.len() => {
                scratch.truncate(len);
                push_chunk(out, COMPRESSED, &checksum, &scratch);
            }
            // Incompressible (or, impossibly for 1 MiB blocks, too large for snap).
            _ => push_chunk(out, UNCOMPRESSED, &checksum, block),
        }
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
}
