//! Connect streaming framing, the shim's one streaming form (StreamExecute):
//! every message is an envelope `[flags: u8][length: u32 BE][bytes]`. Data
//! envelopes (flags 0) carry a protobuf `ExecuteResponse`, uncompressed; the
//! last envelope is the end of stream (flags 0x02) with a JSON body: `{}`, or
//! `{"error": {"code": "<connect code>", "message": "..."}}`.
use crate::connect::error::ConnectError;
use bytes::{BufMut, Bytes, BytesMut};
use ferry_wire::envelope::{END_STREAM, HEADER_LEN as HEADER};
use prost::Message;

pub use ferry_wire::envelope::STREAM_CONTENT_TYPE as CONTENT_TYPE;
const DATA: u8 = 0x00;

/// A data envelope holding one message.
pub fn data(msg: &impl Message) -> Bytes {
    let len = msg.encoded_len();
    let mut buf = BytesMut::with_capacity(HEADER + len);
    buf.put_u8(DATA);
    buf.put_u32(frame_len(len));
    // Cannot fail: the buffer has room for the whole message.
    let _ = msg.encode(&mut buf);
    buf.freeze()
}

/// A data envelope holding one message's encoded bytes, given in parts.
pub fn data_parts(parts: &[&[u8]]) -> Bytes {
    let len = parts.iter().map(|p| p.len()).sum();
    let mut buf = BytesMut::with_capacity(HEADER + len);
    buf.put_u8(DATA);
    buf.put_u32(frame_len(len));
    for part in parts {
        buf.put_slice(part);
    }
    buf.freeze()
}

/// The end-of-stream envelope: success, or the error that ended the stream.
pub fn end_stream(error: Option<&ConnectError>) -> Bytes {
    let json = end_stream_json(error);
    let mut buf = BytesMut::with_capacity(HEADER + json.len());
    buf.put_u8(END_STREAM);
    buf.put_u32(frame_len(json.len()));
    buf.put_slice(&json);
    buf.freeze()
}

pub fn end_stream_json(error: Option<&ConnectError>) -> Vec<u8> {
    let value = match error {
        None => serde_json::json!({}),
        Some(e) => serde_json::json!({"error": {"code": e.name(), "message": e.message}}),
    };
    value.to_string().into_bytes()
}

/// Messages are far below 4 GiB (rows are bounded by MySQL's
/// max_allowed_packet); saturate rather than wrap if one is not.
fn frame_len(len: usize) -> u32 {
    u32::try_from(len).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_proto::psdb::v1alpha1::ExecuteResponse;
    use ferry_proto::vitess::vtrpc::Code;

    #[test]
    fn end_of_stream_is_json_in_a_flagged_envelope() {
        let ok = end_stream(None);
        assert_eq!(&ok[..], b"\x02\x00\x00\x00\x02{}");
        let e = ConnectError::new(Code::DeadlineExceeded, "too slow");
        let body = end_stream(Some(&e));
        assert_eq!(body[0], 0x02);
        let len = u32::from_be_bytes([body[1], body[2], body[3], body[4]]) as usize;
        assert_eq!(len, body.len() - 5);
        let v: serde_json::Value = serde_json::from_slice(&body[5..]).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"error": {"code": "deadline_exceeded", "message": "too slow"}})
        );
    }

    #[test]
    fn data_envelopes_carry_the_bare_message() {
        let msg = ExecuteResponse {
            timing: 1.5,
            ..Default::default()
        };
        let b = data(&msg);
        assert_eq!(&b[..5], &[0, 0, 0, 0, 9]);
        assert_eq!(ExecuteResponse::decode(&b[5..]).unwrap(), msg);
        assert_eq!(&data(&ExecuteResponse::default())[..], &[0, 0, 0, 0, 0]);
    }
}
