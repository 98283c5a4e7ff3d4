//! Message compression. Only `identity` is served for now; this is the seam where
//! gzip / zstd / snappy will plug in (parse the encoding here, then compress or
//! decompress the message bytes here, without touching the protocol modules).

/// A message encoding the filter can handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    Identity,
}

/// A message encoding the filter cannot handle (yet).
#[derive(Debug, PartialEq, Eq)]
pub struct Unsupported(pub String);

/// The encoding named by a `grpc-encoding` or `content-encoding` header; absent or
/// empty means identity.
pub fn parse(header: Option<&str>) -> Result<Encoding, Unsupported> {
    let name = header.map(str::trim).unwrap_or_default();
    if name.is_empty() || name.eq_ignore_ascii_case("identity") {
        Ok(Encoding::Identity)
    } else {
        Err(Unsupported(name.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_identity() {
        assert_eq!(parse(None), Ok(Encoding::Identity));
        assert_eq!(parse(Some("")), Ok(Encoding::Identity));
        assert_eq!(parse(Some("Identity")), Ok(Encoding::Identity));
        assert_eq!(parse(Some("gzip")), Err(Unsupported("gzip".into())));
        assert_eq!(parse(Some("snappy")), Err(Unsupported("snappy".into())));
    }
}
