#!/usr/bin/env bash
# Where Envoy's CPU per warm `SELECT 1` goes (issue 11, docs/benchmarks/cost.md "Where Envoy's CPU goes"):
# Envoy variants, each started beside a running stack's shim and MariaDB on ports of its
# own, driven by h2load (HTTP/2 over TLS 1.3) and some by ferry-h3 --load (HTTP/3), each
# BREAKDOWN_C connections of one request at a time, with the CPU µs per request of that
# Envoy, the shim and MariaDB (/proc).
#   loadtest/envoy-breakdown.sh [OUT.md]   a stack must be up (scripts/stack.sh, same env);
#   with OUT.md, OUT.json gets the medians (bench.sh cost's goals read them)
# Variants, all made from the stack's rendered .run/envoy.yaml:
#   full              the shipped config, Connect JSON requests
#   full-proto        the shipped config, Connect proto requests (no JSON work)
#   no-client-rtt     full-proto without the early header mutation that gives the filter the
#                     client's distance (x-ferry-client-rtt-ms and x-ferry-client-addr:
#                     compression.min_rtt_ms, near_networks)
#   no-access-log     full-proto without the access log
#   text-log          full-proto with the same access log fields as a text line, not JSON
#   no-hold           full-proto with the filter's header hold off (header_hold "off",
#                     session_affinity false: the mode meshes without the hold run; no
#                     class routing, no affinity)
#   native            full-proto with the Ferry filter as an Envoy dynamic module
#                     (envoy/native.yaml: the same core, native; make native)
#   only-ferry-filter full-proto without Envoy's other HTTP filters (grpc_web, Lua, the
#                     zstd compressor, stateful session): the Ferry filter and the router
#   no-ferry-filter   full-proto without the Ferry wasm filter (Envoy's other filters stay;
#                     the request is already the shim's canonical form)
#   router-only       no HTTP filter but the router: Envoy as a bare TLS h2 -> h2c proxy
# (no-ferry-filter and router-only drop the header mutation too: it serves the filter.)
# So: the Ferry filter = full-proto - no-ferry-filter; Envoy's floor = router-only.
# Knobs: BREAKDOWN_N (requests per run, 20000), BREAKDOWN_C (16), BREAKDOWN_ROUNDS (3, interleaved),
# BREAKDOWN_PORT (FERRY_PORT + 1000; +1 for its admin), BREAKDOWN_VARIANTS (a subset),
# BREAKDOWN_H3_VARIANTS (those also run over HTTP/3 with ferry-h3 --load, quinn: default full
# full-proto native router-only; "" = none), FERRY_H3_BIN (that client; built if missing).
# Every row has its ratio to router-only of its protocol.
set -euo pipefail
LT="$(cd "$(dirname "$0")" && pwd)"
source "$LT/../scripts/env.sh"
source "$LT/lib/cpu.sh" # ticks
command -v h2load >/dev/null || { echo "h2load is missing (apt install nghttp2-client; scripts/install.sh does)" >&2; exit 2; }
OUT_MD="${1:-/dev/stdout}"
N="${BREAKDOWN_N:-20000}" C="${BREAKDOWN_C:-16}" ROUNDS="${BREAKDOWN_ROUNDS:-3}"
PORT="${BREAKDOWN_PORT:-$((FERRY_PORT + 1000))}"
VARIANTS="${BREAKDOWN_VARIANTS:-full full-proto native no-client-rtt no-access-log text-log no-hold only-ferry-filter no-ferry-filter router-only}"
H3_VARIANTS="${BREAKDOWN_H3_VARIANTS-full full-proto native router-only}"
H3="${FERRY_H3_BIN:-$LT/../target/release/ferry-h3}" # (bench.sh smoke: the e2e tests' debug build)
if [ -n "$H3_VARIANTS" ] && [ ! -x "$H3" ]; then
  (cd "$LT/.." && cargo build --release -q -p ferry-e2e --bin ferry-h3)
fi
DIR="$FERRY_RUN_DIR/breakdown"
mkdir -p "$DIR"
SRC="$FERRY_RUN_DIR/envoy.yaml"
[ -s "$SRC" ] && [ -s "$FERRY_RUN_DIR/pids/shim.pid" ] || { echo "no stack in $FERRY_RUN_DIR (scripts/stack.sh up)" >&2; exit 2; }
AUTH="authorization: Basic $(printf '%s:%s' "$FERRY_MYSQL_USER" "$FERRY_MYSQL_PASSWORD" | base64)"
printf '{"query":"SELECT 1"}' > "$DIR/select1.json"
printf '\x12\x08SELECT 1' > "$DIR/select1.bin" # ExecuteRequest{query: "SELECT 1"} (field 2)

