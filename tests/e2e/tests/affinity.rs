//! Two shims behind one Envoy cluster (the e2e "pair" gateway, envoy/two-shims.yaml,
//! started by scripts/e2e.sh on FERRY_E2E_PAIR_PORT): unpinned statements balance
//! across both shims; every statement of a pinned session reaches the shim holding
//! its connection (the filter reads the holder from the sealed session, Envoy's
//! stateful_session routes on it). Each shim names itself in `ferry-shim-instance`.
//! The kill test (`--ignored`) kills one shim of the pair; scripts/e2e.sh runs it
//! alone after the others and restarts the pair.
mod common;
use common::*;
use ferry_e2e::config::Config;
use ferry_e2e::connect::{ConnectClient, EXECUTE};
use ferry_e2e::grpc;
use ferry_e2e::h3_client::H3Client;
use ferry_proto::psdb::v1alpha1::{ExecuteRequest, ExecuteResponse, Session};
use ferry_proto::vitess::vtrpc::Code;
use prost::Message;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

const INSTANCE: &str = "ferry-shim-instance";

fn pair() -> Config {
    let port = std::env::var("FERRY_E2E_PAIR_PORT")
        .ok()
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| "18445".into());
    cfg().with_port(port.parse().expect("FERRY_E2E_PAIR_PORT is a port"))
}

/// What one Execute through the pair gateway got: the answer (or the RPC error's code
/// name and message) and the shim instance that served it, if a shim did.
#[derive(Debug)]
struct Outcome {
    result: Result<ExecuteResponse, (String, String)>,
    instance: Option<String>,
}

impl Outcome {
    /// A success served by a shim: its answer and instance.
    fn served(self, what: &str) -> (ExecuteResponse, String) {
        let instance = self
            .instance
            .unwrap_or_else(|| panic!("{what}: no {INSTANCE}"));
        let r = self
            .result
            .unwrap_or_else(|e| panic!("{what}: RPC error {e:?}"));
        (r, instance)
    }

    /// The error, whether an RPC error or the SQL error of an answer.
    fn error(&self) -> Option<(String, String)> {
        match &self.result {
            Err(e) => Some(e.clone()),
            Ok(r) => r.error.as_ref().map(|e| {
                let code = match e.code() {
                    Code::Aborted => "aborted".to_owned(),
                    other => format!("{other:?}"),
                };
                (code, e.message.clone())
            }),
        }
    }
}

fn connect_error(a: &ferry_e2e::Answer) -> (String, String) {
    let v = a.json();
    (
        v["code"].as_str().unwrap_or_default().to_owned(),
        v["message"].as_str().unwrap_or_default().to_owned(),
    )
}

