//! The body of a streamed answer: bytes as a task sends them.
use bytes::Bytes;
use http_body::{Body, Frame};
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::sync::mpsc;

/// The response body: envelopes (or a large Execute answer's pieces, rows/spill.rs)
/// as the statement's task sends them; ends when the task is done. Dropped by
/// hyper when the client goes away, which closes the channel (and `_alive`, the
/// statement's watch).
pub struct StreamBody {
    rx: mpsc::Receiver<Bytes>,
    _alive: Option<mpsc::Receiver<Bytes>>,
}

impl StreamBody {
    /// `rx`'s pieces, holding `alive` open for as long as the body lives.
    pub fn holding(rx: mpsc::Receiver<Bytes>, alive: mpsc::Receiver<Bytes>) -> Self {
        StreamBody {
            rx,
            _alive: Some(alive),
        }
    }
}

impl Body for StreamBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.rx.poll_recv(cx).map(|b| b.map(|b| Ok(Frame::data(b))))
    }
}

impl StreamBody {
    /// The body of `rx`'s bytes.
    pub fn new(rx: mpsc::Receiver<Bytes>) -> Self {
        StreamBody { rx, _alive: None }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connect::envelope;
    use http_body_util::BodyExt;

    #[tokio::test]
    async fn the_body_yields_what_the_task_sends_then_ends() {
        let (tx, rx) = mpsc::channel(2);
        let body = StreamBody::new(rx);
        tokio::spawn(async move {
            tx.send(Bytes::from_static(b"a")).await.unwrap();
            tx.send(envelope::end_stream(None)).await.unwrap();
        });
        let all = body.collect().await.unwrap().to_bytes();
        assert_eq!(&all[..], b"a\x02\x00\x00\x00\x02{}");
    }

    #[tokio::test]
    async fn dropping_the_body_closes_the_channel() {
        let (tx, rx) = mpsc::channel::<Bytes>(1);
        drop(StreamBody::new(rx));
        tokio::time::timeout(std::time::Duration::from_secs(1), tx.closed())
            .await
            .expect("closed");
    }
}
