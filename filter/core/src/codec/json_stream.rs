//! `ExecuteResponse` protobuf → protojson, streamed: fed the shim's bytes in chunks
//! of any size, it writes each part's JSON as soon as that part is complete and keeps
//! only the partial tail (a field header, a packed varint, up to 2 bytes of a value
//! waiting for base64, or a small message being collected).
//!
//! The rows are the bulk, so they go straight from the wire to JSON: each vitess `Row`
//! (packed `sint64 lengths`, `bytes values`) is read with prost's encoding primitives,
//! with no per-row struct. Everything else (session, fields, counts, error, timing) is
//! small: it is collected and decoded with prost, and written with the pbjson serde
//! impls, exactly as [`super::json::from_proto`] does.
//!
//! Two forms are read (the shim is ours). The whole form is prost's canonical order:
//! within a message, field numbers never go down. The streamed form sends one answer
//! before its query ends as consecutive `result` occurrences (head with `fields`, one
//! per chunk of `rows`, tail with `info`...), then the Response's small fields; by
//! protobuf's merge rules that is one `result`, so its JSON object (and an open `rows`
//! array) stays open across the occurrences, whose fields must still never go down.
//! At Response level, the fields after the result start again from field 1, but a
//! `result` after another field, or a field whose JSON was written before the result,
//! would be a second JSON key and is refused. A row's `values` appears at most once.
//! Anything else is refused with an error, as are groups and unknown fields inside a
//! `Row`; nothing here panics, and truncated or garbage input is an error.

use ferry_proto::psdb::v1alpha1::ExecuteResponse;
use ferry_proto::vitess::query::QueryResult;
use prost::encoding::{decode_key, decode_varint, encode_key, encode_varint, WireType};
use prost::Message;
use serde::Serialize;

use super::json::ToJsonError;
use super::CodecError;

/// Longest field header: a key and a length (or value) varint, 10 bytes each.
const MAX_TOKEN: usize = 20;

/// Base64 is written in slices of this many input bytes (a multiple of 3), so a
/// large value never needs one large temporary.
const BASE64_SLICE: usize = 3 * 16 * 1024;

/// The whole `proto` at once (the buffered paths): same contract as
/// [`super::json::from_proto`] (appends to `out`, which stays within `max_len`).
pub fn execute_to_json(proto: &[u8], out: &mut Vec<u8>, max_len: usize) -> Result<(), ToJsonError> {
    let room = max_len.saturating_sub(out.len());
    // Base64 is 4/3 of the bytes; one allocation for the usual answer, bounded by the cap.
    out.reserve((proto.len().saturating_mul(3) / 2).min(room));
    let mut transcoder = Transcoder::new(room);
    transcoder.feed(proto, out)?;
    transcoder.finish(out)
}

/// The streaming transcoder of one `ExecuteResponse`.
pub struct Transcoder {
    /// Bytes of JSON still allowed.
    budget: usize,
    /// Absolute offset (in the protobuf) of the next byte not yet consumed.
    pos: u64,
    /// The start of a token (field header or varint) cut by the chunk's end.
    carry: Vec<u8>,
    /// Up to 2 bytes of a value waiting for a third to be written as base64.
    b64: Vec<u8>,
    state: State,
    /// Open messages, outermost first; the first is the `ExecuteResponse`.
    frames: Vec<Frame>,
    /// A `result` that ended with its JSON left open: a `result` right after it
    /// continues it (the streamed form), anything else closes it.
    parked: Option<Frame>,
    /// The Response's fields up to this number came before the result: their JSON is
    /// written, so they may not come again after it.
    before_result: u32,
    /// The result's JSON is closed: no `result` may come again.
    after_result: bool,
    /// The outermost `{` is written.
    opened: bool,
    /// An error was returned: every later call returns it again.
    failed: Option<ToJsonError>,
}

enum State {
    /// At a field header (or the end of the innermost message).
    Key,
    /// Collecting a small length-delimited field (header included) for prost.
    Small { bytes: Vec<u8>, end: u64 },
    /// Inside a row's packed `lengths`, up to `end`.
    Lengths { end: u64 },
    /// Inside a row's `values`, up to `end`.
    Values { end: u64 },
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Response,
    Result,
    Row,
}

