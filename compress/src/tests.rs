//! Cross-codec tests: round trips, external encoders' output, corrupt input, limits
//! and decompression bombs. (Per-module details are tested in their modules.)

use std::time::{Duration, Instant};

use crate::{compress, decompress, DecompressError, Encoding};

const CODECS: [Encoding; 5] = [
    Encoding::Identity,
    Encoding::Gzip,
    Encoding::Zstd,
    Encoding::Snappy,
    Encoding::S2,
];
const COMPRESSED: [Encoding; 4] = [
    Encoding::Gzip,
    Encoding::Zstd,
    Encoding::Snappy,
    Encoding::S2,
];

/// Deterministic pseudo-random bytes (xorshift64): incompressible.
pub(crate) fn random(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// The fixtures' plaintext (testdata/gen/main.go and generate.sh build the same).
fn payload(rows: usize) -> Vec<u8> {
    let mut v = Vec::new();
    for i in 0..rows {
        v.extend_from_slice(
            format!(
                "{i}\tuser-{i}\t{}\t2024-05-{:02}\n",
                (i * 7919) % 10007,
                i % 28 + 1
            )
            .as_bytes(),
        );
    }
    v
}

/// `n` bytes of the given kind.
fn data(kind: &str, n: usize) -> Vec<u8> {
    let mut v = match kind {
        "zeros" => vec![0; n],
        "text" => {
            let mut v = payload(n / 20 + 1);
            v.truncate(n);
            v
        }
        "random" => random(n, n as u64),
        // Runs of random bytes between runs of text and of one byte.
        "mixed" => {
            let text = payload(n / 40 + 1);
            let noise = random(n, 99);
            let mut v = Vec::with_capacity(n);
            let mut i = 0;
            while v.len() < n {
                match i % 3 {
                    0 => v.extend_from_slice(
                        &text[(i * 300) % text.len()..]
                            [..300.min(text.len() - (i * 300) % text.len())],
                    ),
                    1 => v.extend_from_slice(&noise[(i * 500) % n..][..500.min(n - (i * 500) % n)]),
                    _ => v.extend(std::iter::repeat_n(i as u8, 1000)),
                }
                i += 1;
            }
            v
        }
        other => panic!("unknown data kind {other}"),
    };
    v.truncate(n);
    v
}

fn round_trip(enc: Encoding, input: &[u8]) {
    let mut packed = b"keep".to_vec();
    compress(enc, input, &mut packed);
    assert_eq!(&packed[..4], b"keep", "{enc}: compress must append");
    let mut out = b"xy".to_vec();
    decompress(enc, &packed[4..], input.len(), &mut out)
        .unwrap_or_else(|e| panic!("{enc} {} bytes: {e}", input.len()));
    assert_eq!(&out[..2], b"xy", "{enc}: decompress must append");
    assert!(out[2..] == *input, "{enc}: {} bytes differ", input.len());
}

#[test]
fn round_trips() {
    for enc in CODECS {
        for size in [0, 1, 1000, 1 << 20] {
            for kind in ["zeros", "text", "random", "mixed"] {
                round_trip(enc, &data(kind, size));
            }
        }
    }
}

#[test]
fn round_trips_across_block_boundaries() {
    // Around snappy's 64 KiB chunks, zstd's 128 KiB blocks, S2's 1 MiB blocks.
    for enc in COMPRESSED {
        for size in [
            65535,
            65536,
            65537,
            131_071,
            131_072,
            131_073,
            (1 << 20) + 1,
        ] {
            round_trip(enc, &data("text", size));
        }
    }
}

#[test]
fn compression_actually_compresses() {
    let text = data("text", 1 << 20);
    for enc in COMPRESSED {
        let mut packed = Vec::new();
        compress(enc, &text, &mut packed);
        assert!(
            packed.len() < text.len() / 2,
            "{enc}: {} bytes",
            packed.len()
        );
    }
}

/// Fixtures written by other encoders (testdata/generate.sh).
#[test]
fn decodes_external_encoders() {
    let rows = payload(5000);
    let fixtures: &[(Encoding, &str, &[u8], usize)] = &[
        (
            Encoding::Gzip,
            "go-gzip-rows0",
            include_bytes!("testdata/go-gzip-rows0.gz"),
            0,
        ),
        (
            Encoding::Gzip,
            "go-gzip-rows5000",
            include_bytes!("testdata/go-gzip-rows5000.gz"),
            5000,
        ),
        (
            Encoding::Gzip,
            "klauspost-gzip1-rows0",
            include_bytes!("testdata/klauspost-gzip1-rows0.gz"),
            0,
        ),
        (
            Encoding::Gzip,
            "klauspost-gzip1-rows5000",
            include_bytes!("testdata/klauspost-gzip1-rows5000.gz"),
            5000,
        ),
        (
            Encoding::Gzip,
            "python-gzip9",
            include_bytes!("testdata/python-gzip9-rows5000.gz"),
            5000,
        ),
        (
            Encoding::Gzip,
            "cli-gzip1-name",
            include_bytes!("testdata/cli-gzip1-name-rows5000.gz"),
            5000,
        ),
        (
            Encoding::Gzip,
            "cli-gzip-2members",
            include_bytes!("testdata/cli-gzip-2members-rows5000.gz"),
            5000,
        ),
        (
            Encoding::Zstd,
            "klauspost-zstd-stream-rows0",
            include_bytes!("testdata/klauspost-zstd-stream-rows0.zst"),
            0,
        ),
        (
            Encoding::Zstd,
            "klauspost-zstd-stream-rows5000",
            include_bytes!("testdata/klauspost-zstd-stream-rows5000.zst"),
            5000,
        ),
        (
            Encoding::Zstd,
            "klauspost-zstd-all-rows0",
            include_bytes!("testdata/klauspost-zstd-all-rows0.zst"),
            0,
        ),
        (
            Encoding::Zstd,
            "klauspost-zstd-all-rows5000",
            include_bytes!("testdata/klauspost-zstd-all-rows5000.zst"),
            5000,
        ),
        (
            Encoding::Zstd,
            "cli-zstd1",
            include_bytes!("testdata/cli-zstd1-rows5000.zst"),
            5000,
        ),
        (
            Encoding::Zstd,
            "cli-zstd19-nocheck",
            include_bytes!("testdata/cli-zstd19-nocheck-rows5000.zst"),
            5000,
        ),
        (
            Encoding::Zstd,
            "cli-zstd-long27",
            include_bytes!("testdata/cli-zstd-long27-rows5000.zst"),
            5000,
        ),
        (
            Encoding::Zstd,
            "cli-zstd-skippable-2frames",
            include_bytes!("testdata/cli-zstd-skippable-2frames-rows5000.zst"),
            5000,
        ),
        (
            Encoding::Snappy,
            "go-snappy-rows0",
            include_bytes!("testdata/go-snappy-rows0.sz"),
            0,
        ),
        (
            Encoding::Snappy,
            "go-snappy-rows5000",
            include_bytes!("testdata/go-snappy-rows5000.sz"),
            5000,
        ),
        (
            Encoding::S2,
            "klauspost-s2-rows0",
            include_bytes!("testdata/klauspost-s2-rows0.s2"),
            0,
        ),
        (
            Encoding::S2,
            "klauspost-s2-rows5000",
            include_bytes!("testdata/klauspost-s2-rows5000.s2"),
            5000,
        ),
    ];
    for &(enc, name, input, n) in fixtures {
        let want: &[u8] = if n == 0 { &[] } else { &rows };
        for limit in [want.len(), 4 << 20] {
            let mut out = Vec::new();
            decompress(enc, input, limit, &mut out)
                .unwrap_or_else(|e| panic!("{name} (limit {limit}): {e}"));
            assert!(out == want, "{name}: wrong output ({} bytes)", out.len());
        }
        if !want.is_empty() {
            let mut out = Vec::new();
            assert_eq!(
                decompress(enc, input, want.len() - 1, &mut out),
                Err(DecompressError::TooLarge {
                    limit: want.len() - 1
                }),
                "{name}"
            );
            assert!(out.is_empty());
        }
    }
}

/// Our output, decoded by the reference tools where they are installed (skipped,
/// with a note, where not).
#[test]
fn external_decoders_read_our_output() {
    let input = data("mixed", 300_000);
    for (enc, cmd, args) in [
        (Encoding::Gzip, "gzip", &["-dc"][..]),
        (Encoding::Zstd, "zstd", &["-dcq"][..]),
    ] {
        let mut packed = Vec::new();
        compress(enc, &input, &mut packed);
        let child = std::process::Command::new(cmd)
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn();
        let Ok(mut child) = child else {
            eprintln!("note: {cmd} not installed, skipping");
            continue;
        };
        let mut stdin = child.stdin.take().unwrap();
        let writer = std::thread::spawn(move || {
            use std::io::Write;
            stdin.write_all(&packed).unwrap();
        });
        let output = child.wait_with_output().unwrap();
        writer.join().unwrap();
        assert!(output.status.success(), "{cmd} failed");
        assert!(output.stdout == input, "{cmd}: output differs");
    }
}

#[test]
fn garbage_is_corrupt() {
    let inputs: Vec<Vec<u8>> = vec![
        b"x".to_vec(),
        b"hello, world".to_vec(),
        random(1000, 1),
        vec![0; 100],
        vec![0xff; 100],
    ];
    for enc in COMPRESSED {
        for input in &inputs {
            let mut out = b"kept".to_vec();
            let r = decompress(enc, input, 1 << 20, &mut out);
            assert!(
                matches!(r, Err(DecompressError::Corrupt(_))),
                "{enc} {input:?}: {r:?}"
            );
            assert_eq!(out, b"kept", "{enc}: out restored on error");
        }
    }
}

#[test]
fn truncated_is_corrupt() {
    let input = data("mixed", 200_000);
    for enc in COMPRESSED {
        let mut packed = Vec::new();
        compress(enc, &input, &mut packed);
        let n = packed.len();
        for cut in [1, 2, 4, 5, 9, 10, 17, n / 3, n / 2, n - 5, n - 4, n - 1] {
            let mut out = Vec::new();
            match decompress(enc, &packed[..cut], 1 << 20, &mut out) {
                Err(DecompressError::Corrupt(_)) => assert!(out.is_empty()),
                // The snappy and S2 framing formats have no end marker: a cut between
                // two chunks (e.g. right after the 10-byte stream identifier) is a
                // valid, shorter stream. gzip and zstd (one member, one frame) have
                // trailers and must notice.
                Ok(()) if matches!(enc, Encoding::Snappy | Encoding::S2) => {
                    assert!(
                        input.starts_with(&out) && out.len() < input.len(),
                        "{enc} cut {cut}/{n}"
                    );
                }
                r => panic!("{enc} cut {cut}/{n}: {r:?}"),
            }
        }
    }
}

#[test]
fn trailing_garbage_is_corrupt() {
    let input = data("text", 10_000);
    for enc in COMPRESSED {
        let mut packed = Vec::new();
        compress(enc, &input, &mut packed);
        packed.extend_from_slice(b"trailing junk");
        let mut out = Vec::new();
        let r = decompress(enc, &packed, 1 << 20, &mut out);
        assert!(
            matches!(r, Err(DecompressError::Corrupt(_))),
            "{enc}: {r:?}"
        );
    }
}

/// Every single-bit flip is either caught (checksums) or harmless (e.g. gzip's MTIME):
/// never a panic, never silently different output.
#[test]
fn bit_flips_are_caught_or_harmless() {
    let input = data("mixed", 20_000);
    for enc in COMPRESSED {
        let mut packed = Vec::new();
        compress(enc, &input, &mut packed);
        let mut caught = 0;
        let positions: Vec<usize> = (0..packed.len()).step_by(packed.len() / 400 + 1).collect();
        for &at in &positions {
            for bit in [0, 3, 7] {
                let mut bad = packed.clone();
                bad[at] ^= 1 << bit;
                let mut out = Vec::new();
                match decompress(enc, &bad, 1 << 20, &mut out) {
                    Ok(()) => assert!(
                        out == input,
                        "{enc}: flip at {at} bit {bit} changed the output"
                    ),
                    Err(_) => caught += 1,
                }
            }
        }
        assert!(
            caught > positions.len() * 2,
            "{enc}: only {caught} flips caught"
        );
    }
}

#[test]
fn limits_are_exact() {
    for enc in CODECS {
        for size in [1, 1000, 100_000] {
            let input = data("text", size);
            let mut packed = Vec::new();
            compress(enc, &input, &mut packed);
            let mut out = Vec::new();
            decompress(enc, &packed, size, &mut out).unwrap();
            assert_eq!(out.len(), size);
            let mut out = b"kept".to_vec();
            assert_eq!(
                decompress(enc, &packed, size - 1, &mut out),
                Err(DecompressError::TooLarge { limit: size - 1 }),
                "{enc} {size}"
            );
            assert_eq!(out, b"kept");
        }
        // A limit of zero still admits an empty message.
        let mut packed = Vec::new();
        compress(enc, b"", &mut packed);
        let mut out = Vec::new();
        decompress(enc, &packed, 0, &mut out).unwrap();
        assert!(out.is_empty());
    }
}

// ---- Decompression bombs ----------------------------------------------------------

const GIB2: u64 = 2 << 30;
/// Generous for a debug build; the limit makes each refusal take milliseconds.
const QUICK: Duration = Duration::from_secs(3);

/// Decodes `bomb` (which inflates to `inflated` bytes) under a 1 MiB limit: it must be
/// refused with `TooLarge`, quickly, and without the output's capacity passing the limit.
fn assert_refused(enc: Encoding, what: &str, bomb: &[u8], inflated: u64) {
    let limit = 1 << 20;
    let mut out = Vec::new();
    let t = Instant::now();
    let r = decompress(enc, bomb, limit, &mut out);
    let took = t.elapsed();
    eprintln!(
        "bomb {enc} {what}: {} bytes -> {} MiB (ratio {:.0}:1), refused in {took:?}",
        bomb.len(),
        inflated >> 20,
        inflated as f64 / bomb.len() as f64
    );
    assert_eq!(r, Err(DecompressError::TooLarge { limit }), "{enc} {what}");
    assert!(out.is_empty());
    assert!(took < QUICK, "{enc} {what}: {took:?}");
}

/// A stream holding `copies` × (1 MiB of zeros), made by concatenating one compressed
/// MiB `copies` times: gzip members, zstd frames, snappy/S2 streams all concatenate.
fn concatenated_bomb(enc: Encoding, copies: usize) -> Vec<u8> {
    let mut unit = Vec::new();
    compress(enc, &vec![0; 1 << 20], &mut unit);
    unit.repeat(copies)
}

#[test]
fn concatenated_bombs_are_refused() {
    for enc in COMPRESSED {
        let unit_len = concatenated_bomb(enc, 1).len();
        // 2 GiB, or as much as 64 MiB of input holds (snappy packs 64 KiB chunks, so
        // its best ratio is ~20:1).
        let copies = (2048).min((64 << 20) / unit_len);
        let bomb = concatenated_bomb(enc, copies);
        assert_refused(enc, "concatenated", &bomb, copies as u64 * (1 << 20));

        // Sanity: a few copies decode completely.
        let small = concatenated_bomb(enc, 3);
        let mut out = Vec::new();
        decompress(enc, &small, 3 << 20, &mut out).unwrap();
        assert!(out.len() == 3 << 20 && out.iter().all(|&b| b == 0));
    }
}

/// One gzip member inflating to `mib` MiB of zeros: one compressed MiB (ending on a full
/// flush, so it is self-contained and byte-aligned) repeated, a final empty block, and
/// the real CRC-32 and size.
fn gzip_bomb(mib: u32) -> Vec<u8> {
    use flate2::{Compress, Compression, FlushCompress};
    let zeros = vec![0u8; 1 << 20];
    let mut deflater = Compress::new(Compression::best(), false);
    let mut chunk = Vec::with_capacity(64 << 10);
    deflater
        .compress_vec(&zeros, &mut chunk, FlushCompress::Full)
        .unwrap();
    assert_eq!(deflater.total_in(), 1 << 20);

    let mut crc = crc32fast::Hasher::new();
    crc.update(&zeros);
    let mut crc_mib = 1u32;
    while crc_mib < mib {
        let copy = crc.clone();
        crc.combine(&copy);
        crc_mib *= 2;
    }
    assert_eq!(crc_mib, mib, "mib must be a power of two");

    let mut gz = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];
    for _ in 0..mib {
        gz.extend_from_slice(&chunk);
    }
    gz.extend_from_slice(&[0x03, 0x00]); // final, fixed-Huffman, empty block
    gz.extend_from_slice(&crc.finalize().to_le_bytes());
    gz.extend_from_slice(&((u64::from(mib) << 20) as u32).to_le_bytes());
    gz
}

