//! Message codecs: protojson (via `ferry-proto`'s pbjson serde impls) and protobuf
//! (prost). Generic over the message type; `rpc.rs` instantiates them per RPC.

pub mod json;
pub mod json_stream;
pub mod proto;

use std::fmt;

/// A message that could not be decoded or encoded; the text names the problem.
#[derive(Debug, PartialEq, Eq)]
pub struct CodecError(pub String);

impl fmt::Display for CodecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<prost::DecodeError> for CodecError {
    fn from(e: prost::DecodeError) -> Self {
        CodecError(format!("invalid protobuf: {e}"))
    }
}

impl From<serde_json::Error> for CodecError {
    fn from(e: serde_json::Error) -> Self {
        CodecError(format!("invalid JSON: {e}"))
    }
}
