//! A unary success for an enveloped client (gRPC, gRPC-Web) whose one message needs
//! its length in front, answered without Envoy buffering the answer (Envoy's buffer
//! limit would reset a stream whose 200 is out: on the meshes it is the listener's
//! per-connection limit, 1 MiB or less). Two ways:
//!
//! - [`Declared`]: the shim declared the size (`content-length`, on every answer it
//!   sends whole) and the message goes uncompressed in proto: the envelope header is
//!   written in front of the first chunk and every chunk goes on as it comes. The chunk
//!   that completes the declared size, if the body has not ended with it, is held (the
//!   callback pauses: Envoy keeps that one chunk), so the end, which adds the trailers
//!   (or appends gRPC-Web's trailer frame), follows a paused callback: Envoy then passes
//!   the body and then the trailers on whatever later filters do with the body (Envoy's
//!   grpc_web filter answering text stops on a chunk without a whole frame, and trailers
//!   added on a chunk a later filter stops are dropped). A body longer or shorter than
//!   declared resets the stream: its frame would be corrupt.
//! - [`FramedUnary`]: anything else (no declared size: the shim's large answers come in
//!   pieces; a codec to judge and compress; JSON; gRPC-Web text, whose bytes all go out
//!   in base64): each chunk moves into the VM as it arrives (read, Envoy's chunk
//!   emptied, the callback continues: Envoy buffers nothing), bounded by
//!   `max_response_bytes`. When the client accepts a codec the filter writes as it goes
//!   (gzip, snappy, S2) and the first `sample_bytes` compress to `max_ratio`, the rest
//!   is compressed as it arrives; otherwise the message is kept as it is. The end writes
//!   the envelope, the message and the protocol's end as the last chunk's body from a
//!   callback that did not follow a pause: Envoy does not hold that chunk against its
//!   buffer limit (a chunk is only checked when added to a paused filter's buffer).
//!   The VM holds one copy of the message (or of its compressed form). Behind Envoy's
//!   grpc_web filter answering text ([`FramedUnary::pause`]) the emptied chunks pause
//!   instead, and the end is written into Envoy's (empty) buffer.

use ferry_compress::{Encoding, StreamEncoder};

use crate::config::Config;
use crate::envelope::HEADER_LEN;
use crate::limits::Limits;

/// A declared, uncompressed proto answer: its chunks go on as they come.
#[derive(Debug)]
pub(crate) struct Declared {
    /// The declared message length (`content-length`).
    len: usize,
    /// Body bytes seen so far.
    seen: usize,
    /// The envelope header went in front of the first chunk.
    started: bool,
    /// Bytes Envoy holds after the last callback paused (the chunk that completed the
    /// message, with its header if it was the first), `None` if it did not pause.
    held: Option<usize>,
}

/// What a body callback of a [`Declared`] answer does.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Step {
    /// Passes this chunk on (`prepend`: the envelope header goes in front first).
    Pass { prepend: bool },
    /// The message is complete before the body's end: hold this chunk (pause) so the
    /// end follows a paused callback.
    Hold { prepend: bool },
    /// The body ended with the message complete: add the protocol's end.
    End,
    /// The only chunk is the whole body: answered as any whole answer (its header is
    /// prepended, its trailers added).
    Whole,
    /// The body does not match the declared size.
    Mismatch(String),
}

impl Declared {
    pub(super) fn new(len: usize) -> Self {
        Declared {
            len,
            seen: 0,
            started: false,
            held: None,
        }
    }

    /// The declared message length.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// The end may write into a body Envoy still holds (the last callback paused).
    pub(super) fn holds(&self) -> bool {
        self.held.is_some()
    }

    /// A body callback: `body_size` as the host reports it (what it holds after a
    /// paused callback, else this chunk).
    pub(super) fn body(&mut self, body_size: usize, end_of_stream: bool) -> Step {
        let new = match self.held {
            Some(held) => body_size.saturating_sub(held),
            None => body_size,
        };
        let first = !self.started;
        self.seen = self.seen.saturating_add(new);
        if self.seen > self.len {
            return Step::Mismatch(self.mismatch("longer"));
        }
        if end_of_stream {
            if self.seen < self.len {
                return Step::Mismatch(self.mismatch("shorter"));
            }
            return if first { Step::Whole } else { Step::End };
        }
        self.started = true;
        if self.seen == self.len {
            let header = if first { HEADER_LEN } else { 0 };
            self.held = Some(body_size.saturating_add(header));
            return Step::Hold { prepend: first };
        }
        Step::Pass { prepend: first }
    }

