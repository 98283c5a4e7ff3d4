//! The RPCs the filter serves: one table row per RPC with its path, its kind and the
//! codec functions for its request and response messages. Serving another RPC is one
//! more row.

use ferry_proto::ferry::v1alpha1::{ExecuteBatchRequest, ExecuteBatchResponse};
use ferry_proto::psdb::v1alpha1::{
    CloseSessionRequest, CloseSessionResponse, CreateSessionRequest, CreateSessionResponse,
    ExecuteRequest, PrepareRequest, PrepareResponse,
};

use ferry_wire::rpc::Method;

use crate::codec::{json, json_stream, proto, CodecError};
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
    /// Its unary JSON answer can be transcoded as it streams
    /// ([`crate::codec::json_stream`] reads `ExecuteResponse`).
    pub streams_json: bool,
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

/// The served RPCs; any other path gets `unimplemented`.
pub const RPCS: &[Rpc] = &[
    Rpc {
        name: Method::Execute.name(),
        path: Method::Execute.path(),
        streaming: Method::Execute.streaming(),
        request_from_json: json::to_proto::<ExecuteRequest>,
        validate_request: proto::validate::<ExecuteRequest>,
        response_to_json: json_stream::execute_to_json,
        streams_json: true,
        early_data: Policy::Inspect(early_data::execute),
        carries_session: true,
        get: true,
    },
    // Rows come in many messages (the shim answers in Connect streaming envelopes);
    // like Execute it may run in a pinned session and be replayed only when it is a
    // plain read. Not in GET form: Connect GET is for unary RPCs.
    Rpc {
        name: Method::StreamExecute.name(),
        path: Method::StreamExecute.path(),
        streaming: Method::StreamExecute.streaming(),
        request_from_json: json::to_proto::<ExecuteRequest>,
        validate_request: proto::validate::<ExecuteRequest>,
        response_to_json: json_stream::execute_to_json,
        streams_json: false,
        early_data: Policy::Inspect(early_data::execute),
        carries_session: true,
        get: false,
    },
    Rpc {
        name: Method::CreateSession.name(),
        path: Method::CreateSession.path(),
        streaming: Method::CreateSession.streaming(),
        request_from_json: json::to_proto::<CreateSessionRequest>,
        validate_request: proto::validate::<CreateSessionRequest>,
        response_to_json: json::from_proto::<CreateSessionResponse>,
        streams_json: false,
        early_data: Policy::Allow,
        carries_session: false,
        get: false,
    },
    // The statement's fields and parameter count, as the server reports them; the shim
    // prepares and closes it on the session's connection, so it runs nothing and
    // changes nothing: safe to replay (early data), whatever the session holds. It
    // carries the session (a pinned one is prepared on its pin: temporary tables).
    Rpc {
        name: Method::Prepare.name(),
        path: Method::Prepare.path(),
        streaming: Method::Prepare.streaming(),
        request_from_json: json::to_proto::<PrepareRequest>,
        validate_request: proto::validate::<PrepareRequest>,
        response_to_json: json::from_proto::<PrepareResponse>,
        streams_json: false,
        early_data: Policy::Allow,
        carries_session: true,
        get: false,
    },
    Rpc {
        name: Method::CloseSession.name(),
        path: Method::CloseSession.path(),
        streaming: Method::CloseSession.streaming(),
        request_from_json: json::to_proto::<CloseSessionRequest>,
        validate_request: proto::validate::<CloseSessionRequest>,
        response_to_json: json::from_proto::<CloseSessionResponse>,
        streams_json: false,
        early_data: Policy::Refuse("CloseSession"),
        carries_session: true,
        get: false,
    },
    // Ferry's own (`ferry.v1alpha1.Database`): several statements in one request. Unary;
    // it carries a session (field 1, as Execute's), is classified from its statements
    // (route_class.rs) and may run in early data only when that class is `read`.
    Rpc {
        name: Method::ExecuteBatch.name(),
        path: Method::ExecuteBatch.path(),
        streaming: Method::ExecuteBatch.streaming(),
        request_from_json: json::to_proto::<ExecuteBatchRequest>,
        validate_request: proto::validate::<ExecuteBatchRequest>,
        response_to_json: json::from_proto::<ExecuteBatchResponse>,
        streams_json: false,
        early_data: Policy::Inspect(early_data::execute_batch),
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

    use ferry_wire::rpc as wire_rpc;

    #[test]
    fn every_rpc_of_the_shared_list_has_one_row() {
        for method in wire_rpc::ALL {
            let rows = RPCS.iter().filter(|r| r.path == method.path()).count();
            assert_eq!(rows, 1, "{method:?}");
        }
        assert_eq!(RPCS.len(), wire_rpc::ALL.len());
    }

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
        let prepare = lookup("/psdb.v1alpha1.Database/Prepare").unwrap();
        assert_eq!(prepare.name, "Prepare");
        assert!(prepare.carries_session && !prepare.streaming && !prepare.get);
        assert!(matches!(prepare.early_data, Policy::Allow));
        for not_served in [
            "/psdb.v1alpha1.Database/Nope",
            "/psdb.v1alpha1.Database/execute",
            "/psdb.v1alpha1.Database/Execute/",
            "/",
            "",
        ] {
            assert!(lookup(not_served).is_none(), "{not_served}");
        }
    }
}
