//! The streamed transcoder against the pbjson path (`json::from_proto`): for many
//! generated answers, in the whole and in the shim's streamed form, cut at random,
//! the JSON parses to the same value.

use ferry_proto::psdb::v1alpha1::{ExecuteResponse, Session};
use ferry_proto::vitess::query::{Field, QueryResult, Row, Type};
use ferry_proto::vitess::vtgate;
use ferry_proto::vitess::vtrpc::RpcError;
use prost::Message;

use super::*;
use crate::codec::json::from_proto;

/// xorshift64*: a small deterministic generator, so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn chance(&mut self, in_n: u64) -> bool {
        self.below(in_n) == 0
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
    fn bytes_upto(&mut self, max: u64) -> Vec<u8> {
        let n = self.below(max) as usize;
        self.bytes(n)
    }
    fn text_upto(&mut self, max: u64) -> String {
        let n = self.below(max) as usize;
        self.text(n)
    }
    fn text(&mut self, n: usize) -> String {
        let pool = [
            "a", "Z", "0", " ", "\"", "\\", "\n", "é", "日本", "\u{1}", "😀",
        ];
        (0..n)
            .map(|_| pool[self.below(pool.len() as u64) as usize])
            .collect()
    }
}

fn row(rng: &mut Rng, columns: usize, big: bool) -> Row {
    let mut row = Row::default();
    for _ in 0..columns {
        match rng.below(5) {
            0 => row.lengths.push(-1),
            1 => row.lengths.push(0),
            _ => {
                let n = if big { rng.below(5000) } else { rng.below(40) } as usize;
                row.lengths.push(n as i64);
                let value = rng.bytes(n);
                row.values.extend_from_slice(&value);
            }
        }
    }
    if rng.chance(20) {
        row.lengths.push(i64::MIN);
        row.lengths.push(i64::MAX);
    }
    row
}

fn response(rng: &mut Rng) -> ExecuteResponse {
    let mut r = ExecuteResponse::default();
    if rng.chance(2) {
        r.session = Some(Session {
            signature: rng.bytes_upto(40),
            vitess_session: rng.chance(2).then(|| vtgate::Session {
                in_transaction: rng.chance(2),
                autocommit: rng.chance(2),
                target_string: rng.text_upto(5),
                ..Default::default()
            }),
        });
    }
    if !rng.chance(4) {
        let columns = rng.below(12) as usize;
        let big = rng.chance(8);
        let mut result = QueryResult {
            rows_affected: if rng.chance(2) { rng.next() } else { 0 },
            insert_id: if rng.chance(3) { rng.next() } else { 0 },
            info: rng.text_upto(3),
            session_state_changes: rng.text_upto(3),
            insert_id_changed: rng.chance(2),
            ..Default::default()
        };
        for i in 0..columns {
            result.fields.push(Field {
                name: format!("c{i}{}", rng.text(2)),
                r#type: loop {
                    let t = rng.below(2100) as i32;
                    if Type::try_from(t).is_ok() {
                        break t;
                    }
                },
                column_length: rng.below(300) as u32,
                flags: rng.below(3) as u32,
                ..Default::default()
            });
        }
        for _ in 0..rng.below(if big { 20 } else { 200 }) {
            result.rows.push(if rng.chance(30) {
                Row::default()
            } else {
                row(rng, columns, big)
            });
        }
        r.result = Some(result);
    }
    if rng.chance(4) {
        r.error = Some(RpcError {
            message: rng.text_upto(30),
            code: rng.below(17) as i32,
        });
    }
    if rng.chance(2) {
        r.timing = (rng.below(1_000_000) as f64) / 997.0;
    }
    r
}

fn expected(proto: &[u8]) -> serde_json::Value {
    let mut out = Vec::new();
    from_proto::<ExecuteResponse>(proto, &mut out, usize::MAX).unwrap();
    serde_json::from_slice(&out).unwrap()
}

