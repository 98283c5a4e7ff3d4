#!/usr/bin/env bash
# What each deployment form of the Ferry filter costs (issue 24;
# docs/benchmarks/meshes.md "Deployment forms (meshes)"): Envoy as the mesh-shaped configs run it, one form at a time
# on one port, beside the same shim and MariaDB (a stack of its own), driven by h2load
# (HTTP/2 over TLS 1.3), warm `SELECT 1` in Connect JSON and Connect proto:
#   router-only        the floor: ferry.yaml with no HTTP filter but the router, no access
#                      log, no header mutation (envoy-breakdown.sh's variant): a bare TLS h2 ->
#                      h2c proxy. Proto only (the shim reads no JSON); the JSON rows' floor too.
#   ferry              envoy/ferry.yaml, the shipped config
#   istio              envoy/istio.yaml: a WasmPlugin, the filter by ECDS from a file, no
#                      header hold (no class routing, no session affinity)
#   istio-envoyfilter  envoy/istio-envoyfilter.yaml: the escape hatch, the header hold back
#   envoy-gateway      envoy/envoy-gateway.yaml: code.remote over HTTPS (scripts/wasm-server.py),
#                      the filter disabled on the listener and enabled per route, no header hold
# Each rendered by scripts/render-envoy.sh (ECDS files, the .wasm's sha256, ports), access
# logs to $DIR/access.log (emptied after each Envoy). Per round and form: Envoy started,
# warmed (connections, pools, the VM's JIT), one JSON request checked (it needs the filter:
# the shim reads proto only), then for each format MESH_N requests at MESH_C (16) connections
# and MESH_N1 at 1 connection (latency), one request at a time on each; Envoy stopped.
# MESH_ROUNDS (5) rounds, forms interleaved, their order and the formats' reversed every other
# round. Per run: req/s (h2load), p50/p99 of each request (h2load --log-file), CPU µs per
# request of that Envoy, the shim and MariaDB (utime + stime from /proc/<pid>/stat).
#   loadtest/mesh-cost.sh [OUT.md]       (make bench-mesh; default OUT.md: $FERRY_RUN_DIR/mesh-cost.md)
# The stack: MariaDB + shim (no stack Envoy) in .run/bench-mesh on ports of its own, started
# here and stopped on exit: MESH_PORT (28843, Envoy; its admin MESH_ADMIN_PORT 29981),
# MESH_SHIM_PORT (28881), MESH_MYSQL_PORT (53896), MESH_WASM_HTTPS_PORT (28849).
# Knobs: MESH_FORMS (a subset, in this order), MESH_ROUNDS, MESH_N (12000), MESH_N1 (2000),
# MESH_C, MESH_NICE (-10 as root, as bench.sh cost's RUN_NICE: the stack, Envoy and h2load;
# "" = leave them), FERRY_WASM / FERRY_SHIM_BIN / FERRY_ENVOY_CONCURRENCY as for stack.sh.
set -euo pipefail
LT="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(dirname "$LT")"
source "$LT/lib/cpu.sh" # ticks
command -v h2load >/dev/null || { echo "h2load is missing (apt install nghttp2-client; scripts/install.sh does)" >&2; exit 2; }

