//! Request headers Envoy sets for the filter and the shim (envoy/ferry.yaml's early
//! header mutation, a client's own value removed first).

/// The client's address (`%DOWNSTREAM_DIRECT_REMOTE_ADDRESS_WITHOUT_PORT%`): the
/// filter's distance rule, the shim's login throttle.
pub const CLIENT_ADDR: &str = "x-ferry-client-addr";

/// A verified token's claims (Envoy's jwt_authn `forward_payload_header`, base64url
/// JSON; envoy/tokens.yaml): the shim maps one claim to a MySQL account. envoy/ferry.yaml
/// and the scenarios made from it remove a client's own value before anything reads it.
pub const TOKEN_CLAIMS: &str = "x-ferry-token-claims";