/// Feeds `proto` in random cuts; the JSON written.
fn streamed(proto: &[u8], rng: &mut Rng, max_len: usize) -> Result<Vec<u8>, ToJsonError> {
    let mut t = Transcoder::new(max_len);
    let mut out = Vec::new();
    let mut rest = proto;
    while !rest.is_empty() {
        let cut = match rng.below(4) {
            0 => 1,
            1 => rng.below(8) as usize,
            2 => rng.below(200) as usize,
            _ => rng.below(70_000) as usize,
        }
        .min(rest.len());
        let (now, later) = rest.split_at(cut);
        t.feed(now, &mut out)?;
        rest = later;
    }
    t.finish(&mut out)?;
    Ok(out)
}

#[test]
fn same_json_as_pbjson_for_any_cuts() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for case in 0..600 {
        let proto = response(&mut rng).encode_to_vec();
        let want = expected(&proto);
        let json = streamed(&proto, &mut rng, usize::MAX).unwrap();
        let got: serde_json::Value = serde_json::from_slice(&json)
            .unwrap_or_else(|e| panic!("case {case}: {e}: {}", String::from_utf8_lossy(&json)));
        assert_eq!(got, want, "case {case}");
        // Canonical input: the very same bytes too (so no key is written twice).
        let mut reference = Vec::new();
        from_proto::<ExecuteResponse>(&proto, &mut reference, usize::MAX).unwrap();
        assert_eq!(json, reference, "case {case}");
        // The whole-body form gives the very same bytes.
        let mut whole = b"xx".to_vec();
        execute_to_json(&proto, &mut whole, usize::MAX).unwrap();
        assert_eq!(whole.get(2..), Some(&json[..]), "case {case}");
    }
}

#[test]
fn empty_and_default_messages() {
    let cases = [
        (ExecuteResponse::default(), "{}"),
        (
            ExecuteResponse {
                result: Some(QueryResult::default()),
                ..Default::default()
            },
            r#"{"result":{}}"#,
        ),
        (
            ExecuteResponse {
                result: Some(QueryResult {
                    rows: vec![Row::default(), Row::default()],
                    info: "i".into(),
                    ..Default::default()
                }),
                timing: 0.25,
                ..Default::default()
            },
            r#"{"result":{"rows":[{},{}],"info":"i"},"timing":0.25}"#,
        ),
        (
            ExecuteResponse {
                result: Some(QueryResult {
                    rows_affected: 3,
                    rows: vec![Row {
                        lengths: vec![-1, 2, 0],
                        values: b"ab".to_vec(),
                    }],
                    ..Default::default()
                }),
                ..Default::default()
            },
            r#"{"result":{"rowsAffected":"3","rows":[{"lengths":["-1","2","0"],"values":"YWI="}]}}"#,
        ),
    ];
    for (message, json) in cases {
        let proto = message.encode_to_vec();
        let mut out = Vec::new();
        execute_to_json(&proto, &mut out, usize::MAX).unwrap();
        assert_eq!(String::from_utf8_lossy(&out), json);
        assert_eq!(
            serde_json::from_slice::<serde_json::Value>(&out).unwrap(),
            expected(&proto)
        );
    }
}

#[test]
fn the_limit_holds_at_every_byte() {
    let mut rng = Rng(7);
    let proto = response(&mut rng).encode_to_vec();
    let mut whole = Vec::new();
    execute_to_json(&proto, &mut whole, usize::MAX).unwrap();
    for max in [0, 1, whole.len() / 2, whole.len() - 1] {
        let mut out = Vec::new();
        assert_eq!(
            execute_to_json(&proto, &mut out, max),
            Err(ToJsonError::TooLarge)
        );
        assert!(out.len() <= max, "{} > {max}", out.len());
    }
    let mut out = Vec::new();
    execute_to_json(&proto, &mut out, whole.len()).unwrap();
    assert_eq!(out, whole);
}

fn error_of(proto: &[u8]) -> String {
    let mut out = Vec::new();
    match execute_to_json(proto, &mut out, usize::MAX) {
        Err(ToJsonError::Invalid(e)) => e.0,
        other => panic!("{other:?} for {proto:02x?}"),
    }
}

