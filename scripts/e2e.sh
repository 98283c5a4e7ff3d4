#!/usr/bin/env bash
# End-to-end tests against the real stack started from scratch: a fresh run dir
# (own MariaDB data dir, certificates, logs) and its own ports, so it never
# collides with a dev stack from `make up`. Stops everything afterwards.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
export FERRY_RUN_DIR="${FERRY_E2E_RUN_DIR:-$ROOT/.run/e2e}"
export FERRY_PORT="${FERRY_E2E_PORT:-18443}"
export FERRY_ADMIN_PORT="${FERRY_E2E_ADMIN_PORT:-19901}"
export FERRY_SHIM_ADDR="${FERRY_E2E_SHIM_ADDR:-127.0.0.1:18081}"
export FERRY_MYSQL_PORT="${FERRY_E2E_MYSQL_PORT:-43306}"
export FERRY_MYSQL_SOCKET="$FERRY_RUN_DIR/mysql.sock"
export FERRY_SHIM_UNIX="$FERRY_RUN_DIR/shim/shim.sock"
# Pins idle out fast, so sessions.rs can watch a transaction get lost.
export FERRY_TXN_IDLE_SECS=3
# Room for the pins the tests leave behind on purpose (36 pinned sessions per user).
export FERRY_POOL_MAX=48
export FERRY_EARLY_DATA=true  # the shipped default, whose 0-RTT policy early_data.rs checks
# Compress for clients at any distance: the codec tests run on loopback. The TCP
# gateway keeps the shipped defaults (5 ms; loopback near), which compression.rs checks.
export FERRY_COMPRESS_MIN_RTT_MS=0
# The suite sends many wrong passwords on purpose (each refusal's shape, from one address):
# the shim's login throttle would answer some of them 429 instead. It is off for these
# stacks and tested on its own, against the real shim and MariaDB (shim/tests/throttle.rs).
export FERRY_AUTH_THROTTLE_USER_FAILURES=0 FERRY_AUTH_THROTTLE_ADDR_FAILURES=0 FERRY_AUTH_NEGATIVE_CACHE_SECS=0
# The shim runs as an unprivileged OS user of its own, as it should in production;
# accounts.rs gives that OS user a unix_socket MariaDB account and expects it refused.
if [ "$(id -u)" -eq 0 ]; then
  export FERRY_SHIM_USER="${FERRY_E2E_SHIM_USER:-ferry-shim}"
  id -u "$FERRY_SHIM_USER" >/dev/null 2>&1 \
    || useradd --system --no-create-home --shell /usr/sbin/nologin "$FERRY_SHIM_USER"