# --- this benchmark's own stack (every port of scripts/env.sh that it uses, none shared) ---
export FERRY_RUN_DIR="$ROOT/.run/bench-mesh" FERRY_HOST=127.0.0.1 FERRY_ADMIN_HOST=127.0.0.1
export FERRY_PORT="${MESH_PORT:-28843}" FERRY_ADMIN_PORT="${MESH_ADMIN_PORT:-29981}"
export FERRY_SHIM_ADDR="127.0.0.1:${MESH_SHIM_PORT:-28881}" FERRY_SHIM_UNIX="" FERRY_SHIMS=1 FERRY_REPLICAS=0
export FERRY_MYSQL_HOST=127.0.0.1 FERRY_MYSQL_PORT="${MESH_MYSQL_PORT:-53896}" FERRY_MYSQL_EXTRA_ARGS=""
export FERRY_WASM_HTTPS_PORT="${MESH_WASM_HTTPS_PORT:-28849}" FERRY_ENVOY_SCENARIO="" FERRY_OTLP_ENDPOINT="" FERRY_SHIM_USER=""
export FERRY_ACCESS_LOG="$FERRY_RUN_DIR/mesh/access.log"
# Derived from the run dir by env.sh: not a caller's.
unset FERRY_MYSQL_SOCKET FERRY_SESSION_KEYS_FILE FERRY_REPLICA_MYSQL_SOCKET FERRY_SHIM_TLS_CERT FERRY_SHIM_ADVERTISE
source "$ROOT/scripts/env.sh"
OUT_MD="${1:-$FERRY_RUN_DIR/mesh-cost.md}"
N="${MESH_N:-12000}" N1="${MESH_N1:-2000}" C="${MESH_C:-16}" ROUNDS="${MESH_ROUNDS:-5}"
read -ra FORMS <<<"${MESH_FORMS:-router-only ferry istio istio-envoyfilter envoy-gateway}"
NICE="${MESH_NICE-$([ "$(id -u)" = 0 ] && echo -10)}"
DIR="$FERRY_RUN_DIR/mesh"
STACK="$ROOT/scripts/stack.sh"
mkdir -p "$DIR/bin"
# The binaries as they are now, for every round: a rebuild of target/ by someone else while
# this runs would change the filter under the later forms (and envoy-gateway's module would
# no longer match the sha256 rendered into its config). Copied by a rename (a shim of an
# interrupted run may still be running from there).
WASM_SRC="$FERRY_WASM" COMMIT=$(git -C "$ROOT" rev-parse --short HEAD)
[ -z "$(git -C "$ROOT" status --porcelain -- filter shim wire envoy 2>/dev/null)" ] \
  || COMMIT="$COMMIT, with local changes in filter/shim/wire/envoy"
for b in "$FERRY_WASM" "$FERRY_SHIM_BIN"; do
  [ -s "$b" ] || { echo "no $b (make build)" >&2; exit 1; }
  cp "$b" "$DIR/bin/.$(basename "$b")" && mv -f "$DIR/bin/.$(basename "$b")" "$DIR/bin/$(basename "$b")"
done
export FERRY_WASM="$DIR/bin/$(basename "$FERRY_WASM")" FERRY_SHIM_BIN="$DIR/bin/$(basename "$FERRY_SHIM_BIN")"
WASM_SHA=$(sha256sum "$FERRY_WASM" | cut -c1-12)
HZ=$(getconf CLK_TCK)
ADMIN="http://$FERRY_ADMIN_HOST:$FERRY_ADMIN_PORT"
URL="https://$FERRY_HOST:$FERRY_PORT/psdb.v1alpha1.Database/Execute"
AUTH="authorization: Basic $(printf '%s:%s' "$FERRY_MYSQL_USER" "$FERRY_MYSQL_PASSWORD" | base64 -w0)"
printf '{"query":"SELECT 1"}' > "$DIR/select1.json"
printf '\x12\x08SELECT 1' > "$DIR/select1.bin" # ExecuteRequest{query: "SELECT 1"} (field 2)

ENVOY_PID="" WASM_PID=""
cleanup() {
  [ -z "$ENVOY_PID" ] || { kill "$ENVOY_PID" 2>/dev/null; wait "$ENVOY_PID" 2>/dev/null; } || true
  [ -z "$WASM_PID" ] || { kill "$WASM_PID" 2>/dev/null; wait "$WASM_PID" 2>/dev/null; } || true
  "$STACK" down >/dev/null 2>&1 || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

nice_all() { # nice_all PID...: every thread of these processes to $NICE
  [ -n "$NICE" ] || return 0
  local pid t
  for pid in "$@"; do for t in /proc/"$pid"/task/*; do renice -n "$NICE" -p "${t##*/}" >/dev/null 2>&1 || true; done; done
}
RUN=(); [ -z "$NICE" ] || RUN=(nice -n "$NICE")

echo "mesh-cost: stack in $FERRY_RUN_DIR (MariaDB :$FERRY_MYSQL_PORT, shim $FERRY_SHIM_ADDR, Envoy :$FERRY_PORT)" >&2
"$ROOT/scripts/dev-cert.sh"
"$STACK" mysql >"$DIR/stack.log" 2>&1 && "$STACK" shim >>"$DIR/stack.log" 2>&1 \
  || { cat "$DIR/stack.log" >&2; exit 1; }
SHIM=$(cat "$FERRY_RUN_DIR/pids/shim.pid") MYSQL=$(cat "$FERRY_RUN_DIR/pids/mysql.pid")
nice_all "$SHIM" "$MYSQL"