/// `execute_in`, on the pair gateway, reporting the serving shim. Ways: Connect JSON
/// over HTTP/2, Connect proto over HTTP/3, gRPC over HTTP/2.
async fn run(way: Way, session: Option<&Session>, query: &str) -> Outcome {
    let cfg = pair();
    let auth = cfg.basic_auth();
    let request = ExecuteRequest {
        query: query.into(),
        session: session.cloned(),
        ..Default::default()
    };
    match way {
        Way::ConnectJsonH2 => {
            let body = serde_json::json!({ "query": query, "session": session }).to_string();
            let a = ConnectClient::http2(&cfg)
                .post(
                    EXECUTE,
                    &[
                        ("content-type", "application/json"),
                        ("authorization", auth.as_str()),
                    ],
                    body.into_bytes(),
                )
                .await;
            assert_eq!(a.version, http::Version::HTTP_2);
            Outcome {
                instance: a.header(INSTANCE).map(str::to_owned),
                result: if a.status == 200 {
                    Ok(serde_json::from_slice(&a.body).expect("protojson ExecuteResponse"))
                } else {
                    Err(connect_error(&a))
                },
            }
        }
        Way::ConnectProtoH3 => {
            let mut h3 = H3Client::connect(&cfg).await.expect("HTTP/3 connection");
            let a = h3
                .post(
                    EXECUTE,
                    &[
                        ("content-type", "application/proto"),
                        ("authorization", auth.as_str()),
                    ],
                    request.encode_to_vec().into(),
                )
                .await
                .expect("HTTP/3 request");
            h3.close().await;
            assert_eq!(a.version, http::Version::HTTP_3);
            Outcome {
                instance: a.header(INSTANCE).map(str::to_owned),
                result: if a.status == 200 {
                    Ok(ExecuteResponse::decode(a.body.clone()).expect("proto answer"))
                } else {
                    Err(connect_error(&a))
                },
            }
        }
        Way::GrpcH2 => {
            let ch = grpc::channel(&cfg).await;
            let instance = |m: &tonic::metadata::MetadataMap| {
                m.get(INSTANCE)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned)
            };
            match grpc::unary::<ExecuteRequest, ExecuteResponse>(ch, EXECUTE, request, Some(&auth))
                .await
            {
                Ok(r) => Outcome {
                    instance: instance(r.metadata()),
                    result: Ok(r.into_inner()),
                },
                Err(s) => Outcome {
                    instance: instance(s.metadata()),
                    result: Err((
                        match s.code() {
                            tonic::Code::Aborted => "aborted".to_owned(),
                            other => format!("{other:?}"),
                        },
                        s.message().to_owned(),
                    )),
                },
            }
        }
        other => panic!("not used here: {other:?}"),
    }
}

/// Runs a statement that must succeed without a SQL error; the new session and the shim.
async fn ok(way: Way, session: Option<&Session>, query: &str) -> (Session, String) {
    let (r, instance) = run(way, session, query).await.served(query);
    assert!(r.error.is_none(), "{query} ({way:?}): {:?}", r.error);
    (r.session.expect("a session"), instance)
}

fn count_committed(table: &str) -> usize {
    mariadb_root(&format!("SELECT COUNT(*) FROM {table}"))
        .parse()
        .expect("a count")
}

#[tokio::test]
async fn unpinned_statements_are_served_by_both_shims() {
    let mut seen = BTreeMap::<String, usize>::new();
    for i in 0..40 {
        let way = [Way::ConnectJsonH2, Way::ConnectProtoH3, Way::GrpcH2][i % 3];
        let (r, instance) = run(way, None, "SELECT 1").await.served("SELECT 1");
        assert!(r.error.is_none(), "{:?}", r.error);
        assert_eq!(instance.len(), 16, "{instance:?}");
        *seen.entry(instance).or_default() += 1;
    }
    assert_eq!(
        seen.len(),
        2,
        "two shims serve unpinned statements: {seen:?}"
    );
}

/// User variables and settings travel in the session: no pin, so any shim of the
/// pair serves the session's next statements, each with the session's own values.
#[tokio::test]
async fn session_variables_need_no_affinity() {
    let (s, _) = ok(
        Way::ConnectJsonH2,
        None,
        "SET @pair_v = 'both', time_zone = '+03:00'",
    )
    .await;
    let mut seen = BTreeSet::new();
    for i in 0..20 {
        let way = [Way::ConnectJsonH2, Way::ConnectProtoH3, Way::GrpcH2][i % 3];
        let (r, instance) = run(way, Some(&s), "SELECT @pair_v, @@time_zone")
            .await
            .served("SELECT @pair_v");
        assert!(r.error.is_none(), "{:?}", r.error);
        let row = ferry_e2e::rows::cells(&r.result.expect("a result").rows[0]);
        assert_eq!(
            (row[0].as_deref(), row[1].as_deref()),
            (Some(&b"both"[..]), Some(&b"+03:00"[..])),
            "{way:?} at {instance}"
        );
        seen.insert(instance);
    }
    assert_eq!(seen.len(), 2, "both shims served the session: {seen:?}");
}

