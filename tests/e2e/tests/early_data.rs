//! HTTP/3 0-RTT is refused by the shipped configuration (FERRY_EARLY_DATA=false):
//! early data can be replayed, and Envoy does not tell the filter which requests
//! came in it. The gateway still issues session tickets (resumption works), but
//! none of them allows early data, so a client that wants 0-RTT cannot send any.
mod common;
use common::*;
use rustls::client::{ClientSessionMemoryCache, ClientSessionStore, Tls13ClientSessionValue};
use rustls::NamedGroup;
use rustls_pki_types::ServerName;
use std::net::ToSocketAddrs;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A session cache that also records the early-data allowance of every ticket.
#[derive(Debug)]
struct RecordingStore {
    inner: ClientSessionMemoryCache,
    early_data_sizes: Mutex<Vec<u32>>,
}

impl ClientSessionStore for RecordingStore {
    fn set_kx_hint(&self, name: ServerName<'static>, group: NamedGroup) {
        self.inner.set_kx_hint(name, group)
    }
    fn kx_hint(&self, name: &ServerName<'_>) -> Option<NamedGroup> {
        self.inner.kx_hint(name)
    }
    fn set_tls12_session(
        &self,
        name: ServerName<'static>,
        value: rustls::client::Tls12ClientSessionValue,
    ) {
        self.inner.set_tls12_session(name, value)
    }
    fn tls12_session(
        &self,
        name: &ServerName<'_>,
    ) -> Option<rustls::client::Tls12ClientSessionValue> {
        self.inner.tls12_session(name)
    }
    fn remove_tls12_session(&self, name: &ServerName<'static>) {
        self.inner.remove_tls12_session(name)
    }
    fn insert_tls13_ticket(&self, name: ServerName<'static>, value: Tls13ClientSessionValue) {
        self.early_data_sizes
            .lock()
            .unwrap()
            .push(value.max_early_data_size());
        self.inner.insert_tls13_ticket(name, value)
    }
    fn take_tls13_ticket(&self, name: &ServerName<'static>) -> Option<Tls13ClientSessionValue> {
        self.inner.take_tls13_ticket(name)
    }
}

#[tokio::test]
async fn http3_0rtt_is_refused_by_default() {
    let cfg = cfg();
    let store = Arc::new(RecordingStore {
        inner: ClientSessionMemoryCache::new(8),
        early_data_sizes: Mutex::new(Vec::new()),
    });
    let mut tls = ferry_e2e::h3_client::tls_config(&cfg).unwrap();
    tls.enable_early_data = true; // the client would send 0-RTT if allowed
    tls.resumption = rustls::client::Resumption::store(store.clone());
    let quic = quinn::crypto::rustls::QuicClientConfig::try_from(tls).unwrap();
    let addr = (cfg.host.as_str(), cfg.port)
        .to_socket_addrs()
        .unwrap()
        .next()
        .unwrap();
    let mut endpoint = quinn::Endpoint::client("0.0.0.0:0".parse().unwrap()).unwrap();
    endpoint.set_default_client_config(quinn::ClientConfig::new(Arc::new(quic)));

    // A full handshake; the tickets arrive after it.
    let conn = endpoint.connect(addr, "localhost").unwrap().await.unwrap();
    for _ in 0..50 {
        if !store.early_data_sizes.lock().unwrap().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    conn.close(0u32.into(), b"done");
    let sizes = store.early_data_sizes.lock().unwrap().clone();
    assert!(!sizes.is_empty(), "Envoy issued no session ticket");
    assert!(
        sizes.iter().all(|&s| s == 0),
        "tickets allow early data: {sizes:?}"
    );

    // The next connection resumes, but may not carry a request before the handshake.
    let connecting = endpoint.connect(addr, "localhost").unwrap();
    let conn = match connecting.into_0rtt() {
        Ok(_) => panic!("a 0-RTT connection was possible"),
        Err(connecting) => connecting.await.expect("a 1-RTT resumed connection"),
    };
    conn.close(0u32.into(), b"done");
    endpoint.wait_idle().await;

    // And plain queries still work.
    let r = execute(Way::ConnectJsonH3, "SELECT 1").await;
    assert!(r.error.is_none());
}