fi
export FERRY_SHIM_OS_USER="${FERRY_SHIM_USER:-$(id -un)}"
# MariaDB serves TLS over TCP with the dev CA's certificate (mysql_tls.rs).
C="$FERRY_RUN_DIR/certs"
MARIADB_TLS_ARGS="--ssl-cert=$C/server.pem --ssl-key=$C/server.key --ssl-ca=$C/ca.pem --tls-version=TLSv1.2,TLSv1.3"
# A second gateway (shim + Envoy) on the same MariaDB, reached over TCP, not the socket,
# with TLS whose certificate it verifies against the dev CA; Envoy reaches its shim over
# mutual TLS (envoy/shim-tls.yaml; shim_tls.rs), as a shim on another host; its sessions expire after
# 2 s (sessions.rs), it keeps the default distance for compression (empty:
# env.sh's; compression.rs), and it shares the dev CA and session key.
TCP_RUN_DIR="$FERRY_RUN_DIR/tcp"
export FERRY_E2E_TCP_PORT="${FERRY_E2E_TCP_PORT:-18444}"
export FERRY_E2E_TCP_ADMIN_PORT="${FERRY_E2E_TCP_ADMIN_PORT:-19902}"
export FERRY_E2E_TCP_SHIM_ADDR="${FERRY_E2E_TCP_SHIM_ADDR:-127.0.0.1:18082}"
tcp_gateway() {
  FERRY_RUN_DIR="$TCP_RUN_DIR" FERRY_PORT="$FERRY_E2E_TCP_PORT" \
    FERRY_ADMIN_PORT="$FERRY_E2E_TCP_ADMIN_PORT" FERRY_SHIM_ADDR="$FERRY_E2E_TCP_SHIM_ADDR" \
    FERRY_SHIM_UNIX="" FERRY_MYSQL_TRANSPORT=tcp FERRY_SESSION_TTL_SECS=2 FERRY_COMPRESS_MIN_RTT_MS= \
    FERRY_MYSQL_TLS=verify_identity FERRY_MYSQL_TLS_CA="$TCP_RUN_DIR/certs/ca.pem" \
    FERRY_ENVOY_SCENARIO=shim-tls FERRY_SHIM_TLS_CERT="$TCP_RUN_DIR/certs/shim.pem" \
    FERRY_SHIM_TLS_KEY="$TCP_RUN_DIR/certs/shim.key" FERRY_SHIM_TLS_CLIENT_CA="$TCP_RUN_DIR/certs/ca.pem" \
    FERRY_SESSION_KEYS_FILE="$TCP_RUN_DIR/certs/session.keys" "$ROOT/scripts/stack.sh" "$@"
}
# A third gateway with two shims behind one Envoy cluster (envoy/two-shims.yaml), on
# the same MariaDB (socket), sharing the dev CA and session key: affinity.rs.
export FERRY_E2E_PAIR_RUN_DIR="$FERRY_RUN_DIR/pair"
export FERRY_E2E_PAIR_PORT="${FERRY_E2E_PAIR_PORT:-18445}"
export FERRY_E2E_PAIR_SHIM_ADDR="${FERRY_E2E_PAIR_SHIM_ADDR:-127.0.0.1:18083}"
export FERRY_E2E_PAIR_SHIM2_ADDR="${FERRY_E2E_PAIR_SHIM2_ADDR:-127.0.0.1:18084}"
pair_gateway() {
  FERRY_RUN_DIR="$FERRY_E2E_PAIR_RUN_DIR" FERRY_PORT="$FERRY_E2E_PAIR_PORT" \
    FERRY_ADMIN_PORT="${FERRY_E2E_PAIR_ADMIN_PORT:-19903}" FERRY_SHIMS=2 \
    FERRY_SHIM_ADDR="$FERRY_E2E_PAIR_SHIM_ADDR" FERRY_SHIM2_ADDR="$FERRY_E2E_PAIR_SHIM2_ADDR" \
    FERRY_SHIM_UNIX="" FERRY_SESSION_KEYS_FILE="$FERRY_E2E_PAIR_RUN_DIR/certs/session.keys" \
    "$ROOT/scripts/stack.sh" "$@"
}
# A fourth gateway for a real browser (tests/browser) and tokens (tokens.rs):
# envoy/tokens.yaml (envoy/browser.yaml's CORS, allowing the origin of the test's page
# server, plus jwt_authn; its JWKS server scripts/dev-idp.py on 18457), on the same
# MariaDB (socket), sharing the dev CA. Its shim maps the token claim `app` to the dev
# user, `admin` to root and `super` to an account with global privileges (tokens.rs
# makes it), with their passwords in a secrets file only the shim reads.
BROWSER_RUN_DIR="$FERRY_RUN_DIR/browser"
export FERRY_E2E_BROWSER_PORT="${FERRY_E2E_BROWSER_PORT:-18446}"
export FERRY_E2E_BROWSER_PAGE_PORT="${FERRY_E2E_BROWSER_PAGE_PORT:-18447}"
export FERRY_E2E_TOKENS_PORT="$FERRY_E2E_BROWSER_PORT" FERRY_E2E_TOKENS_DIR="$BROWSER_RUN_DIR/tokens" \
  FERRY_E2E_TOKENS_LOGS="$BROWSER_RUN_DIR/logs"
