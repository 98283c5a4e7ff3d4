//! The mapping of a token's claim to a MySQL account, with the passwords from the
//! secrets file (read once, at start-up).
use super::claims;
use super::settings::TokenSettings;
use crate::credentials::Credentials;
use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;

#[derive(Debug)]
pub struct TokenAccounts {
    claim: String,
    accounts: HashMap<String, Credentials>,
}

impl TokenAccounts {
    /// `None` when tokens are off (no mapping).
    pub fn load(s: &TokenSettings) -> Result<Option<TokenAccounts>, String> {
        let Some(path) = s.secrets_file.as_ref().filter(|_| !s.accounts.is_empty()) else {
            return Ok(None);
        };
        let name = format!("FERRY_TOKEN_SECRETS_FILE {}", path.display());
        let meta = std::fs::metadata(path).map_err(|e| format!("{name}: {e}"))?;
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(format!(
                "{name}: others can read it (mode {mode:o}); it holds passwords: chmod 600"
            ));
        }
        let text = std::fs::read_to_string(path).map_err(|e| format!("{name}: {e}"))?;
        TokenAccounts::from_parts(s, &text)
            .map(Some)
            .map_err(|e| format!("{name}: {e}"))
    }

    fn from_parts(s: &TokenSettings, secrets: &str) -> Result<TokenAccounts, String> {
        let mut passwords = HashMap::new();
        for (i, line) in secrets.lines().enumerate() {
            let line = line.trim_end_matches('\r');
            if line.trim().is_empty() || line.trim_start().starts_with('#') {
                continue;
            }
            // Never the line itself in a message: it holds a password.
            let (user, password) = line
                .split_once(':')
                .filter(|(u, _)| !u.trim().is_empty())
                .ok_or_else(|| format!("line {} is not `user:password`", i + 1))?;
            passwords.insert(user.trim().to_owned(), password.to_owned());
        }
        let mut accounts = HashMap::new();
        for (value, user) in &s.accounts {
            let password = passwords.get(user).ok_or_else(|| {
                format!("no password for {user} (FERRY_TOKEN_ACCOUNTS maps {value} to it)")
            })?;
            accounts.insert(
                value.clone(),
                Credentials {
                    user: user.clone(),
                    password: password.clone(),
                },
            );
        }
        Ok(TokenAccounts {
            claim: s.claim.clone(),
            accounts,
        })
    }

    /// The account the verified claims (`x-ferry-token-claims`) map to.
    pub fn credentials(&self, claims_header: &[u8]) -> Result<Credentials, String> {
        let value = claims::claim(claims_header, &self.claim)?;
        self.accounts.get(&value).cloned().ok_or_else(|| {
            format!(
                "the token's `{}` claim names no account this gateway serves",
                self.claim
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;

    fn settings() -> TokenSettings {
        TokenSettings {
            claim: "ferry_account".into(),
            accounts: vec![("app".into(), "app_rw".into())],
            secrets_file: None,
        }
    }

    #[test]
    fn maps_a_claim_to_its_user_and_password() {
        let t = TokenAccounts::from_parts(&settings(), "# dev\napp_rw:pa:ss\n\nother:x\n").unwrap();
        let claims =
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(r#"{"ferry_account":"app"}"#);
        let c = t.credentials(claims.as_bytes()).unwrap();
        assert_eq!((c.user.as_str(), c.password.as_str()), ("app_rw", "pa:ss"));
        let other =
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(r#"{"ferry_account":"other"}"#);
        assert!(t
            .credentials(other.as_bytes())
            .unwrap_err()
            .contains("no account"));
    }

    #[test]
    fn a_mapped_user_needs_a_password_and_lines_are_never_quoted() {
        let e = TokenAccounts::from_parts(&settings(), "someone:else\n").unwrap_err();
        assert!(e.contains("no password for app_rw"), "{e}");
        let e = TokenAccounts::from_parts(&settings(), "secret-without-colon\n").unwrap_err();
        assert_eq!(e, "line 1 is not `user:password`");
    }

    #[test]
    fn a_file_others_can_read_is_refused() {
        let dir = std::env::temp_dir().join(format!("ferry-token-secrets-{}", std::process::id()));
        std::fs::write(&dir, "app_rw:pw\n").unwrap();
        let s = TokenSettings {
            secrets_file: Some(dir.clone()),
            ..settings()
        };
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(TokenAccounts::load(&s).unwrap_err().contains("chmod 600"));
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(TokenAccounts::load(&s).unwrap().is_some());
        std::fs::remove_file(&dir).unwrap();
        assert!(TokenAccounts::load(&TokenSettings::default())
            .unwrap()
            .is_none());
    }
}
