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
export FERRY_SHIM_UNIX="$FERRY_RUN_DIR/shim.sock"
export FERRY_EARLY_DATA=false  # the shipped default, which early_data.rs checks

"$ROOT/scripts/stack.sh" down >/dev/null 2>&1 || true
rm -rf "$FERRY_RUN_DIR"
trap '"$ROOT/scripts/stack.sh" down' EXIT
"$ROOT/scripts/stack.sh" up >/dev/null
echo "stack up in $FERRY_RUN_DIR (https://127.0.0.1:$FERRY_PORT)"

status=0
cargo test -p ferry-e2e --tests -- --test-threads=4 || status=$?
# The real @planetscale/database driver (Node), trusting the dev CA.
(cd "$ROOT/tests/driver" && npm ci --no-audit --no-fund --loglevel=error >/dev/null \
  && NODE_EXTRA_CA_CERTS="$FERRY_RUN_DIR/certs/ca.pem" node --test) || status=$?
# The shim's own integration test, straight at the shim (no Envoy).
FERRY_TEST_MYSQL_SOCKET="$FERRY_MYSQL_SOCKET" cargo test -p ferry-shim --test '*' || status=$?

# Envoy and the shim must have survived every bad input above.
"$ROOT/scripts/stack.sh" status
for n in envoy shim mysql; do
  kill -0 "$(cat "$FERRY_RUN_DIR/pids/$n.pid")" 2>/dev/null || { echo "$n died during the tests" >&2; status=1; }
done
if grep -E "panicked|wasm trap|Function: proxy_on_.* failed" "$FERRY_RUN_DIR/logs/envoy.log" "$FERRY_RUN_DIR/logs/shim.log"; then
  echo "a panic or VM failure was logged" >&2; status=1
fi
[ $status -eq 0 ] || { echo "--- envoy.log (tail)"; tail -n 40 "$FERRY_RUN_DIR/logs/envoy.log"; echo "--- shim.log (tail)"; tail -n 40 "$FERRY_RUN_DIR/logs/shim.log"; }
exit $status