browser_gateway() {
  local scenario="${FERRY_E2E_BROWSER_SCENARIO:-tokens}" secrets="$BROWSER_RUN_DIR/token-secrets" tokens=()
  if [ "$scenario" = tokens ]; then
    tokens=(FERRY_TOKEN_SECRETS_FILE="$secrets" FERRY_TOKEN_ACCOUNTS="app=${FERRY_MYSQL_USER:-ferry},admin=root,super=ferry_tok_super")
    [ "$1" = down ] || { mkdir -p "$BROWSER_RUN_DIR"; (umask 077 && printf '%s:%s\nroot:%s\nferry_tok_super:tok-super-pw-1\n' \
      "${FERRY_MYSQL_USER:-ferry}" "${FERRY_MYSQL_PASSWORD:-ferry}" "$(sed -n 's/^password=//p' "$FERRY_RUN_DIR/mysql-root.cnf")" > "$secrets"); }
  fi
  env "${tokens[@]}" FERRY_RUN_DIR="$BROWSER_RUN_DIR" FERRY_PORT="$FERRY_E2E_BROWSER_PORT" \
    FERRY_ADMIN_PORT="${FERRY_E2E_BROWSER_ADMIN_PORT:-19904}" FERRY_SHIM_ADDR="${FERRY_E2E_BROWSER_SHIM_ADDR:-127.0.0.1:18085}" \
    FERRY_SHIM_UNIX="" FERRY_ENVOY_SCENARIO="$scenario" FERRY_CORS_ORIGINS="https://localhost:$FERRY_E2E_BROWSER_PAGE_PORT" \
    FERRY_JWKS_HTTPS_PORT="${FERRY_E2E_JWKS_PORT:-18457}" FERRY_SESSION_KEYS_FILE="$BROWSER_RUN_DIR/certs/session.keys" "$ROOT/scripts/stack.sh" "$@"
}
# A fifth gateway with tracing (tests/e2e/tests/tracing.rs): envoy/tracing.yaml and a shim
# exporting spans (FERRY_OTLP_ENDPOINT), both to the OTLP receiver the test runs on
# FERRY_E2E_OTLP_ADDR; on the same MariaDB (socket), sharing the dev CA.
# A gateway with the native filter (envoy/native.yaml: the same core as an Envoy dynamic
# module; experimental, Connect only) on the same MariaDB (socket), sharing the dev CA.
NATIVE_RUN_DIR="$FERRY_RUN_DIR/native"
native_gateway() {
  FERRY_RUN_DIR="$NATIVE_RUN_DIR" FERRY_PORT="${FERRY_E2E_NATIVE_PORT:-18458}" \
    FERRY_ADMIN_PORT="${FERRY_E2E_NATIVE_ADMIN_PORT:-19912}" FERRY_SHIM_ADDR="${FERRY_E2E_NATIVE_SHIM_ADDR:-127.0.0.1:18098}" \
    FERRY_SHIM_UNIX="" FERRY_ENVOY_SCENARIO=native FERRY_SESSION_KEYS_FILE="$NATIVE_RUN_DIR/certs/session.keys" \
    "$ROOT/scripts/stack.sh" "$@"
}
TRACING_RUN_DIR="$FERRY_RUN_DIR/tracing"
export FERRY_E2E_OTLP_ADDR="${FERRY_E2E_OTLP_ADDR:-127.0.0.1:14317}"
tracing_gateway() {
  FERRY_RUN_DIR="$TRACING_RUN_DIR" FERRY_PORT="${FERRY_E2E_TRACING_PORT:-18450}" \
    FERRY_ADMIN_PORT="${FERRY_E2E_TRACING_ADMIN_PORT:-19907}" FERRY_SHIM_ADDR="${FERRY_E2E_TRACING_SHIM_ADDR:-127.0.0.1:18089}" \
    FERRY_SHIM_UNIX="" FERRY_ENVOY_SCENARIO=tracing FERRY_OTLP_ENDPOINT="http://$FERRY_E2E_OTLP_ADDR" \
    OTEL_BSP_SCHEDULE_DELAY=1000 FERRY_SESSION_KEYS_FILE="$TRACING_RUN_DIR/certs/session.keys" "$ROOT/scripts/stack.sh" "$@"
}
# A stack of its own on MySQL 8.0 (FERRY_MYSQL_FLAVOR=mysql8; installed once by
# scripts/install-mysql8.sh), for the tests below that run on MySQL 8 too. FERRY_E2E_MYSQL8=0 skips it.
MYSQL8_RUN_DIR="$FERRY_RUN_DIR/mysql8"
MYSQL8_PORT="${FERRY_E2E_MYSQL8_PORT:-18448}"
mysql8_stack() {
  FERRY_MYSQL_FLAVOR=mysql8 FERRY_WAIT_HEALTHY=true FERRY_RUN_DIR="$MYSQL8_RUN_DIR" FERRY_PORT="$MYSQL8_PORT" \
    FERRY_ADMIN_PORT="${FERRY_E2E_MYSQL8_ADMIN_PORT:-19905}" FERRY_SHIM_ADDR="${FERRY_E2E_MYSQL8_SHIM_ADDR:-127.0.0.1:18086}" \
    FERRY_MYSQL_PORT="${FERRY_E2E_MYSQL8_MYSQL_PORT:-43307}" FERRY_MYSQL_SOCKET="$MYSQL8_RUN_DIR/mysql.sock" \
    FERRY_SHIM_UNIX="" FERRY_SESSION_KEYS_FILE="$MYSQL8_RUN_DIR/certs/session.keys" "$ROOT/scripts/stack.sh" "$@"
}
# A stack with a read replica (FERRY_REPLICAS=1: a MariaDB primary and its GTID replica,
# a shim each, envoy/replicas.yaml) on ports of its own, for replicas.rs, which stops
# replication, kills shims and restarts MariaDB: run alone. FERRY_E2E_REPLICAS=0 skips it.
REPLICAS_RUN_DIR="$FERRY_RUN_DIR/replicas"
replicas_env() {
  export FERRY_REPLICAS=1 FERRY_RUN_DIR="$REPLICAS_RUN_DIR" FERRY_PORT="${FERRY_E2E_REPLICAS_PORT:-18449}" \
    FERRY_ADMIN_PORT="${FERRY_E2E_REPLICAS_ADMIN_PORT:-19906}" FERRY_SHIM_ADDR="${FERRY_E2E_REPLICAS_SHIM_ADDR:-127.0.0.1:18087}" \
    FERRY_REPLICA_SHIM_ADDR="${FERRY_E2E_REPLICAS_REPLICA_SHIM_ADDR:-127.0.0.1:18088}" \
    FERRY_MYSQL_PORT="${FERRY_E2E_REPLICAS_MYSQL_PORT:-43308}" FERRY_REPLICA_MYSQL_PORT="${FERRY_E2E_REPLICAS_REPLICA_MYSQL_PORT:-43309}" \
    FERRY_MYSQL_SOCKET="$REPLICAS_RUN_DIR/mysql.sock" FERRY_REPLICA_MYSQL_SOCKET="$REPLICAS_RUN_DIR/mysql-replica.sock" \
    FERRY_SHIM_UNIX="" FERRY_SESSION_KEYS_FILE="$REPLICAS_RUN_DIR/certs/session.keys" FERRY_READ_AFTER_WRITE_WAIT_MS=500
}
replicas_stack() { (replicas_env && "$ROOT/scripts/stack.sh" "$@"); }
# Vitess (scripts/vitess.sh: vttestserver on the MySQL 8 above, keyspace ferry in 2 shards,
# vtgate checking passwords; built once into target/vitess, ~3.5 min) behind a gateway of
# its own whose shim points at vtgate, for vitess.rs. FERRY_E2E_VITESS=0 skips it.
VITESS_RUN_DIR="$FERRY_RUN_DIR/vitess-e2e"
VITESS_BASE_PORT="${FERRY_E2E_VITESS_BASE_PORT:-43380}"
VITESS_GW_PORT="${FERRY_E2E_VITESS_PORT:-18455}"
vitess_cluster() { FERRY_RUN_DIR="$VITESS_RUN_DIR" FERRY_VITESS_PORT="$VITESS_BASE_PORT" "$ROOT/scripts/vitess.sh" "$@"; }
VITESS_REPLICA_SHIM_ADDR="${FERRY_E2E_VITESS_REPLICA_SHIM_ADDR:-127.0.0.1:18097}"
vitess_gateway() {
  FERRY_MYSQL_FLAVOR=vitess FERRY_VITESS_PORT="$VITESS_BASE_PORT" FERRY_REPLICAS=1 FERRY_REPLICA_SHIM_ADDR="$VITESS_REPLICA_SHIM_ADDR" \
  FERRY_RUN_DIR="$VITESS_RUN_DIR" FERRY_PORT="$VITESS_GW_PORT" FERRY_ADMIN_PORT="${FERRY_E2E_VITESS_ADMIN_PORT:-19911}" \
    FERRY_SHIM_ADDR="${FERRY_E2E_VITESS_SHIM_ADDR:-127.0.0.1:18096}" FERRY_MYSQL_HOST=127.0.0.1 \
    FERRY_MYSQL_PORT="$((VITESS_BASE_PORT + 3))" FERRY_MYSQL_TRANSPORT=tcp FERRY_SHIM_UNIX="" \
    FERRY_SESSION_KEYS_FILE="$VITESS_RUN_DIR/certs/session.keys" "$ROOT/scripts/stack.sh" "$@"
}
stop_all() { native_gateway down; vitess_gateway down; vitess_cluster down; tracing_gateway down; replicas_stack down; mysql8_stack down; browser_gateway down; pair_gateway down; tcp_gateway down; "$ROOT/scripts/stack.sh" down; }

