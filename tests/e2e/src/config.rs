//! Where the stack under test is: the same environment variables as scripts/env.sh.
use std::path::PathBuf;

#[derive(Clone, Debug)]
pub struct Config {
    pub host: String,
    pub port: u16,
    pub ca_pem: PathBuf,
    pub user: String,
    pub password: String,
    pub database: String,
    pub mysql_socket: PathBuf,
    /// MariaDB's root credentials (a client option file, mode 0600), made by scripts/stack.sh.
    pub root_cnf: PathBuf,
}

fn var(name: &str, default: &str) -> String {
    std::env::var(name)
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| default.to_owned())
}

impl Config {
    pub fn from_env() -> Config {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
        let run_dir = PathBuf::from(var("FERRY_RUN_DIR", &root.join(".run").to_string_lossy()));
        Config {
            host: var("FERRY_HOST", "127.0.0.1"),
            port: var("FERRY_PORT", "8443")
                .parse()
                .expect("FERRY_PORT is a port number"),
            ca_pem: run_dir.join("certs/ca.pem"),
            user: var("FERRY_MYSQL_USER", "ferry"),
            password: var("FERRY_MYSQL_PASSWORD", "ferry"),
            database: var("FERRY_MYSQL_DATABASE", "ferry"),
            mysql_socket: PathBuf::from(var(
                "FERRY_MYSQL_SOCKET",
                &run_dir.join("mysql.sock").to_string_lossy(),
            )),
            root_cnf: run_dir.join("mysql-root.cnf"),
        }
    }

    pub fn base_url(&self) -> String {
        format!("https://{}:{}", self.host, self.port)
    }

    /// The same stack on another port (e.g. the e2e gateway whose shim reaches MySQL over TCP).
    pub fn with_port(&self, port: u16) -> Config {
        Config {
            port,
            ..self.clone()
        }
    }

    /// root's password, from the option file the stack wrote.
    pub fn root_password(&self) -> String {
        let cnf = std::fs::read_to_string(&self.root_cnf)
            .unwrap_or_else(|e| panic!("reading {}: {e}", self.root_cnf.display()));
        cnf.lines()
            .find_map(|l| l.strip_prefix("password="))
            .unwrap_or_else(|| panic!("no password= in {}", self.root_cnf.display()))
            .to_owned()
    }

    pub fn basic_auth(&self) -> String {
        basic_auth(&self.user, &self.password)
    }

    pub fn ca_der(&self) -> Vec<rustls_pki_types::CertificateDer<'static>> {
        use rustls_pki_types::pem::PemObject;
        rustls_pki_types::CertificateDer::pem_file_iter(&self.ca_pem)
            .unwrap_or_else(|e| panic!("reading {}: {e}", self.ca_pem.display()))
            .collect::<Result<_, _>>()
            .expect("CA certificate PEM")
    }
}

pub fn basic_auth(user: &str, password: &str) -> String {
    use base64::Engine;
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
    )
}

/// rustls needs one process-wide crypto provider; ring is what we build with.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
