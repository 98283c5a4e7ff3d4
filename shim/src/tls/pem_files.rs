//! PEM files named by settings (TLS to MySQL: mysql/tls.rs; TLS on the listener:
//! tls/listen.rs), read and checked at start as rustls will use them, so a bad file
//! stops the shim naming its variable instead of failing every connection. No error
//! quotes a key file.
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;

/// Every certificate of a PEM file (at least one), and the file's bytes.
pub struct Certs {
    pub pem: Vec<u8>,
    pub der: Vec<CertificateDer<'static>>,
}

/// The certificates of `path`, the value of setting `var`.
pub fn certs(var: &str, path: &str) -> Result<Certs, String> {
    let pem = std::fs::read(path).map_err(|e| format!("{var}={path}: {e}"))?;
    let der = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{var}={path}: {e}"))?;
    if der.is_empty() {
        return Err(format!("{var}={path}: no PEM certificate in it"));
    }
    Ok(Certs { pem, der })
}

/// A certificate chain and its private key (PKCS#8, PKCS#1 or SEC1).
pub struct KeyPair {
    pub chain: Certs,
    pub key_pem: Vec<u8>,
    pub key: PrivateKeyDer<'static>,
}

/// The chain of setting `cert_var` and the key of `key_var`, checked to belong
/// together: an X.509 v3 certificate whose public key is the key's.
pub fn key_pair(
    (cert_var, cert_path): (&str, &str),
    (key_var, key_path): (&str, &str),
) -> Result<KeyPair, String> {
    let chain = certs(cert_var, cert_path)?;
    let key_pem = std::fs::read(key_path).map_err(|e| format!("{key_var}={key_path}: {e}"))?;
    let key = PrivateKeyDer::from_pem_slice(&key_pem)
        .map_err(|_| format!("{key_var}={key_path}: no PEM private key in it"))?;
    CertifiedKey::from_der(
        chain.der.clone(),
        key.clone_key(),
        &rustls::crypto::ring::default_provider(),
    )
    .map_err(|e| format!("{cert_var}={cert_path} with {key_var}={key_path}: {e}"))?;
    Ok(KeyPair {
        chain,
        key_pem,
        key,
    })
}
