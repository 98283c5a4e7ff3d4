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

pub(crate) fn decompress(
    input: &[u8],
    limit: usize,
    out: &mut Vec<u8>,
) -> Result<(), DecompressError> {
    let start = out.len();
    read_bounded(FrameDecoder::new(input), start, limit, out)
}
