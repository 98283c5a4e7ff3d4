//! Prepare: what a statement would answer, without running it. The
//! statement (its placeholders rewritten as for Execute, types/bind.rs; bind
//! variables are optional, except for a `::list`, whose length decides the
//! statement) is prepared with COM_STMT_PREPARE on the session's connection
//! (its pin, so temporary tables and `USE` count; else any pooled one), and
//! the answer is what the server reports: the result's fields (as Execute
//! gives them) and the number of parameters. The statement is closed again
//! (COM_STMT_CLOSE) before the connection goes back: nothing runs, nothing
//! is pinned, the session comes back as it was.
//!
//! SQL errors (a syntax error, an unknown table) are answered inside the
//! response (HTTP 200, `PrepareResponse.error`), as Execute answers them.
use super::{timed, Call};
use crate::app::App;
use crate::connect::error::ConnectError;
use crate::connect::response::ShimBody;
use crate::credentials::Credentials;
use crate::errors::answers::{bind_error, sql_error};
use crate::errors::mysql::lost_connection;
use crate::statement::{self, Start};
use crate::telemetry::log::Level;
use crate::types::bind::{self, Mode};
use crate::types::column_types::Describer;
use ferry_proto::psdb::v1alpha1::{PrepareRequest, PrepareResponse};
use ferry_proto::vitess::vtrpc::{Code, RpcError};
use http::Response;
use mysql_async::prelude::Queryable;
use std::time::Instant;

pub async fn serve(call: Call<'_>) -> Result<Response<ShimBody>, ConnectError> {
    let started = Instant::now();
    let req: PrepareRequest = call.request()?;
    let answer = prepare(call.app, &call.creds, req).await?;
    Ok(timed(&answer, started))
}

async fn prepare(
    app: &App,
    creds: &Credentials,
    req: PrepareRequest,
) -> Result<PrepareResponse, ConnectError> {
    let mut ready = match statement::start_without_statement(app, creds, req.session).await? {
        // A refused session, a lost pin, a full queue: as Execute answers them.
        Start::Answered(resp) => {
            return Ok(PrepareResponse {
                session: resp.session,
                error: resp.error,
                ..Default::default()
            })
        }
        Start::Run(ready) => ready,
    };
    let session = Some(ready.session_as_is(app, creds));
    let failed = |error: RpcError| PrepareResponse {
        session: session.clone(),
        error: Some(error),
        ..Default::default()
    };
    let bound = match bind::bind(&req.query, &req.bind_variables, Mode::Prepare) {
        Ok(bound) => bound,
        Err(e) => {
            ready.release_clean();
            return Ok(failed(bind_error(&e.0)));
        }
    };
    let Some(conn) = ready.conn() else {
        return Ok(failed(RpcError {
            message: "the session's connection is gone".to_owned(),
            code: Code::Aborted as i32,
        }));
    };
    let server_version = conn.server_version();
    let prepared = match conn.prep(bound.sql.as_str()).await {
        Ok(stmt) => {
            let describer = Describer {
                cache: &app.column_types,
                pools: &app.pools,
                creds,
            };
            let fields = describer.fields(&stmt.columns(), server_version).await;
            let params_count = u32::from(stmt.num_params());
            conn.close(stmt).await.map(|()| (fields, params_count))
        }
        Err(e) => Err(e),
    };
    match prepared {
        Ok((fields, params_count)) => {
            ready.release_clean();
            Ok(PrepareResponse {
                session,
                fields,
                error: None,
                params_count,
            })
        }
        Err(mysql_async::Error::Server(se)) => {
            ready.release_clean();
            Ok(failed(sql_error(&se, &creds.user)))
        }
        // The connection failed: a pooled one is discarded (its reset stays
        // armed), a pin's next statement finds it dead and ends the pin.
        Err(e) => {
            drop(ready);
            crate::log!(
                Level::Error,
                "mysql connection failed during a prepare",
                user = creds.user,
                error = e
            );
            Err(ConnectError::new(Code::Unavailable, lost_connection(&e)))
        }
    }
}
