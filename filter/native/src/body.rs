//! proxy-wasm's body semantics (what the adapter is written for) over Envoy's native
//! ones (what a dynamic module gets).
//!
//! proxy-wasm: a body callback sees one buffer: after a paused body callback, all
//! Envoy buffered for the filter plus the new chunk; otherwise the new chunk. Edits
//! are a prepend (`0, 0`), a whole replacement (`0, size >= len`) or an append
//! (`start >= len`).
//!
//! Dynamic modules: a body callback sees the *received* chunk and the stream's
//! *buffered* body separately. Envoy moves the received chunk into the buffered body
//! when the callback returns `StopIterationAndBuffer`, and sends the buffered body on
//! (with the last chunk) when a later callback continues. The buffered body is the
//! stream's, shared by its filters: when a filter before this one buffered and then
//! continued, the received chunk *is* the buffered body (`received_buffered_*_body`).
//! In a trailers callback there is no received chunk (only the buffered body).
//!
//! So the view here is: the buffered body when this filter's last body callback
//! paused (and it is not the received chunk itself), then the received chunk. Edits
//! drain both parts and append to the received chunk (or to the buffered body where
//! there is no received chunk); the ABI has no prepend, so a prepend is a rewrite.

/// A part of the body as Envoy keeps it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    Received,
    Buffered,
}

/// Envoy's body calls for one direction of one stream (the `NativeHost`; a fake in
/// tests).
pub trait Parts {
    /// The part's bytes (copied), `None` if the part does not exist now.
    fn read(&mut self, part: Part) -> Option<Vec<u8>>;
    /// Drains `n` bytes from the start of the part; false if it does not exist.
    fn drain(&mut self, part: Part, n: usize) -> bool;
    /// Appends to the part; false if it does not exist.
    fn append(&mut self, part: Part, bytes: &[u8]) -> bool;
    /// The received chunk is the stream's buffered body itself.
    fn received_is_buffered(&mut self) -> bool;
    /// The part's length (0 if it does not exist), without copying it.
    fn len(&mut self, part: Part) -> usize {
        self.read(part).map_or(0, |b| b.len())
    }
}

/// The body one callback sees: which parts make it up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct View {
    /// This filter's last body callback paused: Envoy buffered for it.
    pub paused: bool,
}

/// A refused edit (not one Envoy's proxy-wasm host accepts either).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Refused;

impl View {
    fn buffered_counts<P: Parts>(self, parts: &mut P) -> bool {
        self.paused && !parts.received_is_buffered()
    }

    /// The body's length (what proxy-wasm passes to a body callback).
    pub fn len<P: Parts>(self, parts: &mut P) -> usize {
        let buffered = if self.buffered_counts(parts) {
            parts.len(Part::Buffered)
        } else {
            0
        };
        buffered.saturating_add(parts.len(Part::Received))
    }

    /// The whole body as proxy-wasm would show it.
    pub fn read<P: Parts>(self, parts: &mut P) -> Vec<u8> {
        let mut body = if self.buffered_counts(parts) {
            parts.read(Part::Buffered).unwrap_or_default()
        } else {
            Vec::new()
        };
        if let Some(received) = parts.read(Part::Received) {
            body.extend_from_slice(&received);
        }
        body
    }

    /// Up to `max` bytes from `start` (proxy-wasm's `get_buffer_bytes`); `None` when
    /// there are none.
    pub fn slice<P: Parts>(self, parts: &mut P, start: usize, max: usize) -> Option<Vec<u8>> {
        let body = self.read(parts);
        let end = start.saturating_add(max).min(body.len());
        let bytes = body.get(start..end)?;
        (!bytes.is_empty()).then(|| bytes.to_vec())
    }

    /// Replaces `size` bytes from `start` with `bytes` (proxy-wasm's
    /// `set_buffer_bytes`, with the edits it accepts).
    pub fn edit<P: Parts>(
        self,
        parts: &mut P,
        start: usize,
        size: usize,
        bytes: &[u8],
    ) -> Result<(), Refused> {
        let body = self.read(parts);
        let len = body.len();
        if start == 0 && size == 0 {
            // Prepend: the ABI appends only, so the body is rewritten.
            if bytes.is_empty() {
                return Ok(());
            }
            let mut new = Vec::with_capacity(bytes.len().saturating_add(len));
            new.extend_from_slice(bytes);
            new.extend_from_slice(&body);
            self.clear(parts, len);
            self.append(parts, &new)
        } else if start == 0 && size >= len {
            self.clear(parts, len);
            self.append(parts, bytes)
        } else if start >= len {
            self.append(parts, bytes)
        } else {
            Err(Refused)
        }
    }

    fn clear<P: Parts>(self, parts: &mut P, len: usize) {
        if len == 0 {
            return;
        }
        if self.buffered_counts(parts) {
            parts.drain(Part::Buffered, usize::MAX);
        }
        parts.drain(Part::Received, usize::MAX);
    }