# --- the forms' configs ---
for f in "${FORMS[@]}"; do
  case "$f" in
    router-only)
      "$ROOT/scripts/render-envoy.sh" "$ROOT/envoy/ferry.yaml" > "$DIR/ferry-src.yaml"
      python3 - "$DIR/ferry-src.yaml" "$DIR/router-only.yaml" <<'PY'
import sys, yaml
doc = yaml.safe_load(open(sys.argv[1]))
for listener in doc["static_resources"]["listeners"]:
    for chain in listener["filter_chains"]:
        for f in chain["filters"]:
            hcm = f["typed_config"]
            hcm.pop("access_log", None)
            hcm.pop("early_header_mutation_extensions", None)
            hcm["http_filters"] = [h for h in hcm["http_filters"] if h["name"] == "envoy.filters.http.router"]
yaml.safe_dump(doc, open(sys.argv[2], "w"), sort_keys=False)
PY
      ;;
    ferry|istio|istio-envoyfilter|envoy-gateway)
      "$ROOT/scripts/render-envoy.sh" "$ROOT/envoy/$f.yaml" > "$DIR/$f.yaml" ;;
    *) echo "unknown form $f (router-only ferry istio istio-envoyfilter envoy-gateway)" >&2; exit 2 ;;
  esac
done
if [[ " ${FORMS[*]} " == *" envoy-gateway "* ]]; then
  # Envoy Gateway's own HTTPS server for the module, as stack.sh starts it for that scenario.
  python3 "$ROOT/scripts/wasm-server.py" >"$DIR/wasm-server.log" 2>&1 &
  WASM_PID=$!
  c="$FERRY_RUN_DIR/certs"
  for _ in $(seq 100); do
    curl -sfI --cacert "$c/ca.pem" --cert "$c/envoy-client.pem" --key "$c/envoy-client.key" \
      "https://127.0.0.1:$FERRY_WASM_HTTPS_PORT/ferry_filter.wasm" >/dev/null 2>&1 && break; sleep 0.1
  done
fi

# h2 FORMAT CONNS N [LOG]: h2load, one request at a time on each connection.
h2() {
  local body=$DIR/select1.bin ct=application/proto
  [ "$1" = json ] && body=$DIR/select1.json ct=application/json
  "${RUN[@]}" h2load -c "$2" -m 1 -n "$3" ${4:+--log-file="$4"} -d "$body" -H "content-type: $ct" -H "$AUTH" "$URL" 2>&1
}
all_ok() { # all_ok OUT N WHAT
  grep -q "status codes: $2 2xx" <<<"$1" && return
  echo "$3: not every request succeeded:" >&2; grep -E 'status codes|requests:' <<<"$1" >&2; exit 1
}

# run FORM FORMAT CONNS N: prints "qps p50_ms p99_ms envoy_us shim_us mysql_us".
run() {
  local log="$DIR/requests.tsv" e0 s0 m0 e1 s1 m1 out
  rm -f "$log" # h2load appends to it
  e0=$(ticks "$ENVOY_PID") s0=$(ticks "$SHIM") m0=$(ticks "$MYSQL")
  out=$(h2 "$2" "$3" "$4" "$log")
  e1=$(ticks "$ENVOY_PID") s1=$(ticks "$SHIM") m1=$(ticks "$MYSQL")
  all_ok "$out" "$4" "$1 $2 -c $3"
  python3 - "$out" "$log" "$4" "$HZ" $((e1 - e0)) $((s1 - s0)) $((m1 - m0)) <<'PY'
import re, sys
out, log, n, hz = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
qps = float(re.search(r"finished in [\d.]+\w+, ([\d.]+) req/s", out).group(1))
lat = sorted(int(line.split("\t")[2]) for line in open(log) if line.strip())
pct = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))] / 1000
print(qps, pct(0.50), pct(0.99), *(int(t) * 1e6 / hz / n for t in sys.argv[5:8]))
PY
}

