#!/usr/bin/env bash
# Ferry in front of Vitess (issue 27; docs/benchmarks/vitess.md): Ferry → vtgate against the
# MySQL protocol + TLS straight to the same vtgate, in one run.
#   vitess.sh run          (default) start a Vitess cluster (scripts/vitess.sh) and a gateway in
#                          front of its vtgate (scripts/stack.sh gateway), seed a sharded table,
#                          then: point selects by primary key (one shard) and scatter reads (every
#                          shard), MySQL+TLS vs Ferry HTTP/2 vs HTTP/3, at 1 and 32 clients, ROUNDS
#                          interleaved rounds, CPU per query of every process (Envoy, ferry-shim,
#                          vtcombo, mysqld, k6); then the cold start on the far shape (≈41 ms RTT,
#                          20 Mbit/s). Stops everything on exit. Results:
#                          loadtest/results/<UTC timestamp>-vitess/vitess.md (+ results.md, charts/)
#   vitess.sh report DIR   re-render DIR/vitess.md and DIR/results.md from DIR/runs
#   vitess.sh down         stop what an interrupted run left (gateway, cluster, namespaces)
# The servers run in a network namespace of their own (fvit-srv, 10.78.0.1) and the far-shape
# client in another (fvit-cli, 10.78.0.2); the loopback matrix runs its k6 inside fvit-srv on
# 127.0.0.1. Needs root (namespaces, iptables; the cluster itself runs as FERRY_VITESS_USER).
# BENCH_VITESS_NS=0: no namespaces, everything on the host's 127.0.0.1, no far part.
#
# Knobs (environment), with their defaults:
#   BENCH_VITESS_DIR=.run/bench-vitess   run dir (FERRY_RUN_DIR: certs, logs, pids, vitess/)
#   BENCH_VITESS_BASE_PORT=43420         the cluster's base port P (vtgate's MySQL port: P+3)
#   BENCH_VITESS_GW_PORT=48473           the gateway's HTTPS + HTTP/3 port
#   BENCH_VITESS_ADMIN_PORT=49932        its Envoy admin port
#   BENCH_VITESS_SHIM_PORT=48111         its shim (h2c on 127.0.0.1)
#   BENCH_VITESS_NS=1  BENCH_VITESS_SUBNET=10.78.0   namespaces fvit-srv / fvit-cli, queue 8
#   PARTS="matrix far"   QUERIES="point scatter"   CLIENTS="mysql h2 h3"   VUS_LIST="1 32"
#   PACED=1 (at 1 client, also MySQL+TLS held to the QPS Ferry HTTP/2 reached: vtgate's and mysqld's
#   CPU per query at the same rate)   ROUNDS=3  RUN_DURATION=8s (per matrix run)   COLD_ROUNDS=2  COLD_ITER=10 (far cold starts per
#   variant and round)   ROWS=10000  KEYS=1000 (vt_bench: k = id % KEYS, a scatter read returns
#   ROWS/KEYS rows)   RUN_NICE=-10 (the stack's threads and k6; "" = leave them)
#   BENCH_VITESS_FLAGS: vtcombo's pool flags (scripts/vitess.sh's FERRY_VITESS_FLAGS default);
#   vtgate's TLS flags are added to them. FERRY_SHIM_BIN, FERRY_WASM, FERRY_MYSQL8_HOME,
#   FERRY_VITESS_HOME as in scripts/env.sh and scripts/vitess.sh (`make build` first).
set -euo pipefail
LT="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(dirname "$LT")"
source "$LT/lib/cpu.sh"
source "$LT/lib/rtt.sh"
# rtt: median TCP connect time to vtgate's MySQL port from the client side, in ms.
rtt() { tcp_rtt_ms "$HOST" "$VTGATE_PORT"; }
PATH="$PATH:/usr/sbin:/sbin:/usr/local/go/bin"
export K6_NO_USAGE_REPORT=true

