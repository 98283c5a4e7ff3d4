//! Where MySQL listens (its own module: the settings, the TLS choice, the pools and the
//! health check all name it, and none of them imports another for it).
use crate::settings::{Setting, Vars};
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

/// Where MySQL listens.
pub const SETTINGS: &[Setting] = &[
    Setting {
        name: "FERRY_MYSQL_SOCKET",
        default: "",
        about: "MySQL's unix socket; when set, host and port are not used",
    },
    Setting {
        name: "FERRY_MYSQL_HOST",
        default: "127.0.0.1",
        about: "MySQL over TCP: its host ...",
    },
    Setting {
        name: "FERRY_MYSQL_PORT",
        default: "33306",
        about: "... and port",
    },
];

impl MysqlTarget {
    pub fn from_vars(vars: &Vars<'_>) -> Result<Self, String> {
        Ok(match vars.set("FERRY_MYSQL_SOCKET") {
            Some(path) => MysqlTarget::Socket(path.into()),
            None => MysqlTarget::Tcp {
                host: vars.text("FERRY_MYSQL_HOST").unwrap_or_default(),
                port: vars
                    .parsed("FERRY_MYSQL_PORT", "a port", |v| v.parse().ok())?
                    .unwrap_or_default(),
            },
        })
    }
}