/// One zstd frame of `mib` MiB of zeros as RLE blocks (128 KiB from 4 bytes each),
/// without a declared content size.
fn zstd_rle_bomb(mib: u32) -> Vec<u8> {
    // Magic; descriptor: no content size, not single-segment, no checksum, no dict;
    // window 1 MiB (log 20: (20 - 10) << 3).
    let mut z = vec![0x28, 0xb5, 0x2f, 0xfd, 0x00, 10 << 3];
    let blocks = mib * 8;
    for i in 0..blocks {
        let last = u32::from(i + 1 == blocks);
        let header = last | (1 << 1) | (128 << 10 << 3); // RLE, 128 KiB
        z.extend_from_slice(&header.to_le_bytes()[..3]);
        z.push(0);
    }
    z
}

#[test]
fn gzip_single_member_bomb_is_refused() {
    // The construction is valid: a small one decodes fully (and its CRC checks).
    let mut out = Vec::new();
    decompress(Encoding::Gzip, &gzip_bomb(4), 4 << 20, &mut out).unwrap();
    assert!(out.len() == 4 << 20 && out.iter().all(|&b| b == 0));

    let bomb = gzip_bomb(2048);
    assert_refused(Encoding::Gzip, "one member", &bomb, GIB2);
}

#[test]
fn zstd_rle_bomb_is_refused() {
    let mut out = Vec::new();
    decompress(Encoding::Zstd, &zstd_rle_bomb(2), 2 << 20, &mut out).unwrap();
    assert!(out.len() == 2 << 20 && out.iter().all(|&b| b == 0));

    let bomb = zstd_rle_bomb(2048);
    assert_refused(Encoding::Zstd, "one frame of RLE blocks", &bomb, GIB2);
}

