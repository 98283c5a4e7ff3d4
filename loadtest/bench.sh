#!/usr/bin/env bash
# Ferry's benchmark suite: k6 workloads × clients (MySQL+TLS baseline, Ferry
# HTTP/2, Ferry HTTP/3) × network shapes, against a stack instance of its own.
#   bench.sh smoke               every workload × client once (+ every codec once), loopback; fails on any error
#   bench.sh full                every workload × client × network (loopback, near, far)
#   bench.sh sweep-concurrency   point selects at 4…200 VUs, MySQL vs Ferry (NET=loopback|near|far)
#   bench.sh sweep-compression   far network, compressible vs random rows: MySQL zlib vs Ferry gzip/zstd
#   bench.sh compression         per codec: large SELECT/INSERT on the far shape vs MySQL plain/zlib and
#                                MySQL 8.0 zstd 1/3/7; loopback cost per codec (CPU per call); Envoy's
#                                compressor filter vs the Ferry filter's (make bench-compression)
#   bench.sh sessions            SESSIONS (5000) concurrent sessions, HTTP/2 and HTTP/3, MariaDB max_connections=100
#   bench.sh serverless          short-lived sessions that SET state then read it, vs the same without state
#   bench.sh replicas            point selects at 4…200 VUs: primary only vs primary + replica (two stacks
#                                up at once, runs interleaved), HTTP/2 and HTTP/3, the MySQL baseline, CPU
#                                per call of every process (make bench-replicas; results replicas.md)
#   bench.sh cost                what a query costs: warm SELECT 1 at COST_VUS (16) and 1 VU, large SELECT
#                                (COST_LARGE_ITER, 10), MySQL+TLS vs Ferry HTTP/2 and HTTP/3 × Connect JSON
#                                and proto, ROUNDS (2) interleaved; QPS, p50/p99, CPU µs per request and
#                                ms per MB of Envoy, shim, MariaDB, k6 (make bench-cost; results cost.md)
#   bench.sh batch               batches (issue 28): a 5-statement transaction as 7 requests (transaction())
#                                vs one ExecuteBatch, far shape, MySQL+TLS beside, HTTP/2 and HTTP/3; then on
#                                loopback a one-INSERT batch with and without an Idempotency-Key, CPU per call
#                                (make bench-batch; BATCH_ITER (20, far), BATCH_LOOP (10s, loopback); results batches.md)
#   bench.sh build               build bin/k6 and the tools only
#   bench.sh report DIR          re-render DIR/results.{json,md} and charts from DIR/runs
#   bench.sh cost-report DIR     re-render DIR/cost.md from DIR/runs
#   bench.sh down                stop a bench stack / namespaces left by an interrupted run
# Results: loadtest/results/<timestamp>/ (results.md, results.json, charts/*.png, runs/, logs/).
# Knobs: FAR_LOSS=<percent> (far shape loss), CPU=1 (full: CPU per call of each process), WORKLOADS="cold-start warm-select ..."
# (subset), CLIENTS="mysql h2 h3", SWEEP_VUS="4 8 ...", SWEEP_DURATION=10s (also replicas),
# compression: PARTS="far far-envoy loopback pair envoy" (pair-near: the pair part on the near shape),
# BENCH_MIN_RTT_MS=0 (the gateway's compression.min_rtt_ms: 0 compresses for clients at any distance; 5 is the shipped default),
# CODECS="identity gzip zstd snappy s2", PROTO_CODECS
# (Connect proto rows on far; default CODECS, "" = none), TABLES="large lrand", SEL_ITER=3,
# INS_ITER=5, ROUNDS=3 (loopback), LOOP_ITER=10 and MEDIUM_ITER=100, PAIR_ITER=10 and
# PAIR_MEDIUM_ITER=50 (per round), PAIR_CLIENTS="h2" (pair parts: h2 and/or h3), CLI_CHECK=1,
# RUN_NICE=-10 (compression loopback parts, replicas, cost: the stack's threads and k6 at this nice; "" = leave them),
# cost: COST_VUS=16, COST_DURATION=10s, COST_LARGE_ITER=10, ROUNDS=2, COST_BREAKDOWN=1 (Envoy
# variants, loadtest/envoy-breakdown.sh: BREAKDOWN_N, BREAKDOWN_C, results breakdown.md), COST_TRANSPORT=1
# (the shim's hop to MariaDB, unix socket vs TCP vs TCP + TLS, loadtest/shim-transport.sh: TRANSPORTS, TRANSPORT_*, results transport.md),
# COST_LARGE_ANSWER=1 (the large SELECT with Rust clients, MySQL+TLS vs HTTP/2 vs HTTP/3, loadtest/large-answer.sh: LARGE_*,
# results large-answer.md),
# PSSIM_ADDR (host:port of a running ps-http-sim on the stack's MariaDB: loadtest/pssim.sh, results pssim.md) or
# PSSIM_BIN (a ps-http-sim binary: started on BENCH_PSSIM_PORT, 28480, against the stack's MariaDB, stopped after);
# cost.md ends with every goal of issue 30 as a ratio against its floor from the same run.
set -euo pipefail
LT="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(dirname "$LT")"
source "$LT/lib/cpu.sh"
source "$LT/lib/rtt.sh"
# rtt: median TCP connect time to MariaDB's port from the client side, in ms.
rtt() { tcp_rtt_ms "$HOST" "$FERRY_MYSQL_PORT"; }
PATH="$PATH:/usr/sbin:/sbin"
export K6_NO_USAGE_REPORT=true

ALL_WORKLOADS="cold-start warm-select medium-select medium-insert large-select large-insert transaction"
WORKLOADS="${WORKLOADS:-$ALL_WORKLOADS}"
CLIENTS="${CLIENTS:-mysql h2 h3}"
NS_S=ferryb-srv NS_C=ferryb-cli SRV_IP=10.77.0.1
STACK="${BENCH_STACK:-$ROOT/scripts/stack.sh}" # another stack script: for testing the suite itself

# --- the bench's own stack instance (own run dir and ports; see scripts/env.sh) ---
# $1 = local (everything in this namespace) | ns (server side in ferryb-srv);
# $2 = a name for another local instance (run dir .run/bench-NAME; set BENCH_* ports for it)
stack_env() {
  export FERRY_PORT="${BENCH_PORT:-28443}" FERRY_ADMIN_PORT="${BENCH_ADMIN_PORT:-29901}"
  export FERRY_SHIM_ADDR="127.0.0.1:${BENCH_SHIM_PORT:-28081}" FERRY_MYSQL_PORT="${BENCH_MYSQL_PORT:-53306}"
  export FERRY_SHIM_UNIX=""
  if [ "$1" = ns ]; then
    export FERRY_RUN_DIR="$ROOT/.run/bench-ns" FERRY_HOST=0.0.0.0 FERRY_MYSQL_HOST=0.0.0.0
    export FERRY_CERT_EXTRA_SAN="IP:$SRV_IP"
    SRV_NS=(ip netns exec "$NS_S")
  else
    export FERRY_RUN_DIR="$ROOT/.run/bench${2:+-$2}" FERRY_HOST=127.0.0.1 FERRY_MYSQL_HOST=127.0.0.1
    SRV_NS=()
  fi
  export FERRY_MYSQL_SOCKET="$FERRY_RUN_DIR/mysql.sock"
  local c="$FERRY_RUN_DIR/certs"
  # The baseline is the MySQL protocol over TLS 1.3, with the gateway's certificate.
  # Ferry with HTTP/3 0-RTT on (the default), so cold starts can be measured with it.
  export FERRY_EARLY_DATA=true
  # The benches measure the codecs themselves wherever the client runs (loopback too);
  # BENCH_MIN_RTT_MS=5, the shipped compression.min_rtt_ms, shows the distance rule instead.
  export FERRY_COMPRESS_MIN_RTT_MS="${BENCH_MIN_RTT_MS:-0}"
  export FERRY_MYSQL_EXTRA_ARGS="--ssl-cert=$c/server.pem --ssl-key=$c/server.key --ssl-ca=$c/ca.pem --tls-version=TLSv1.3"
  CA="$c/ca.pem" DATA="$FERRY_RUN_DIR/bench-data"
}

