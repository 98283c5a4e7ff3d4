//! gzip (RFC 1952) as gRPC and Connect mean it: one or more gzip members (Go's
//! `gzip.Reader` reads concatenated members too), each with its CRC-32 and size
//! checked. Not zlib (RFC 1950), not raw deflate.

use std::io::Write;

use flate2::bufread::MultiGzDecoder;
use flate2::write::GzEncoder;
use flate2::Compression;

use crate::bounded::read_bounded;
use crate::{DecompressError, Level};

fn compression(level: Level) -> Compression {
    match level {
        // zlib-rs's level 1 is zlib-ng's deflate_quick: 1.5x faster, ~10 % more bytes
        // than miniz_oxide's level 1 was; level 2 is as fast as that was and tighter
        // (codec-bench in the VM: protojson rows 0.252 -> 0.212 at ~200 MB/s).
        Level::Fastest => Compression::new(2),
        Level::Default => Compression::default(),
    }
}

pub(crate) fn compress(level: Level, input: &[u8], out: &mut Vec<u8>) {
    let mut enc = GzEncoder::new(out, compression(level));
    // Writing into a Vec cannot fail.
    let result = enc.write_all(input).and_then(|()| enc.try_finish());
    debug_assert!(result.is_ok(), "gzip into a Vec failed: {result:?}");
}

/// A gzip member written as its input arrives: each [`GzipStream::write`] hands
/// over the compressed bytes produced so far, [`GzipStream::finish`] the rest and the
/// trailer (CRC-32, size). For answers sent chunk by chunk.
pub(crate) struct GzipStream(GzEncoder<Vec<u8>>);

impl GzipStream {
    pub(crate) fn new(level: Level) -> Self {
        GzipStream(GzEncoder::new(Vec::new(), compression(level)))
    }

    /// Compresses `input`, appending what is ready to `out`.
    pub(crate) fn write(&mut self, input: &[u8], out: &mut Vec<u8>) {
        // Writing into a Vec cannot fail.
        let result = self.0.write_all(input);
        debug_assert!(result.is_ok(), "gzip into a Vec failed: {result:?}");
        out.append(self.0.get_mut());
    }

    /// Ends the member, appending the rest to `out`.
    pub(crate) fn finish(mut self, out: &mut Vec<u8>) {
        let result = self.0.try_finish();
        debug_assert!(result.is_ok(), "gzip into a Vec failed: {result:?}");
        out.append(self.0.get_mut());
    }
}

pub(crate) fn decompress(
    input: &[u8],
    limit: usize,
    out: &mut Vec<u8>,
) -> Result<(), DecompressError> {
    let start = out.len();
    read_bounded(MultiGzDecoder::new(input), start, limit, out)
}

#[cfg(test)]
mod stream_tests {
    use super::*;

    #[test]
    fn a_stream_written_in_chunks_is_one_member() {
        let input: Vec<u8> = (0..200_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        let mut stream = GzipStream::new(Level::Fastest);
        let mut out = Vec::new();
        for chunk in input.chunks(7_001) {
            stream.write(chunk, &mut out);
        }
        stream.finish(&mut out);
        // One member (deflate's bytes may depend on how its input came, so they are
        // not compared with compressing it whole).
        let mut back = Vec::new();
        let mut reader = flate2::read::GzDecoder::new(&out[..]);
        std::io::Read::read_to_end(&mut reader, &mut back).unwrap();
        assert_eq!(back, input);
        assert!(reader.into_inner().is_empty(), "nothing after the member");
    }
}