#[tokio::test]
async fn every_statement_of_a_pinned_session_reaches_its_shim() {
    let t = unique("affinity");
    ok(
        Way::ConnectJsonH2,
        None,
        &format!("CREATE TABLE {t} (id INT PRIMARY KEY, s INT)"),
    )
    .await;
    let ways = [Way::ConnectJsonH2, Way::ConnectProtoH3, Way::GrpcH2];
    let mut holders = BTreeSet::new();
    let mut n = 0;
    // At least 4 sessions, and more until both shims held some.
    while n < 4 || holders.len() < 2 {
        assert!(n < 16, "16 transactions all began on one shim: {holders:?}");
        let (mut s, holder) = ok(ways[n % 3], None, "BEGIN").await;
        assert!(
            s.vitess_session.as_ref().is_some_and(|v| v.in_transaction),
            "BEGIN pins"
        );
        holders.insert(holder.clone());
        for i in 0..15 {
            let way = ways[(n + i) % 3];
            let query = if i % 3 == 0 {
                format!("INSERT INTO {t} VALUES ({}, {n})", n * 100 + i)
            } else {
                format!("SELECT COUNT(*) FROM {t} WHERE s = {n}")
            };
            let (next, instance) = ok(way, Some(&s), &query).await;
            assert_eq!(
                instance, holder,
                "session {n}, statement {i} ({way:?}) left its shim"
            );
            s = next;
        }
        // 5 rows inserted, none committed: invisible to any other session.
        let (r, _) = run(
            Way::GrpcH2,
            None,
            &format!("SELECT COUNT(*) FROM {t} WHERE s = {n}"),
        )
        .await
        .served("unpinned count");
        let rows = ferry_e2e::rows::text_rows(r.result.as_ref().expect("result"));
        assert_eq!(rows, vec![vec![Some("0".to_owned())]], "session {n}");
        assert_eq!(
            mariadb_root(&format!("SELECT COUNT(*) FROM {t} WHERE s = {n}")),
            "0"
        );
        let (s, instance) = ok(ways[n % 3], Some(&s), "COMMIT").await;
        assert_eq!(instance, holder, "COMMIT of session {n}");
        assert!(!s.vitess_session.as_ref().is_some_and(|v| v.in_transaction));
        assert_eq!(
            mariadb_root(&format!("SELECT COUNT(*) FROM {t} WHERE s = {n}")),
            "5",
            "visible after COMMIT"
        );
        n += 1;
    }
    assert_eq!(count_committed(&t), 5 * n);
}

/// The instance a shim of the pair reports, asked directly (h2c, no Envoy; an RPC
/// without credentials: every RPC answer names the instance, /healthz does not).
fn instance_at(addr: &str) -> Option<String> {
    let out = std::process::Command::new("curl")
        .args([
            "-s",
            "-o",
            "/dev/null",
            "-D",
            "-",
            "--http2-prior-knowledge",
        ])
        .args(["-X", "POST", "-H", "content-type: application/proto"])
        .arg(format!(
            "http://{addr}/psdb.v1alpha1.Database/CreateSession"
        ))
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout).lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case(INSTANCE)
            .then(|| v.trim().to_owned())
    })
}

