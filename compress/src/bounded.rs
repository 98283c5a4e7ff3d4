//! Reading a decoder's output into a `Vec` without ever going past the limit.
//!
//! The decoders are `Read`ers; declared sizes (zstd's frame content size, snappy's
//! chunk lengths, gzip's ISIZE) are never used to preallocate. The output grows
//! geometrically but its capacity is capped at `limit + 1` bytes past where it
//! started, and decoding stops as soon as one byte past the limit comes out.

use std::io::{ErrorKind, Read};

use crate::DecompressError;

/// The most handed to the decoder in one `read` call: it bounds what a decoder that
/// decodes ahead (zstd decodes whole blocks) buffers besides its window.
const READ_CHUNK: usize = 64 * 1024;

/// The first growth step of the output (then it doubles).
const MIN_GROW: usize = 16 * 1024;

/// Appends everything `reader` yields to `out`, failing with `TooLarge { limit }` as
/// soon as `out` holds more than `limit` bytes past `start` (`start <= out.len()`,
/// bytes already there after `start` count towards the limit). Decoding errors
/// become `Corrupt`. On error `out` holds partial output: the caller truncates.
pub(crate) fn read_bounded<R: Read>(
    mut reader: R,
    start: usize,
    limit: usize,
    out: &mut Vec<u8>,
) -> Result<(), DecompressError> {
    // We read at most one byte past the limit: that byte proves the output too large.
    let cap = limit.saturating_add(1);
    let mut filled = out.len();
    let result = loop {
        let produced = filled.saturating_sub(start);
        if produced > limit {
            break Err(DecompressError::TooLarge { limit });
        }
        if filled == out.len() {
            // Grow the zeroed tail geometrically (each byte is zeroed once), and only
            // ever reserve exactly: the capacity never passes start + limit + 1.
            let grow = produced.max(MIN_GROW).min(cap - produced);
            out.reserve_exact(grow);
            out.resize(filled + grow, 0);
        }
        let end = out.len().min(filled + READ_CHUNK);
        let Some(buf) = out.get_mut(filled..end) else {
            break Err(DecompressError::Corrupt(
                "internal: bad output window".into(),
            ));
        };
        match reader.read(buf) {
            Ok(0) => break Ok(()),
            Ok(n) => filled += n.min(buf.len()),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => break Err(DecompressError::Corrupt(e.to_string())),
        }
    };
    out.truncate(filled);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader of `n` zeros handed out `step` bytes at a time.
    struct Zeros {
        n: usize,
        step: usize,
    }

    impl Read for Zeros {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let k = self.n.min(self.step).min(buf.len());
            buf[..k].fill(0);
            self.n -= k;
            Ok(k)
        }
    }

    #[test]
    fn exact_limit_is_fine_one_more_is_not() {
        for limit in [0, 1, 1000, 16 * 1024, 100_000] {
            let mut out = Vec::new();
            read_bounded(
                Zeros {
                    n: limit,
                    step: 7777,
                },
                0,
                limit,
                &mut out,
            )
            .unwrap();
            assert_eq!(out.len(), limit);
            assert!(
                out.capacity() <= limit + 1,
                "cap {} limit {limit}",
                out.capacity()
            );

            let mut out = Vec::new();
            let err = read_bounded(
                Zeros {
                    n: limit + 1,
                    step: 7777,
                },
                0,
                limit,
                &mut out,
            );
            assert_eq!(err, Err(DecompressError::TooLarge { limit }));
            assert!(out.capacity() <= limit + 1);
        }
    }

    #[test]
    fn capacity_stays_under_the_limit_on_an_endless_stream() {
        let limit = 3 * 1024 * 1024 + 17;
        let mut out = Vec::new();
        let err = read_bounded(
            Zeros {
                n: usize::MAX,
                step: 1 << 20,
            },
            0,
            limit,
            &mut out,
        );
        assert_eq!(err, Err(DecompressError::TooLarge { limit }));
        assert!(out.capacity() <= limit + 1);
    }

    #[test]
    fn appends_after_existing_bytes() {
        let mut out = b"hdr".to_vec();
        read_bounded(Zeros { n: 10, step: 3 }, 3, 10, &mut out).unwrap();
        assert_eq!(out.len(), 13);
        assert_eq!(&out[..3], b"hdr");
    }

    #[test]
    fn tiny_reads_do_not_rezero() {
        // 1-byte reads: each byte zeroed once, so this is fast even for 2 MB.
        let t = std::time::Instant::now();
        let mut out = Vec::new();
        read_bounded(
            Zeros {
                n: 2_000_000,
                step: 1,
            },
            0,
            4_000_000,
            &mut out,
        )
        .unwrap();
        assert_eq!(out.len(), 2_000_000);
        assert!(t.elapsed().as_secs() < 10);
    }

    #[test]
    fn errors_become_corrupt() {
        struct Bad;
        impl Read for Bad {
            fn read(&mut self, _: &mut [u8]) -> std::io::Result<usize> {
                Err(std::io::Error::new(ErrorKind::InvalidData, "nope"))
            }
        }
        let mut out = Vec::new();
        assert!(matches!(
            read_bounded(Bad, 0, 10, &mut out),
            Err(DecompressError::Corrupt(_))
        ));
    }
}