DIR="${BENCH_VITESS_DIR:-$ROOT/.run/bench-vitess}"
case "$DIR" in /*) ;; *) DIR="$ROOT/$DIR" ;; esac
BASE="${BENCH_VITESS_BASE_PORT:-43420}" VTGATE_PORT=$((${BENCH_VITESS_BASE_PORT:-43420} + 3))
GW_PORT="${BENCH_VITESS_GW_PORT:-48473}" ADMIN_PORT="${BENCH_VITESS_ADMIN_PORT:-49932}"
SHIM_PORT="${BENCH_VITESS_SHIM_PORT:-48111}"
USE_NS="${BENCH_VITESS_NS:-1}" SUBNET="${BENCH_VITESS_SUBNET:-10.78.0}"
NS_S=fvit-srv NS_C=fvit-cli VS=fvsrv0 VC=fvcli0 Q=8 SRV_IP="$SUBNET.1"
ROWS="${ROWS:-10000}" KEYS="${KEYS:-1000}"
RUN_NICE="${RUN_NICE--10}"
POOL_FLAGS="${BENCH_VITESS_FLAGS:---queryserver-config-pool-size 16 --queryserver-config-stream-pool-size 16 --queryserver-config-transaction-cap 32}"
CA="$DIR/certs/ca.pem"

SRV_NS=() CLI_NS=()
if [ "$USE_NS" = 1 ]; then SRV_NS=(ip netns exec "$NS_S"); fi

# --- the stack: every script gets the same run dir and ports ---
stack_env() {
  export FERRY_RUN_DIR="$DIR" FERRY_VITESS_PORT="$BASE" FERRY_VITESS_MYSQL_PORT="$VTGATE_PORT"
  export FERRY_PORT="$GW_PORT" FERRY_ADMIN_PORT="$ADMIN_PORT" FERRY_SHIM_ADDR="127.0.0.1:$SHIM_PORT"
  export FERRY_MYSQL_HOST=127.0.0.1 FERRY_MYSQL_PORT="$VTGATE_PORT" FERRY_MYSQL_TRANSPORT=tcp FERRY_SHIM_UNIX=""
  export FERRY_SESSION_KEYS_FILE="$DIR/certs/session.keys" FERRY_EARLY_DATA=true
  local all=""
  if [ "$USE_NS" = 1 ]; then export FERRY_HOST=0.0.0.0 FERRY_CERT_EXTRA_SAN="IP:$SRV_IP"; all=" --mysql-server-bind-address 0.0.0.0"
  else export FERRY_HOST=127.0.0.1; fi
  # vtgate speaks TLS 1.3 with the gateway's own certificate (the dev CA's), so the baseline and
  # Ferry present the same certificate; in the namespace vtgate's MySQL port listens on every
  # address (the far client comes from $SUBNET.2). The shim dials it on 127.0.0.1: no TLS
  # (FERRY_MYSQL_TLS unset = disabled for a loopback host), as the other benches' shim has
  # MariaDB's socket.
  local tls="$DIR/vitess/tls"
  export FERRY_VITESS_FLAGS="$POOL_FLAGS --mysql-server-ssl-cert $tls/server.pem --mysql-server-ssl-key $tls/server.key --mysql-server-tls-min-version TLSv1.3$all"
}

up() {
  mkdir -p "$DIR"
  # The dev CA and the gateway's certificate; with the namespaces it must name $SRV_IP too.
  if [ -n "${FERRY_CERT_EXTRA_SAN:-}" ] && [ -s "$DIR/certs/server.pem" ] \
    && ! openssl x509 -noout -ext subjectAltName -in "$DIR/certs/server.pem" 2>/dev/null | grep -q "IP Address:$SRV_IP"; then
    rm -f "$DIR/certs/server.pem"
  fi
  "$ROOT/scripts/dev-cert.sh" >/dev/null
  # vtgate's copy (the cluster runs as another OS user; vitess.sh chowns its directory).
  mkdir -p "$DIR/vitess/tls"
  cp "$DIR/certs/server.pem" "$DIR/vitess/tls/server.pem"
  (umask 077 && cp "$DIR/certs/server.key" "$DIR/vitess/tls/server.key")
  "${SRV_NS[@]}" "$ROOT/scripts/vitess.sh" up >"$OUT/logs/vitess-up.log" 2>&1 || { cat "$OUT/logs/vitess-up.log" >&2; return 1; }
  sed 's/^/  /' "$OUT/logs/vitess-up.log"
  seed
  "${SRV_NS[@]}" "$ROOT/scripts/stack.sh" gateway >"$OUT/logs/gateway-up.log" 2>&1 || { cat "$OUT/logs/gateway-up.log" >&2; return 1; }
  resumption
  echo "  gateway: https://${FERRY_HOST:-127.0.0.1}:$GW_PORT (shim 127.0.0.1:$SHIM_PORT → vtgate 127.0.0.1:$VTGATE_PORT)"
  check
}

down() {
  "${SRV_NS[@]}" "$ROOT/scripts/stack.sh" down >/dev/null 2>&1 || true
  "${SRV_NS[@]}" "$ROOT/scripts/vitess.sh" down >/dev/null 2>&1 || true
  [ "$USE_NS" != 1 ] || net_down
}

vsql() { "${SRV_NS[@]}" "$ROOT/scripts/vitess.sh" sql "$@"; }

# seed: vt_bench in the sharded keyspace, primary vindex hash(id), ROWS rows (k = id % KEYS).
seed() {
  vsql ferry -e "DROP TABLE IF EXISTS vt_bench;
    CREATE TABLE vt_bench (id BIGINT NOT NULL PRIMARY KEY, k INT NOT NULL, c CHAR(120) NOT NULL,
      pad CHAR(60) NOT NULL, KEY k_idx (k));
    ALTER VSCHEMA ON vt_bench ADD VINDEX hash(id);"
  python3 - "$ROWS" "$KEYS" <<'PY' | vsql ferry
import random, sys
rows, keys = int(sys.argv[1]), int(sys.argv[2])
rnd = random.Random(27)
digits = lambda n: "-".join("".join(rnd.choice("0123456789") for _ in range(11)) for _ in range(n))
for start in range(1, rows + 1, 500):
    vals = ",".join(f"({i},{i % keys},'{digits(10)}','{digits(5)}')" for i in range(start, min(start + 500, rows + 1)))
    print(f"INSERT INTO vt_bench (id, k, c, pad) VALUES {vals};")
PY
  local total s1 s2
  total=$(vsql -N ferry -e "SELECT COUNT(*) FROM vt_bench")
  s1=$(vsql -N -e 'USE `ferry:-80`; SELECT COUNT(*) FROM vt_bench')
  s2=$(vsql -N -e 'USE `ferry:80-`; SELECT COUNT(*) FROM vt_bench')
  echo "  vt_bench: $total rows (shard -80: $s1, 80-: $s2)"
  [ "$total" = "$ROWS" ] || { echo "seeding vt_bench failed" >&2; return 1; }
  # vtgate's plans for the two queries: a route to one shard by the vindex, and a scatter.
  { echo "-- point"; vsql ferry -e "VEXPLAIN PLAN SELECT c FROM vt_bench WHERE id=42"
    echo "-- scatter"; vsql ferry -e "VEXPLAIN PLAN SELECT id, c FROM vt_bench WHERE k=42"; } >"$OUT/runs/vexplain.txt" 2>&1 || true
  grep -oE '"(Variant|Opcode)": *"[A-Za-z]+"' "$OUT/runs/vexplain.txt" | tr '\n' ' ' | sed 's/^/  plans: /; s/$/\n/'
}

# resumption: does vtgate resume TLS 1.3 sessions (tickets)? The MySQL client of the cold start
# does not report it; openssl's STARTTLS for MySQL does.
resumption() {
  local s="$DIR/vtgate-session.pem" r
  (sleep 1) | "${SRV_NS[@]}" timeout 5 openssl s_client -starttls mysql -connect "127.0.0.1:$VTGATE_PORT" -tls1_3 \
    -CAfile "$CA" -sess_out "$s" >/dev/null 2>&1 || true
  r=$( (sleep 1) | "${SRV_NS[@]}" timeout 5 openssl s_client -starttls mysql -connect "127.0.0.1:$VTGATE_PORT" -tls1_3 \
    -CAfile "$CA" -sess_in "$s" 2>/dev/null | grep -oE '^(New|Reused), TLSv1.3' || echo "no TLS 1.3")
  echo "  vtgate TLS: $r on a second connection with the first one's session (openssl s_client -starttls mysql)" | tee "$OUT/logs/vtgate-tls.txt"
  rm -f "$s"
}

# check: one point select and one scatter read through Ferry (HTTP/2, curl), rows as expected.
check() {
  local q n
  for q in "SELECT c FROM vt_bench WHERE id=42:1" "SELECT id, c FROM vt_bench WHERE k=42:$((ROWS / KEYS))"; do
    n=$("${SRV_NS[@]}" curl -sS --http2 --cacert "$CA" -H 'content-type: application/json' \
      -H "authorization: Basic $(printf ferry:ferry | base64)" -d "{\"query\":\"${q%:*}\"}" \
      "https://127.0.0.1:$GW_PORT/psdb.v1alpha1.Database/Execute" \
      | python3 -c 'import json,sys; d=json.load(sys.stdin); print(len(d["result"].get("rows", [])) if "result" in d else d)')
    [ "$n" = "${q##*:}" ] || { echo "through Ferry, ${q%:*}: $n rows, expected ${q##*:}" >&2; return 1; }
  done
  echo "  through Ferry: a point select gets 1 row, a scatter read $((ROWS / KEYS))"
}

# --- namespaces (as loadtest/net.sh, with names, subnet and queue of their own) ---
in_s() { ip netns exec "$NS_S" "$@"; }
in_c() { ip netns exec "$NS_C" "$@"; }
NET_STATE="$DIR/net"

net_up() {
  command -v iptables >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends iptables libnetfilter-queue-dev >/dev/null
  ip netns list | grep -qw "$NS_S" && return
  ip netns add "$NS_S"; ip netns add "$NS_C"
  ip link add "$VS" netns "$NS_S" type veth peer name "$VC" netns "$NS_C"
  in_s ip addr add "$SRV_IP/24" dev "$VS"
  in_c ip addr add "$SUBNET.2/24" dev "$VC"
  for ns in "$NS_S" "$NS_C"; do ip netns exec "$ns" ip link set lo up; done
  in_s ip link set "$VS" up; in_c ip link set "$VC" up
  in_s iptables -A INPUT -i "$VS" -j NFQUEUE --queue-num "$Q" --queue-bypass
  in_c iptables -A INPUT -i "$VC" -j NFQUEUE --queue-num "$Q" --queue-bypass
}

stop_delayers() {
  local f
  for f in "$NET_STATE"/delayer-*.pid; do
    [ -s "$f" ] || continue
    kill "$(cat "$f")" 2>/dev/null || true
    rm -f "$f"
  done
}

# delay NS ONE_WAY: bin/delayer holds that namespace's incoming packets (NFQUEUE $Q).
delay() {
  mkdir -p "$NET_STATE"
  ( for fd in /proc/$BASHPID/fd/*; do fd=${fd##*/}; [ "$fd" -gt 2 ] && eval "exec $fd>&-"; done
    exec ip netns exec "$1" "$LT/bin/delayer" -queue "$Q" -delay "$2" -loss 0 >>"$NET_STATE/delayer-$1.log" 2>&1 </dev/null ) &
  echo $! > "$NET_STATE/delayer-$1.pid"
}

