//! Zstandard (RFC 8878) with ruzstd, a pure-Rust implementation (the C `zstd` crate
//! does not build for wasm32-wasip1).
//!
//! Decoding reads one or more frames (skippable frames are skipped, as klauspost's
//! and the reference decoder do) and checks each frame's content checksum when it has
//! one. ruzstd reserves the frame's window up front (up to 100 MiB, declared by a
//! couple of header bytes), so before handing a frame over we read its header
//! ourselves: a declared content size past the limit is refused at once, and a window
//! larger than the output we still accept is lowered to it (no valid frame whose
//! output fits the limit can reference further back than that), so a 20-byte frame
//! cannot make us reserve more than the limit. (ruzstd keeps that window in a
//! power-of-two ring buffer, so zstd decoding holds up to about twice
//! min(window, limit) besides the output: 2 MiB for the 1 MiB windows Go's Connect
//! codecs write.)

use std::io::Read;

use ruzstd::decoding::{FrameDecoder, StreamingDecoder};
use ruzstd::encoding::CompressionLevel;

use crate::blocks::Blocks;
use crate::bounded::read_bounded;
use crate::{DecompressError, Level};

const MAGIC: u64 = 0xFD2F_B528;
const SKIPPABLE_MAGIC: u64 = 0x184D_2A50;
const SKIPPABLE_MASK: u64 = 0xFFFF_FFF0;
/// The longest frame header: magic, descriptor, window, 4-byte dictionary id,
/// 8-byte content size.
const MAX_HEADER: usize = 4 + 1 + 1 + 4 + 8;
/// The smallest window the format allows (window log 10).
const MIN_WINDOW: u64 = 1 << 10;

pub(crate) fn compress(_level: Level, input: &[u8], out: &mut Vec<u8>) {
    // ruzstd implements only its `Fastest` level (≈ zstd -1) for now.
    ruzstd::encoding::compress(input, out, CompressionLevel::Fastest);
}

/// A zstd stream written as its input arrives: each [`FRAME`] of input goes out as a
/// frame of its own once complete, the last at [`ZstdStream::finish`]. RFC 8878 makes a
/// stream of consecutive frames one content (the reference library reads it so — its CLI,
/// and tonic in e2e `stream_memory.rs` — and so does ours); ruzstd's encoder takes its
/// input whole, so the frame is the unit. An answer within one frame has the very bytes
/// of compressing it whole.
pub(crate) struct ZstdStream {
    level: Level,
    blocks: Blocks,
    /// A frame has gone out (an empty input still needs one).
    framed: bool,
}

/// Input per frame: what the VM holds back at most, and what each frame's matcher sees.
pub const FRAME: usize = 1 << 20;

impl ZstdStream {
    pub(crate) fn new(level: Level) -> Self {
        ZstdStream {
            level,
            blocks: Blocks::new(FRAME),
            framed: false,
        }
    }

    pub(crate) fn write(&mut self, input: &[u8], out: &mut Vec<u8>) {
        let (level, framed) = (self.level, &mut self.framed);
        self.blocks.feed(input, |frame| {
            compress(level, frame, out);
            *framed = true;
        });
    }

    pub(crate) fn finish(self, out: &mut Vec<u8>) {
        if !self.framed || !self.blocks.rest().is_empty() {
            compress(self.level, self.blocks.rest(), out);
        }
    }
}

pub(crate) fn decompress(
    input: &[u8],
    limit: usize,
    out: &mut Vec<u8>,
) -> Result<(), DecompressError> {
    let start = out.len();
    let mut rest = input;
    let mut decoder = FrameDecoder::new();
    while !rest.is_empty() {
        let magic = le(rest, 0, 4).ok_or_else(|| corrupt("truncated frame magic"))?;
        if magic & SKIPPABLE_MASK == SKIPPABLE_MAGIC {
            let len = le(rest, 4, 4).ok_or_else(|| corrupt("truncated skippable frame"))?;
            let skip = usize::try_from(len)
                .ok()
                .and_then(|len| len.checked_add(8))
                .ok_or_else(|| corrupt("skippable frame too long"))?;
            rest = rest
                .get(skip..)
                .ok_or_else(|| corrupt("truncated skippable frame"))?;
            continue;
        }
        if magic != MAGIC {
            return Err(corrupt("not a zstd frame (bad magic number)"));
        }
        let remaining = limit.saturating_sub(out.len().saturating_sub(start));
        let (header, header_len) = checked_header(rest, remaining, limit)?;
        let body = rest.get(header_len..).unwrap_or_default();
        let mut source = header.get(..header_len).unwrap_or_default().chain(body);
        {
            let mut stream = StreamingDecoder::new_with_decoder(&mut source, &mut decoder)
                .map_err(|e| corrupt(&e.to_string()))?;
            read_bounded(&mut stream, start, limit, out)?;
        }
        if let (Some(sent), Some(got)) = (
            decoder.get_checksum_from_data(),
            decoder.get_calculated_checksum(),
        ) {
            if sent != got {
                return Err(corrupt("content checksum mismatch"));
            }
        }
        let (header_left, body_left) = source.into_inner();
        if !header_left.is_empty() {
            return Err(corrupt("frame header not consumed"));
        }
        rest = body_left;
    }
    Ok(())
}

