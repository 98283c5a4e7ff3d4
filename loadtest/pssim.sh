#!/usr/bin/env bash
# Ferry beside ps-http-sim, the psdb simulator (github.com/mattrobenolt/ps-http-sim; issue 30, docs/benchmarks/ps-http-sim.md):
# warm `SELECT 1` at PSSIM_VUS (32) closed-loop clients for PSSIM_DURATION (10s), Connect JSON
# (what @planetscale/database sends), each client on one connection carrying its psdb session
# from answer to answer; (a) Ferry over HTTP/2 with TLS 1.3 (the stack's Envoy,
# https://$FERRY_HOST:$FERRY_PORT), (b) ps-http-sim over h2c (it serves no TLS). The same
# client for both: k6 with our extension's HTTP/2 client (k6/pssim.js). ROUNDS (3) rounds,
# the order reversed every other round; req/s, p50, errors, and CPU µs per request of Envoy,
# the shim, ps-http-sim, MariaDB and k6 (/proc utime + stime), and Ferry ÷ ps-http-sim req/s.
#   PSSIM_ADDR=host:port loadtest/pssim.sh [OUT.md]
# A stack must be up (scripts/stack.sh, same env), and ps-http-sim listening at PSSIM_ADDR,
# pointed at that stack's MariaDB and database (its MySQL connections are made at the first
# request, so it may start before the stack), e.g.
#   ps-http-sim -listen-addr=127.0.0.1 -listen-port=47080 -mysql-addr=127.0.0.1 \
#     -mysql-port=$FERRY_MYSQL_PORT -mysql-dbname=$FERRY_MYSQL_DATABASE -log-level=warn
# Knobs: PSSIM_PID (else the process listening on PSSIM_ADDR's port), PSSIM_VUS, PSSIM_DURATION,
# ROUNDS, PSSIM_WARMUP (2s per side before the rounds, not measured; 0 = none), PSSIM_DIR (k6
# summaries and logs; $FERRY_RUN_DIR/pssim). ps-http-sim's threads are reniced to Envoy's nice
# when they differ (bench.sh runs the stack at RUN_NICE). Exit 1 on any error (non-2xx, psdb
# error, a session not carried) or a run without a summary; 2 when the stack, k6 or ps-http-sim is missing.
# shellcheck source-path=SCRIPTDIR
set -euo pipefail
LT="$(cd "$(dirname "$0")" && pwd)"
source "$LT/../scripts/env.sh"
source "$LT/lib/cpu.sh"
OUT_MD="${1:-/dev/stdout}"
: "${PSSIM_ADDR:?PSSIM_ADDR=host:port of a running ps-http-sim (loadtest/pssim.sh header)}"
VUS="${PSSIM_VUS:-32}" DURATION="${PSSIM_DURATION:-10s}" ROUNDS="${ROUNDS:-3}" WARMUP="${PSSIM_WARMUP:-2s}"
DIR="${PSSIM_DIR:-$FERRY_RUN_DIR/pssim}"
PIDS="$FERRY_RUN_DIR/pids" CA="$FERRY_RUN_DIR/certs/ca.pem" K6="$LT/bin/k6"
FERRY_URL="https://$FERRY_HOST:$FERRY_PORT" PSSIM_URL="http://$PSSIM_ADDR"
for p in envoy shim mysql; do
  [ -s "$PIDS/$p.pid" ] || { echo "no stack in $FERRY_RUN_DIR ($PIDS/$p.pid missing; scripts/stack.sh up)" >&2; exit 2; }
done
ENVOY_PID=$(cat "$PIDS/envoy.pid") SHIM_PID=$(cat "$PIDS/shim.pid") MYSQL_PID=$(cat "$PIDS/mysql.pid")
if command -v go >/dev/null; then "$LT/build-k6.sh"; fi # k6 with the extension's h2c (idempotent)
[ -x "$K6" ] || { echo "no $K6 (loadtest/build-k6.sh needs Go)" >&2; exit 2; }
if [ -z "${PSSIM_PID:-}" ]; then
  PSSIM_PID=$(ss -Hltnp "sport = :${PSSIM_ADDR##*:}" | grep -o 'pid=[0-9]*' | head -1 | cut -d= -f2 || true)
  [ -n "$PSSIM_PID" ] || { echo "nothing listens on $PSSIM_ADDR (set PSSIM_PID if ss cannot see it)" >&2; exit 2; }
