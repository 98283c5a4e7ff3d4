//! RPC status codes: the codes shared by gRPC and Connect (their numbers, Connect names
//! and HTTP statuses are ferry-wire's status table, which the shim uses too), plus the
//! gRPC spec's HTTP-status → code table for answers that did not come from an RPC
//! server (e.g. Envoy's own 503). Tables, not branches.

use ferry_wire::status::{self, Status};

/// The RPC status codes shared by gRPC and Connect (`OK` is not an error and has no
/// variant); each is its gRPC number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Code {
    Canceled = 1,
    Unknown = 2,
    InvalidArgument = 3,
    DeadlineExceeded = 4,
    NotFound = 5,
    AlreadyExists = 6,
    PermissionDenied = 7,
    ResourceExhausted = 8,
    FailedPrecondition = 9,
    Aborted = 10,
    OutOfRange = 11,
    Unimplemented = 12,
    Internal = 13,
    Unavailable = 14,
    DataLoss = 15,
    Unauthenticated = 16,
}

/// Every code, in gRPC order.
const ALL: [Code; 16] = [
    Code::Canceled,
    Code::Unknown,
    Code::InvalidArgument,
    Code::DeadlineExceeded,
    Code::NotFound,
    Code::AlreadyExists,
    Code::PermissionDenied,
    Code::ResourceExhausted,
    Code::FailedPrecondition,
    Code::Aborted,
    Code::OutOfRange,
    Code::Unimplemented,
    Code::Internal,
    Code::Unavailable,
    Code::DataLoss,
    Code::Unauthenticated,
];

/// gRPC's mapping of an HTTP status from a non-gRPC answer to a code
/// (`doc/http-grpc-status-mapping.md`); Connect clients use the same table.
/// Any status not listed is `unknown`.
pub const HTTP_TO_CODE: &[(u16, Code)] = &[
    (400, Code::Internal),
    (401, Code::Unauthenticated),
    (403, Code::PermissionDenied),
    (404, Code::Unimplemented),
    (429, Code::Unavailable),
    (502, Code::Unavailable),
    (503, Code::Unavailable),
    (504, Code::Unavailable),
];

impl Code {
    fn row(self) -> Status {
        status::by_grpc(self.grpc()).unwrap_or(status::UNKNOWN)
    }

    /// Connect's name of the code, e.g. `invalid_argument`.
    pub fn connect_name(self) -> &'static str {
        self.row().connect
    }

    /// gRPC's number of the code, e.g. 3.
    pub fn grpc(self) -> u32 {
        self as u32
    }

    /// The HTTP status of a Connect error with this code, e.g. 400.
    pub fn http_status(self) -> u16 {
        self.row().http
    }

    /// The code named `name` in a Connect error body; `None` for names not in the table.
    pub fn from_connect_name(name: &str) -> Option<Code> {
        let row = status::by_connect(name)?;
        ALL.iter().copied().find(|code| code.grpc() == row.grpc)
    }

    /// The code for an HTTP status of an answer that carries no RPC status.
    pub fn from_http_status(status: u16) -> Code {
        HTTP_TO_CODE
            .iter()
            .find(|(http, _)| *http == status)
            .map_or(Code::Unknown, |(_, code)| *code)
    }
}

/// An error the filter answers with: a code, a readable message, and the HTTP-level
/// details some cases need (e.g. 404 for an unknown path instead of unimplemented's 501).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rejection {
    pub code: Code,
    pub message: String,
    /// Overrides the Connect HTTP status of `code` (gRPC answers always use HTTP 200).
    pub http_status: Option<u16>,
    /// Extra response headers, e.g. `allow: POST` on a 405.
    pub headers: Vec<(&'static str, String)>,
}

impl Rejection {
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Rejection {
            code,
            message: message.into(),
            http_status: None,
            headers: Vec::new(),
        }
    }

    /// Answer with this HTTP status instead of the code's own (Connect shape only).
    pub fn with_http_status(mut self, status: u16) -> Self {
        self.http_status = Some(status);
        self
    }

    pub fn with_header(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }

    /// The HTTP status of the Connect-shaped answer.
    pub fn connect_http_status(&self) -> u16 {
        self.http_status.unwrap_or_else(|| self.code.http_status())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_has_its_row_and_names_round_trip() {
        for (i, code) in ALL.into_iter().enumerate() {
            assert_eq!(code.grpc() as usize, i + 1, "gRPC numbers in order");
            if code != Code::Unknown {
                assert_ne!(code.row(), status::UNKNOWN, "{code:?}: a row of its own");
            }
            assert_eq!(Code::from_connect_name(code.connect_name()), Some(code));
        }
        assert_eq!(Code::Unknown.row(), status::UNKNOWN);
    }

    #[test]
    fn connect_http_statuses() {
        let expected = [
            (Code::Canceled, 499),
            (Code::Unknown, 500),
            (Code::InvalidArgument, 400),
            (Code::DeadlineExceeded, 504),
            (Code::NotFound, 404),
            (Code::AlreadyExists, 409),
            (Code::PermissionDenied, 403),
            (Code::ResourceExhausted, 429),
            (Code::FailedPrecondition, 400),
            (Code::Aborted, 409),
            (Code::OutOfRange, 400),
            (Code::Unimplemented, 501),
            (Code::Internal, 500),
            (Code::Unavailable, 503),
            (Code::DataLoss, 500),
            (Code::Unauthenticated, 401),
        ];
        for (code, http) in expected {
            assert_eq!(code.http_status(), http, "{code:?}");
        }
    }

    #[test]
    fn http_status_mapping_follows_grpc() {
        assert_eq!(Code::from_http_status(400), Code::Internal);
        assert_eq!(Code::from_http_status(401), Code::Unauthenticated);
        assert_eq!(Code::from_http_status(403), Code::PermissionDenied);
        assert_eq!(Code::from_http_status(404), Code::Unimplemented);
        for s in [429, 502, 503, 504] {
            assert_eq!(Code::from_http_status(s), Code::Unavailable);
        }
        for s in [200, 405, 500, 418] {
            assert_eq!(Code::from_http_status(s), Code::Unknown);
        }
        assert_eq!(Code::from_connect_name("no_such_code"), None);
    }
}