struct Frame {
    kind: Kind,
    /// Where the message ends; `None` for the outermost (the body's end).
    end: Option<u64>,
    /// The last field number seen (canonical order check).
    last: u32,
    /// No JSON member written yet (no comma before the next).
    first: bool,
    /// The field whose JSON array is open (`rows`, `lengths`).
    array: Option<u32>,
    /// The open array has an element already (a comma goes before the next).
    filled: bool,
    /// Small fields collected since the last streamed one, written before it.
    pending: Pending,
}

enum Pending {
    Response(Box<ExecuteResponse>),
    Result(Box<QueryResult>),
    None,
}

/// Reads a token at the start of a slice: it and its length, or `None` if cut short.
type Parse<T> = fn(&[u8]) -> Result<Option<(T, usize)>, ToJsonError>;

struct Header {
    field: u32,
    wire: WireType,
    /// A varint's value, a fixed field's bits, or a length.
    value: u64,
}

fn invalid(message: impl Into<String>) -> ToJsonError {
    ToJsonError::Invalid(CodecError(format!("invalid protobuf: {}", message.into())))
}

fn decode_error(e: prost::DecodeError) -> ToJsonError {
    ToJsonError::Invalid(e.into())
}

/// Length of the varint at the start of `s`: `Ok(None)` when it may continue past `s`.
fn varint_len(s: &[u8]) -> Result<Option<usize>, ToJsonError> {
    match s.iter().take(10).position(|b| b & 0x80 == 0) {
        Some(p) => Ok(Some(p + 1)),
        None if s.len() >= 10 => Err(invalid("a varint is longer than 10 bytes")),
        None => Ok(None),
    }
}

/// The varint at the start of `s` and its length, if all of it is there.
fn varint(s: &[u8]) -> Result<Option<(u64, usize)>, ToJsonError> {
    let Some(n) = varint_len(s)? else {
        return Ok(None);
    };
    let mut bytes = s.get(..n).unwrap_or_default();
    let value = decode_varint(&mut bytes).map_err(decode_error)?;
    Ok(Some((value, n)))
}

/// The field header at the start of `s` (key and, unless a group, its value or
/// length) and its length, if all of it is there.
fn header(s: &[u8]) -> Result<Option<(Header, usize)>, ToJsonError> {
    let Some(k) = varint_len(s)? else {
        return Ok(None);
    };
    let mut key = s.get(..k).unwrap_or_default();
    let (field, wire) = decode_key(&mut key).map_err(decode_error)?;
    let rest = s.get(k..).unwrap_or_default();
    let fixed = |n: usize| {
        Ok(rest.get(..n).map(|bytes| {
            let mut le = [0u8; 8];
            for (slot, b) in le.iter_mut().zip(bytes) {
                *slot = *b;
            }
            (
                Header {
                    field,
                    wire,
                    value: u64::from_le_bytes(le),
                },
                k + n,
            )
        }))
    };
    match wire {
        WireType::Varint | WireType::LengthDelimited => {
            Ok(varint(rest)?.map(|(value, n)| (Header { field, wire, value }, k + n)))
        }
        WireType::SixtyFourBit => fixed(8),
        WireType::ThirtyTwoBit => fixed(4),
        WireType::StartGroup | WireType::EndGroup => Err(invalid(format!(
            "field {field} is a group, which is not read"
        ))),
    }
}

impl Frame {
    fn new(kind: Kind, end: Option<u64>) -> Self {
        let pending = match kind {
            Kind::Response => Pending::Response(Box::default()),
            Kind::Result => Pending::Result(Box::default()),
            Kind::Row => Pending::None,
        };
        Frame {
            kind,
            end,
            last: 0,
            first: true,
            array: None,
            filled: false,
            pending,
        }
    }
}

impl Transcoder {
    /// A transcoder whose JSON may be at most `max_len` bytes.
    pub fn new(max_len: usize) -> Self {
        Transcoder {
            budget: max_len,
            pos: 0,
            carry: Vec::new(),
            b64: Vec::with_capacity(3),
            state: State::Key,
            frames: vec![Frame::new(Kind::Response, None)],
            parked: None,
            before_result: 0,
            after_result: false,
            opened: false,
            failed: None,
        }
    }

