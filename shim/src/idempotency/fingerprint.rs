//! A request's fingerprint: what makes two requests with one key the same request.
//! SHA-256 over the user, the RPC and the request's meaning, each part framed with its
//! length: the statements, their bind variables (sorted by name: a map's order on the
//! wire means nothing), the batch's mode and options, and the session's signature
//! (which covers everything the session carries).
use ferry_proto::ferry::v1alpha1::{ExecuteBatchRequest, TransactionOptions};
use ferry_proto::psdb::v1alpha1::{ExecuteRequest, Session};
use ferry_proto::vitess::query::BindVariable;
use prost::Message;
use sha2::{Digest, Sha256};
use std::collections::HashMap;

struct Hasher(Sha256);

impl Hasher {
    fn new(rpc: &str, user: &str) -> Hasher {
        let mut h = Hasher(Sha256::new());
        h.part(b"ferry-idempotency-v1");
        h.part(rpc.as_bytes());
        h.part(user.as_bytes());
        h
    }

    fn part(&mut self, bytes: &[u8]) {
        self.0.update((bytes.len() as u64).to_be_bytes());
        self.0.update(bytes);
    }

    fn session(&mut self, s: Option<&Session>) {
        self.part(s.map(|s| s.signature.as_slice()).unwrap_or_default());
    }

    fn statement(&mut self, query: &str, binds: &HashMap<String, BindVariable>) {
        self.part(query.as_bytes());
        let mut names: Vec<&String> = binds.keys().collect();
        names.sort();
        self.part(&(names.len() as u64).to_be_bytes());
        for name in names {
            self.part(name.as_bytes());
            self.part(
                &binds
                    .get(name)
                    .map(Message::encode_to_vec)
                    .unwrap_or_default(),
            );
        }
    }

    fn finish(self) -> [u8; 32] {
        self.0.finalize().into()
    }
}

pub fn execute(user: &str, req: &ExecuteRequest) -> [u8; 32] {
    let mut h = Hasher::new("Execute", user);
    h.session(req.session.as_ref());
    h.statement(&req.query, &req.bind_variables);
    h.finish()
}

pub fn batch(user: &str, req: &ExecuteBatchRequest) -> [u8; 32] {
    let mut h = Hasher::new("ExecuteBatch", user);
    h.session(req.session.as_ref());
    h.part(&req.mode.to_be_bytes());
    let options = req.transaction.map(|o| o.encode_to_vec());
    h.part(&options.unwrap_or_else(|| TransactionOptions::default().encode_to_vec()));
    h.part(&(req.statements.len() as u64).to_be_bytes());
    for s in &req.statements {
        h.statement(&s.query, &s.bind_variables);
        h.part(
            &s.condition
                .as_ref()
                .map(Message::encode_to_vec)
                .unwrap_or_default(),
        );
    }
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_proto::vitess::query::Type;

    fn bv(v: &str) -> BindVariable {
        BindVariable {
            r#type: Type::Int64 as i32,
            value: v.as_bytes().to_vec(),
            ..Default::default()
        }
    }

    #[test]
    fn the_same_request_whatever_the_maps_order() {
        let mut a = ExecuteRequest {
            query: "INSERT INTO t VALUES (:a, :b)".into(),
            ..Default::default()
        };
        a.bind_variables.insert("a".into(), bv("1"));
        a.bind_variables.insert("b".into(), bv("2"));
        let mut b = ExecuteRequest {
            query: a.query.clone(),
            ..Default::default()
        };
        b.bind_variables.insert("b".into(), bv("2"));
        b.bind_variables.insert("a".into(), bv("1"));
        assert_eq!(execute("u", &a), execute("u", &b));
        // Anything else that means something differs.
        assert_ne!(execute("u", &a), execute("v", &a), "another user");
        let mut c = a.clone();
        c.bind_variables.insert("b".into(), bv("3"));
        assert_ne!(execute("u", &a), execute("u", &c), "another value");
        let mut d = a.clone();
        d.session = Some(Session {
            signature: vec![1, 2],
            ..Default::default()
        });
        assert_ne!(execute("u", &a), execute("u", &d), "another session");
        // An Execute and a batch of the same statement are not the same request.
        let batch_of_it = ExecuteBatchRequest {
            statements: vec![ferry_proto::ferry::v1alpha1::BatchStatement {
                query: a.query.clone(),
                bind_variables: a.bind_variables.clone(),
                condition: None,
            }],
            ..Default::default()
        };
        assert_ne!(execute("u", &a), batch("u", &batch_of_it));
        let mut read_only = batch_of_it.clone();
        read_only.transaction = Some(TransactionOptions {
            read_only: true,
            ..Default::default()
        });
        assert_ne!(batch("u", &batch_of_it), batch("u", &read_only));
    }
}