fi
[ -r "/proc/$PSSIM_PID/stat" ] || { echo "no process $PSSIM_PID" >&2; exit 2; }
mkdir -p "$DIR/runs" "$DIR/logs"
rm -f "$DIR"/runs/*.json

# One call each, to fail early and clearly: a gateway that is down, or a ps-http-sim that
# cannot reach MariaDB (it answers 200 with a psdb error then, or 500).
AUTH="authorization: Basic $(printf '%s:%s' "$FERRY_MYSQL_USER" "$FERRY_MYSQL_PASSWORD" | base64 -w0)"
probe() { # probe NAME URL CURL-ARGS...
  local name=$1 url=$2 body; shift 2
  body=$(curl -sS --max-time 10 "$@" -H 'content-type: application/json' -H "$AUTH" \
    -d '{"query":"SELECT 1"}' -w '\n%{http_code}' "$url/psdb.v1alpha1.Database/Execute") \
    || { echo "$name at $url: no answer" >&2; exit 2; }
  if [ "${body##*$'\n'}" != 200 ] || grep -q '"error"' <<<"$body"; then
    echo "$name at $url failed SELECT 1: $body" >&2; exit 2
  fi
}
probe Ferry "$FERRY_URL" --http2 --cacert "$CA"
probe ps-http-sim "$PSSIM_URL" --http2-prior-knowledge

# The same scheduling priority for both gateways: ps-http-sim's threads at Envoy's nice.
nice_of() { sed 's/^.*) //' "/proc/$1/stat" | awk '{ print $17 }'; }
if [ "$(nice_of "$PSSIM_PID")" != "$(nice_of "$ENVOY_PID")" ]; then
  echo "ps-http-sim (pid $PSSIM_PID): reniced $(nice_of "$PSSIM_PID") -> $(nice_of "$ENVOY_PID"), Envoy's" >&2
  for t in /proc/"$PSSIM_PID"/task/*; do renice -n "$(nice_of "$ENVOY_PID")" -p "${t##*/}" >/dev/null; done
fi

CPU_PIDS="envoy:$ENVOY_PID shim:$SHIM_PID pssim:$PSSIM_PID mysql:$MYSQL_PID host:all"
url_of() { if [ "$1" = ferry ]; then echo "$FERRY_URL"; else echo "$PSSIM_URL"; fi; }

# k6run SIDE NAME DURATION: one k6 run against that side; its summary in $DIR/runs/NAME.json.
k6run() {
  local side=$1 name=$2 duration=$3
  SSL_CERT_FILE="$CA" "$K6" run --quiet --no-color --log-output=stderr \
    -e CLIENT=h2 -e FERRY_URL="$(url_of "$side")" -e CA="$CA" \
    -e DB_USER="$FERRY_MYSQL_USER" -e DB_PASSWORD="$FERRY_MYSQL_PASSWORD" \
    -e VUS="$VUS" -e DURATION="$duration" -e SUMMARY="$DIR/runs/$name.json" \
    -e LABELS="{\"side\":\"$side\"}" "$LT/k6/pssim.js" >"$DIR/logs/$name.out" 2>"$DIR/logs/$name.log" \
    || echo "  k6 failed for $name: see $DIR/logs/$name.log" >&2
}

# measure SIDE ROUND: one measured run, with the CPU of every process around it.
measure() {
  local side=$1 name="$1.r$2" cpu0 cpu1 k6a k6b
  cpu0=$(cpu_snap)
  children_ticks k6a
  k6run "$side" "$name" "$DURATION"
  children_ticks k6b
  cpu1=$(cpu_snap)
  [ -s "$DIR/runs/$name.json" ] || { echo "  no summary from $name: see $DIR/logs/$name.log" >&2; MISSING=$((MISSING + 1)); return; }
  echo "  round $2 $side: $(cat "$DIR/logs/$name.out")" >&2
  cpu_note "$DIR/runs/$name.json" "$cpu0 k6:$k6a" "$cpu1 k6:$k6b" us >&2
}

LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
if [ "$WARMUP" != 0 ]; then
  for side in ferry pssim; do k6run "$side" "warmup-$side" "$WARMUP"; done
  rm -f "$DIR"/runs/warmup-*.json
fi
MISSING=0
for r in $(seq "$ROUNDS"); do
  order="ferry pssim"
  [ $((r % 2)) = 1 ] || order="pssim ferry"
  for side in $order; do measure "$side" "$r"; done
done
LOAD1=$(cut -d' ' -f1-3 /proc/loadavg)

