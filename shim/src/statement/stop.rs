//! What may stop a statement before it finishes: its deadline, or its client
//! going away.
use crate::connect::deadline::Deadline;
use crate::connect::error::ConnectError;
use bytes::Bytes;
use ferry_proto::vitess::vtrpc::Code;
use tokio::sync::mpsc;

/// What may stop a statement before it finishes.
pub struct Stop {
    pub deadline: Deadline,
    /// A stream's channel: closed when the client went away.
    pub watch: Option<mpsc::Sender<Bytes>>,
}

impl Stop {
    /// A unary answer's: its deadline, and `watch`, closed when its client goes
    /// away (the request's future was dropped; see server.rs).
    pub fn unary(deadline: Deadline, watch: Option<mpsc::Sender<Bytes>>) -> Stop {
        Stop { deadline, watch }
    }

    pub async fn client_gone(&self) {
        match &self.watch {
            Some(tx) => tx.closed().await,
            None => std::future::pending().await,
        }
    }
}

/// Why a statement was stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Interrupt {
    Deadline,
    ClientGone,
}

impl Interrupt {
    pub fn reason(self) -> &'static str {
        match self {
            Interrupt::Deadline => "a statement was stopped: its deadline passed",
            Interrupt::ClientGone => "a statement was stopped: its client went away",
        }
    }

    /// The answer; `killed`: MySQL stopped the statement (mysql/cancel.rs).
    pub fn error(self, stop: &Stop, killed: bool) -> ConnectError {
        match self {
            Interrupt::Deadline if killed => stop.deadline.error(),
            Interrupt::Deadline => stop.deadline.error_not_stopped(),
            Interrupt::ClientGone => ConnectError::new(Code::Canceled, "the client went away"),
        }
    }
}
