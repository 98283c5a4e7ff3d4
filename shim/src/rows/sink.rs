//! Where a statement's rows go, as they are read from MySQL.
//!
//! `Execute` answers with one message, so its sink keeps every row, up to the
//! unary limits (`Rows`, rows/result.rs) — or, once they are many, sends that one
//! message on in pieces (`Spill`, rows/spill.rs). `StreamExecute` answers with a stream, so
//! its sink cuts the rows into chunks, each sent as soon as it is full, into a
//! bounded channel that the HTTP response body drains: when the client reads
//! slowly the channel fills, `send` waits, and so does the MySQL reader — the
//! shim holds a few chunks per stream whatever the result size.
use crate::connect::envelope;
use crate::rows::answer::result_header;
use crate::rows::gone::Gone;
use crate::rows::result::{entry_len, texts, EncodedRows, Overflow, ResultLimits, Rows};
use crate::rows::spill::Spill;
use crate::settings::{Setting, Vars};
use bytes::Bytes;
use ferry_proto::psdb::v1alpha1::ExecuteResponse;
use ferry_proto::vitess::query::{Field, QueryResult};
use mysql_async::Row as MysqlRow;
use std::borrow::Cow;
use tokio::sync::mpsc;

pub enum Sink {
    /// Execute: every row, in memory, up to the limits.
    Collect(Rows),
    /// Execute whose answer goes out in pieces once it is large.
    Spill(Box<Spill>),
    /// StreamExecute: bounded chunks, sent as they fill.
    Chunks(Chunks),
}

impl Sink {
    pub fn collect(limits: ResultLimits) -> Sink {
        Sink::Collect(Rows::new(limits))
    }

    /// The columns of the result set, before its rows.
    pub async fn columns(&mut self, fields: &[Field]) -> Result<(), Gone> {
        match self {
            Sink::Collect(_) => Ok(()),
            Sink::Spill(s) => {
                s.columns(fields);
                Ok(())
            }
            Sink::Chunks(c) => c.columns(fields).await,
        }
    }

    pub async fn row(&mut self, r: &MysqlRow) -> Result<(), Gone> {
        match self {
            Sink::Collect(rows) => {
                rows.push(r);
                Ok(())
            }
            Sink::Spill(s) => s.row(r).await,
            Sink::Chunks(c) => c.push(&texts(r)).await,
        }
    }

    /// After the last row: a stream sends what it still holds.
    pub async fn end(&mut self) -> Result<(), Gone> {
        match self {
            Sink::Collect(_) => Ok(()),
            Sink::Spill(s) => s.end().await,
            Sink::Chunks(c) => c.flush().await,
        }
    }

    /// Which unary limit the rows passed (a stream has none).
    pub fn overflow(&self) -> Option<Overflow> {
        match self {
            Sink::Collect(rows) => rows.overflow,
            Sink::Spill(s) => s.rows.overflow,
            Sink::Chunks(_) => None,
        }
    }

    /// The rows kept for the answer, encoded (a stream sent its own already).
    pub fn take_rows(&mut self) -> EncodedRows {
        match self {
            Sink::Collect(rows) => std::mem::take(&mut rows.encoded),
            Sink::Spill(s) => s.take_rows(),
            Sink::Chunks(_) => EncodedRows::default(),
        }
    }

    /// Rows a stream has taken so far (sent, or held for its next chunk).
    pub fn rows_sent(&self) -> u64 {
        match self {
            Sink::Collect(_) => 0,
            Sink::Spill(s) => s.rows_taken(),
            Sink::Chunks(c) => c.rows,
        }
    }

    /// Whether the answer's fields already went out (in a stream's first message).
    pub fn sent_columns(&self) -> bool {
        matches!(self, Sink::Chunks(c) if c.sent_columns)
    }
}

/// When a chunk is full: `rows` rows, or `bytes` of encoded rows, whichever
/// comes first (`FERRY_STREAM_CHUNK_ROWS`, `FERRY_STREAM_CHUNK_BYTES`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkPolicy {
    pub rows: usize,
    pub bytes: usize,
}

impl ChunkPolicy {
    /// May a row of `next` bytes join a chunk that holds `rows` rows of
    /// `bytes` bytes? A row alone always may (it cannot be split), so a chunk
    /// passes `bytes` only when one row does.
    pub fn admits(&self, rows: usize, bytes: usize, next: usize) -> bool {
        rows == 0 || (rows < self.rows && bytes.saturating_add(next) <= self.bytes)
    }

    /// Is a chunk this size to be sent now, without waiting for another row?
    pub fn full(&self, rows: usize, bytes: usize) -> bool {
        rows >= self.rows || bytes >= self.bytes
    }
}

/// The rows of a stream, cut into `ExecuteResponse` messages; each row is encoded
/// once, as it is read (rows/result.rs), and a chunk's message is those bytes.
pub struct Chunks {
    tx: mpsc::Sender<Bytes>,
    policy: ChunkPolicy,
    held: EncodedRows,
    lengths: Vec<i64>,
    sent_columns: bool,
    /// Rows taken, for the statement's span.
    rows: u64,
}

impl Chunks {
    pub fn new(tx: mpsc::Sender<Bytes>, policy: ChunkPolicy) -> Chunks {
        Chunks {
            tx,
            policy,
            held: EncodedRows::default(),
            lengths: Vec::new(),
            sent_columns: false,
            rows: 0,
        }
    }

    /// Sends one message as a Connect data envelope; waits while the channel is full.
    pub async fn send(&self, msg: &ExecuteResponse) -> Result<(), Gone> {
        self.tx.send(envelope::data(msg)).await.map_err(|_| Gone)
    }

