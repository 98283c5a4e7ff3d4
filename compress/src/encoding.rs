//! The codecs Ferry speaks, by their HTTP / gRPC / Connect names.

use std::fmt;

/// A message encoding, named as in `grpc-encoding`, `connect-content-encoding` and
/// `Content-Encoding`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Encoding {
    /// No compression.
    Identity,
    /// gzip (RFC 1952), as gRPC and Connect mean it (not zlib, not raw deflate).
    Gzip,
    /// Zstandard (RFC 8878) frames.
    Zstd,
    /// The Snappy *framing* format (golang/snappy `NewBufferedWriter` / `NewReader`).
    Snappy,
    /// The S2 stream format (klauspost/compress `s2.NewWriter` / `s2.NewReader`).
    S2,
}

/// The one table of names: every lookup in either direction goes through it.
const TABLE: [(Encoding, &str); 5] = [
    (Encoding::Identity, "identity"),
    (Encoding::Gzip, "gzip"),
    (Encoding::Zstd, "zstd"),
    (Encoding::Snappy, "snappy"),
    (Encoding::S2, "s2"),
];

/// The supported names, for error messages (e.g. `grpc-status: UNIMPLEMENTED`).
pub const SUPPORTED: &str = "identity, gzip, zstd, snappy, s2";

impl Encoding {
    /// Every encoding, in table order.
    pub const ALL: [Encoding; 5] = [
        Encoding::Identity,
        Encoding::Gzip,
        Encoding::Zstd,
        Encoding::Snappy,
        Encoding::S2,
    ];

    /// The encoding named `name` (ASCII case-insensitive, surrounding whitespace
    /// ignored), or `None` if we do not support it.
    pub fn parse(name: &str) -> Option<Encoding> {
        let name = name.trim();
        TABLE
            .iter()
            .find(|(_, n)| n.eq_ignore_ascii_case(name))
            .map(|(e, _)| *e)
    }

    /// The canonical (lowercase) name.
    pub fn name(self) -> &'static str {
        TABLE
            .iter()
            .find(|(e, _)| *e == self)
            .map_or("identity", |(_, n)| n)
    }
}

impl fmt::Display for Encoding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for e in Encoding::ALL {
            assert_eq!(Encoding::parse(e.name()), Some(e));
            assert_eq!(e.to_string(), e.name());
        }
        let listed: Vec<&str> = Encoding::ALL.iter().map(|e| e.name()).collect();
        assert_eq!(listed.join(", "), SUPPORTED);
    }

    #[test]
    fn parse_is_case_insensitive_and_trimmed() {
        assert_eq!(Encoding::parse(" GZip "), Some(Encoding::Gzip));
        assert_eq!(Encoding::parse("ZSTD"), Some(Encoding::Zstd));
        assert_eq!(Encoding::parse("\tS2"), Some(Encoding::S2));
        assert_eq!(Encoding::parse("Snappy\t"), Some(Encoding::Snappy));
        assert_eq!(Encoding::parse("Identity"), Some(Encoding::Identity));
    }

    #[test]
    fn unknown_names() {
        for n in [
            "",
            "deflate",
            "br",
            "x-gzip",
            "gzip;q=1",
            "zstd2",
            "*",
            "snappy-raw",
        ] {
            assert_eq!(Encoding::parse(n), None, "{n:?}");
        }
    }
}
