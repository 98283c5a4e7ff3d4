//! S2, klauspost/compress's stream format (what connect-go calls "s2", and what
//! PlanetScale's Go client compresses its requests with): Snappy's framing format
//! with a new stream identifier, blocks of up to 4 MiB, and repeat-offset copies.
//!
//! - [`decompress`] reads everything s2's `Reader` does: S2 and Snappy framed streams,
//!   concatenated, with padding and skippable chunks (including S2's seek index).
//!   Every checksum is verified; the output never grows past the caller's limit.
//! - [`compress`] writes an S2 stream of Snappy-compressed 1 MiB blocks; [`Writer`]
//!   writes the same stream as its input arrives.
//!
//! `tests/s2-vectors` (Go) checks both against klauspost/compress itself.

mod block;
mod crc;
mod decode;
mod encode;
mod frame;

pub use encode::Writer;

use crate::DecompressError;

/// Appends a complete S2 stream holding `input` to `out`.
pub fn compress(input: &[u8], out: &mut Vec<u8>) {
    encode::encode_stream(input, out);
}

/// Appends the decoding of the S2 (or Snappy framed) stream `input` to `out`.
///
/// Fails with `TooLarge` before producing more than `limit` bytes (or allocating
/// much past them), and with `Corrupt` on any invalid input. On error `out` is left
/// as it was.
pub fn decompress(input: &[u8], limit: usize, out: &mut Vec<u8>) -> Result<(), DecompressError> {
    let len = out.len();
    let result = decode::decode_stream(input, limit, out);
    if result.is_err() {
        out.truncate(len);
    }
    result
}
