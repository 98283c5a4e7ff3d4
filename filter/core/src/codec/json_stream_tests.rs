//! The streamed transcoder against the pbjson path (`json::from_proto`): for many
//! generated answers, cut at random, the JSON parses to the same value.

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
    // Two results.
    assert!(error_of(&[0x12, 0x00, 0x12, 0x00]).contains("canonical field order"));
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
