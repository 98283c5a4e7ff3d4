//! Choosing a response codec from what the client accepts.
//!
//! Reads both `grpc-accept-encoding: gzip, s2` (plain list) and HTTP's
//! `Accept-Encoding: gzip;q=1.0, zstd, *;q=0` (RFC 9110 §12.5.3): names are
//! case-insensitive, `q=0` refuses a codec, `*` stands for every codec not named,
//! unknown codings (`br`, `deflate`) and malformed entries are ignored. A name listed
//! twice counts by its first entry. The server's order of preference decides among
//! accepted codecs; q-values only say yes (q > 0) or no.

use crate::Encoding;

/// The first codec of `preference` that `accept` (the header value; several header
/// lines joined with `,`) allows, or [`Encoding::Identity`] when none is allowed or
/// there is no header.
pub fn choose(accept: Option<&str>, preference: &[Encoding]) -> Encoding {
    let Some(accept) = accept else {
        return Encoding::Identity;
    };
    preference
        .iter()
        .copied()
        .find(|&enc| accepts(accept, enc))
        .unwrap_or(Encoding::Identity)
}

/// Whether the accept list allows `enc`. Identity is allowed unless refused
/// (`identity;q=0`, or `*;q=0` without an `identity` entry).
pub fn accepts(accept: &str, enc: Encoding) -> bool {
    match quality(accept, enc) {
        Some(q) => q > 0.0,
        None => enc == Encoding::Identity,
    }
}

/// The q-value the accept list gives `enc`: its own entry's, else the `*` entry's,
/// else `None` (not mentioned).
pub fn quality(accept: &str, enc: Encoding) -> Option<f32> {
    let mut star = None;
    for (name, q) in entries(accept) {
        if name == "*" {
            star = star.or(Some(q));
        } else if Encoding::parse(name) == Some(enc) {
            return Some(q);
        }
    }
    star
}

/// A `grpc-accept-encoding` / `Accept-Encoding` value listing `preference` in order.
pub fn accept_value(preference: &[Encoding]) -> String {
    preference
        .iter()
        .map(|e| e.name())
        .collect::<Vec<_>>()
        .join(",")
}

/// The well-formed `(coding, q)` entries of an accept list.
fn entries(accept: &str) -> impl Iterator<Item = (&str, f32)> {
    accept.split(',').filter_map(|element| {
        let mut parts = element.split(';');
        let name = parts.next()?.trim();
        if name.is_empty() {
            return None;
        }
        let mut q = 1.0;
        for param in parts {
            let (key, value) = param.split_once('=')?;
            if key.trim().eq_ignore_ascii_case("q") {
                q = parse_q(value.trim())?;
            }
        }
        Some((name, q))
    })
}

/// A qvalue: `0`, `1`, or up to three decimals (`0.5`, `1.000`), in [0, 1].
fn parse_q(value: &str) -> Option<f32> {
    let value = value.trim_matches('"');
    let ok = !value.is_empty()
        && value.len() <= 5
        && value.bytes().all(|b| b.is_ascii_digit() || b == b'.');
    let q: f32 = if ok { value.parse().ok()? } else { return None };
    (0.0..=1.0).contains(&q).then_some(q)
}

#[cfg(test)]
mod tests {
    use super::*;
    use Encoding::*;

    const OURS: [Encoding; 4] = [Zstd, S2, Snappy, Gzip];

    #[test]
    fn choose_table() {
        let cases: &[(Option<&str>, Encoding)] = &[
            (None, Identity),
            (Some(""), Identity),
            (Some("identity"), Identity),
            (Some("gzip"), Gzip),
            (Some("gzip, s2"), S2),
            (Some("gzip,s2,zstd"), Zstd),
            (Some("GZIP , Snappy"), Snappy),
            (Some("identity, deflate, gzip"), Gzip),
            (Some("br, deflate"), Identity),
            (Some("gzip;q=1.0, zstd, *;q=0"), Zstd),
            (Some("zstd;q=0, gzip"), Gzip),
            (Some("zstd;q=0.0, s2;q=0.000, snappy;q=0.001"), Snappy),
            (Some("*"), Zstd),
            (Some("*;q=0"), Identity),
            (Some("*;q=0.5, zstd;q=0"), S2),
            (Some("zstd;q=0, *"), S2),
            (Some("gzip;q=0.1, s2;q=1"), S2),
            // Our preference wins over the client's q ordering.
            (Some("gzip;q=1, zstd;q=0.1"), Zstd),
            // Malformed entries are ignored, not fatal.
            (Some("zstd;q=2, gzip"), Gzip),
            (Some("zstd;q=abc, gzip"), Gzip),
            (Some("zstd;q=-1, gzip"), Gzip),
            (Some("zstd;q, gzip"), Gzip),
            (Some(",, gzip ,,"), Gzip),
            (Some("gzip;level=9;q=0.5"), Gzip),
            (Some("gzip ; Q=0"), Identity),
            // First entry for a name counts.
            (Some("zstd;q=0, zstd"), Identity),
            (Some("x-gzip"), Identity),
        ];
        for (accept, want) in cases {
            assert_eq!(choose(*accept, &OURS), *want, "accept {accept:?}");
        }
    }

    #[test]
    fn preference_order_and_identity() {
        assert_eq!(choose(Some("gzip, zstd"), &[Gzip, Zstd]), Gzip);
        assert_eq!(choose(Some("gzip, zstd"), &[]), Identity);
        assert_eq!(choose(Some("gzip"), &[Identity, Gzip]), Identity);
        assert_eq!(choose(Some("identity;q=0, gzip"), &[Identity, Gzip]), Gzip);
        assert_eq!(choose(Some("*;q=0, gzip"), &[Identity, Gzip]), Gzip);
    }

    #[test]
    fn accepts_and_quality() {
        assert!(accepts("", Identity));
        assert!(!accepts("", Gzip));
        assert!(!accepts("identity;q=0", Identity));
        assert!(!accepts("*;q=0", Identity));
        assert!(accepts("*;q=0, identity", Identity));
        assert_eq!(quality("gzip;q=0.5", Gzip), Some(0.5));
        assert_eq!(quality("*;q=0.25", S2), Some(0.25));
        assert_eq!(quality("gzip", S2), None);
        assert_eq!(quality("gzip;q=\"0.5\"", Gzip), Some(0.5));
    }

    #[test]
    fn accept_value_lists_preference() {
        assert_eq!(accept_value(&OURS), "zstd,s2,snappy,gzip");
        assert_eq!(accept_value(&[]), "");
        for e in OURS {
            assert_eq!(choose(Some(&accept_value(&OURS)), &[e]), e);
        }
    }
}
