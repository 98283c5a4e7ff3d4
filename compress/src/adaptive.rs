//! Deciding whether a body is worth compressing, and with what.

use crate::{compress_level, negotiate, Encoding, Level};

/// When and how to compress a response body.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    /// Bodies smaller than this go uncompressed.
    pub min_bytes: usize,
    /// How much of the body's start is compressed to estimate its ratio.
    pub sample_bytes: usize,
    /// Compress only if compressed / original is at most this (on the sample, then on
    /// the whole body in [`Policy::compress_adaptive`]).
    pub max_ratio: f64,
    /// Our codecs, most preferred first.
    pub preference: Vec<Encoding>,
    /// How hard to compress.
    pub level: Level,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            min_bytes: 1024,
            sample_bytes: 64 * 1024,
            max_ratio: 0.9,
            // Fast codecs first: S2 and snappy compress at ~400 MB/s inside the VM;
            // gzip -2 at ~200 MB/s packs tighter; ruzstd's encoder (its only level,
            // "fastest") is slower than gzip and packs no tighter, so it comes last.
            preference: vec![
                Encoding::S2,
                Encoding::Snappy,
                Encoding::Gzip,
                Encoding::Zstd,
            ],
            level: Level::Fastest,
        }
    }
}

impl Policy {
    /// The codec to send `body` with to a client whose accept list is `accept`:
    /// identity below `min_bytes`, when nothing is negotiated, or when the start of
    /// the body does not compress to `max_ratio`; else the negotiated codec.
    pub fn pick(&self, accept: Option<&str>, body: &[u8]) -> Encoding {
        let mut scratch = Vec::new();
        self.pick_into(accept, body, &mut scratch)
    }

    /// Compresses `body` for a client whose accept list is `accept`, appending the
    /// compressed bytes to `out`, and returns the codec used. When that is
    /// [`Encoding::Identity`] (too small, nothing negotiated, or compression does not
    /// pay: judged on a sample first, then on the whole result), `out` is left as it
    /// was and the caller sends `body` itself: nothing is copied.
    pub fn compress_adaptive(
        &self,
        accept: Option<&str>,
        body: &[u8],
        out: &mut Vec<u8>,
    ) -> Encoding {
        let start = out.len();
        let enc = if body.len() > self.sample_bytes {
            // Judge a sample first (compressed into `out`, then dropped).
            self.pick_into(accept, body, out)
        } else if body.len() < self.min_bytes {
            Encoding::Identity
        } else {
            // The sample would be the whole body: compress it once, judge below.
            negotiate::choose(accept, &self.preference)
        };
        if enc == Encoding::Identity {
            return enc;
        }
        compress_level(enc, self.level, body, out);
        if self.pays(out.len().saturating_sub(start), body.len()) {
            enc
        } else {
            out.truncate(start);
            Encoding::Identity
        }
    }

    /// [`Policy::pick`], using `scratch` past its current length for the sample (and
    /// leaving it as it was).
    fn pick_into(&self, accept: Option<&str>, body: &[u8], scratch: &mut Vec<u8>) -> Encoding {
        if body.len() < self.min_bytes {
            return Encoding::Identity;
        }
        let enc = negotiate::choose(accept, &self.preference);
        if enc == Encoding::Identity || self.sample_pays(enc, body, scratch) {
            enc
        } else {
            Encoding::Identity
        }
    }

    /// Whether `body` is worth compressing with `enc` by someone else (a compressor
    /// after us, e.g. Envoy's): not below `min_bytes`, and its sample, compressed here
    /// with `enc`, shrinks to `max_ratio`.
    pub fn worth(&self, enc: Encoding, body: &[u8]) -> bool {
        enc != Encoding::Identity
            && body.len() >= self.min_bytes
            && self.sample_pays(enc, body, &mut Vec::new())
    }

    /// Whether the start of `body` compresses with `enc` to `max_ratio` (using
    /// `scratch` past its length, and leaving it as it was).
    fn sample_pays(&self, enc: Encoding, body: &[u8], scratch: &mut Vec<u8>) -> bool {
        let sample = body.get(..self.sample_bytes).unwrap_or(body);
        if sample.is_empty() {
            return true;
        }
        let start = scratch.len();
        compress_level(enc, self.level, sample, scratch);
        let compressed = scratch.len().saturating_sub(start);
        scratch.truncate(start);
        self.pays(compressed, sample.len())
    }

