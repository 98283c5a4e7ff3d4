//! The Snappy framing format (google/snappy `framing_format.txt`): what
//! golang/snappy's `NewBufferedWriter` / `NewReader` and the Go gRPC and Connect
//! "snappy" codecs write and read. Every chunk's masked CRC-32C is checked; chunks
//! hold at most 64 KiB, so a declared chunk length never drives an allocation.

use std::io::Write;

use snap::read::FrameDecoder;
use snap::write::FrameEncoder;

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
    pending: Vec<u8>,
}

/// The framing format's block: what `FrameEncoder` compresses at a time.
const BLOCK: usize = 64 << 10;

impl SnappyStream {
    pub(crate) fn new() -> Self {
        SnappyStream {
            encoder: FrameEncoder::new(Vec::new()),
            pending: Vec::new(),
        }
    }

    pub(crate) fn write(&mut self, mut input: &[u8], out: &mut Vec<u8>) {
        if !self.pending.is_empty() {
            let room = BLOCK.saturating_sub(self.pending.len());
            let (head, rest) = input.split_at_checked(room).unwrap_or((input, &[]));
            self.pending.extend_from_slice(head);
            input = rest;
            if self.pending.len() < BLOCK {
                return;
            }
            let block = std::mem::take(&mut self.pending);
            self.encode(&block, out);
            self.pending = block;
            self.pending.clear();
        }
        let whole = input.len() - input.len() % BLOCK;
        let (blocks, rest) = input.split_at_checked(whole).unwrap_or((&[], input));
        if !blocks.is_empty() {
            self.encode(blocks, out);
        }
        self.pending.extend_from_slice(rest);
    }

    pub(crate) fn finish(mut self, out: &mut Vec<u8>) {
        let rest = std::mem::take(&mut self.pending);
        self.encode(&rest, out);
        let result = self.encoder.flush();
        debug_assert!(result.is_ok(), "snappy into a Vec failed: {result:?}");
        out.append(self.encoder.get_mut());
    }

    /// Whole blocks (or the last): the encoder, given nothing of its own, writes them
    /// straight through.
    fn encode(&mut self, input: &[u8], out: &mut Vec<u8>) {
        // Writing into a Vec cannot fail.
        let result = self
            .encoder
            .write_all(input)
            .and_then(|()| self.encoder.flush());
        debug_assert!(result.is_ok(), "snappy into a Vec failed: {result:?}");
        out.append(self.encoder.get_mut());
    }
}

pub(crate) fn decompress(
    input: &[u8],
    limit: usize,
    out: &mut Vec<u8>,
) -> Result<(), DecompressError> {
    let start = out.len();
    read_bounded(FrameDecoder::new(input), start, limit, out)
}
