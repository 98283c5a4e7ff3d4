//! A header map as the host serializes it (proxy-wasm ABI: a little-endian u32
//! count, a (name length, value length) u32 pair per entry, then each name and value
//! followed by a NUL byte), kept as the one buffer the host wrote plus the offsets of
//! each name and value: reading a map is one host call and one parse, and a lookup
//! copies nothing. A host that hands headers over as (name, value) slices (Envoy's
//! dynamic modules) copies them into the same shape ([`HeaderMap::from_pairs`]).

use std::ops::Range;

use crate::status::Status;

#[derive(Debug, PartialEq, Eq)]
pub struct HeaderMap {
    bytes: Vec<u8>,
    entries: Vec<(Range<usize>, Range<usize>)>,
}

impl HeaderMap {
    /// `None` if the bytes do not hold that shape (an empty buffer is an empty map).
    pub fn parse(bytes: Vec<u8>) -> Option<Self> {
        if bytes.is_empty() {
            return Some(HeaderMap {
                bytes,
                entries: Vec::new(),
            });
        }
        let word = |at: usize| -> Option<usize> {
            let b = bytes.get(at..at.checked_add(4)?)?;
            usize::try_from(u32::from_le_bytes(b.try_into().ok()?)).ok()
        };
        let count = word(0)?;
        let mut text = count.checked_mul(8)?.checked_add(4)?;
        let mut entries = Vec::with_capacity(count.min(bytes.len() / 10));
        for n in 0..count {
            let lengths = n.checked_mul(8)?.checked_add(4)?;
            let mut take = |len: usize| -> Option<Range<usize>> {
                let end = text.checked_add(len)?;
                bytes.get(text..end)?;
                let range = text..end;
                text = end.checked_add(1)?; // the NUL
                Some(range)
            };
            let name = take(word(lengths)?)?;
            let value = take(word(lengths.checked_add(4)?)?)?;
            entries.push((name, value));
        }
        Some(HeaderMap { bytes, entries })
    }

    /// The first value of `name` (lowercase, as Envoy keeps names).
    pub fn get(&self, name: &str) -> Option<&[u8]> {
        self.entries
            .iter()
            .find(|(n, _)| self.bytes.get(n.clone()) == Some(name.as_bytes()))
            .and_then(|(_, v)| self.bytes.get(v.clone()))
    }

    /// A map from (name, value) pairs, copied into one buffer.
    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a [u8], &'a [u8])>) -> Self {
        let mut bytes = Vec::new();
        let mut entries = Vec::new();
        for (name, value) in pairs {
            let n = bytes.len();
            bytes.extend_from_slice(name);
            let v = bytes.len();
            bytes.extend_from_slice(value);
            entries.push((n..v, v..bytes.len()));
        }
        HeaderMap { bytes, entries }
    }

    /// Every (name, value), in order.
    pub fn pairs(&self) -> Vec<(&[u8], &[u8])> {
        self.entries
            .iter()
            .filter_map(|(n, v)| Some((self.bytes.get(n.clone())?, self.bytes.get(v.clone())?)))
            .collect()
    }
}

/// The proxy-wasm ABI's header-map encoding (what [`HeaderMap::parse`] reads): count,
/// then each name's and value's length (all u32 little-endian), then each name and
/// value with a NUL after it.
pub fn serialize(map: &[(&str, &str)]) -> Result<Vec<u8>, Status> {
    let len = |n: usize| u32::try_from(n).map_err(|_| Status::BadArgument);
    let mut out = Vec::new();
    out.extend_from_slice(&len(map.len())?.to_le_bytes());
    for (name, value) in map {
        out.extend_from_slice(&len(name.len())?.to_le_bytes());
        out.extend_from_slice(&len(value.len())?.to_le_bytes());
    }
    for (name, value) in map {
        out.extend_from_slice(name.as_bytes());
        out.push(0);
        out.extend_from_slice(value.as_bytes());
        out.push(0);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::HeaderMap;

    #[test]
    fn maps_are_read_and_malformed_ones_refused() {
        let map = [(":path", "/x"), ("accept", ""), ("a", "b"), ("a", "c")];
        let bytes = super::serialize(&map).unwrap();
        let read = HeaderMap::parse(bytes.clone()).unwrap();
        let want: Vec<(&[u8], &[u8])> = map
            .iter()
            .map(|(k, v)| (k.as_bytes(), v.as_bytes()))
            .collect();
        assert_eq!(read.pairs(), want);
        assert_eq!(read.get("a"), Some(&b"b"[..]), "the first value");
        assert_eq!(read.get("accept"), Some(&b""[..]));
        assert_eq!(read.get("nope"), None);
        assert!(HeaderMap::parse(Vec::new()).unwrap().pairs().is_empty());
        // Every truncation, and absurd counts and lengths, are errors, never a panic.
        for cut in 1..bytes.len() - 1 {
            assert!(
                HeaderMap::parse(bytes[..cut].to_vec()).is_none(),
                "cut at {cut}"
            );
        }
        assert!(HeaderMap::parse(u32::MAX.to_le_bytes().to_vec()).is_none());
        let mut long = bytes.clone();
        long[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(HeaderMap::parse(long).is_none());
    }

    #[test]
    fn maps_from_pairs_read_as_parsed_ones() {
        let map = [(":path", "/x"), ("accept", ""), ("a", "b"), ("a", "c")];
        let parsed = HeaderMap::parse(super::serialize(&map).unwrap()).unwrap();
        let built = HeaderMap::from_pairs(map.iter().map(|(k, v)| (k.as_bytes(), v.as_bytes())));
        assert_eq!(built.pairs(), parsed.pairs());
        assert_eq!(built.get("a"), Some(&b"b"[..]));
        assert_eq!(built.get("accept"), Some(&b""[..]));
        assert!(HeaderMap::from_pairs([]).pairs().is_empty());
    }

    #[test]
    fn maps_serialize_as_the_abi_says() {
        let bytes = super::serialize(&[("a", "bc"), ("", "d")]).unwrap();
        let mut expected = vec![2, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0];
        expected.extend_from_slice(b"a\0bc\0\0d\0");
        assert_eq!(bytes, expected);
        assert_eq!(super::serialize(&[]).unwrap(), vec![0, 0, 0, 0]);
    }
}
