//! Connect-protocol errors: `{"code": "...", "message": "..."}` with the HTTP
//! status the Connect spec gives each code.
use ferry_proto::vitess::vtrpc::Code;

/// (code, Connect name, HTTP status). vtrpc codes 0..=16 are the gRPC codes;
/// CLUSTER_EVENT and READ_ONLY have no Connect name and are never sent as
/// Connect errors (they would fall back to `unknown`).
const TABLE: &[(Code, &str, u16)] = &[
    (Code::Canceled, "canceled", 499),
    (Code::Unknown, "unknown", 500),
    (Code::InvalidArgument, "invalid_argument", 400),
    (Code::DeadlineExceeded, "deadline_exceeded", 504),
    (Code::NotFound, "not_found", 404),
    (Code::AlreadyExists, "already_exists", 409),
    (Code::PermissionDenied, "permission_denied", 403),
    (Code::ResourceExhausted, "resource_exhausted", 429),
    (Code::FailedPrecondition, "failed_precondition", 400),
    (Code::Aborted, "aborted", 409),
    (Code::OutOfRange, "out_of_range", 400),
    (Code::Unimplemented, "unimplemented", 501),
    (Code::Internal, "internal", 500),
    (Code::Unavailable, "unavailable", 503),
    (Code::DataLoss, "data_loss", 500),
    (Code::Unauthenticated, "unauthenticated", 401),
];

#[derive(Debug, Clone, PartialEq)]
pub struct ConnectError {
    pub code: Code,
    pub message: String,
    /// Overrides the code's status where the transport says more (404 for an
    /// unknown route, 405, 415), as Connect servers do.
    pub http_status: Option<u16>,
}

impl ConnectError {
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        ConnectError {
            code,
            message: message.into(),
            http_status: None,
        }
    }

    pub fn with_status(mut self, status: u16) -> Self {
        self.http_status = Some(status);
        self
    }

    fn row(&self) -> (&'static str, u16) {
        TABLE
            .iter()
            .find(|r| r.0 == self.code)
            .map(|r| (r.1, r.2))
            .unwrap_or(("unknown", 500))
    }

    /// The Connect name of the code (`unauthenticated`, ...).
    pub fn name(&self) -> &'static str {
        self.row().0
    }

    pub fn status(&self) -> u16 {
        self.http_status.unwrap_or(self.row().1)
    }

    pub fn body(&self) -> Vec<u8> {
        serde_json::json!({ "code": self.row().0, "message": self.message })
            .to_string()
            .into_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_follow_the_connect_table() {
        assert_eq!(ConnectError::new(Code::Unauthenticated, "x").status(), 401);
        assert_eq!(
            ConnectError::new(Code::ResourceExhausted, "x").status(),
            429
        );
        assert_eq!(
            ConnectError::new(Code::Unimplemented, "x")
                .with_status(404)
                .status(),
            404
        );
        let body: serde_json::Value =
            serde_json::from_slice(&ConnectError::new(Code::InvalidArgument, "bad").body())
                .unwrap();
        assert_eq!(
            body,
            serde_json::json!({"code": "invalid_argument", "message": "bad"})
        );
    }

    #[test]
    fn every_code_but_ok_has_a_row() {
        for c in 1..=16 {
            let code = Code::try_from(c).unwrap();
            assert!(TABLE.iter().any(|r| r.0 == code), "{code:?}");
        }
    }
}
