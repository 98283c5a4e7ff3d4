//! Reading the shim's settings from the environment. Every module that has
//! settings lists them in a table (`SETTINGS`: name, default, meaning) and
//! reads them through [`Vars`], whose parsers are the same for every setting:
//! a default is written once, in its table, and parsed like a value that was
//! set; a flag is spelled one way everywhere. config.rs gathers the tables;
//! docs/reference/settings.md is rendered from them and checked by a test.
use std::time::Duration;

/// One environment variable the shim reads.
pub struct Setting {
    pub name: &'static str,
    /// Parsed as if it were set; empty: unset unless `about` says what applies.
    pub default: &'static str,
    /// One line for the reference (Markdown).
    pub about: &'static str,
}

/// The spellings of a flag, any letter case.
const TRUE: [&str; 4] = ["true", "1", "yes", "on"];
const FALSE: [&str; 4] = ["false", "0", "no", "off"];

/// The environment (or a test's variables) with the settings' defaults.
pub struct Vars<'a> {
    lookup: &'a dyn Fn(&str) -> Option<String>,
    tables: &'a [&'a [Setting]],
}

impl<'a> Vars<'a> {
    pub fn new(lookup: &'a dyn Fn(&str) -> Option<String>, tables: &'a [&'a [Setting]]) -> Self {
        Vars { lookup, tables }
    }

    /// The value as set (an empty value is unset).
    pub fn set(&self, name: &str) -> Option<String> {
        (self.lookup)(name).filter(|v| !v.is_empty())
    }

    /// The value as set, else its default (`None`: neither).
    pub fn text(&self, name: &str) -> Option<String> {
        self.set(name).or_else(|| {
            self.tables
                .iter()
                .flat_map(|t| t.iter())
                .find(|s| s.name == name)
                .map(|s| s.default)
                .filter(|d| !d.is_empty())
                .map(str::to_owned)
        })
    }

    /// A value that `parse` reads; `expected` says what it should have been.
    pub fn parsed<T>(
        &self,
        name: &str,
        expected: &str,
        parse: impl Fn(&str) -> Option<T>,
    ) -> Result<Option<T>, String> {
        match self.text(name) {
            None => Ok(None),
            Some(v) => parse(v.trim())
                .map(Some)
                .ok_or_else(|| format!("{name}={v:?} is not {expected}")),
        }
    }

    /// A whole number (unset with no default: 0).
    pub fn number(&self, name: &str) -> Result<u64, String> {
        self.parsed(name, "a number", |v| v.parse().ok())
            .map(Option::unwrap_or_default)
    }

    pub fn size(&self, name: &str) -> Result<usize, String> {
        self.number(name)
            .map(|n| usize::try_from(n).unwrap_or(usize::MAX))
    }

    /// Whole seconds, at least one.
    pub fn secs(&self, name: &str) -> Result<Duration, String> {
        self.number(name)
            .map(|s| Duration::from_secs(s).max(Duration::from_secs(1)))
    }

    pub fn millis(&self, name: &str) -> Result<Duration, String> {
        self.number(name).map(Duration::from_millis)
    }

    /// A flag: true, 1, yes, on or false, 0, no, off (unset with no default: false).
    pub fn flag(&self, name: &str) -> Result<bool, String> {
        self.parsed(name, "true or false", |v| {
            let is = |words: [&str; 4]| words.iter().any(|w| w.eq_ignore_ascii_case(v));
            if is(TRUE) {
                Some(true)
            } else if is(FALSE) {
                Some(false)
            } else {
                None
            }
        })
        .map(Option::unwrap_or_default)
    }

    /// A comma-separated list; `none` empties it.
    pub fn list(&self, name: &str) -> Vec<String> {
        match self.text(name) {
            None => Vec::new(),
            Some(v) if v.trim().eq_ignore_ascii_case("none") => Vec::new(),
            Some(v) => v
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect(),
        }
    }
}

/// The reference table of `tables` (docs/reference/settings.md).
#[cfg(test)]
pub fn reference(tables: &[(&str, &[Setting])]) -> String {
    let mut out = String::new();
    for (section, settings) in tables {
        out.push_str(&format!(
            "\n#### {section}\n\n| variable | default | meaning |\n|---|---|---|\n"
        ));
        for s in settings.iter() {
            let default = if s.default.is_empty() {
                "—".to_owned()
            } else {
                format!("`{}`", s.default)
            };
            out.push_str(&format!("| `{}` | {default} | {} |\n", s.name, s.about));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &[Setting] = &[
        Setting {
            name: "N",
            default: "7",
            about: "",
        },
        Setting {
            name: "F",
            default: "",
            about: "",
        },
    ];

    #[test]
    fn one_spelling_of_flags_and_defaults_parsed_as_values() {
        let env = |name: &str| match name {
            "F" => Some("On".to_owned()),
            "N" => Some(String::new()), // empty: unset
            _ => None,
        };
        let vars = Vars::new(&env, &[TABLE]);
        assert_eq!((vars.number("N"), vars.flag("F")), (Ok(7), Ok(true)));
        for (v, want) in [("YES", true), ("1", true), ("off", false), ("No", false)] {
            let env = move |_: &str| Some(v.to_owned());
            assert_eq!(Vars::new(&env, &[TABLE]).flag("F"), Ok(want), "{v}");
        }
        let env = |_: &str| Some("maybe".to_owned());
        assert_eq!(
            Vars::new(&env, &[TABLE]).flag("F"),
            Err("F=\"maybe\" is not true or false".to_owned())
        );
        let none = |_: &str| None;
        assert_eq!(Vars::new(&none, &[TABLE]).flag("F"), Ok(false));
    }
}
