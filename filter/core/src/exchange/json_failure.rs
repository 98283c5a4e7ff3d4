//! The error a unary or streamed answer ends with when the shim's message cannot be
//! written as protojson (its own module: the unary, streamed and framed answers all use
//! it, and none imports another for it).

use crate::codec::json::ToJsonError;
use crate::errors::Code;
use crate::limits::Limits;
use crate::rpc::Rpc;

/// The code and message for a response that could not be written as JSON.
pub(super) fn json_failure(rpc: &Rpc, e: ToJsonError, limits: Limits) -> (Code, String) {
    match e {
        ToJsonError::Invalid(e) => (
            Code::Internal,
            format!("the shim's {} response is not valid: {e}", rpc.name),
        ),
        // Protojson outgrows the proto (base64): a message under the limit can
        // convert to JSON over it. Envoy resets a stream whose body is replaced
        // past its buffer limit from inside the callback, which the VM cannot
        // survive, so the JSON is capped while it is written.
        ToJsonError::TooLarge => (
            Code::ResourceExhausted,
            format!(
                "the answer converted to JSON is over the {}-byte response limit; select fewer rows or columns",
                limits.max_response_bytes
            ),
        ),
    }
}