start_envoy() { # start_envoy FORM: started, ready, warm, the filter checked
  "${RUN[@]}" "$ENVOY" -c "$DIR/$1.yaml" --disable-hot-restart --log-level error \
    ${FERRY_ENVOY_CONCURRENCY:+--concurrency "$FERRY_ENVOY_CONCURRENCY"} >"$DIR/$1.log" 2>&1 &
  ENVOY_PID=$!
  for _ in $(seq 300); do
    curl -sf "$ADMIN/ready" 2>/dev/null | grep -q LIVE && break
    kill -0 "$ENVOY_PID" 2>/dev/null || { echo "$1: Envoy exited:" >&2; tail -20 "$DIR/$1.log" >&2; exit 1; }
    sleep 0.1
  done
  curl -sf "$ADMIN/ready" | grep -q LIVE || { echo "$1: Envoy not ready in 30 s" >&2; tail -20 "$DIR/$1.log" >&2; exit 1; }
  all_ok "$(h2 proto "$C" 2000)" 2000 "$1 warm-up (proto)"
  [ "$1" = router-only ] && return
  all_ok "$(h2 json "$C" 1000)" 1000 "$1 warm-up (JSON)"
  # The JSON answer is the filter's work (the shim reads and writes proto only).
  local a; a=$(curl -sS --cacert "$FERRY_RUN_DIR/certs/ca.pem" -H 'content-type: application/json' -H "$AUTH" \
    -d '{"query":"SELECT 1"}' "$URL")
  grep -q '"rows"' <<<"$a" || { echo "$1: no Connect JSON answer from the filter: $a" >&2; exit 1; }
}
stop_envoy() {
  kill "$ENVOY_PID"; wait "$ENVOY_PID" 2>/dev/null || true; ENVOY_PID=""
  : > "$FERRY_ACCESS_LOG"
}

