//! Ferry's S2 codec against klauspost/compress, the reference implementation.
//!
//! `tests/s2-vectors` (Go) writes `NAME.raw` and `NAME.s2` (s2.Writer's stream of it,
//! with many writer options) into `$FERRY_S2_VECTORS` (default `target/s2-vectors`);
//! these tests decode every stream, and write our own stream of every input as
//! `NAME.rust.s2` for the Go side to decode (`make s2-vectors` runs all three steps).

use std::path::{Path, PathBuf};
use std::thread;

use ferry_compress::{s2, DecompressError};

fn vectors_dir() -> PathBuf {
    std::env::var_os("FERRY_S2_VECTORS").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/s2-vectors"),
        PathBuf::from,
    )
}

/// Every vector's name (`NAME` of `NAME.raw`); fails rather than pass on nothing.
fn vector_names(dir: &Path) -> Vec<String> {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| {
        panic!(
            "no S2 vectors in {} ({e}): run make s2-vectors",
            dir.display()
        )
    });
    let mut names: Vec<String> = entries
        .filter_map(|entry| {
            let name = entry.unwrap().file_name().into_string().unwrap();
            name.strip_suffix(".raw").map(str::to_owned)
        })
        .collect();
    assert!(
        !names.is_empty(),
        "no S2 vectors in {}: run make s2-vectors",
        dir.display()
    );
    names.sort();
    names
}

/// Runs `check` on every vector, spread over the CPUs (the set is ~50 MB), and
/// reports every failure at once.
fn for_each_vector(check: impl Fn(&Path, &str) -> Result<(), String> + Sync) {
    let dir = vectors_dir();
    let names = vector_names(&dir);
    let workers = thread::available_parallelism().map_or(4, |n| n.get());
    let failures: Vec<String> = thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|worker| {
                let (dir, names, check) = (&dir, &names, &check);
                scope.spawn(move || {
                    names
                        .iter()
                        .skip(worker)
                        .step_by(workers)
                        .filter_map(|name| check(dir, name).err())
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    assert!(
        failures.is_empty(),
        "{} of {} vectors failed:\n{}",
        failures.len(),
        names.len(),
        failures.join("\n")
    );
    eprintln!("{} vectors checked in {}", names.len(), dir.display());
}

fn read(dir: &Path, file: String) -> Vec<u8> {
    std::fs::read(dir.join(&file)).unwrap_or_else(|e| panic!("{file}: {e}"))
}

#[test]
fn decodes_every_reference_stream() {
    for_each_vector(|dir, name| {
        let raw = read(dir, format!("{name}.raw"));
        let stream = read(dir, format!("{name}.s2"));
        let mut out = b"kept".to_vec();
        s2::decompress(&stream, raw.len(), &mut out).map_err(|e| format!("{name}: {e}"))?;
        if out.get(..4) != Some(b"kept") || out.get(4..) != Some(&raw[..]) {
            return Err(format!("{name}: decoded {} bytes, differs", out.len() - 4));
        }
        // One byte less than the content is over the limit.
        if let Some(tight) = raw.len().checked_sub(1) {
            let mut out = Vec::new();
            match s2::decompress(&stream, tight, &mut out) {
                Err(DecompressError::TooLarge { limit }) if limit == tight && out.is_empty() => {}
                other => return Err(format!("{name}: limit {tight} gave {other:?}")),
            }
        }
        Ok(())
    });
}

#[test]
fn writes_streams_for_the_reference_to_decode() {
    for_each_vector(|dir, name| {
        let raw = read(dir, format!("{name}.raw"));
        let mut stream = Vec::new();
        s2::compress(&raw, &mut stream);
        std::fs::write(dir.join(format!("{name}.rust.s2")), &stream)
            .map_err(|e| format!("{name}: {e}"))?;
        let mut back = Vec::new();
        s2::decompress(&stream, raw.len(), &mut back).map_err(|e| format!("{name}: {e}"))?;
        if back != raw {
            return Err(format!("{name}: our own stream does not round-trip"));
        }
        Ok(())
    });
}
