//! The plugin configuration (Envoy's `configuration` of the wasm filter), a JSON
//! object whose keys are all optional:
//!
//! | key | default | meaning |
//! |---|---|---|
//! | `max_request_bytes` | 8388608 (8 MiB) | largest request body (framing included) |
//! | `max_response_bytes` | 67108864 (64 MiB) | largest response body from the shim |
//! | `session_affinity` | false | route a pinned session to the shim holding it (`affinity.rs`) |
//! | `compression.preference` | `["s2", "snappy", "gzip", "zstd"]` | codecs for answers, most preferred first; the first one the client accepts is used (`[]`: never compress) |
//! | `compression.min_bytes` | 1024 | messages smaller than this go uncompressed |
//! | `compression.sample_bytes` | 65536 | how much of a message's start is compressed to judge it |
//! | `compression.max_ratio` | 0.9 | compress only when the sample (then the message) shrinks to at most this |
//! | `compression.level` | `"fastest"` | `"fastest"` or `"default"` (gzip -1 or -6; zstd has only its fastest level here) |
//!
//! Requests are decompressed whatever they use among identity, gzip, zstd, snappy and
//! s2, up to `max_request_bytes` of output.
//!
//! `session_affinity` holds the request headers of `Execute`/`CloseSession` until the
//! body is read, which needs the wasm filter's `allow_on_headers_stop_iteration: true`
//! in Envoy (without it such requests hang until Envoy's timeout), and Envoy's
//! `stateful_session` filter (header `x-ferry-host`) after this one to act on it.
//!
//! Limits must be between 1 and [`MAX_LIMIT`]. Unknown keys are errors (a typo must not
//! silently keep a default). An absent or empty configuration means all defaults.
//! Keep Envoy's per-route `request_body_buffer_limit` above both limits, so the
//! filter's clear `resource_exhausted` fires before Envoy's own buffer overflow.

use std::fmt;

use ferry_compress::{Encoding, Level, Policy};
use serde::Deserialize;

use crate::limits::{Limits, DEFAULT_MAX_REQUEST_BYTES, DEFAULT_MAX_RESPONSE_BYTES};

/// Upper bound for either limit: 1 GiB (a wasm32 VM has at most 4 GiB of memory, and a
/// gRPC frame length is 32 bits).
pub const MAX_LIMIT: u64 = 1 << 30;

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Config {
    pub limits: Limits,
    pub session_affinity: bool,
    /// When and how answers are compressed.
    pub compression: Policy,
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
}

impl RawCompression {
    fn policy(self) -> Result<Policy, ConfigError> {
        let mut policy = Policy::default();
        if let Some(names) = self.preference {
            policy.preference = names
                .iter()
                .map(|name| match Encoding::parse(name) {
                    Some(Encoding::Identity) | None => Err(ConfigError(format!(
                        "compression.preference: {name:?} is not a codec (gzip, zstd, snappy, s2)"
                    ))),
                    Some(encoding) => Ok(encoding),
                })
                .collect::<Result<_, _>>()?;
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
        let value: serde_json::Value = serde_json::from_slice(raw).map_err(invalid)?;
        if !value.is_object() {
            return Err(ConfigError(
                "plugin configuration must be a JSON object".into(),
            ));
        }
        let raw: Raw = serde_json::from_value(value).map_err(invalid)?;
        Ok(Config {
            limits: Limits {
                max_request_bytes: limit("max_request_bytes", raw.max_request_bytes)?,
                max_response_bytes: limit("max_response_bytes", raw.max_response_bytes)?,
            },
            session_affinity: raw.session_affinity,
            compression: raw.compression.policy()?,
        })
    }
}

fn limit(key: &str, value: u64) -> Result<usize, ConfigError> {
    if value == 0 || value > MAX_LIMIT {
        return Err(ConfigError(format!(
            "{key} must be between 1 and {MAX_LIMIT}, not {value}"
        )));
    }
    usize::try_from(value).map_err(|_| ConfigError(format!("{key} is too large: {value}")))
}

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
            compression: Policy::default(),
        };
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
        let off = Config::parse(Some(br#"{"compression": {"preference": []}}"#)).unwrap();
        assert!(off.compression.preference.is_empty());
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
        ] {
            assert!(Config::parse(Some(bad)).is_err());
        }
        let err = Config::parse(Some(br#"{"typo": 1}"#)).unwrap_err();
        assert!(err.to_string().contains("unknown field `typo`"), "{err}");
    }
}