    fn pays(&self, compressed: usize, original: usize) -> bool {
        // Lossy only past 2^53 bytes.
        #[allow(clippy::cast_precision_loss)]
        let ratio = compressed as f64 / original.max(1) as f64;
        ratio <= self.max_ratio
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::random;

    fn rows(n: usize) -> Vec<u8> {
        let mut v = Vec::new();
        let mut i = 0u64;
        while v.len() < n {
            v.extend_from_slice(
                format!(
                    "{i}\tuser{i}@example.com\t{}.{:02}\t2024-01-{:02} 12:00:00\n",
                    i * 37 % 10007,
                    i % 100,
                    i % 28 + 1
                )
                .as_bytes(),
            );
            i += 1;
        }
        v.truncate(n);
        v
    }

    const ALL: &str = "gzip, zstd, snappy, s2";

    #[test]
    fn defaults() {
        let p = Policy::default();
        assert_eq!(p.min_bytes, 1024);
        assert_eq!(p.sample_bytes, 64 * 1024);
        assert!((p.max_ratio - 0.9).abs() < f64::EPSILON);
        assert_eq!(
            p.preference,
            [
                Encoding::S2,
                Encoding::Snappy,
                Encoding::Gzip,
                Encoding::Zstd
            ]
        );
    }

    #[test]
    fn small_bodies_stay_identity() {
        let p = Policy::default();
        let body = rows(1023);
        assert_eq!(p.pick(Some(ALL), &body), Encoding::Identity);
        let mut out = vec![1, 2, 3];
        assert_eq!(
            p.compress_adaptive(Some(ALL), &body, &mut out),
            Encoding::Identity
        );
        assert_eq!(out, [1, 2, 3]);
    }

    #[test]
    fn random_bodies_stay_identity() {
        let p = Policy {
            preference: vec![Encoding::Gzip, Encoding::Snappy],
            ..Policy::default()
        };
        // Larger than the sample (judged on it), and smaller (judged on the whole).
        for (accept, body) in [
            ("gzip", random(100 * 1024, 7)),
            ("snappy", random(100 * 1024, 7)),
            ("gzip", random(10 * 1024, 8)),
            ("snappy", random(10 * 1024, 8)),
        ] {
            assert_eq!(p.pick(Some(accept), &body), Encoding::Identity, "{accept}");
            let mut out = Vec::new();
            assert_eq!(
                p.compress_adaptive(Some(accept), &body, &mut out),
                Encoding::Identity
            );
            assert!(out.is_empty());
        }
    }

    #[test]
    fn worth_judges_for_a_compressor_after_us() {
        let p = Policy::default();
        assert!(p.worth(Encoding::Zstd, &rows(100 * 1024)));
        assert!(p.worth(Encoding::Gzip, &rows(2000)));
        assert!(!p.worth(Encoding::Zstd, &rows(1023)), "below min_bytes");
        assert!(!p.worth(Encoding::Zstd, &random(100 * 1024, 9)));
        assert!(!p.worth(Encoding::Gzip, &random(10 * 1024, 10)));
        assert!(!p.worth(Encoding::Identity, &rows(100 * 1024)));
    }

    #[test]
    fn repetitive_bodies_use_the_negotiated_codec() {
        let p = Policy {
            preference: vec![Encoding::Zstd, Encoding::Snappy, Encoding::Gzip],
            ..Policy::default()
        };
        let body = rows(200 * 1024);
        for (accept, want) in [
            (ALL, Encoding::Zstd),
            ("snappy, gzip", Encoding::Snappy),
            ("gzip", Encoding::Gzip),
            ("br", Encoding::Identity),
        ] {
            assert_eq!(p.pick(Some(accept), &body), want, "{accept}");
            let mut out = b"prefix".to_vec();
            assert_eq!(p.compress_adaptive(Some(accept), &body, &mut out), want);
            if want == Encoding::Identity {
                assert_eq!(out, b"prefix");
                continue;
            }
            assert!(out.len() < body.len() / 2, "{accept}: {}", out.len());
            let mut back = Vec::new();
            crate::decompress(want, &out[6..], body.len(), &mut back).unwrap();
            assert_eq!(back, body);
        }
        assert_eq!(p.pick(None, &body), Encoding::Identity);
    }

    #[test]
    fn compressible_start_incompressible_rest_falls_back() {
        // The sample says yes, the whole body says no: identity, out untouched.
        let p = Policy {
            preference: vec![Encoding::Gzip],
            sample_bytes: 4096,
            ..Policy::default()
        };
        let mut body = vec![b'a'; 4096];
        body.extend(random(200 * 1024, 3));
        assert_eq!(p.pick(Some("gzip"), &body), Encoding::Gzip);
        let mut out = Vec::new();
        assert_eq!(
            p.compress_adaptive(Some("gzip"), &body, &mut out),
            Encoding::Identity
        );
        assert!(out.is_empty());
    }
}
