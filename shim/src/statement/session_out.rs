//! The session an answer carries: the request's, as the statement left it,
//! sealed for the request's credentials (sessions/seal.rs).
use crate::app::App;
use crate::credentials::Credentials;
use crate::sessions::seal::{SessionId, Token};
use ferry_proto::psdb::v1alpha1::Session;
use ferry_proto::vitess::query::QueryResult;
use ferry_proto::vitess::vtgate;

/// The session an answer carries, sealed for these credentials. Fields the
/// gateway does not set (target_string, options...) are carried through.
pub struct SessionOut<'a> {
    pub app: &'a App,
    pub creds: &'a Credentials,
    pub id: SessionId,
    pub base: vtgate::Session,
    /// The client's own signature (verified), for answers that hand the session back
    /// exactly as it came.
    pub signature: Vec<u8>,
}

impl<'a> SessionOut<'a> {
    /// A session to answer with, signed anew (the client's signature is not kept).
    pub fn new(app: &'a App, creds: &'a Credentials, id: SessionId, base: vtgate::Session) -> Self {
        SessionOut {
            app,
            creds,
            id,
            base,
            signature: Vec::new(),
        }
    }

    pub fn seal(
        &self,
        pinned: bool,
        in_transaction: bool,
        autocommit: bool,
        qr: Option<&QueryResult>,
    ) -> Session {
        let mut v = self.base.clone();
        v.in_transaction = in_transaction;
        v.autocommit = autocommit;
        v.session_uuid = crate::sessions::seal::hex(&self.id);
        // Always present, as in vtgate's sessions: psdbproxy reads
        // `VitessSession.Options.Workload` on every statement without a nil check.
        v.options.get_or_insert_with(Default::default);
        if let Some(qr) = qr {
            if qr.insert_id_changed {
                v.last_insert_id = qr.insert_id;
            }
            v.row_count = if qr.fields.is_empty() {
                i64::try_from(qr.rows_affected).unwrap_or(i64::MAX)
            } else {
                -1
            };
        }
        let signature = self
            .app
            .sealer
            .seal(self.id, self.app.instance, pinned, self.creds, &v);
        Session {
            signature,
            vitess_session: Some(v),
        }
    }

    /// The session as it was (for answers that change nothing).
    pub fn unchanged(&self, token: &Token) -> Session {
        self.seal(
            token.pinned,
            self.base.in_transaction,
            self.base.autocommit,
            None,
        )
    }

    pub fn fresh(&self) -> Session {
        self.seal(false, false, true, None)
    }

    /// The session exactly as the client sent it (not sealed again: it names its
    /// holder, which another shim must not replace with itself).
    pub fn as_received(&self) -> Session {
        Session {
            signature: self.signature.clone(),
            vitess_session: Some(self.base.clone()),
        }
    }
}

pub fn fresh_vitess() -> vtgate::Session {
    vtgate::Session {
        autocommit: true,
        ..Default::default()
    }
}
