//! Compressing an answer as it goes out, chunk by chunk, into one stream of its codec:
//! gzip (one member), snappy and S2 (the very bytes of compressing the answer whole), zstd
//! (a frame per MiB of input: ruzstd's encoder takes its input whole).

use crate::gzip::GzipStream;
use crate::snappy::SnappyStream;
use crate::zstd::ZstdStream;
use crate::{s2, Encoding, Level};

pub struct StreamEncoder(Codec);

enum Codec {
    Gzip(GzipStream),
    Snappy(SnappyStream),
    S2(s2::Writer),
    Zstd(ZstdStream),
}

impl StreamEncoder {
    /// A stream of `enc` at `level` (gzip's only), or `None` for identity.
    pub fn new(enc: Encoding, level: Level) -> Option<Self> {
        match enc {
            Encoding::Gzip => Some(StreamEncoder(Codec::Gzip(GzipStream::new(level)))),
            Encoding::Snappy => Some(StreamEncoder(Codec::Snappy(SnappyStream::new()))),
            Encoding::S2 => Some(StreamEncoder(Codec::S2(s2::Writer::new()))),
            Encoding::Zstd => Some(StreamEncoder(Codec::Zstd(ZstdStream::new(level)))),
            Encoding::Identity => None,
        }
    }

    /// Whether `enc` can be written as it goes.
    pub fn streams(enc: Encoding) -> bool {
        !matches!(enc, Encoding::Identity)
    }

    pub fn encoding(&self) -> Encoding {
        match self.0 {
            Codec::Gzip(_) => Encoding::Gzip,
            Codec::Snappy(_) => Encoding::Snappy,
            Codec::S2(_) => Encoding::S2,
            Codec::Zstd(_) => Encoding::Zstd,
        }
    }

    /// Compresses `input`, appending what is ready to `out` (a codec may keep up to
    /// a block of input back: 64 KiB for snappy, 1 MiB for S2 and zstd).
    pub fn write(&mut self, input: &[u8], out: &mut Vec<u8>) {
        match &mut self.0 {
            Codec::Gzip(gzip) => gzip.write(input, out),
            Codec::Snappy(snappy) => snappy.write(input, out),
            Codec::S2(s2) => s2.write(input, out),
            Codec::Zstd(zstd) => zstd.write(input, out),
        }
    }

    /// Ends the stream, appending the rest to `out`.
    pub fn finish(self, out: &mut Vec<u8>) {
        match self.0 {
            Codec::Gzip(gzip) => gzip.finish(out),
            Codec::Snappy(snappy) => snappy.finish(out),
            Codec::S2(s2) => s2.finish(out),
            Codec::Zstd(zstd) => zstd.finish(out),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::random;

    #[test]
    fn written_in_chunks_it_equals_the_whole_and_decodes() {
        let mut input = Vec::new();
        for i in 0..60_000u32 {
            input.extend_from_slice(format!("{i}\tuser{i}@example.com\t").as_bytes());
        }
        input.extend(random(300_000, 5));
        for enc in Encoding::ALL {
            let Some(mut stream) = StreamEncoder::new(enc, Level::Fastest) else {
                assert!(!StreamEncoder::streams(enc), "{enc:?}");
                continue;
            };
            assert!(StreamEncoder::streams(enc));
            assert_eq!(stream.encoding(), enc);
            let mut out = Vec::new();
            for chunk in input.chunks(70_001) {
                stream.write(chunk, &mut out);
            }
            stream.finish(&mut out);
            // gzip is one member; deflate's bytes may depend on how its input came.
            // zstd past a frame is several frames (below: within one, the same bytes).
            if !matches!(enc, Encoding::Gzip | Encoding::Zstd) {
                let mut whole = Vec::new();
                crate::compress(enc, &input, &mut whole);
                assert!(
                    out == whole,
                    "{enc:?}: the same bytes as compressing it whole"
                );
            }
            let mut back = Vec::new();
            crate::decompress(enc, &out, input.len(), &mut back).unwrap();
            assert!(back == input, "{enc:?}");
        }
    }

    #[test]
    fn zstd_is_a_frame_per_mib_and_decodes_as_one() {
        let frames = |out: &[u8]| {
            out.windows(4)
                .filter(|w| *w == [0x28, 0xB5, 0x2F, 0xFD])
                .count()
        };
        let mut input = Vec::new();
        for i in 0..200_000u32 {
            input.extend_from_slice(format!("{i}\tuser{i}@example.com\t").as_bytes());
        }
        assert!(input.len() > 4 * crate::zstd::FRAME);
        for (len, piece) in [
            (0, 1),
            (10, 3),
            (crate::zstd::FRAME, 65_536),
            (crate::zstd::FRAME + 1, 100_000),
            (input.len(), 1_000_003),
        ] {
            let data = input.get(..len).unwrap();
            let mut stream = StreamEncoder::new(Encoding::Zstd, Level::Fastest).unwrap();
            let mut out = Vec::new();
            for chunk in data.chunks(piece) {
                stream.write(chunk, &mut out);
            }
            stream.finish(&mut out);
            if len <= crate::zstd::FRAME {
                let mut whole = Vec::new();
                crate::compress(Encoding::Zstd, data, &mut whole);
                assert!(
                    out == whole,
                    "{len} bytes: one frame, the bytes of the whole"
                );
            } else {
                assert!(
                    frames(&out) >= len.div_ceil(crate::zstd::FRAME),
                    "{len} bytes"
                );
            }
            let mut back = Vec::new();
            crate::decompress(Encoding::Zstd, &out, data.len(), &mut back).unwrap();
            assert!(back == data, "{len} bytes in {piece}-byte pieces");
        }
    }
}