# variant NAME: writes $DIR/NAME.yaml from the stack's config.
variant() {
  python3 - "$SRC" "$DIR/$1.yaml" "$1" "$PORT" "$DIR" <<'PY'
import json, sys, yaml
src, dst, name, port, out = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
doc = yaml.safe_load(open(src))
doc["admin"]["address"]["socket_address"]["port_value"] = port + 1
seen = set()
for listener in doc["static_resources"]["listeners"]:
    listener["address"]["socket_address"]["port_value"] = port
    for chain in listener["filter_chains"]:
        for f in chain["filters"]:
            hcm = f["typed_config"]
            if id(hcm) in seen:
                continue
            seen.add(id(hcm))
            for log in hcm.get("access_log", []):
                log["typed_config"]["path"] = f"{out}/access.log"
            if name in ("no-access-log", "no-ferry-filter", "router-only"):
                hcm.pop("access_log", None)
            if name == "text-log":
                for log in hcm.get("access_log", []):
                    fmt = log["typed_config"]["log_format"]
                    if "json_format" not in fmt:
                        continue  # (the listeners share one access log: changed once)
                    fields = fmt.pop("json_format")
                    fmt["text_format_source"] = {"inline_string": " ".join(f"{k}={v}" for k, v in fields.items()) + "\n"}
            if name in ("no-client-rtt", "no-ferry-filter", "router-only"):
                hcm.pop("early_header_mutation_extensions", None)
            filters = hcm["http_filters"]
            if name == "no-ferry-filter":
                filters[:] = [h for h in filters if h["name"] != "ferry"]
            if name == "native":
                for h in filters:
                    # (the listeners share one filter list: replaced once)
                    if h["name"] == "ferry" and "config" in h["typed_config"]:
                        settings = h["typed_config"]["config"]["configuration"]["value"]
                        h["typed_config"] = {
                            "@type": "type.googleapis.com/envoy.extensions.filters.http.dynamic_modules.v3.DynamicModuleFilter",
                            "dynamic_module_config": {"name": "ferry_filter_native", "do_not_close": True},
                            "filter_name": "ferry",
                            "filter_config": {
                                "@type": "type.googleapis.com/google.protobuf.StringValue",
                                "value": json.dumps(settings),
                            },
                        }
            if name == "no-hold":
                for h in filters:
                    if h["name"] == "ferry":
                        settings = h["typed_config"]["config"]["configuration"]["value"]
                        settings["header_hold"] = "off"
                        settings["session_affinity"] = False
            if name == "only-ferry-filter":
                filters[:] = [h for h in filters if h["name"] in ("ferry", "envoy.filters.http.router")]
            if name == "router-only":
                filters[:] = [h for h in filters if h["name"] == "envoy.filters.http.router"]
yaml.safe_dump(doc, open(dst, "w"), sort_keys=False)
PY
}

