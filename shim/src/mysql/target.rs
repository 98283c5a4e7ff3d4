//! Where MySQL listens (its own module: the settings, the TLS choice, the pools and the
//! health check all name it, and none of them imports another for it).
use std::path::PathBuf;

/// Where MySQL listens: a unix socket is preferred when co-located (no TCP stack).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MysqlTarget {
    Socket(PathBuf),
    Tcp { host: String, port: u16 },
}

impl std::fmt::Display for MysqlTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MysqlTarget::Socket(path) => write!(f, "unix:{}", path.display()),
            MysqlTarget::Tcp { host, port } => write!(f, "{host}:{port}"),
        }
    }
}
