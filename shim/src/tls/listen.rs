//! TLS on the shim's TCP listener, for a shim that Envoy reaches over a network: the
//! clients' Basic credentials and every row cross the Envoy → shim hop, so off one host
//! it must be encrypted, and with a client CA only Envoy (holding a certificate that CA
//! signed) may talk to the shim at all.
//!
//! - `FERRY_SHIM_TLS_CERT` / `FERRY_SHIM_TLS_KEY`: the shim's certificate chain and key
//!   (PEM). With them the TCP listener speaks TLS only (ALPN h2, http/1.1).
//! - `FERRY_SHIM_TLS_CLIENT_CA`: require a client certificate signed by this CA (PEM);
//!   without it any client may connect, as with plain h2c (the clients' own MySQL
//!   passwords still decide what is served).
//!
//! Unset, the listener is plain h2c, for Envoy on the same host (the default address is
//! 127.0.0.1). The unix socket listener is never TLS: file permissions guard it. Every
//! file is read and checked at start; a missing half or an unreadable file stops the
//! shim (exit 2) naming the variable, never quoting the key.
use crate::settings::{Setting, Vars};
use crate::tls::pem_files;
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

/// A handshake that has not finished by then is dropped, so idle half-open
/// connections cannot pile up tasks.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Clone)]
pub struct ListenTls {
    acceptor: TlsAcceptor,
    /// Clients must present a certificate of `FERRY_SHIM_TLS_CLIENT_CA`.
    pub mutual: bool,
}

impl std::fmt::Debug for ListenTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ListenTls")
            .field("mutual", &self.mutual)
            .finish_non_exhaustive()
    }
}

impl ListenTls {
    /// From the `FERRY_SHIM_TLS_*` variables (`var` reads one): `None` when none is set.
    pub fn from_vars(vars: &Vars<'_>) -> Result<Option<ListenTls>, String> {
        let var = |name: &str| vars.set(name);
        let cert = var("FERRY_SHIM_TLS_CERT");
        let key = var("FERRY_SHIM_TLS_KEY");
        let client_ca = var("FERRY_SHIM_TLS_CLIENT_CA");
        let (cert, key) = match (cert, key) {
            (None, None) if client_ca.is_some() => {
                return Err("FERRY_SHIM_TLS_CLIENT_CA needs FERRY_SHIM_TLS_CERT and FERRY_SHIM_TLS_KEY (the shim's own certificate)".into())
            }
            (None, None) => return Ok(None),
            (Some(_), None) => return Err("FERRY_SHIM_TLS_CERT needs FERRY_SHIM_TLS_KEY".into()),
            (None, Some(_)) => return Err("FERRY_SHIM_TLS_KEY needs FERRY_SHIM_TLS_CERT".into()),
            (Some(cert), Some(key)) => (cert, key),
        };
        let pair =
            pem_files::key_pair(("FERRY_SHIM_TLS_CERT", &cert), ("FERRY_SHIM_TLS_KEY", &key))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS: {e}"))?;
        let mutual = client_ca.is_some();
        let builder = match &client_ca {
            None => builder.with_no_client_auth(),
            Some(ca) => {
                let mut roots = RootCertStore::empty();
                for cert in pem_files::certs("FERRY_SHIM_TLS_CLIENT_CA", ca)?.der {
                    roots
                        .add(cert)
                        .map_err(|e| format!("FERRY_SHIM_TLS_CLIENT_CA={ca}: {e}"))?;
                }
                let verifier =
                    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                        .build()
                        .map_err(|e| format!("FERRY_SHIM_TLS_CLIENT_CA={ca}: {e}"))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let mut config = builder
            .with_single_cert(pair.chain.der, pair.key)
            .map_err(|e| {
                format!("FERRY_SHIM_TLS_CERT={cert} with FERRY_SHIM_TLS_KEY={key}: {e}")
            })?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Some(ListenTls {
            acceptor: TlsAcceptor::from(Arc::new(config)),
            mutual,
        }))
    }

    /// The TLS handshake on an accepted connection, bounded by [`HANDSHAKE_TIMEOUT`].
    pub async fn accept(&self, stream: TcpStream) -> Result<TlsStream<TcpStream>, String> {
        match tokio::time::timeout(HANDSHAKE_TIMEOUT, self.acceptor.accept(stream)).await {
            Ok(Ok(tls)) => Ok(tls),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err(format!(
                "no TLS handshake within {} s",
                HANDSHAKE_TIMEOUT.as_secs()
            )),
        }
    }
}

/// TLS on the shim's TCP listener, for a shim on another host than Envoy
/// ([TLS from Envoy](../guides/tls.md#tls-from-envoy)); unset: plain h2c.
pub const SETTINGS: &[Setting] = &[
    Setting {
        name: "FERRY_SHIM_TLS_CERT",
        default: "",
        about: "the shim's certificate chain (PEM) ...",
    },
    Setting {
        name: "FERRY_SHIM_TLS_KEY",
        default: "",
        about: "... and its key",
    },
    Setting {
        name: "FERRY_SHIM_TLS_CLIENT_CA",
        default: "",
        about: "require a client certificate signed by this CA (PEM): only Envoy gets in",
    },
];

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn testdata(name: &str) -> String {
        format!("{}/testdata/{name}", env!("CARGO_MANIFEST_DIR"))
    }

