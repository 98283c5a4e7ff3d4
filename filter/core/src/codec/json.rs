//! Protojson: camelCase keys, 64-bit integers as strings, enums as names, bytes as
//! base64, unknown fields ignored, `null` as the default value (all from the pbjson
//! serde impls generated in `ferry-proto`).

use prost::Message;
use serde::{de::DeserializeOwned, Serialize};

use super::CodecError;

/// Protojson request → protobuf bytes.
pub fn to_proto<M: Message + DeserializeOwned>(json: &[u8]) -> Result<Vec<u8>, CodecError> {
    let message: M = serde_json::from_slice(json)?;
    Ok(message.encode_to_vec())
}

/// Why a response could not be written as protojson.
#[derive(Debug, PartialEq, Eq)]
pub enum ToJsonError {
    /// The bytes are not a valid message (or not encodable as JSON).
    Invalid(CodecError),
    /// The JSON would pass the size limit; writing stopped there.
    TooLarge,
}

/// Protobuf response → protojson, appended to `out` (which may already hold a frame
/// header, so the JSON is written once, in place) while `out` stays within `max_len`
/// bytes: protojson outgrows its protobuf (bytes become base64), and the filter must
/// never build, nor hand Envoy, a body past its limit.
pub fn from_proto<M: Message + Default + Serialize>(
    proto: &[u8],
    out: &mut Vec<u8>,
    max_len: usize,
) -> Result<(), ToJsonError> {
    let message = M::decode(proto).map_err(|e| ToJsonError::Invalid(e.into()))?;
    // Base64 is 4/3 of the bytes; one allocation for the usual answer, bounded by the cap.
    out.reserve((proto.len().saturating_mul(3) / 2).min(max_len.saturating_sub(out.len())));
    let writer = Capped { out, max_len };
    serde_json::to_writer(writer, &message).map_err(|e| {
        if e.is_io() {
            ToJsonError::TooLarge
        } else {
            ToJsonError::Invalid(CodecError(format!("cannot encode JSON: {e}")))
        }
    })
}

/// A `Vec` writer that refuses to grow past `max_len`.
struct Capped<'a> {
    out: &'a mut Vec<u8>,
    max_len: usize,
}

impl std::io::Write for Capped<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.out.len().saturating_add(buf.len()) > self.max_len {
            return Err(std::io::Error::other("over the size limit"));
        }
        self.out.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_proto::psdb::v1alpha1::{ExecuteRequest, ExecuteResponse};

    #[test]
    fn round_trip() {
        let proto = to_proto::<ExecuteRequest>(br#"{"query":"SELECT 1","session":null}"#).unwrap();
        assert_eq!(
            ExecuteRequest::decode(&proto[..]).unwrap().query,
            "SELECT 1"
        );
        let resp = ExecuteResponse {
            timing: 0.5,
            ..Default::default()
        }
        .encode_to_vec();
        let mut out = b"xx".to_vec();
        from_proto::<ExecuteResponse>(&resp, &mut out, 100).unwrap();
        assert_eq!(out, br#"xx{"timing":0.5}"#);
        // 14 bytes of output: exactly at the limit is fine, one byte less is not.
        from_proto::<ExecuteResponse>(&resp, &mut Vec::new(), 14).unwrap();
        let mut out = Vec::new();
        let err = from_proto::<ExecuteResponse>(&resp, &mut out, 13).unwrap_err();
        assert_eq!(err, ToJsonError::TooLarge);
        assert!(out.len() <= 13);
    }

    #[test]
    fn errors_name_the_problem() {
        let err = to_proto::<ExecuteRequest>(b"{").unwrap_err();
        assert!(
            err.0.starts_with("invalid JSON: EOF while parsing"),
            "{err}"
        );
        let err = from_proto::<ExecuteResponse>(&[0xff], &mut Vec::new(), 100).unwrap_err();
        let ToJsonError::Invalid(err) = err else {
            panic!("{err:?}")
        };
        assert!(err.0.starts_with("invalid protobuf:"), "{err}");
    }
}
