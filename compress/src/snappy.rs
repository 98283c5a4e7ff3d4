//! The Snappy framing format (google/snappy `framing_format.txt`): what
//! golang/snappy's `NewBufferedWriter` / `NewReader` and the Go gRPC and Connect
//! "snappy" codecs write and read. Every chunk's masked CRC-32C is checked; chunks
//! hold at most 64 KiB, so a declared chunk length never drives an allocation.

use std::io::Write;

use snap::read::FrameDecoder;
use snap::write::FrameEncoder;

use crate::blocks::Blocks;
use crate::bounded::read_bounded;
use crate::DecompressError;

pub(crate) fn compress(input: &[u8], out: &mut Vec<u8>) {
    let mut enc = FrameEncoder::new(out);
    // Writing into a Vec cannot fail.
    let result = enc.write_all(input).and_then(|()| enc.flush());
    debug_assert!(result.is_ok(), "snappy into a Vec failed: {result:?}");
}

/// A Snappy framed stream written as its input arrives: each 64 KiB of input goes
/// out as a chunk once complete, [`SnappyStream::finish`] writes the last one. Only
/// whole blocks reach the encoder (it would cut a write at its own boundaries), so
/// the chunks and bytes are those of compressing the input whole.
pub(crate) struct SnappyStream {
    encoder: FrameEncoder<Vec<u8>>,
    blocks: Blocks,
}

/// The framing format's block: what `FrameEncoder` compresses at a time.
const BLOCK: usize = 64 << 10;

impl SnappyStream {
    pub(crate) fn new() -> Self {
        SnappyStream {
            encoder: FrameEncoder::new(Vec::new()),
            blocks: Blocks::new(BLOCK),
        }
    }

    pub(crate) fn write(&mut self, input: &[u8], out: &mut Vec<u8>) {
        let encoder = &mut self.encoder;
        self.blocks.feed(input, |block| encode(encoder, block, out));
    }

    pub(crate) fn finish(mut self, out: &mut Vec<u8>) {
        encode(&mut self.encoder, self.blocks.rest(), out);
    }
}

/// A whole block (or the last, partial one): the encoder, holding nothing of its own,
/// writes it straight through.
fn encode(encoder: &mut FrameEncoder<Vec<u8>>, block: &[u8], out: &mut Vec<u8>) {
    // Writing into a Vec cannot fail.
    let result = encoder.write_all(block).and_then(|()| encoder.flush());
    debug_assert!(result.is_ok(), "snappy into a Vec failed: {result:?}");
    out.append(encoder.get_mut());
}

pub(crate) fn decompress(
    input: &[u8],
    limit: usize,
    out: &mut Vec<u8>,
) -> Result<(), DecompressError> {
    let start = out.len();
    read_bounded(FrameDecoder::new(input), start, limit, out)
}
