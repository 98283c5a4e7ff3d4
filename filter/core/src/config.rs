//! The plugin configuration (Envoy's `configuration` of the wasm filter): a YAML map
//! (`"@type": type.googleapis.com/google.protobuf.Struct` with the keys under `value:`,
//! see [`struct_to_json`] for what Envoy 1.40 makes of it) or, as before, a JSON object
//! in a `google.protobuf.StringValue`. Every key is optional, listed in
//! [`KEYS`] (docs/reference/settings.md "The filter's keys", checked by a test).
//!
//! `compression.envoy`: a Connect unary answer is a plain HTTP body, which Envoy's
//! `envoy.filters.http.compressor` compresses natively (C zstd and zlib: about 3× the
//! speed of our in-VM zstd, and tighter). When the client accepts one of these codecs,
//! they come first, in this order, for Connect unary: the filter then leaves the body
//! uncompressed for Envoy, still judges it (`min_bytes`, the sample's ratio) and, when it
//! does not pay, marks the answer `cache-control: no-transform`, which Envoy's
//! compressor honours. Envoy picks among its compressors by the client's q-values.
//! Enveloped messages (gRPC, Connect streaming) are always compressed here. List only
//! codecs that have a compressor filter in the chain, or those answers go uncompressed.
//!
//! `compression.min_rtt_ms`: on a fast link (loopback, a LAN, the same region),
//! compressing an answer costs more (CPU on both ends) than the bytes it saves take to
//! send. Envoy tells the filter how far the client is in `x-ferry-client-rtt-ms` (the
//! connection's last measured round trip in whole ms, from the HTTP connection
//! manager's early header mutation, envoy/ferry.yaml); a client nearer than this gets
//! identity answers, and Envoy's compressor is told `no-transform`. Without a measure
//! (HTTP/3: Envoy 1.40 measures no round trip for QUIC; an Envoy configured without the
//! header) the client's address decides (`x-ferry-client-addr`, from the same mutation):
//! one in `compression.near_networks` (by default this host) is near; any other is of
//! unknown distance and its answers are compressed as it asks. 0 turns both off. Behind
//! a proxy that ends the client's TCP connection (an L7 load balancer), Envoy measures
//! its own hop to it: set 0. (`distance.rs`.)
//!
//! `client_address: "peer"`: where no early header mutation sets `x-ferry-client-addr`
//! (Istio, Envoy Gateway), the filter sets it from Envoy's downstream address, over any
//! value the client sent; the shim's password-guessing throttle counts by it.
//!
//! Requests are decompressed whatever they use among identity, gzip, zstd, snappy and
//! s2, up to `max_request_bytes` of output.
//!
//! `session_affinity` holds the request headers of `Execute`/`CloseSession` until the
//! body is read, which needs the wasm filter's `allow_on_headers_stop_iteration: true`
//! in Envoy, and Envoy's `stateful_session` filter (header `x-ferry-host`) after this
//! one to act on it. Where Envoy cannot hold headers (Istio's `WasmPlugin`, Envoy
//! Gateway's `EnvoyExtensionPolicy`), `header_hold: "auto"` finds out from the first
//! held request and goes on without (nothing hangs), and `"off"` never tries
//! (`header_hold.rs`: what needs the hold and what replaces it).
//!
//! Limits must be between 1 and [`MAX_LIMIT`]. Unknown keys are errors (a typo must not
//! silently keep a default). An absent or empty configuration means all defaults.
//! Keep Envoy's per-route `request_body_buffer_limit` above both limits, so the
//! filter's clear `resource_exhausted` fires before Envoy's own buffer overflow.

use std::fmt;

use ferry_compress::{Encoding, Level, Policy};
use serde::Deserialize;

use crate::distance::Distance;
use crate::header_hold::Setting as HeaderHold;
use crate::limits::{Limits, DEFAULT_MAX_REQUEST_BYTES, DEFAULT_MAX_RESPONSE_BYTES};

