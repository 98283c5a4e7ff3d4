//! Decoding arbitrary bytes as gzip: no panic, output within the limit.
#![no_main]

use ferry_compress::Encoding;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| ferry_fuzz::check_decompress(Encoding::Gzip, data));