# shape loopback|far: loopback = k6 inside the server namespace on 127.0.0.1; far = k6 in the
# client namespace, tbf 20 Mbit/s + 20 ms each way (net.sh's far: ≈41 ms RTT).
shape() {
  NET=$1
  if [ "$USE_NS" = 1 ]; then
    stop_delayers
    in_s tc qdisc del dev "$VS" root 2>/dev/null || true
    in_c tc qdisc del dev "$VC" root 2>/dev/null || true
  fi
  case $NET in
    loopback) CLI_NS=("${SRV_NS[@]}") HOST=127.0.0.1 ;;
    far)
      CLI_NS=(ip netns exec "$NS_C") HOST=$SRV_IP
      in_s tc qdisc replace dev "$VS" root tbf rate 20mbit burst 32kbit latency 50ms
      in_c tc qdisc replace dev "$VC" root tbf rate 20mbit burst 32kbit latency 50ms
      delay "$NS_S" 20ms; delay "$NS_C" 20ms; sleep 0.3 ;;
  esac
  RTT=$(rtt)
  echo "== network $NET (measured TCP connect RTT to vtgate $RTT ms)"
}

net_down() {
  stop_delayers
  ip netns del "$NS_C" 2>/dev/null || true
  ip netns del "$NS_S" 2>/dev/null || true
}





