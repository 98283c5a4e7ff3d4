//! Which MySQL accounts the gateway serves, and proof that the client's own
//! password is what let a login in.
//!
//! MySQL decides whether a password is right, but a login MySQL accepts does
//! not always prove one: `unix_socket` (MariaDB) and `auth_socket` (MySQL)
//! accept a socket connection by the *shim's* OS user and ignore the password.
//! The handshake does not show it (those plugins name no client-side plugin,
//! so the server never asks the client to switch). So:
//!
//! 1. before MySQL is asked: no empty password, no user on the deny-list;
//! 2. on the first connection of a new credential (pool admission, mysql/pool.rs):
//!    `SELECT CURRENT_USER()` must name the requested user and no denied one,
//!    and every authentication method of that account (`SHOW CREATE USER
//!    CURRENT_USER()`, which any account may run for itself) must be a
//!    password-proving plugin. MariaDB tries an account's methods in turn, so
//!    `mysql_native_password ... OR unix_socket` is refused too;
//! 3. and the account holds no privilege on every database (`ON *.*` in `SHOW
//!    GRANTS FOR CURRENT_USER()`, anything but `USAGE`): such an account is an
//!    administrator's (SUPER, PROCESS, FILE, REPLICATION..., or SELECT on
//!    `mysql.*` through `*.*`), not an application's, and is not served unless
//!    `FERRY_SERVE_GLOBAL_PRIVILEGES=true`. Privileges that come through a role
//!    are not seen (a role's grants are not the account's own lines).
//!
//! Every refusal reads the same to the client ([`AUTH_FAILED`]) and is answered
//! no sooner than the configured delay (server.rs), so the gateway is no
//! oracle for which accounts exist; the real reason goes to the shim's log.
use crate::credentials::Credentials;
use crate::mysql::auth_clause::auth_plugins;
use crate::settings::{Setting, Vars};
use mysql_async::prelude::Queryable;
use mysql_async::Conn;

/// The one answer for a wrong user, a wrong password and an account the
/// gateway does not serve.
pub const AUTH_FAILED: &str =
    "authentication failed: the user name and password were not accepted, or the account is not served by this gateway";

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AccountPolicy {
    /// `FERRY_DENY_USERS`: never served, whatever the password.
    pub deny_users: Vec<String>,
    /// `FERRY_PASSWORD_PLUGINS`: the only authentication plugins an account may have.
    pub password_plugins: Vec<String>,
    /// `FERRY_VERIFY_ACCOUNT` (true): run step 2 above.
    pub verify_account: bool,
    /// `FERRY_SERVE_GLOBAL_PRIVILEGES` (false): serve accounts with privileges `ON *.*`.
    pub serve_global_privileges: bool,
    /// `FERRY_MYSQL_KIND` (auto): MySQL, or Vitess's vtgate.
    pub kind: Kind,
}

impl Default for AccountPolicy {
    fn default() -> Self {
        let none = |_: &str| None;
        AccountPolicy::from_vars(&Vars::new(&none, &[SETTINGS]))
            .unwrap_or_else(|_| unreachable!("the defaults parse"))
    }
}