/// Reads the frame header at the start of `frame`; returns it (possibly with a
/// lowered window) and its length. `remaining` is how much more output the limit
/// allows.
fn checked_header(
    frame: &[u8],
    remaining: usize,
    limit: usize,
) -> Result<([u8; MAX_HEADER], usize), DecompressError> {
    let descriptor = *frame
        .get(4)
        .ok_or_else(|| corrupt("truncated frame header"))?;
    let fcs_flag = descriptor >> 6;
    let single_segment = descriptor & 0x20 != 0;
    let did_len = match descriptor & 0x03 {
        0 => 0,
        1 => 1,
        2 => 2,
        _ => 4,
    };
    let fcs_len = match fcs_flag {
        0 => usize::from(single_segment),
        1 => 2,
        2 => 4,
        _ => 8,
    };
    let window_at = 5;
    let fcs_at = window_at + usize::from(!single_segment) + did_len;
    let header_len = fcs_at + fcs_len;
    let mut header = [0u8; MAX_HEADER];
    header
        .get_mut(..header_len)
        .zip(frame.get(..header_len))
        .map(|(dst, src)| dst.copy_from_slice(src))
        .ok_or_else(|| corrupt("truncated frame header"))?;

    let remaining = u64::try_from(remaining).unwrap_or(u64::MAX);
    if fcs_len > 0 {
        let fcs = le(frame, fcs_at, fcs_len).ok_or_else(|| corrupt("truncated frame header"))?;
        let fcs = if fcs_len == 2 { fcs + 256 } else { fcs };
        if fcs > remaining {
            return Err(DecompressError::TooLarge { limit });
        }
    }
    if !single_segment {
        let byte = header
            .get_mut(window_at)
            .ok_or_else(|| corrupt("bad header"))?;
        if window_size(*byte) > remaining.max(MIN_WINDOW) {
            *byte = window_descriptor_for(remaining);
        }
    }
    Ok((header, header_len))
}

/// The window size a window descriptor byte declares.
fn window_size(descriptor: u8) -> u64 {
    let log = 10 + u32::from(descriptor >> 3);
    let base = 1u64 << log;
    base + (base / 8) * u64::from(descriptor & 0x07)
}

/// The descriptor of the smallest window of at least `size` bytes.
fn window_descriptor_for(size: u64) -> u8 {
    (0..=u8::MAX)
        .find(|&d| window_size(d) >= size)
        .unwrap_or(u8::MAX)
}

/// The `len`-byte little-endian number at `at` in `bytes`.
fn le(bytes: &[u8], at: usize, len: usize) -> Option<u64> {
    let field = bytes.get(at..at.checked_add(len)?)?;
    Some(
        field
            .iter()
            .rev()
            .fold(0u64, |acc, &b| (acc << 8) | u64::from(b)),
    )
}

fn corrupt(why: &str) -> DecompressError {
    DecompressError::Corrupt(format!("zstd: {why}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_descriptors() {
        assert_eq!(window_size(0), 1024);
        assert_eq!(window_size(1), 1024 + 128);
        assert_eq!(window_size(8), 2048);
        assert_eq!(window_descriptor_for(0), 0);
        assert_eq!(window_descriptor_for(1024), 0);
        assert_eq!(window_descriptor_for(1025), 1);
        for size in [1u64, 5000, 1 << 20, (1 << 20) + 1, 100 << 20, 4_000_000_000] {
            let d = window_descriptor_for(size);
            assert!(window_size(d) >= size);
            if d > 0 {
                assert!(window_size(d - 1) < size);
            }
        }
    }
}
