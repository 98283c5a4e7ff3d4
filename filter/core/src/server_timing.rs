//! The `server-timing` response header: the shim names the time spent in MySQL
//! (`db;dur=<ms>`); the filter adds the whole time the call spent in the gateway,
//! from its request headers to its response headers (`gateway;dur=<ms>`), keeping
//! every entry the shim sent.

/// The response header.
pub const HEADER: &str = "server-timing";

/// `existing` (the shim's entries, if any) with `gateway;dur=<ms>` added; an entry
/// named `gateway` already there is replaced (only the gateway names its own time).
pub fn with_gateway(existing: Option<&str>, gateway_nanos: u64) -> String {
    // Milliseconds with microsecond precision, as browsers' devtools show them.
    let ms = gateway_nanos / 1_000;
    let entry = format!("gateway;dur={}.{:03}", ms / 1_000, ms % 1_000);
    let kept: Vec<&str> = existing
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty() && !is_gateway(e))
        .collect();
    if kept.is_empty() {
        entry
    } else {
        format!("{}, {entry}", kept.join(", "))
    }
}

fn is_gateway(entry: &str) -> bool {
    let name = entry.split(';').next().unwrap_or_default().trim();
    name.eq_ignore_ascii_case("gateway")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shims_entry_is_kept_and_the_gateways_added() {
        assert_eq!(
            with_gateway(Some("db;dur=1.5"), 2_345_678),
            "db;dur=1.5, gateway;dur=2.345"
        );
        assert_eq!(with_gateway(None, 999), "gateway;dur=0.000");
        assert_eq!(with_gateway(Some(""), 1_000_000), "gateway;dur=1.000");
        assert_eq!(
            with_gateway(Some("db;dur=3, cache;desc=\"x\""), 12_000_000_000),
            "db;dur=3, cache;desc=\"x\", gateway;dur=12000.000"
        );
        // A gateway entry from upstream is not ours to keep.
        assert_eq!(
            with_gateway(Some("gateway;dur=99, db;dur=1"), 1_000_000),
            "db;dur=1, gateway;dur=1.000"
        );
    }
}
