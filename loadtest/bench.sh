#!/usr/bin/env bash
# Ferry's benchmark suite: k6 workloads × clients (MySQL+TLS baseline, Ferry
# HTTP/2, Ferry HTTP/3) × network shapes, against a stack instance of its own.
#   bench.sh smoke               every workload × client once, loopback; fails on any error
#   bench.sh full                every workload × client × network (loopback, near, far)
#   bench.sh sweep-concurrency   point selects at 4…200 VUs, MySQL vs Ferry (NET=loopback|near|far)
#   bench.sh sweep-compression   far network, compressible vs random rows: MySQL zlib vs Ferry gzip/zstd
#   bench.sh sessions            SESSIONS (5000) concurrent sessions, HTTP/2 and HTTP/3, MariaDB max_connections=100
#   bench.sh build               build bin/k6 and the tools only
#   bench.sh report DIR          re-render DIR/results.{json,md} and charts from DIR/runs
#   bench.sh down                stop a bench stack / namespaces left by an interrupted run
# Results: loadtest/results/<timestamp>/ (results.md, results.json, charts/*.png, runs/, logs/).
# Knobs: FAR_LOSS=<percent> (far shape loss), WORKLOADS="cold-start warm-select ..."
# (subset), CLIENTS="mysql h2 h3", SWEEP_VUS="4 8 ...", SWEEP_DURATION=10s.
set -euo pipefail
LT="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(dirname "$LT")"
PATH="$PATH:/usr/sbin:/sbin"
export K6_NO_USAGE_REPORT=true

ALL_WORKLOADS="cold-start warm-select medium-select medium-insert large-select large-insert transaction"
WORKLOADS="${WORKLOADS:-$ALL_WORKLOADS}"
CLIENTS="${CLIENTS:-mysql h2 h3}"
NS_S=ferryb-srv NS_C=ferryb-cli SRV_IP=10.77.0.1
STACK="${BENCH_STACK:-$ROOT/scripts/stack.sh}" # another stack script: for testing the suite itself

# --- the bench's own stack instance (own run dir and ports; see scripts/env.sh) ---
# $1 = local (everything in this namespace) | ns (server side in ferryb-srv)
stack_env() {
  export FERRY_PORT="${BENCH_PORT:-28443}" FERRY_ADMIN_PORT="${BENCH_ADMIN_PORT:-29901}"
  export FERRY_SHIM_ADDR="127.0.0.1:${BENCH_SHIM_PORT:-28081}" FERRY_MYSQL_PORT="${BENCH_MYSQL_PORT:-53306}"
  export FERRY_SHIM_UNIX=""
  if [ "$1" = ns ]; then
    export FERRY_RUN_DIR="$ROOT/.run/bench-ns" FERRY_HOST=0.0.0.0 FERRY_MYSQL_HOST=0.0.0.0
    export FERRY_CERT_EXTRA_SAN="IP:$SRV_IP"
    SRV_NS=(ip netns exec "$NS_S")
  else
    export FERRY_RUN_DIR="$ROOT/.run/bench" FERRY_HOST=127.0.0.1 FERRY_MYSQL_HOST=127.0.0.1
    SRV_NS=()
  fi
  export FERRY_MYSQL_SOCKET="$FERRY_RUN_DIR/mysql.sock"
  local c="$FERRY_RUN_DIR/certs"
  # The baseline is the MySQL protocol over TLS 1.3, with the gateway's certificate.
  # Ferry with HTTP/3 0-RTT on (the default), so cold starts can be measured with it.
  export FERRY_EARLY_DATA=true
  export FERRY_MYSQL_EXTRA_ARGS="--ssl-cert=$c/server.pem --ssl-key=$c/server.key --ssl-ca=$c/ca.pem --tls-version=TLSv1.3"
  CA="$c/ca.pem" DATA="$FERRY_RUN_DIR/bench-data"
}

stack_up() {
  mkdir -p "$FERRY_RUN_DIR"
  "$ROOT/scripts/dev-cert.sh" >/dev/null # certs first: MariaDB's TLS arguments point at them
  "${SRV_NS[@]}" "$STACK" up >"$OUT/logs/stack-up.log" 2>&1 \
    || { cat "$OUT/logs/stack-up.log" >&2; return 1; }
  # Clients in the other namespace connect from 10.77.0.2: let the bench user in from there.
  mariadb --defaults-file="$FERRY_RUN_DIR/mysql-root.cnf" --socket="$FERRY_MYSQL_SOCKET" -e "
    CREATE USER IF NOT EXISTS 'ferry'@'10.77.0.%' IDENTIFIED BY 'ferry';
    GRANT ALL PRIVILEGES ON ferry.* TO 'ferry'@'10.77.0.%';"
  "$LT/bin/fixtures" -socket "$FERRY_MYSQL_SOCKET" -out "$DATA" 2>&1 | sed 's/^/  /'
}