# The databases' fixed ports that lie in Linux's ephemeral range, kept off outgoing
# connections for the whole run (a client's local port once took 43382 just before
# vttestserver's mysqld bound it): scripts/reserve-ports.sh (root only).
"$ROOT/scripts/reserve-ports.sh" "$FERRY_MYSQL_PORT" "${FERRY_E2E_MYSQL8_MYSQL_PORT:-43307}" \
  "${FERRY_E2E_REPLICAS_MYSQL_PORT:-43308}" "${FERRY_E2E_REPLICAS_REPLICA_MYSQL_PORT:-43309}" \
  "$VITESS_BASE_PORT-$((VITESS_BASE_PORT + 3))"
stop_all >/dev/null 2>&1 || true
rm -rf "$FERRY_RUN_DIR"
trap stop_all EXIT
FERRY_MYSQL_EXTRA_ARGS="$MARIADB_TLS_ARGS" "$ROOT/scripts/stack.sh" up >/dev/null
mkdir -p "$TCP_RUN_DIR" && cp -r "$FERRY_RUN_DIR/certs" "$TCP_RUN_DIR/"  # one dev CA for both
# The shim's own copy of the dev certificate (localhost, 127.0.0.1): it reads it as its OS user.
cp "$TCP_RUN_DIR/certs/server.pem" "$TCP_RUN_DIR/certs/shim.pem"
(umask 077 && cp "$TCP_RUN_DIR/certs/server.key" "$TCP_RUN_DIR/certs/shim.key")
tcp_gateway gateway >/dev/null
mkdir -p "$FERRY_E2E_PAIR_RUN_DIR" && cp -r "$FERRY_RUN_DIR/certs" "$FERRY_E2E_PAIR_RUN_DIR/"
pair_gateway gateway >/dev/null
mkdir -p "$BROWSER_RUN_DIR" && cp -r "$FERRY_RUN_DIR/certs" "$BROWSER_RUN_DIR/"
browser_gateway gateway >/dev/null
echo "stack up in $FERRY_RUN_DIR (https://127.0.0.1:$FERRY_PORT; shim over TCP: port $FERRY_E2E_TCP_PORT; two shims: port $FERRY_E2E_PAIR_PORT; browser (CORS): port $FERRY_E2E_BROWSER_PORT)"

