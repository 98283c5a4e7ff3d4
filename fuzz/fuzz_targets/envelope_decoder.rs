//! The filter's incremental envelope decoder (gRPC, Connect streaming): any bytes, cut
//! into chunks at any points, yield the same envelopes as in one piece, never more
//! than the limit per message, and no panic.
#![no_main]

use ferry_filter_core::envelope::{Decoder, EnvelopeError};
use libfuzzer_sys::fuzz_target;

fn decode(body: &[u8], cuts: &[u8]) -> (Vec<(u8, Vec<u8>)>, Result<(), EnvelopeError>) {
    let mut decoder = Decoder::new(4096);
    let mut out = Vec::new();
    let mut rest = body;
    let mut cuts = cuts.iter().cycle();
    let result = loop {
        if rest.is_empty() {
            break decoder.finish();
        }
        let n = usize::from(*cuts.next().unwrap_or(&255)).max(1).min(rest.len());
        let (chunk, tail) = rest.split_at(n);
        rest = tail;
        let fed = decoder.feed::<EnvelopeError>(chunk, |flags, message| {
            assert!(message.len() <= 4096);
            out.push((flags, message.to_vec()));
            Ok(())
        });
        if let Err(e) = fed {
            break Err(e);
        }
    };
    (out, result)
}

fuzz_target!(|data: &[u8]| {
    let (cuts, body) = data.split_at(data.len().min(8));
    let whole = decode(body, &[255]);
    let chunked = decode(body, if cuts.is_empty() { &[1] } else { cuts });
    // Chunking changes nothing, except how far a failing body was read.
    if whole.1.is_ok() {
        assert_eq!(whole, chunked);
    } else {
        assert!(chunked.1.is_err());
    }
});
