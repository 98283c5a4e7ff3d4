//! The 5-byte message envelope of gRPC and Connect streaming, as the filter and the
//! shim both write and read it: a flags byte, a 4-byte big-endian length, then the
//! message. The shim answers `StreamExecute` in it; the filter re-frames it for the
//! client.

/// Length of an envelope header.
pub const HEADER_LEN: usize = 5;
/// Flag: the message is compressed with the stream's encoding.
pub const COMPRESSED: u8 = 0x01;
/// Flag (Connect streaming): the end-of-stream message (JSON).
pub const END_STREAM: u8 = 0x02;
/// The media type of the shim's streamed answers.
pub const STREAM_CONTENT_TYPE: &str = "application/connect+proto";

/// The header of a `len`-byte message (`None` above 4 GiB - 1).
pub fn header(flags: u8, len: usize) -> Option<[u8; HEADER_LEN]> {
    let [a, b, c, d] = u32::try_from(len).ok()?.to_be_bytes();
    Some([flags, a, b, c, d])
}

/// A header's flags and declared length (`None` if `bytes` is shorter than a header).
pub fn parse_header(bytes: &[u8]) -> Option<(u8, usize)> {
    let (&[flags, a, b, c, d], _) = bytes.split_first_chunk::<HEADER_LEN>()?;
    Some((flags, u32::from_be_bytes([a, b, c, d]) as usize))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip() {
        assert_eq!(header(END_STREAM, 0x0102_0304), Some([2, 1, 2, 3, 4]));
        assert_eq!(parse_header(&[2, 1, 2, 3, 4, 9]), Some((2, 0x0102_0304)));
        assert_eq!(parse_header(&[0, 0, 0]), None);
        assert_eq!(header(0, 1 << 32), None);
    }
}
