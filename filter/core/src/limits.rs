//! Size limits on what the filter buffers, checked as bytes arrive (so an oversized
//! message is refused before it is all in memory) and against a declared
//! `content-length` (so it is often refused before any byte arrives).

use crate::errors::{Code, Rejection};

/// Default limit on a request body: 8 MiB.
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 8 << 20;
/// Default limit on a response body: 64 MiB.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 64 << 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest request body accepted from a client, framing included.
    pub max_request_bytes: usize,
    /// Largest response body accepted from the shim, before conversion.
    pub max_response_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_request_bytes: DEFAULT_MAX_REQUEST_BYTES,
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
        }
    }
}

impl Limits {
    /// Refuses a request body of `size` bytes (received so far, or declared).
    pub fn check_request(&self, size: usize) -> Result<(), Rejection> {
        check(size, self.max_request_bytes, "request")
    }

    /// Refuses a response body of `size` bytes (received so far, or declared).
    pub fn check_response(&self, size: usize) -> Result<(), Rejection> {
        check(size, self.max_response_bytes, "response")
    }
}

fn check(size: usize, limit: usize, what: &str) -> Result<(), Rejection> {
    if size > limit {
        Err(Rejection::new(
            Code::ResourceExhausted,
            format!("{what} body is larger than the {limit}-byte limit"),
        ))
    } else {
        Ok(())
    }
}

/// The value of a `content-length` header; `None` if absent or not a number (Envoy
/// rejects malformed ones before the filter runs).
pub fn content_length(header: Option<&str>) -> Option<usize> {
    header.and_then(|v| v.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_inclusive() {
        let limits = Limits {
            max_request_bytes: 10,
            max_response_bytes: 20,
        };
        assert!(limits.check_request(10).is_ok());
        let err = limits.check_request(11).unwrap_err();
        assert_eq!(err.code, Code::ResourceExhausted);
        assert_eq!(err.message, "request body is larger than the 10-byte limit");
        assert!(limits.check_response(20).is_ok());
        assert!(limits.check_response(21).is_err());
    }

    #[test]
    fn content_length_parsing() {
        assert_eq!(content_length(Some("42")), Some(42));
        assert_eq!(content_length(Some(" 7 ")), Some(7));
        assert_eq!(content_length(Some("x")), None);
        assert_eq!(content_length(None), None);
    }
}