stack_down() { "$STACK" down >/dev/null 2>&1 || true; }

# --- running one workload ---
# shape NET: sets where clients run and the URLs they use; near/far need the namespaces.
shape() {
  NET=$1
  case "$NET" in
    loopback) CLI_NS=("${SRV_NS[@]}") HOST=127.0.0.1 ;;
    *) CLI_NS=(ip netns exec "$NS_C") HOST=$SRV_IP ;;
  esac
  if [ "${#SRV_NS[@]}" -gt 0 ]; then "$LT/net.sh" shape "$NET"; fi
  NETLABEL=$NET # the name in the results: far with loss is another network
  if [ "$NET" = far ] && [ "${LOSS:-0}" != 0 ]; then NETLABEL="far-loss${LOSS}%"; fi
  RTT=$(rtt)
  echo "== network $NETLABEL (measured TCP connect RTT ${RTT} ms)"
}

# rtt: median TCP connect time to MariaDB's port from the client side, in ms.
rtt() {
  "${CLI_NS[@]}" python3 - "$HOST" "$FERRY_MYSQL_PORT" <<'PY'
import socket, sys, time
t = []
for _ in range(9):
    s = time.perf_counter(); c = socket.create_connection((sys.argv[1], int(sys.argv[2]))); t.append(time.perf_counter() - s); c.close()
print(f"{sorted(t)[4] * 1000:.3f}")
PY
}

# plan WORKLOAD: VUs/iterations for the profile (smoke|full) and network.
plan() {
  local far=0; [ "$NET" = far ] && far=1
  if [ "$PROFILE" = smoke ]; then
    case $1 in
      cold-start) echo "1 3" ;; warm-select) echo "2 5" ;; medium-*) echo "1 3" ;; large-*) echo "1 1" ;;
      transaction) echo "2 3" ;;
    esac
    return
  fi
  case $1 in
    cold-start) [ $far = 1 ] && echo "1 20" || echo "1 100" ;;
    warm-select) echo "16 10s" ;;
    medium-*) [ $far = 1 ] && echo "4 20" || echo "4 200" ;;
    large-select) [ $far = 1 ] && echo "1 3" || echo "1 10" ;;
    large-insert) [ $far = 1 ] && echo "1 5" || echo "1 10" ;;
    transaction) [ $far = 1 ] && echo "1 20" || echo "4 200" ;;
  esac
}

# run WORKLOAD CLIENT VARIANT VUS ITER_OR_DURATION [k6 -e args...]
run() {
  local w=$1 client=$2 variant=$3 vus=$4 n=$5; shift 5
  local name="$w.$client${variant:+.${variant//,/-}}.${NETLABEL%\%}.v$vus"
  local labels
  labels=$(printf '{"workload":"%s","client":"%s","variant":"%s","net":"%s","rtt_ms":%s,"vus":%s}' \
    "$w" "$client" "$variant" "$NETLABEL" "$RTT" "$vus")
  local count=(-e ITERATIONS="$n")
  [[ "$n" == *s ]] && count=(-e DURATION="$n")
  case $w in *insert) "$LT/bin/fixtures" -socket "$FERRY_MYSQL_SOCKET" -truncate ;; esac
  # k6's own http trusts the system roots only: SSL_CERT_FILE makes Go's x509 read the dev CA.
  "${CLI_NS[@]}" env SSL_CERT_FILE="$CA" "$LT/bin/k6" run --quiet --no-color --log-output=stderr \
    -e CLIENT="$client" -e FERRY_URL="https://$HOST:$FERRY_PORT" -e MYSQL_ADDR="$HOST:$FERRY_MYSQL_PORT" \
    -e CA="$CA" -e DATA="$DATA" -e VUS="$vus" "${count[@]}" -e MODE="$variant" \
    -e LABELS="$labels" -e SUMMARY="$OUT/runs/$name.json" "$@" \
    "$LT/k6/$w.js" 2>"$OUT/logs/$name.log" | sed 's/^/  /' \
    || echo "  k6 failed for $name: see $OUT/logs/$name.log" >&2
  # A run that wrote no summary would be missing from the report: count it as a failure.
  [ -s "$OUT/runs/$name.json" ] || { echo "  no summary from $name: see $OUT/logs/$name.log" >&2; MISSING=$((MISSING + 1)); }
}

