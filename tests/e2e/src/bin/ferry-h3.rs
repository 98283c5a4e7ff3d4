//! Query Ferry over HTTP/3 from the command line (curl here has no HTTP/3):
//!   ferry-h3 'SELECT 1'
//!   ferry-h3 --proto --repeat 10 'SELECT * FROM large'
//! Uses FERRY_HOST/FERRY_PORT/FERRY_RUN_DIR (CA) and FERRY_MYSQL_USER/PASSWORD
//! like scripts/env.sh; prints the Connect JSON answer. `--proto` sends Connect proto;
//! `--repeat N` makes N calls on one connection and prints their timings (a second
//! HTTP/3 client, quinn, beside k6's quic-go: docs/benchmarks/http3.md "HTTP/3 bulk transfer");
//! `--h2` makes the same timed calls over HTTP/2 (reqwest), to compare in one client.
use ferry_e2e::{
    config::Config, connect::ConnectClient, connect::EXECUTE, h3_client::H3Client, Answer, BoxError,
};
use ferry_proto::psdb::v1alpha1::ExecuteRequest;
use prost::Message;
use std::time::Instant;

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let usage = "usage: ferry-h3 [--proto] [--repeat N [--h2]] 'SQL'";
    let mut proto = false;
    let mut h2 = false;
    let mut repeat: Option<usize> = None;
    let mut query = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--proto" => proto = true,
            "--h2" => h2 = true,
            "--repeat" => repeat = Some(args.next().ok_or(usage)?.parse()?),
            _ if query.is_none() => query = Some(a),
            _ => return Err(usage.into()),
        }
    }
    let query = query.ok_or(usage)?;
    let cfg = Config::from_env();
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
    ms.sort_by(f64::total_cmp);
    if let (Some(min), Some(max)) = (ms.first(), ms.last()) {
        println!(
            "calls {n} p50 {:.1} ms min {min:.1} max {max:.1}",
            ms[ms.len() / 2]
        );
    }
    client.close().await;
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
