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

/// Protobuf response → protojson, appended to `out` (which may already hold a frame
/// header, so the JSON is written once, in place).
pub fn from_proto<M: Message + Default + Serialize>(
    proto: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), CodecError> {
    let message = M::decode(proto)?;
    serde_json::to_writer(out, &message).map_err(|e| CodecError(format!("cannot encode JSON: {e}")))
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
        from_proto::<ExecuteResponse>(&resp, &mut out).unwrap();
        assert_eq!(out, br#"xx{"timing":0.5}"#);
    }

    #[test]
    fn errors_name_the_problem() {
        let err = to_proto::<ExecuteRequest>(b"{").unwrap_err();
        assert!(
            err.0.starts_with("invalid JSON: EOF while parsing"),
            "{err}"
        );
        let err = from_proto::<ExecuteResponse>(&[0xff], &mut Vec::new()).unwrap_err();
        assert!(err.0.starts_with("invalid protobuf:"), "{err}");
    }
}
