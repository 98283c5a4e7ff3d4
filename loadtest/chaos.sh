#!/usr/bin/env bash
# `make chaos` (issue 29; docs/benchmarks/chaos.md "The longer run"): the chaos cases for
# minutes, on a replica stack of its own (.run/chaos; ports CHAOS_PORT 38643, admin 39931,
# shims 38281/38282, MariaDB 38406/38407): tests/e2e/tests/chaos.rs kills Envoy, each
# shim and each MariaDB in turn (SIGKILL, then started again) every CHAOS_EVERY seconds
# (30) for CHAOS_MINUTES (10) under reads, plain writes and keyed writes, then checks
# every acknowledged write is in the table once. Output: loadtest/results/<UTC>-chaos/out.txt.
#   chaos.sh          run
#   chaos.sh down     stop a chaos stack left by an interrupted run
set -euo pipefail
LT="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(dirname "$LT")"
export FERRY_RUN_DIR="$ROOT/.run/chaos" FERRY_HOST=127.0.0.1 FERRY_MYSQL_HOST=127.0.0.1
export FERRY_PORT="${CHAOS_PORT:-38643}" FERRY_ADMIN_PORT="${CHAOS_ADMIN_PORT:-39931}"
export FERRY_SHIM_ADDR="127.0.0.1:${CHAOS_SHIM_PORT:-38281}" FERRY_REPLICA_SHIM_ADDR="127.0.0.1:${CHAOS_REPLICA_SHIM_PORT:-38282}"
export FERRY_MYSQL_PORT="${CHAOS_MYSQL_PORT:-38406}" FERRY_REPLICA_MYSQL_PORT="${CHAOS_REPLICA_MYSQL_PORT:-38407}"
export FERRY_SHIM_UNIX="" FERRY_MYSQL_SOCKET="$FERRY_RUN_DIR/mysql.sock" FERRY_REPLICA_MYSQL_SOCKET="$FERRY_RUN_DIR/mysql-replica.sock"
export FERRY_REPLICAS=1
export CHAOS_MINUTES="${CHAOS_MINUTES:-10}" CHAOS_EVERY="${CHAOS_EVERY:-30}"
STACK="$ROOT/scripts/stack.sh"
case "${1:-}" in
  down) "$STACK" down; exit 0 ;;
  "") ;;
  *) sed -n '2,/^set -euo/p' "$0" | sed '$d' >&2; exit 2 ;;
esac
out="$LT/results/$(date -u +%Y%m%dT%H%M%SZ)-chaos"
mkdir -p "$out"
trap '"$STACK" down >/dev/null 2>&1 || true' EXIT
"$STACK" up >/dev/null
echo "chaos: $CHAOS_MINUTES min, a fault every $CHAOS_EVERY s, at $(git -C "$ROOT" rev-parse --short HEAD); output $out/out.txt"
cargo test -p ferry-e2e --test chaos -- --ignored --nocapture 2>&1 | grep -v '^level=' | tee "$out/out.txt"
test "${PIPESTATUS[0]}" -eq 0
