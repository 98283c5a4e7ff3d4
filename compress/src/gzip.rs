//! gzip (RFC 1952) as gRPC and Connect mean it: one or more gzip members (Go's
//! `gzip.Reader` reads concatenated members too), each with its CRC-32 and size
//! checked. Not zlib (RFC 1950), not raw deflate.

use std::io::Write;

use flate2::bufread::MultiGzDecoder;
use flate2::write::GzEncoder;
use flate2::Compression;

use crate::bounded::read_bounded;
use crate::{DecompressError, Level};

pub(crate) fn compress(level: Level, input: &[u8], out: &mut Vec<u8>) {
    let level = match level {
        Level::Fastest => Compression::fast(),
        Level::Default => Compression::default(),
    };
    let mut enc = GzEncoder::new(out, level);
    // Writing into a Vec cannot fail.
    let result = enc.write_all(input).and_then(|()| enc.try_finish());
    debug_assert!(result.is_ok(), "gzip into a Vec failed: {result:?}");
}

pub(crate) fn decompress(
    input: &[u8],
    limit: usize,
    out: &mut Vec<u8>,
) -> Result<(), DecompressError> {
    let start = out.len();
    read_bounded(MultiGzDecoder::new(input), start, limit, out)
}
