//! The plugin configuration (Envoy's `configuration` of the wasm filter), a JSON
//! object whose keys are all optional:
//!
//! | key | default | meaning |
//! |---|---|---|
//! | `max_request_bytes` | 8388608 (8 MiB) | largest request body (framing included) |
//! | `max_response_bytes` | 67108864 (64 MiB) | largest response body from the shim |
//! | `session_affinity` | false | route a pinned session to the shim holding it (`affinity.rs`) |
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

use serde::Deserialize;

use crate::limits::{Limits, DEFAULT_MAX_REQUEST_BYTES, DEFAULT_MAX_RESPONSE_BYTES};

/// Upper bound for either limit: 1 GiB (a wasm32 VM has at most 4 GiB of memory, and a
/// gRPC frame length is 32 bits).
pub const MAX_LIMIT: u64 = 1 << 30;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Config {
    pub limits: Limits,
    pub session_affinity: bool,
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
        let err = Config::parse(Some(br#"{"typo": 1}"#)).unwrap_err();
        assert!(err.to_string().contains("unknown field `typo`"), "{err}");
    }
}