    /// The first message: the fields and no rows, as vitess streams (so a
    /// client sees the columns before a slow query's first row).
    async fn columns(&mut self, fields: &[Field]) -> Result<(), Gone> {
        self.sent_columns = true;
        self.send(&ExecuteResponse {
            result: Some(QueryResult {
                fields: fields.to_vec(),
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
    }

    async fn push(&mut self, values: &[Option<Cow<'_, [u8]>>]) -> Result<(), Gone> {
        let size = entry_len(values, &mut self.lengths);
        if !self
            .policy
            .admits(self.held.count, self.held.bytes.len(), size)
        {
            self.flush().await?;
        }
        self.held.push(values, &mut self.lengths);
        self.rows += 1;
        if self.policy.full(self.held.count, self.held.bytes.len()) {
            self.flush().await?;
        }
        Ok(())
    }

    /// Sends the held rows as `ExecuteResponse { result: { rows } }` (field 2, whose
    /// bytes are the rows' entries) in a data envelope.
    async fn flush(&mut self) -> Result<(), Gone> {
        if self.held.count == 0 {
            return Ok(());
        }
        let rows = std::mem::take(&mut self.held.bytes);
        self.held.count = 0;
        let key = result_header(rows.len());
        self.tx
            .send(envelope::data_parts(&[&key, &rows]))
            .await
            .map_err(|_| Gone)
    }
}

pub const SETTINGS: &[Setting] = &[
    Setting {
        name: "FERRY_STREAM_CHUNK_ROWS",
        default: "1000",
        about: "rows per StreamExecute message at most (streams have no row cap; each holds a few chunks in memory at most)",
    },
    Setting {
        name: "FERRY_STREAM_CHUNK_BYTES",
        default: "262144",
        about: "bytes of rows per StreamExecute message at most, whichever comes first (a single larger row goes alone)",
    },
];

impl ChunkPolicy {
    pub fn from_vars(vars: &Vars<'_>) -> Result<Self, String> {
        Ok(ChunkPolicy {
            rows: vars.size("FERRY_STREAM_CHUNK_ROWS")?.max(1),
            bytes: vars.size("FERRY_STREAM_CHUNK_BYTES")?.max(1),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    #[test]
    fn chunks_end_at_rows_or_bytes_whichever_first() {
        let p = ChunkPolicy {
            rows: 3,
            bytes: 100,
        };
        assert!(p.admits(0, 0, 1000), "a row alone always fits");
        assert!(p.admits(2, 50, 50));
        assert!(!p.admits(2, 50, 51), "would pass the byte bound");
        assert!(!p.admits(3, 3, 1), "row bound");
        assert!(!p.full(2, 99));
        assert!(p.full(3, 3));
        assert!(p.full(1, 100));
    }

    fn value_row(len: usize) -> Vec<Option<Cow<'static, [u8]>>> {
        vec![Some(Cow::Owned(vec![b'x'; len]))]
    }

    fn decode(b: &Bytes) -> ExecuteResponse {
        assert_eq!(b[0], 0, "data envelope");
        let len = u32::from_be_bytes([b[1], b[2], b[3], b[4]]) as usize;
        assert_eq!(len, b.len() - 5);
        ExecuteResponse::decode(&b[5..]).unwrap()
    }

    async fn received(mut rx: mpsc::Receiver<Bytes>) -> Vec<ExecuteResponse> {
        let mut msgs = Vec::new();
        while let Some(b) = rx.recv().await {
            msgs.push(decode(&b));
        }
        msgs
    }

    #[tokio::test]
    async fn a_stream_sends_fields_first_then_bounded_chunks() {
        let (tx, rx) = mpsc::channel(64);
        let mut chunks = Chunks::new(
            tx,
            ChunkPolicy {
                rows: 4,
                bytes: 1 << 20,
            },
        );
        let fields = [Field {
            name: "x".into(),
            ..Default::default()
        }];
        chunks.columns(&fields).await.unwrap();
        for _ in 0..10 {
            chunks.push(&value_row(3)).await.unwrap();
        }
        let mut sink = Sink::Chunks(chunks);
        sink.end().await.unwrap();
        assert!(sink.sent_columns() && sink.take_rows().count == 0 && sink.overflow().is_none());
        drop(sink);
        let msgs = received(rx).await;
        let first = msgs[0].result.as_ref().unwrap();
        assert_eq!((first.fields.len(), first.rows.len()), (1, 0));
        let sizes: Vec<usize> = msgs[1..]
            .iter()
            .map(|m| {
                let r = m.result.as_ref().unwrap();
                assert!(r.fields.is_empty() && m.session.is_none());
                r.rows.len()
            })
            .collect();
        assert_eq!(sizes, [4, 4, 2]);
    }

    #[tokio::test]
    async fn the_byte_bound_cuts_before_a_row_that_would_pass_it() {
        let (tx, rx) = mpsc::channel(64);
        let mut chunks = Chunks::new(
            tx,
            ChunkPolicy {
                rows: 1000,
                bytes: 250,
            },
        );
        for _ in 0..5 {
            chunks.push(&value_row(100)).await.unwrap();
        }
        chunks.flush().await.unwrap();
        drop(chunks);
        let sizes: Vec<usize> = received(rx)
            .await
            .into_iter()
            .map(|m| m.result.unwrap().rows.len())
            .collect();
        assert_eq!(
            sizes,
            [2, 2, 1],
            "two 100-byte rows fit in 250, three do not"
        );
    }

    #[tokio::test]
    async fn a_closed_channel_is_gone() {
        let (tx, rx) = mpsc::channel(1);
        drop(rx);
        let mut chunks = Chunks::new(tx, ChunkPolicy { rows: 1, bytes: 1 });
        assert_eq!(chunks.push(&value_row(1)).await, Err(Gone));
    }
}
