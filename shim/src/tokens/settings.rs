//! Tokens' settings (tokens/): which claim names the account, the mapping of its
//! values to MySQL users, and the file of those users' passwords.
use crate::settings::{Setting, Vars};
use std::path::PathBuf;

#[derive(Clone, Debug, Default, PartialEq)]
pub struct TokenSettings {
    pub claim: String,
    /// (claim value, MySQL user), in the setting's order; empty: tokens are off.
    pub accounts: Vec<(String, String)>,
    pub secrets_file: Option<PathBuf>,
}

pub const SETTINGS: &[Setting] = &[
    Setting {
        name: "FERRY_TOKEN_ACCOUNTS",
        default: "",
        about: "which MySQL user a verified token runs as: `claim value=user` pairs, comma-separated (e.g. `app=app_rw,reports=app_ro`); empty: tokens are off and a request with verified claims is refused ([tokens](../guides/tokens.md))",
    },
    Setting {
        name: "FERRY_TOKEN_CLAIM",
        default: "ferry_account",
        about: "the token claim whose value `FERRY_TOKEN_ACCOUNTS` maps",
    },
    Setting {
        name: "FERRY_TOKEN_SECRETS_FILE",
        default: "",
        about: "the mapped users' passwords, one `user:password` per line (`#` comments); required with `FERRY_TOKEN_ACCOUNTS`, and refused at start-up unless only its owner can read it (mode 0600 or 0400)",
    },
];

impl TokenSettings {
    pub fn from_vars(vars: &Vars<'_>) -> Result<Self, String> {
        let mut accounts = Vec::new();
        for pair in vars
            .text("FERRY_TOKEN_ACCOUNTS")
            .unwrap_or_default()
            .split(',')
        {
            let pair = pair.trim();
            if pair.is_empty() {
                continue;
            }
            match pair.split_once('=') {
                Some((value, user)) if !value.trim().is_empty() && !user.trim().is_empty() => {
                    accounts.push((value.trim().to_owned(), user.trim().to_owned()))
                }
                _ => {
                    return Err(format!(
                        "FERRY_TOKEN_ACCOUNTS: {pair:?} is not `claim value=user`"
                    ))
                }
            }
        }
        let secrets_file = vars.set("FERRY_TOKEN_SECRETS_FILE").map(PathBuf::from);
        if !accounts.is_empty() && secrets_file.is_none() {
            return Err(
                "FERRY_TOKEN_ACCOUNTS needs FERRY_TOKEN_SECRETS_FILE (the mapped users' passwords)"
                    .into(),
            );
        }
        Ok(TokenSettings {
            claim: vars.text("FERRY_TOKEN_CLAIM").unwrap_or_default(),
            accounts,
            secrets_file,
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    fn cfg(vars: &[(&str, &str)]) -> Result<Config, String> {
        Config::from_lookup(|n| {
            vars.iter()
                .find(|(k, _)| *k == n)
                .map(|(_, v)| (*v).to_owned())
        })
    }

    #[test]
    fn off_by_default_and_read_as_pairs() {
        let t = cfg(&[]).unwrap().tokens;
        assert!(t.accounts.is_empty());
        assert_eq!(t.claim, "ferry_account");
        let t = cfg(&[
            ("FERRY_TOKEN_ACCOUNTS", " app=app_rw, reports = app_ro ,"),
            ("FERRY_TOKEN_SECRETS_FILE", "/s"),
        ])
        .unwrap()
        .tokens;
        assert_eq!(
            t.accounts,
            [
                ("app".into(), "app_rw".into()),
                ("reports".into(), "app_ro".into())
            ]
        );
        assert!(cfg(&[("FERRY_TOKEN_ACCOUNTS", "app=x")])
            .unwrap_err()
            .contains("FERRY_TOKEN_SECRETS_FILE"));
        assert!(cfg(&[
            ("FERRY_TOKEN_ACCOUNTS", "app"),
            ("FERRY_TOKEN_SECRETS_FILE", "/s")
        ])
        .unwrap_err()
        .contains("not `claim value=user`"));
    }
}