# pids: Envoy and the shim (stack.sh's pid files), vtcombo and mysqld (vttestserver's session).
pids() {
  local sid vt my
  sid=$(cat "$DIR/vitess/pids/vttestserver.pid")
  vt=$(ps -s "$sid" -o pid=,comm= | awk '$2 == "vtcombo" { print $1; exit }')
  my=$(ps -s "$sid" -o pid=,comm= | awk '$2 == "mysqld" { print $1; exit }')
  [ -n "$vt" ] && [ -n "$my" ] || { echo "vtcombo or mysqld not found in session $sid" >&2; ps -s "$sid" -o pid,comm >&2; return 1; }
  ENVOY_PID=$(cat "$DIR/pids/envoy.pid") SHIM_PID=$(cat "$DIR/pids/shim.pid") VT_PID=$vt MY_PID=$my
  CPU_PIDS="envoy:$ENVOY_PID shim:$SHIM_PID vtcombo:$VT_PID mysqld:$MY_PID host:all irq:irq"
  if [ -n "$RUN_NICE" ]; then
    local pid t
    for pid in $ENVOY_PID $SHIM_PID $VT_PID $MY_PID; do
      for t in /proc/"$pid"/task/*; do renice -n "$RUN_NICE" -p "${t##*/}" >/dev/null 2>&1 || true; done
    done
  fi
}

