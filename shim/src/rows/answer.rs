//! An Execute answer on its way out: the message, and its rows already encoded as
//! they were read (rows/result.rs). They go out as they are, between the message's other
//! bytes, exactly where prost would write them: no second copy of a large result.

use bytes::Bytes;
use ferry_proto::psdb::v1alpha1::ExecuteResponse;
use ferry_proto::vitess::query::QueryResult;
use prost::encoding::{encode_key, encode_varint, encoded_len_varint, WireType};
use prost::Message;

use crate::rows::result::EncodedRows;

/// `ExecuteResponse.result`.
const RESULT_FIELD: u32 = 2;

/// The key and length that put `len` bytes of `QueryResult` in an `ExecuteResponse`
/// as its `result`: in a whole answer, a stream's chunk of rows (rows/sink.rs), or one
/// piece of an answer sent in pieces (rows/spill.rs).
pub fn result_header(len: usize) -> Vec<u8> {
    let mut header = Vec::with_capacity(1 + encoded_len_varint(len as u64));
    encode_key(RESULT_FIELD, WireType::LengthDelimited, &mut header);
    encode_varint(len as u64, &mut header);
    header
}

/// The message (its result without rows) and the result's rows, encoded.
#[derive(Debug, Default)]
pub struct Answer {
    pub message: ExecuteResponse,
    pub rows: EncodedRows,
}

impl From<ExecuteResponse> for Answer {
    fn from(message: ExecuteResponse) -> Self {
        Answer {
            message,
            rows: EncodedRows::default(),
        }
    }
}

impl Answer {
    /// The answer's protobuf bytes, in pieces whose concatenation is exactly
    /// prost's encoding of the message with the rows in its result (fields in tag
    /// order: each field is encoded on its own, so a message split by tags encodes
    /// to the same bytes, in parts).
    pub fn encode(self) -> Vec<Bytes> {
        let Answer { message, rows } = self;
        let ExecuteResponse {
            session,
            result,
            error,
            timing,
        } = message;
        let result = match result {
            Some(result) if rows.count > 0 => result,
            result => {
                let message = ExecuteResponse {
                    session,
                    result,
                    error,
                    timing,
                };
                return vec![message.encode_to_vec().into()];
            }
        };
        // Destructured in full: a new field must be placed before or after the rows.
        let QueryResult {
            fields,
            rows_affected,
            insert_id,
            rows: _, // field 4: `rows.bytes`
            info,
            session_state_changes,
            insert_id_changed,
        } = result;
        let before_rows = QueryResult {
            fields,
            rows_affected,
            insert_id,
            ..Default::default()
        }
        .encode_to_vec();
        let after_rows = QueryResult {
            info,
            session_state_changes,
            insert_id_changed,
            ..Default::default()
        }
        .encode_to_vec();
        let result_len = before_rows.len() + rows.bytes.len() + after_rows.len();
        let mut head = ExecuteResponse {
            session,
            ..Default::default()
        }
        .encode_to_vec();
        head.extend_from_slice(&result_header(result_len));
        head.extend_from_slice(&before_rows);
        let mut tail = after_rows;
        ExecuteResponse {
            error,
            timing,
            ..Default::default()
        }
        .encode(&mut tail)
        .unwrap_or_default(); // a Vec grows: encoding into it cannot fail
        vec![head.into(), rows.bytes.into(), tail.into()]
    }

    /// The whole message, rows decoded (a batch's results, tests).
    pub fn decoded(self) -> ExecuteResponse {
        let bytes: Vec<u8> = self.encode().concat();
        ExecuteResponse::decode(bytes.as_slice()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_proto::psdb::v1alpha1::Session;
    use ferry_proto::vitess::query::{Field, Row};
    use ferry_proto::vitess::vtrpc::RpcError;

    fn encoded(rows: &[Row]) -> EncodedRows {
        EncodedRows {
            bytes: QueryResult {
                rows: rows.to_vec(),
                ..Default::default()
            }
            .encode_to_vec(),
            count: rows.len(),
        }
    }

    #[test]
    fn the_pieces_are_prosts_encoding_of_the_whole_message() {
        let rows = vec![
            Row {
                lengths: vec![2, -1, 0],
                values: b"ab".to_vec(),
            },
            Row {
                lengths: vec![300],
                values: vec![b'x'; 300],
            },
        ];
        let full = |rows: Vec<Row>, error: Option<RpcError>| ExecuteResponse {
            session: Some(Session {
                signature: vec![1, 2, 3],
                vitess_session: None,
            }),
            result: Some(QueryResult {
                fields: vec![Field {
                    name: "a".into(),
                    ..Default::default()
                }],
                rows_affected: 7,
                insert_id: 9,
                rows,
                info: "info".into(),
                session_state_changes: "x".into(),
                insert_id_changed: true,
            }),
            error,
            timing: 0.25,
        };
        for error in [
            None,
            Some(RpcError {
                message: "m".into(),
                ..Default::default()
            }),
        ] {
            let want = full(rows.clone(), error.clone()).encode_to_vec();
            let answer = Answer {
                message: full(Vec::new(), error),
                rows: encoded(&rows),
            };
            assert_eq!(answer.encode().concat(), want);
        }
        // No rows: one piece, the message as it is.
        let plain = full(Vec::new(), None);
        let pieces = Answer::from(plain.clone()).encode();
        assert_eq!(pieces.len(), 1);
        assert_eq!(pieces.concat(), plain.encode_to_vec());
        // No result at all.
        let empty = ExecuteResponse::default();
        assert_eq!(Answer::from(empty.clone()).decoded(), empty);
    }
}
