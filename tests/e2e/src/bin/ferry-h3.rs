//! Query Ferry over HTTP/3 from the command line (curl here has no HTTP/3), and time it:
//!   ferry-h3 'SELECT 1'
//!   ferry-h3 --proto --repeat 10 'SELECT * FROM large'
//! Uses FERRY_HOST/FERRY_PORT/FERRY_RUN_DIR (CA) and FERRY_MYSQL_USER/PASSWORD
//! like scripts/env.sh; prints the Connect JSON answer. `--proto` sends Connect proto;
//! `--repeat N` makes N calls on one connection and prints their timings (a second
//! HTTP/3 client, quinn, beside k6's quic-go: docs/benchmarks/http3.md "HTTP/3 bulk transfer");
//! `--h2` makes the same timed calls over HTTP/2 (reqwest), to compare in one client.
//! `--mysql --repeat N` makes the same timed calls with the MySQL protocol over TLS 1.3
//! (mysql_async, rustls, the dev CA) straight to MariaDB at FERRY_MYSQL_PORT, every row
//! read: the baseline for the large answer from a client of the same kind
//! (loadtest/large-answer.sh).
//! `--load C N` is a closed-loop load: C connections, each one call at a time (after one
//! warm-up call each), N calls in all; prints h2load's summary lines ("finished in …,
//! … req/s", "status codes: … 2xx"), so `loadtest/envoy-breakdown.sh` reads both alike.
use ferry_e2e::{
    config::Config, connect::ConnectClient, connect::EXECUTE, h3_client::H3Client, Answer, BoxError,
};
use ferry_proto::psdb::v1alpha1::ExecuteRequest;
use prost::Message;
use std::time::Instant;

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let usage = "usage: ferry-h3 [--proto] [--repeat N [--h2 | --mysql] | --load C N] 'SQL'";
    let mut proto = false;
    let mut h2 = false;
    let mut mysql = false;
    let mut repeat: Option<usize> = None;
    let mut load: Option<(usize, usize)> = None;
    let mut query = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--proto" => proto = true,
            "--h2" => h2 = true,
            "--mysql" => mysql = true,
            "--repeat" => repeat = Some(args.next().ok_or(usage)?.parse()?),
            "--load" => {
                let c: usize = args.next().ok_or(usage)?.parse()?;
                let n: usize = args.next().ok_or(usage)?.parse()?;
                load = Some((c.max(1), n));
            }
            _ if query.is_none() => query = Some(a),
            _ => return Err(usage.into()),
        }
    }
    let query = query.ok_or(usage)?;
    let cfg = Config::from_env();
    if mysql {
        return run_mysql(&cfg, &query, repeat.ok_or(usage)?).await;
    }
    let (content_type, body) = if proto {
        let req = ExecuteRequest {
            query,
            ..Default::default()
        };
        ("application/proto", req.encode_to_vec())
    } else {
        (
            "application/json",
            serde_json::json!({ "query": query })
                .to_string()
                .into_bytes(),
        )
    };
    let body = bytes::Bytes::from(body);
    let auth = cfg.basic_auth();
    if let Some((c, n)) = load {
        return run_load(&cfg, content_type, &auth, body, c, n).await;
    }
    let headers = [("content-type", content_type), ("authorization", &auth)];
    let mut client = match (h2, repeat) {
        (true, None) => return Err(usage.into()),
        (true, Some(_)) => Client::H2(ConnectClient::http2(&cfg)),
        (false, _) => Client::H3(H3Client::connect(&cfg).await?),
    };
    let Some(n) = repeat else {
        let a = client.post(&headers, body).await?;
        eprintln!("{:?} {}", a.version, a.status);
        println!("{}", String::from_utf8_lossy(&a.body));
        client.close().await;
        return Ok(());
    };
    // One warm-up call (the connection's first), then N timed ones.
    let mut ms = Vec::with_capacity(n);
    for i in 0..=n {
        let t = Instant::now();
        let a = client.post(&headers, body.clone()).await?;
        let took = t.elapsed().as_secs_f64() * 1e3;
        if a.status != 200 {
            return Err(format!("HTTP {}: {}", a.status, String::from_utf8_lossy(&a.body)).into());
        }
        if i == 0 {
            continue;
        }
        println!("{took:.1} ms {} bytes", a.body.len());
        ms.push(took);
    }
    print_timings(n, ms);
    client.close().await;
    Ok(())
}

/// The summary line large-answer.sh reads: `calls N p50 X ms min Y max Z`.
fn print_timings(n: usize, mut ms: Vec<f64>) {
    ms.sort_by(f64::total_cmp);
    if let (Some(min), Some(max)) = (ms.first(), ms.last()) {
        println!(
            "calls {n} p50 {:.1} ms min {min:.1} max {max:.1}",
            ms[ms.len() / 2]
        );
    }
}