/// Upper bound for either limit: 1 GiB (a wasm32 VM has at most 4 GiB of memory, and a
/// gRPC frame length is 32 bits).
pub const MAX_LIMIT: u64 = 1 << 30;

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Config {
    pub limits: Limits,
    pub session_affinity: bool,
    /// Whether headers may be held (`header_hold`).
    pub header_hold: HeaderHold,
    /// When and how answers are compressed.
    pub compression: Policy,
    /// Codecs Envoy's compressor applies to Connect unary answers (`compression.envoy`).
    pub envoy_compression: Vec<Encoding>,
    /// Answers are compressed only for clients far enough (`compression.min_rtt_ms`,
    /// `compression.near_networks`).
    pub distance: Distance,
    /// Where the client's address comes from (`client_address`).
    pub client_address: ClientAddress,
}

/// Where the filter takes the client's address from, for the shim's password-guessing
/// throttle and for the client's distance (`x-ferry-client-addr`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ClientAddress {
    /// The header as it arrives: Envoy's early header mutation sets it from the peer,
    /// replacing a client's own (`envoy/ferry.yaml`).
    #[default]
    Header,
    /// Envoy's downstream address (`source.address`, after Envoy's `x-forwarded-for`
    /// handling), set on the request by the filter over whatever the client sent: for
    /// control planes that make no such header mutation (Istio).
    Peer,
}