# idle: each process's CPU with no load for IDLE_SECONDS (vtcombo's health checks and tablet
# heartbeats, Envoy's and the shim's timers): ms of CPU per second, into OUT/idle.json. At a low
# QPS this background weighs on the µs per query (it is in them, as for every other process).
idle() {
  local a b
  a=$(cpu_snap); sleep "${IDLE_SECONDS:-10}"; b=$(cpu_snap)
  python3 - "$a" "$b" "${IDLE_SECONDS:-10}" "$(getconf CLK_TCK)" "$OUT/idle.json" <<'PY'
import json, sys
a, b = dict(x.split(":") for x in sys.argv[1].split()), dict(x.split(":") for x in sys.argv[2].split())
secs, hz = float(sys.argv[3]), int(sys.argv[4])
d = {k: (int(b[k]) - int(a[k])) * 1000 / hz / secs for k in b}
json.dump(d, open(sys.argv[5], "w"))
print("  idle, CPU ms per second: " + ", ".join(f"{k} {v:.1f}" for k, v in d.items()))
PY
}

MISSING=0
# run WORKLOAD CLIENT VARIANT VUS ITER_OR_DURATION [k6 -e args...] (bench.sh's run, for vtgate)
run() {
  local w=$1 client=$2 variant=$3 vus=$4 n=$5; shift 5
  local name="$w.$client${variant:+.$variant}.$NET.v$vus${RUN_SUFFIX:-}"
  local labels count=(-e ITERATIONS="$n") cpu0 k6a k6b
  labels=$(printf '{"workload":"%s","client":"%s","variant":"%s","net":"%s","rtt_ms":%s,"vus":%s}' \
    "$w" "$client" "$variant" "$NET" "$RTT" "$vus")
  [[ "$n" == *s ]] && count=(-e DURATION="$n")
  cpu0=$(cpu_snap)
  children_ticks k6a
  "${CLI_NS[@]}" ${RUN_NICE:+nice -n "$RUN_NICE"} env SSL_CERT_FILE="$CA" "$LT/bin/k6" run --quiet --no-color --log-output=stderr \
    -e CLIENT="$client" -e FERRY_URL="https://$HOST:$GW_PORT" -e MYSQL_ADDR="$HOST:$VTGATE_PORT" \
    -e CA="$CA" -e VUS="$vus" "${count[@]}" -e MODE="$variant" -e EXT=1 -e ROWS="$ROWS" -e KEYS="$KEYS" \
    -e LABELS="$labels" -e SUMMARY="$OUT/runs/$name.json" "$@" \
    "$LT/k6/${w/#vitess-*/vitess}.js" 2>"$OUT/logs/$name.log" | sed 's/^/  /' \
    || echo "  k6 failed for $name: see $OUT/logs/$name.log" >&2
  children_ticks k6b
  [ -s "$OUT/runs/$name.json" ] || { echo "  no summary from $name: see $OUT/logs/$name.log" >&2; MISSING=$((MISSING + 1)); return; }
  cpu_note "$OUT/runs/$name.json" "$cpu0 k6:$k6a" "$(cpu_snap) k6:$k6b" us
}