/// Who is served.
pub const SETTINGS: &[Setting] = &[
    Setting {
        name: "FERRY_DENY_USERS",
        default: "root,mariadb.sys,mysql,mysql.sys,mysql.session,mysql.infoschema,ferry_repl",
        about: "users never served, whatever the password, comma-separated (`none`: an empty list); `ferry_repl` is the replication account of Ferry's own stacks, which can read every change from the binary log",
    },
    Setting {
        name: "FERRY_PASSWORD_PLUGINS",
        default: "mysql_native_password,caching_sha2_password,sha256_password,ed25519,parsec",
        about: "the only authentication plugins a served account may have: those that prove the client knows the account's password",
    },
    Setting {
        name: "FERRY_VERIFY_ACCOUNT",
        default: "true",
        about: "check each new credential's account: its plugin, its grants ([who is served](../design/shim.md#who-is-served-only-the-clients-own-password-authenticates)); `false` skips both checks",
    },
    Setting {
        name: "FERRY_SERVE_GLOBAL_PRIVILEGES",
        default: "false",
        about: "also serve accounts with privileges `ON *.*` (administrators)",
    },
    Setting {
        name: "FERRY_MYSQL_KIND",
        default: "auto",
        about: "`mysql` (MariaDB, MySQL), `vitess` (vtgate: its own authentication is trusted once it is seen to refuse a wrong password; the account checks it cannot answer truthfully are skipped, [Vitess](../guides/vitess.md)) or `auto`: Vitess when the server's version ends in `-Vitess`",
    },
];

/// What the shim talks to, for the account checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Decided by the server's version.
    Auto,
    Mysql,
    Vitess,
}

impl Kind {
    fn parse(v: &str) -> Option<Kind> {
        match v.to_ascii_lowercase().as_str() {
            "auto" => Some(Kind::Auto),
            "mysql" => Some(Kind::Mysql),
            "vitess" => Some(Kind::Vitess),
            _ => None,
        }
    }
}

impl AccountPolicy {
    pub fn from_vars(vars: &Vars<'_>) -> Result<Self, String> {
        Ok(AccountPolicy {
            deny_users: vars.list("FERRY_DENY_USERS"),
            password_plugins: vars
                .list("FERRY_PASSWORD_PLUGINS")
                .into_iter()
                .map(|p| p.to_ascii_lowercase())
                .collect(),
            verify_account: vars.flag("FERRY_VERIFY_ACCOUNT")?,
            serve_global_privileges: vars.flag("FERRY_SERVE_GLOBAL_PRIVILEGES")?,
            kind: vars
                .parsed("FERRY_MYSQL_KIND", "auto, mysql or vitess", Kind::parse)?
                .unwrap_or(Kind::Auto),
        })
    }
}

/// Why a credential is not served: for the log, never for the client.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    EmptyPassword,
    DeniedUser(String),
    /// The login ended up as another account (anonymous or proxied).
    OtherAccount(String),
    NotPasswordProving(Vec<String>),
    /// The account holds these privileges on every database.
    GlobalPrivileges(Vec<String>),
    /// The account could not be inspected; refused rather than trusted.
    Unverifiable(String),
    /// vtgate let a wrong password in: its own authentication is off.
    AnyPasswordAccepted,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::EmptyPassword => write!(f, "empty password"),
            Refusal::DeniedUser(u) => write!(f, "user {u:?} is on the deny-list (FERRY_DENY_USERS)"),
            Refusal::OtherAccount(a) => write!(f, "MySQL logged the client in as another account, {a}"),
            Refusal::NotPasswordProving(p) => write!(
                f,
                "the account authenticates with {} (not all in FERRY_PASSWORD_PLUGINS): the password would not be what lets it in",
                p.join(" OR ")
            ),
            Refusal::GlobalPrivileges(p) => write!(
                f,
                "the account holds {} ON *.*: an administrative account, not served (FERRY_SERVE_GLOBAL_PRIVILEGES)",
                p.join(", ")
            ),
            Refusal::AnyPasswordAccepted => write!(
                f,
                "Vitess's vtgate accepted a wrong password for this user: its MySQL authentication is off (--mysql-auth-server-impl none), so a password proves nothing; Ferry does not serve it (start vtgate with a password check, e.g. static auth)"
            ),
            Refusal::Unverifiable(e) => write!(
                f,
                "cannot read the account's authentication methods ({e}); refused (FERRY_VERIFY_ACCOUNT)"
            ),
        }
    }
}

/// What went wrong while verifying: a refusal, or the connection failed.
/// How a credential's account was found fit to serve.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Served {
    /// Every check ran (or FERRY_VERIFY_ACCOUNT=false skipped them).
    Checked,
    /// vtgate's: it must be seen to refuse a wrong password first.
    ByVitess,
}