    /// Transcodes the next chunk, appending what JSON is complete to `out`.
    pub fn feed(&mut self, chunk: &[u8], out: &mut Vec<u8>) -> Result<(), ToJsonError> {
        if let Some(e) = &self.failed {
            return Err(clone_error(e));
        }
        let result = self.run(chunk, out);
        if let Err(e) = &result {
            self.failed = Some(clone_error(e));
        }
        result
    }

    /// The body ended: completes the JSON (or says why it cannot be).
    pub fn finish(&mut self, out: &mut Vec<u8>) -> Result<(), ToJsonError> {
        if let Some(e) = &self.failed {
            return Err(clone_error(e));
        }
        let result = self.end(out);
        if let Err(e) = &result {
            self.failed = Some(clone_error(e));
        }
        result
    }

    fn end(&mut self, out: &mut Vec<u8>) -> Result<(), ToJsonError> {
        self.open(out)?;
        self.close_ended(out)?;
        let complete =
            matches!(self.state, State::Key) && self.carry.is_empty() && self.frames.len() == 1;
        if !complete {
            return Err(invalid("the message is truncated"));
        }
        if let Some(result) = self.parked.take() {
            self.close(result, out)?;
        }
        if let Some(frame) = self.frames.pop() {
            self.close(frame, out)?;
        }
        Ok(())
    }

    fn open(&mut self, out: &mut Vec<u8>) -> Result<(), ToJsonError> {
        if !std::mem::replace(&mut self.opened, true) {
            self.put(out, b"{")?;
        }
        Ok(())
    }

    fn run(&mut self, chunk: &[u8], out: &mut Vec<u8>) -> Result<(), ToJsonError> {
        self.open(out)?;
        let mut input = chunk;
        loop {
            self.close_ended(out)?;
            match &mut self.state {
                State::Key => {
                    let Some(h) = self.token(&mut input, header)? else {
                        return Ok(());
                    };
                    self.field(h, out)?;
                }
                State::Lengths { end } => {
                    let end = *end;
                    let Some(value) = self.token(&mut input, varint)? else {
                        return Ok(());
                    };
                    if self.pos > end {
                        return Err(invalid("a packed varint runs past its field"));
                    }
                    // sint64: zigzag.
                    let n = ((value >> 1) as i64) ^ -((value & 1) as i64);
                    self.element(out, n)?;
                    if self.pos == end {
                        self.state = State::Key;
                    }
                }
                State::Small { bytes, end } => {
                    let want = usize::try_from(*end - self.pos).unwrap_or(usize::MAX);
                    let (now, rest) = input.split_at(want.min(input.len()));
                    bytes.extend_from_slice(now);
                    input = rest;
                    self.pos += now.len() as u64;
                    if self.pos < *end {
                        return Ok(());
                    }
                    let bytes = std::mem::take(bytes);
                    self.state = State::Key;
                    self.merge(&bytes)?;
                }
                State::Values { end } => {
                    let end = *end;
                    let want = usize::try_from(end - self.pos).unwrap_or(usize::MAX);
                    let (now, rest) = input.split_at(want.min(input.len()));
                    input = rest;
                    self.pos += now.len() as u64;
                    self.base64(now, out)?;
                    if self.pos < end {
                        return Ok(());
                    }
                    self.base64_end(out)?;
                    self.state = State::Key;
                }
            }
        }
    }

    /// Reads one token (header or varint) from the carried bytes and `input`;
    /// `Ok(None)` when `input` ran out first (what there is is carried).
    fn token<T>(&mut self, input: &mut &[u8], parse: Parse<T>) -> Result<Option<T>, ToJsonError> {
        let room = match self.frames.last().and_then(|f| f.end) {
            Some(end) => usize::try_from(end.saturating_sub(self.pos)).unwrap_or(usize::MAX),
            None => usize::MAX,
        };
        if self.carry.is_empty() {
            let s = input.get(..room.min(input.len())).unwrap_or_default();
            if let Some((t, n)) = parse(s)? {
                *input = input.get(n..).unwrap_or_default();
                self.pos += n as u64;
                return Ok(Some(t));
            }
            if s.len() >= room {
                return Err(invalid("a field runs past the end of its message"));
            }
            self.carry.extend_from_slice(input);
            *input = &[];
            return Ok(None);
        }
        let old = self.carry.len();
        let extra = input.len().min(MAX_TOKEN).min(room.saturating_sub(old));
        self.carry
            .extend_from_slice(input.get(..extra).unwrap_or_default());
        if let Some((t, n)) = parse(&self.carry)? {
            let used = n.saturating_sub(old);
            *input = input.get(used..).unwrap_or_default();
            self.pos += n as u64;
            self.carry.clear();
            return Ok(Some(t));
        }
        if self.carry.len() >= room || extra < input.len() {
            return Err(invalid("a field runs past the end of its message"));
        }
        *input = &[];
        Ok(None)
    }

