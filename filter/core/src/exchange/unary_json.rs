//! A Connect unary JSON success, transcoded as it arrives: each chunk of the shim's
//! `application/proto` body is replaced in place by the JSON it completes, and the
//! body goes on ([`crate::codec::json_stream`]). Envoy never buffers the whole answer
//! and the VM holds only a partial field at a time, so a large answer costs Envoy
//! about one copy of it instead of four.
//!
//! Used when the answer is identity, too small for any codec, left to Envoy's zstd
//! compressor, or gzip, which the filter then writes as the JSON comes ([`GzipStream`]):
//! both compressed cases are judged by the size alone (declared, or none: the shim
//! sends a large answer in pieces), since protojson's bulk is base64, which always
//! packs to about 3/4. The headers go out at once, so a failure
//! after them (a malformed message, the JSON outgrowing `max_response_bytes`) resets
//! the stream, as the buffered path did for an answer whose headers were out.

use ferry_compress::{GzipStream, Level};

use super::response::json_failure;
use super::Reset;
use crate::codec::json::ToJsonError;
use crate::codec::json_stream::Transcoder;
use crate::limits::Limits;
use crate::rpc::Rpc;

pub(crate) struct UnaryJson {
    transcoder: Transcoder,
    /// Protobuf bytes seen, against the response limit (a body without a
    /// `content-length` is checked here).
    seen: usize,
    /// The body ends with the chunk being converted.
    pub(super) at_end: bool,
    /// Envoy's compressor encodes the JSON on its way out (it was judged worth it
    /// from its size), so the answer gets no `no-transform`.
    pub(super) envoy_compresses: bool,
    /// The filter gzips the JSON as it goes (`content-encoding: gzip`).
    gzip: Option<GzipStream>,
}

impl UnaryJson {
    pub(super) fn new(limits: Limits, envoy_compresses: bool) -> Self {
        UnaryJson {
            transcoder: Transcoder::new(limits.max_response_bytes),
            seen: 0,
            at_end: false,
            envoy_compresses,
            gzip: None,
        }
    }

    /// The same, gzipped by the filter at `level` on the way.
    pub(super) fn gzipped(limits: Limits, level: Level) -> Self {
        UnaryJson {
            gzip: Some(GzipStream::new(level)),
            ..UnaryJson::new(limits, false)
        }
    }

    /// The filter compresses this answer (its headers name the encoding).
    pub(super) fn gzips(&self) -> bool {
        self.gzip.is_some()
    }

    /// Counts the next chunk's `size` against the response limit before it is read.
    pub(super) fn admit(&mut self, size: usize, limits: Limits) -> Result<(), Reset> {
        self.seen = self.seen.saturating_add(size);
        limits
            .check_response(self.seen)
            .map_err(|rejection| Reset(rejection.message))
    }

    /// The next chunk of the shim's body (admitted) → the JSON that replaces it.
    pub(super) fn convert(
        &mut self,
        chunk: &[u8],
        rpc: &Rpc,
        limits: Limits,
    ) -> Result<Vec<u8>, Reset> {
        // Base64 is 4/3 of a value; rows are most of the answer.
        let mut out = Vec::with_capacity(chunk.len().saturating_mul(3) / 2);
        let fail = |e: ToJsonError| Reset(json_failure(rpc, e, limits).1);
        self.transcoder.feed(chunk, &mut out).map_err(fail)?;
        if self.at_end {
            self.transcoder.finish(&mut out).map_err(fail)?;
        }
        let Some(gzip) = self.gzip.as_mut() else {
            return Ok(out);
        };
        let mut packed = Vec::with_capacity(out.len() / 2);
        gzip.write(&out, &mut packed);
        if self.at_end {
            if let Some(gzip) = self.gzip.take() {
                gzip.finish(&mut packed);
            }
        }
        Ok(packed)
    }
}
