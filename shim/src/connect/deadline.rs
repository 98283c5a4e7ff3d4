//! Deadlines: Connect's `connect-timeout-ms` request header (the filter turns
//! gRPC's `grpc-timeout` into it). It counts from the request's arrival and
//! covers everything: waiting for a connection or a session's pin, and the
//! statement. A statement still running when it passes is stopped in MySQL
//! (mysql/cancel.rs) and the answer is `deadline_exceeded`.
use crate::connect::error::ConnectError;
use ferry_proto::vitess::vtrpc::Code;
use std::future::Future;
use std::time::Duration;
use tokio::time::Instant;

pub const HEADER: &str = "connect-timeout-ms";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Deadline {
    at: Option<(Instant, u64)>,
    /// What set it, for the message: the header, or a query timeout
    /// (sessions/query_timeout.rs).
    by: &'static str,
}

impl Deadline {
    pub const NONE: Deadline = Deadline {
        at: None,
        by: HEADER,
    };

    /// From the header's value, if sent; a malformed one is refused, as
    /// Connect servers do, rather than ignored.
    pub fn from_header(value: Option<&[u8]>, arrived: Instant) -> Result<Deadline, ConnectError> {
        let Some(value) = value else {
            return Ok(Deadline::NONE);
        };
        let ms =
            parse_timeout_ms(value).map_err(|e| ConnectError::new(Code::InvalidArgument, e))?;
        Ok(Deadline {
            at: Some((arrived + Duration::from_millis(ms), ms)),
            by: HEADER,
        })
    }

    /// This deadline, or `ms` from now if that comes first (a statement's query
    /// timeout; `by` names it in the message).
    pub fn tightened(self, ms: u64, by: &'static str) -> Deadline {
        let at = Instant::now() + Duration::from_millis(ms);
        match self.at {
            Some((earlier, _)) if earlier <= at => self,
            _ => Deadline {
                at: Some((at, ms)),
                by,
            },
        }
    }

    /// The deadline of a statement: this one, tightened by the session's query timeout
    /// (`SET query_timeout`, 0: none) and the statement's `QUERY_TIMEOUT_MS` directive,
    /// which wins over the session's (sessions/query_timeout.rs).
    pub fn for_statement(self, sql: &str, session_ms: i64) -> Deadline {
        match crate::sessions::query_timeout::directive_ms(sql) {
            Some(ms) => self.tightened(ms, "QUERY_TIMEOUT_MS"),
            None if session_ms > 0 => self.tightened(session_ms as u64, "query_timeout"),
            None => self,
        }
    }

    /// Resolves when the deadline passes; never without one.
    pub async fn expired(&self) {
        match self.at {
            Some((at, _)) => tokio::time::sleep_until(at).await,
            None => std::future::pending().await,
        }
    }

    /// Runs `f` unless the deadline passes first. Only for work that may be
    /// dropped halfway (waiting for a connection, not a running statement).
    pub async fn within<F: Future>(&self, f: F) -> Result<F::Output, ConnectError> {
        tokio::select! {
            out = f => Ok(out),
            () = self.expired() => Err(self.error_before_running()),
        }
    }

    pub fn error(&self) -> ConnectError {
        let ms = self.at.map_or(0, |(_, ms)| ms);
        ConnectError::new(
            Code::DeadlineExceeded,
            format!(
                "the statement did not finish within its deadline ({ms} ms, {}); it was stopped",
                self.by
            ),
        )
    }

    /// The deadline passed while waiting (for a connection, a login, a session's pin):
    /// nothing ran.
    pub fn error_before_running(&self) -> ConnectError {
        let ms = self.at.map_or(0, |(_, ms)| ms);
        ConnectError::new(
            Code::DeadlineExceeded,
            format!("the deadline ({ms} ms, {}) passed before the statement could start (waiting for a connection to MySQL or for the session's); it did not run", self.by),
        )
    }

    /// [`Deadline::error`] when MySQL did not stop the statement (its KILL failed).
    pub fn error_not_stopped(&self) -> ConnectError {
        let ms = self.at.map_or(0, |(_, ms)| ms);
        ConnectError::new(
            Code::DeadlineExceeded,
            format!("the statement did not finish within its deadline ({ms} ms, {}); it could not be stopped and may still be running in the database", self.by),
        )
    }
}

/// Connect: "1 to 10 ASCII digits", milliseconds. 0 is a deadline that has
/// already passed.
pub fn parse_timeout_ms(value: &[u8]) -> Result<u64, String> {
    if value.is_empty() || value.len() > 10 || !value.iter().all(u8::is_ascii_digit) {
        return Err(format!(
            "{HEADER} must be 1 to 10 digits (milliseconds), got {:?}",
            String::from_utf8_lossy(value)
        ));
    }
    value
        .iter()
        .try_fold(0u64, |n, d| {
            n.checked_mul(10)?.checked_add(u64::from(d - b'0'))
        })
        .ok_or_else(|| format!("{HEADER} is out of range"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_is_one_to_ten_digits() {
        assert_eq!(parse_timeout_ms(b"500"), Ok(500));
        assert_eq!(parse_timeout_ms(b"0"), Ok(0));
        assert_eq!(parse_timeout_ms(b"9999999999"), Ok(9_999_999_999));
        for bad in [&b""[..], b"12345678901", b"-1", b"1.5", b" 5", b"5s"] {
            assert!(parse_timeout_ms(bad).is_err(), "{bad:?}");
        }
        let e = Deadline::from_header(Some(b"x"), Instant::now()).unwrap_err();
        assert_eq!(e.status(), 400);
        assert_eq!(
            Deadline::from_header(None, Instant::now()),
            Ok(Deadline::NONE)
        );
    }

    #[tokio::test]
    async fn a_deadline_stops_waiting_and_says_so() {
        let d = Deadline::from_header(Some(b"50"), Instant::now()).unwrap();
        let waited = d
            .within(tokio::time::sleep(Duration::from_secs(5)))
            .await
            .unwrap_err();
        assert_eq!((waited.status(), waited.name()), (504, "deadline_exceeded"));
        assert!(waited.message.contains("50 ms"), "{}", waited.message);
        // Waiting: nothing ran, and the answer says so (not that something was stopped).
        assert!(waited.message.contains("did not run"), "{}", waited.message);
        // When the database did not stop it, the answer does not say it did.
        let left = d.error_not_stopped();
        assert_eq!(left.status(), 504);
        assert!(
            left.message.contains("could not be stopped")
                && !left.message.contains("it was stopped"),
            "{}",
            left.message
        );
        assert_eq!(Deadline::NONE.within(async { 7 }).await, Ok(7));
    }
}