    /// Closes the messages that end here (a `result` is parked, its JSON open).
    /// Checked at every step, so the usual "nothing ends here" stays inline.
    #[inline(always)]
    fn close_ended(&mut self, out: &mut Vec<u8>) -> Result<(), ToJsonError> {
        if self.frames.last().is_some_and(|f| f.end == Some(self.pos)) {
            self.close_ending(out)
        } else {
            Ok(())
        }
    }

    #[inline(never)]
    fn close_ending(&mut self, out: &mut Vec<u8>) -> Result<(), ToJsonError> {
        while matches!(self.state, State::Key) && self.carry.is_empty() {
            let ends_here = self
                .frames
                .last()
                .is_some_and(|f| f.end == Some(self.pos) && self.frames.len() > 1);
            if !ends_here {
                break;
            }
            match self.frames.pop() {
                Some(frame) if frame.kind == Kind::Result => self.parked = Some(frame),
                Some(frame) => self.close(frame, out)?,
                None => {}
            }
        }
        Ok(())
    }

    /// At a Response field: a parked `result` is continued by another `result` (true)
    /// or closed by any other field, after which no `result` and no field already
    /// written may come.
    fn response_field(&mut self, h: &Header, out: &mut Vec<u8>) -> Result<bool, ToJsonError> {
        if let Some(mut result) = self.parked.take() {
            if h.field == 2 && h.wire == WireType::LengthDelimited {
                result.end = Some(self.pos.saturating_add(h.value));
                self.frames.push(result);
                return Ok(true);
            }
            self.close(result, out)?;
            self.after_result = true;
            if let Some(response) = self.frames.last_mut() {
                response.last = 0;
            }
        }
        if self.after_result && h.field == 2 && h.wire == WireType::LengthDelimited {
            return Err(invalid(
                "result (field 2) comes again after another field: only consecutive results are merged",
            ));
        }
        if self.after_result && h.field <= self.before_result {
            return Err(invalid(format!(
                "field {} comes both before and after the result: its JSON is written already",
                h.field
            )));
        }
        Ok(false)
    }

    /// Writes a message's last members and its closing brace.
    fn close(&mut self, mut frame: Frame, out: &mut Vec<u8>) -> Result<(), ToJsonError> {
        if frame.array.take().is_some() {
            self.put(out, b"]")?;
        }
        self.flush(&mut frame, out)?;
        self.put(out, b"}")
    }

