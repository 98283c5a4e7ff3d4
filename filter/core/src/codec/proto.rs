//! Protobuf. Request bodies are already the canonical form, so they are only checked
//! (decoded and dropped): a malformed message gets `invalid_argument` from the filter
//! instead of travelling to the shim.

use prost::Message;

use super::CodecError;

/// Checks that `bytes` decode as an `M`.
pub fn validate<M: Message + Default>(bytes: &[u8]) -> Result<(), CodecError> {
    M::decode(bytes).map(drop).map_err(CodecError::from)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_proto::psdb::v1alpha1::ExecuteRequest;

    #[test]
    fn validates() {
        let ok = ExecuteRequest {
            query: "SELECT 1".into(),
            ..Default::default()
        }
        .encode_to_vec();
        assert!(validate::<ExecuteRequest>(&ok).is_ok());
        assert!(
            validate::<ExecuteRequest>(&[]).is_ok(),
            "an empty message is valid"
        );
        // Field 2 (query), length 5, but only 1 byte follows.
        let err = validate::<ExecuteRequest>(&[0x12, 0x05, b'x']).unwrap_err();
        assert!(err.0.starts_with("invalid protobuf:"), "{err}");
    }
}
