//! snappy: compress then decompress gives the input back.
#![no_main]

use ferry_compress::Encoding;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| ferry_fuzz::check_roundtrip(Encoding::Snappy, data));