    /// The body ended with trailers: `Ok(())` if the message is complete.
    pub(super) fn trailers(&self) -> Result<(), String> {
        if !self.started || self.seen != self.len {
            return Err(self.mismatch(if self.seen > self.len {
                "longer"
            } else {
                "shorter"
            }));
        }
        Ok(())
    }

    fn mismatch(&self, how: &str) -> String {
        format!(
            "the shim's answer is {how} than the {} bytes it declared (content-length): its gRPC frame would be corrupt",
            self.len
        )
    }
}

pub(crate) struct FramedUnary {
    /// The codec the sample is judged for; `None` once judged, or nothing to judge.
    judge: Option<Encoding>,
    /// The sample was judged and did not pay.
    refused: bool,
    encoder: Option<StreamEncoder>,
    /// The message as it came (while sampling, or when it is not compressed as it
    /// comes), after room for its envelope header.
    kept: Vec<u8>,
    /// The compressed message so far.
    packed: Vec<u8>,
    /// Protobuf bytes seen, against the response limit.
    seen: usize,
    /// The body ends with the chunk being fed.
    pub(super) at_end: bool,
    /// Pause on each emptied chunk instead of letting it go on: Envoy's grpc_web
    /// filter answering text comes after this one (`Call::behind_web_text`), and must
    /// see nothing before the whole frame. Envoy's buffer stays empty until the end,
    /// which is then written into it: there Envoy's limit bounds the message (our own
    /// configurations, the only ones placing grpc_web in front: 80 MiB).
    pub(super) pause: bool,
}

/// What a chunk did.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Fed {
    /// Kept in the VM: empty the chunk and go on.
    Kept,
    /// The whole message, compressed as it came.
    Done(Vec<u8>),
    /// The whole message as it came, after [`HEADER_LEN`] bytes of room for its
    /// envelope header: converted (and compressed, if that pays) whole. `refused`: its
    /// sample was judged and does not pay (it goes uncompressed).
    Whole { kept: Vec<u8>, refused: bool },
}

impl FramedUnary {
    /// `judge`: the codec the client accepts, if the message may be compressed as it
    /// comes (proto; the filter writes that codec as it goes); else it is kept whole.
    pub(super) fn new(judge: Option<Encoding>) -> Self {
        FramedUnary {
            judge: judge.filter(|enc| *enc != Encoding::Identity && StreamEncoder::streams(*enc)),
            refused: false,
            encoder: None,
            kept: vec![0; HEADER_LEN],
            packed: Vec::new(),
            seen: 0,
            at_end: false,
            pause: false,
        }
    }

    /// No body byte has come yet.
    pub(super) fn is_empty(&self) -> bool {
        self.seen == 0
    }

    /// Counts the next `size` bytes against the response limit.
    pub(super) fn admit(&mut self, size: usize, limits: Limits) -> bool {
        self.seen = self.seen.saturating_add(size);
        limits.check_response(self.seen).is_ok()
    }

