//! gRPC-Web answers this filter serves itself (`protocol/grpc_web.rs`: Envoy's
//! grpc_web filter is after this one, or absent). The call is answered as gRPC, and
//! each response step is then made what Envoy's grpc_web filter would make of it on its
//! way out:
//! - headers: the gRPC-Web content type (`application/grpc-web+proto`, or
//!   `-text+proto`), never a `content-length` (the body changes length); a
//!   trailers-only answer stays one (its status in the headers, no body);
//! - body: the trailers gRPC would add become a last body frame (flag `0x80`,
//!   `name:value\r\n`): after the replaced body, or after the shim's body that only
//!   gets its envelope header in front ([`BodyEdit::Wrap`]: it never enters the VM);
//! - text answers: every body byte the filter writes is base64, each piece one padded
//!   segment of whole frames. Nothing passes unencoded: the response paths that let
//!   the shim's body through (a prepended header) are not taken for text, and Envoy's
//!   trailers-only gRPC answers have no body.

use super::{BodyEdit, Reset, ResponseBodyStep, ResponseEdit, ResponseHeadersStep};
use crate::http::{HeaderEdits, Reply};
use crate::protocol::grpc_web::{self, text, Answer};

/// The response headers step of a gRPC-Web answer.
pub(super) fn headers(answer: Answer, step: ResponseHeadersStep) -> ResponseHeadersStep {
    match step {
        ResponseHeadersStep::Forward(edits) => ResponseHeadersStep::Forward(relabel(answer, edits)),
        ResponseHeadersStep::Hold(edits) => ResponseHeadersStep::Hold(relabel(answer, edits)),
        ResponseHeadersStep::Reply(r) => ResponseHeadersStep::Reply(reply(answer, r)),
    }
}

/// A response body step of a gRPC-Web answer.
pub(super) fn body(answer: Answer, step: ResponseBodyStep) -> ResponseBodyStep {
    match step {
        ResponseBodyStep::Finish(e) => match edit(answer, e) {
            Ok(e) => ResponseBodyStep::Finish(e),
            Err(Reset(reason)) => ResponseBodyStep::Reset(reason),
        },
        ResponseBodyStep::Reply(r) => ResponseBodyStep::Reply(reply(answer, r)),
        other => other,
    }
}

/// The edit that completes (or carries on) a gRPC-Web answer: its trailers as the last
/// frame of its body, its body in base64 for text.
pub(super) fn edit(answer: Answer, edit: ResponseEdit) -> Result<ResponseEdit, Reset> {
    let ResponseEdit {
        headers,
        body,
        trailers,
        pause,
    } = edit;
    let body = if trailers.is_empty() {
        body
    } else {
        let frame = grpc_web::trailer_frame(&trailers);
        match body {
            BodyEdit::Replace(mut bytes) => {
                bytes.extend_from_slice(&frame);
                BodyEdit::Replace(bytes)
            }
            BodyEdit::Prepend(header) => BodyEdit::Wrap(header, frame),
            BodyEdit::Wrap(header, mut end) => {
                end.extend_from_slice(&frame);
                BodyEdit::Wrap(header, end)
            }
            BodyEdit::Append(mut end) => {
                end.extend_from_slice(&frame);
                BodyEdit::Append(end)
            }
            // The body went on already (a stream whose end came with HTTP trailers):
            // nothing can follow it but trailers, which gRPC-Web does not have.
            BodyEdit::Keep => {
                return Err(Reset(
                    "the answer's body has gone on; its gRPC-Web trailer frame cannot follow"
                        .into(),
                ))
            }
        }
    };
    let body = match body {
        BodyEdit::Replace(bytes) if answer.text => BodyEdit::Replace(text::encode(&bytes)),
        // Not taken for text (see above): never let the shim's bytes out unencoded.
        BodyEdit::Prepend(_) | BodyEdit::Wrap(..) | BodyEdit::Append(_) if answer.text => {
            return Err(Reset(
                "a gRPC-Web text answer cannot pass the shim's body unencoded".into(),
            ))
        }
        body => body,
    };
    Ok(ResponseEdit {
        headers,
        body,
        trailers: Vec::new(),
        pause,
    })
}