stack_up() {
  mkdir -p "$FERRY_RUN_DIR"
  "$ROOT/scripts/dev-cert.sh" >/dev/null # certs first: MariaDB's TLS arguments point at them
  local log="$OUT/logs/${STACK_LOG:-stack-up}.log"
  "${SRV_NS[@]}" "$STACK" up >"$log" 2>&1 || { cat "$log" >&2; return 1; }
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
  local name="$w.$client${variant:+.${variant//,/-}}.${NETLABEL%\%}.v$vus${RUN_SUFFIX:-}" # suffix: .rN for rounds
  local labels
  labels=$(printf '{"workload":"%s","client":"%s","variant":"%s","net":"%s","rtt_ms":%s,"vus":%s}' \
    "$w" "$client" "$variant" "$NETLABEL" "$RTT" "$vus")
  local count=(-e ITERATIONS="$n")
  [[ "$n" == *s ]] && count=(-e DURATION="$n")
  case $w in *insert) "$LT/bin/fixtures" -socket "$FERRY_MYSQL_SOCKET" -truncate ;; esac
  local cpu0="" served0="" k6a k6b
  [ -z "${CPU_PIDS:-}" ] || cpu0=$(cpu_snap)
  [ -z "${SERVED_SHIMS:-}" ] || served0=$(served_snap)
  children_ticks k6a
  # k6's own http trusts the system roots only: SSL_CERT_FILE makes Go's x509 read the dev CA.
  "${CLI_NS[@]}" ${RUN_NICE:+nice -n "$RUN_NICE"} env SSL_CERT_FILE="$CA" "$LT/bin/k6" run --quiet --no-color --log-output=stderr \
    -e CLIENT="$client" -e FERRY_URL="https://$HOST:${RUN_PORT:-$FERRY_PORT}" -e MYSQL_ADDR="$HOST:$FERRY_MYSQL_PORT" \
    -e CA="$CA" -e DATA="$DATA" -e VUS="$vus" "${count[@]}" -e MODE="$variant" \
    -e LABELS="$labels" -e SUMMARY="$OUT/runs/$name.json" "$@" \
    "$LT/k6/$w.js" 2>"$OUT/logs/$name.log" | sed 's/^/  /' \
    || echo "  k6 failed for $name: see $OUT/logs/$name.log" >&2
  children_ticks k6b
  # A run that wrote no summary would be missing from the report: count it as a failure.
  [ -s "$OUT/runs/$name.json" ] || { echo "  no summary from $name: see $OUT/logs/$name.log" >&2; MISSING=$((MISSING + 1)); return; }
  [ -z "$cpu0" ] || cpu_note "$OUT/runs/$name.json" "$cpu0 k6:$k6a" "$(cpu_snap) k6:$k6b"
  [ -z "$served0" ] || served_note "$OUT/runs/$name.json" "$served0" "$(served_snap)"
}



# --- which shim answered: SERVED_SHIMS="shim:HOST:PORT shim-replica:HOST:PORT" ---
# served_snap prints "name:count ..." (Execute answers, ferry_shim_requests_total at /metrics).
served_snap() {
  local ns
  for ns in $SERVED_SHIMS; do
    printf '%s:%s ' "${ns%%:*}" "$(curl -sf --http2-prior-knowledge "http://${ns#*:}/metrics" \
      | awk '/^ferry_shim_requests_total\{/ && /rpc="Execute"/ { n += $NF } END { print n + 0 }')"
  done
}

# served_note SUMMARY BEFORE AFTER: adds served_by {shim: answers during the run}.
served_note() {
  python3 - "$@" <<'PY'
import json, sys
path, before, after = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
doc = json.load(open(path))
b = dict(x.split(":") for x in before)
doc["served_by"] = {k: int(v) - int(b[k]) for k, v in (x.split(":") for x in after)}
json.dump(doc, open(path, "w"))
print("  answered by: " + ", ".join(f"{k} {v}" for k, v in doc["served_by"].items()))
PY
}


# prioritize PID...: every thread of these processes to nice $RUN_NICE (and k6 runs
# with it): the host is shared, and builds next to a loopback benchmark skew it.
prioritize() {
  [ -n "${RUN_NICE:-}" ] || return 0
  local pid t
  for pid in "$@"; do
    for t in /proc/"$pid"/task/*; do renice -n "$RUN_NICE" -p "${t##*/}" >/dev/null 2>&1 || true; done
  done
}

# pid_of NAME: the pid stack.sh recorded for one of its processes (envoy, shim, mysql).
pid_of() { cat "$FERRY_RUN_DIR/pids/$1.pid"; }

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

# --- the compression benchmark (bench.sh compression; docs/benchmarks/compression.md "Compression") ---
CODECS="${CODECS:-identity gzip zstd snappy s2}"
M80_PORT="${BENCH_MYSQL80_PORT:-53307}" CMP_PORT="${BENCH_COMPRESSOR_PORT:-28444}" CMP_ADMIN="${BENCH_COMPRESSOR_ADMIN_PORT:-29902}"
DIST80="$ROOT/.run/mysql80/dist"

# mysql80 ARGS: loadtest/mysql80.sh for the bench's MySQL 8.0 (server side, bench certs).
mysql80() {
  "${SRV_NS[@]}" env MYSQL80_PORT="$M80_PORT" MYSQL80_HOST="$FERRY_MYSQL_HOST" MYSQL80_DATA="$FERRY_RUN_DIR/mysql80" \
    MYSQL80_CERTS="$FERRY_RUN_DIR/certs" "$LT/mysql80.sh" "$@"
}

mysql80_up() {
  "$LT/mysql80.sh" install # outside the namespaces: it may download
  mysql80 up >"$OUT/logs/mysql80-up.log" 2>&1 || { cat "$OUT/logs/mysql80-up.log" >&2; return 1; }
  "${SRV_NS[@]}" "$LT/bin/fixtures" -addr "127.0.0.1:$M80_PORT" 2>&1 | sed 's/^/  mysql 8.0: /'
}

# mysql80_select TABLE VARIANT ITER ARGS...: SELECT * FROM TABLE on MySQL 8.0 through
# libmysqlclient (zstd and its levels: the Go driver has zlib only), timed per call.
mysql80_select() {
  local table=$1 v=$2 n=$3; shift 3
  local name="large-select.mysql80.$table-$v.${NETLABEL%\%}.v1"
  local labels
  labels=$(printf '{"workload":"large-select","client":"mysql80","variant":"%s","net":"%s","rtt_ms":%s,"vus":1}' \
    "$table,$v" "$NETLABEL" "$RTT")
  "${CLI_NS[@]}" python3 "$LT/libmysql-bench.py" --dist "$DIST80" --host "$HOST" --port "$M80_PORT" --ca "$CA" \
    --sql "SELECT * FROM $table" --iterations "$n" --labels "$labels" --summary "$OUT/runs/$name.json" "$@" \
    2>"$OUT/logs/$name.log" | sed 's/^/  /' || echo "  libmysql-bench failed for $name: see $OUT/logs/$name.log" >&2
  [ -s "$OUT/runs/$name.json" ] || MISSING=$((MISSING + 1))
}

