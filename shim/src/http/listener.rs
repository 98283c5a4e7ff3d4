//! The listeners: HTTP/2 cleartext (prior knowledge) and HTTP/1.1 on TCP
//! (optionally TLS: tls/listen.rs) and, optionally, on a unix socket.
use super::routes::handle;
use crate::app::App;
use crate::telemetry::log::Level;
use crate::tls::listen::ListenTls;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, UnixListener};

/// Accepts connections until `shutdown` resolves, then lets in-flight
/// requests finish (up to 10 s).
pub async fn serve(
    app: Arc<App>,
    tcp: TcpListener,
    tls: Option<ListenTls>,
    unix: Option<UnixListener>,
    shutdown: impl Future<Output = ()>,
) {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new());
    // Header limits far above Envoy's (60 KiB by default): an oversized header is the
    // gateway's to refuse with a clear error (the filter checks Authorization against
    // ferry-wire's limit), never this server's bare 431.
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(1024)
        .max_header_list_size(256 << 10);
    builder.http1().max_buf_size(512 << 10);
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = tcp.accept() => match accepted {
                Ok((stream, peer)) => {
                    let _ = stream.set_nodelay(true);
                    match &tls {
                        None => spawn_conn(&builder, graceful.watcher(), TokioIo::new(stream), app.clone()),
                        // The handshake runs in its own task: a slow client holds up no one.
                        Some(tls) => {
                            let (tls, builder, app) = (tls.clone(), builder.clone(), app.clone());
                            let watcher = graceful.watcher();
                            tokio::spawn(async move {
                                match tls.accept(stream).await {
                                    Ok(stream) => spawn_conn(&builder, watcher, TokioIo::new(stream), app),
                                    Err(e) => crate::log!(Level::Info, "TLS handshake failed", peer = peer, error = e),
                                }
                            });
                        }
                    }
                }
                Err(e) => accept_failed(e).await,
            },
            accepted = accept_unix(unix.as_ref()) => match accepted {
                Ok(stream) => spawn_conn(&builder, graceful.watcher(), TokioIo::new(stream), app.clone()),
                Err(e) => accept_failed(e).await,
            },
            () = &mut shutdown => break,
        }
    }
    drop(tcp);
    drop(unix);
    crate::log!(Level::Info, "shutting down", connections = graceful.count());
    if tokio::time::timeout(Duration::from_secs(10), graceful.shutdown())
        .await
        .is_err()
    {
        crate::log!(Level::Warn, "shutdown timed out with requests in flight");
    }
}

async fn accept_unix(unix: Option<&UnixListener>) -> std::io::Result<tokio::net::UnixStream> {
    match unix {
        Some(listener) => listener.accept().await.map(|(s, _)| s),
        None => std::future::pending().await,
    }
}

/// Out of file descriptors and the like: log, back off briefly, keep serving.
async fn accept_failed(e: std::io::Error) {
    crate::log!(Level::Error, "accept failed", error = e);
    tokio::time::sleep(Duration::from_millis(100)).await;
}

fn spawn_conn<I>(
    builder: &auto::Builder<TokioExecutor>,
    watcher: Watcher,
    io: TokioIo<I>,
    app: Arc<App>,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let svc = service_fn(move |req| handle(app.clone(), req));
    let conn = builder.serve_connection(io, svc).into_owned();
    let conn = watcher.watch(conn);
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            crate::log!(Level::Debug, "connection ended with an error", error = e);
        }
    });
}