report() {
  python3 - "$DIR/runs" "$ROUNDS" "$VUS" "$DURATION" "$LOAD0" "$LOAD1" \
    "$(git -C "$LT/.." rev-parse --short HEAD 2>/dev/null || echo unknown)" \
    "$(tr '\0' ' ' <"/proc/$PSSIM_PID/cmdline")" "$FERRY_URL" "$PSSIM_URL" <<'PY'
import glob, json, os, statistics, sys
runs, rounds, vus, duration, load0, load1, commit, cmd, furl, purl = sys.argv[1:11]
side = {"ferry": [], "pssim": []}
for path in sorted(glob.glob(f"{runs}/*.r*.json")):
    d = json.load(open(path))
    m = d["metrics"]
    v = lambda k, s: m.get(k, {}).get("values", {}).get(s, 0)
    side[os.path.basename(path).split(".")[0]].append({
        "round": int(path.rsplit(".r", 1)[1].split(".")[0]),
        "calls": v("ferry_calls", "count"), "errors": v("ferry_errors", "count"),
        "dur": d["state"]["testRunDurationMs"] / 1000, "p50": v("ferry_ms", "p(50)"),
        "p99": v("ferry_ms", "p(99)"), "cpu": d.get("cpu_ms_per_call", {})})
def agg(rs):
    calls = sum(r["calls"] for r in rs) or 1
    cpu = {k: sum(r["cpu"].get(k, 0) * r["calls"] for r in rs) / calls * 1000 for k in rs[0]["cpu"]}
    return {"qps": sum(r["calls"] for r in rs) / (sum(r["dur"] for r in rs) or 1),
            "qps_r": [r["calls"] / r["dur"] for r in rs], "errors": sum(r["errors"] for r in rs),
            "p50": statistics.median(r["p50"] for r in rs), "p50_r": [r["p50"] for r in rs],
            "p99": statistics.median(r["p99"] for r in rs), "cpu": cpu}
if not side["ferry"] or not side["pssim"]:
    print("no complete runs"); sys.exit(0)
F, P = agg(side["ferry"]), agg(side["pssim"])
rng = lambda xs, f: f" ({f(min(xs))}–{f(max(xs))})" if len(xs) > 1 else ""
print("| gateway | req/s | p50 ms | p99 ms | gateway µs/req | Envoy µs | shim µs | ps-http-sim µs | MariaDB µs | k6 µs | other µs | errors |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for name, r, gw in (("Ferry: Envoy + shim, HTTP/2 + TLS 1.3", F, ("envoy", "shim")),
                    ("ps-http-sim, h2c (no TLS)", P, ("pssim",))):
    c = r["cpu"]
    other = c["host"] - sum(c[k] for k in ("envoy", "shim", "pssim", "mysql", "k6"))
    print(f"| {name} | {r['qps']:,.0f}{rng(r['qps_r'], lambda x: f'{x:,.0f}')} | "
          f"{r['p50']:.3f}{rng(r['p50_r'], lambda x: f'{x:.3f}')} | {r['p99']:.2f} | "
          f"{sum(c[k] for k in gw):.0f} | {c['envoy']:.0f} | {c['shim']:.0f} | {c['pssim']:.0f} | "
          f"{c['mysql']:.0f} | {c['k6']:.0f} | {other:.0f} | {r['errors']:.0f} |")
pairs = {}
for s, rs in side.items():
    for r in rs:
        pairs.setdefault(r["round"], {})[s] = r["calls"] / r["dur"]
per = [p["ferry"] / p["pssim"] for p in pairs.values() if "ferry" in p and "pssim" in p and p["pssim"]]
ratio = F["qps"] / P["qps"] if P["qps"] else 0
if os.environ.get("OUT_JSON"):  # the goals' figures, for bench.sh cost's report
    json.dump({"ratio": ratio, "ferry_qps": F["qps"], "pssim_qps": P["qps"], "vus": int(vus),
               "ferry_gateway_us": F["cpu"]["envoy"] + F["cpu"]["shim"], "pssim_us": P["cpu"]["pssim"]},
              open(os.environ["OUT_JSON"], "w"), indent=1)
print()
print(f"**Ferry ÷ ps-http-sim req/s: {ratio:.2f}×**" + (f" (per round {', '.join(f'{x:.2f}' for x in per)})" if per else "")
      + f"; goal ≥ 1.5×: {'met' if ratio >= 1.5 else 'missed'}.")
print()
print(f"Warm `SELECT 1`, {vus} closed-loop clients, {rounds} interleaved rounds of {duration} per side, each client one "
      f"connection carrying its psdb session (Connect JSON, k6 + the Ferry extension's Go HTTP/2 client: "
      f"{furl} over TLS 1.3, {purl} over h2c). req/s = all calls ÷ all run time (the rounds' range in brackets); "
      f"p50 = the median of the rounds' (their range), p99 likewise; CPU = utime + stime (/proc) ÷ calls, all rounds; "
      f"gateway = Envoy + shim for Ferry, the ps-http-sim process for it; the other side's gateway idles (its "
      f"column ≈ 0); other = the host's busy time − these processes (softirq, other people's work). "
      f"Ferry at {commit}; ps-http-sim ran as `{cmd.strip()}`. Load average before / after: {load0} / {load1}.")
PY
}
json_out=""
case $OUT_MD in /dev/*) ;; *.md) json_out="${OUT_MD%.md}.json" ;; esac
OUT_JSON="$json_out" report > "$OUT_MD"
errors=$(python3 -c '
import glob, json, sys
print(int(sum(json.load(open(p))["metrics"].get("ferry_errors", {}).get("values", {}).get("count", 0)
              for p in glob.glob(sys.argv[1] + "/*.r*.json"))))' "$DIR/runs")
if [ "$errors" != 0 ] || [ "$MISSING" != 0 ]; then
  echo "pssim.sh: $errors error(s), $MISSING run(s) without a summary: see $DIR/logs" >&2
  exit 1
fi
