//! Message compression for Ferry's filter: identity, gzip, zstd, snappy and S2, with
//! bounded decompression (a bomb stops at the limit, nothing past it is allocated).
//! It builds natively and for `wasm32-wasip1`.
//!
//! - [`Encoding`]: the codecs and their one name table ([`Encoding::parse`],
//!   [`Encoding::name`], [`SUPPORTED`]).
//! - [`compress`] / [`decompress`]: dispatch to one module per codec. Both *append* to
//!   `out`; on error `decompress` leaves `out` as it found it.
//! - [`StreamEncoder`]: gzip, snappy, S2 and zstd written as the input arrives.
//! - [`negotiate::choose`]: our preferred codec among those an accept list allows.
//! - [`adaptive::Policy`]: whether compressing a given body is worth it.
//!
//! Like the filter, it must never panic (a panic traps the filter's VM): the lints
//! below deny every panicking shortcut; `clippy.toml` allows them in tests only.

#![deny(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::unreachable,
    clippy::todo,
    clippy::unimplemented
)]

pub mod adaptive;
mod blocks;
mod bounded;
mod encoding;
mod error;
mod gzip;
pub mod negotiate;
pub mod s2;
mod snappy;
mod stream;
#[cfg(test)]
mod tests;
mod zstd;

pub use adaptive::Policy;
pub use encoding::{Encoding, SUPPORTED};
pub use error::DecompressError;
pub use negotiate::choose;
pub use stream::StreamEncoder;
/// Input per frame of a zstd [`StreamEncoder`] stream (a larger answer is several frames).
pub use zstd::FRAME as ZSTD_STREAM_FRAME;

/// How hard to compress. Only gzip has real levels today (ruzstd implements only its
/// fastest level; snappy and S2 have none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Level {
    /// gzip -2 (zlib-rs: what -1 costs elsewhere), zstd "fastest" (≈ zstd -1).
    #[default]
    Fastest,
    /// gzip -6 (Go's and zlib's default), zstd "fastest" still.
    Default,
}

/// Compresses `input` with `enc` at [`Level::Fastest`], appending to `out`
/// (identity appends `input` as it is).
pub fn compress(enc: Encoding, input: &[u8], out: &mut Vec<u8>) {
    compress_level(enc, Level::Fastest, input, out);
}

/// Compresses `input` with `enc` at `level`, appending to `out`.
pub fn compress_level(enc: Encoding, level: Level, input: &[u8], out: &mut Vec<u8>) {
    match enc {
        Encoding::Identity => out.extend_from_slice(input),
        Encoding::Gzip => gzip::compress(level, input, out),
        Encoding::Zstd => zstd::compress(level, input, out),
        Encoding::Snappy => snappy::compress(input, out),
        Encoding::S2 => s2::compress(input, out),
    }
}

/// Decompresses `input` (encoded with `enc`), appending the result to `out`.
///
/// Fails with [`DecompressError::TooLarge`] as soon as the output passes `limit`
/// bytes (nothing much past the limit is ever allocated, whatever sizes the input
/// declares), and with [`DecompressError::Corrupt`] when `input` is not valid for
/// `enc`. On error `out` is truncated back to its length on entry. An empty input
/// decodes to nothing for every codec (some senders keep the compressed flag on an
/// empty message).
pub fn decompress(
    enc: Encoding,
    input: &[u8],
    limit: usize,
    out: &mut Vec<u8>,
) -> Result<(), DecompressError> {
    let start = out.len();
    if input.is_empty() {
        return Ok(());
    }
    let result = match enc {
        Encoding::Identity => identity(input, limit, out),
        Encoding::Gzip => gzip::decompress(input, limit, out),
        Encoding::Zstd => zstd::decompress(input, limit, out),
        Encoding::Snappy => snappy::decompress(input, limit, out),
        Encoding::S2 => s2::decompress(input, limit, out),
    };
    match result {
        Ok(()) if out.len().saturating_sub(start) > limit => {
            out.truncate(start);
            Err(DecompressError::TooLarge { limit })
        }
        Ok(()) => Ok(()),
        Err(e) => {
            out.truncate(start);
            Err(e)
        }
    }
}

fn identity(input: &[u8], limit: usize, out: &mut Vec<u8>) -> Result<(), DecompressError> {
    if input.len() > limit {
        return Err(DecompressError::TooLarge { limit });
    }
    out.extend_from_slice(input);
    Ok(())
}