    fn append<P: Parts>(self, parts: &mut P, bytes: &[u8]) -> Result<(), Refused> {
        if bytes.is_empty() || parts.append(Part::Received, bytes) {
            return Ok(());
        }
        if parts.append(Part::Buffered, bytes) {
            Ok(())
        } else {
            Err(Refused)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Envoy's two parts, as the ABI shows them.
    #[derive(Default)]
    struct Fake {
        received: Option<Vec<u8>>,
        buffered: Option<Vec<u8>>,
        same: bool,
    }

    impl Fake {
        fn part(&mut self, part: Part) -> &mut Option<Vec<u8>> {
            match (part, self.same) {
                (Part::Received, false) => &mut self.received,
                // One buffer seen through both names.
                (_, true) | (Part::Buffered, false) => &mut self.buffered,
            }
        }
    }

    impl Parts for Fake {
        fn read(&mut self, part: Part) -> Option<Vec<u8>> {
            self.part(part).clone()
        }
        fn drain(&mut self, part: Part, n: usize) -> bool {
            match self.part(part) {
                Some(b) => {
                    b.drain(..n.min(b.len()));
                    true
                }
                None => false,
            }
        }
        fn append(&mut self, part: Part, bytes: &[u8]) -> bool {
            match self.part(part) {
                Some(b) => {
                    b.extend_from_slice(bytes);
                    true
                }
                None => false,
            }
        }
        fn received_is_buffered(&mut self) -> bool {
            self.same
        }
    }

    fn fake(received: Option<&[u8]>, buffered: Option<&[u8]>) -> Fake {
        Fake {
            received: received.map(<[u8]>::to_vec),
            buffered: buffered.map(<[u8]>::to_vec),
            same: false,
        }
    }

    const PAUSED: View = View { paused: true };
    const STREAMING: View = View { paused: false };

    #[test]
    fn after_a_pause_the_view_is_the_buffered_body_then_the_chunk() {
        let mut env = fake(Some(b"world"), Some(b"hello "));
        assert_eq!(PAUSED.read(&mut env), b"hello world");
        assert_eq!(PAUSED.len(&mut env), 11);
        assert_eq!(STREAMING.len(&mut env), 5);
        assert_eq!(PAUSED.slice(&mut env, 6, 3), Some(b"wor".to_vec()));
        assert_eq!(PAUSED.slice(&mut env, 11, 3), None, "past the end");
        // Without a pause of its own the stream's buffered bytes are not this body's.
        assert_eq!(STREAMING.read(&mut env), b"world");
    }

    #[test]
    fn a_chunk_that_is_the_buffered_body_is_counted_once() {
        let mut env = Fake {
            buffered: Some(b"abc".to_vec()),
            same: true,
            ..Fake::default()
        };
        assert_eq!(PAUSED.read(&mut env), b"abc");
        assert_eq!(PAUSED.len(&mut env), 3);
        PAUSED.edit(&mut env, 0, 3, b"xy").unwrap();
        assert_eq!(env.buffered.as_deref(), Some(&b"xy"[..]));
    }

    #[test]
    fn a_whole_replacement_empties_both_parts_and_writes_once() {
        let mut env = fake(Some(b"world"), Some(b"hello "));
        PAUSED.edit(&mut env, 0, 11, b"new").unwrap();
        assert_eq!(env.buffered.as_deref(), Some(&b""[..]));
        assert_eq!(env.received.as_deref(), Some(&b"new"[..]));
        assert_eq!(PAUSED.read(&mut env), b"new");
        // usize::MAX (WHOLE_BODY) covers it too; an empty replacement empties it.
        PAUSED.edit(&mut env, 0, usize::MAX, b"").unwrap();
        assert_eq!(PAUSED.read(&mut env), b"");
    }

    #[test]
    fn a_prepend_rewrites_the_body() {
        let mut env = fake(Some(b"body"), None);
        STREAMING.edit(&mut env, 0, 0, b"\0\0\0\0\x04").unwrap();
        assert_eq!(STREAMING.read(&mut env), b"\0\0\0\0\x04body");
        let mut env = fake(Some(b"dy"), Some(b"bo"));
        PAUSED.edit(&mut env, 0, 0, b">").unwrap();
        assert_eq!(PAUSED.read(&mut env), b">body");
    }

    #[test]
    fn appends_go_after_everything() {
        let mut env = fake(Some(b"dy"), Some(b"bo"));
        PAUSED.edit(&mut env, usize::MAX, 0, b"!").unwrap();
        assert_eq!(PAUSED.read(&mut env), b"body!");
        // In a trailers callback there is no received chunk: the buffered body grows.
        let mut env = fake(None, Some(b"body"));
        PAUSED.edit(&mut env, 4, 0, b"!").unwrap();
        assert_eq!(env.buffered.as_deref(), Some(&b"body!"[..]));
    }

    #[test]
    fn edits_proxy_wasm_refuses_are_refused() {
        let mut env = fake(Some(b"body"), None);
        assert_eq!(STREAMING.edit(&mut env, 1, 2, b"x"), Err(Refused));
        assert_eq!(STREAMING.edit(&mut env, 0, 2, b"x"), Err(Refused));
        assert_eq!(STREAMING.read(&mut env), b"body", "untouched");
        // Nowhere to write.
        let mut env = fake(None, None);
        assert_eq!(STREAMING.edit(&mut env, 0, 0, b"x"), Err(Refused));
        assert_eq!(STREAMING.edit(&mut env, 0, 0, b""), Ok(()));
    }
}