#[test]
fn zstd_declared_sizes_are_not_trusted() {
    // Single segment, 8-byte content size of 2 GiB: refused from the header alone.
    let mut z = vec![0x28, 0xb5, 0x2f, 0xfd, 0xe0];
    z.extend_from_slice(&GIB2.to_le_bytes());
    z.extend_from_slice(&[0x01, 0x00, 0x00]); // an empty last raw block
    let mut out = Vec::new();
    assert_eq!(
        decompress(Encoding::Zstd, &z, 1 << 20, &mut out),
        Err(DecompressError::TooLarge { limit: 1 << 20 })
    );

    // The largest window the format can declare (~3.75 TiB) over a tiny frame: the
    // window is lowered to the limit, so this decodes without reserving it.
    let z = [
        0x28, 0xb5, 0x2f, 0xfd, 0x00, 0xff, 0x19, 0x00, 0x00, b'h', b'i', b'!',
    ];
    let mut out = Vec::new();
    decompress(Encoding::Zstd, &z, 1 << 20, &mut out).unwrap();
    assert_eq!(out, b"hi!");

    // A 100 MiB window (ruzstd's own ceiling) with a 64 KiB limit: still fine.
    let mut long = Vec::new();
    compress(Encoding::Zstd, &data("text", 50_000), &mut long);
    long[5] = (26 - 10) << 3 | 4; // 96 MiB
    let mut out = Vec::new();
    decompress(Encoding::Zstd, &long, 64 << 10, &mut out).unwrap();
    assert_eq!(out, data("text", 50_000));
}
