//! How far the client is, for one decision: whether compressing its answers pays.
//! On a fast link (the same host, zone or region) the bytes saved cost nothing to
//! send, while compressing costs CPU on both ends (docs/benchmarks/compression.md "By distance").
//!
//! Envoy tells the filter in two request headers, each set by the HTTP connection
//! manager's early header mutation (envoy/ferry.yaml) after removing a client's own:
//! - [`CLIENT_RTT_HEADER`]: the connection's last measured round trip in whole ms
//!   (`%DOWNSTREAM_CX_RTT%`, the kernel's smoothed TCP estimate). Envoy 1.40 measures
//!   none for QUIC: over HTTP/3 it is empty.
//! - [`CLIENT_ADDR_HEADER`]: the peer's address (`%DOWNSTREAM_DIRECT_REMOTE_ADDRESS_WITHOUT_PORT%`).
//!   Used only when there is no round trip: a client in `near_networks` (by default
//!   the gateway's own host, loopback) is near whatever its protocol.

use std::net::IpAddr;

use ipnet::IpNet;

pub const CLIENT_RTT_HEADER: &str = "x-ferry-client-rtt-ms";
pub const CLIENT_ADDR_HEADER: &str = ferry_wire::headers::CLIENT_ADDR;

/// The IP of an address as Envoy gives `source.address` (`1.2.3.4:5678`,
/// `[::1]:5678`, or a bare IP); `None` for anything else (a pipe, nothing).
pub fn peer_ip(address: &str) -> Option<String> {
    let address = address.trim();
    let ip = match address.parse::<std::net::SocketAddr>() {
        Ok(socket) => socket.ip(),
        Err(_) => address.parse::<IpAddr>().ok()?,
    };
    Some(ip.to_string())
}

/// `compression.min_rtt_ms`'s default: clients a few ms away at most (the same host,
/// zone or region: fast links) get identity. Measured
/// (docs/benchmarks/compression.md "By distance"): at 1.8 ms and 1 Gbit/s gzip and zstd took 1.6–2.3× identity's time
/// and S2 1.04×; at 42 ms and 20 Mbit/s they took 0.27–0.44× its time.
pub const DEFAULT_MIN_RTT_MS: u64 = 5;

/// `compression.near_networks`'s default: the gateway's own host.
pub const DEFAULT_NEAR_NETWORKS: &[&str] = &["127.0.0.0/8", "::1/128"];

/// Which clients are too near for compressed answers to pay.
#[derive(Clone, Debug, PartialEq)]
pub struct Distance {
    /// A client whose measured round trip is below this is near (`compression.min_rtt_ms`);
    /// 0: none is, whatever its address (compress at any distance).
    pub min_rtt_ms: u64,
    /// A client with no measured round trip is near when its address is in one of
    /// these (`compression.near_networks`).
    pub near_networks: Vec<IpNet>,
}

impl Default for Distance {
    fn default() -> Self {
        Distance {
            min_rtt_ms: DEFAULT_MIN_RTT_MS,
            near_networks: DEFAULT_NEAR_NETWORKS
                .iter()
                .filter_map(|n| n.parse().ok())
                .collect(),
        }
    }
}

impl Distance {
    /// Parses `compression.near_networks` entries: CIDR (`10.0.0.0/8`) or one address.
    pub fn networks(names: &[String]) -> Result<Vec<IpNet>, String> {
        names
            .iter()
            .map(|name| {
                let name = name.trim();
                name.parse::<IpNet>()
                    .or_else(|_| name.parse::<IpAddr>().map(IpNet::from))
                    .map_err(|_| {
                        format!("compression.near_networks: {name:?} is not a network (such as 10.0.0.0/8 or ::1/128)")
                    })
            })
            .collect()
    }