# mysql80_cli TABLE OPTIONS...: the stock `mysql` CLI, once, its own timer ("rows in set (s)"),
# as a cross-check of libmysql-bench.py's figures.
mysql80_cli() {
  local table=$1; shift
  local t
  t=$("${CLI_NS[@]}" "$DIST80/bin/mysql" --no-defaults -h "$HOST" -P "$M80_PORT" -uferry -pferry \
    --ssl-mode=VERIFY_CA --ssl-ca="$CA" --tls-version=TLSv1.3 "$@" -vvv ferry -e "SELECT * FROM $table" 2>/dev/null \
    | grep -a 'rows in set' || echo "failed")
  echo "  mysql CLI $table $*: $t" | tee -a "$OUT/runs/mysql80-cli.txt"
}

# The far part: large SELECT and INSERT per codec, compressible (large) and random (lrand)
# rows, MySQL plain and zlib (Go driver, MariaDB) and Ferry over HTTP/2 and HTTP/3; MySQL
# 8.0 plain, zlib and zstd 1/3/7 for the SELECT.
compression_far() {
  local si="${SEL_ITER:-3}" ii="${INS_ITER:-5}" table client codec
  for table in ${TABLES:-large lrand}; do
    run large-select mysql "$table,none" 1 "$si" -e TABLE="$table"
    run large-select mysql "$table,zlib" 1 "$si" -e TABLE="$table" -e COMPRESS=1
    for client in h2 h3; do
      for codec in $CODECS; do
        run large-select "$client" "$table,$codec" 1 "$si" -e TABLE="$table" -e CODEC="$codec"
      done
      # Connect unary proto: the same rows without protojson's base64 (+35 % bytes).
      for codec in ${PROTO_CODECS-$CODECS}; do
        run large-select "$client" "$table,$codec,proto" 1 "$si" -e TABLE="$table" -e CODEC="$codec" -e FORMAT=proto
      done
    done
    mysql80_select "$table" none "$si" --compress none
    mysql80_select "$table" zlib "$si" --compress zlib
    for level in 1 3 7; do mysql80_select "$table" "zstd$level" "$si" --compress zstd --level "$level"; done
  done
  for table in ${TABLES:-large lrand}; do
    local sql="${table}_insert.sql"
    run large-insert mysql "$table,none" 1 "$ii" -e INSERT="$sql"
    run large-insert mysql "$table,zlib" 1 "$ii" -e INSERT="$sql" -e COMPRESS=1
    for client in h2 h3; do
      for codec in $CODECS; do
        run large-insert "$client" "$table,$codec" 1 "$ii" -e INSERT="$sql" -e CODEC="$codec"
      done
    done
  done
  if [ "${CLI_CHECK:-1}" = 1 ]; then
    mysql80_cli large --compression-algorithms=uncompressed
    mysql80_cli large --compression-algorithms=zlib
    for level in 1 3 7; do mysql80_cli large --compression-algorithms=zstd --zstd-compression-level="$level"; done
  fi
}

# The loopback part: what each codec costs where bandwidth is free (HTTP/2), with the CPU
# per call of Envoy, the shim and MariaDB. ROUNDS interleaved rounds (the host is shared:
# background load hits every codec alike); the report merges a row's rounds.
compression_loopback() {
  local li="${LOOP_ITER:-10}" mi="${MEDIUM_ITER:-100}" codec round
  prioritize "$(pid_of envoy)" "$(pid_of shim)" "$(pid_of mysql)"
  for round in $(seq "${ROUNDS:-3}"); do
    RUN_SUFFIX=".r$round"
    CPU_PIDS="envoy:$(pid_of envoy) shim:$(pid_of shim) mysql:$(pid_of mysql)"
    run large-select mysql "large,none" 1 "$li"
    run medium-select mysql "medium,none" 4 "$mi"
    for codec in $CODECS; do
      run large-select h2 "large,$codec" 1 "$li" -e CODEC="$codec"
      run medium-select h2 "medium,$codec" 4 "$mi" -e CODEC="$codec"
    done
  done
  CPU_PIDS="" RUN_SUFFIX=""
}

# The pair part: wall time per codec against identity on loopback, each call made twice
# (codec and its identity twin, alternating: lib.js paired()), so both see the same
# background load; ×identity = the rounds' median of p50 ÷ the twin's p50.
# PAIR_CLIENTS: h2 (default) and/or h3.
compression_pair() {
  local li="${PAIR_ITER:-10}" mi="${PAIR_MEDIUM_ITER:-50}" codec round client
  prioritize "$(pid_of envoy)" "$(pid_of shim)" "$(pid_of mysql)"
  for round in $(seq "${ROUNDS:-3}"); do
    RUN_SUFFIX=".p$round"
    for client in ${PAIR_CLIENTS:-h2}; do
      for codec in ${CODECS/identity/}; do
        run large-select "$client" "large,$codec,paired" 1 "$li" -e CODEC="$codec" -e PAIR=1
        run medium-select "$client" "medium,$codec,paired" 4 "$mi" -e CODEC="$codec" -e PAIR=1
      done
    done
  done
  RUN_SUFFIX=""
}

# The envoy part: Envoy's compressor filter (envoy/compressor.yaml, a second Envoy on
# CMP_PORT; the Ferry filter there does not compress) against the Ferry filter's own
# compression, Connect unary JSON large SELECT over HTTP/2 on loopback.
compressor_up() {
  local pidf="$FERRY_RUN_DIR/pids/envoy-compressor.pid" pid
  FERRY_PORT="$CMP_PORT" FERRY_ADMIN_PORT="$CMP_ADMIN" "$ROOT/scripts/render-envoy.sh" "$ROOT/envoy/compressor.yaml" \
    >"$FERRY_RUN_DIR/envoy-compressor.yaml"
  "${SRV_NS[@]}" setsid "${ENVOY:-$ROOT/.venv/bin/envoy}" -c "$FERRY_RUN_DIR/envoy-compressor.yaml" \
    --disable-hot-restart --log-level warn >"$OUT/logs/envoy-compressor.log" 2>&1 </dev/null &
  pid=$!
  echo "$pid" >"$pidf"
  for _ in $(seq 300); do
    "${SRV_NS[@]}" curl -sf "http://127.0.0.1:$CMP_ADMIN/ready" 2>/dev/null | grep -q LIVE && break
    sleep 0.1
  done
  "${SRV_NS[@]}" curl -sf "http://127.0.0.1:$CMP_ADMIN/ready" | grep -q LIVE \
    || { echo "compressor Envoy did not start: see $OUT/logs/envoy-compressor.log" >&2; return 1; }
  [[ "$(readlink "/proc/$pid/exe")" == *envoy ]] || { echo "pid $pid is not Envoy" >&2; return 1; }
}

compressor_down() {
  local pidf="$FERRY_RUN_DIR/pids/envoy-compressor.pid"
  [ -s "$pidf" ] || return 0
  kill "$(cat "$pidf")" 2>/dev/null || true
  rm -f "$pidf"
}

# The far-envoy part: the same comparison on the far shape (large SELECT, Connect JSON).
compression_far_envoy() {
  local si="${SEL_ITER:-3}" client codec
  compressor_up
  for client in h2 h3; do
    for codec in gzip zstd; do
      RUN_PORT="$CMP_PORT" run large-select "$client" "large,envoy-$codec" 1 "$si" -e CODEC="$codec"
    done
  done
  compressor_down
}

