//! The RPC status codes as both sides write them: one row per code with its gRPC
//! number, Connect name and the HTTP status Connect gives it (Connect protocol spec,
//! "Error Codes"; gRPC `statuscodes.md`). The filter's `Code` and the shim's vitess
//! `vtrpc.Code` both use gRPC's numbering, so either finds its row by number.

/// One row of the status table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Status {
    /// gRPC's number (`grpc-status`), also vitess `vtrpc.Code`'s.
    pub grpc: u32,
    /// Connect's name (the `code` of a Connect error).
    pub connect: &'static str,
    /// The HTTP status Connect uses for it.
    pub http: u16,
}

const fn row(grpc: u32, connect: &'static str, http: u16) -> Status {
    Status {
        grpc,
        connect,
        http,
    }
}

/// Every code but OK (which is no error).
pub const TABLE: &[Status] = &[
    row(1, "canceled", 499),
    row(2, "unknown", 500),
    row(3, "invalid_argument", 400),
    row(4, "deadline_exceeded", 504),
    row(5, "not_found", 404),
    row(6, "already_exists", 409),
    row(7, "permission_denied", 403),
    row(8, "resource_exhausted", 429),
    row(9, "failed_precondition", 400),
    row(10, "aborted", 409),
    row(11, "out_of_range", 400),
    row(12, "unimplemented", 501),
    row(13, "internal", 500),
    row(14, "unavailable", 503),
    row(15, "data_loss", 500),
    row(16, "unauthenticated", 401),
];

/// `unknown`: what an unlisted number or name stands for.
pub const UNKNOWN: Status = row(2, "unknown", 500);

/// The row of a gRPC number.
pub fn by_grpc(grpc: u32) -> Option<Status> {
    TABLE.iter().find(|s| s.grpc == grpc).copied()
}

/// The row of a Connect name.
pub fn by_connect(name: &str) -> Option<Status> {
    TABLE.iter().find(|s| s.connect == name).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_row_per_code_and_names_round_trip() {
        for n in 1..=16 {
            let s = by_grpc(n).unwrap();
            assert_eq!(by_connect(s.connect), Some(s));
        }
        assert_eq!(TABLE.len(), 16);
        assert_eq!(by_grpc(0), None);
        assert_eq!(by_grpc(17), None);
        assert_eq!(by_connect("weird"), None);
        assert_eq!(by_grpc(16).unwrap().http, 401);
        assert_eq!(by_grpc(2), Some(UNKNOWN));
    }
}
