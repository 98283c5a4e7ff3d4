//! An Execute answer that starts out whole and goes out as it is read once it is
//! large (`FERRY_SHIM_UNARY_STREAM_AFTER_BYTES`, 1 MiB).
//!
//! A unary answer is one protobuf message, but protobuf merges a message field that
//! appears several times (repeated fields concatenate, later scalars win). So once
//! the rows held pass the threshold the answer commits to a 200 and is written as
//! `result { fields }`, then `result { rows… }` per chunk as MySQL hands them over,
//! then `result { info… }` if any, then `session`, `error` and `timing`: every
//! decoder reads that as the same `ExecuteResponse` it would read whole, and the
//! filter transcodes it to JSON as it comes (json_stream.rs). The first byte leaves
//! while MySQL is still sending, and the shim holds a few chunks, not the answer.
//!
//! Smaller answers are sent whole, as before, and everything that goes wrong before
//! the threshold is still a Connect error with its HTTP status. After it, the
//! status is out: a limit passed, an SQL error, a lost connection or a deadline is
//! the answer's `error` (as vitess answers SQL errors), with the rows sent so far
//! before it; clients read `error` first.
use crate::connect::error::ConnectError;
use crate::rows::answer::result_header;
use crate::rows::gone::Gone;
use crate::rows::result::{EncodedRows, ResultLimits, Rows};
use crate::settings::{Setting, Vars};
use bytes::Bytes;
use ferry_proto::psdb::v1alpha1::{ExecuteResponse, Session};
use ferry_proto::vitess::query::{Field, QueryResult};
use ferry_proto::vitess::vtrpc::RpcError;
use mysql_async::Row as MysqlRow;
use prost::Message;
use tokio::sync::{mpsc, oneshot};

/// Pieces that may wait between the MySQL reader and the response body (a chunk of
/// rows is two: its header and its bytes).
const BUFFERED: usize = 8;

/// The response body's end of a committed answer: its pieces, in order.
pub type Pieces = mpsc::Receiver<Bytes>;

/// When a unary answer commits, and how large its pieces are then.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpillPolicy {
    /// Rows held past this many encoded bytes commit the answer (0: never).
    pub after: usize,
    /// A piece of rows goes out at this many bytes.
    pub piece: usize,
}

/// The rows of one Execute, held until they pass `policy.after`, then sent on.
pub struct Spill {
    pub rows: Rows,
    policy: SpillPolicy,
    fields: Vec<Field>,
    /// Taken at commit: hands the body's receiver to the request's handler.
    commit: Option<oneshot::Sender<Pieces>>,
    /// Set at commit.
    tx: Option<mpsc::Sender<Bytes>>,
}

impl Spill {
    pub fn new(limits: ResultLimits, policy: SpillPolicy, commit: oneshot::Sender<Pieces>) -> Self {
        Spill {
            rows: Rows::new(limits),
            policy,
            fields: Vec::new(),
            commit: Some(commit),
            tx: None,
        }
    }

    pub fn columns(&mut self, fields: &[Field]) {
        self.fields = fields.to_vec();
    }

    pub fn committed(&self) -> bool {
        self.tx.is_some()
    }

    pub async fn row(&mut self, r: &MysqlRow) -> Result<(), Gone> {
        self.rows.push(r);
        let held = self.rows.encoded.bytes.len();
        if self.tx.is_none() {
            if self.policy.after > 0 && held >= self.policy.after {
                self.start().await?;
            }
            return Ok(());
        }
        if held >= self.policy.piece {
            self.flush().await?;
        }
        Ok(())
    }

    /// After the last row: what is held goes (the answer's end follows in `finish`).
    pub async fn end(&mut self) -> Result<(), Gone> {
        if self.tx.is_some() {
            self.flush().await?;
        }
        Ok(())
    }

    /// The threshold is passed: the answer's body starts with the fields, then the
    /// rows held.
    async fn start(&mut self) -> Result<(), Gone> {
        let (tx, rx) = mpsc::channel(BUFFERED);
        let commit = self.commit.take().ok_or(Gone)?;
        commit.send(rx).map_err(|_| Gone)?;
        let head = QueryResult {
            fields: std::mem::take(&mut self.fields),
            ..Default::default()
        }
        .encode_to_vec();
        self.tx = Some(tx);
        self.send(result_piece(&head)).await?;
        self.flush().await
    }

