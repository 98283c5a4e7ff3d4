//! Only the client's own password authenticates (issue: any password logged in
//! as root when MariaDB trusted the shim's OS identity).
//!
//! Two gateways run on one MariaDB (scripts/e2e.sh): the main one, whose shim
//! reaches MariaDB over its unix socket, and one on `FERRY_E2E_TCP_PORT` whose
//! shim uses TCP (with TLS, mysql_tls.rs). The shim runs as its own OS user (`FERRY_SHIM_OS_USER`); an
//! account of that name identified via `unix_socket` would let any password in
//! through the socket, which these tests first show with the mariadb client.
mod common;
use common::*;
use ferry_e2e::config::{basic_auth, Config};
use ferry_e2e::connect::{ConnectClient, EXECUTE};
use ferry_e2e::h3_client::H3Client;
use ferry_e2e::Answer;
use std::process::Command;
use std::time::{Duration, Instant};

/// The shim's floor for `unauthenticated` answers (FERRY_AUTH_FAILURE_DELAY_MS default).
const AUTH_FAILURE_DELAY: Duration = Duration::from_millis(250);

#[derive(Clone, Copy, Debug)]
enum Transport {
    H2,
    H3,
}

/// (gateway name, its config): over the socket and over TCP.
fn gateways() -> Vec<(&'static str, Config)> {
    vec![("socket", cfg()), ("tcp", tcp_gateway())]
}

fn shim_os_user() -> String {
    std::env::var("FERRY_SHIM_OS_USER")
        .expect("FERRY_SHIM_OS_USER: the OS user the shim runs as (scripts/e2e.sh)")
}

/// `SELECT CURRENT_USER()` through the gateway, as Connect JSON.
async fn current_user(cfg: &Config, t: Transport, auth: &str) -> (Answer, Duration) {
    query_as(cfg, t, auth, "SELECT CURRENT_USER()").await
}

async fn query_as(cfg: &Config, t: Transport, auth: &str, sql: &str) -> (Answer, Duration) {
    let headers = [
        ("content-type", "application/json"),
        ("authorization", auth),
    ];
    let body = serde_json::json!({ "query": sql }).to_string().into_bytes();
    let started = Instant::now();
    let a = match t {
        Transport::H2 => {
            ConnectClient::http2(cfg)
                .post(EXECUTE, &headers, body)
                .await
        }
        Transport::H3 => {
            let mut h3 = H3Client::connect(cfg).await.expect("HTTP/3 connection");
            let a = h3
                .post(EXECUTE, &headers, body.into())
                .await
                .expect("HTTP/3 request");
            h3.close().await;
            a
        }
    };
    (a, started.elapsed())
}

/// The refusal every unserved credential gets: 401, `unauthenticated`, one
/// message, no sooner than the floor. Returns the message.
fn assert_refused(a: &Answer, took: Duration, what: &str) -> String {
    assert_eq!(
        a.status,
        401,
        "{what}: {:?}",
        String::from_utf8_lossy(&a.body)
    );
    let v = a.json();
    assert_eq!(v["code"], "unauthenticated", "{what}: {v}");
    assert!(
        took >= AUTH_FAILURE_DELAY,
        "{what}: answered after {took:?}, before the {AUTH_FAILURE_DELAY:?} floor"
    );
    v["message"].as_str().unwrap_or_default().to_owned()
}

fn the_one_refusal() -> &'static str {
    "authentication failed: the user name and password were not accepted, or the account is not served by this gateway"
}