/// A whole answer to a gRPC-Web client: trailers-only errors have no body; a body
/// (whole frames) is base64 for text.
pub(super) fn reply(answer: Answer, mut reply: Reply) -> Reply {
    if answer.text && !reply.body.is_empty() {
        reply.body = text::encode(&reply.body);
    }
    reply
}

/// The gRPC-Web content type, and no `content-length`.
fn relabel(answer: Answer, mut edits: HeaderEdits) -> HeaderEdits {
    edits.set.retain(|(name, _)| *name != "content-type");
    edits
        .set
        .push(("content-type", answer.content_type.to_owned()));
    if !edits.remove.contains(&"content-length") {
        edits.remove.push("content-length");
    }
    edits
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::envelope;

    const BINARY: Answer = Answer {
        content_type: "application/grpc-web+proto",
        text: false,
    };
    const TEXT: Answer = Answer {
        content_type: "application/grpc-web-text+proto",
        text: true,
    };

    fn ok() -> Vec<crate::http::Header> {
        vec![("grpc-status", "0".to_owned())]
    }

    #[test]
    fn trailers_become_the_last_frame() {
        let e = edit(BINARY, ResponseEdit::replace(b"msg".to_vec(), ok())).unwrap();
        assert_eq!(
            e.body,
            BodyEdit::Replace(b"msg\x80\0\0\0\x0fgrpc-status:0\r\n".to_vec())
        );
        assert!(e.trailers.is_empty());
        // A prepended header keeps the shim's body out of the VM; the frame goes after.
        let header = envelope::header(0, 3).unwrap();
        let prepend = ResponseEdit {
            body: BodyEdit::Prepend(header),
            trailers: ok(),
            ..ResponseEdit::default()
        };
        let e = edit(BINARY, prepend).unwrap();
        assert_eq!(
            e.body,
            BodyEdit::Wrap(header, b"\x80\0\0\0\x0fgrpc-status:0\r\n".to_vec())
        );
        // Without trailers nothing is added (a stream's middle).
        let e = edit(BINARY, ResponseEdit::replace(b"m".to_vec(), Vec::new())).unwrap();
        assert_eq!(e.body, BodyEdit::Replace(b"m".to_vec()));
    }

    #[test]
    fn text_encodes_every_written_byte() {
        let e = edit(TEXT, ResponseEdit::replace(b"\0\0\0\0\x01x".to_vec(), ok())).unwrap();
        let BodyEdit::Replace(b64) = e.body else {
            panic!()
        };
        assert_eq!(
            text::decode(&b64).unwrap(),
            b"\0\0\0\0\x01x\x80\0\0\0\x0fgrpc-status:0\r\n"
        );
        let e = edit(TEXT, ResponseEdit::replace(Vec::new(), Vec::new())).unwrap();
        assert_eq!(e.body, BodyEdit::Replace(Vec::new()));
        let prepend = ResponseEdit {
            body: BodyEdit::Prepend([0; 5]),
            ..ResponseEdit::default()
        };
        assert!(edit(TEXT, prepend).is_err());
    }

    #[test]
    fn a_body_gone_on_cannot_get_its_frame() {
        let keep = ResponseEdit {
            trailers: ok(),
            ..ResponseEdit::default()
        };
        assert!(edit(BINARY, keep).is_err());
        let step = body(
            BINARY,
            ResponseBodyStep::Finish(ResponseEdit {
                trailers: ok(),
                ..ResponseEdit::default()
            }),
        );
        assert!(matches!(step, ResponseBodyStep::Reset(_)), "{step:?}");
    }

    #[test]
    fn headers_are_relabelled() {
        let step = headers(
            TEXT,
            ResponseHeadersStep::Forward(HeaderEdits {
                set: vec![("content-type", "application/grpc".to_owned())],
                remove: vec!["x-ferry-host"],
            }),
        );
        let ResponseHeadersStep::Forward(edits) = step else {
            panic!()
        };
        assert_eq!(
            edits.get("content-type"),
            Some("application/grpc-web-text+proto")
        );
        assert_eq!(edits.set.len(), 1);
        assert_eq!(edits.remove, vec!["x-ferry-host", "content-length"]);
        let r = reply(
            TEXT,
            Reply {
                status: 200,
                headers: Vec::new(),
                body: b"abcd".to_vec(),
            },
        );
        assert_eq!(r.body, b"YWJjZA==");
    }
}
