//! A Connect unary success sent on as it arrives: each chunk of the shim's
//! `application/proto` body is replaced in place by what it becomes — the protojson it
//! completes ([`crate::codec::json_stream`]) for a JSON client, compressed as it goes
//! ([`StreamEncoder`]) when the answer is compressed by the filter — or passes as it
//! is. Envoy never buffers the whole answer and the VM holds a partial field and a
//! codec's block at most, so a large answer costs Envoy about one copy of it.
//!
//! Whether compressing pays is judged from the size alone where it always does:
//! protojson of a size past `min_bytes` under an entropy coder (gzip, zstd; Envoy's zstd),
//! since its bulk is base64, which packs to about 3/4 whatever the bytes. Otherwise —
//! a proto answer, or the LZ-only codecs (snappy, S2), which cannot pack base64 of
//! incompressible bytes — the headers wait for the first `sample_bytes` of the answer
//! (Envoy buffers them), which are compressed to judge it, as a whole answer is; an
//! answer that ends before that is converted whole. The size may be undeclared: the
//! shim sends a large answer in pieces as MySQL sends it.
//!
//! Once the headers are out, a failure (a malformed message, the JSON outgrowing
//! `max_response_bytes`) resets the stream, as for any answer whose headers are out.

use ferry_compress::{Encoding, StreamEncoder};

use super::json_failure::json_failure;
use super::{BodyEdit, Reset, ResponseEdit};
use crate::codec::json::ToJsonError;
use crate::codec::json_stream::Transcoder;
use crate::compression;
use crate::config::Config;
use crate::http::HeaderEdits;
use crate::limits::Limits;
use crate::rpc::Rpc;

pub(crate) struct UnaryStream {
    /// A JSON client's: the shim's proto → protojson.
    transcoder: Option<Transcoder>,
    /// Protobuf bytes seen, against the response limit (a body without a
    /// `content-length` is checked here).
    seen: usize,
    /// The body ends with the chunk being converted.
    pub(super) at_end: bool,
    /// Envoy's compressor encodes the answer on its way out (it was judged worth it
    /// from its size), so the answer gets no `no-transform`.
    pub(super) envoy_compresses: bool,
    /// The filter compresses the answer as it goes; its headers name the encoding.
    encoder: Option<StreamEncoder>,
    /// The headers wait for a sample of the answer to judge this codec on.
    sample: Option<Judge>,
    /// The header that names the answer's encoding (`content-encoding`).
    encoding_header: &'static str,
}

/// The codec a sample is judged for.
#[derive(Clone, Copy)]
enum Judge {
    /// The filter's own: compressed as it goes if the sample pays, else identity.
    Filter(Encoding),
    /// Envoy's compressor's: marked `no-transform` unless the sample pays.
    Envoy(Encoding),
}

/// How a Connect unary success goes out.
pub(super) struct Plan {
    /// The client reads JSON.
    pub json: bool,
    /// The filter's codec for the answer (identity: none).
    pub filter: Encoding,
    /// Envoy's compressor's codec for the answer, if the filter leaves it to Envoy.
    pub envoy: Option<Encoding>,
    /// The header that names the answer's encoding.
    pub encoding_header: &'static str,
    /// The headers may wait for a sample ([`crate::header_hold`]); without, a codec
    /// the client accepts is used from the size alone.
    pub sample: bool,
}

impl UnaryStream {
    /// The stream for `plan`: every filter codec is written as it goes.
    pub(super) fn new(plan: &Plan, settings: &Config) -> Self {
        let mut stream = UnaryStream {
            transcoder: plan
                .json
                .then(|| Transcoder::new(settings.limits.max_response_bytes)),
            seen: 0,
            at_end: false,
            envoy_compresses: false,
            encoder: None,
            sample: None,
            encoding_header: plan.encoding_header,
        };
        match (plan.filter, plan.envoy) {
            (Encoding::Identity, None) => {}
            (Encoding::Identity, Some(_)) if plan.json || !plan.sample => {
                stream.envoy_compresses = true
            }
            (Encoding::Identity, Some(envoy)) => stream.sample = Some(Judge::Envoy(envoy)),
            (enc @ (Encoding::Gzip | Encoding::Zstd), _) if plan.json => {
                stream.encoder = StreamEncoder::new(enc, settings.compression.level);
            }
            (filter, _) if !plan.sample => {
                stream.encoder = StreamEncoder::new(filter, settings.compression.level);
            }
            (filter, _) => stream.sample = Some(Judge::Filter(filter)),
        }
        stream
    }