compression_envoy() {
  local li="${LOOP_ITER:-10}" codec round
  compressor_up
  prioritize "$(pid_of envoy)" "$(cat "$FERRY_RUN_DIR/pids/envoy-compressor.pid")" "$(pid_of shim)" "$(pid_of mysql)"
  for round in $(seq "${ROUNDS:-3}"); do
    RUN_SUFFIX=".e$round" # not .rN: the loopback part's runs of the filter keep their files
    for codec in identity gzip zstd; do
      # Envoy's compressor, then the filter's own codec right after it (same rows as the loopback part).
      CPU_PIDS="envoy:$(cat "$FERRY_RUN_DIR/pids/envoy-compressor.pid") shim:$(pid_of shim) mysql:$(pid_of mysql)"
      RUN_PORT="$CMP_PORT" run large-select h2 "large,envoy-$codec" 1 "$li" -e CODEC="$codec"
      CPU_PIDS="envoy:$(pid_of envoy) shim:$(pid_of shim) mysql:$(pid_of mysql)"
      run large-select h2 "large,$codec" 1 "$li" -e CODEC="$codec"
    done
  done
  CPU_PIDS="" RUN_SUFFIX=""
  compressor_down
}

# --- the replicas benchmark (bench.sh replicas; docs/benchmarks/replicas.md "Replicas") ---
# Two local stacks up at once, each with its own run dir and ports, so their runs can be
# interleaved on a shared host: `primary` (FERRY_REPLICAS=0: MariaDB, one shim, envoy/ferry.yaml;
# .run/bench and the usual bench ports) and `replica` (FERRY_REPLICAS=1: the primary with a
# binary log, a GTID replica with its own shim, envoy/replicas.yaml sending reads there;
# .run/bench-replicas, ports BENCH_REPLICAS_{PORT,ADMIN_PORT,SHIM_PORT,MYSQL_PORT} and
# BENCH_REPLICA_{SHIM,MYSQL}_PORT). Runs on the replica stack are labelled net=loopback-replica.
# replicas_env primary|replica: stack.sh's and run()'s environment for one of them.
replicas_env() {
  export FERRY_SHIMS=1 FERRY_ENVOY_SCENARIO="" FERRY_MYSQL_FLAVOR=mariadb
  if [ "$1" = primary ]; then
    stack_env local
    export FERRY_REPLICAS=0
    NETLABEL=loopback
  else
    BENCH_PORT="${BENCH_REPLICAS_PORT:-28453}" BENCH_ADMIN_PORT="${BENCH_REPLICAS_ADMIN_PORT:-29911}" \
      BENCH_SHIM_PORT="${BENCH_REPLICAS_SHIM_PORT:-28091}" BENCH_MYSQL_PORT="${BENCH_REPLICAS_MYSQL_PORT:-53316}" \
      stack_env local replicas
    export FERRY_REPLICAS=1 FERRY_REPLICA_SHIM_ADDR="127.0.0.1:${BENCH_REPLICA_SHIM_PORT:-28093}" \
      FERRY_REPLICA_MYSQL_PORT="${BENCH_REPLICA_MYSQL_PORT:-53318}" \
      FERRY_REPLICA_MYSQL_SOCKET="$FERRY_RUN_DIR/mysql-replica.sock"
    NETLABEL=loopback-replica
  fi
  # (Before the stack is up, or after it is down, there are no pids: empty.)
  local n p="" s="shim:$FERRY_SHIM_ADDR"
  for n in envoy shim mysql $([ "$1" = primary ] || echo shim-replica mysql-replica); do
    p+="$n:$(cat "$FERRY_RUN_DIR/pids/$n.pid" 2>/dev/null || true) "
  done
  [ "$1" = primary ] || s+=" shim-replica:$FERRY_REPLICA_SHIM_ADDR"
  REPLICAS_PIDS="${p}host:all" REPLICAS_SHIMS=$s
}

replicas_up() {
  trap 'replicas_env primary; stack_down; replicas_env replica; stack_down' EXIT
  replicas_env primary; STACK_LOG=stack-up-primary stack_up
  replicas_env replica
  # The replica keeps its primary's port from its seeding (master.info, line 7): after a
  # change of BENCH_REPLICAS_MYSQL_PORT it is made and seeded anew.
  local mi="$FERRY_RUN_DIR/mysql-replica/master.info"
  if [ -s "$mi" ] && [ "$(sed -n 7p "$mi")" != "$FERRY_MYSQL_PORT" ]; then
    echo "  the replica followed port $(sed -n 7p "$mi"), now $FERRY_MYSQL_PORT: making it anew"
    rm -rf "$FERRY_RUN_DIR/mysql-replica"
  fi
  STACK_LOG=stack-up-replica stack_up
  # The fixtures went in through the primary's binary log: wait until the replica has them.
  local pos root=(mariadb --defaults-file="$FERRY_RUN_DIR/mysql-root.cnf" -N -B)
  pos=$("${root[@]}" --socket="$FERRY_MYSQL_SOCKET" -e 'SELECT @@gtid_binlog_pos')
  [ "$("${root[@]}" --socket="$FERRY_REPLICA_MYSQL_SOCKET" -e "SELECT MASTER_GTID_WAIT('$pos', 600)")" = 0 ] \
    || { echo "the replica did not reach the primary's GTID position $pos" >&2; return 1; }
  echo "  replica caught up at GTID $pos; sbtest rows on the replica: $("${root[@]}" \
    --socket="$FERRY_REPLICA_MYSQL_SOCKET" -e 'SELECT COUNT(*) FROM ferry.sbtest')"
  local pids=() st p
  for st in primary replica; do
    replicas_env "$st"
    for p in $REPLICAS_PIDS; do [ "${p#*:}" = all ] || pids+=("${p#*:}"); done
  done
  prioritize "${pids[@]}"
}

# replicas_run STACK CLIENT VUS: one point-select run on that stack, with the CPU of its
# processes (and the host's), for Ferry which shim answered, and the host's UDP
# receive-buffer drops during the run (HTTP/3 on loopback: Envoy's and k6's sockets).
replicas_run() {
  replicas_env "$1"
  local served=$REPLICAS_SHIMS drops; [ "$2" != mysql ] || served=""
  drops=$(udp_drops)
  CPU_PIDS=$REPLICAS_PIDS SERVED_SHIMS=$served run point-select "$2" "" "$3" "${SWEEP_DURATION:-10s}"
  local f="$OUT/runs/point-select.$2.$NETLABEL.v$3${RUN_SUFFIX:-}.json"
  [ -s "$f" ] || return 0
  python3 - "$f" $(( $(udp_drops) - drops )) <<'PY'
import json, sys
doc = json.load(open(sys.argv[1])); doc["udp_rcvbuf_drops"] = int(sys.argv[2])
json.dump(doc, open(sys.argv[1], "w"))
if int(sys.argv[2]): print(f"  UDP receive-buffer drops (host): {sys.argv[2]}")
PY
}

udp_drops() { awk '/^Udp:/ { n++ } /^Udp:/ && n == 2 { print $6 }' /proc/net/snmp; }

# Every concurrency: the MySQL baseline (on the primary-only stack's MariaDB), then each
# Ferry client on both stacks, which of the two goes first alternating between points.
replicas_bench() {
  local vus client i=0 order st
  for vus in ${SWEEP_VUS:-4 8 16 32 64 100 200}; do
    order="primary replica"; [ $((i % 2)) = 0 ] || order="replica primary"; i=$((i + 1))
    for client in $CLIENTS; do
      if [ "$client" = mysql ]; then replicas_run primary mysql "$vus"; continue; fi
      for st in $order; do replicas_run "$st" "$client" "$vus"; done
    done
  done
}