# round_order ROUND: CLIENTS in order on odd rounds, reversed on even ones.
round_order() {
  local order=${CLIENTS:-mysql h2 h3}
  [ $(($1 % 2)) = 1 ] || order=$(tr ' ' '\n' <<<"$order" | tac | tr '\n' ' ')
  echo "$order"
}

# matrix: QUERIES × VUS_LIST × CLIENTS, ROUNDS rounds; the client order reversed every other
# round, so drift on the shared host hits every client alike.
matrix() {
  local round order q vus c
  for round in $(seq "${ROUNDS:-3}"); do
    RUN_SUFFIX=".r$round" order=$(round_order "$round")
    echo "== round $round: $order"
    for q in ${QUERIES:-point scatter}; do
      for vus in ${VUS_LIST:-1 32}; do
        for c in $order; do run "vitess-$q" "$c" "" "$vus" "${RUN_DURATION:-8s}" -e QUERY="$q"; done
        [ "${PACED:-1}" = 1 ] && [ "$vus" = 1 ] && paced "$q"
      done
    done
  done
  RUN_SUFFIX=""
}

# paced QUERY: MySQL+TLS at 1 client held to the QPS Ferry HTTP/2 just reached (k6/vitess.js
# RATE): vtgate and mysqld then serve the same rate as behind Ferry, so their CPU
# per query compares without the difference in rate (at a low rate every query wakes them from idle).
paced() {
  local f="$OUT/runs/vitess-$1.h2.$NET.v1$RUN_SUFFIX.json" rate
  [ -s "$f" ] || return 0
  rate=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(round(d["metrics"]["ferry_calls"]["values"]["count"] / (d["state"]["testRunDurationMs"] / 1000)))' "$f")
  run "vitess-$1" mysql paced 1 "${RUN_DURATION:-8s}" -e QUERY="$1" -e RATE="$rate"
}

# far: k6/cold-start.js (new connection, SELECT 1, close; serially) per client and resumption
# variant, COLD_ROUNDS rounds of COLD_ITER.
far() {
  local round order c v variants
  for round in $(seq "${COLD_ROUNDS:-2}"); do
    RUN_SUFFIX=".r$round" order=$(round_order "$round")
    echo "== far cold start, round $round: $order"
    for c in $order; do
      variants="noresume resume"; [ "$c" = h3 ] && variants="noresume resume 0rtt"
      for v in $variants; do run cold-start "$c" "$v" 1 "${COLD_ITER:-10}"; done
    done
  done
  RUN_SUFFIX=""
}