    /// Whether a client (the two header values) is too near for compressed answers.
    /// A client of unknown distance (no readable round trip, an address outside
    /// `near_networks` or none) is not near: it asked for compression.
    pub fn too_near(&self, rtt_ms: Option<&str>, addr: Option<&str>) -> bool {
        if self.min_rtt_ms == 0 {
            return false;
        }
        if let Some(rtt) = rtt_ms.and_then(|v| v.trim().parse::<u64>().ok()) {
            return rtt < self.min_rtt_ms;
        }
        let Some(addr) = addr.and_then(|a| a.trim().parse::<IpAddr>().ok()) else {
            return false;
        };
        // A dual-stack listener reports IPv4 peers as ::ffff:a.b.c.d.
        let v4 = match addr {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4),
            IpAddr::V4(_) => None,
        };
        self.near_networks
            .iter()
            .any(|net| net.contains(&addr) || v4.is_some_and(|v4| net.contains(&v4)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn distance(min_rtt_ms: u64, networks: &[&str]) -> Distance {
        let names: Vec<String> = networks.iter().map(|n| n.to_string()).collect();
        Distance {
            min_rtt_ms,
            near_networks: Distance::networks(&names).unwrap(),
        }
    }

    #[test]
    fn a_measured_round_trip_decides() {
        let d = distance(5, &["127.0.0.0/8"]);
        assert!(d.too_near(Some("0"), None));
        assert!(d.too_near(Some(" 4 "), Some("192.0.2.1")));
        assert!(!d.too_near(Some("5"), None));
        assert!(
            !d.too_near(Some("40"), Some("127.0.0.1")),
            "measured far wins"
        );
        let d = distance(1, &[]);
        assert!(d.too_near(Some("0"), None));
        assert!(!d.too_near(Some("1"), None));
    }

    #[test]
    fn without_a_round_trip_the_address_decides() {
        let d = Distance::default();
        assert!(d.too_near(None, Some("127.0.0.1")), "HTTP/3 from this host");
        assert!(d.too_near(Some(""), Some("127.0.0.53")));
        assert!(d.too_near(None, Some("::1")));
        assert!(
            d.too_near(None, Some("::ffff:127.0.0.1")),
            "dual-stack listener"
        );
        assert!(!d.too_near(None, Some("192.0.2.1")), "unknown distance");
        assert!(!d.too_near(None, Some("2001:db8::1")));
        assert!(!d.too_near(None, None));
        assert!(!d.too_near(Some("-"), Some("not an address")));
        let lan = distance(5, &["10.0.0.0/8", "2001:db8::/32", "192.0.2.7"]);
        assert!(lan.too_near(None, Some("10.1.2.3")));
        assert!(lan.too_near(None, Some("2001:db8::1")));
        assert!(lan.too_near(None, Some("192.0.2.7")));
        assert!(!lan.too_near(None, Some("192.0.2.8")));
        assert!(
            !lan.too_near(None, Some("127.0.0.1")),
            "the list replaces the default"
        );
    }

    #[test]
    fn min_rtt_zero_compresses_at_any_distance() {
        let d = distance(0, &["127.0.0.0/8"]);
        assert!(!d.too_near(Some("0"), Some("127.0.0.1")));
        assert!(!d.too_near(None, Some("127.0.0.1")));
    }

    #[test]
    fn networks_are_checked() {
        let e = Distance::networks(&["10.0.0.0/33".into()]).unwrap_err();
        assert!(e.contains("\"10.0.0.0/33\" is not a network"), "{e}");
        assert!(Distance::networks(&["localhost".into()]).is_err());
        assert_eq!(Distance::networks(&[]).unwrap(), vec![]);
        assert_eq!(
            Distance::default().near_networks.len(),
            DEFAULT_NEAR_NETWORKS.len()
        );
    }

    #[test]
    fn the_peers_ip_without_its_port() {
        assert_eq!(peer_ip("203.0.113.7:51234").as_deref(), Some("203.0.113.7"));
        assert_eq!(peer_ip("[2001:db8::1]:443").as_deref(), Some("2001:db8::1"));
        assert_eq!(peer_ip("2001:db8::1").as_deref(), Some("2001:db8::1"));
        assert_eq!(peer_ip("127.0.0.1").as_deref(), Some("127.0.0.1"));
        for other in ["", "/tmp/envoy.sock", "pipe:x", "1.2.3.4:port", "[::1]"] {
            assert_eq!(peer_ip(other), None, "{other}");
        }
    }
}