# workload W: every client (and, for cold start, every resumption variant) on $NET.
workload() {
  local w=$1 p vus n
  p=$(plan "$w"); vus=${p% *} n=${p#* }
  for client in $CLIENTS; do
    if [ "$w" = cold-start ]; then
      local variants="noresume resume"
      [ "$client" = h3 ] && variants="noresume resume 0rtt"
      for v in $variants; do run "$w" "$client" "$v" "$vus" "$n"; done
    else
      run "$w" "$client" "" "$vus" "$n"
    fi
  done
}

# --- entry points ---
prepare() { # PROFILE
  PROFILE=$1
  "$LT/build-k6.sh"
  OUT="$LT/results/$(date -u +%Y%m%dT%H%M%SZ)-$1"
  mkdir -p "$OUT/runs" "$OUT/logs"
  echo "results: $OUT"
}

MISSING=0
finish() { # render; smoke fails on any error or missing run
  "$LT/bin/report" "$OUT" || return $?
  [ "$MISSING" = 0 ] || { echo "$MISSING run(s) wrote no summary" >&2; return 4; }
}

use_ns() {
  stack_env ns
  trap 'stack_down; "$LT/net.sh" down' EXIT
  "$LT/net.sh" up
  stack_up
}

use_local() {
  stack_env local
  trap stack_down EXIT
  stack_up
}

case "${1:-}" in
  build) "$LT/build-k6.sh" ;;
  smoke)
    prepare smoke; use_local; shape loopback
    for w in $WORKLOADS; do workload "$w"; done
    finish ;;
  full)
    prepare full; use_ns
    for net in ${NETS:-loopback near far}; do
      LOSS="${FAR_LOSS:-0}" shape "$net"
      for w in $WORKLOADS; do workload "$w"; done
    done
    finish || true ;;
  sweep-concurrency)
    prepare sweep-concurrency
    if [ "${NET:-loopback}" = loopback ]; then use_local; else use_ns; fi
    shape "${NET:-loopback}"
    for vus in ${SWEEP_VUS:-4 8 16 32 64 100 200}; do
      for client in $CLIENTS; do run point-select "$client" "" "$vus" "${SWEEP_DURATION:-10s}"; done
    done
    finish || true ;;
  sessions)
    # SESSIONS concurrent sessions (default 5,000) over HTTP/2 and HTTP/3 against
    # MariaDB at max_connections=100; MariaDB's connection counters next to each run.
    prepare sessions; use_local; shape loopback
    root_sql=(mariadb --defaults-file="$FERRY_RUN_DIR/mysql-root.cnf" --socket="$FERRY_MYSQL_SOCKET" -N -B)
    "${root_sql[@]}" -e "SET GLOBAL max_connections = 100"
    for client in ${CLIENTS/mysql/}; do
      "${root_sql[@]}" -e "FLUSH STATUS"
      drops=$(awk '/^Udp:/ { n++ } /^Udp:/ && n == 2 { print $7 }' /proc/net/snmp)
      run sessions "$client" "" "${SESSIONS:-5000}" "${SESSIONS_ITER:-20}"
      echo "  UDP receive-buffer drops during the run (host-wide): $(( $(awk '/^Udp:/ { n++ } /^Udp:/ && n == 2 { print $7 }' /proc/net/snmp) - drops ))" \
        | tee -a "$OUT/runs/sessions.$client.mariadb.txt"
      "${root_sql[@]}" -e "SHOW GLOBAL STATUS WHERE Variable_name IN
        ('Max_used_connections', 'Threads_connected', 'Connection_errors_max_connections')" \
        | tee "$OUT/runs/sessions.$client.mariadb.txt" | sed 's/^/  mariadb: /'
    done
    "${root_sql[@]}" -e "SET GLOBAL max_connections = 500"
    finish || true ;;
  sweep-compression)
    prepare sweep-compression; use_ns; LOSS="${FAR_LOSS:-0}" shape "${NET:-far}"
    accept='{"accept-encoding":"gzip, zstd","connect-accept-encoding":"gzip, zstd"}'
    for table in ztext zrand; do
      run compress-select mysql "$table,none" 1 "${ITER:-5}" -e TABLE="$table"
      run compress-select mysql "$table,zlib" 1 "${ITER:-5}" -e TABLE="$table" -e COMPRESS=1
      for client in h2 h3; do
        run compress-select "$client" "$table,none" 1 "${ITER:-5}" -e TABLE="$table"
        run compress-select "$client" "$table,gzip-zstd" 1 "${ITER:-5}" -e TABLE="$table" -e HEADERS="$accept"
      done
    done
    finish || true ;;
  report) "$LT/bin/report" "${2:?results dir}" ;;
  down)
    stack_env ns; stack_down; stack_env local; stack_down; "$LT/net.sh" down ;;
  *) sed -n '2,12p' "$0" >&2; exit 2 ;;
esac
