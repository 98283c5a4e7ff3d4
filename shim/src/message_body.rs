//! The body of every shim answer: its pieces (one, or an Execute answer's three:
//! answer.rs), each sent as it is, in DATA frames even when empty.
//!
//! An empty protobuf message (e.g. `CloseSessionResponse{}`) encodes to zero bytes.
//! With a plain `Full` body hyper would send it as headers-only (END_STREAM on
//! HEADERS), and a gRPC client needs the message framed in a body, which the filter
//! can only write from a body callback. So the end of stream always comes with data.
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
        Poll::Ready(self.0.pop_front().map(|b| Ok(Frame::data(b))))
    }

    /// Never known to be over before it is polled, so the headers never end the stream.
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