/// Runs the mariadb client as `os_user` (directly, or through setpriv when we
/// are root and it is another user), logging in as MySQL user `os_user`.
fn mariadb_as_os_user(os_user: &str, password: &str) -> std::process::Output {
    let cfg = cfg();
    let me = String::from_utf8(Command::new("id").arg("-un").output().unwrap().stdout).unwrap();
    let mut cmd = if me.trim() == os_user {
        Command::new("mariadb")
    } else {
        let mut c = Command::new("setpriv");
        c.args([
            &format!("--reuid={os_user}"),
            &format!("--regid={os_user}"),
            "--init-groups",
            "--",
            "mariadb",
        ]);
        c
    };
    cmd.args(["--no-defaults", "-N", "-B"])
        .arg(format!("--socket={}", cfg.mysql_socket.display()))
        .arg(format!("--user={os_user}"))
        .arg(format!("--password={password}"))
        .args(["-e", "SELECT CURRENT_USER()"])
        .output()
        .expect("run the mariadb client")
}

#[tokio::test]
async fn an_account_identified_by_the_shims_os_user_is_refused() {
    let u = shim_os_user();
    let db = cfg().database;
    for host in ["localhost", "127.0.0.1"] {
        mariadb_root(&format!(
            "CREATE OR REPLACE USER '{u}'@'{host}' IDENTIFIED VIA unix_socket; \
             GRANT ALL PRIVILEGES ON `{db}`.* TO '{u}'@'{host}'"
        ));
    }
    // The hole is real: MariaDB lets the shim's OS user in with any password.
    let out = mariadb_as_os_user(&u, "totally-wrong");
    assert!(
        out.status.success(),
        "MariaDB should accept {u} by unix_socket: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("{u}@localhost")
    );

    for (name, gw) in gateways() {
        for t in [Transport::H2, Transport::H3] {
            for pw in ["totally-wrong", "x"] {
                let (a, took) = current_user(&gw, t, &basic_auth(&u, pw)).await;
                let msg =
                    assert_refused(&a, took, &format!("unix_socket {u}:{pw} via {name} {t:?}"));
                assert_eq!(msg, the_one_refusal());
            }
        }
    }

    // A password OR unix_socket: MariaDB tries both, so even the right password
    // does not prove anything through the socket; the account is not served.
    for host in ["localhost", "127.0.0.1"] {
        mariadb_root(&format!(
            "CREATE OR REPLACE USER '{u}'@'{host}' \
             IDENTIFIED VIA mysql_native_password USING PASSWORD('combo-pw-1') OR unix_socket; \
             GRANT ALL PRIVILEGES ON `{db}`.* TO '{u}'@'{host}'"
        ));
    }
    assert!(mariadb_as_os_user(&u, "wrong").status.success());
    for (name, gw) in gateways() {
        for t in [Transport::H2, Transport::H3] {
            for pw in ["combo-pw-1", "wrong"] {
                let (a, took) = current_user(&gw, t, &basic_auth(&u, pw)).await;
                let msg = assert_refused(
                    &a,
                    took,
                    &format!("password-or-socket {u}:{pw} via {name} {t:?}"),
                );
                assert_eq!(msg, the_one_refusal());
            }
        }
    }
    for host in ["localhost", "127.0.0.1"] {
        mariadb_root(&format!("DROP USER '{u}'@'{host}'"));
    }
}

