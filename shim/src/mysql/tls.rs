//! TLS on the shim's TCP connections to MySQL (`FERRY_MYSQL_TLS`, `FERRY_MYSQL_TLS_CA`,
//! `_SERVER_NAME`, and a client certificate: `_CERT`, `_KEY`).
//!
//! Every statement and every client's login crosses this hop, so a MySQL on another
//! host gets TLS with the server's certificate verified unless the operator says
//! otherwise. A unix socket or a loopback address never leaves the machine: no TLS
//! by default. The modes are named after MySQL's `--ssl-mode`; PREFERRED (silently
//! falls back to plain text) and VERIFY_CA (the client library's name-check skip does
//! not work with the rustls it is built on) are not offered.
use crate::mysql::target::MysqlTarget;
use crate::settings::{Setting, Vars};
use crate::tls::pem_files;
use mysql_async::{ClientIdentity, SslOpts};
use std::net::IpAddr;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlsMode {
    /// Plain MySQL protocol.
    Disabled,
    /// Encrypted, the certificate not checked (protects against listening, not
    /// against someone in the middle).
    Required,
    /// Encrypted, the certificate chain checked against the CA (`FERRY_MYSQL_TLS_CA`,
    /// else the Mozilla roots compiled in) and its name against the host.
    VerifyIdentity,
}

impl TlsMode {
    fn parse(v: &str) -> Option<TlsMode> {
        match v.to_ascii_lowercase().replace('-', "_").as_str() {
            "disabled" | "off" => Some(TlsMode::Disabled),
            "required" => Some(TlsMode::Required),
            "verify_identity" => Some(TlsMode::VerifyIdentity),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            TlsMode::Disabled => "disabled",
            TlsMode::Required => "required",
            TlsMode::VerifyIdentity => "verify_identity",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MysqlTls {
    pub mode: TlsMode,
    /// The CA certificates (PEM), read once at start: a missing file fails the start,
    /// not every connection.
    ca_pem: Option<Vec<u8>>,
    /// The name the certificate must carry when it differs from the host dialled
    /// (MySQL reached by IP address).
    server_name: Option<String>,
    /// The shim's own certificate, for a server that asks for one (`REQUIRE X509`).
    /// It never replaces the client's password: the account still needs it.
    client: Option<ClientPem>,
}

/// A client certificate chain and its key (PEM), read at start.
#[derive(Clone, PartialEq, Eq)]
struct ClientPem {
    cert_chain: Vec<u8>,
    key: Vec<u8>,
}

/// Never the key's bytes, wherever the settings are printed.
impl std::fmt::Debug for ClientPem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientPem")
            .field(
                "cert_chain",
                &format_args!("{} bytes", self.cert_chain.len()),
            )
            .field("key", &format_args!("<redacted>"))
            .finish()
    }
}

impl MysqlTls {
    /// The settings for `target`; `var` returns a variable, unset or empty as `None`.
    pub fn from_vars(vars: &Vars<'_>, target: &MysqlTarget) -> Result<MysqlTls, String> {
        let var = |name: &str| vars.set(name);
        let explicit = match var("FERRY_MYSQL_TLS") {
            None => None,
            Some(v) => Some(TlsMode::parse(&v).ok_or_else(|| {
                format!("FERRY_MYSQL_TLS={v:?} is not one of disabled, required, verify_identity")
            })?),
        };
        let ca_path = var("FERRY_MYSQL_TLS_CA");
        let server_name = var("FERRY_MYSQL_TLS_SERVER_NAME");
        let (cert_path, key_path) = (var("FERRY_MYSQL_TLS_CERT"), var("FERRY_MYSQL_TLS_KEY"));
        let mode = match (explicit, target) {
            (Some(mode), _) => mode,
            (None, MysqlTarget::Socket(_)) => TlsMode::Disabled,
            // A CA or a name to check says the operator wants the certificate verified.
            (None, _) if ca_path.is_some() || server_name.is_some() => TlsMode::VerifyIdentity,
            (None, MysqlTarget::Tcp { host, .. }) if is_loopback(host) => TlsMode::Disabled,
            (None, MysqlTarget::Tcp { .. }) => TlsMode::VerifyIdentity,
        };
        if let MysqlTarget::Socket(path) = target {
            let set = [
                (
                    "FERRY_MYSQL_TLS",
                    explicit.filter(|m| *m != TlsMode::Disabled).is_some(),
                ),
                ("FERRY_MYSQL_TLS_CA", ca_path.is_some()),
                ("FERRY_MYSQL_TLS_SERVER_NAME", server_name.is_some()),
                ("FERRY_MYSQL_TLS_CERT", cert_path.is_some()),
                ("FERRY_MYSQL_TLS_KEY", key_path.is_some()),
            ];
            if let Some((name, _)) = set.iter().find(|(_, set)| *set) {
                return Err(format!(
                    "{name} needs MySQL over TCP; FERRY_MYSQL_SOCKET={} is a local socket (TLS does not apply)",
                    path.display()
                ));
            }
        }
        if mode != TlsMode::VerifyIdentity {
            for (name, set) in [
                ("FERRY_MYSQL_TLS_CA", ca_path.is_some()),
                ("FERRY_MYSQL_TLS_SERVER_NAME", server_name.is_some()),
            ] {
                if set {
                    return Err(format!(
                        "{name} is only used with FERRY_MYSQL_TLS=verify_identity (it is {})",
                        mode.as_str()
                    ));
                }
            }
        }
        let ca_pem = match ca_path {
            None => None,
            Some(path) => Some(pem_files::certs("FERRY_MYSQL_TLS_CA", &path)?.pem),
        };
        let client = match (cert_path, key_path) {
            (None, None) => None,
            (Some(_), None) | (None, Some(_)) => {
                return Err("FERRY_MYSQL_TLS_CERT and FERRY_MYSQL_TLS_KEY go together".into())
            }
            (Some(_), Some(_)) if mode == TlsMode::Disabled => {
                return Err(
                    "FERRY_MYSQL_TLS_CERT/_KEY need TLS (FERRY_MYSQL_TLS is disabled)".into(),
                )
            }
            (Some(cert), Some(key)) => Some(read_client(&cert, &key)?),
        };
        Ok(MysqlTls {
            mode,
            ca_pem,
            server_name,
            client,
        })
    }

