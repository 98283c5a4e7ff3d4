//! A server stream on its way out: the shim's Connect streaming envelopes (each an
//! uncompressed proto message, then an end-of-stream message) → the client's stream,
//! converted as each chunk arrives: codec, per-message compression, the client's
//! envelopes, and the protocol's end (gRPC trailers, Connect's end message). Only the
//! partial envelope at a chunk's end stays in the VM; nothing is buffered whole.
//!
//! Once the stream's outcome is known (the shim's end message, or a failure) before
//! its body ends, the rest is held: that chunk's output stays in the VM, the chunk is
//! emptied and the callback pauses, and the client's end goes out with the body's end
//! from a paused filter. Envoy (1.40, `FilterManager::encodeData`) loses trailers a
//! filter adds in a body callback whenever a later encoder filter stops on that same
//! chunk, and the stream then hangs; the grpc_web filter in front of this one stops on
//! every chunk without a whole frame when it answers `grpc-web-text`, and the last
//! chunk of a gRPC stream is empty (its end is the trailers). Resumed from a pause,
//! Envoy passes the body on and then the trailers, whatever the later filters do with
//! the body. The shim ends its body with a chunk of its own, after its end message,
//! so the pause happens; the hold lasts until that chunk arrives.

use ferry_compress::Encoding;

use super::json_failure::json_failure;
use super::ResponseEdit;
use crate::compression;
use crate::config::Config;
use crate::envelope::{self, Decoder, EnvelopeError, COMPRESSED, END_STREAM};
use crate::errors::Code;
use crate::limits::Limits;
use crate::protocol::{connect_stream, Client, Codec};
use crate::rpc::Rpc;

pub(crate) struct StreamConverter {
    decoder: Decoder,
    /// The body ends with the chunk being converted.
    pub(super) at_end: bool,
    /// The shim's end-of-stream message, once seen: its error, if any.
    ended: Option<Option<(Code, String)>>,
    /// The stream went wrong on the way: the rest is dropped and this is its end.
    failed: Option<(Code, String)>,
    /// Output held back since the outcome became known, to go out with the end.
    held: Vec<u8>,
}

/// Why a message of the stream cannot go on.
struct Failure(Code, String);

impl From<EnvelopeError> for Failure {
    fn from(e: EnvelopeError) -> Self {
        Failure(
            Code::Internal,
            format!("the shim's stream cannot be read: {e}"),
        )
    }
}

impl StreamConverter {
    pub(super) fn new(limits: Limits) -> Self {
        StreamConverter {
            decoder: Decoder::new(limits.max_response_bytes),
            at_end: false,
            ended: None,
            failed: None,
            held: Vec::new(),
        }
    }

    /// The outcome is known and the rest is held until the body's end (see above).
    pub(super) fn holds(&self) -> bool {
        self.ended.is_some() || self.failed.is_some()
    }

    /// Converts the next chunk of the shim's stream; at the end, adds the client's end.
    pub(super) fn convert(
        &mut self,
        chunk: &[u8],
        rpc: &Rpc,
        client: Client,
        encoding: Encoding,
        settings: &Config,
    ) -> ResponseEdit {
        let mut out = Vec::with_capacity(chunk.len().saturating_add(envelope::HEADER_LEN));
        if self.failed.is_none() {
            let ended = &mut self.ended;
            let result = self.decoder.feed(chunk, |flags, message| {
                if ended.is_some() {
                    return Err(Failure(
                        Code::Internal,
                        "the shim's stream goes on after its end-of-stream message".into(),
                    ));
                }
                if flags & END_STREAM != 0 {
                    *ended = Some(connect_stream::parse_end(message));
                    return Ok(());
                }
                if flags != 0 {
                    return Err(Failure(
                        Code::Internal,
                        format!("the shim sent a message with flags 0x{flags:02x}"),
                    ));
                }
                write_message(message, rpc, client, encoding, settings, &mut out)
            });
            if let Err(Failure(code, message)) = result {
                self.failed = Some((code, message));
            }
        }
        if !self.at_end {
            if self.holds() {
                self.held.append(&mut out);
                return ResponseEdit {
                    pause: true,
                    ..ResponseEdit::replace(Vec::new(), Vec::new())
                };
            }
            return ResponseEdit::replace(out, Vec::new());
        }
        let outcome = self.outcome();
        let end = client.wire.end(
            outcome
                .as_ref()
                .map(|(code, message)| (*code, message.as_str())),
        );
        let mut body = std::mem::take(&mut self.held);
        body.append(&mut out);
        body.extend_from_slice(&end.body);
        ResponseEdit::replace(body, end.trailers)
    }

    /// How the stream ended: the shim's own end, or what went wrong before it.
    fn outcome(&mut self) -> Option<(Code, String)> {
        if let Some(failed) = self.failed.take() {
            return Some(failed);
        }
        if let Err(e) = self.decoder.finish() {
            let Failure(code, message) = e.into();
            return Some((code, message));
        }
        match self.ended.take() {
            Some(end) => end,
            None => Some((
                Code::Unavailable,
                "the stream from the shim broke off before its end; the result is incomplete"
                    .into(),
            )),
        }
    }
}

/// One message of the shim's stream → one envelope of the client's.
fn write_message(
    message: &[u8],
    rpc: &Rpc,
    client: Client,
    encoding: Encoding,
    settings: &Config,
    out: &mut Vec<u8>,
) -> Result<(), Failure> {
    let limits = settings.limits;
    let converted;
    let message = match client.codec {
        Codec::Proto => message,
        Codec::Json => {
            let mut json = Vec::new();
            (rpc.response_to_json)(message, &mut json, limits.max_response_bytes).map_err(|e| {
                let (code, text) = json_failure(rpc, e, limits);
                Failure(code, text)
            })?;
            converted = json;
            &converted
        }
    };
    // The envelope's header goes in first, filled in once its length is known;
    // a compressed message is written straight after it, with no copy.
    let start = out.len();
    out.extend_from_slice(&[0; envelope::HEADER_LEN]);
    let used = compression::compress(&settings.compression, encoding, message, out);
    let flags = if used == Encoding::Identity {
        out.extend_from_slice(message);
        0
    } else {
        COMPRESSED
    };
    let len = out.len().saturating_sub(start + envelope::HEADER_LEN);
    let header = envelope::header(flags, len);
    match (header, out.get_mut(start..start + envelope::HEADER_LEN)) {
        (Some(header), Some(slot)) => {
            slot.copy_from_slice(&header);
            Ok(())
        }
        _ => {
            out.truncate(start);
            Err(Failure(
                Code::ResourceExhausted,
                "a message of the stream is too large to frame".into(),
            ))
        }
    }
}