#[tokio::test]
async fn root_and_the_deny_list_are_never_served() {
    let cfg = cfg();
    let root_pw = cfg.root_password();
    assert!(root_pw.len() >= 32, "the dev root has a random password");
    // root's password really works on MariaDB itself (so the refusal is the gateway's).
    assert_eq!(mariadb_root("SELECT CURRENT_USER()"), "root@localhost");
    // A deny-listed name with a real password-authenticated account behind it.
    mariadb_root(
        "CREATE OR REPLACE USER 'mysql'@'localhost' IDENTIFIED BY 'mysql-pw-1'; \
         CREATE OR REPLACE USER 'mysql'@'127.0.0.1' IDENTIFIED BY 'mysql-pw-1'",
    );
    // Ferry's own replication account (it reads every change from the binary log).
    mariadb_root(
        "CREATE OR REPLACE USER 'ferry_repl'@'localhost' IDENTIFIED BY 'mysql-pw-1'; \
         CREATE OR REPLACE USER 'ferry_repl'@'127.0.0.1' IDENTIFIED BY 'mysql-pw-1'; \
         GRANT REPLICATION SLAVE ON *.* TO 'ferry_repl'@'localhost'; \
         GRANT REPLICATION SLAVE ON *.* TO 'ferry_repl'@'127.0.0.1'",
    );
    for (name, gw) in gateways() {
        for t in [Transport::H2, Transport::H3] {
            let (a, took) = current_user(&gw, t, &basic_auth("root", "")).await;
            let msg = assert_refused(&a, took, &format!("root: empty via {name} {t:?}"));
            assert!(msg.contains("empty password"), "{msg}");
            let (a, took) = current_user(&gw, t, &basic_auth("root", &root_pw)).await;
            let msg = assert_refused(
                &a,
                took,
                &format!("root with its password via {name} {t:?}"),
            );
            assert_eq!(msg, the_one_refusal());
        }
        for user in [
            "root",
            "mariadb.sys",
            "mysql",
            "mysql.sys",
            "mysql.session",
            "mysql.infoschema",
            "ferry_repl",
        ] {
            for pw in [root_pw.as_str(), "mysql-pw-1", "x"] {
                let (a, took) = current_user(&gw, Transport::H2, &basic_auth(user, pw)).await;
                let msg = assert_refused(&a, took, &format!("{user} via {name}"));
                assert_eq!(msg, the_one_refusal());
            }
        }
    }
    mariadb_root("DROP USER 'mysql'@'localhost'; DROP USER 'mysql'@'127.0.0.1'");
    mariadb_root("DROP USER 'ferry_repl'@'localhost'; DROP USER 'ferry_repl'@'127.0.0.1'");
}

#[tokio::test]
async fn a_password_account_works_over_the_socket_and_over_tcp() {
    let cfg = cfg();
    // The processlist shows how the shim's connection came in: `localhost`
    // over the unix socket, `host:port` over TCP.
    let sql = "SELECT CURRENT_USER(), HOST FROM information_schema.PROCESSLIST \
               WHERE ID = CONNECTION_ID()";
    for (name, gw) in gateways() {
        for t in [Transport::H2, Transport::H3] {
            let (a, _) = query_as(&gw, t, &cfg.basic_auth(), sql).await;
            assert_eq!(
                a.status,
                200,
                "{name} {t:?}: {:?}",
                String::from_utf8_lossy(&a.body)
            );
            let v = a.json();
            assert!(v.get("error").is_none(), "{name} {t:?}: {v}");
            let rows = ferry_e2e::rows::json_rows(&v["result"]);
            let text = |c: &Option<Vec<u8>>| {
                String::from_utf8_lossy(c.as_deref().unwrap_or_default()).into_owned()
            };
            let (account, host) = (text(&rows[0][0]), text(&rows[0][1]));
            assert_eq!(
                account.split('@').next(),
                Some(cfg.user.as_str()),
                "{name} {t:?}"
            );
            match name {
                "socket" => assert_eq!(host, "localhost", "{name} {t:?}: over the unix socket"),
                _ => assert!(host.contains(':'), "{name} {t:?}: over TCP, got {host}"),
            }
        }
    }
}

