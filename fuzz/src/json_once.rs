//! JSON parsed with a check that no object has a key twice: `serde_json::Value`
//! keeps one of two equal keys silently, but a client may read either.

use serde::de::{Deserialize, Deserializer, Error, MapAccess, SeqAccess, Visitor};
use std::collections::HashSet;
use std::fmt;

/// The JSON's value, or why it is not JSON or has a key twice in an object.
pub fn parse_once(json: &[u8]) -> Result<serde_json::Value, String> {
    serde_json::from_slice::<Once>(json).map_err(|e| e.to_string())?;
    serde_json::from_slice(json).map_err(|e| e.to_string())
}

/// Any JSON, refusing an object with a key twice.
struct Once;

impl<'de> Deserialize<'de> for Once {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(OnceVisitor)
    }
}

struct OnceVisitor;

impl<'de> Visitor<'de> for OnceVisitor {
    type Value = Once;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("JSON")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Once, E> {
        Ok(Once)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Once, E> {
        Ok(Once)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Once, E> {
        Ok(Once)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Once, E> {
        Ok(Once)
    }
    fn visit_str<E>(self, _: &str) -> Result<Once, E> {
        Ok(Once)
    }
    fn visit_unit<E>(self) -> Result<Once, E> {
        Ok(Once)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Once, A::Error> {
        while seq.next_element::<Once>()?.is_some() {}
        Ok(Once)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Once, A::Error> {
        let mut keys = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            map.next_value::<Once>()?;
            if !keys.insert(key.clone()) {
                return Err(A::Error::custom(format!("key {key:?} twice")));
            }
        }
        Ok(Once)
    }
}