# replicas_report: OUT/replicas.md, QPS and p95 side by side per concurrency, then CPU
# per call of every process.
replicas_report() {
  python3 - "$OUT" <<'PY' | tee "$OUT/replicas.md"
import glob, json, os, sys
out = sys.argv[1]
runs = {}
for f in glob.glob(os.path.join(out, "runs", "point-select.*.json")):
    d = json.load(open(f)); l = d["labels"]; m = d["metrics"]
    calls = m.get("ferry_calls", {}).get("values", {}).get("count", 0)
    dur = d["state"]["testRunDurationMs"] / 1000
    stack = "replica" if l["net"].endswith("-replica") else "primary"
    runs[(l["client"], stack, l["vus"])] = {
        "qps": calls / dur if dur else 0, "p95": m.get("ferry_ms", {}).get("values", {}).get("p(95)", 0),
        "p50": m.get("ferry_ms", {}).get("values", {}).get("p(50)", 0),
        "errors": m.get("ferry_errors", {}).get("values", {}).get("count", 0), "calls": calls,
        "cpu": d.get("cpu_ms_per_call", {}), "served": d.get("served_by", {}),
        "drops": d.get("udp_rcvbuf_drops")}
vus = sorted({k[2] for k in runs})
clients = [c for c in ("h2", "h3") if any(k[0] == c for k in runs)]
def cell(r): return f"{r['qps']:,.0f} · {r['p95']:.2f}" if r else "–"
print("# Point selects: primary only vs primary + replica\n")
print("QPS · p95 ms per concurrency (VUs). `primary` = FERRY_REPLICAS=0 (one MariaDB, one shim); "
      "`+ replica` = FERRY_REPLICAS=1 (reads to the replica's shim and MariaDB). MySQL+TLS = "
      "the MySQL protocol straight to the primary-only stack's MariaDB. ×QPS = + replica ÷ primary.\n")
hdr = "| VUs | MySQL+TLS |" + "".join(f" {c} primary | {c} + replica | {c} ×QPS |" for c in clients)
print(hdr); print("|" + "---|" * (hdr.count("|") - 1))
for v in vus:
    row = f"| {v} | {cell(runs.get(('mysql', 'primary', v)))} |"
    for c in clients:
        a, b = runs.get((c, "primary", v)), runs.get((c, "replica", v))
        ratio = f"{b['qps'] / a['qps']:.2f}" if a and b and a["qps"] else "–"
        row += f" {cell(a)} | {cell(b)} | {ratio} |"
    print(row)
errs = [(k, r["errors"]) for k, r in sorted(runs.items()) if r["errors"]]
print("\nErrors: " + (", ".join(f"{k[0]} {k[1]} {k[2]} VUs: {e}" for k, e in errs) if errs else "none") + ".\n")
print("## CPU per call (ms, utime + stime ÷ measured calls)\n")
print("`host` = every core's busy time (all processes, k6 included) ÷ calls; `rest` = host − the "
      "stack's processes (mostly k6); `cores` = host CPU × QPS (2 = both cores busy); `replica "
      "answered` = the replica shim's share of the Execute answers; `UDP drops` = the host's UDP "
      "receive-buffer drops during the run (/proc/net/snmp RcvbufErrors).\n")
names = ["envoy", "shim", "shim-replica", "mysql", "mysql-replica"]
print("| client | stack | VUs | QPS | " + " | ".join(names) + " | host | rest | cores | replica answered | UDP drops |")
print("|" + "---|" * (len(names) + 9))
for c in ["mysql"] + clients:
    for st in ("primary", "replica"):
        for v in vus:
            r = runs.get((c, st, v))
            if not r or not r["cpu"]:
                continue
            cpu = r["cpu"]
            own = sum(cpu.get(n, 0) for n in names)
            vals = " | ".join(f"{cpu[n]:.3f}" if n in cpu else "–" for n in names)
            s = r["served"]; tot = sum(s.values())
            share = f"{100 * s.get('shim-replica', 0) / tot:.0f} %" if tot and st == "replica" else "–"
            host = cpu.get("host", 0)
            print(f"| {c} | {st} | {v} | {r['qps']:,.0f} | {vals} | {host:.3f} | {host - own:.3f} | "
                  f"{host * r['qps'] / 1000:.2f} | {share} | {'–' if r['drops'] is None else r['drops']} |")
PY
}

# --- the cost benchmark (bench.sh cost; docs/benchmarks/cost.md "Cost per query") ---
# What a query costs each process, Ferry's four ways against the MySQL protocol, on one local
# stack: warm SELECT 1 at COST_VUS and at 1 VU, then the large SELECT, in ROUNDS interleaved
# rounds (the client order reversed every other round, so drift hits every client alike).
# Ferry's rows all use our extension's Go client (EXT=1: HTTP/2 x/net/http2, HTTP/3 quic-go),
# Connect unary JSON or proto, so they differ only in protocol and format.
COST_CLIENTS="mysql h2:json h2:proto h3:json h3:proto"