# report: OUT/vitess.md from OUT/runs (rounds merged as bench.sh cost does).
report() {
  python3 - "$OUT" <<'PY' | tee "$OUT/vitess.md"
import glob, json, os, statistics, sys
out = sys.argv[1]
PROCS = ["envoy", "shim", "vtcombo", "mysqld", "k6", "irq"]
NAME = {"mysql": "MySQL+TLS → vtgate", "h2": "Ferry HTTP/2 → vtgate", "h3": "Ferry HTTP/3 → vtgate",
        "paced": "MySQL+TLS → vtgate, paced to HTTP/2's QPS"}
groups = {}
for f in sorted(glob.glob(os.path.join(out, "runs", "*.json"))):
    d = json.load(open(f)); l = d.get("labels", {}); m = d["metrics"]
    v = lambda k, s: m.get(k, {}).get("values", {}).get(s, 0)
    groups.setdefault((l["workload"], l["client"], l["variant"], l["net"], l["vus"]), []).append({
        "calls": v("ferry_calls", "count"), "dur": d["state"]["testRunDurationMs"] / 1000,
        "errors": v("ferry_errors", "count"), "p50": v("ferry_ms", "p(50)"), "p95": v("ferry_ms", "p(95)"),
        "p99": v("ferry_ms", "p(99)"), "rtt": l.get("rtt_ms", 0), "resumed": v("tls_resumed", "count"),
        "early": v("h3_0rtt_accepted", "count"), "e425": v("h3_0rtt_425", "count"),
        "cpu": d.get("cpu_ms_per_call", {})})

def merged(key):
    rs = groups.get(key)
    if not rs:
        return None
    calls = sum(r["calls"] for r in rs) or 1
    cpu = {}
    for r in rs:
        for k, x in r["cpu"].items():
            cpu[k] = cpu.get(k, 0) + x * r["calls"] / calls
    if "host" in cpu:
        cpu["other"] = cpu["host"] - sum(cpu.get(p, 0) for p in PROCS)
    med = lambda k: statistics.median(r[k] for r in rs)
    return {"n": len(rs), "calls": calls, "errors": sum(r["errors"] for r in rs),
            "qps": calls / (sum(r["dur"] for r in rs) or 1), "qps_r": [r["calls"] / r["dur"] for r in rs if r["dur"]],
            "p50": med("p50"), "p50_r": [r["p50"] for r in rs], "p95": med("p95"), "p99": med("p99"),
            "rtt": med("rtt"), "resumed": sum(r["resumed"] for r in rs), "early": sum(r["early"] for r in rs),
            "e425": sum(r["e425"] for r in rs), "cpu": cpu}

def spread(xs, fmt):
    return "" if len(xs) < 2 else f" ({fmt(min(xs))}–{fmt(max(xs))})"

us = lambda r, k: f"{1000 * r['cpu'][k]:.0f}" if k in r["cpu"] else "–"
rounds = max((len(v) for k, v in groups.items() if k[0].startswith("vitess-")), default=0)
print("# Ferry in front of Vitess (vtgate)\n")
print(f"Loopback, one warm connection per client; {rounds} interleaved round(s) merged: QPS = all calls ÷ all "
      "run time (range of the rounds in brackets), p50/p99 = the median of the rounds', CPU = all rounds' "
      "utime+stime (/proc/<pid>/stat) ÷ all calls, in µs per query. `k6` = the load generator, `irq` = the "
      "host's interrupt + softirq time, `other` = the host's busy time − all of these (whatever else ran on "
      "the shared cores). `stack` = Envoy + shim + vtcombo + mysqld. MySQL+TLS = go-sql-driver/mysql over TLS 1.3 "
      "straight to vtgate; Ferry = Connect JSON through Envoy and the shim (our extension's Go client: "
      "HTTP/2 x/net/http2, HTTP/3 quic-go), the shim pooling plain TCP connections to the same vtgate.\n")
TITLE = {"vitess-point": "Point select by primary key (`SELECT c FROM vt_bench WHERE id=?`: one shard)",
         "vitess-scatter": "Scatter read (`SELECT id, c FROM vt_bench WHERE k=?`: both shards, 10 rows)"}
for w in ("vitess-point", "vitess-scatter"):
    vus_list = sorted({k[4] for k in groups if k[0] == w})
    if not vus_list:
        continue
    print(f"## {TITLE[w]}\n")
    print("| clients | client | QPS | ×MySQL QPS | p50 ms | ×MySQL p50 | p99 ms | Envoy µs | shim µs | vtcombo µs | mysqld µs | k6 µs | irq µs | other µs | stack µs | errors |")
    print("|" + "---|" * 16)
    for vus in vus_list:
        base = merged((w, "mysql", "", "loopback", vus))
        for c in ("mysql", "paced", "h2", "h3"):
            r = merged((w, "mysql", "paced", "loopback", vus)) if c == "paced" else merged((w, c, "", "loopback", vus))
            if not r:
                continue
            xq = f"{r['qps'] / base['qps']:.2f}" if base and base["qps"] else "–"
            xp = f"{r['p50'] / base['p50']:.2f}" if base and base["p50"] else "–"
            stack = 1000 * sum(r["cpu"].get(p, 0) for p in ("envoy", "shim", "vtcombo", "mysqld"))
            print(f"| {vus} | {NAME[c]} | {r['qps']:,.0f}{spread(r['qps_r'], lambda v: f'{v:,.0f}')} | {xq} | "
                  f"{r['p50']:.3f}{spread(r['p50_r'], lambda v: f'{v:.3f}')} | {xp} | {r['p99']:.2f} | "
                  f"{us(r, 'envoy')} | {us(r, 'shim')} | {us(r, 'vtcombo')} | {us(r, 'mysqld')} | {us(r, 'k6')} | "
                  f"{us(r, 'irq')} | {us(r, 'other')} | {stack:.0f} | {r['errors']} |")
    print()

cold = [k for k in groups if k[0] == "cold-start"]
if cold:
    net = cold[0][3]
    print(f"## Cold start, {net} shape\n")
    print("New connection, `SELECT 1`, close, serially (1 client); the first call of each run (it fills the "
          "TLS session cache) is not counted. RTTs = round trips until the answer by the protocol "
          "(MySQL+TLS 5: TCP, greeting, TLS 1.3, auth, query; HTTP/2 3; HTTP/3 2, 1 with 0-RTT); "
          "meas. = p50 ÷ the measured RTT. ×MySQL = p50 ÷ MySQL+TLS's p50 with the same resumption setting "
          "(0-RTT: against MySQL with resumption). CPU = µs per cold start.\n")
    print("| client | resumption | p50 ms | p95 ms | ×MySQL p50 | RTTs | meas. | resumed | 0-RTT accepted / 425 | Envoy µs | shim µs | vtcombo µs | mysqld µs | k6 µs | calls | errors |")
    print("|" + "---|" * 16)
    model = {"mysql": 5, "h2": 3, "h3": 2}
    for c in ("mysql", "h2", "h3"):
        for v in ("noresume", "resume", "0rtt"):
            r = merged(("cold-start", c, v, net, 1))
            if not r:
                continue
            b = merged(("cold-start", "mysql", "resume" if v == "0rtt" else v, net, 1))
            x = f"{r['p50'] / b['p50']:.2f}" if b and b["p50"] else "–"
            rtts = 1 if v == "0rtt" else model[c]
            meas = f"{r['p50'] / r['rtt']:.2f}" if r["rtt"] >= 1 else "–"
            e = f"{r['early']} / {r['e425']}" if c == "h3" and v == "0rtt" else "–"
            print(f"| {NAME[c]} | {v} | {r['p50']:.1f} | {r['p95']:.1f} | {x} | {rtts} | {meas} | {'–' if c == 'mysql' else r['resumed']} | {e} | "
                  f"{us(r, 'envoy')} | {us(r, 'shim')} | {us(r, 'vtcombo')} | {us(r, 'mysqld')} | {us(r, 'k6')} | {r['calls']} | {r['errors']} |")
    print(f"\nMeasured RTT (median TCP connect to vtgate's port from the client namespace): {merged(cold[0])['rtt']:.1f} ms.")
idle = os.path.join(out, "idle.json")
if os.path.exists(idle):
    d = json.load(open(idle))
    print("\nIdle (no load, before the matrix), CPU ms per second: " + ", ".join(
        f"{k} {v:.1f}" for k, v in d.items() if k != "irq") + " (host = every core's busy time: other work on the shared cores).")
errs = sum(r["errors"] for rs in groups.values() for r in rs)
print(f"\nErrors in all runs: {errs}.")
PY
}

