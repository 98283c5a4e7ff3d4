//! The streamed `ExecuteResponse` → protojson transcoder: any bytes, cut into chunks
//! at any points, give the same result as in one piece; whatever it accepts, the
//! pbjson path (`json::from_proto`) accepts too, with the same JSON value and no key
//! twice, and the very same bytes unless a `session` came after the `result` (the
//! shim's streamed form, where it is written last); the JSON never passes its limit;
//! no panic.
#![no_main]

use ferry_filter_core::codec::json::{from_proto, ToJsonError};
use ferry_filter_core::codec::json_stream::{execute_to_json, Transcoder};
use ferry_fuzz::json_once::parse_once;
use ferry_proto::psdb::v1alpha1::ExecuteResponse;
use libfuzzer_sys::fuzz_target;
use prost::Message;

fn chunked(body: &[u8], cuts: &[u8], max: usize) -> Result<Vec<u8>, ToJsonError> {
    let mut t = Transcoder::new(max);
    let mut out = Vec::new();
    let mut rest = body;
    let mut cuts = cuts.iter().cycle();
    while !rest.is_empty() {
        let n = usize::from(*cuts.next().unwrap_or(&255)).max(1).min(rest.len());
        let (chunk, tail) = rest.split_at(n);
        rest = tail;
        t.feed(chunk, &mut out)?;
        assert!(out.len() <= max);
    }
    t.finish(&mut out)?;
    assert!(out.len() <= max);
    Ok(out)
}

fuzz_target!(|data: &[u8]| {
    let (cuts, body) = data.split_at(data.len().min(8));
    let mut whole = Vec::new();
    let result = execute_to_json(body, &mut whole, usize::MAX);
    let pieces = chunked(body, if cuts.is_empty() { &[1] } else { cuts }, usize::MAX);
    match (&result, &pieces) {
        (Ok(()), Ok(json)) => assert_eq!(&whole, json),
        (Err(_), Err(_)) => {}
        _ => panic!("whole {result:?}, chunked {pieces:?}"),
    }
    if result.is_ok() {
        let mut reference = Vec::new();
        from_proto::<ExecuteResponse>(body, &mut reference, usize::MAX)
            .expect("the pbjson path refuses what the transcoder accepted");
        let ours = parse_once(&whole).expect("the transcoder wrote a key twice");
        let session_last = ExecuteResponse::decode(body).is_ok_and(|m| m.session.is_some())
            && !whole.starts_with(b"{\"session\"");
        if session_last {
            assert_eq!(Some(ours), serde_json::from_slice(&reference).ok());
        } else {
            assert_eq!(
                String::from_utf8_lossy(&whole),
                String::from_utf8_lossy(&reference)
            );
        }
        // A limit anywhere short of the JSON is refused, never exceeded.
        let max = usize::from(cuts.first().copied().unwrap_or(0)) * whole.len() / 256;
        if max < whole.len() {
            assert!(matches!(
                chunked(body, cuts, max),
                Err(ToJsonError::TooLarge)
            ));
        }
    }
});
