//! The checks the fuzz targets share. A target is `fuzz_target!(|data| check(data))`;
//! a failed assertion or a panic is a crash that libFuzzer saves under
//! `fuzz/artifacts/<target>/`.

pub mod json_once;

use ferry_compress::{
    compress, compress_level, decompress, DecompressError, Encoding, Level, StreamEncoder,
    ZSTD_STREAM_FRAME,
};

/// The decompression limit the decoder targets use.
pub const LIMIT: usize = 1 << 20;

/// How far past the limit the output's capacity may go ("a small constant").
pub const CAPACITY_SLACK: usize = 64 << 10;

/// Decoding arbitrary bytes: no panic, never more than `LIMIT` bytes out, no output
/// buffer much past the limit, and `out` as it was on error.
pub fn check_decompress(enc: Encoding, data: &[u8]) {
    let mut out = b"pre".to_vec();
    let result = decompress(enc, data, LIMIT, &mut out);
    assert!(out.starts_with(b"pre"), "{enc}: the caller's bytes were touched");
    let produced = out.len() - 3;
    assert!(produced <= LIMIT, "{enc}: {produced} bytes out, limit {LIMIT}");
    assert!(
        out.capacity() <= 3 + LIMIT + CAPACITY_SLACK,
        "{enc}: output capacity {} for a {LIMIT}-byte limit",
        out.capacity()
    );
    match result {
        Ok(()) => {}
        Err(DecompressError::TooLarge { limit }) => {
            assert_eq!(limit, LIMIT);
            assert_eq!(produced, 0, "{enc}: output left behind on error");
        }
        Err(DecompressError::Corrupt(_)) => {
            assert_eq!(produced, 0, "{enc}: output left behind on error");
        }
    }
}

/// Compressing arbitrary bytes and decoding them gives them back, within a limit of
/// exactly their length, and not within one byte less.
pub fn check_roundtrip(enc: Encoding, data: &[u8]) {
    // The first byte picks the level (only gzip has levels); the rest is the message.
    // Its other bits cut the message into pieces for the stream writer.
    let (level, piece, data) = match data.split_first() {
        Some((b, rest)) if b & 1 == 1 => (Level::Default, usize::from(b >> 1) * 37 + 1, rest),
        Some((b, rest)) => (Level::Fastest, usize::from(b >> 1) * 37 + 1, rest),
        None => (Level::Fastest, 1, data),
    };
    let mut packed = Vec::new();
    if level == Level::Fastest {
        compress(enc, data, &mut packed);
    } else {
        compress_level(enc, level, data, &mut packed);
    }
    // Written in pieces as it arrives (answers sent chunk by chunk): one stream that
    // decodes to the message; for snappy, S2 and zstd within a frame (1 MiB) the very
    // bytes of compressing it whole (deflate's output may depend on how its input came).
    if let Some(mut stream) = StreamEncoder::new(enc, level) {
        let mut streamed = Vec::new();
        for chunk in data.chunks(piece) {
            stream.write(chunk, &mut streamed);
        }
        stream.finish(&mut streamed);
        if enc != Encoding::Gzip && (enc != Encoding::Zstd || data.len() <= ZSTD_STREAM_FRAME) {
            assert!(streamed == packed, "{enc}: written in {piece}-byte pieces, other bytes");
        }
        let mut out = Vec::new();
        if let Err(e) = decompress(enc, &streamed, data.len(), &mut out) {
            panic!("{enc}: {} bytes written in {piece}-byte pieces do not decode: {e}", data.len());
        }
        assert!(out == data, "{enc}: written in {piece}-byte pieces, changed");
    }
    let mut out = Vec::new();
    if let Err(e) = decompress(enc, &packed, data.len(), &mut out) {
        panic!("{enc}: our own {} bytes do not decode: {e}", data.len());
    }
    assert!(out == data, "{enc}: round trip changed {} bytes", data.len());
    if !data.is_empty() {
        let mut out = Vec::new();
        assert_eq!(
            decompress(enc, &packed, data.len() - 1, &mut out),
            Err(DecompressError::TooLarge { limit: data.len() - 1 }),
            "{enc}: limit one byte short"
        );
    }
}