status=0
# First and alone, on a fresh Envoy and shim: a 2.4 GiB StreamExecute, watching their memory.
cargo test -p ferry-e2e --test stream_memory -- --ignored --nocapture || status=$?
cargo test -p ferry-e2e --tests --no-fail-fast -- --test-threads=4 || status=$?
# Alone, after the others: kills and restarts the shim mid-transaction.
cargo test -p ferry-e2e --test shim_restart -- --ignored || status=$?
# Alone: the TCP gateway's path to MariaDB stalls (iptables drops its port on loopback):
# deadlines are still answered, and it recovers (tests/e2e/tests/stall.rs; root).
command -v iptables >/dev/null || PATH="$PATH:/usr/sbin:/sbin"
command -v iptables >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends iptables >/dev/null
cargo test -p ferry-e2e --test stall -- --ignored --nocapture || status=$?
# Alone: kills the shim of the pair that holds a session, then restarts it.
cargo test -p ferry-e2e --test affinity -- --ignored || status=$?
pair_gateway gateway >/dev/null || status=$?
# Alone: 2,000 concurrent sessions against max_connections=100.
cargo test -p ferry-e2e --test multiplex -- --ignored --nocapture || status=$?
# The real @planetscale/database driver (Node), trusting the dev CA.
(cd "$ROOT/tests/driver" && npm ci --no-audit --no-fund --loglevel=error >/dev/null \
  && NODE_EXTRA_CA_CERTS="$FERRY_RUN_DIR/certs/ca.pem" node --test) || status=$?
