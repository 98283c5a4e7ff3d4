//! The body of every shim answer: its pieces (one, or an Execute answer's three:
//! rows/answer.rs), each sent as it is, in DATA frames even when empty.
//!
//! An empty protobuf message (e.g. `CloseSessionResponse{}`) encodes to zero bytes.
//! With a plain `Full` body hyper would send it as headers-only (END_STREAM on
//! HEADERS), and a gRPC client needs the message framed in a body, which the filter
//! can only write from a body callback. So the stream always ends with a DATA frame
//! of its own: hyper sends an empty one with END_STREAM once the pieces are out.
//!
//! Empty pieces are not sent. Envoy counts empty DATA frames without END_STREAM on an
//! upstream connection (`max_consecutive_inbound_frames_with_empty_payload`, 1 by
//! default) and closes it as a flood past one in a row: two empty answers on one
//! connection, each an empty frame before its END_STREAM, reset each other's streams.
//! The END_STREAM frame stays apart from the last piece: the filter adds a gRPC
//! answer's trailers from the body's last callback, and Envoy 1.40 loses trailers added
//! there when a later filter stops on that chunk, as its grpc_web filter does when it
//! answers `grpc-web-text` (filter/core/src/exchange/stream.rs). With its own empty
//! last chunk, the filter holds the end and adds them from a paused callback. Checked
//! 2026-11-24 with this body ending on its last piece: a shim error converted for a
//! `grpc-web-text` client (grpc_web.rs) came out unencoded and the stream hung until
//! the idle timeout.
use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

pub struct MessageBody(VecDeque<Bytes>);

impl MessageBody {
    pub fn new(bytes: impl Into<Bytes>) -> Self {
        MessageBody(VecDeque::from([bytes.into()]))
    }

    /// A body of several pieces, sent one after the other (no copy into one).
    pub fn pieces(pieces: Vec<Bytes>) -> Self {
        MessageBody(pieces.into())
    }
}

impl Body for MessageBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        // Empty pieces carry nothing (see above).
        while self.0.front().is_some_and(Bytes::is_empty) {
            self.0.pop_front();
        }
        Poll::Ready(self.0.pop_front().map(|b| Ok(Frame::data(b))))
    }

    /// Never known to be over before its end is polled: the headers never end the
    /// stream, and neither does the last piece (END_STREAM comes in its own frame).
    fn is_end_stream(&self) -> bool {
        false
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.0.iter().map(|b| b.len() as u64).sum())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    #[tokio::test]
    async fn an_empty_message_is_still_a_body() {
        let body = MessageBody::new(Bytes::new());
        assert!(!body.is_end_stream());
        assert_eq!(body.size_hint().exact(), Some(0));
        let bytes = body.collect().await.map(|c| c.to_bytes());
        assert_eq!(bytes.ok(), Some(Bytes::new()));
    }

    #[tokio::test]
    async fn no_frame_is_empty() {
        let mut body = MessageBody::pieces(vec![
            Bytes::new(),
            Bytes::from_static(b"ab"),
            Bytes::new(),
            Bytes::new(),
            Bytes::from_static(b"c"),
            Bytes::new(),
        ]);
        let mut frames = Vec::new();
        while let Some(frame) = body.frame().await {
            frames.push(frame.ok().and_then(|f| f.into_data().ok()));
        }
        assert_eq!(
            frames,
            vec![
                Some(Bytes::from_static(b"ab")),
                Some(Bytes::from_static(b"c"))
            ]
        );
        // The empty message: no frame at all, so hyper ends the stream with an empty
        // DATA frame carrying END_STREAM (the filter's body callback), after headers
        // that did not end it.
        let mut empty = MessageBody::new(Bytes::new());
        assert!(!empty.is_end_stream());
        assert!(empty.frame().await.is_none());
    }

    #[tokio::test]
    async fn pieces_go_out_in_order() {
        let body = MessageBody::pieces(vec![
            Bytes::from_static(b"ab"),
            Bytes::new(),
            Bytes::from_static(b"cde"),
        ]);
        assert_eq!(body.size_hint().exact(), Some(5));
        let bytes = body.collect().await.map(|c| c.to_bytes());
        assert_eq!(bytes.ok(), Some(Bytes::from_static(b"abcde")));
    }
}
