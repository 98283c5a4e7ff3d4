#!/usr/bin/env bash
# Where Envoy's CPU per warm `SELECT 1` goes (issue 11, docs/benchmarks/cost.md "Where Envoy's CPU goes"):
# Envoy variants, each started beside a running stack's shim and MariaDB on ports of its
# own, driven by h2load (HTTP/2 over TLS 1.3, BREAKDOWN_C connections, one request at a
# time on each), with the CPU µs per request of that Envoy, the shim and MariaDB (/proc).
#   loadtest/envoy-breakdown.sh [OUT.md]   a stack must be up (scripts/stack.sh, same env)
# Variants, all made from the stack's rendered .run/envoy.yaml:
#   full              the shipped config, Connect JSON requests
#   full-proto        the shipped config, Connect proto requests (no JSON work)
#   no-client-rtt     full-proto without the early header mutation that gives the filter the
#                     client's distance (x-ferry-client-rtt-ms and x-ferry-client-addr:
#                     compression.min_rtt_ms, near_networks)
#   no-access-log     full-proto without the access log
#   no-hold           full-proto with the filter's header hold off (header_hold "off",
#                     session_affinity false: the mode meshes without the hold run; no
#                     class routing, no affinity)
#   native            full-proto with the Ferry filter as an Envoy dynamic module
#                     (envoy/native.yaml: the same core, native; make native)
#   no-ferry-filter   full-proto without the Ferry wasm filter (Envoy's other filters stay;
#                     the request is already the shim's canonical form)
#   router-only       no HTTP filter but the router: Envoy as a bare TLS h2 -> h2c proxy
# (no-ferry-filter and router-only drop the header mutation too: it serves the filter.)
# So: the Ferry filter = full-proto - no-ferry-filter; Envoy's floor = router-only.
# Knobs: BREAKDOWN_N (requests per run, 20000), BREAKDOWN_C (16), BREAKDOWN_ROUNDS (3, interleaved),
# BREAKDOWN_PORT (FERRY_PORT + 1000; +1 for its admin), BREAKDOWN_VARIANTS (a subset).
set -euo pipefail
LT="$(cd "$(dirname "$0")" && pwd)"
source "$LT/../scripts/env.sh"
command -v h2load >/dev/null || { echo "h2load is missing (apt install nghttp2-client; scripts/install.sh does)" >&2; exit 2; }
OUT_MD="${1:-/dev/stdout}"
N="${BREAKDOWN_N:-20000}" C="${BREAKDOWN_C:-16}" ROUNDS="${BREAKDOWN_ROUNDS:-3}"
PORT="${BREAKDOWN_PORT:-$((FERRY_PORT + 1000))}"
VARIANTS="${BREAKDOWN_VARIANTS:-full full-proto native no-client-rtt no-access-log no-hold no-ferry-filter router-only}"
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
            if name == "router-only":
                filters[:] = [h for h in filters if h["name"] == "envoy.filters.http.router"]
yaml.safe_dump(doc, open(dst, "w"), sort_keys=False)
PY
}

ticks() { sed 's/^.*) //' "/proc/$1/stat" | awk '{ print $12 + $13 }'; }

# measure NAME: one h2load run against that variant; prints "qps envoy shim mysql" (µs/request).
measure() {
  local name=$1 body=$DIR/select1.bin ct=application/proto pid e0 s0 m0 out
  [ "$name" = full ] && body=$DIR/select1.json ct=application/json
  ENVOY_DYNAMIC_MODULES_SEARCH_PATH="$LT/../target/release" \
    "$ENVOY" -c "$DIR/$name.yaml" --disable-hot-restart --log-level error >"$DIR/$name.log" 2>&1 &
  pid=$!
  for _ in $(seq 100); do curl -sf -o /dev/null "http://127.0.0.1:$((PORT + 1))/ready" && break; sleep 0.1; done
  local h2=(h2load -c "$C" -m 1 -d "$body" -H "content-type: $ct" -H "$AUTH"
    "https://$FERRY_HOST:$PORT/psdb.v1alpha1.Database/Execute")
  "${h2[@]}" -n 2000 >/dev/null 2>&1 # warm: connections, pools, the VM's JIT
  local shim mysql
  shim=$(cat "$FERRY_RUN_DIR/pids/shim.pid") mysql=$(cat "$FERRY_RUN_DIR/pids/mysql.pid")
  e0=$(ticks "$pid") s0=$(ticks "$shim") m0=$(ticks "$mysql")
  out=$("${h2[@]}" -n "$N" 2>&1)
  local e1 s1 m1
  e1=$(ticks "$pid") s1=$(ticks "$shim") m1=$(ticks "$mysql")
  kill "$pid"; wait "$pid" 2>/dev/null || true
  grep -q "status codes: $N 2xx" <<<"$out" || { echo "$name: not every request succeeded:" >&2; grep -E 'status codes|requests:' <<<"$out" >&2; exit 1; }
  python3 - "$out" "$N" "$(getconf CLK_TCK)" $((e1 - e0)) $((s1 - s0)) $((m1 - m0)) <<'PY'
import re, sys
out, n, hz = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
qps = float(re.search(r"finished in [\d.]+\w+, ([\d.]+) req/s", out).group(1))
print(qps, *(int(t) * 1e6 / hz / n for t in sys.argv[4:7]))
PY
}

for v in $VARIANTS; do variant "$v"; done
declare -A runs
for r in $(seq "$ROUNDS"); do
  for v in $VARIANTS; do
    res=$(measure "$v")
    runs[$v]="${runs[$v]:-}$res;"
    echo "  round $r $v: $(awk '{ printf "%.0f req/s, us/req envoy %.1f shim %.1f mysql %.1f", $1, $2, $3, $4 }' <<<"$res")" >&2
  done
done
{
  echo "| variant | req/s | Envoy µs/req | shim µs/req | MariaDB µs/req |"
  echo "|---|---|---|---|---|"
  for v in $VARIANTS; do
    python3 - "$v" "${runs[$v]}" <<'PY'
import statistics, sys
rows = [list(map(float, r.split())) for r in sys.argv[2].split(";") if r.strip()]
med = [statistics.median(col) for col in zip(*rows)]
spread = max(r[1] for r in rows) - min(r[1] for r in rows)
print(f"| {sys.argv[1]} | {med[0]:,.0f} | {med[1]:.0f} (±{spread / 2:.0f}) | {med[2]:.0f} | {med[3]:.0f} |")
PY
  done
  echo
  echo "Medians of $ROUNDS interleaved rounds, $N requests each, h2load -c $C -m 1 (HTTP/2, TLS 1.3),"
  echo "warm SELECT 1; CPU = utime + stime of each process ÷ requests (±: half the spread of Envoy's)."
} > "$OUT_MD"