#[derive(Debug, PartialEq, Eq)]
pub struct ConfigError(String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    #[serde(default = "default_request")]
    max_request_bytes: u64,
    #[serde(default = "default_response")]
    max_response_bytes: u64,
    #[serde(default)]
    session_affinity: bool,
    header_hold: Option<String>,
    client_address: Option<String>,
    #[serde(default)]
    compression: RawCompression,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawCompression {
    preference: Option<Vec<String>>,
    min_bytes: Option<u64>,
    sample_bytes: Option<u64>,
    max_ratio: Option<f64>,
    level: Option<String>,
    #[serde(default)]
    envoy: Vec<String>,
    min_rtt_ms: Option<u64>,
    near_networks: Option<Vec<String>>,
}

impl RawCompression {
    /// Which clients get identity answers (`compression.min_rtt_ms`, `near_networks`).
    fn distance(&self) -> Result<Distance, ConfigError> {
        let mut distance = Distance::default();
        if let Some(ms) = self.min_rtt_ms {
            distance.min_rtt_ms = ms;
        }
        if let Some(names) = &self.near_networks {
            distance.near_networks = Distance::networks(names).map_err(ConfigError)?;
        }
        Ok(distance)
    }

    /// The codecs Envoy compresses Connect unary answers with (`compression.envoy`).
    fn envoy(&self) -> Result<Vec<Encoding>, ConfigError> {
        codecs("compression.envoy", &self.envoy)
    }

    fn policy(self) -> Result<Policy, ConfigError> {
        let mut policy = Policy::default();
        if let Some(names) = self.preference {
            policy.preference = codecs("compression.preference", &names)?;
        }
        if let Some(n) = self.min_bytes {
            policy.min_bytes = limit("compression.min_bytes", n.max(1))?;
        }
        if let Some(n) = self.sample_bytes {
            policy.sample_bytes = limit("compression.sample_bytes", n)?;
        }
        if let Some(ratio) = self.max_ratio {
            if !(ratio > 0.0 && ratio <= 1.0) {
                return Err(ConfigError(format!(
                    "compression.max_ratio must be in (0, 1], not {ratio}"
                )));
            }
            policy.max_ratio = ratio;
        }
        policy.level = match self.level.as_deref() {
            None | Some("fastest") => Level::Fastest,
            Some("default") => Level::Default,
            Some(other) => {
                return Err(ConfigError(format!(
                    "compression.level must be \"fastest\" or \"default\", not {other:?}"
                )))
            }
        };
        Ok(policy)
    }
}

/// Codec names (not identity) as encodings.
fn codecs(key: &str, names: &[String]) -> Result<Vec<Encoding>, ConfigError> {
    names
        .iter()
        .map(|name| match Encoding::parse(name) {
            Some(Encoding::Identity) | None => Err(ConfigError(format!(
                "{key}: {name:?} is not a codec (gzip, zstd, snappy, s2)"
            ))),
            Some(encoding) => Ok(encoding),
        })
        .collect()
}

fn default_request() -> u64 {
    DEFAULT_MAX_REQUEST_BYTES as u64
}

fn default_response() -> u64 {
    DEFAULT_MAX_RESPONSE_BYTES as u64
}

impl Config {
    /// Parses the plugin configuration (`None` when Envoy gives none).
    pub fn parse(raw: Option<&[u8]>) -> Result<Config, ConfigError> {
        let raw = raw.unwrap_or_default();
        if raw.iter().all(u8::is_ascii_whitespace) {
            return Ok(Config::default());
        }
        let invalid =
            |e: serde_json::Error| ConfigError(format!("plugin configuration is not valid: {e}"));
        // JSON text (a `google.protobuf.StringValue` configuration), else a
        // `google.protobuf.Struct` as Envoy 1.40 hands it over (its first byte is
        // field 1's key, 0x0a; protobuf bytes are never valid JSON).
        let value: serde_json::Value = match serde_json::from_slice(raw) {
            Ok(value) => value,
            Err(_) if raw.first() == Some(&0x0a) => struct_to_json(raw)?,
            Err(e) => return Err(invalid(e)),
        };
        if !value.is_object() {
            return Err(ConfigError(
                "plugin configuration must be a JSON object".into(),
            ));
        }
        let raw: Raw = serde_json::from_value(value).map_err(invalid)?;
        let header_hold = match raw.header_hold.as_deref() {
            None => HeaderHold::default(),
            Some(name) => HeaderHold::parse(name).ok_or_else(|| {
                ConfigError(format!(
                    "header_hold must be \"auto\" or \"off\", not {name:?}"
                ))
            })?,
        };
        let client_address = match raw.client_address.as_deref() {
            None | Some("header") => ClientAddress::Header,
            Some("peer") => ClientAddress::Peer,
            Some(other) => {
                return Err(ConfigError(format!(
                    "client_address must be \"header\" or \"peer\", not {other:?}"
                )))
            }
        };
        if raw.session_affinity && header_hold == HeaderHold::Off {
            return Err(ConfigError(
                "session_affinity needs the header hold: with header_hold \"off\" set session_affinity to false (a pinned session that reaches another shim is then refused by it)".into(),
            ));
        }
        Ok(Config {
            limits: Limits {
                max_request_bytes: limit("max_request_bytes", raw.max_request_bytes)?,
                max_response_bytes: limit("max_response_bytes", raw.max_response_bytes)?,
            },
            session_affinity: raw.session_affinity,
            header_hold,
            envoy_compression: raw.compression.envoy()?,
            distance: raw.compression.distance()?,
            compression: raw.compression.policy()?,
            client_address,
        })
    }
}

/// A YAML `configuration` (`"@type": type.googleapis.com/google.protobuf.Struct`) as
/// JSON. Envoy 1.40 hands the plugin the Struct's protobuf bytes (not JSON, whatever its
/// docs say), after its YAML loader made every integer a double (`8388608` arrives as
/// `8388608.0`) and every other number a string (`0.9`, `1.0`, `5e-1` arrive as
/// `"0.9"`...; verified). So integral doubles become JSON integers and strings that are
/// YAML floats become numbers (no setting takes such a string).
fn struct_to_json(raw: &[u8]) -> Result<serde_json::Value, ConfigError> {
    use prost::Message;
    let parsed = prost_types::Struct::decode(raw).map_err(|e| {
        ConfigError(format!(
            "plugin configuration is neither JSON nor a google.protobuf.Struct: {e}"
        ))
    })?;
    Ok(struct_value(parsed))
}

fn struct_value(s: prost_types::Struct) -> serde_json::Value {
    serde_json::Value::Object(
        s.fields
            .into_iter()
            .map(|(key, value)| (key, json_value(value)))
            .collect(),
    )
}

fn json_value(value: prost_types::Value) -> serde_json::Value {
    use prost_types::value::Kind;
    use serde_json::Value;
    match value.kind {
        None | Some(Kind::NullValue(_)) => Value::Null,
        Some(Kind::BoolValue(b)) => Value::Bool(b),
        Some(Kind::NumberValue(n)) => number(n),
        Some(Kind::StringValue(text)) => match yaml_float(&text) {
            Some(n) => number(n),
            None => Value::String(text),
        },
        Some(Kind::StructValue(s)) => struct_value(s),
        Some(Kind::ListValue(list)) => {
            Value::Array(list.values.into_iter().map(json_value).collect())
        }
    }
}

/// An integral double within 2^53 as an integer, any other finite one as a float.
fn number(n: f64) -> serde_json::Value {
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
    if n.fract() == 0.0 && n.abs() <= EXACT {
        // Exact: integral and within f64's integer range.
        #[allow(clippy::cast_possible_truncation)]
        return serde_json::Value::from(n as i64);
    }
    serde_json::Number::from_f64(n).map_or(serde_json::Value::Null, serde_json::Value::Number)
}

/// A YAML 1.1/1.2 float written plainly (`0.9`, `.5`, `1.0`, `5e-1`, `-2.5E+3`).
fn yaml_float(text: &str) -> Option<f64> {
    let digits = text.strip_prefix(['-', '+']).unwrap_or(text);
    let plain = !digits.is_empty()
        && digits.starts_with(|c: char| c.is_ascii_digit() || c == '.')
        && digits
            .chars()
            .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '-' | '+'));
    if !plain {
        return None;
    }
    text.parse::<f64>().ok().filter(|n| n.is_finite())
}