    /// One field header in the innermost message.
    fn field(&mut self, h: Header, out: &mut Vec<u8>) -> Result<(), ToJsonError> {
        let end = self.pos.saturating_add(h.value);
        if self.frames.len() == 1 && self.response_field(&h, out)? {
            return Ok(());
        }
        let Some(frame) = self.frames.last_mut() else {
            return Err(invalid("data after the end of the message"));
        };
        let kind = frame.kind;
        let previous = frame.last;
        let streamed_once = matches!((kind, h.field), (Kind::Response, 2) | (Kind::Row, 2));
        if h.field < frame.last || (h.field == frame.last && streamed_once) {
            return Err(invalid(format!(
                "field {} comes after field {}: the transcoder needs prost's canonical field order",
                h.field, frame.last
            )));
        }
        frame.last = h.field;
        let array_ends = frame.array.is_some_and(|a| a != h.field);
        let limit = frame.end;
        if array_ends {
            frame.array = None;
            self.put(out, b"]")?;
        }
        let delimited = h.wire == WireType::LengthDelimited;
        if delimited && limit.is_some_and(|limit| end > limit) {
            return Err(invalid(format!(
                "field {} runs past the end of its message",
                h.field
            )));
        }
        match (kind, h.field, delimited) {
            (Kind::Response, 2, true) => {
                self.before_result = previous;
                self.flush_last(out)?;
                self.member(out, b"\"result\":{")?;
                self.frames.push(Frame::new(Kind::Result, Some(end)));
            }
            (Kind::Result, 4, true) => {
                if self.array() == Some(4) {
                    self.put(out, b",{")?;
                } else {
                    self.flush_last(out)?;
                    self.member(out, b"\"rows\":[{")?;
                    self.set_array(4);
                }
                self.frames.push(Frame::new(Kind::Row, Some(end)));
            }
            (Kind::Row, 1, true) => {
                if h.value > 0 {
                    self.open_lengths(out)?;
                    self.state = State::Lengths { end };
                }
            }
            (Kind::Row, 1, false) if h.wire == WireType::Varint => {
                self.open_lengths(out)?;
                let v = h.value;
                self.element(out, ((v >> 1) as i64) ^ -((v & 1) as i64))?;
            }
            (Kind::Row, 2, true) => {
                if h.value > 0 {
                    self.member(out, b"\"values\":\"")?;
                    self.state = State::Values { end };
                }
            }
            (Kind::Row, field, _) => {
                return Err(invalid(format!(
                    "a row has field {field} with wire type {:?}; rows are read with packed lengths (1) and values (2) only",
                    h.wire
                )))
            }
            (Kind::Response, 2, false) | (Kind::Result, 4, false) => {
                return Err(invalid(format!(
                    "field {} has wire type {:?}, not length-delimited",
                    h.field, h.wire
                )))
            }
            (_, field, _) => {
                // A small field: re-encoded as it was and merged by prost.
                let mut bytes = Vec::with_capacity(MAX_TOKEN);
                encode_key(field, h.wire, &mut bytes);
                match h.wire {
                    WireType::Varint | WireType::LengthDelimited => {
                        encode_varint(h.value, &mut bytes)
                    }
                    WireType::SixtyFourBit => bytes.extend_from_slice(&h.value.to_le_bytes()),
                    WireType::ThirtyTwoBit => bytes.extend_from_slice(
                        h.value.to_le_bytes().get(..4).unwrap_or_default(),
                    ),
                    WireType::StartGroup | WireType::EndGroup => {
                        return Err(invalid("groups are not read"))
                    }
                }
                if delimited && h.value > 0 {
                    self.state = State::Small { bytes, end };
                } else {
                    self.merge(&bytes)?;
                }
            }
        }
        Ok(())
    }

    fn array(&self) -> Option<u32> {
        self.frames.last().and_then(|f| f.array)
    }

    fn set_array(&mut self, field: u32) {
        if let Some(frame) = self.frames.last_mut() {
            frame.array = Some(field);
            frame.filled = false;
        }
    }

    fn open_lengths(&mut self, out: &mut Vec<u8>) -> Result<(), ToJsonError> {
        if self.array() != Some(1) {
            self.member(out, b"\"lengths\":[")?;
            self.set_array(1);
        }
        Ok(())
    }

    /// One `lengths` element: protojson writes 64-bit integers as strings.
    fn element(&mut self, out: &mut Vec<u8>, n: i64) -> Result<(), ToJsonError> {
        let filled = self
            .frames
            .last_mut()
            .is_some_and(|f| std::mem::replace(&mut f.filled, true));
        let mut digits = itoa::Buffer::new();
        let digits = digits.format(n).as_bytes();
        self.charge(digits.len() + 2 + usize::from(filled))?;
        if filled {
            out.push(b',');
        }
        out.push(b'"');
        out.extend_from_slice(digits);
        out.push(b'"');
        Ok(())
    }

    /// A member's key (with the comma before it when needed).
    fn member(&mut self, out: &mut Vec<u8>, key: &[u8]) -> Result<(), ToJsonError> {
        let first = self
            .frames
            .last_mut()
            .is_none_or(|f| std::mem::replace(&mut f.first, false));
        if !first {
            self.put(out, b",")?;
        }
        self.put(out, key)
    }

    /// Merges a small field into the innermost message's pending part.
    fn merge(&mut self, bytes: &[u8]) -> Result<(), ToJsonError> {
        let result = match self.frames.last_mut().map(|f| &mut f.pending) {
            Some(Pending::Response(m)) => m.merge(bytes),
            Some(Pending::Result(m)) => m.merge(bytes),
            Some(Pending::None) | None => Ok(()),
        };
        result.map_err(decode_error)
    }