    /// What mysql_async connects with; `None` is plain text.
    pub fn ssl_opts(&self) -> Option<SslOpts> {
        match self.mode {
            TlsMode::Disabled => None,
            TlsMode::Required => Some(self.base_opts().with_danger_accept_invalid_certs(true)),
            TlsMode::VerifyIdentity => {
                let mut opts = self
                    .base_opts()
                    .with_danger_tls_hostname_override(self.server_name.clone());
                if let Some(pem) = &self.ca_pem {
                    // The operator's CA only: a private CA should not share trust with
                    // every public one.
                    opts = opts
                        .with_root_certs(vec![pem.clone().into()])
                        .with_disable_built_in_roots(true);
                }
                Some(opts)
            }
        }
    }

    fn base_opts(&self) -> SslOpts {
        SslOpts::default().with_client_identity(
            self.client
                .as_ref()
                .map(|c| ClientIdentity::new(c.cert_chain.clone().into(), c.key.clone().into())),
        )
    }

    /// For the start-up log line: the mode, what the certificate is checked against,
    /// and whether the shim shows one of its own.
    pub fn describe(&self) -> String {
        let client = if self.client.is_some() {
            ", client certificate"
        } else {
            ""
        };
        match (self.mode, &self.ca_pem, &self.server_name) {
            (TlsMode::VerifyIdentity, ca, name) => format!(
                "verify_identity (CA: {}{}{client})",
                if ca.is_some() {
                    "FERRY_MYSQL_TLS_CA"
                } else {
                    "built-in roots"
                },
                name.as_ref()
                    .map_or(String::new(), |n| format!(", name {n}"))
            ),
            (TlsMode::Required, _, _) if self.client.is_some() => {
                "required (client certificate)".into()
            }
            (mode, _, _) => mode.as_str().to_string(),
        }
    }
}

/// What went wrong in a failed connection's TLS handshake, if that is what failed
/// (mysql_async wraps rustls's error in an io::Error, twice named "Input/output error").
pub fn handshake_failure(e: &mysql_async::Error) -> Option<String> {
    use mysql_async::{Error, IoError};
    match e {
        Error::Io(IoError::Io(io)) => io
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<rustls::Error>())
            .map(ToString::to_string),
        Error::Io(IoError::Tls(tls)) => Some(tls.to_string()),
        Error::Driver(mysql_async::DriverError::NoClientSslFlagFromServer) => {
            Some("the server does not offer TLS".into())
        }
        _ => None,
    }
}

/// The client certificate chain and its key, checked to belong together (tls/pem_files.rs).
fn read_client(cert_path: &str, key_path: &str) -> Result<ClientPem, String> {
    let pair = pem_files::key_pair(
        ("FERRY_MYSQL_TLS_CERT", cert_path),
        ("FERRY_MYSQL_TLS_KEY", key_path),
    )?;
    Ok(ClientPem {
        cert_chain: pair.chain.pem,
        key: pair.key_pem,
    })
}