#[test]
fn truncated_input_is_an_error_at_every_cut() {
    let mut rng = Rng(11);
    let mut tried = 0;
    while tried < 20 {
        let proto = response(&mut rng).encode_to_vec();
        if proto.len() > 3000 {
            continue;
        }
        tried += 1;
        for cut in 0..proto.len() {
            let head = proto.get(..cut).unwrap();
            let mut out = Vec::new();
            let result = execute_to_json(head, &mut out, usize::MAX);
            // A cut between top-level fields is a whole (shorter) message.
            if let Ok(()) = result {
                let got: serde_json::Value = serde_json::from_slice(&out).unwrap();
                assert_eq!(got, expected(head));
            } else {
                assert!(
                    error_of(head).starts_with("invalid protobuf:"),
                    "{}",
                    error_of(head)
                );
            }
        }
    }
}

#[test]
fn non_canonical_input_is_refused_clearly() {
    // Timing (4) before result (2).
    let mut proto = ExecuteResponse {
        timing: 1.0,
        ..Default::default()
    }
    .encode_to_vec();
    proto.extend_from_slice(&[0x12, 0x00]);
    assert!(
        error_of(&proto).contains("canonical field order"),
        "{}",
        error_of(&proto)
    );
    // Timing (4) before a result that is merged from two occurrences.
    assert!(
        error_of(&[0x21, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 0x12, 0x00, 0x12, 0x00])
            .contains("canonical field order")
    );
    // A row with an unknown field; a row field that overruns the row.
    assert!(error_of(&[0x12, 0x04, 0x22, 0x02, 0x18, 0x01]).contains("rows are read"));
    assert!(error_of(&[0x12, 0x04, 0x22, 0x02, 0x12, 0x05]).contains("runs past"));
    // A group; an over-long varint; garbage.
    assert!(error_of(&[0x0b]).contains("group"));
    assert!(error_of(&[0x20; 11]).starts_with("invalid protobuf:"));
    assert!(error_of(&[0xff]).starts_with("invalid protobuf:"));
}

#[test]
fn an_error_sticks() {
    let mut t = Transcoder::new(usize::MAX);
    let mut out = Vec::new();
    assert!(t.feed(&[0x0b], &mut out).is_err());
    assert!(t.feed(&[], &mut out).is_err());
    assert!(t.finish(&mut out).is_err());
}

/// `r` in the shim's streamed form: `result` as a head (fields, counts), one
/// occurrence per random chunk of rows (now and then an empty one), a tail (info,
/// session state changes, insert id changed), then session, error and timing.
fn streamed_form(r: &ExecuteResponse, rng: &mut Rng) -> Vec<u8> {
    let mut out = Vec::new();
    let result = |out: &mut Vec<u8>, part: QueryResult| {
        ExecuteResponse {
            result: Some(part),
            ..Default::default()
        }
        .encode(out)
        .unwrap()
    };
    if let Some(r) = &r.result {
        let head = QueryResult {
            fields: r.fields.clone(),
            rows_affected: r.rows_affected,
            insert_id: r.insert_id,
            ..Default::default()
        };
        result(&mut out, head);
        let mut rows = &r.rows[..];
        while !rows.is_empty() {
            let n = 1 + rng.below(rows.len() as u64) as usize;
            let (chunk, rest) = rows.split_at(n);
            rows = rest;
            result(
                &mut out,
                QueryResult {
                    rows: chunk.to_vec(),
                    ..Default::default()
                },
            );
            if rng.chance(10) {
                result(&mut out, QueryResult::default());
            }
        }
        let tail = QueryResult {
            info: r.info.clone(),
            session_state_changes: r.session_state_changes.clone(),
            insert_id_changed: r.insert_id_changed,
            ..Default::default()
        };
        if tail != QueryResult::default() || rng.chance(2) {
            result(&mut out, tail);
        }
    }
    let small = [
        ExecuteResponse {
            session: r.session.clone(),
            ..Default::default()
        },
        ExecuteResponse {
            error: r.error.clone(),
            ..Default::default()
        },
        ExecuteResponse {
            timing: r.timing,
            ..Default::default()
        },
    ];
    for m in small {
        m.encode(&mut out).unwrap();
    }
    out
}

/// The JSON's value, checking that no object has a key twice (a parsed
/// `serde_json::Value` would keep one of them silently).
fn parse_once(json: &[u8]) -> serde_json::Value {
    serde_json::from_slice::<Once>(json)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(json)));
    serde_json::from_slice(json).unwrap()
}

/// Any JSON, refusing an object with a key twice.
struct Once;

impl<'de> serde::Deserialize<'de> for Once {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(OnceVisitor)
    }
}