    /// Writes the innermost message's pending small fields.
    fn flush_last(&mut self, out: &mut Vec<u8>) -> Result<(), ToJsonError> {
        let Some(mut frame) = self.frames.pop() else {
            return Ok(());
        };
        let result = self.flush(&mut frame, out);
        self.frames.push(frame);
        result
    }

    /// Writes a message's pending small fields as members (pbjson omits defaults, so
    /// nothing is written when there are none) and starts a fresh pending part.
    fn flush(&mut self, frame: &mut Frame, out: &mut Vec<u8>) -> Result<(), ToJsonError> {
        let json = match &mut frame.pending {
            Pending::Response(m) => members(&std::mem::take(m))?,
            Pending::Result(m) => members(&std::mem::take(m))?,
            Pending::None => return Ok(()),
        };
        if json.is_empty() {
            return Ok(());
        }
        if !frame.first {
            self.put(out, b",")?;
        }
        frame.first = false;
        self.put(out, &json)
    }

    /// Writes a value's bytes as base64, carrying up to 2 to the next call.
    fn base64(&mut self, mut bytes: &[u8], out: &mut Vec<u8>) -> Result<(), ToJsonError> {
        if !self.b64.is_empty() {
            let need = 3usize.saturating_sub(self.b64.len()).min(bytes.len());
            let (head, rest) = bytes.split_at(need);
            self.b64.extend_from_slice(head);
            bytes = rest;
            if self.b64.len() < 3 {
                return Ok(());
            }
            let three = std::mem::take(&mut self.b64);
            self.encode(&three, out)?;
        }
        let whole = bytes.len() - bytes.len() % 3;
        let (body, tail) = bytes.split_at(whole);
        for slice in body.chunks(BASE64_SLICE) {
            self.encode(slice, out)?;
        }
        self.b64.extend_from_slice(tail);
        Ok(())
    }

    /// The value ended: its last bytes (padded) and the closing quote.
    fn base64_end(&mut self, out: &mut Vec<u8>) -> Result<(), ToJsonError> {
        let tail = std::mem::take(&mut self.b64);
        self.encode(&tail, out)?;
        self.put(out, b"\"")
    }

    fn encode(&mut self, bytes: &[u8], out: &mut Vec<u8>) -> Result<(), ToJsonError> {
        if bytes.is_empty() {
            return Ok(());
        }
        let engine = base64_simd::STANDARD;
        let n = engine.encoded_length(bytes.len());
        self.charge(n)?;
        // Written straight into spare capacity (no zero fill first); reserved here,
        // amortized, since the engine reserves exactly and would regrow per call.
        out.reserve(n);
        let start = out.len();
        engine.encode_append(bytes, out);
        if out.len() - start == n {
            Ok(())
        } else {
            Err(ToJsonError::Invalid(CodecError(
                "base64 length mismatch".into(),
            )))
        }
    }

    fn charge(&mut self, n: usize) -> Result<(), ToJsonError> {
        self.budget = self.budget.checked_sub(n).ok_or(ToJsonError::TooLarge)?;
        Ok(())
    }

    fn put(&mut self, out: &mut Vec<u8>, bytes: &[u8]) -> Result<(), ToJsonError> {
        self.charge(bytes.len())?;
        out.extend_from_slice(bytes);
        Ok(())
    }
}

/// A message's JSON members, without the braces (empty when it has none).
fn members<M: Serialize>(message: &M) -> Result<Vec<u8>, ToJsonError> {
    let json = serde_json::to_vec(message)
        .map_err(|e| ToJsonError::Invalid(CodecError(format!("cannot encode JSON: {e}"))))?;
    Ok(json
        .get(1..json.len().saturating_sub(1))
        .unwrap_or_default()
        .to_vec())
}

fn clone_error(e: &ToJsonError) -> ToJsonError {
    match e {
        ToJsonError::TooLarge => ToJsonError::TooLarge,
        ToJsonError::Invalid(CodecError(m)) => ToJsonError::Invalid(CodecError(m.clone())),
    }
}

#[cfg(test)]
#[path = "json_stream_tests.rs"]
mod tests;
