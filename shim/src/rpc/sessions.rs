//! CreateSession and CloseSession. Both authenticate as every RPC does (a
//! pooled connection of the credential); CloseSession ends the session's pin,
//! if any (its transaction is rolled back).
use super::{timed, Call};
use crate::app::App;
use crate::connect::error::ConnectError;
use crate::connect::response::ShimBody;
use crate::credentials::Credentials;
use crate::errors::answers::seal_error;
use crate::sessions::pins::Ended;
use crate::sessions::seal::random;
use crate::statement::{fresh_vitess, SessionOut};
use ferry_proto::psdb::v1alpha1::{
    CloseSessionRequest, CloseSessionResponse, CreateSessionRequest, CreateSessionResponse, Role,
    User,
};
use http::Response;
use std::time::Instant;

pub async fn serve_create(call: Call<'_>) -> Result<Response<ShimBody>, ConnectError> {
    let started = Instant::now();
    let _: CreateSessionRequest = call.request()?;
    let answer = create_session(call.app, &call.creds).await?;
    Ok(timed(&answer, started))
}

pub async fn serve_close(call: Call<'_>) -> Result<Response<ShimBody>, ConnectError> {
    let started = Instant::now();
    let req: CloseSessionRequest = call.request()?;
    let answer = close_session(call.app, &call.creds, req).await?;
    Ok(timed(&answer, started))
}

async fn create_session(
    app: &App,
    creds: &Credentials,
) -> Result<CreateSessionResponse, ConnectError> {
    let mut conn = app.pools.conn(creds).await?;
    conn.reset_connection(false); // nothing ran on it
    drop(conn);
    let out = SessionOut::new(app, creds, random(), fresh_vitess());
    Ok(CreateSessionResponse {
        branch: app.pools.database().to_owned(),
        user: Some(User {
            username: creds.user.clone(),
            psid: String::new(),
            role: Role::Readwriter as i32,
        }),
        session: Some(out.fresh()),
    })
}

/// Ends the session's pin, if any (its transaction is rolled back).
async fn close_session(
    app: &App,
    creds: &Credentials,
    req: CloseSessionRequest,
) -> Result<CloseSessionResponse, ConnectError> {
    let session = req.session.unwrap_or_default();
    let vitess = session.vitess_session.unwrap_or_default();
    let token = match app.sealer.open(&session.signature, &vitess, creds) {
        Ok(token) => token,
        Err(e) => {
            return Ok(CloseSessionResponse {
                session: None,
                error: Some(seal_error(&e)),
            })
        }
    };
    match token {
        Some(t) if t.pinned => {
            if let Some(pin) = app.pins.get(&t.id) {
                pin.state.lock().await.release(app.pools.is_vitess());
                app.pins.end(&t.id, Ended::Released);
            }
        }
        // Nothing pinned: still authenticate, as every RPC does.
        _ => {
            let mut conn = app.pools.conn(creds).await?;
            conn.reset_connection(false);
        }
    }
    Ok(CloseSessionResponse {
        session: None,
        error: None,
    })
}