struct OnceVisitor;

impl<'de> serde::de::Visitor<'de> for OnceVisitor {
    type Value = Once;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("JSON")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Once, E> {
        Ok(Once)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Once, E> {
        Ok(Once)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Once, E> {
        Ok(Once)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Once, E> {
        Ok(Once)
    }
    fn visit_str<E>(self, _: &str) -> Result<Once, E> {
        Ok(Once)
    }
    fn visit_unit<E>(self) -> Result<Once, E> {
        Ok(Once)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Once, A::Error> {
        while seq.next_element::<Once>()?.is_some() {}
        Ok(Once)
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Once, A::Error> {
        let mut keys = std::collections::HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            map.next_value::<Once>()?;
            if !keys.insert(key.clone()) {
                return Err(serde::de::Error::custom(format!("key {key:?} twice")));
            }
        }
        Ok(Once)
    }
}

#[test]
fn streamed_form_same_json_as_pbjson_for_any_cuts() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut merged = 0;
    for case in 0..600 {
        let message = response(&mut rng);
        let proto = streamed_form(&message, &mut rng);
        // Protobuf merging makes it the same message.
        assert_eq!(ExecuteResponse::decode(&proto[..]).unwrap(), message);
        let want = expected(&message.encode_to_vec());
        assert_eq!(expected(&proto), want, "case {case}");
        let json = streamed(&proto, &mut rng, usize::MAX).unwrap();
        assert_eq!(parse_once(&json), want, "case {case}");
        let mut whole = Vec::new();
        execute_to_json(&proto, &mut whole, usize::MAX).unwrap();
        assert_eq!(whole, json, "case {case}");
        merged += usize::from(message.result.is_some_and(|r| !r.rows.is_empty()));
    }
    assert!(merged > 300, "{merged} answers with rows");
}

#[test]
fn streamed_form_cut_at_every_byte() {
    let mut rng = Rng(23);
    let mut tried = 0;
    while tried < 20 {
        let message = response(&mut rng);
        let proto = streamed_form(&message, &mut rng);
        if proto.len() > 2000 {
            continue;
        }
        tried += 1;
        let want = expected(&proto);
        for cut in 0..=proto.len() {
            let (head, tail) = proto.split_at(cut);
            // In two chunks: the same JSON.
            let mut t = Transcoder::new(usize::MAX);
            let mut json = Vec::new();
            t.feed(head, &mut json).unwrap();
            t.feed(tail, &mut json).unwrap();
            t.finish(&mut json).unwrap();
            assert_eq!(parse_once(&json), want, "cut {cut}");
            // Ending there: a shorter whole message, or truncated.
            let mut out = Vec::new();
            match execute_to_json(head, &mut out, usize::MAX) {
                Ok(()) => assert_eq!(parse_once(&out), expected(head), "cut {cut}"),
                Err(_) => assert!(error_of(head).starts_with("invalid protobuf:")),
            }
        }
    }
}

#[test]
fn streamed_form_keeps_the_limit() {
    let mut rng = Rng(7);
    let message = response(&mut rng);
    let proto = streamed_form(&message, &mut rng);
    let mut whole = Vec::new();
    execute_to_json(&proto, &mut whole, usize::MAX).unwrap();
    assert!(whole.len() > 1000, "{}", whole.len());
    for max in [0, 1, whole.len() / 3, whole.len() / 2, whole.len() - 1] {
        let mut out = Vec::new();
        assert_eq!(
            execute_to_json(&proto, &mut out, max),
            Err(ToJsonError::TooLarge)
        );
        assert!(out.len() <= max, "{} > {max}", out.len());
        assert_eq!(
            streamed(&proto, &mut rng, max).err(),
            Some(ToJsonError::TooLarge)
        );
    }
    assert_eq!(streamed(&proto, &mut rng, whole.len()).unwrap(), whole);
}

#[test]
fn streamed_form_small_cases() {
    let cases: [(&[u8], &str); 5] = [
        // Two empty results merge into one.
        (&[0x12, 0x00, 0x12, 0x00], r#"{"result":{}}"#),
        // Head with a count, two row chunks, tail with info; then session, timing.
        (
            &[
                0x12, 0x02, 0x10, 0x05, // rowsAffected 5
                0x12, 0x02, 0x22, 0x00, // a row
                0x12, 0x07, 0x22, 0x05, 0x0a, 0x01, 0x02, 0x12, 0x00, // a row, lengths [1]
                0x12, 0x03, 0x32, 0x01, b'i', // info "i"
                0x0a, 0x00, // session {}
                0x21, 0, 0, 0, 0, 0, 0, 0xd0, 0x3f, // timing 0.25
            ],
            r#"{"result":{"rowsAffected":"5","rows":[{},{"lengths":["1"]}],"info":"i"},"session":{},"timing":0.25}"#,
        ),
        // Session before and timing after the result.
        (
            &[
                0x0a, 0x00, 0x12, 0x00, 0x12, 0x00, 0x21, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f,
            ],
            r#"{"session":{},"result":{},"timing":1.0}"#,
        ),
        // Rows across occurrences keep one array; a chunk's values straddle nothing.
        (
            &[0x12, 0x04, 0x22, 0x02, 0x12, 0x00, 0x12, 0x02, 0x22, 0x00],
            r#"{"result":{"rows":[{},{}]}}"#,
        ),
        // Small fields of the result merged across occurrences (later wins).
        (
            &[0x12, 0x03, 0x32, 0x01, b'a', 0x12, 0x03, 0x32, 0x01, b'b'],
            r#"{"result":{"info":"b"}}"#,
        ),
    ];
    for (proto, json) in cases {
        let mut out = Vec::new();
        execute_to_json(proto, &mut out, usize::MAX).unwrap();
        assert_eq!(String::from_utf8_lossy(&out), json);
        assert_eq!(parse_once(&out), expected(proto));
    }
    // The check itself sees a key twice, at any depth.
    assert!(serde_json::from_slice::<Once>(br#"{"a":{},"a":1}"#).is_err());
    assert!(serde_json::from_slice::<Once>(br#"[{"b":[{"a":1,"a":1}]}]"#).is_err());
}

#[test]
fn streamed_form_refuses_what_would_write_a_key_twice() {
    let again = "comes again after another field";
    // Result, session, result.
    assert!(error_of(&[0x12, 0x00, 0x0a, 0x00, 0x12, 0x00]).contains(again));
    // Result, timing, result (with rows, so the array was open).
    let proto = [
        0x12, 0x02, 0x22, 0x00, 0x21, 0, 0, 0, 0, 0, 0, 0, 0, 0x12, 0x02, 0x22, 0x00,
    ];
    assert!(error_of(&proto).contains(again), "{}", error_of(&proto));
    // Session before and after the result.
    let twice = "both before and after the result";
    assert!(error_of(&[0x0a, 0x00, 0x12, 0x00, 0x0a, 0x00]).contains(twice));
    assert!(error_of(&[0x0a, 0x00, 0x12, 0x00, 0x12, 0x00, 0x0a, 0x00]).contains(twice));
    // After the result, the Response's fields still ascend: error (3), then session (1).
    assert!(error_of(&[0x12, 0x00, 0x1a, 0x00, 0x0a, 0x00]).contains("canonical field order"));
    // Fields out of order across occurrences: rows then fields; info then rows; a
    // count after rows.
    let order = "canonical field order";
    assert!(error_of(&[0x12, 0x02, 0x22, 0x00, 0x12, 0x02, 0x0a, 0x00]).contains(order));
    assert!(error_of(&[0x12, 0x03, 0x32, 0x01, b'i', 0x12, 0x02, 0x22, 0x00]).contains(order));
    assert!(error_of(&[0x12, 0x02, 0x22, 0x00, 0x12, 0x02, 0x10, 0x01]).contains(order));
    // The same, fed a byte at a time: the error and nothing past what was accepted.
    let mut t = Transcoder::new(usize::MAX);
    let mut out = Vec::new();
    let proto = [0x12, 0x00, 0x0a, 0x00, 0x12, 0x00];
    let fed: Vec<_> = proto.iter().map(|b| t.feed(&[*b], &mut out)).collect();
    assert!(fed.iter().take(4).all(Result::is_ok), "{fed:?}");
    assert!(fed.get(5).is_some_and(Result::is_err), "{fed:?}");
    assert!(t.finish(&mut out).is_err());
}