pub enum VerifyError {
    Refused(Refusal),
    Mysql(mysql_async::Error),
}

impl AccountPolicy {
    fn denied(&self, user: &str) -> bool {
        self.deny_users.iter().any(|d| d == user)
    }

    /// Step 1: before MySQL is asked.
    pub fn precheck(&self, creds: &Credentials) -> Result<(), Refusal> {
        if creds.password.is_empty() {
            return Err(Refusal::EmptyPassword);
        }
        if self.denied(&creds.user) {
            return Err(Refusal::DeniedUser(creds.user.clone()));
        }
        Ok(())
    }

    /// Step 2: on a connection MySQL has just accepted for `creds`. `Ok(Served::ByVitess)`:
    /// the connection is vtgate's, which answers `CURRENT_USER()` itself but sends `SHOW
    /// CREATE USER` and `SHOW GRANTS` to a tablet, where they describe the tablet's own
    /// account: those checks are skipped, and the caller must see vtgate refuse a wrong
    /// password before it trusts vtgate's authentication (mysql/pool.rs).
    pub async fn verify(
        &self,
        conn: &mut Conn,
        creds: &Credentials,
        vitess: bool,
    ) -> Result<Served, VerifyError> {
        if !self.verify_account {
            return Ok(Served::Checked);
        }
        let sql_refusal = |e: mysql_async::Error| match e {
            mysql_async::Error::Server(se) => VerifyError::Refused(Refusal::Unverifiable(format!(
                "errno {}: {}",
                se.code, se.message
            ))),
            other => VerifyError::Mysql(other),
        };
        let account: Option<String> = conn
            .query_first("SELECT CURRENT_USER()")
            .await
            .map_err(sql_refusal)?;
        let account = account.unwrap_or_default();
        self.check_account(&account, creds)
            .map_err(VerifyError::Refused)?;
        if vitess {
            return Ok(Served::ByVitess);
        }
        // Bytes, not a String: MySQL 8 shows an account that may read mysql.user
        // its raw password hash, which need not be UTF-8 (a String would panic
        // in the conversion). Only the secret can be lossy; the grammar is ASCII.
        let create_user: Option<Vec<u8>> = conn
            .query_first("SHOW CREATE USER CURRENT_USER()")
            .await
            .map_err(sql_refusal)?;
        let create_user = create_user.ok_or_else(|| {
            VerifyError::Refused(Refusal::Unverifiable(
                "SHOW CREATE USER returned nothing".into(),
            ))
        })?;
        self.check_plugins(&String::from_utf8_lossy(&create_user))
            .map_err(VerifyError::Refused)?;
        if self.serve_global_privileges {
            return Ok(Served::Checked);
        }
        // Bytes again: MariaDB prints the password hash in the USAGE line.
        let grants: Vec<Vec<u8>> = conn
            .query("SHOW GRANTS FOR CURRENT_USER()")
            .await
            .map_err(sql_refusal)?;
        let global: Vec<String> = grants
            .iter()
            .flat_map(|line| global_privileges(&String::from_utf8_lossy(line)))
            .collect();
        if global.is_empty() {
            Ok(Served::Checked)
        } else {
            Err(VerifyError::Refused(Refusal::GlobalPrivileges(global)))
        }
    }

    /// Whether this connection is vtgate's (Vitess): `FERRY_MYSQL_KIND`, or with
    /// `auto` the `-Vitess` suffix of the version vtgate announces.
    pub async fn is_vitess(&self, conn: &mut Conn) -> Result<bool, mysql_async::Error> {
        Ok(match self.kind {
            Kind::Mysql => false,
            Kind::Vitess => true,
            Kind::Auto => {
                let version: Option<String> = conn.query_first("SELECT @@version").await?;
                version.is_some_and(|v| v.ends_with("-Vitess"))
            }
        })
    }