# clients/js/ferry-batch.js (ExecuteBatch) in Node and in Deno (from npm).
(cd "$ROOT/tests/batch-js" && npm ci --no-audit --no-fund --loglevel=error >/dev/null \
  && FERRY_URL="https://${FERRY_HOST:-127.0.0.1}:$FERRY_PORT" FERRY_CA="$FERRY_RUN_DIR/certs/ca.pem" \
     FERRY_USER="${FERRY_MYSQL_USER:-ferry}" FERRY_PASSWORD="${FERRY_MYSQL_PASSWORD:-ferry}" npm test --silent) || status=$?
# Prisma ORM through its PlanetScale adapter (tests/prisma), its client generated offline.
(cd "$ROOT/tests/prisma" && npm ci --no-audit --no-fund --loglevel=error >/dev/null \
  && npm run --silent generate >/dev/null && NODE_EXTRA_CA_CERTS="$FERRY_RUN_DIR/certs/ca.pem" node --test) || status=$?
# A real browser (headless Chromium): a page from another origin calls Execute and
# StreamExecute over gRPC-Web (connect-web) through the browser gateway (CORS), with a
# password and with a token (clients/js/ferry-token.js).
(cd "$ROOT/tests/browser" && npm ci --no-audit --no-fund --loglevel=error >/dev/null \
  && FERRY_BROWSER_URL="https://127.0.0.1:$FERRY_E2E_BROWSER_PORT" FERRY_CERT_DIR="$BROWSER_RUN_DIR/certs" \
     FERRY_BROWSER_PAGE_PORT="$FERRY_E2E_BROWSER_PAGE_PORT" FERRY_TOKEN_KEY="$FERRY_E2E_TOKENS_DIR/file.pem" node --test) || status=$?
# The same page with the Ferry filter before Envoy's grpc_web (where Istio and Envoy
# Gateway put a Wasm plugin; envoy/browser-filter-first.yaml): the filter serves gRPC-Web.
browser_gateway down >/dev/null
(FERRY_E2E_BROWSER_SCENARIO=browser-filter-first browser_gateway gateway >/dev/null \
  && cd "$ROOT/tests/browser" && FERRY_BROWSER_URL="https://127.0.0.1:$FERRY_E2E_BROWSER_PORT" \
     FERRY_CERT_DIR="$BROWSER_RUN_DIR/certs" FERRY_BROWSER_PAGE_PORT="$FERRY_E2E_BROWSER_PAGE_PORT" node --test) || status=$?
# PlanetScale's Go client library (psdb core/client: Connect proto, S2-compressed requests),
# unmodified defaults, over HTTP/2 and HTTP/3, as the dev user stack.sh made.
(cd "$ROOT/tests/psdb-go" && PATH="$PATH:/usr/local/go/bin" FERRY_PSDB_IDENTITY= \
  FERRY_URL="https://${FERRY_HOST:-127.0.0.1}:$FERRY_PORT" FERRY_CA="$FERRY_RUN_DIR/certs/ca.pem" \
  FERRY_USER="${FERRY_MYSQL_USER:-ferry}" FERRY_PASSWORD="${FERRY_MYSQL_PASSWORD:-ferry}" go run .) || status=$?
# Clients generated from our proto/ (committed gen/, checked current): grpc-go over HTTP/2,
# connect-go (Connect and gRPC protocols) over HTTP/2 and HTTP/3, gzip and uncompressed.
(cd "$ROOT/tests/grpc-go" && PATH="$PATH:/usr/local/go/bin" FERRY_GRPCGO_RUN= FERRY_PROTO_DIR= \
  FERRY_URL="https://${FERRY_HOST:-127.0.0.1}:$FERRY_PORT" FERRY_CA="$FERRY_RUN_DIR/certs/ca.pem" \
  FERRY_USER="${FERRY_MYSQL_USER:-ferry}" FERRY_PASSWORD="${FERRY_MYSQL_PASSWORD:-ferry}" go run .) || status=$?