case "${1:-run}" in
  run)
    "$LT/build-k6.sh"
    OUT="$LT/results/$(date -u +%Y%m%dT%H%M%SZ)-vitess"
    mkdir -p "$OUT/runs" "$OUT/logs"
    echo "results: $OUT"
    { echo "git HEAD: $(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown)"
      echo "date: $(date -u +%FT%TZ)"; echo "host: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
      sha256sum "${FERRY_SHIM_BIN:-$ROOT/target/release/ferry-shim}" "${FERRY_WASM:-$ROOT/target/wasm32-wasip1/release/ferry_filter.wasm}"
    } >"$OUT/host.txt"
    stack_env
    trap down EXIT
    down
    [ "$USE_NS" != 1 ] || net_up
    up
    pids
    echo "  pids: envoy $ENVOY_PID, shim $SHIM_PID, vtcombo $VT_PID, mysqld $MY_PID"
    for part in ${PARTS:-matrix far}; do
      case $part in
        matrix) shape loopback; idle; matrix ;;
        far) if [ "$USE_NS" = 1 ]; then shape far; far; shape loopback; else echo "far: needs BENCH_VITESS_NS=1" >&2; fi ;;
        *) echo "unknown part $part (matrix far)" >&2; exit 2 ;;
      esac
    done
    echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/host.txt"
    "$LT/bin/report" "$OUT" >/dev/null || true
    report
    [ "$MISSING" = 0 ] || { echo "$MISSING run(s) wrote no summary" >&2; exit 4; } ;;
  report) OUT="${2:?results dir}"; "$LT/bin/report" "$OUT" >/dev/null || true; report ;;
  down) stack_env; down ;;
  *) sed -n '2,/^set -euo/p' "$0" | sed '$d' >&2; exit 2 ;;
esac