    fn tls(vars: &[(&str, String)]) -> Result<Option<ListenTls>, String> {
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect();
        let lookup = |k: &str| vars.get(k).cloned();
        ListenTls::from_vars(&Vars::new(&lookup, &[SETTINGS]))
    }

    #[test]
    fn unset_is_plain_and_halves_are_refused() {
        assert!(tls(&[]).unwrap().is_none());
        let cert = ("FERRY_SHIM_TLS_CERT", testdata("mysql-tls-client.pem"));
        let key = ("FERRY_SHIM_TLS_KEY", testdata("mysql-tls-client.key"));
        let ca = ("FERRY_SHIM_TLS_CLIENT_CA", testdata("mysql-tls-client.pem"));
        assert!(tls(std::slice::from_ref(&cert))
            .unwrap_err()
            .contains("needs FERRY_SHIM_TLS_KEY"));
        assert!(tls(std::slice::from_ref(&key))
            .unwrap_err()
            .contains("needs FERRY_SHIM_TLS_CERT"));
        assert!(tls(std::slice::from_ref(&ca))
            .unwrap_err()
            .contains("FERRY_SHIM_TLS_CLIENT_CA needs"));
        let plain = tls(&[cert.clone(), key.clone()]).unwrap().unwrap();
        assert!(!plain.mutual);
        let mutual = tls(&[cert, key, ca]).unwrap().unwrap();
        assert!(mutual.mutual);
    }

    #[test]
    fn bad_files_name_the_variable_and_never_the_key() {
        let cert = ("FERRY_SHIM_TLS_CERT", testdata("mysql-tls-client.pem"));
        let missing = ("FERRY_SHIM_TLS_KEY", "/nonexistent/shim.key".to_owned());
        let e = tls(&[cert.clone(), missing]).unwrap_err();
        assert!(
            e.starts_with("FERRY_SHIM_TLS_KEY=/nonexistent/shim.key"),
            "{e}"
        );
        // A certificate file given as the key: no key in it.
        let not_a_key = ("FERRY_SHIM_TLS_KEY", testdata("mysql-tls-client.pem"));
        let e = tls(&[cert.clone(), not_a_key]).unwrap_err();
        assert!(e.contains("no PEM private key"), "{e}");
        // A key that is not the certificate's.
        let other_key = ("FERRY_SHIM_TLS_KEY", testdata("mysql-tls-other.key"));
        let e = tls(&[cert, other_key]).unwrap_err();
        assert!(e.contains("FERRY_SHIM_TLS_CERT="), "{e}");
        assert!(!e.contains("PRIVATE KEY"), "{e}");
    }
}