    /// `CURRENT_USER()` is `user@host`; the user part must be the one asked for.
    fn check_account(&self, account: &str, creds: &Credentials) -> Result<(), Refusal> {
        let user = account.rsplit_once('@').map_or(account, |(u, _)| u);
        if self.denied(user) {
            return Err(Refusal::DeniedUser(user.to_owned()));
        }
        if user != creds.user {
            return Err(Refusal::OtherAccount(account.to_owned()));
        }
        Ok(())
    }

    fn check_plugins(&self, create_user: &str) -> Result<(), Refusal> {
        let plugins = auth_plugins(create_user).map_err(Refusal::Unverifiable)?;
        if plugins.is_empty()
            || !plugins
                .iter()
                .all(|p| self.password_plugins.iter().any(|ok| ok == p))
        {
            return Err(Refusal::NotPasswordProving(plugins));
        }
        Ok(())
    }
}

/// The privileges one `SHOW GRANTS` line gives on every database (`ON *.*`),
/// `USAGE` (none) left out, `GRANT OPTION` included; empty for any other line
/// (a database, table or routine grant, a role, `PROXY`).
fn global_privileges(line: &str) -> Vec<String> {
    let Some(rest) = line.trim().strip_prefix("GRANT ") else {
        return Vec::new();
    };
    let Some((privileges, after)) = rest.split_once(" ON *.* TO ") else {
        return Vec::new();
    };
    let mut out: Vec<String> = privileges
        .split(',')
        .map(|p| p.trim().to_ascii_uppercase())
        .filter(|p| !p.is_empty() && p != "USAGE")
        .collect();
    if after.trim_end().ends_with("WITH GRANT OPTION") {
        out.push("GRANT OPTION".into());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn global_privileges_come_from_on_star_star_lines() {
        // As MariaDB 10.11 and MySQL 8.0 print them.
        for (line, want) in [
            (
                "GRANT USAGE ON *.* TO `ferry`@`localhost` IDENTIFIED BY PASSWORD '*A4B6157319038724E3560894F7F932C8886EBFCF'",
                vec![],
            ),
            ("GRANT ALL PRIVILEGES ON `ferry`.* TO `ferry`@`localhost`", vec![]),
            ("GRANT SELECT (`a`, `b`) ON `ferry`.`t` TO `u`@`%`", vec![]),
            ("GRANT `app_role` TO `u`@`%`", vec![]),
            ("GRANT PROXY ON ''@'%' TO 'u'@'%'", vec![]),
            ("GRANT USAGE ON *.* TO `ferry`@`localhost`", vec![]),
            (
                "GRANT REPLICATION SLAVE ON *.* TO `ferry_repl`@`127.0.0.1` IDENTIFIED BY PASSWORD '*X'",
                vec!["REPLICATION SLAVE"],
            ),
            ("GRANT PROCESS, SELECT ON *.* TO `ops`@`%`", vec!["PROCESS", "SELECT"]),
            (
                "GRANT ALL PRIVILEGES ON *.* TO `root`@`localhost` IDENTIFIED VIA mysql_native_password USING 'invalid' OR unix_socket WITH GRANT OPTION",
                vec!["ALL PRIVILEGES", "GRANT OPTION"],
            ),
            (
                "GRANT BACKUP_ADMIN,CONNECTION_ADMIN ON *.* TO `admin`@`%`",
                vec!["BACKUP_ADMIN", "CONNECTION_ADMIN"],
            ),
            (
                "GRANT USAGE ON *.* TO `u`@`%` WITH GRANT OPTION",
                vec!["GRANT OPTION"],
            ),
        ] {
            assert_eq!(global_privileges(line), want, "{line}");
        }
    }

    fn creds(user: &str, password: &str) -> Credentials {
        Credentials {
            user: user.into(),
            password: password.into(),
        }
    }

    #[test]
    fn precheck_refuses_empty_passwords_and_denied_users() {
        let p = AccountPolicy::default();
        assert_eq!(p.precheck(&creds("ferry", "pw")), Ok(()));
        assert_eq!(p.precheck(&creds("ferry", "")), Err(Refusal::EmptyPassword));
        for user in &AccountPolicy::default().deny_users {
            assert_eq!(
                p.precheck(&creds(user, "right-or-wrong")),
                Err(Refusal::DeniedUser(user.to_string()))
            );
        }
    }

    #[test]
    fn the_logged_in_account_must_be_the_requested_one() {
        let p = AccountPolicy::default();
        assert_eq!(
            p.check_account("ferry@localhost", &creds("ferry", "x")),
            Ok(())
        );
        assert_eq!(p.check_account("ferry@%", &creds("ferry", "x")), Ok(()));
        // An anonymous account matched, or MySQL resolved `root ` to root.
        assert_eq!(
            p.check_account("@localhost", &creds("ferry", "x")),
            Err(Refusal::OtherAccount("@localhost".into()))
        );
        assert_eq!(
            p.check_account("root@localhost", &creds("root ", "x")),
            Err(Refusal::DeniedUser("root".into()))
        );
    }

    #[test]
    fn only_password_proving_plugins_pass() {
        let p = AccountPolicy::default();
        assert_eq!(
            p.check_plugins("CREATE USER `f`@`%` IDENTIFIED BY PASSWORD '*820F'"),
            Ok(())
        );
        assert_eq!(
            p.check_plugins(
                "CREATE USER `f`@`%` IDENTIFIED WITH 'caching_sha2_password' AS '<secret>'"
            ),
            Ok(())
        );
        for (stmt, plugins) in [
            ("CREATE USER `s`@`localhost` IDENTIFIED VIA unix_socket", vec!["unix_socket"]),
            ("CREATE USER 's'@'localhost' IDENTIFIED WITH 'auth_socket'", vec!["auth_socket"]),
            (
                "CREATE USER `c`@`localhost` IDENTIFIED VIA mysql_native_password USING '*D8' OR unix_socket",
                vec!["mysql_native_password", "unix_socket"],
            ),
            ("CREATE USER `p`@`%` IDENTIFIED VIA pam USING 'mariadb'", vec!["pam"]),
        ] {
            assert_eq!(
                p.check_plugins(stmt),
                Err(Refusal::NotPasswordProving(
                    plugins.into_iter().map(String::from).collect()
                )),
                "{stmt}"
            );
        }
        assert!(matches!(
            p.check_plugins("CREATE USER `u`@`%` IDENTIFIED SOMEHOW"),
            Err(Refusal::Unverifiable(_))
        ));
    }

    #[test]
    fn refusals_never_print_a_password() {
        // The reasons are logged; none of them carries the password.
        let p = AccountPolicy::default();
        let c = creds("root", "s3cret-pw");
        let r = p.precheck(&c).unwrap_err();
        assert!(!r.to_string().contains("s3cret-pw"));
    }

    #[test]
    fn the_kind_is_a_setting() {
        let vars =
            |v: &'static str| move |name: &str| (name == "FERRY_MYSQL_KIND").then(|| v.to_owned());
        for (v, kind) in [
            ("auto", Kind::Auto),
            ("Vitess", Kind::Vitess),
            ("mysql", Kind::Mysql),
        ] {
            let lookup = vars(v);
            let p = AccountPolicy::from_vars(&Vars::new(&lookup, &[SETTINGS])).unwrap();
            assert_eq!(p.kind, kind, "{v}");
        }
        let lookup = vars("mariadb");
        assert!(AccountPolicy::from_vars(&Vars::new(&lookup, &[SETTINGS])).is_err());
        assert_eq!(AccountPolicy::default().kind, Kind::Auto);
    }
}
