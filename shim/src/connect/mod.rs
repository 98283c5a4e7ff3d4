//! The Connect protocol as the shim speaks it to the filter: errors, stream
//! envelopes, deadlines and response bodies.
pub mod deadline;
pub mod envelope;
pub mod error;
pub mod message_body;
pub mod response;
pub mod stream_body;