/// `localhost` and loopback addresses: traffic that never leaves the machine.
fn is_loopback(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// TLS from the shim to MySQL ([TLS to MySQL](../guides/tls.md#tls-to-mysql)).
pub const SETTINGS: &[Setting] = &[
    Setting {
        name: "FERRY_MYSQL_TLS",
        default: "",
        about: "`disabled`, `required` or `verify_identity`; unset: `disabled` for a socket or a loopback host, else `verify_identity`",
    },
    Setting {
        name: "FERRY_MYSQL_TLS_CA",
        default: "",
        about: "PEM file of the CA(s) MySQL's certificate must chain to (unset: the Mozilla roots); read at start",
    },
    Setting {
        name: "FERRY_MYSQL_TLS_SERVER_NAME",
        default: "",
        about: "the name MySQL's certificate must carry (unset: the host), when it is dialled by another name or address",
    },
    Setting {
        name: "FERRY_MYSQL_TLS_CERT",
        default: "",
        about: "the shim's client certificate chain (PEM), for a server that asks for one ...",
    },
    Setting {
        name: "FERRY_MYSQL_TLS_KEY",
        default: "",
        about: "... and its key",
    },
];

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn tcp(host: &str) -> MysqlTarget {
        MysqlTarget::Tcp {
            host: host.into(),
            port: 3306,
        }
    }

    fn tls(vars: &[(&str, &str)], target: &MysqlTarget) -> Result<MysqlTls, String> {
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let lookup = |name: &str| vars.get(name).cloned();
        MysqlTls::from_vars(&Vars::new(&lookup, &[SETTINGS]), target)
    }

    #[test]
    fn defaults_follow_where_mysql_is() {
        let socket = MysqlTarget::Socket("/run/mysqld.sock".into());
        assert_eq!(tls(&[], &socket).unwrap().mode, TlsMode::Disabled);
        for local in [
            "127.0.0.1",
            "127.3.2.1",
            "::1",
            "[::1]",
            "localhost",
            "LOCALHOST",
        ] {
            assert_eq!(
                tls(&[], &tcp(local)).unwrap().mode,
                TlsMode::Disabled,
                "{local}"
            );
        }
        for remote in [
            "10.0.0.5",
            "db.internal",
            "mariadb",
            "2001:db8::1",
            "localhost.evil.example",
        ] {
            let t = tls(&[], &tcp(remote)).unwrap();
            assert_eq!(t.mode, TlsMode::VerifyIdentity, "{remote}");
            assert_eq!(t.describe(), "verify_identity (CA: built-in roots)");
            assert!(t.ssl_opts().is_some());
        }
    }

    #[test]
    fn explicit_modes_and_their_options() {
        let t = tls(&[("FERRY_MYSQL_TLS", "disabled")], &tcp("db.internal")).unwrap();
        assert_eq!((t.mode, t.ssl_opts()), (TlsMode::Disabled, None));
        let t = tls(&[("FERRY_MYSQL_TLS", "REQUIRED")], &tcp("127.0.0.1")).unwrap();
        let opts = t.ssl_opts().unwrap();
        assert!(opts.accept_invalid_certs());
        let t = tls(&[("FERRY_MYSQL_TLS", "verify-identity")], &tcp("127.0.0.1")).unwrap();
        let opts = t.ssl_opts().unwrap();
        assert!(!opts.accept_invalid_certs() && !opts.skip_domain_validation());
        assert!(!opts.disable_built_in_roots());
        assert_eq!(t.mode.as_str(), "verify_identity");
    }

    #[test]
    fn a_ca_file_is_read_once_and_replaces_the_built_in_roots() {
        let dir = std::env::temp_dir().join(format!("ferry-mysql-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ca = dir.join("ca.pem");
        std::fs::write(
            &ca,
            "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        let ca = ca.to_string_lossy().into_owned();
        // A CA (or a name) alone turns verification on, even for a loopback host.
        let t = tls(&[("FERRY_MYSQL_TLS_CA", &ca)], &tcp("127.0.0.1")).unwrap();
        assert_eq!(t.mode, TlsMode::VerifyIdentity);
        let opts = t.ssl_opts().unwrap();
        assert!(opts.disable_built_in_roots());
        assert_eq!(opts.root_certs().len(), 1);
        let t = tls(
            &[("FERRY_MYSQL_TLS_SERVER_NAME", "db.internal")],
            &tcp("10.0.0.5"),
        )
        .unwrap();
        assert_eq!(
            t.describe(),
            "verify_identity (CA: built-in roots, name db.internal)"
        );
        assert_eq!(
            t.ssl_opts().unwrap().tls_hostname_override(),
            Some("db.internal")
        );

        let not_pem = dir.join("not.pem");
        std::fs::write(&not_pem, "hello").unwrap();
        let e = tls(
            &[("FERRY_MYSQL_TLS_CA", &not_pem.to_string_lossy())],
            &tcp("db"),
        )
        .unwrap_err();
        assert!(e.contains("no PEM certificate"), "{e}");
        let e = tls(&[("FERRY_MYSQL_TLS_CA", "/nonexistent/ca.pem")], &tcp("db")).unwrap_err();
        assert!(
            e.starts_with("FERRY_MYSQL_TLS_CA=/nonexistent/ca.pem: "),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_client_certificate_goes_with_its_key_and_the_key_never_prints() {
        let data = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata");
        let cert = format!("{data}/mysql-tls-client.pem");
        let key = format!("{data}/mysql-tls-client.key");
        let both = [
            ("FERRY_MYSQL_TLS_CERT", cert.as_str()),
            ("FERRY_MYSQL_TLS_KEY", key.as_str()),
        ];
        let t = tls(&both, &tcp("db.internal")).unwrap();
        assert_eq!(
            t.describe(),
            "verify_identity (CA: built-in roots, client certificate)"
        );
        assert!(t.ssl_opts().unwrap().client_identity().is_some());
        let secret = std::fs::read_to_string(&key).unwrap();
        let secret = secret.lines().nth(1).unwrap();
        let printed = format!("{t:?}");
        assert!(
            printed.contains("<redacted>") && !printed.contains(secret),
            "{printed}"
        );
        let t = tls(
            &[both[0], both[1], ("FERRY_MYSQL_TLS", "required")],
            &tcp("db"),
        )
        .unwrap();
        assert_eq!(t.describe(), "required (client certificate)");
        assert!(t.ssl_opts().unwrap().client_identity().is_some());

        let e = tls(&both[..1], &tcp("db")).unwrap_err();
        assert!(e.contains("go together"), "{e}");
        let e = tls(&both, &tcp("127.0.0.1")).unwrap_err(); // loopback: TLS is off
        assert!(e.contains("need TLS"), "{e}");
        let e = tls(&[both[0], ("FERRY_MYSQL_TLS_KEY", &cert)], &tcp("db")).unwrap_err();
        assert!(e.ends_with("no PEM private key in it"), "{e}");
        // A key that is not the certificate's: refused at start, not at each connection.
        let other = format!("{data}/mysql-tls-other.key");
        let e = tls(&[both[0], ("FERRY_MYSQL_TLS_KEY", &other)], &tcp("db")).unwrap_err();
        assert!(
            e.starts_with(&format!(
                "FERRY_MYSQL_TLS_CERT={cert} with FERRY_MYSQL_TLS_KEY={other}: "
            )),
            "{e}"
        );
        assert!(!e.contains(secret), "{e}");
    }

    #[test]
    fn contradictions_are_refused_at_start() {
        let socket = MysqlTarget::Socket("/run/mysqld.sock".into());
        let e = tls(&[("FERRY_MYSQL_TLS", "required")], &socket).unwrap_err();
        assert!(e.starts_with("FERRY_MYSQL_TLS needs MySQL over TCP"), "{e}");
        let e = tls(&[("FERRY_MYSQL_TLS_CA", "/etc/ca.pem")], &socket).unwrap_err();
        assert!(
            e.starts_with(
                "FERRY_MYSQL_TLS_CA needs MySQL over TCP; FERRY_MYSQL_SOCKET=/run/mysqld.sock"
            ),
            "{e}"
        );
        assert!(tls(&[("FERRY_MYSQL_TLS", "disabled")], &socket).is_ok());
        let e = tls(
            &[
                ("FERRY_MYSQL_TLS", "required"),
                ("FERRY_MYSQL_TLS_SERVER_NAME", "db"),
            ],
            &tcp("db"),
        )
        .unwrap_err();
        assert!(
            e.contains("only used with FERRY_MYSQL_TLS=verify_identity"),
            "{e}"
        );
        let e = tls(&[("FERRY_MYSQL_TLS", "preferred")], &tcp("db")).unwrap_err();
        assert!(e.contains("disabled, required, verify_identity"), "{e}");
    }
}
