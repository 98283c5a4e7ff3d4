//! Connect unary framing of the shim's answers: a bare protobuf message
//! (`application/proto`) on success, a JSON Connect error with its HTTP status
//! otherwise; and what an answer tells the handler for its metrics.
use super::error::ConnectError;
use super::message_body::MessageBody;
use super::stream_body::StreamBody;
use bytes::Bytes;
use http::header::{HeaderValue, ALLOW, CONTENT_LENGTH, CONTENT_TYPE};
use http::{Response, StatusCode};
use http_body_util::Either;
use prost::Message;

/// The canonical content type, the only one the shim speaks.
pub const PROTO: &str = "application/proto";

/// A unary answer, or a stream.
pub type ShimBody = Either<MessageBody, StreamBody>;

pub fn proto_response(msg: &impl Message) -> Response<ShimBody> {
    pieces_response(vec![msg.encode_to_vec().into()])
}

/// A proto answer whose bytes are these pieces, in order.
pub fn pieces_response(pieces: Vec<Bytes>) -> Response<ShimBody> {
    let len: usize = pieces.iter().map(Bytes::len).sum();
    let mut resp = Response::new(Either::Left(MessageBody::pieces(pieces)));
    let h = resp.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static(PROTO));
    h.insert(CONTENT_LENGTH, HeaderValue::from(len));
    resp
}

pub fn connect_error_response(e: &ConnectError) -> Response<MessageBody> {
    let body = e.body();
    let len = body.len();
    let mut resp = Response::new(MessageBody::new(body));
    *resp.status_mut() =
        StatusCode::from_u16(e.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let h = resp.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    h.insert(CONTENT_LENGTH, HeaderValue::from(len));
    if e.status() == 405 {
        h.insert(ALLOW, HeaderValue::from_static("POST"));
    }
    if let Some((name, value)) = &e.header {
        if let Ok(v) = HeaderValue::from_str(value) {
            h.insert(*name, v);
        }
    }
    resp
}

/// `server-timing: db;dur=<ms>` (two decimals), from seconds.
fn db_timing(secs: f64) -> String {
    format!("db;dur={:.2}", (secs * 1000.0).max(0.0))
}

pub fn with_db_time(mut resp: Response<ShimBody>, secs: f64) -> Response<ShimBody> {
    if let Ok(v) = HeaderValue::from_str(&db_timing(secs)) {
        resp.headers_mut().insert("server-timing", v);
    }
    resp
}

/// The code an RPC answered 200 with (an SQL error in the body), for metrics.
#[derive(Clone, Copy)]
pub struct AnsweredCode(pub &'static str);

impl AnsweredCode {
    pub fn of(code: i32) -> AnsweredCode {
        let row = u32::try_from(code)
            .ok()
            .and_then(ferry_wire::status::by_grpc)
            .unwrap_or(ferry_wire::status::UNKNOWN);
        AnsweredCode(row.connect)
    }
}

/// Marks an Execute answer going out in pieces: its task counts it at its end
/// (rpc/execute.rs), not the handler.
#[derive(Clone, Copy)]
pub struct CountedAtItsEnd;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mysql::role;
    use ferry_proto::vitess::vtrpc::Code;
    use std::time::Duration;

    #[test]
    fn db_time_has_two_decimals() {
        assert_eq!(db_timing(0.0123456), "db;dur=12.35");
        assert_eq!(db_timing(0.0), "db;dur=0.00");
        assert_eq!(
            AnsweredCode::of(Code::InvalidArgument as i32).0,
            "invalid_argument"
        );
        assert_eq!(AnsweredCode::of(999).0, "unknown");
    }

    #[test]
    fn a_replica_behind_answers_its_header() {
        let resp = connect_error_response(&role::behind(Duration::from_millis(20)));
        assert_eq!(resp.status(), 503);
        assert_eq!(resp.headers()[role::BEHIND_HEADER], "1");
    }

    #[test]
    fn connect_errors_are_json_with_their_status() {
        let resp = connect_error_response(&ConnectError::new(Code::Unauthenticated, "no"));
        assert_eq!(resp.status(), 401);
        assert_eq!(resp.headers()[CONTENT_TYPE], "application/json");
        let resp =
            connect_error_response(&ConnectError::new(Code::Unimplemented, "GET").with_status(405));
        assert_eq!(
            (resp.status().as_u16(), &resp.headers()[ALLOW]),
            (405, &HeaderValue::from_static("POST"))
        );
    }
}