    /// The next chunk.
    pub(super) fn feed(&mut self, chunk: &[u8], settings: &Config) -> Fed {
        if let Some(enc) = self.judge {
            self.kept.extend_from_slice(chunk);
            let sample = self.kept.len().saturating_sub(HEADER_LEN);
            if sample < settings.compression.sample_bytes && !self.at_end {
                return Fed::Kept;
            }
            self.judge = None;
            self.refused = true;
            let message = self.kept.get(HEADER_LEN..).unwrap_or_default();
            if settings.compression.worth(enc, message) {
                if let Some(mut encoder) = StreamEncoder::new(enc, settings.compression.level) {
                    encoder.write(message, &mut self.packed);
                    self.encoder = Some(encoder);
                    self.kept = Vec::new();
                    self.refused = false;
                }
            }
        } else if let Some(encoder) = self.encoder.as_mut() {
            encoder.write(chunk, &mut self.packed);
        } else {
            self.kept.extend_from_slice(chunk);
        }
        if !self.at_end {
            return Fed::Kept;
        }
        if let Some(encoder) = self.encoder.take() {
            encoder.finish(&mut self.packed);
            return Fed::Done(std::mem::take(&mut self.packed));
        }
        Fed::Whole {
            kept: std::mem::take(&mut self.kept),
            refused: self.refused,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_compress::Policy;

    fn settings(sample_bytes: usize) -> Config {
        Config {
            compression: Policy {
                sample_bytes,
                min_bytes: 16,
                ..Policy::default()
            },
            ..Config::default()
        }
    }

    #[test]
    fn a_declared_answer_passes_chunk_by_chunk_and_holds_the_chunk_that_completes_it() {
        let mut d = Declared::new(10);
        assert_eq!(d.body(4, false), Step::Pass { prepend: true });
        assert_eq!(d.body(0, false), Step::Pass { prepend: false });
        assert_eq!(d.body(6, false), Step::Hold { prepend: false });
        assert!(d.holds());
        // Envoy reports what it holds: that chunk (6), then an empty end.
        assert_eq!(d.body(6, true), Step::End);
        // Complete with the end itself: no hold.
        let mut d = Declared::new(10);
        assert_eq!(d.body(4, false), Step::Pass { prepend: true });
        assert_eq!(d.body(6, true), Step::End);
        assert!(!d.holds());
        // The first chunk completes it: header and chunk are held.
        let mut d = Declared::new(10);
        assert_eq!(d.body(10, false), Step::Hold { prepend: true });
        assert_eq!(d.body(15, true), Step::End);
        // One chunk, the whole body.
        assert_eq!(Declared::new(3).body(3, true), Step::Whole);
        assert_eq!(Declared::new(0).body(0, true), Step::Whole);
    }

    #[test]
    fn a_body_that_does_not_match_its_declared_size_is_refused() {
        let mut d = Declared::new(10);
        assert_eq!(d.body(8, false), Step::Pass { prepend: true });
        assert!(matches!(d.body(3, false), Step::Mismatch(m) if m.contains("longer")));
        let mut d = Declared::new(10);
        assert_eq!(d.body(8, false), Step::Pass { prepend: true });
        assert!(matches!(d.body(0, true), Step::Mismatch(m) if m.contains("shorter")));
        assert!(matches!(Declared::new(10).body(9, true), Step::Mismatch(_)));
        // More after the held chunk.
        let mut d = Declared::new(4);
        assert_eq!(d.body(4, false), Step::Hold { prepend: true });
        assert!(matches!(d.body(10, true), Step::Mismatch(m) if m.contains("longer")));
        // Trailers end it.
        let mut d = Declared::new(4);
        assert!(d.trailers().is_err());
        d.body(4, false);
        assert_eq!(d.trailers(), Ok(()));
    }

    #[test]
    fn an_answer_kept_in_the_vm_is_whole_at_its_end() {
        let config = settings(64);
        let mut f = FramedUnary::new(None);
        assert!(f.is_empty());
        assert!(f.admit(3, config.limits));
        assert_eq!(f.feed(b"abc", &config), Fed::Kept);
        f.at_end = true;
        assert_eq!(
            f.feed(b"de", &config),
            Fed::Whole {
                kept: b"\0\0\0\0\0abcde".to_vec(),
                refused: false
            }
        );
        // Past the limit.
        let limits = Limits {
            max_request_bytes: 10,
            max_response_bytes: 10,
        };
        let mut f = FramedUnary::new(None);
        assert!(f.admit(10, limits));
        assert!(!f.admit(1, limits));
    }

    #[test]
    fn a_sample_that_pays_is_compressed_as_it_comes_else_kept() {
        let config = settings(64);
        let mut f = FramedUnary::new(Some(Encoding::Gzip));
        let chunk = [b'a'; 40];
        assert_eq!(f.feed(&chunk, &config), Fed::Kept);
        assert_eq!(f.feed(&chunk, &config), Fed::Kept, "judged: compressing");
        assert!(f.kept.is_empty());
        f.at_end = true;
        let Fed::Done(packed) = f.feed(&chunk, &config) else {
            panic!()
        };
        let mut out = Vec::new();
        ferry_compress::decompress(Encoding::Gzip, &packed, 1 << 20, &mut out).unwrap();
        assert_eq!(out, [b'a'; 120]);
        // Incompressible: kept as it is.
        let noise: Vec<u8> = (0u32..200)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        let mut f = FramedUnary::new(Some(Encoding::Gzip));
        assert_eq!(f.feed(&noise[..100], &config), Fed::Kept);
        f.at_end = true;
        let Fed::Whole {
            kept,
            refused: true,
        } = f.feed(&noise[100..], &config)
        else {
            panic!()
        };
        assert_eq!(&kept[HEADER_LEN..], &noise[..]);
        // Ending within the sample: judged whole.
        let mut f = FramedUnary::new(Some(Encoding::Gzip));
        f.at_end = true;
        assert!(matches!(f.feed(&chunk, &config), Fed::Done(_)));
    }
}
