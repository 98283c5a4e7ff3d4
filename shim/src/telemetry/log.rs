//! One structured line per event on stderr (`level=... msg=... key=value`),
//! filtered by `FERRY_LOG` (error, warn, info, debug; default info). Small on
//! purpose: the shim logs errors, not traffic, and never passwords or queries.
use crate::settings::{Setting, Vars};
use std::sync::atomic::{AtomicU8, Ordering};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum Level {
    Error = 0,
    Warn = 1,
    Info = 2,
    Debug = 3,
}

impl Level {
    pub fn parse(s: &str) -> Option<Level> {
        match s.trim().to_ascii_lowercase().as_str() {
            "error" => Some(Level::Error),
            "warn" | "warning" => Some(Level::Warn),
            "info" => Some(Level::Info),
            "debug" | "trace" => Some(Level::Debug),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Level::Error => "error",
            Level::Warn => "warn",
            Level::Info => "info",
            Level::Debug => "debug",
        }
    }
}

static LEVEL: AtomicU8 = AtomicU8::new(Level::Info as u8);

pub fn set_level(level: Level) {
    LEVEL.store(level as u8, Ordering::Relaxed);
}

pub fn enabled(level: Level) -> bool {
    level as u8 <= LEVEL.load(Ordering::Relaxed)
}

/// Writes `level=<l> msg="<msg>" k=v ...`; values are quoted when they contain
/// spaces, quotes or `=`, so every line stays machine-splittable.
pub fn write(level: Level, msg: &str, fields: &[(&str, &dyn std::fmt::Display)]) {
    if !enabled(level) {
        return;
    }
    let mut line = format!("level={} msg={}", level.name(), quote(msg));
    for (k, v) in fields {
        line.push(' ');
        line.push_str(k);
        line.push('=');
        line.push_str(&quote(&v.to_string()));
    }
    eprintln!("{line}");
}

fn quote(s: &str) -> String {
    if !s.is_empty() && !s.contains(|c: char| c.is_whitespace() || c == '"' || c == '=') {
        return s.to_owned();
    }
    format!("{s:?}")
}

/// `log!(Level::Warn, "message", key = value, ...)`
#[macro_export]
macro_rules! log {
    ($level:expr, $msg:expr $(, $k:ident = $v:expr)* $(,)?) => {
        if $crate::log::enabled($level) {
            $crate::log::write($level, &$msg, &[$((stringify!($k), &$v as &dyn std::fmt::Display)),*]);
        }
    };
}

pub const SETTINGS: &[Setting] = &[Setting {
    name: "FERRY_LOG",
    default: "info",
    about: "`error`, `warn`, `info` or `debug`: one `key=value` line per event on stderr",
}];

impl Level {
    pub fn from_vars(vars: &Vars<'_>) -> Result<Self, String> {
        vars.parsed("FERRY_LOG", "one of error, warn, info, debug", Level::parse)
            .map(|l| l.unwrap_or(Level::Info))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_keeps_lines_splittable() {
        assert_eq!(quote("plain"), "plain");
        assert_eq!(quote("two words"), "\"two words\"");
        assert_eq!(quote(""), "\"\"");
        assert_eq!(Level::parse("WARN"), Some(Level::Warn));
        assert_eq!(Level::parse("loud"), None);
    }
}