# The shim's own integration test, straight at the shim (no Envoy).
FERRY_TEST_MYSQL_SOCKET="$FERRY_MYSQL_SOCKET" cargo test -p ferry-shim --test '*' || status=$?

# The mesh-shaped gateways (Istio's WasmPlugin and EnvoyFilter, Envoy Gateway), one at a
# time on ports of their own, on this MariaDB: scripts/e2e-meshes.sh says what runs where.
"$ROOT/scripts/e2e-meshes.sh" || status=$?

# Tracing: Envoy's spans and the shim's in one trace, no SQL text (its own gateway, alone).
mkdir -p "$TRACING_RUN_DIR" && cp -r "$FERRY_RUN_DIR/certs" "$TRACING_RUN_DIR/"
tracing_gateway gateway >/dev/null && (export FERRY_RUN_DIR="$TRACING_RUN_DIR" FERRY_PORT="${FERRY_E2E_TRACING_PORT:-18450}"
  cargo test -p ferry-e2e --test tracing -- --ignored --nocapture) || status=$?
! grep -E "panicked|wasm trap|Function: proxy_on_.* failed" "$TRACING_RUN_DIR"/logs/{envoy,shim}.log || status=1
tracing_gateway down >/dev/null

# The native filter (envoy/native.yaml; experimental, Connect only): the Connect-only
# test files against its gateway.
mkdir -p "$NATIVE_RUN_DIR" && cp -r "$FERRY_RUN_DIR/certs" "$NATIVE_RUN_DIR/" && cp "$FERRY_RUN_DIR/mysql-root.cnf" "$NATIVE_RUN_DIR/"
native_gateway gateway >/dev/null && (export FERRY_RUN_DIR="$NATIVE_RUN_DIR" FERRY_PORT="${FERRY_E2E_NATIVE_PORT:-18458}" \
  FERRY_ADMIN_PORT="${FERRY_E2E_NATIVE_ADMIN_PORT:-19912}" FERRY_SHIM_ADDR="${FERRY_E2E_NATIVE_SHIM_ADDR:-127.0.0.1:18098}"
  cargo test -p ferry-e2e --test unary_pieces --test connect_get) || status=$?
! grep -E "panicked" "$NATIVE_RUN_DIR"/logs/{envoy,shim}.log || status=1
native_gateway down >/dev/null

# MySQL 8.0, on its own stack: the type table (Rust fields, the driver's values), queries,
# the API, bind variables, session state and Prisma.
if [ "${FERRY_E2E_MYSQL8:-1}" = 1 ]; then
  mysql8_stack up >/dev/null && (export FERRY_RUN_DIR="$MYSQL8_RUN_DIR" FERRY_PORT="$MYSQL8_PORT" \
    FERRY_MYSQL_SOCKET="$MYSQL8_RUN_DIR/mysql.sock" NODE_EXTRA_CA_CERTS="$MYSQL8_RUN_DIR/certs/ca.pem"
    cargo test -p ferry-e2e --test types --test queries --test api --test binds --test session_state \
      && cd "$ROOT/tests/driver" && node --test types.test.js && cd "$ROOT/tests/prisma" && node --test) || status=$?
  ! grep -E "panicked|wasm trap|Function: proxy_on_.* failed" "$MYSQL8_RUN_DIR"/logs/{envoy,shim}.log || status=1
  mysql8_stack down >/dev/null
fi