#[tokio::test]
#[ignore = "kills a shim of the pair: run alone (scripts/e2e.sh does, then restarts it)"]
async fn a_pinned_session_whose_shim_dies_is_lost_explicitly() {
    let run_dir = std::env::var("FERRY_E2E_PAIR_RUN_DIR").expect("FERRY_E2E_PAIR_RUN_DIR");
    let shims = [
        (
            "shim",
            std::env::var("FERRY_E2E_PAIR_SHIM_ADDR").expect("shim address"),
        ),
        (
            "shim2",
            std::env::var("FERRY_E2E_PAIR_SHIM2_ADDR").expect("shim2 address"),
        ),
    ];
    let t = unique("affinity_kill");
    ok(
        Way::ConnectJsonH2,
        None,
        &format!("CREATE TABLE {t} (id INT PRIMARY KEY)"),
    )
    .await;
    let (s, holder) = ok(Way::ConnectJsonH2, None, "BEGIN").await;
    let (s, instance) = ok(
        Way::ConnectProtoH3,
        Some(&s),
        &format!("INSERT INTO {t} VALUES (1)"),
    )
    .await;
    assert_eq!(instance, holder);

    let (victim, _) = shims
        .iter()
        .find(|(_, addr)| instance_at(addr).as_deref() == Some(holder.as_str()))
        .unwrap_or_else(|| panic!("no shim of the pair reports instance {holder}"));
    let pid = std::fs::read_to_string(format!("{run_dir}/pids/{victim}.pid")).expect("pid file");
    let killed = std::process::Command::new("kill")
        .args(["-9", pid.trim()])
        .status()
        .expect("kill");
    assert!(killed.success());

    // The session's next statements fail clearly, in every client form; nothing of the
    // transaction is applied.
    for way in [Way::ConnectJsonH2, Way::ConnectProtoH3, Way::GrpcH2] {
        let o = run(way, Some(&s), &format!("INSERT INTO {t} VALUES (2)")).await;
        let (code, message) = o
            .error()
            .unwrap_or_else(|| panic!("{way:?}: a statement of the lost transaction ran: {o:?}"));
        // Strict affinity never sends it to the other shim: Envoy answers 503 (the
        // holder is refused or unhealthy) and the filter turns that into `aborted`.
        assert_eq!(code, "aborted", "{way:?}: {message}");
        assert_eq!(
            message, "transaction lost, rolled back: the shim holding this session is unavailable",
            "{way:?}"
        );
        assert_eq!(o.instance, None, "{way:?}: no shim answered");
    }
    // ROLLBACK acknowledges the loss; for a Connect client the answer carries a fresh
    // session, as a shim's would (a driver that keeps its session is not stuck).
    let o = run(Way::ConnectJsonH2, Some(&s), "ROLLBACK").await;
    let r = o.result.expect("ROLLBACK answered");
    assert!(r.error.is_none(), "{:?}", r.error);
    let fresh = r.session.expect("a session");
    assert!(fresh.signature.is_empty(), "fresh and unsealed: {fresh:?}");
    assert!(!fresh
        .vitess_session
        .as_ref()
        .is_some_and(|v| v.in_transaction));

    // Unpinned statements go on, on the other shim, once Envoy has seen the death (a
    // health check interval): until then one may reach the dead shim and fail.
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut good = 0;
    let mut survivor = None;
    while good < 10 {
        assert!(
            Instant::now() < deadline,
            "unpinned statements did not settle on the surviving shim"
        );
        let o = run(Way::ConnectJsonH2, None, "SELECT 1").await;
        match (&o.result, &o.instance) {
            (Ok(r), Some(i)) if r.error.is_none() => {
                assert_ne!(i, &holder, "the dead shim answered");
                assert!(survivor.get_or_insert_with(|| i.clone()) == i);
                good += 1;
            }
            _ => {
                good = 0;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
    assert_eq!(count_committed(&t), 0, "nothing half-applied");

    // A new transaction works, on the survivor, with the session ROLLBACK gave back.
    let (s, instance) = ok(Way::GrpcH2, Some(&fresh), "BEGIN").await;
    assert_eq!(Some(&instance), survivor.as_ref());
    let (s, _) = ok(
        Way::ConnectJsonH2,
        Some(&s),
        &format!("INSERT INTO {t} VALUES (3)"),
    )
    .await;
    let (_, instance) = ok(Way::ConnectProtoH3, Some(&s), "COMMIT").await;
    assert_eq!(Some(&instance), survivor.as_ref());
    assert_eq!(count_committed(&t), 1);
}