#[tokio::test]
async fn accounts_with_privileges_on_every_database_are_not_served() {
    // Password accounts, not on the deny-list, that MySQL lets in: an administrator's
    // (a global privilege) is refused with its right password; the same account with
    // the privileges of one database is served.
    let db = cfg().database;
    let u = unique("adm");
    for host in ["localhost", "127.0.0.1"] {
        mariadb_root(&format!(
            "CREATE OR REPLACE USER '{u}'@'{host}' IDENTIFIED BY 'adm-pw-1'; \
             GRANT ALL PRIVILEGES ON `{db}`.* TO '{u}'@'{host}'"
        ));
    }
    let auth = basic_auth(&u, "adm-pw-1");
    for (name, gw) in gateways() {
        let (a, _) = current_user(&gw, Transport::H2, &auth).await;
        assert_eq!(
            a.status,
            200,
            "{name}: {:?}",
            String::from_utf8_lossy(&a.body)
        );
    }
    for grant in ["PROCESS", "SELECT", "REPLICATION SLAVE"] {
        // A new user name per grant: the gateway checks an account when it first
        // admits its credential.
        let v = format!("{u}_{}", grant.len());
        for host in ["localhost", "127.0.0.1"] {
            mariadb_root(&format!(
                "CREATE OR REPLACE USER '{v}'@'{host}' IDENTIFIED BY 'adm-pw-1'; \
                 GRANT ALL PRIVILEGES ON `{db}`.* TO '{v}'@'{host}'; \
                 GRANT {grant} ON *.* TO '{v}'@'{host}'"
            ));
        }
        for (name, gw) in gateways() {
            for t in [Transport::H2, Transport::H3] {
                let (a, took) = current_user(&gw, t, &basic_auth(&v, "adm-pw-1")).await;
                let msg = assert_refused(&a, took, &format!("{grant} ON *.* via {name} {t:?}"));
                assert_eq!(msg, the_one_refusal());
            }
        }
        for host in ["localhost", "127.0.0.1"] {
            mariadb_root(&format!("DROP USER '{v}'@'{host}'"));
        }
    }
    for host in ["localhost", "127.0.0.1"] {
        mariadb_root(&format!("DROP USER '{u}'@'{host}'"));
    }
}

#[tokio::test]
async fn every_refusal_looks_the_same() {
    let cfg = cfg();
    let socket_user = format!("sock_{}", unique("u"));
    // Socket-authenticated but not the shim's OS user: MariaDB refuses it itself.
    mariadb_root(&format!(
        "CREATE USER '{socket_user}'@'localhost' IDENTIFIED VIA unix_socket"
    ));
    let cases = [
        ("no such user", basic_auth("nobody_here", "pw")),
        ("wrong password", basic_auth(&cfg.user, "not-the-password")),
        ("denied user", basic_auth("mysql.sys", "pw")),
        (
            "socket-authenticated account",
            basic_auth(&socket_user, "pw"),
        ),
    ];
    let mut answers = Vec::new();
    for (what, auth) in &cases {
        let (a, took) = current_user(&cfg, Transport::H2, auth).await;
        let msg = assert_refused(&a, took, what);
        println!("{what}: 401 after {took:?}");
        answers.push((what, msg, a.body));
    }
    for (what, msg, body) in &answers[1..] {
        assert_eq!(msg, &answers[0].1, "{what} reads like {}", answers[0].0);
        assert_eq!(body, &answers[0].2, "{what}: the same bytes");
    }
    mariadb_root(&format!("DROP USER '{socket_user}'@'localhost'"));
}

/// The statements the gateway answers without running them (a counter, the query
/// timeout, the workload: sessions/) still need the client's own password: a wrong one
/// gets the one refusal, never an answer; the right one gets the answer.
#[tokio::test]
async fn statements_the_gateway_answers_itself_still_need_the_password() {
    let cfg = cfg();
    let wrong = basic_auth(&cfg.user, "not-the-password");
    let nobody = basic_auth("nobody_here", "pw");
    for sql in [
        "SELECT ROW_COUNT()",
        "SELECT FOUND_ROWS()",
        "SET query_timeout = 1000",
        "SET workload = 'olap'",
    ] {
        for (what, auth) in [("wrong password", &wrong), ("no such user", &nobody)] {
            let (a, took) = query_as(&cfg, Transport::H2, auth, sql).await;
            let msg = assert_refused(&a, took, &format!("{sql}, {what}"));
            assert_eq!(msg, the_one_refusal(), "{sql}, {what}");
        }
        let (a, _) = query_as(&cfg, Transport::H2, &cfg.basic_auth(), sql).await;
        assert_eq!(
            a.status,
            200,
            "{sql}: {:?}",
            String::from_utf8_lossy(&a.body)
        );
        assert!(a.json().get("error").is_none(), "{sql}: {}", a.json());
    }
}