/// `--mysql --repeat N`: one warm-up call, then N timed ones, each reading every row.
async fn run_mysql(cfg: &Config, query: &str, n: usize) -> Result<(), BoxError> {
    use mysql_async::prelude::Queryable;
    let port: u16 = std::env::var("FERRY_MYSQL_PORT")
        .map_err(|_| "--mysql needs FERRY_MYSQL_PORT (MariaDB's TCP port, with TLS)")?
        .parse()?;
    let tls = mysql_async::SslOpts::default().with_root_certs(vec![cfg.ca_pem.clone().into()]);
    let opts = mysql_async::OptsBuilder::default()
        .ip_or_hostname(cfg.host.clone())
        .tcp_port(port)
        .user(Some(cfg.user.clone()))
        .pass(Some(cfg.password.clone()))
        .db_name(Some(cfg.database.clone()))
        .ssl_opts(Some(tls));
    let mut conn = mysql_async::Conn::new(opts).await?;
    let mut ms = Vec::with_capacity(n);
    for i in 0..=n {
        let t = Instant::now();
        let mut result = conn.query_iter(query).await?;
        let mut bytes = 0usize;
        result
            .for_each(|row| {
                for v in row.unwrap() {
                    if let mysql_async::Value::Bytes(b) = v {
                        bytes += b.len();
                    }
                }
            })
            .await?;
        drop(result);
        let took = t.elapsed().as_secs_f64() * 1e3;
        if i == 0 {
            continue;
        }
        println!("{took:.1} ms {bytes} bytes of values");
        ms.push(took);
    }
    conn.disconnect().await?;
    print_timings(n, ms);
    Ok(())
}

/// `--load C N`: C HTTP/3 connections, each a closed loop of one call at a time, until N
/// calls are made in all; the calls' statuses are counted (an answer that is not 200 is
/// counted, not fatal, as h2load does).
async fn run_load(
    cfg: &Config,
    content_type: &'static str,
    auth: &str,
    body: bytes::Bytes,
    c: usize,
    n: usize,
) -> Result<(), BoxError> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let mut clients = Vec::with_capacity(c);
    for _ in 0..c {
        let mut client = H3Client::connect(cfg).await?;
        let headers = [("content-type", content_type), ("authorization", auth)];
        let warm = client.post(EXECUTE, &headers, body.clone()).await?;
        if warm.status != 200 {
            let text = String::from_utf8_lossy(&warm.body).into_owned();
            return Err(format!("warm-up call: HTTP {}: {text}", warm.status).into());
        }
        clients.push(client);
    }
    let left = Arc::new(AtomicUsize::new(n));
    let ok = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(AtomicUsize::new(0));
    let auth = auth.to_string();
    let start = Instant::now();
    let tasks: Vec<_> = clients
        .into_iter()
        .map(|mut client| {
            let (left, ok, failed, body, auth) = (
                left.clone(),
                ok.clone(),
                failed.clone(),
                body.clone(),
                auth.clone(),
            );
            tokio::spawn(async move {
                let headers = [
                    ("content-type", content_type),
                    ("authorization", auth.as_str()),
                ];
                while left
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |l| l.checked_sub(1))
                    .is_ok()
                {
                    match client.post(EXECUTE, &headers, body.clone()).await {
                        Ok(a) if a.status == 200 => ok.fetch_add(1, Ordering::Relaxed),
                        _ => failed.fetch_add(1, Ordering::Relaxed),
                    };
                }
                client.close().await;
            })
        })
        .collect();
    for t in tasks {
        t.await?;
    }
    let secs = start.elapsed().as_secs_f64();
    let (ok, failed) = (ok.load(Ordering::Relaxed), failed.load(Ordering::Relaxed));
    println!("finished in {:.2}s, {:.2} req/s", secs, n as f64 / secs);
    println!("requests: {n} total, {ok} succeeded, {failed} failed");
    println!("status codes: {ok} 2xx");
    Ok(())
}

/// The one client the calls go through: HTTP/3 (quinn) or, with `--h2`, HTTP/2 (reqwest).
enum Client {
    H2(ConnectClient),
    H3(H3Client),
}

impl Client {
    async fn post(
        &mut self,
        headers: &[(&str, &str)],
        body: bytes::Bytes,
    ) -> Result<Answer, BoxError> {
        match self {
            Client::H2(c) => {
                c.send(reqwest::Method::POST, EXECUTE, headers, body.to_vec())
                    .await
            }
            Client::H3(c) => c.post(EXECUTE, headers, body).await,
        }
    }

    async fn close(self) {
        if let Client::H3(c) = self {
            c.close().await;
        }
    }
}
