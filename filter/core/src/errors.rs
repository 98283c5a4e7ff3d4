//! RPC status codes: one table row per code with its Connect name, gRPC number and
//! Connect HTTP status, plus the gRPC spec's HTTP-status → code table for answers
//! that did not come from an RPC server (e.g. Envoy's own 503). Tables, not branches.

/// The RPC status codes shared by gRPC and Connect (`OK` is not an error and has no row).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Code {
    Canceled,
    Unknown,
    InvalidArgument,
    DeadlineExceeded,
    NotFound,
    AlreadyExists,
    PermissionDenied,
    ResourceExhausted,
    FailedPrecondition,
    Aborted,
    OutOfRange,
    Unimplemented,
    Internal,
    Unavailable,
    DataLoss,
    Unauthenticated,
}

/// One row of the status table.
#[derive(Debug)]
pub struct Row {
    pub code: Code,
    /// Connect's name (the `code` field of a Connect error body).
    pub connect: &'static str,
    /// gRPC's number (the `grpc-status` value).
    pub grpc: u32,
    /// The HTTP status Connect uses for this code.
    pub http: u16,
}

/// The status table (Connect protocol spec, "Error Codes"; gRPC `statuscodes.md`).
pub const TABLE: &[Row] = &[
    Row {
        code: Code::Canceled,
        connect: "canceled",
        grpc: 1,
        http: 499,
    },
    Row {
        code: Code::Unknown,
        connect: "unknown",
        grpc: 2,
        http: 500,
    },
    Row {
        code: Code::InvalidArgument,
        connect: "invalid_argument",
        grpc: 3,
        http: 400,
    },
    Row {
        code: Code::DeadlineExceeded,
        connect: "deadline_exceeded",
        grpc: 4,
        http: 504,
    },
    Row {
        code: Code::NotFound,
        connect: "not_found",
        grpc: 5,
        http: 404,
    },
    Row {
        code: Code::AlreadyExists,
        connect: "already_exists",
        grpc: 6,
        http: 409,
    },
    Row {
        code: Code::PermissionDenied,
        connect: "permission_denied",
        grpc: 7,
        http: 403,
    },
    Row {
        code: Code::ResourceExhausted,
        connect: "resource_exhausted",
        grpc: 8,
        http: 429,
    },
    Row {
        code: Code::FailedPrecondition,
        connect: "failed_precondition",
        grpc: 9,
        http: 400,
    },
    Row {
        code: Code::Aborted,
        connect: "aborted",
        grpc: 10,
        http: 409,
    },
    Row {
        code: Code::OutOfRange,
        connect: "out_of_range",
        grpc: 11,
        http: 400,
    },
    Row {
        code: Code::Unimplemented,
        connect: "unimplemented",
        grpc: 12,
        http: 501,
    },
    Row {
        code: Code::Internal,
        connect: "internal",
        grpc: 13,
        http: 500,
    },
    Row {
        code: Code::Unavailable,
        connect: "unavailable",
        grpc: 14,
        http: 503,
    },
    Row {
        code: Code::DataLoss,
        connect: "data_loss",
        grpc: 15,
        http: 500,
    },
    Row {
        code: Code::Unauthenticated,
        connect: "unauthenticated",
        grpc: 16,
        http: 401,
    },
];

/// The row used if a code were ever missing from [`TABLE`] (a unit test proves none is).
const FALLBACK: Row = Row {
    code: Code::Unknown,
    connect: "unknown",
    grpc: 2,
    http: 500,
};

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
    fn row(self) -> &'static Row {
        TABLE
            .iter()
            .find(|row| row.code == self)
            .unwrap_or(&FALLBACK)
    }

    /// Connect's name of the code, e.g. `invalid_argument`.
    pub fn connect_name(self) -> &'static str {
        self.row().connect
    }

    /// gRPC's number of the code, e.g. 3.
    pub fn grpc(self) -> u32 {
        self.row().grpc
    }

    /// The HTTP status of a Connect error with this code, e.g. 400.
    pub fn http_status(self) -> u16 {
        self.row().http
    }

    /// The code named `name` in a Connect error body; `None` for names not in the table.
    pub fn from_connect_name(name: &str) -> Option<Code> {
        TABLE
            .iter()
            .find(|row| row.connect == name)
            .map(|row| row.code)
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

    #[test]
    fn every_code_has_exactly_one_row_and_names_round_trip() {
        assert_eq!(TABLE.len(), ALL.len());
        for code in ALL {
            assert_eq!(
                TABLE.iter().filter(|r| r.code == code).count(),
                1,
                "{code:?}"
            );
            assert_eq!(Code::from_connect_name(code.connect_name()), Some(code));
        }
        // gRPC numbers are 1..=16 in order.
        for (i, row) in TABLE.iter().enumerate() {
            assert_eq!(row.grpc as usize, i + 1);
        }
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