# measure NAME PROTO: one load run against that variant over HTTP/2 (h2load) or HTTP/3
# (ferry-h3 --load, quinn: h2load here has no QUIC); prints "qps envoy shim mysql" (µs/request).
measure() {
  local name=$1 proto=$2 body=$DIR/select1.bin ct=application/proto pid e0 s0 m0 out
  [ "$name" = full ] && body=$DIR/select1.json ct=application/json
  ENVOY_DYNAMIC_MODULES_SEARCH_PATH="$LT/../target/release" \
    "$ENVOY" -c "$DIR/$name.yaml" --disable-hot-restart --log-level error >"$DIR/$name.log" 2>&1 &
  pid=$!
  for _ in $(seq 100); do curl -sf -o /dev/null "http://127.0.0.1:$((PORT + 1))/ready" && break; sleep 0.1; done
  local load
  if [ "$proto" = h3 ]; then
    local fmt=()
    [ "$name" = full ] || fmt=(--proto)
    load=(env FERRY_PORT="$PORT" "$H3" "${fmt[@]}" --load "$C")
  else
    load=(h2load -c "$C" -m 1 -d "$body" -H "content-type: $ct" -H "$AUTH"
      "https://$FERRY_HOST:$PORT/psdb.v1alpha1.Database/Execute" -n)
  fi
  # run N: N requests (ferry-h3 takes the SQL after N)
  run() { if [ "$proto" = h3 ]; then "${load[@]}" "$1" 'SELECT 1'; else "${load[@]}" "$1"; fi; }
  run 2000 >/dev/null 2>&1 # warm: connections, pools, the VM's JIT
  local shim mysql
  shim=$(cat "$FERRY_RUN_DIR/pids/shim.pid") mysql=$(cat "$FERRY_RUN_DIR/pids/mysql.pid")
  e0=$(ticks "$pid") s0=$(ticks "$shim") m0=$(ticks "$mysql")
  out=$(run "$N" 2>&1)
  local e1 s1 m1
  e1=$(ticks "$pid") s1=$(ticks "$shim") m1=$(ticks "$mysql")
  kill "$pid"; wait "$pid" 2>/dev/null || true
  grep -q "status codes: $N 2xx" <<<"$out" || { echo "$name $proto: not every request succeeded:" >&2; grep -E 'status codes|requests:|rror' <<<"$out" >&2; exit 1; }
  python3 - "$out" "$N" "$(getconf CLK_TCK)" $((e1 - e0)) $((s1 - s0)) $((m1 - m0)) <<'PY'
import re, sys
out, n, hz = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
qps = float(re.search(r"finished in [\d.]+\w+, ([\d.]+) req/s", out).group(1))
print(qps, *(int(t) * 1e6 / hz / n for t in sys.argv[4:7]))
PY
}

# The runs: every variant over HTTP/2, those in H3_VARIANTS over HTTP/3 too.
RUNS=()
for v in $VARIANTS; do
  RUNS+=("$v/h2")
  if [[ " $H3_VARIANTS " == *" $v "* ]]; then RUNS+=("$v/h3"); fi
done
for v in $VARIANTS; do variant "$v"; done
declare -A runs
for r in $(seq "$ROUNDS"); do
  for run in "${RUNS[@]}"; do
    res=$(measure "${run%/*}" "${run#*/}")
    runs[$run]="${runs[$run]:-}$res;"
    echo "  round $r $run: $(awk '{ printf "%.0f req/s, us/req envoy %.1f shim %.1f mysql %.1f", $1, $2, $3, $4 }' <<<"$res")" >&2
  done
done
{
  echo "| variant | protocol | req/s | × router-only | Envoy µs/req | × router-only | shim µs/req | MariaDB µs/req |"
  echo "|---|---|---|---|---|---|---|---|"
  OUT_JSON="${OUT_MD%.md}.json" python3 - "${RUNS[@]}" <<PY
import json, os, statistics, sys
runs = {$(for run in "${RUNS[@]}"; do printf '"%s": "%s", ' "$run" "${runs[$run]}"; done)}
med, spread = {}, {}
for key, text in runs.items():
    rows = [list(map(float, r.split())) for r in text.split(";") if r.strip()]
    med[key] = [statistics.median(col) for col in zip(*rows)]
    spread[key] = max(r[1] for r in rows) - min(r[1] for r in rows)
names = {"h2": "HTTP/2", "h3": "HTTP/3"}
for key in sys.argv[1:]:
    name, proto = key.split("/")
    m, floor = med[key], med.get("router-only/" + proto)
    qx = f"{m[0] / floor[0]:.2f}" if floor else "–"
    ex = f"{m[1] / floor[1]:.2f}" if floor else "–"
    print(f"| {name} | {names[proto]} | {m[0]:,.0f} | {qx} | {m[1]:.0f} (±{spread[key] / 2:.0f}) | {ex} | {m[2]:.0f} | {m[3]:.0f} |")
if os.environ["OUT_JSON"].endswith(".json") and not os.environ["OUT_JSON"].startswith("/dev/"):
    json.dump({k: dict(zip(("qps", "envoy_us", "shim_us", "mysql_us"), v)) for k, v in med.items()},
              open(os.environ["OUT_JSON"], "w"), indent=1)
PY
  echo
  echo "Medians of $ROUNDS interleaved rounds, $N requests each, $C connections of one request at a time"
  echo "(HTTP/2: h2load, TLS 1.3; HTTP/3: ferry-h3 --load, quinn), warm SELECT 1; CPU = utime + stime of"
  echo "each process ÷ requests (±: half the spread of Envoy's); × router-only: against the bare"
  echo "router of the same protocol in the same run (req/s: ≥ 0.8 is the goal; Envoy µs: ≤ 1.25)."
} > "$OUT_MD"