    /// The headers wait for the sample.
    pub(super) fn holds(&self) -> bool {
        self.sample.is_some()
    }

    /// The answer is judged here, so Envoy's compressor must not be told to leave it.
    pub(super) fn judged(&self) -> bool {
        self.envoy_compresses || matches!(self.sample, Some(Judge::Envoy(_)))
    }

    /// Whether the answer may come out compressed: a whole answer converted from the
    /// headers alone is judged then too.
    pub(super) fn may_compress(&self) -> bool {
        self.envoy_compresses || self.encoder.is_some() || self.sample.is_some()
    }

    /// The encoding the filter names at once in the headers (decided from the size).
    pub(super) fn named(&self) -> Option<Encoding> {
        self.encoder.as_ref().map(StreamEncoder::encoding)
    }

    /// Nothing is left to do to the body: it passes as it comes.
    pub(super) fn passes(&self) -> bool {
        self.transcoder.is_none() && self.encoder.is_none() && self.sample.is_none()
    }

    /// Counts the next chunk's `size` against the response limit before it is read.
    pub(super) fn admit(&mut self, size: usize, limits: Limits) -> Result<(), Reset> {
        self.seen = self.seen.saturating_add(size);
        limits
            .check_response(self.seen)
            .map_err(|rejection| Reset(rejection.message))
    }

    /// The next chunk of the shim's body (admitted; with the headers held, all of
    /// the body so far) → what replaces it, and the held headers' edits.
    pub(super) fn convert(
        &mut self,
        chunk: &[u8],
        rpc: &Rpc,
        settings: &Config,
    ) -> Result<ResponseEdit, Reset> {
        let mut headers = HeaderEdits::default();
        if let Some(judge) = self.sample.take() {
            let policy = &settings.compression;
            match judge {
                Judge::Filter(enc) if policy.worth(enc, chunk) => {
                    self.encoder = StreamEncoder::new(enc, policy.level);
                    headers
                        .set
                        .push((self.encoding_header, enc.name().to_owned()));
                }
                Judge::Filter(_) => {}
                Judge::Envoy(enc) => {
                    if !policy.worth(enc, chunk) {
                        headers.set.push(compression::no_transform());
                    }
                }
            }
        }
        let limits = settings.limits;
        let json = match self.transcoder.as_mut() {
            None => None,
            Some(transcoder) => {
                // Base64 is 4/3 of a value; rows are most of the answer.
                let mut out = Vec::with_capacity(chunk.len().saturating_mul(3) / 2);
                let fail = |e: ToJsonError| Reset(json_failure(rpc, e, limits).1);
                transcoder.feed(chunk, &mut out).map_err(fail)?;
                if self.at_end {
                    transcoder.finish(&mut out).map_err(fail)?;
                }
                Some(out)
            }
        };
        let body = match (self.encoder.as_mut(), json) {
            (None, None) => BodyEdit::Keep,
            (None, Some(json)) => BodyEdit::Replace(json),
            (Some(encoder), json) => {
                let plain = json.as_deref().unwrap_or(chunk);
                let mut packed = Vec::with_capacity(plain.len() / 2);
                encoder.write(plain, &mut packed);
                if self.at_end {
                    if let Some(encoder) = self.encoder.take() {
                        encoder.finish(&mut packed);
                    }
                }
                BodyEdit::Replace(packed)
            }
        };
        Ok(ResponseEdit {
            headers,
            body,
            trailers: Vec::new(),
            pause: false,
        })
    }
}
