//! Query Ferry over HTTP/3 from the command line (curl here has no HTTP/3):
//!   ferry-h3 'SELECT 1'
//! Uses FERRY_HOST/FERRY_PORT/FERRY_RUN_DIR (CA) and FERRY_MYSQL_USER/PASSWORD
//! like scripts/env.sh; prints the Connect JSON answer.
use ferry_e2e::{config::Config, connect::EXECUTE, h3_client::H3Client};

#[tokio::main]
async fn main() -> Result<(), ferry_e2e::BoxError> {
    let query = std::env::args().nth(1).ok_or("usage: ferry-h3 'SQL'")?;
    let cfg = Config::from_env();
    let mut client = H3Client::connect(&cfg).await?;
    let body = serde_json::json!({ "query": query }).to_string();
    let auth = cfg.basic_auth();
    let a = client
        .post(
            EXECUTE,
            &[
                ("content-type", "application/json"),
                ("authorization", &auth),
            ],
            body.into(),
        )
        .await?;
    eprintln!("{:?} {}", a.version, a.status);
    println!("{}", String::from_utf8_lossy(&a.body));
    client.close().await;
    Ok(())
}