fn limit(key: &str, value: u64) -> Result<usize, ConfigError> {
    if value == 0 || value > MAX_LIMIT {
        return Err(ConfigError(format!(
            "{key} must be between 1 and {MAX_LIMIT}, not {value}"
        )));
    }
    usize::try_from(value).map_err(|_| ConfigError(format!("{key} is too large: {value}")))
}

/// One key of the plugin configuration (dotted for a nested one).
pub struct Key {
    pub name: &'static str,
    /// The default, as JSON.
    pub default: &'static str,
    /// One line for the reference (Markdown).
    pub about: &'static str,
}

/// Every key, with its default: what the reference shows and a test holds the parser to.
pub const KEYS: &[Key] = &[
    Key {
        name: "max_request_bytes",
        default: "8388608",
        about: "largest request body as received, framing included, and after decompression (8 MiB; 1 to 1 GiB)",
    },
    Key {
        name: "max_response_bytes",
        default: "67108864",
        about: "largest answer from the shim, before conversion (64 MiB; 1 to 1 GiB). Keep the route's `request_body_buffer_limit` above both limits ([Envoy's buffer limit](../design/filter.md#envoys-buffer-limit))",
    },
    Key {
        name: "session_affinity",
        default: "false",
        about: "route pinned sessions to their shim ([session affinity](../design/filter.md#session-affinity-several-shims)); needs `allow_on_headers_stop_iteration: true` on the wasm filter and Envoy's `stateful_session` filter. The shipped configs turn both on",
    },
    Key {
        name: "header_hold",
        default: "\"auto\"",
        about: "`\"auto\"`: hold headers where Envoy allows it, found out from the first held request ([without the header hold](../design/filter.md#without-the-header-hold-meshes)); `\"off\"`: never hold (then `session_affinity` must be `false`)",
    },
    Key {
        name: "client_address",
        default: "\"header\"",
        about: "where the client's address (`x-ferry-client-addr`: the shim's [password-guessing throttle](../guides/password-guessing.md), the client's distance) comes from: `\"header\"` as Envoy's early header mutation set it (`envoy/ferry.yaml`); `\"peer\"` Envoy's downstream address (`source.address`), which the filter sets over any value the client sent: for control planes without that mutation (Istio, Envoy Gateway)",
    },
    Key {
        name: "compression.preference",
        default: "[\"s2\", \"snappy\", \"gzip\", \"zstd\"]",
        about: "codecs for answers, most preferred first; the first the client accepts is used; `[]` never compresses",
    },
    Key {
        name: "compression.min_bytes",
        default: "1024",
        about: "messages smaller than this go uncompressed",
    },
    Key {
        name: "compression.sample_bytes",
        default: "65536",
        about: "how much of a message's start is compressed to judge whether it pays",
    },
    Key {
        name: "compression.max_ratio",
        default: "0.9",
        about: "compress only when the sample, then the message, shrinks to this or less (0 < r <= 1)",
    },
    Key {
        name: "compression.level",
        default: "\"fastest\"",
        about: "or `\"default\"` (gzip -2 / -6, zlib-rs; ruzstd has only its fastest level)",
    },
    Key {
        name: "compression.envoy",
        default: "[]",
        about: "codecs Envoy's own compressor filters apply to Connect unary answers ([Envoy's compressor](../design/filter.md#envoys-compressor-for-connect-unary); `[zstd]` in the shipped configs)",
    },
    Key {
        name: "compression.min_rtt_ms",
        default: "5",
        about: "compress answers only for clients at least this many ms away ([by distance](../design/filter.md#only-for-clients-far-enough)); `0`: at any distance",
    },
    Key {
        name: "compression.near_networks",
        default: "[\"127.0.0.0/8\", \"::1/128\"]",
        about: "without a measured round trip (HTTP/3), clients from these networks (CIDR or one address) are near",
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absent_or_empty_configuration_means_defaults() {
        let defaults = Config {
            limits: Limits {
                max_request_bytes: 8_388_608,
                max_response_bytes: 67_108_864,
            },
            session_affinity: false,
            header_hold: HeaderHold::Auto,
            compression: Policy::default(),
            envoy_compression: Vec::new(),
            distance: Distance::default(),
            client_address: ClientAddress::Header,
        };
        assert_eq!(Config::default(), defaults);
        assert_eq!(Config::parse(None).unwrap(), defaults);
        assert_eq!(Config::parse(Some(b"")).unwrap(), defaults);
        assert_eq!(Config::parse(Some(b" \n")).unwrap(), defaults);
        assert_eq!(Config::parse(Some(b"{}")).unwrap(), defaults);
    }

    #[test]
    fn keys_override_defaults() {
        let c = Config::parse(Some(br#"{"max_request_bytes": 1024}"#)).unwrap();
        assert_eq!(c.limits.max_request_bytes, 1024);
        assert_eq!(c.limits.max_response_bytes, DEFAULT_MAX_RESPONSE_BYTES);
        assert!(!c.session_affinity);
        let c = Config::parse(Some(br#"{"session_affinity": true}"#)).unwrap();
        assert!(c.session_affinity);
        assert_eq!(c.limits, Limits::default());
        let c = Config::parse(Some(
            br#"{"max_request_bytes": 1, "max_response_bytes": 2}"#,
        ))
        .unwrap();
        assert_eq!(
            c.limits,
            Limits {
                max_request_bytes: 1,
                max_response_bytes: 2
            }
        );
    }

    #[test]
    fn compression_settings() {
        let c = Config::parse(Some(
            br#"{"compression": {"preference": ["gzip", "S2"], "min_bytes": 10, "sample_bytes": 100, "max_ratio": 0.5, "level": "default"}}"#,
        ))
        .unwrap();
        assert_eq!(c.compression.preference, vec![Encoding::Gzip, Encoding::S2]);
        assert_eq!(c.compression.min_bytes, 10);
        assert_eq!(c.compression.sample_bytes, 100);
        assert_eq!(c.compression.max_ratio, 0.5);
        assert_eq!(c.compression.level, Level::Default);
        let anywhere = Config::parse(Some(br#"{"compression": {"min_rtt_ms": 0}}"#)).unwrap();
        assert_eq!(anywhere.distance.min_rtt_ms, 0);
        assert_eq!(
            anywhere.distance.near_networks.len(),
            2,
            "the default networks"
        );
        let lan = Config::parse(Some(
            br#"{"compression": {"near_networks": ["10.0.0.0/8", "fd00::1"]}}"#,
        ))
        .unwrap();
        assert_eq!(lan.distance.min_rtt_ms, 5);
        assert_eq!(
            lan.distance.near_networks,
            vec![
                "10.0.0.0/8".parse().unwrap(),
                "fd00::1/128".parse().unwrap()
            ]
        );
        let e =
            Config::parse(Some(br#"{"compression": {"near_networks": ["10/8"]}}"#)).unwrap_err();
        assert!(
            e.to_string()
                .contains("near_networks: \"10/8\" is not a network"),
            "{e}"
        );
        let off = Config::parse(Some(br#"{"compression": {"preference": []}}"#)).unwrap();
        assert!(off.compression.preference.is_empty());
        let envoy =
            Config::parse(Some(br#"{"compression": {"envoy": ["zstd", "gzip"]}}"#)).unwrap();
        assert_eq!(
            envoy.envoy_compression,
            vec![Encoding::Zstd, Encoding::Gzip]
        );
        assert_eq!(envoy.compression, Policy::default());
    }

    /// What Envoy 1.40 handed the plugin for this YAML (captured with a probe filter):
    /// `{max_request_bytes: 8388608, session_affinity: true, compression: {preference:
    /// [gzip, s2], level: fastest, max_ratio: 0.5}}`; built here with prost-types as
    /// Envoy builds it (integers as doubles, floats as strings).
    fn envoy_struct() -> Vec<u8> {
        use prost::Message;
        use prost_types::{value::Kind, ListValue, Struct, Value};
        let v = |kind| Value { kind: Some(kind) };
        let s = |fields: Vec<(&str, Value)>| Struct {
            fields: fields.into_iter().map(|(k, x)| (k.to_owned(), x)).collect(),
        };
        s(vec![
            ("max_request_bytes", v(Kind::NumberValue(8388608.0))),
            ("session_affinity", v(Kind::BoolValue(true))),
            (
                "compression",
                v(Kind::StructValue(s(vec![
                    (
                        "preference",
                        v(Kind::ListValue(ListValue {
                            values: vec![
                                v(Kind::StringValue("gzip".into())),
                                v(Kind::StringValue("s2".into())),
                            ],
                        })),
                    ),
                    ("level", v(Kind::StringValue("fastest".into()))),
                    ("max_ratio", v(Kind::StringValue("0.5".into()))),
                ]))),
            ),
        ])
        .encode_to_vec()
    }

    #[test]
    fn a_yaml_struct_configuration_reads_as_its_json() {
        let from_struct = Config::parse(Some(&envoy_struct())).unwrap();
        let from_json = Config::parse(Some(
            br#"{"max_request_bytes": 8388608, "session_affinity": true, "compression": {"preference": ["gzip", "s2"], "level": "fastest", "max_ratio": 0.5}}"#,
        ))
        .unwrap();
        assert_eq!(from_struct, from_json);
        assert_eq!(from_struct.limits.max_request_bytes, 8_388_608);
        assert_eq!(from_struct.compression.max_ratio, 0.5);
        // The real bytes Envoy 1.40 sent for `{max_request_bytes: 8388608}`.
        let captured = b"\n\x1e\n\x11max_request_bytes\x12\t\x11\x00\x00\x00\x00\x00\x00\x60\x41";
        let c = Config::parse(Some(captured)).unwrap();
        assert_eq!(c.limits.max_request_bytes, 8_388_608);
        // Unknown keys and wrong types are errors here too.
        use prost::Message;
        let typo = prost_types::Struct {
            fields: [(
                "max_requests_bytes".to_owned(),
                prost_types::Value {
                    kind: Some(prost_types::value::Kind::NumberValue(1.0)),
                },
            )]
            .into_iter()
            .collect(),
        };
        let err = Config::parse(Some(&typo.encode_to_vec())).unwrap_err();
        assert!(err.to_string().contains("unknown field"), "{err}");
        let fraction = prost_types::Struct {
            fields: [(
                "max_request_bytes".to_owned(),
                prost_types::Value {
                    kind: Some(prost_types::value::Kind::NumberValue(1.5)),
                },
            )]
            .into_iter()
            .collect(),
        };
        assert!(Config::parse(Some(&fraction.encode_to_vec())).is_err());
        assert!(
            Config::parse(Some(b"\xff\xff")).is_err(),
            "neither JSON nor a Struct"
        );
        assert!(Config::parse(Some(b"\n\xff")).is_err(), "a broken Struct");
        assert_eq!(yaml_float("0.9"), Some(0.9));
        assert_eq!(yaml_float("5e-1"), Some(0.5));
        assert_eq!(yaml_float("fastest"), None);
        assert_eq!(yaml_float("inf"), None);
        assert_eq!(yaml_float("e1"), None);
    }

    /// A JSON configuration as Envoy 1.40 hands over the same keys written as YAML
    /// under a `google.protobuf.Struct`: integers as doubles, other numbers as strings.
    fn as_envoy_struct(json: &serde_json::Value) -> Vec<u8> {
        use prost::Message;
        use prost_types::{value::Kind, ListValue, Struct, Value};
        fn value(json: &serde_json::Value) -> Value {
            let kind = match json {
                serde_json::Value::Null => Kind::NullValue(0),
                serde_json::Value::Bool(b) => Kind::BoolValue(*b),
                serde_json::Value::Number(n) if n.is_f64() => Kind::StringValue(n.to_string()),
                serde_json::Value::Number(n) => Kind::NumberValue(n.as_f64().unwrap()),
                serde_json::Value::String(s) => Kind::StringValue(s.clone()),
                serde_json::Value::Array(a) => Kind::ListValue(ListValue {
                    values: a.iter().map(value).collect(),
                }),
                serde_json::Value::Object(o) => Kind::StructValue(Struct {
                    fields: o.iter().map(|(k, v)| (k.clone(), value(v))).collect(),
                }),
            };
            Value { kind: Some(kind) }
        }
        let Some(Kind::StructValue(s)) = value(json).kind else {
            panic!("an object")
        };
        s.encode_to_vec()
    }

    /// Istio's WasmPlugin and Envoy Gateway hand the configuration as a JSON string
    /// (`google.protobuf.StringValue`); our own configs as a Struct. Same keys, same
    /// results, and the same message for every mistake.
    #[test]
    fn a_json_string_and_a_struct_read_alike_and_fail_alike() {
        let cases = [
            r#"{}"#,
            r#"{"header_hold": "off", "session_affinity": false}"#,
            r#"{"header_hold": "auto", "session_affinity": true, "max_request_bytes": 1048576}"#,
            r#"{"compression": {"envoy": ["zstd"], "min_rtt_ms": 5, "near_networks": ["127.0.0.0/8", "::1/128"], "max_ratio": 0.75}}"#,
            r#"{"client_address": "peer"}"#,
            // Mistakes.
            r#"{"header_hold": "on"}"#,
            r#"{"client_address": "xff"}"#,
            r#"{"header_hold": "off", "session_affinity": true}"#,
            r#"{"max_requests_bytes": 8}"#,
            r#"{"compression": {"prefrence": ["gzip"]}}"#,
            r#"{"compression": {"preference": ["brotli"]}}"#,
            r#"{"compression": {"near_networks": ["10/8"]}}"#,
            r#"{"max_response_bytes": 0}"#,
            r#"{"session_affinity": "yes"}"#,
        ];
        let mut errors = 0;
        for case in cases {
            let json: serde_json::Value = serde_json::from_str(case).unwrap();
            let from_string = Config::parse(Some(case.as_bytes()));
            let from_struct = Config::parse(Some(&as_envoy_struct(&json)));
            assert_eq!(from_string, from_struct, "{case}");
            errors += usize::from(from_string.is_err());
        }
        assert_eq!(errors, 9, "every mistake is refused");
        let peer = Config::parse(Some(br#"{"client_address": "peer"}"#)).unwrap();
        assert_eq!(peer.client_address, ClientAddress::Peer);
        let e = Config::parse(Some(br#"{"client_address": "xff"}"#)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "client_address must be \"header\" or \"peer\", not \"xff\""
        );
        let off = Config::parse(Some(br#"{"header_hold": "off"}"#)).unwrap();
        assert_eq!(off.header_hold, HeaderHold::Off);
        let e = Config::parse(Some(br#"{"header_hold": "on"}"#)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "header_hold must be \"auto\" or \"off\", not \"on\""
        );
        let e = Config::parse(Some(br#"{"max_requests_bytes": 8}"#)).unwrap_err();
        assert!(
            e.to_string().contains("unknown field `max_requests_bytes`"),
            "{e}"
        );
    }

    #[test]
    fn bad_configurations_are_errors() {
        for bad in [
            &br#"{"max_request_bytes": 0}"#[..],
            br#"{"max_response_bytes": 1073741825}"#,
            br#"{"max_request_bytes": -1}"#,
            br#"{"max_request_bytes": "8"}"#,
            br#"{"session_affinity": "yes"}"#,
            br#"{"max_requests_bytes": 8}"#,
            b"[]",
            b"{",
            b"null",
        ] {
            let err = Config::parse(Some(bad)).unwrap_err();
            assert!(!err.to_string().is_empty());
        }
        for bad in [
            &br#"{"compression": {"preference": ["br"]}}"#[..],
            br#"{"compression": {"preference": ["identity"]}}"#,
            br#"{"compression": {"max_ratio": 0}}"#,
            br#"{"compression": {"max_ratio": 1.5}}"#,
            br#"{"compression": {"level": "best"}}"#,
            br#"{"compression": {"minbytes": 1}}"#,
            br#"{"compression": {"envoy": ["br"]}}"#,
            br#"{"compression": {"envoy": "zstd"}}"#,
        ] {
            assert!(Config::parse(Some(bad)).is_err());
        }
        let err = Config::parse(Some(br#"{"typo": 1}"#)).unwrap_err();
        assert!(err.to_string().contains("unknown field `typo`"), "{err}");
    }

    /// Each key set to its documented default gives the defaults; a key the parser
    /// knows and the table does not (or the other way round) fails.
    #[test]
    fn the_keys_are_what_the_parser_takes() {
        for key in KEYS {
            let text = match key.name.split_once('.') {
                Some((outer, inner)) => {
                    format!("{{\"{outer}\": {{\"{inner}\": {}}}}}", key.default)
                }
                None => format!("{{\"{}\": {}}}", key.name, key.default),
            };
            assert_eq!(
                Config::parse(Some(text.as_bytes())),
                Ok(Config::default()),
                "{}",
                key.name
            );
        }
        // serde names every field it takes when it refuses an unknown one.
        let expected = |text: &str| -> Vec<String> {
            let e = Config::parse(Some(text.as_bytes())).unwrap_err().0;
            let list = e.split("expected one of ").nth(1).unwrap_or_default();
            let mut names: Vec<String> = list
                .split(", ")
                .map(|n| n.trim_matches(|c: char| c == '`' || !c.is_ascii_graphic()))
                .map(|n| n.split('`').next().unwrap_or_default().to_owned())
                .collect();
            names.sort();
            names
        };
        let mut top: Vec<String> = KEYS
            .iter()
            .map(|k| k.name.split('.').next().unwrap_or_default().to_owned())
            .collect();
        top.sort();
        top.dedup();
        assert_eq!(expected(r#"{"zz": 1}"#), top);
        let mut nested: Vec<String> = KEYS
            .iter()
            .filter_map(|k| k.name.strip_prefix("compression."))
            .map(str::to_owned)
            .collect();
        nested.sort();
        assert_eq!(expected(r#"{"compression": {"zz": 1}}"#), nested);
    }

    /// docs/reference/settings.md shows [`KEYS`] as they are.
    #[test]
    fn the_reference_is_the_code() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../docs/reference/settings.md"
        );
        let doc = std::fs::read_to_string(path).unwrap();
        let (begin, end) = ("<!-- filter keys: begin -->", "<!-- filter keys: end -->");
        let start = doc.find(begin).unwrap() + begin.len();
        let stop = doc.find(end).unwrap();
        let mut expected = String::from("\n| key | default | meaning |\n|---|---|---|\n");
        for k in KEYS {
            expected.push_str(&format!(
                "| `{}` | `{}` | {} |\n",
                k.name, k.default, k.about
            ));
        }
        assert!(
            doc[start..stop] == expected,
            "docs/reference/settings.md between the markers should read:\n{expected}"
        );
    }
}