# Vitess: passwords checked by vtgate, a transaction across shards, scatter reads, vtgate's
# error codes without SQL in them, a deadline that stops the statement, session variables.
if [ "${FERRY_E2E_VITESS:-1}" = 1 ]; then
  # Then the equivalence with vtgate's own gRPC Execute (tests/vitess-equivalence) and the real
  # clients through Ferry to the sharded keyspace (tests/vitess-clients.sh: the JS driver and
  # ORMs, PlanetScale's Go client, psdbproxy + the mysql client on port 18456).
  (vitess_cluster up >/dev/null && vitess_gateway gateway >/dev/null \
    && export FERRY_E2E_VITESS_GATEWAY=1 FERRY_RUN_DIR="$VITESS_RUN_DIR" FERRY_PORT="$VITESS_GW_PORT" \
      FERRY_E2E_VITESS_HTTP="127.0.0.1:$VITESS_BASE_PORT" FERRY_REPLICA_SHIM_ADDR="$VITESS_REPLICA_SHIM_ADDR" \
    && { vs=0; cargo test -p ferry-e2e --test vitess || vs=1
      (cd "$ROOT/tests/vitess-equivalence" && PATH="$PATH:/usr/local/go/bin" \
        FERRY_URL="https://127.0.0.1:$VITESS_GW_PORT" FERRY_CA="$VITESS_RUN_DIR/certs/ca.pem" \
        VTGATE_GRPC="127.0.0.1:$((VITESS_BASE_PORT + 1))" go run .) || vs=1
      FERRY_PSDBPROXY_PORT="${FERRY_E2E_PSDBPROXY_PORT:-18456}" "$ROOT/tests/vitess-clients.sh" || vs=1
      exit $vs; }) || status=$?
  ! grep -E "panicked|wasm trap|Function: proxy_on_.* failed" "$VITESS_RUN_DIR"/logs/{envoy,shim,shim-replica}.log || status=1
  vitess_gateway down >/dev/null; vitess_cluster down >/dev/null
fi

# Read replicas: routing by class, read-your-writes, kills and restarts (tests/e2e/tests/replicas.rs).
if [ "${FERRY_E2E_REPLICAS:-1}" = 1 ]; then
  replicas_stack up >/dev/null && (replicas_env
    cargo test -p ferry-e2e --test replicas -- --ignored --test-threads=1 --nocapture) || status=$?
  # Every metric the Grafana dashboard queries, in real scrapes after this suite's workload
  # (observability.rs: pool wait timeout, refused password; replicas.rs: read-after-write
  # waits): the main stack's Envoy and shim, the replica stack's Envoy and both shims.
  (replicas_env && cd "$ROOT/observability/check" && npm ci --no-audit --no-fund --loglevel=error >/dev/null \
    && node check.mjs metrics ../grafana/ferry-dashboard.json \
      "http://127.0.0.1:${FERRY_E2E_ADMIN_PORT:-19901}/stats/prometheus" "http://${FERRY_E2E_SHIM_ADDR:-127.0.0.1:18081}/metrics" \
      "http://127.0.0.1:$FERRY_ADMIN_PORT/stats/prometheus" "http://$FERRY_SHIM_ADDR/metrics" "http://$FERRY_REPLICA_SHIM_ADDR/metrics") || status=$?
  # Keyed writes under kill -9 of the primary's shim, inside COMMIT too (this primary writes
  # the binary log that MariaDB's group-commit wait needs): each applied once.
  # After the metrics check: it restarts that shim, whose counters start again.
  (replicas_env && cargo test -p ferry-e2e --test idempotency -- --ignored --nocapture) || status=$?
  ! grep -E "panicked|wasm trap|Function: proxy_on_.* failed" "$REPLICAS_RUN_DIR"/logs/{envoy,shim,shim-replica}.log || status=1
  replicas_stack down >/dev/null
fi

# Envoy and the shim must have survived every bad input above.
"$ROOT/scripts/stack.sh" status
for pid in "$FERRY_RUN_DIR"/pids/{envoy,shim,mysql}.pid "$TCP_RUN_DIR"/pids/{envoy,shim}.pid \
  "$FERRY_E2E_PAIR_RUN_DIR"/pids/{envoy,shim,shim2}.pid "$BROWSER_RUN_DIR"/pids/{envoy,shim}.pid; do
  kill -0 "$(cat "$pid")" 2>/dev/null || { echo "$pid: died during the tests" >&2; status=1; }
done
if grep -E "panicked|wasm trap|Function: proxy_on_.* failed" "$FERRY_RUN_DIR"/logs/{envoy,shim}.log "$TCP_RUN_DIR"/logs/{envoy,shim}.log \
  "$FERRY_E2E_PAIR_RUN_DIR"/logs/{envoy,shim,shim2}.log "$BROWSER_RUN_DIR"/logs/{envoy,shim}.log; then
  echo "a panic or VM failure was logged" >&2; status=1
fi
[ $status -eq 0 ] || { echo "--- envoy.log (tail)"; tail -n 40 "$FERRY_RUN_DIR/logs/envoy.log"; echo "--- shim.log (tail)"; tail -n 40 "$FERRY_RUN_DIR/logs/shim.log"; }
exit $status