    /// The rows held, as `result { rows }`: its header, then the rows' own bytes
    /// (not copied).
    async fn flush(&mut self) -> Result<(), Gone> {
        let rows = std::mem::take(&mut self.rows.encoded);
        if rows.count == 0 {
            return Ok(());
        }
        self.send(result_header(rows.bytes.len())).await?;
        self.send(rows.bytes).await
    }

    async fn send(&self, piece: Vec<u8>) -> Result<(), Gone> {
        let tx = self.tx.as_ref().ok_or(Gone)?;
        tx.send(piece.into()).await.map_err(|_| Gone)
    }

    /// A committed answer's end, from the statement's answer: the result's other
    /// numbers (its fields and rows went already), then session, error and timing.
    pub async fn finish(&self, message: ExecuteResponse) -> Result<(), Gone> {
        for piece in closing_pieces(message) {
            self.send(piece).await?;
        }
        Ok(())
    }

    /// Rows taken so far (sent, held, or counted out past a limit: not sent).
    pub fn rows_taken(&self) -> u64 {
        self.rows.kept() as u64
    }

    /// The rows still held (an answer that never committed holds all of them).
    pub fn take_rows(&mut self) -> EncodedRows {
        std::mem::take(&mut self.rows.encoded)
    }
}

/// `result` (field 2) around a `QueryResult`'s encoded fields.
fn result_piece(fields: &[u8]) -> Vec<u8> {
    let mut piece = result_header(fields.len());
    piece.extend_from_slice(fields);
    piece
}

/// A failure after the commit: the answer's `error`, with the session as it was
/// before the statement.
pub fn failed(e: ConnectError, as_is: Session) -> ExecuteResponse {
    ExecuteResponse {
        session: Some(as_is),
        error: Some(RpcError {
            code: e.code as i32,
            message: e.message,
        }),
        ..Default::default()
    }
}

/// The last pieces of a committed answer.
fn closing_pieces(message: ExecuteResponse) -> Vec<Vec<u8>> {
    let ExecuteResponse {
        session,
        result,
        error,
        timing,
    } = message;
    let mut pieces = Vec::with_capacity(2);
    // Fields and rows went out already; what is left of the result: rows_affected and
    // insert_id are a result set's zero (an OK packet has no rows, so never commits).
    let rest = result.map(|r| QueryResult {
        info: r.info,
        session_state_changes: r.session_state_changes,
        insert_id_changed: r.insert_id_changed,
        rows_affected: r.rows_affected,
        insert_id: r.insert_id,
        ..Default::default()
    });
    if let Some(rest) = rest.filter(|r| *r != QueryResult::default()) {
        pieces.push(result_piece(&rest.encode_to_vec()));
    }
    pieces.push(
        ExecuteResponse {
            session,
            result: None,
            error,
            timing,
        }
        .encode_to_vec(),
    );
    pieces
}

pub const SETTINGS: &[Setting] = &[Setting {
    name: "FERRY_SHIM_UNARY_STREAM_AFTER_BYTES",
    default: "1048576",
    about: "an Execute answer whose rows pass this many bytes goes out in pieces while MySQL still sends them ([large answers](../design/shim.md#large-execute-answers-go-out-in-pieces)); `0`: every answer whole",
}];