RES="$DIR/runs.txt"; : > "$RES"
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg) T0=$(date -u +%s)
for r in $(seq "$ROUNDS"); do
  order=("${FORMS[@]}") fmts=(json proto)
  if [ $((r % 2)) = 0 ]; then
    for ((i = ${#FORMS[@]} - 1, j = 0; i >= 0; i--, j++)); do order[j]=${FORMS[i]}; done
    fmts=(proto json)
  fi
  for f in "${order[@]}"; do
    start_envoy "$f"
    for fmt in "${fmts[@]}"; do
      [ "$f" = router-only ] && [ "$fmt" = json ] && continue
      for conns in "$C" 1; do
        n=$N; [ "$conns" = 1 ] && n=$N1
        res=$(run "$f" "$fmt" "$conns" "$n")
        echo "$r $f $fmt $conns $res" >> "$RES"
        echo "  round $r $f $fmt -c $conns: $(awk '{ printf "%.0f req/s, p50 %.3f p99 %.3f ms, us/req envoy %.0f shim %.0f mysql %.0f", $1, $2, $3, $4, $5, $6 }' <<<"$res")" >&2
      done
    done
    stop_envoy
  done
done
LOAD1=$(cut -d' ' -f1-3 /proc/loadavg) T1=$(date -u +%s)

# --- the report ---
python3 - "$RES" "$ROUNDS" "$N" "$N1" "$C" "${FORMS[*]}" > "$OUT_MD" <<'PY'
import statistics, sys
from collections import defaultdict
res, rounds, n, n1, c, forms = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5]), sys.argv[6].split()
runs = defaultdict(list)  # (form, fmt, conns) -> [[qps, p50, p99, envoy, shim, mysql], ...]
by_round = {}  # (round, form, fmt, conns) -> the same row
for line in open(res):
    r, form, fmt, conns, *vals = line.split()
    runs[(form, fmt, int(conns))].append(list(map(float, vals)))
    by_round[(int(r), form, fmt, int(conns))] = list(map(float, vals))
med = {k: [statistics.median(col) for col in zip(*v)] for k, v in runs.items()}
spread = {k: (max(x[3] for x in v) - min(x[3] for x in v)) / 2 for k, v in runs.items()}
names = {"router-only": "router-only (floor)", "ferry": "ferry.yaml (shipped)", "istio": "istio (WasmPlugin, no hold)",
         "istio-envoyfilter": "istio-envoyfilter (escape hatch)", "envoy-gateway": "envoy-gateway (remote, per route)"}
rows = [(f, fmt) for fmt in ("json", "proto") for f in forms if not (f == "router-only" and fmt == "json")]
rows = ([("router-only", "proto")] if "router-only" in forms else []) + [r for r in rows if r[0] != "router-only"]
FMT = {"json": "JSON", "proto": "proto"}

def ratio(a, b):
    return f"{a / b:.2f}×" if b else "–"

def base(form, fmt, conns, i):
    k = (form, "proto" if form == "router-only" else fmt, conns)
    return med[k][i] if k in med else None

def ratios(fmt, conns, i, v):
    out = []
    for b in ("router-only", "ferry"):
        x = base(b, fmt, conns, i)
        out.append(ratio(v, x) if x else "–")
    return " / ".join(out)

print(f"Warm `SELECT 1`, HTTP/2 (TLS 1.3), {c} connections, one request at a time on each ({n} requests a run):\n")
print("| form | format | req/s | p50 ms | p99 ms | Envoy µs/req | shim µs/req | MariaDB µs/req | Envoy − floor µs |")
print("|---|---|---|---|---|---|---|---|---|")
for f, fmt in rows:
    k = (f, fmt, c); m = med[k]
    floor = base("router-only", fmt, c, 3)
    above = f"{m[3] - floor:.0f}" if floor is not None and f != "router-only" else "–"
    print(f"| {names[f]} | {FMT[fmt]} | {m[0]:,.0f} | {m[1]:.3f} | {m[2]:.3f} | {m[3]:.0f} (±{spread[k]:.0f}) | {m[4]:.0f} | {m[5]:.0f} | {above} |")
print(f"\nWarm `SELECT 1`, 1 connection ({n1} requests a run):\n")
print("| form | format | p50 ms | p99 ms | p50 − floor µs | req/s | Envoy µs/req | shim µs/req |")
print("|---|---|---|---|---|---|---|---|")
for f, fmt in rows:
    k = (f, fmt, 1); m = med[k]
    floor = base("router-only", fmt, 1, 1)
    above = f"{(m[1] - floor) * 1000:.0f}" if floor is not None and f != "router-only" else "–"
    print(f"| {names[f]} | {FMT[fmt]} | {m[1]:.3f} | {m[2]:.3f} | {above} | {m[0]:,.0f} | {m[3]:.0f} (±{spread[k]:.0f}) | {m[4]:.0f} |")
print("\nRatios, each cell *× router-only / × ferry.yaml* (the same format; router-only's is proto):\n")
print(f"| form | format | req/s ({c} conn.) | Envoy µs/req ({c}) | Envoy + shim µs/req ({c}) | p50 ({c}) | p50 (1 conn.) | rounds with Envoy µs below ferry.yaml's ({c}) |")
print("|---|---|---|---|---|---|---|---|")
for f, fmt in rows:
    if f == "router-only":
        continue
    m, m1 = med[(f, fmt, c)], med[(f, fmt, 1)]
    es = []
    for b in ("router-only", "ferry"):
        k = (b, "proto" if b == "router-only" else fmt, c)
        es.append(ratio(m[3] + m[4], med[k][3] + med[k][4]) if k in med else "–")
    pairs = [(by_round[(r, f, fmt, c)][3], by_round[(r, "ferry", fmt, c)][3]) for r in range(1, rounds + 1)
             if (r, f, fmt, c) in by_round and (r, "ferry", fmt, c) in by_round]
    below = "–" if f == "ferry" or not pairs else f"{sum(a < b for a, b in pairs)} of {len(pairs)}"
    print(f"| {names[f]} | {FMT[fmt]} | {ratios(fmt, c, 0, m[0])} | {ratios(fmt, c, 3, m[3])} | {' / '.join(es)} "
          f"| {ratios(fmt, c, 1, m[1])} | {ratios(fmt, 1, 1, m1[1])} | {below} |")
print(f"\nMedians of {rounds} interleaved rounds (forms in turn, the order and the formats' reversed every other"
      " round; each Envoy warmed with 2,000 proto and 1,000 JSON requests first). Latency: h2load's per-request"
      " times; CPU: utime + stime of each process ÷ requests (10 ms ticks; ±: half the spread of Envoy's over the rounds).")
PY
{
  echo
  echo "Run: $(date -u -d "@$T0" +'%Y-%m-%d %H:%M') UTC, $(((T1 - T0) / 60)) min $(((T1 - T0) % 60)) s of measuring," \
    "the tree at $COMMIT, the filter from $WASM_SRC (sha256 $WASM_SHA…), $(nproc) cores, load average $LOAD0 before," \
    "$LOAD1 after; nice ${NICE:-none}."
} >> "$OUT_MD"
cat "$OUT_MD"
