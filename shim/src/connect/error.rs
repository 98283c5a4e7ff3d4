//! Connect-protocol errors: `{"code": "...", "message": "..."}` with the HTTP
//! status the Connect spec gives each code (ferry-wire's status table, the filter's
//! too). vtrpc codes 0..=16 are the gRPC codes; CLUSTER_EVENT and READ_ONLY have no
//! Connect name and are never sent as Connect errors (they would fall back to
//! `unknown`).
use ferry_proto::vitess::vtrpc::Code;

#[derive(Debug, Clone, PartialEq)]
pub struct ConnectError {
    pub code: Code,
    pub message: String,
    /// Overrides the code's status where the transport says more (404 for an
    /// unknown route, 405, 415), as Connect servers do.
    pub http_status: Option<u16>,
    /// A response header that goes with it (a replica's `x-ferry-replica-behind`).
    pub header: Option<(&'static str, String)>,
}

impl ConnectError {
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        ConnectError {
            code,
            message: message.into(),
            http_status: None,
            header: None,
        }
    }

    pub fn with_header(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.header = Some((name, value.into()));
        self
    }

    pub fn with_status(mut self, status: u16) -> Self {
        self.http_status = Some(status);
        self
    }

    fn row(&self) -> (&'static str, u16) {
        let row = u32::try_from(self.code as i32)
            .ok()
            .and_then(ferry_wire::status::by_grpc)
            .unwrap_or(ferry_wire::status::UNKNOWN);
        (row.connect, row.http)
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
    fn every_code_but_ok_has_its_own_row() {
        for c in 1..=16 {
            let code = Code::try_from(c).unwrap();
            let e = ConnectError::new(code, "x");
            assert_eq!(e.name() == "unknown", code == Code::Unknown, "{code:?}");
        }
    }
}
