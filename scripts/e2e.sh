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
# The shim runs as an unprivileged OS user of its own, as it should in production;
# accounts.rs gives that OS user a unix_socket MariaDB account and expects it refused.
if [ "$(id -u)" -eq 0 ]; then
  export FERRY_SHIM_USER="${FERRY_E2E_SHIM_USER:-ferry-shim}"
  id -u "$FERRY_SHIM_USER" >/dev/null 2>&1 \
    || useradd --system --no-create-home --shell /usr/sbin/nologin "$FERRY_SHIM_USER"
fi
export FERRY_SHIM_OS_USER="${FERRY_SHIM_USER:-$(id -un)}"
# A second gateway (shim + Envoy) on the same MariaDB, reached over TCP, not the socket;
# its sessions expire after 2 s (sessions.rs) and it shares the dev CA and session key.
TCP_RUN_DIR="$FERRY_RUN_DIR/tcp"
export FERRY_E2E_TCP_PORT="${FERRY_E2E_TCP_PORT:-18444}"
tcp_gateway() {
  FERRY_RUN_DIR="$TCP_RUN_DIR" FERRY_PORT="$FERRY_E2E_TCP_PORT" \
    FERRY_ADMIN_PORT="${FERRY_E2E_TCP_ADMIN_PORT:-19902}" FERRY_SHIM_ADDR="${FERRY_E2E_TCP_SHIM_ADDR:-127.0.0.1:18082}" \
    FERRY_SHIM_UNIX="" FERRY_MYSQL_TRANSPORT=tcp FERRY_SESSION_TTL_SECS=2 \
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
stop_all() { pair_gateway down; tcp_gateway down; "$ROOT/scripts/stack.sh" down; }

stop_all >/dev/null 2>&1 || true
rm -rf "$FERRY_RUN_DIR"
trap stop_all EXIT
"$ROOT/scripts/stack.sh" up >/dev/null
mkdir -p "$TCP_RUN_DIR" && cp -r "$FERRY_RUN_DIR/certs" "$TCP_RUN_DIR/"  # one dev CA for both
tcp_gateway gateway >/dev/null
mkdir -p "$FERRY_E2E_PAIR_RUN_DIR" && cp -r "$FERRY_RUN_DIR/certs" "$FERRY_E2E_PAIR_RUN_DIR/"
pair_gateway gateway >/dev/null
echo "stack up in $FERRY_RUN_DIR (https://127.0.0.1:$FERRY_PORT; shim over TCP: port $FERRY_E2E_TCP_PORT; two shims: port $FERRY_E2E_PAIR_PORT)"

status=0
# First and alone, on a fresh Envoy and shim: a >1 GiB StreamExecute, watching their memory.
cargo test -p ferry-e2e --test stream_memory -- --ignored --nocapture || status=$?
cargo test -p ferry-e2e --tests --no-fail-fast -- --test-threads=4 || status=$?
# Alone, after the others: kills and restarts the shim mid-transaction.
cargo test -p ferry-e2e --test shim_restart -- --ignored || status=$?
# Alone: kills the shim of the pair that holds a session, then restarts it.
cargo test -p ferry-e2e --test affinity -- --ignored || status=$?
pair_gateway gateway >/dev/null || status=$?
# Alone: 2,000 concurrent sessions against max_connections=100.
cargo test -p ferry-e2e --test multiplex -- --ignored --nocapture || status=$?
# The real @planetscale/database driver (Node), trusting the dev CA.
(cd "$ROOT/tests/driver" && npm ci --no-audit --no-fund --loglevel=error >/dev/null \
  && NODE_EXTRA_CA_CERTS="$FERRY_RUN_DIR/certs/ca.pem" node --test) || status=$?
# PlanetScale's Go client library (psdb core/client: Connect proto, S2-compressed requests),
# unmodified defaults, over HTTP/2 and HTTP/3, as the dev user stack.sh made.
(cd "$ROOT/tests/psdb-go" && PATH="$PATH:/usr/local/go/bin" FERRY_PSDB_IDENTITY= \
  FERRY_URL="https://${FERRY_HOST:-127.0.0.1}:$FERRY_PORT" FERRY_CA="$FERRY_RUN_DIR/certs/ca.pem" \
  FERRY_USER="${FERRY_MYSQL_USER:-ferry}" FERRY_PASSWORD="${FERRY_MYSQL_PASSWORD:-ferry}" go run .) || status=$?
# The shim's own integration test, straight at the shim (no Envoy).
FERRY_TEST_MYSQL_SOCKET="$FERRY_MYSQL_SOCKET" cargo test -p ferry-shim --test '*' || status=$?

# Envoy and the shim must have survived every bad input above.
"$ROOT/scripts/stack.sh" status
for pid in "$FERRY_RUN_DIR"/pids/{envoy,shim,mysql}.pid "$TCP_RUN_DIR"/pids/{envoy,shim}.pid \
  "$FERRY_E2E_PAIR_RUN_DIR"/pids/{envoy,shim,shim2}.pid; do
  kill -0 "$(cat "$pid")" 2>/dev/null || { echo "$pid: died during the tests" >&2; status=1; }
done
if grep -E "panicked|wasm trap|Function: proxy_on_.* failed" "$FERRY_RUN_DIR"/logs/{envoy,shim}.log "$TCP_RUN_DIR"/logs/{envoy,shim}.log \
  "$FERRY_E2E_PAIR_RUN_DIR"/logs/{envoy,shim,shim2}.log; then
  echo "a panic or VM failure was logged" >&2; status=1
fi
[ $status -eq 0 ] || { echo "--- envoy.log (tail)"; tail -n 40 "$FERRY_RUN_DIR/logs/envoy.log"; echo "--- shim.log (tail)"; tail -n 40 "$FERRY_RUN_DIR/logs/shim.log"; }
exit $status
