//! A large unary proto success for an enveloped client (gRPC, gRPC-Web) that accepts a
//! codec the filter writes as it goes (gzip, snappy, S2). Its one message needs its
//! length in front, so nothing can go out before the end; but only the compressed
//! message has to wait, not the answer: once the first `sample_bytes` say compression
//! pays, each chunk is compressed into the VM and emptied from Envoy's buffer (the
//! callback pauses on the emptied chunk, as a held stream does), and the end writes
//! the envelope, the compressed message and the protocol's end. Envoy then holds a
//! fraction of the answer instead of all of it (and the VM a copy besides).
//!
//! When the sample does not pay, or the answer ends within it, the answer is sent
//! whole as before (uncompressed: its header is prepended to Envoy's buffer).

use ferry_compress::{Encoding, StreamEncoder};

use crate::config::Config;
use crate::limits::Limits;

pub(crate) struct FramedUnary {
    /// The codec the sample is judged for; `None` once judged.
    judge: Option<Encoding>,
    encoder: Option<StreamEncoder>,
    /// The compressed message so far.
    packed: Vec<u8>,
    /// Protobuf bytes seen, against the response limit.
    seen: usize,
    /// The body ends with the chunk being fed.
    pub(super) at_end: bool,
}

/// What a chunk did.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Fed {
    /// Compressed into the VM: empty the chunk and wait for more.
    Kept,
    /// The whole message, compressed.
    Done(Vec<u8>),
    /// The sample does not pay: the answer goes whole and uncompressed.
    Whole,
}

impl FramedUnary {
    /// For a client accepting `enc`, `None` if the filter cannot write it as it goes.
    pub(super) fn new(enc: Encoding) -> Option<Self> {
        StreamEncoder::streams(enc).then(|| FramedUnary {
            judge: Some(enc),
            encoder: None,
            packed: Vec::new(),
            seen: 0,
            at_end: false,
        })
    }

    /// The first `sample_bytes` are still awaited (Envoy buffers them).
    pub(super) fn sampling(&self) -> bool {
        self.judge.is_some()
    }

    /// Counts the next `size` bytes against the response limit.
    pub(super) fn admit(&mut self, size: usize, limits: Limits) -> bool {
        self.seen = self.seen.saturating_add(size);
        limits.check_response(self.seen).is_ok()
    }

    /// The next chunk (with a sample pending: all of the body so far).
    pub(super) fn feed(&mut self, chunk: &[u8], settings: &Config) -> Fed {
        if let Some(enc) = self.judge.take() {
            if !settings.compression.worth(enc, chunk) {
                return Fed::Whole;
            }
            self.encoder = StreamEncoder::new(enc, settings.compression.level);
        }
        let Some(encoder) = self.encoder.as_mut() else {
            return Fed::Whole;
        };
        encoder.write(chunk, &mut self.packed);
        if !self.at_end {
            return Fed::Kept;
        }
        if let Some(encoder) = self.encoder.take() {
            encoder.finish(&mut self.packed);
        }
        Fed::Done(std::mem::take(&mut self.packed))
    }
}
