//! ferry-shim: reads its settings from the environment (see config.rs), opens
//! the TCP and optional unix-socket listeners, and serves until SIGTERM/SIGINT.
use ferry_shim::log::{self, Level};
use ferry_shim::App;
use ferry_shim::Config;
use ferry_shim::Sealer;
use ferry_shim::TokenAccounts;
use ferry_shim::Tracing;
use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

fn main() -> ExitCode {
    let cfg = match Config::from_env() {
        Ok(cfg) => cfg,
        Err(e) => {
            ferry_shim::log!(Level::Error, "bad configuration", error = e);
            return ExitCode::from(2);
        }
    };
    log::set_level(cfg.log_level);
    // TLS to MySQL (mysql/tls.rs) uses rustls's process-wide provider; naming it here
    // keeps it working if another dependency ever compiles a second one in. An Err
    // means one is already installed.
    let _ = rustls::crypto::ring::default_provider().install_default();
    // FERRY_SHIM_THREADS workers (1 by default): one thread serves a request with no
    // cross-thread wake-ups, which costs the shim (and MySQL) less CPU per request
    // until that thread fills a core (docs/benchmarks/cost.md "What was cut"). One is
    // tokio's current-thread runtime: everything, the accept loop included, on the
    // thread that runs main, not a worker beside it. 18-26 % less shim CPU per warm
    // SELECT 1 at 16 connections than the work-stealing runtime with one worker
    // ("What was cut").
    let runtime = if cfg.listen.threads == 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(cfg.listen.threads)
            .enable_all()
            .build()
    };
    let runtime = match runtime {
        Ok(runtime) => runtime,
        Err(e) => {
            ferry_shim::log!(Level::Error, "cannot start the runtime", error = e);
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cfg)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            ferry_shim::log!(Level::Error, "cannot start", error = e);
            ExitCode::FAILURE
        }
    }
}

async fn run(cfg: Config) -> Result<(), String> {
    let tcp = tokio::net::TcpListener::bind(cfg.listen.addr)
        .await
        .map_err(|e| format!("bind {}: {e}", cfg.listen.addr))?;
    let unix = match &cfg.listen.unix {
        Some(path) => {
            remove_stale_socket(path)?;
            Some(
                tokio::net::UnixListener::bind(path)
                    .map_err(|e| format!("bind {}: {e}", path.display()))?,
            )
        }
        None => None,
    };
    let sealer = match &cfg.seal.keys_file {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("session keys {}: {e}", path.display()))?;
            Sealer::from_key_file(&text, cfg.seal.ttl)
                .map_err(|e| format!("session keys {}: {e}", path.display()))?
        }
        None => {
            ferry_shim::log!(
                Level::Warn,
                "no FERRY_SESSION_KEYS_FILE: sessions are sealed with a key of this process only (lost on restart, not shared with other shims)"
            );
            Sealer::ephemeral(cfg.seal.ttl)
        }
    };
    let mut app = App::new(&cfg, sealer.with_holder(&cfg.listen.advertise));
    app.tokens = TokenAccounts::load(&cfg.tokens)?;
    if app.tokens.is_some() {
        ferry_shim::log!(
            Level::Info,
            "tokens",
            claim = cfg.tokens.claim,
            accounts = cfg.tokens.accounts.len()
        );
    }
    // A database that lets a made-up user in with a made-up password (Vitess's vtgate
    // with its authentication off) would make every password meaningless: refused.
    app.pools.refuse_any_password().await?;
    // Tracing (telemetry/trace.rs): only with FERRY_OTLP_ENDPOINT; built here, inside the runtime.
    if let Some(endpoint) = &cfg.trace.otlp_endpoint {
        let instance = app.instance_hex();
        app.tracing = Some(Tracing::start(
            endpoint,
            cfg.trace.sql,
            cfg.role,
            &instance,
        )?);
        ferry_shim::log!(
            Level::Info,
            "tracing",
            otlp_endpoint = endpoint,
            sql_text = cfg.trace.sql
        );
    }
    let tracing = app.tracing.clone();
    let app = Arc::new(app);
    let pin_sweeper = tokio::spawn({
        let app = app.clone();
        async move {
            loop {
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                app.pins.sweep(app.pools.is_vitess());
                app.kept.sweep(app.pools.is_vitess());
            }
        }
    });
    let sweeper = tokio::spawn({
        let app = app.clone();
        let every = (cfg.pool.idle / 2).max(std::time::Duration::from_secs(1));
        async move {
            loop {
                tokio::time::sleep(every).await;
                app.pools.sweep();
            }
        }
    });
    ferry_shim::log!(
        Level::Info,
        "listening",
        addr = cfg.listen.addr,
        unix = cfg
            .listen
            .unix
            .as_ref()
            .map_or(String::new(), |p| p.display().to_string()),
        mysql = cfg.pool.target,
        tls = match &cfg.listen_tls {
            None => "off (h2c)",
            Some(tls) if tls.mutual => "on, client certificates required",
            Some(_) => "on",
        },
        mysql_tls = cfg.pool.tls.describe(),
        database = cfg.pool.database,
        role = cfg.role.as_str(),
        track_gtid = cfg.gtid.track,
    );
    if cfg.listen_tls.is_none() && !cfg.listen.addr.ip().is_loopback() {
        ferry_shim::log!(
            Level::Warn,
            "plain h2c on a non-loopback address: the clients' credentials and rows cross the network in clear unless FERRY_SHIM_TLS_CERT/_KEY are set (or the network is private to Envoy)",
            addr = cfg.listen.addr,
        );
    }
    ferry_shim::serve(app, tcp, cfg.listen_tls.clone(), unix, shutdown_signal()).await;
    sweeper.abort();
    pin_sweeper.abort();
    if let Some(tracing) = tracing {
        // The spans still batched; the exporter needs the runtime, so not on it.
        let _ = tokio::task::spawn_blocking(move || tracing.shutdown()).await;
    }
    if let Some(path) = &cfg.listen.unix {
        let _ = std::fs::remove_file(path);
    }
    Ok(())
}

/// A socket file left by a previous run would make bind fail; anything that
/// is not a socket is someone else's file and is left alone.
fn remove_stale_socket(path: &Path) -> Result<(), String> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => std::fs::remove_file(path)
            .map_err(|e| format!("remove stale socket {}: {e}", path.display())),
        Ok(_) => Err(format!("{} exists and is not a socket", path.display())),
        Err(_) => Ok(()),
    }
}

async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => return std::future::pending().await,
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}
