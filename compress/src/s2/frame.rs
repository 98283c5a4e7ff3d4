//! The stream format's chunk types and size limits (Snappy's framing format with S2's
//! changes), shared by the reader and the writer.

/// Every chunk starts with a type byte and a 3-byte little-endian body length.
pub(super) const CHUNK_HEADER_LEN: usize = 4;
/// Data chunks start their body with the masked CRC-32C of the uncompressed data.
pub(super) const CHECKSUM_LEN: usize = 4;

pub(super) const COMPRESSED: u8 = 0x00;
pub(super) const UNCOMPRESSED: u8 = 0x01;
pub(super) const STREAM_IDENTIFIER: u8 = 0xff;
/// 0x02..=0x7f are reserved and must not be skipped; 0x80..=0xfd (e.g. S2's seek
/// index, 0x99) and padding (0xfe) are skipped.
pub(super) const LAST_UNSKIPPABLE: u8 = 0x7f;

pub(super) const S2_MAGIC: &[u8; 6] = b"S2sTwO";
/// s2 also reads Snappy framed streams (whose blocks are valid S2 blocks).
pub(super) const SNAPPY_MAGIC: &[u8; 6] = b"sNaPpY";

/// Largest uncompressed block of an S2 stream (4 MiB).
pub(super) const MAX_BLOCK: usize = 4 << 20;
/// Largest uncompressed block of a Snappy stream.
pub(super) const MAX_SNAPPY_BLOCK: usize = 64 << 10;
/// Largest compressed chunk body s2's reader accepts: checksum + `MaxEncodedLen(4 MiB)`
/// (4 MiB of literals, a 4-byte length varint and a 4-byte literal header).
pub(super) const MAX_COMPRESSED_CHUNK: usize = CHECKSUM_LEN + MAX_BLOCK + 4 + 4;
