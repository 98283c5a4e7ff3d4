//! The RPCs the filter serves: one table row per RPC with its path, its kind and the
//! codec functions for its request and response messages. Serving another RPC
//! (e.g. `Prepare`) is one more row.

use ferry_proto::psdb::v1alpha1::{
    CloseSessionRequest, CloseSessionResponse, CreateSessionRequest, CreateSessionResponse,
    ExecuteRequest, ExecuteResponse,
};

use crate::codec::{json, proto, CodecError};
use crate::early_data::{self, Policy};

/// Writes a response message as protojson into a buffer, up to a length.
pub type ResponseToJson = fn(&[u8], &mut Vec<u8>, usize) -> Result<(), json::ToJsonError>;

pub struct Rpc {
    /// The method name, also the value of the `x-ferry-rpc` request header.
    pub name: &'static str,
    /// `POST` path.
    pub path: &'static str,
    /// Server streaming (many response messages); otherwise unary.
    pub streaming: bool,
    /// Protojson request → canonical protobuf request.
    pub request_from_json: fn(&[u8]) -> Result<Vec<u8>, CodecError>,
    /// Checks a protobuf request.
    pub validate_request: fn(&[u8]) -> Result<(), CodecError>,
    /// Protobuf response → protojson, appended to the given buffer.
    pub response_to_json: ResponseToJson,
    /// What it may do when it arrives in HTTP/3 early data (0-RTT).
    pub early_data: Policy,
    /// Its request carries a `Session` (field 1): with session affinity on, its
    /// headers are held until the session names the shim to route to.
    pub carries_session: bool,
    /// Also served in Connect's GET form, for replay-safe requests only
    /// ([`crate::connect_get`]).
    pub get: bool,
}

impl std::fmt::Debug for Rpc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

/// The served RPCs. `Prepare` is not served yet: its path gets `unimplemented` like
/// any unknown path.
pub const RPCS: &[Rpc] = &[
    Rpc {
        name: "Execute",
        path: "/psdb.v1alpha1.Database/Execute",
        streaming: false,
        request_from_json: json::to_proto::<ExecuteRequest>,
        validate_request: proto::validate::<ExecuteRequest>,
        response_to_json: json::from_proto::<ExecuteResponse>,
        early_data: Policy::Inspect(early_data::execute),
        carries_session: true,
        get: true,
    },
    // Rows come in many messages (the shim answers in Connect streaming envelopes);
    // like Execute it may run in a pinned session and be replayed only when it is a
    // plain read. Not in GET form: Connect GET is for unary RPCs.
    Rpc {
        name: "StreamExecute",
        path: "/psdb.v1alpha1.Database/StreamExecute",
        streaming: true,
        request_from_json: json::to_proto::<ExecuteRequest>,
        validate_request: proto::validate::<ExecuteRequest>,
        response_to_json: json::from_proto::<ExecuteResponse>,
        early_data: Policy::Inspect(early_data::execute),
        carries_session: true,
        get: false,
    },
    Rpc {
        name: "CreateSession",
        path: "/psdb.v1alpha1.Database/CreateSession",
        streaming: false,
        request_from_json: json::to_proto::<CreateSessionRequest>,
        validate_request: proto::validate::<CreateSessionRequest>,
        response_to_json: json::from_proto::<CreateSessionResponse>,
        early_data: Policy::Allow,
        carries_session: false,
        get: false,
    },
    Rpc {
        name: "CloseSession",
        path: "/psdb.v1alpha1.Database/CloseSession",
        streaming: false,
        request_from_json: json::to_proto::<CloseSessionRequest>,
        validate_request: proto::validate::<CloseSessionRequest>,
        response_to_json: json::from_proto::<CloseSessionResponse>,
        early_data: Policy::Refuse("CloseSession"),
        carries_session: true,
        get: false,
    },
];

/// The RPC served at `path` (a query string is ignored).
pub fn lookup(path: &str) -> Option<&'static Rpc> {
    let path = path.split_once('?').map_or(path, |(p, _)| p);
    RPCS.iter().find(|rpc| rpc.path == path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn served_paths() {
        assert_eq!(
            lookup("/psdb.v1alpha1.Database/Execute").unwrap().name,
            "Execute"
        );
        assert_eq!(
            lookup("/psdb.v1alpha1.Database/CreateSession")
                .unwrap()
                .name,
            "CreateSession"
        );
        assert_eq!(
            lookup("/psdb.v1alpha1.Database/CloseSession").unwrap().name,
            "CloseSession"
        );
        assert_eq!(
            lookup("/psdb.v1alpha1.Database/Execute?x=1").unwrap().name,
            "Execute"
        );
        for not_served in [
            "/psdb.v1alpha1.Database/Prepare",
            "/psdb.v1alpha1.Database/execute",
            "/psdb.v1alpha1.Database/Execute/",
            "/",
            "",
        ] {
            assert!(lookup(not_served).is_none(), "{not_served}");
        }
    }
}