impl SpillPolicy {
    /// `piece`: as large as a stream's chunk of bytes (`FERRY_STREAM_CHUNK_BYTES`).
    pub fn from_vars(vars: &Vars<'_>, piece: usize) -> Result<Self, String> {
        Ok(SpillPolicy {
            after: vars.size("FERRY_SHIM_UNARY_STREAM_AFTER_BYTES")?,
            piece,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rows::result::EncodedRows;
    use ferry_proto::vitess::query::Row;
    use ferry_proto::vitess::vtrpc::Code;

    fn session() -> Session {
        Session {
            signature: b"sig".to_vec(),
            vitess_session: None,
        }
    }

    fn rows(n: usize) -> Vec<Row> {
        (0..n)
            .map(|i| Row {
                lengths: vec![3, -1],
                values: format!("{i:03}").into_bytes(),
            })
            .collect()
    }

    fn encoded(rows: &[Row]) -> Vec<u8> {
        QueryResult {
            rows: rows.to_vec(),
            ..Default::default()
        }
        .encode_to_vec()
    }

    #[test]
    fn a_committed_answer_decodes_as_the_whole_message() {
        let fields = vec![Field {
            name: "a".into(),
            ..Default::default()
        }];
        let all = rows(10);
        let mut body = result_piece(
            &QueryResult {
                fields: fields.clone(),
                ..Default::default()
            }
            .encode_to_vec(),
        );
        for part in all.chunks(3) {
            body.extend(result_piece(&encoded(part)));
        }
        let end = ExecuteResponse {
            session: Some(session()),
            result: Some(QueryResult {
                fields: fields.clone(),
                info: "i".into(),
                ..Default::default()
            }),
            error: None,
            timing: 0.5,
        };
        for piece in closing_pieces(end) {
            body.extend(piece);
        }
        let got = ExecuteResponse::decode(body.as_slice()).unwrap();
        let want = ExecuteResponse {
            session: Some(session()),
            result: Some(QueryResult {
                fields,
                rows: all,
                info: "i".into(),
                ..Default::default()
            }),
            error: None,
            timing: 0.5,
        };
        assert_eq!(got, want);
    }

    #[test]
    fn a_failure_after_the_commit_is_the_answers_error() {
        let pieces = closing_pieces(failed(
            ConnectError::new(Code::DeadlineExceeded, "deadline"),
            session(),
        ));
        assert_eq!(pieces.len(), 1, "no result numbers");
        let got = ExecuteResponse::decode(pieces[0].as_slice()).unwrap();
        assert_eq!(got.session, Some(session()));
        let error = got.error.unwrap();
        assert_eq!(error.code, Code::DeadlineExceeded as i32);
        assert_eq!(error.message, "deadline");
        assert!(got.result.is_none());
    }

    #[tokio::test]
    async fn commits_past_the_threshold_and_sends_pieces() {
        let (commit, committed) = oneshot::channel();
        let limits = ResultLimits {
            bytes: 1 << 20,
            rows: 1000,
        };
        let mut spill = Spill::new(
            limits,
            SpillPolicy {
                after: 30,
                piece: 30,
            },
            commit,
        );
        spill.columns(&[Field::default()]);
        // Rows are pushed through `Rows` in the real path; here their encoding is
        // placed as it would be, to drive the threshold without MySQL.
        let mut held = EncodedRows::default();
        for r in rows(3) {
            let mut lengths = Vec::new();
            let values: Vec<Option<std::borrow::Cow<'_, [u8]>>> =
                vec![Some(r.values.clone().into()), None];
            held.push(&values, &mut lengths);
        }
        assert!(held.bytes.len() >= 30);
        spill.rows.encoded = held;
        spill.start().await.unwrap();
        assert!(spill.committed());
        let mut rx = committed.await.unwrap();
        spill
            .finish(ExecuteResponse {
                session: Some(session()),
                ..Default::default()
            })
            .await
            .unwrap();
        drop(spill);
        let mut body = Vec::new();
        while let Some(b) = rx.recv().await {
            body.extend_from_slice(&b);
        }
        let got = ExecuteResponse::decode(body.as_slice()).unwrap();
        assert_eq!(got.result.unwrap().rows, rows(3));
        assert_eq!(got.session, Some(session()));
    }

    #[tokio::test]
    async fn a_handler_gone_before_the_commit_is_gone() {
        let (commit, committed) = oneshot::channel();
        drop(committed);
        let mut spill = Spill::new(
            ResultLimits { bytes: 1, rows: 1 },
            SpillPolicy { after: 1, piece: 1 },
            commit,
        );
        assert_eq!(spill.start().await, Err(Gone));
    }
}