# cost_run WORKLOAD CLIENT[:FORMAT] VUS ITER_OR_DURATION
cost_run() {
  local c=${2%%:*} f=${2#*:}
  if [ "$c" = mysql ]; then run "$1" mysql "" "$3" "$4"; return; fi
  run "$1" "$c" "$f" "$3" "$4" -e EXT=1 -e FORMAT="$f"
}

cost_bench() {
  local round order cf vus all_vus="${COST_VUS:-16}"
  [ "$all_vus" = 1 ] || all_vus+=" 1"
  prioritize "$(pid_of envoy)" "$(pid_of shim)" "$(pid_of mysql)"
  CPU_PIDS="envoy:$(pid_of envoy) shim:$(pid_of shim) mysql:$(pid_of mysql) host:all irq:irq"
  for round in $(seq "${ROUNDS:-2}"); do
    RUN_SUFFIX=".r$round" order=$COST_CLIENTS
    [ $((round % 2)) = 1 ] || order=$(tr ' ' '\n' <<<"$COST_CLIENTS" | tac | tr '\n' ' ')
    echo "== round $round: $order"
    for vus in $all_vus; do
      for cf in $order; do cost_run warm-select "$cf" "$vus" "${COST_DURATION:-10s}"; done
    done
    for cf in $order; do cost_run large-select "$cf" 1 "${COST_LARGE_ITER:-10}"; done
  done
  CPU_PIDS="" RUN_SUFFIX=""
}

# cost_report: OUT/cost.md — the three tables and the goals, from OUT/runs (rounds merged).
cost_report() {
  python3 - "$OUT" "${COST_VUS:-16}" <<'PY' | tee "$OUT/cost.md"
import glob, json, os, statistics, sys
out, hi = sys.argv[1], int(sys.argv[2])
PROCS = ["envoy", "shim", "mysql", "k6", "irq"]
ORDER = [("mysql", ""), ("h2", "json"), ("h2", "proto"), ("h3", "json"), ("h3", "proto")]
NAME = {("mysql", ""): "MySQL+TLS (go-sql-driver)", ("h2", "json"): "HTTP/2 Connect JSON (x/net/http2)",
        ("h2", "proto"): "HTTP/2 Connect proto (x/net/http2)", ("h3", "json"): "HTTP/3 Connect JSON (quic-go)",
        ("h3", "proto"): "HTTP/3 Connect proto (quic-go)"}
groups = {}
for f in sorted(glob.glob(os.path.join(out, "runs", "*.json"))):
    d = json.load(open(f)); l = d.get("labels", {}); m = d["metrics"]
    if l.get("workload") not in ("warm-select", "large-select") or "cpu_ms_per_call" not in d:
        continue
    v = lambda k, s: m.get(k, {}).get("values", {}).get(s, 0)
    calls = v("ferry_calls", "count")
    groups.setdefault((l["workload"], l["client"], l["variant"], l["vus"]), []).append({
        "calls": calls, "dur": d["state"]["testRunDurationMs"] / 1000, "errors": v("ferry_errors", "count"),
        "p50": v("ferry_ms", "p(50)"), "p99": v("ferry_ms", "p(99)"), "recv": v("wire_recv", "count"),
        "cpu": d["cpu_ms_per_call"]})

def merged(w, c, f, vus):
    rs = groups.get((w, c, f, vus))
    if not rs:
        return None
    calls = sum(r["calls"] for r in rs) or 1
    cpu = {}
    for r in rs:  # weighted by calls = all rounds' CPU ÷ all rounds' calls
        for k, x in r["cpu"].items():
            cpu[k] = cpu.get(k, 0) + x * r["calls"] / calls
    cpu["other"] = cpu.get("host", 0) - sum(cpu.get(p, 0) for p in PROCS)
    qps = [r["calls"] / r["dur"] for r in rs if r["dur"]]
    return {"n": len(rs), "calls": calls, "errors": sum(r["errors"] for r in rs),
            "qps": sum(r["calls"] for r in rs) / (sum(r["dur"] for r in rs) or 1), "qps_r": qps,
            "p50": statistics.median(r["p50"] for r in rs), "p50_r": [r["p50"] for r in rs],
            "p99": statistics.median(r["p99"] for r in rs), "recv": sum(r["recv"] for r in rs) / calls, "cpu": cpu}

def spread(xs, fmt):
    return "" if len(xs) < 2 else f" ({fmt(min(xs))}–{fmt(max(xs))})"

def us(r, k):  # µs per request
    return f"{1000 * r['cpu'][k]:.0f}" if k in r["cpu"] else "–"

goals = []  # (goal, row, measured, met)
refs = []  # the same figures from k6's clients, printed after the goals (the client is their bottleneck)
def goal(text, row, measured, ok):
    goals.append((text, row, measured, "**met**" if ok else "**missed**"))

rounds = max((len(v) for v in groups.values()), default=0)
print("# Cost per query\n")
print(f"Local stack, one warm connection per client; {rounds} interleaved round(s) merged: QPS = all calls ÷ all "
      "run time, p50/p99 = the median of the rounds' (range of the rounds in brackets), CPU = all rounds' "
      "utime+stime (/proc/<pid>/stat) ÷ all calls. `k6` = the k6 process itself (its children's time "
      "in bench.sh), `irq` = the host's interrupt + softirq time (/proc/stat; loopback's packet receive "
      "work, charged to no process), `other` = the whole host's busy time − Envoy, shim, MariaDB, k6 "
      "and irq: whatever else ran on the shared cores (≈ 0 on a quiet host). Ferry's rows all use our extension's Go "
      "client (HTTP/2: x/net/http2; HTTP/3: quic-go); MySQL+TLS = go-sql-driver/mysql over TLS 1.3 "
      "straight to the same MariaDB.\n")

print(f"## Warm `SELECT 1`, {hi} clients\n")
print("| client | QPS | ×MySQL QPS | p50 ms | p99 ms | Envoy µs | shim µs | MariaDB µs | k6 µs | irq µs | other µs | Envoy+shim µs | errors |")
print("|" + "---|" * 13)
base = merged("warm-select", "mysql", "", hi)
for c, f in ORDER:
    r = merged("warm-select", c, f, hi)
    if not r:
        continue
    x = r["qps"] / base["qps"] if base and base["qps"] else None
    es = 1000 * (r["cpu"].get("envoy", 0) + r["cpu"].get("shim", 0))
    print(f"| {NAME[(c, f)]} | {r['qps']:,.0f}{spread(r['qps_r'], lambda v: f'{v:,.0f}')} | "
          f"{'–' if x is None else f'{x:.2f}'} | {r['p50']:.3f}{spread(r['p50_r'], lambda v: f'{v:.3f}')} | "
          f"{r['p99']:.2f} | {us(r, 'envoy')} | {us(r, 'shim')} | {us(r, 'mysql')} | {us(r, 'k6')} | {us(r, 'irq')} | "
          f"{us(r, 'other')} | {'–' if c == 'mysql' else f'{es:.0f}'} | {r['errors']} |")

print("\n## Warm `SELECT 1`, 1 client (latency)\n")
print("| client | p50 ms | p99 ms | added p50 µs (− MySQL p50) | QPS | Envoy+shim µs | k6 µs | errors |")
print("|" + "---|" * 8)
base1 = merged("warm-select", "mysql", "", 1)
for c, f in ORDER:
    r = merged("warm-select", c, f, 1)
    if not r:
        continue
    add = 1000 * (r["p50"] - base1["p50"]) if base1 and c != "mysql" else None
    es = 1000 * (r["cpu"].get("envoy", 0) + r["cpu"].get("shim", 0))
    print(f"| {NAME[(c, f)]} | {r['p50']:.3f}{spread(r['p50_r'], lambda v: f'{v:.3f}')} | {r['p99']:.3f} | "
          f"{'–' if add is None else f'{add:.0f}'} | {r['qps']:,.0f} | {'–' if c == 'mysql' else f'{es:.0f}'} | "
          f"{us(r, 'k6')} | {r['errors']} |")

print("\n## Large SELECT (`SELECT * FROM large`, 10,000 × 11), 1 client\n")
print("MB = 10⁶ bytes received by the client at the socket per call (TLS records / QUIC payload: each "
      "format's own answer size); MB/s = that ÷ p50; CPU = ms per MB received, and Envoy+shim also per call.\n")
print("| client | p50 ms | ×MySQL | MB per call | MB/s | Envoy ms/MB | shim ms/MB | MariaDB ms/MB | k6 ms/MB | irq ms/MB | other ms/MB | Envoy+shim ms/call | calls | errors |")
print("|" + "---|" * 14)
lb = merged("large-select", "mysql", "", 1)
large = {}
for c, f in ORDER:
    r = merged("large-select", c, f, 1)
    if not r:
        continue
    large[(c, f)] = r
    mb = r["recv"] / 1e6
    x = r["p50"] / lb["p50"] if lb and lb["p50"] else None
    per = lambda k: f"{r['cpu'][k] / mb:.2f}" if mb and k in r["cpu"] else "–"
    es = r["cpu"].get("envoy", 0) + r["cpu"].get("shim", 0)
    print(f"| {NAME[(c, f)]} | {r['p50']:,.1f}{spread(r['p50_r'], lambda v: f'{v:,.1f}')} | "
          f"{'–' if x is None else f'{x:.2f}'} | {mb:.1f} | {mb / (r['p50'] / 1000) if r['p50'] else 0:,.0f} | "
          f"{per('envoy')} | {per('shim')} | {per('mysql')} | {per('k6')} | {per('irq')} | {per('other')} | "
          f"{'–' if c == 'mysql' else f'{es:.1f}'} | {r['calls']} | {r['errors']} |")
    if c == "h2" and x is not None:  # k6's Go clients both ways (for reference: the client's figure)
        refs.append(("large SELECT over HTTP/2 ÷ MySQL+TLS with k6's Go clients (for reference)",
                     NAME[(c, f)], f"{x:.2f}×", "–"))

# The other goals' figures come from the side benches of the same run (their .json).
def side(name):
    path = os.path.join(out, name + ".json")
    return json.load(open(path)) if os.path.exists(path) else None
bd = side("breakdown")
if bd:
    for proto, pname in (("h2", "HTTP/2"), ("h3", "HTTP/3")):
        floor = bd.get("router-only/" + proto)
        for variant, fname in (("full", "Connect JSON"), ("full-proto", "Connect proto"), ("native", "Connect proto, native filter (option)")):
            r = bd.get(f"{variant}/{proto}")
            if not (r and floor):
                continue
            qx, ex = r["qps"] / floor["qps"], r["envoy_us"] / floor["envoy_us"]
            goal(f"warm SELECT 1, {pname}: req/s ≥ 0.8× the bare {pname} router (h2load / ferry-h3 --load)",
                 fname, f"{qx:.2f}× ({r['qps']:,.0f} vs {floor['qps']:,.0f})", qx >= 0.8)
            goal(f"warm SELECT 1, {pname}: Envoy CPU ≤ 1.25× the bare router's", fname,
                 f"{ex:.2f}× ({r['envoy_us']:.0f} vs {floor['envoy_us']:.0f} µs)", ex <= 1.25)
la = side("large-answer")
if la:
    for f, lim in (("json", 2.0), ("proto", 1.2)):
        q = la[f]
        goal(f"large SELECT over HTTP/2 ≤ {lim}× MySQL+TLS (p50; Rust clients: reqwest vs mysql_async)",
             f"Connect {f}", f"{q['h2_x_mysql']:.2f}× ({q['h2_p50_ms']:.0f} vs {la['mysql_p50_ms']:.0f} ms)",
             q["h2_x_mysql"] <= lim)
    for f in ("json", "proto"):
        q = la[f]
        goal("large SELECT over HTTP/3 ≤ 1.5× HTTP/2 (p50; quinn vs reqwest: clients that drop nothing)",
             f"Connect {f}", f"{q['h3_x_h2']:.2f}× ({q['h3_p50_ms']:.0f} vs {q['h2_p50_ms']:.0f} ms; "
             f"{q['udp_drops']} UDP drops)", q["h3_x_h2"] <= 1.5)
for f in ("json", "proto"):  # beside it, k6's quic-go (it drops Envoy's bursts: the client's figure)
    a, b = large.get(("h2", f)), large.get(("h3", f))
    if a and b and a["p50"]:
        refs.append(("large SELECT over HTTP/3 ÷ HTTP/2 with k6's quic-go and Go HTTP/2 (for reference)",
                     f"Connect {f}", f"{b['p50'] / a['p50']:.2f}×", "–"))
ps = side("pssim")
if ps:
    goal(f"req/s ≥ 1.5× ps-http-sim's at {ps.get('vus', 32)} clients carrying sessions (Ferry with TLS)",
         "HTTP/2 Connect JSON", f"{ps['ratio']:.2f}× ({ps['ferry_qps']:,.0f} vs {ps['pssim_qps']:,.0f})",
         ps["ratio"] >= 1.5)
else:
    goals.append(("req/s ≥ 1.5× ps-http-sim's", "–", "not run (PSSIM_ADDR unset)", "–"))

print("\n## Goals (issue 30): every figure against its floor from this run\n")
print("| goal | row | measured | |")
print("|---|---|---|---|")
for g in goals + refs:
    print("| " + " | ".join(g) + " |")
errs = sum(r["errors"] for rs in groups.values() for r in rs)
print(f"\nErrors in all runs: {errs}.")
PY
}

# --- the batch benchmark (bench.sh batch; docs/benchmarks/batches.md) ---
# batch_report: p50/p99 per run, round trips (p50 ÷ the far shape's RTT), CPU per call.
batch_report() {
  python3 - "$OUT/runs" <<'PY'
import json, glob, os, sys
rows = []
for path in sorted(glob.glob(os.path.join(sys.argv[1], "batch.*.json"))):
    d = json.load(open(path)); l = d["labels"]; m = d["metrics"]
    lat = m.get("ferry_ms", {}).get("values", {})
    p50, p99 = lat.get("p(50)", 0), lat.get("p(99)", 0)
    calls = m.get("ferry_calls", {}).get("values", {}).get("count", 0)
    errs = m.get("ferry_errors", {}).get("values", {}).get("count", 0)
    cpu = d.get("cpu_ms_per_call", {})
    rtts = p50 / l["rtt_ms"] if l["net"] == "far" and l["rtt_ms"] else None
    rows.append((l["net"], l["variant"], l["client"], os.path.basename(path), calls, errs, p50, p99, rtts, cpu))
print("| network | mode | client | calls | errors | p50 ms | p99 ms | round trips (p50 ÷ RTT) | CPU µs/call envoy / shim / mysql |")
print("|---|---|---|---|---|---|---|---|---|")
for net, mode, client, name, calls, errs, p50, p99, rtts, cpu in rows:
    c = " / ".join(f"{cpu[k] * 1000:.0f}" for k in ("envoy", "shim", "mysql") if k in cpu) or "-"
    r = f"{rtts:.2f}" if rtts is not None else "-"
    print(f"| {net} | {mode} | {client} | {calls} | {errs} | {p50:.1f} | {p99:.1f} | {r} | {c} |")
PY
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
    # Every codec each way, Connect JSON and proto (one call each; k6/compress-smoke.js).
    for client in ${CLIENTS/mysql/}; do run compress-smoke "$client" "" 1 1; done
    # ExecuteBatch and an Idempotency-Key (k6/batch.js; make bench-batch measures them).
    for client in ${CLIENTS/mysql/}; do run batch "$client" batch 1 2; run batch "$client" keyed 1 2; done
    # The cost run's side benches, briefly, so they keep working: Envoy's variants (HTTP/2, HTTP/3),
    # the shim's socket vs TCP hop to MariaDB, the large answer with Rust clients.
    # (HTTP/3 and the large answer with ferry-h3: the e2e tests' debug build when there is no release one)
    h3_bin="$ROOT/target/release/ferry-h3"
    [ -x "$h3_bin" ] || h3_bin="$ROOT/target/debug/ferry-h3"
    BREAKDOWN_N=200 BREAKDOWN_ROUNDS=1 FERRY_H3_BIN="$h3_bin" "$LT/envoy-breakdown.sh" "$OUT/breakdown.md" \
      2>"$OUT/logs/breakdown.log" || { cat "$OUT/logs/breakdown.log" >&2; exit 1; }
    LARGE_N=1 LARGE_ROUNDS=1 FERRY_H3_BIN="$h3_bin" "$LT/large-answer.sh" "$OUT/large-answer.md" \
      2>"$OUT/logs/large-answer.log" || { cat "$OUT/logs/large-answer.log" >&2; exit 1; }
    TRANSPORT_N=200 TRANSPORT_ROUNDS=1 TRANSPORT_LARGE_N=1 "$LT/shim-transport.sh" "$OUT/transport.md" \
      2>"$OUT/logs/transport.log" || { cat "$OUT/logs/transport.log" >&2; exit 1; }
    echo "  envoy-breakdown.sh, shim-transport.sh, large-answer.sh: ok"
    finish ;;
  full)
    prepare full; use_ns
    # CPU=1: CPU per call of Envoy, the shim and MariaDB next to each run.
    [ "${CPU:-0}" = 1 ] && CPU_PIDS="envoy:$(pid_of envoy) shim:$(pid_of shim) mysql:$(pid_of mysql)"
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
      drops=$(awk '/^Udp:/ { n++ } /^Udp:/ && n == 2 { print $6 }' /proc/net/snmp)
      run sessions "$client" "" "${SESSIONS:-5000}" "${SESSIONS_ITER:-20}"
      echo "  UDP receive-buffer drops during the run (host-wide): $(( $(awk '/^Udp:/ { n++ } /^Udp:/ && n == 2 { print $6 }' /proc/net/snmp) - drops ))" \
        | tee -a "$OUT/runs/sessions.$client.mariadb.txt"
      "${root_sql[@]}" -e "SHOW GLOBAL STATUS WHERE Variable_name IN
        ('Max_used_connections', 'Threads_connected', 'Connection_errors_max_connections')" \
        | tee "$OUT/runs/sessions.$client.mariadb.txt" | sed 's/^/  mariadb: /'
    done
    "${root_sql[@]}" -e "SET GLOBAL max_connections = 500"
    finish || true ;;
  serverless)
    # Short-lived sessions that SET a variable and a setting, then read them (k6/serverless.js),
    # against the same statements without state, and sessions that all set the same settings
    # (SERVERLESS_MODES, default plain state settings): HTTP/2 and HTTP/3, SERVERLESS_VUS at once;
    # MariaDB's connection counters and SET count after each. The state travels in the session
    # (no pin). The shim's settings pool is on (FERRY_SETTINGS_POOL_MAX=0 in the environment: off).
    prepare serverless; use_local; shape loopback
    root_sql=(mariadb --defaults-file="$FERRY_RUN_DIR/mysql-root.cnf" --socket="$FERRY_MYSQL_SOCKET" -N -B)
    CPU_PIDS="envoy:$(pid_of envoy) shim:$(pid_of shim) mysql:$(pid_of mysql)"
    for client in h2 h3; do
      for mode in ${SERVERLESS_MODES:-plain state settings}; do
        "${root_sql[@]}" -e "FLUSH STATUS"
        run serverless "$client" "$mode" "${SERVERLESS_VUS:-20}" "${SERVERLESS_ITER:-50}"
        "${root_sql[@]}" -e "SHOW GLOBAL STATUS WHERE Variable_name IN ('Max_used_connections', 'Threads_connected', 'Com_set_option')" \
          | tee "$OUT/runs/serverless.$client.$mode.mariadb.txt" | sed 's/^/  mariadb: /'
      done
    done
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
  compression)
    # Far shape (root, namespaces) with MySQL 8.0 beside MariaDB; then loopback costs (CPU,
    # paired wall time) and Envoy's compressor (far and loopback). PARTS picks a subset.
    prepare compression; use_ns
    RUN_NICE="${RUN_NICE--10}"
    trap 'compressor_down; mysql80 down >/dev/null 2>&1; stack_down; "$LT/net.sh" down' EXIT
    for part in ${PARTS:-far far-envoy loopback pair envoy}; do
      case $part in
        far) mysql80_up; LOSS="${FAR_LOSS:-0}" shape far; compression_far ;;
        far-envoy) LOSS="${FAR_LOSS:-0}" shape far; compression_far_envoy ;;
        loopback) shape loopback; compression_loopback ;;
        pair) shape loopback; compression_pair ;;
        pair-near) shape near; compression_pair ;;
        envoy) shape loopback; compression_envoy ;;
        *) echo "unknown part $part (far far-envoy loopback pair pair-near envoy)" >&2; exit 2 ;;
      esac
    done
    finish || true ;;
  replicas)
    # issue 10: primary only vs primary + replica, point selects at SWEEP_VUS (loopback).
    prepare replicas
    RUN_NICE="${RUN_NICE--10}"
    replicas_up; replicas_env primary; shape loopback
    replicas_bench
    replicas_report
    finish || true ;;
  cost)
    # issues 11, 30: CPU per request of every process and latency, MySQL+TLS vs Ferry's four ways (loopback), and every goal against its floor.
    prepare cost
    RUN_NICE="${RUN_NICE--10}"
    use_local; shape loopback
    cost_bench
    # side NAME SCRIPT: one side bench, its table printed; a failure fails the run after the report.
    failed=""
    side() {
      if ${RUN_NICE:+nice -n "$RUN_NICE"} "$LT/$2" "$OUT/$1.md" 2> >(tee "$OUT/logs/$1.log" >&2); then
        cat "$OUT/$1.md"
      else
        failed+=" $1"
      fi
    }
    # Where Envoy's part goes, and its floor: the shipped config against variants without the
    # access log, without the Ferry filter, with the native filter, and with nothing but the
    # router, over HTTP/2 (h2load) and HTTP/3 (ferry-h3 --load).
    [ "${COST_BREAKDOWN:-1}" = 0 ] || side breakdown envoy-breakdown.sh
    # The shim's hop to MariaDB: its unix socket vs TCP, straight at two extra shims.
    [ "${COST_TRANSPORT:-1}" = 0 ] || side transport shim-transport.sh
    # The large SELECT with Rust clients that are not the bottleneck: MySQL+TLS, HTTP/2, HTTP/3.
    [ "${COST_LARGE_ANSWER:-1}" = 0 ] || side large-answer large-answer.sh
    # PlanetScale's simulator beside Ferry, when one runs (PSSIM_ADDR: docs/benchmarks/ps-http-sim.md),
    # or started here from PSSIM_BIN on BENCH_PSSIM_PORT against the stack's MariaDB.
    if [ -n "${PSSIM_BIN:-}" ] && [ -z "${PSSIM_ADDR:-}" ]; then
      export PSSIM_ADDR="127.0.0.1:${BENCH_PSSIM_PORT:-28480}"
      "$PSSIM_BIN" -listen-addr=127.0.0.1 -listen-port="${PSSIM_ADDR##*:}" -mysql-addr=127.0.0.1 \
        -mysql-port="$FERRY_MYSQL_PORT" -mysql-dbname="${FERRY_MYSQL_DATABASE:-ferry}" -log-level=warn \
        >"$OUT/logs/ps-http-sim.log" 2>&1 &
      pssim_pid=$!
      trap 'kill "$pssim_pid" 2>/dev/null || true; stack_down' EXIT
      for _ in $(seq 50); do curl -s -o /dev/null "http://$PSSIM_ADDR/" && break; sleep 0.1; done
      export PSSIM_PID=$pssim_pid
    fi
    [ -z "${PSSIM_ADDR:-}" ] || PSSIM_DIR="$OUT/pssim" side pssim pssim.sh
    cost_report
    [ -z "$failed" ] || { echo "side bench(es) failed:$failed (see $OUT/logs)" >&2; exit 1; }
    finish || true ;;
  batch)
    prepare batch; use_ns
    shape far
    for client in mysql h2 h3; do run batch "$client" requests 1 "${BATCH_ITER:-20}"; done
    for client in h2 h3; do run batch "$client" batch 1 "${BATCH_ITER:-20}"; done
    shape loopback
    CPU_PIDS="envoy:$(pid_of envoy) shim:$(pid_of shim) mysql:$(pid_of mysql)"
    for round in 1 2; do
      for mode in one keyed; do RUN_SUFFIX=".r$round" run batch h2 "$mode" 4 "${BATCH_LOOP:-10s}"; done
    done
    batch_report | tee "$OUT/batches.md"
    finish || true ;;
  report) "$LT/bin/report" "${2:?results dir}" ;;
  cost-report) OUT="${2:?results dir}"; cost_report ;;
  down)
    stack_env ns; compressor_down; mysql80 down || true; stack_down
    stack_env local; compressor_down; stack_down; "$LT/net.sh" down
    replicas_env replica; stack_down ;;
  *) sed -n '2,/^set -euo/p' "$0" | sed '$d' >&2; exit 2 ;;
esac
