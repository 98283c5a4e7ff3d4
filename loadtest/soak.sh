#!/usr/bin/env bash
# Soak (issue 29; docs/benchmarks/soak.md "Soak"): a stack of its own under a moderate, mixed
# load for SOAK_MINUTES (30), watching Envoy's, the shim's and MariaDB's memory and file
# descriptors for leaks.
#   soak.sh          run (make soak; SOAK_MINUTES=N)
#   soak.sh down     stop a soak stack left by an interrupted run
#   soak.sh report DIR   re-render DIR/summary.md from DIR/samples.csv, runs/ and meta.env
# The load (k6/soak.js): one k6 per protocol, HTTP/2 and HTTP/3, each running every kind of
# call as its own constant-arrival-rate scenario: reads (kept connections), reads on a fresh
# connection per call (with and without TLS resumption / 0-RTT), writes, transactions (the
# session carried), compressed reads and writes (gzip, zstd, snappy, s2), Connect proto
# reads, and (HTTP/2) StreamExecute in Connect streaming JSON; ~35 calls/s per protocol at
# SOAK_RATE=1. Every SOAK_SAMPLE seconds (10) the RSS (VmRSS) and open fds of each process,
# and its CPU ticks, go to samples.csv.
# Verdict (exit 1 on FAIL): zero errors of every kind (and every kind made calls); each
# process's fd count at the end within max(SOAK_FD_MARGIN (10), 10 %) of its count after
# warm-up (the first SOAK_WARMUP_PCT (20) % of the run); its RSS after warm-up, fitted by least
# squares, grows by at most SOAK_RSS_PCT (10) % over the rest of the run (the slope, MiB/h,
# is reported either way). Results: loadtest/results/<UTC timestamp>-soak/ (samples.csv,
# summary.md, runs/*.json k6 summaries, logs/).
# Knobs: SOAK_MINUTES, SOAK_RATE (× every kind's rate), SOAK_SAMPLE, SOAK_WARMUP_PCT,
# SOAK_FD_MARGIN, SOAK_RSS_PCT, SOAK_NICE (10: the stack and k6 run at this nice; "" = leave).
set -euo pipefail
LT="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(dirname "$LT")"
PATH="$PATH:/usr/sbin:/sbin"
export K6_NO_USAGE_REPORT=true

# The soak's own stack instance: run dir and ports of its own (scripts/env.sh).
export FERRY_RUN_DIR="$ROOT/.run/soak" FERRY_HOST=127.0.0.1 FERRY_MYSQL_HOST=127.0.0.1
export FERRY_PORT="${SOAK_PORT:-38443}" FERRY_ADMIN_PORT="${SOAK_ADMIN_PORT:-39921}"
export FERRY_SHIM_ADDR="127.0.0.1:${SOAK_SHIM_PORT:-38181}" FERRY_MYSQL_PORT="${SOAK_MYSQL_PORT:-38306}"
export FERRY_SHIM_UNIX="" FERRY_MYSQL_SOCKET="$FERRY_RUN_DIR/mysql.sock"
export FERRY_EARLY_DATA=true
# Compress answers for clients at any distance (loopback too), as the benches do.
export FERRY_COMPRESS_MIN_RTT_MS=0
STACK="$ROOT/scripts/stack.sh"
NICE=${SOAK_NICE-10}
NICE_CMD=(); [ -z "$NICE" ] || NICE_CMD=(nice -n "$NICE")

stack_down() { "$STACK" down >/dev/null 2>&1 || true; }
case "${1:-}" in
  down) stack_down; exit 0 ;;
  report) [ -d "${2:-}" ] || { echo "usage: soak.sh report DIR" >&2; exit 2; } ;;
  "") ;;
  *) sed -n '2,/^set -euo/p' "$0" | sed '$d' >&2; exit 2 ;;
esac

# report DIR: the summary (calls and errors per kind, RSS and fds per process, the verdict)
# into DIR/summary.md and stdout; exit 1 on FAIL.
report() {
  local out=$1
  # shellcheck disable=SC1091
  source "$out/meta.env" # COMMIT, MINUTES, STARTED, BINARIES
  python3 - "$out" "$COMMIT" "$MINUTES" "$(getconf CLK_TCK)" \
    "${SOAK_WARMUP_PCT:-20}" "${SOAK_FD_MARGIN:-10}" "${SOAK_RSS_PCT:-10}" "$STARTED" "$BINARIES" <<'PY'
import csv, json, os, sys
out, commit, minutes, hz = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
warm_pct, fd_margin, rss_pct = float(sys.argv[5]), int(sys.argv[6]), float(sys.argv[7])
rows = list(csv.DictReader(open(os.path.join(out, "samples.csv"))))
load = [r for r in rows if r["phase"] == "load"]
idle = {r["process"]: r for r in rows if r["phase"] == "idle"}
fails, flags, lines = [], [], []
p = lines.append

p(f"# Soak {os.path.basename(out)}\n")
p(f"started {sys.argv[8]}; HEAD at the start {commit}; {minutes} min requested; samples every ~10 s; "
  f"warm-up = first {warm_pct:g} % of the run\n")
p(f"binaries (modified): {sys.argv[9]}\n")

# --- calls and errors per kind ---
kinds = ["read", "read_fresh", "write", "txn", "compressed", "proto", "stream"]
p("| client | kind | calls | errors | p50 ms | p99 ms | max ms | dropped iterations |")
p("|---|---|---:|---:|---:|---:|---:|---:|")
tot_calls = tot_err = 0
for client in ("h2", "h3"):
    path = os.path.join(out, "runs", f"soak.{client}.json")
    if not os.path.exists(path):
        fails.append(f"no k6 summary for {client}")
        continue
    m = json.load(open(path))["metrics"]
    val = lambda name, stat="count": m.get(name, {}).get("values", {}).get(stat, 0)
    for k in kinds:
        if f"soak_calls_{k}" not in m and not (k == "stream" and client == "h3"):
            fails.append(f"{client} {k}: no calls")
            p(f"| {client} | {k} | 0 | – | | | | |")
            continue
        if f"soak_calls_{k}" not in m:
            continue
        c, e = int(val(f"soak_calls_{k}")), int(val(f"soak_errors_{k}"))
        tot_calls += c; tot_err += e
        t = m.get(f"soak_ms_{k}", {}).get("values", {})
        f = lambda s: f"{t[s]:.1f}" if s in t else "–"
        p(f"| {client} | {k} | {c:,} | {e} | {f('p(50)')} | {f('p(99)')} | {f('max')} | |")
        if e:
            fails.append(f"{client} {k}: {e} errors")
        if c == 0:
            fails.append(f"{client} {k}: no calls")
    dropped = int(val("dropped_iterations"))
    p(f"| {client} | (all) | | | | | | {dropped} |")
    extra = []
    if val("soak_answers_encoded"):
        extra.append(f"compressed answers that came back encoded: {int(val('soak_answers_encoded'))}")
    if val("soak_stream_rows"):
        extra.append(f"StreamExecute rows {int(val('soak_stream_rows')):,} in {int(val('soak_stream_messages')):,} messages")
    if val("h3_0rtt_accepted") or val("h3_0rtt_rejected") or val("h3_0rtt_425"):
        extra.append(f"0-RTT accepted {int(val('h3_0rtt_accepted'))}, rejected {int(val('h3_0rtt_rejected'))}, 425 {int(val('h3_0rtt_425'))}")
    if val("tls_resumed"):
        extra.append(f"TLS resumed {int(val('tls_resumed'))}")
    if extra:
        lines.append("")
        p(f"{client}: " + "; ".join(extra) + "\n")
p(f"\ntotal: {tot_calls:,} calls, {tot_err} errors\n")

# --- processes ---
def fit(xs, ys):
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0
    return b, my - b * mx

p("| process | RSS after warm-up MiB | RSS end MiB | RSS min–max MiB | slope MiB/h | fitted growth | fds after warm-up | fds end | fds min–max | fds idle | CPU % (avg) | verdict |")
p("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
names = {"envoy": "Envoy", "shim": "shim", "mysql": "MariaDB"}
for proc in ("envoy", "shim", "mysql"):
    s = [r for r in load if r["process"] == proc and r["rss_kib"]]
    if len(s) < 3:
        fails.append(f"{proc}: {len(s)} samples"); continue
    t = [int(r["elapsed_s"]) for r in s]
    span = t[-1] - t[0]
    cut = t[0] + span * warm_pct / 100
    after = [r for r in s if int(r["elapsed_s"]) >= cut]
    if len(after) < 2:
        after = s[-2:]
    xs = [int(r["elapsed_s"]) / 3600 for r in after]
    rss = [int(r["rss_kib"]) / 1024 for r in after]
    slope, icpt = fit(xs, rss)
    start_fit = icpt + slope * xs[0]
    growth = slope * (xs[-1] - xs[0])
    gpct = 100 * growth / start_fit if start_fit else 0
    fds_all = [int(r["fds"]) for r in s]
    fd0, fd1 = int(after[0]["fds"]), int(after[-1]["fds"])
    margin = max(fd_margin, round(fd0 * 0.10))
    cpu = (int(s[-1]["cpu_ticks"]) - int(s[0]["cpu_ticks"])) / hz / span * 100 if span else 0
    v = []
    if fd1 > fd0 + margin:
        v.append(f"FAIL fds +{fd1 - fd0} (> {margin})")
        fails.append(f"{proc}: fds {fd0} → {fd1} (margin {margin})")
    if gpct > rss_pct:
        v.append(f"FLAG RSS +{gpct:.1f} %")
        flags.append(f"{proc}: RSS grows {gpct:.1f} % after warm-up ({slope:+.1f} MiB/h)")
    rss_all = [int(r["rss_kib"]) / 1024 for r in s]
    idl = idle.get(proc, {}).get("fds", "–")
    p(f"| {names[proc]} | {rss[0]:.1f} | {rss[-1]:.1f} | {min(rss_all):.1f}–{max(rss_all):.1f} | {slope:+.2f} | "
      f"{growth:+.1f} MiB ({gpct:+.1f} %) | {fd0} | {fd1} | {min(fds_all)}–{max(fds_all)} | {idl} | {cpu:.1f} | {'; '.join(v) or 'ok'} |")
loads = [float(r["loadavg1"]) for r in load if r["process"] == "envoy"]
if loads:
    p(f"\nhost load average (1 min) during the run: {min(loads):.2f}–{max(loads):.2f} (2 cores shared)\n")
verdict = "FAIL" if fails or flags else "PASS"
p(f"\n**{verdict}**" + ("" if verdict == "PASS" else ": " + "; ".join(fails + flags)) + "\n")
open(os.path.join(out, "summary.md"), "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
sys.exit(1 if verdict == "FAIL" else 0)
PY
}
if [ "${1:-}" = report ]; then report "$2"; exit $?; fi

MINUTES="${SOAK_MINUTES:-30}"
SAMPLE="${SOAK_SAMPLE:-10}"
OUT="$LT/results/$(date -u +%Y%m%dT%H%M%SZ)-soak"
mkdir -p "$OUT/runs" "$OUT/logs"
CA="$FERRY_RUN_DIR/certs/ca.pem"
# What ran: HEAD and the binaries' times now, at the start (others may commit and rebuild meanwhile).
bin_time() { date -u -r "$1" +%FT%TZ 2>/dev/null || echo missing; }
cat >"$OUT/meta.env" <<EOF
COMMIT=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
MINUTES=$MINUTES
STARTED=$(date -u +%FT%TZ)
BINARIES="shim $(bin_time "${FERRY_SHIM_BIN:-$ROOT/target/release/ferry-shim}"), filter $(bin_time "${FERRY_WASM:-$ROOT/target/wasm32-wasip1/release/ferry_filter.wasm}")"
EOF

# Our ports must be free (a listener of anything else, or a soak stack left running).
busy=$(ss -ltnuH 2>/dev/null | awk '{ print $5 }' | grep -E ":(${FERRY_PORT}|${FERRY_ADMIN_PORT}|${FERRY_SHIM_ADDR##*:}|${FERRY_MYSQL_PORT})\$" || true)
if [ -n "$busy" ]; then
  echo "soak: ports in use: $(echo $busy); a soak stack left running? loadtest/soak.sh down" >&2
  ss -ltnup 2>/dev/null | grep -E ":(${FERRY_PORT}|${FERRY_ADMIN_PORT}|${FERRY_SHIM_ADDR##*:}|${FERRY_MYSQL_PORT})\b" >&2 || true
  exit 1
fi
# MariaDB's port (and ours) lie in Linux's ephemeral range: keep outgoing connections off them.
"$ROOT/scripts/reserve-ports.sh" "$FERRY_MYSQL_PORT" "$FERRY_PORT" "$FERRY_ADMIN_PORT" "${FERRY_SHIM_ADDR##*:}"

[ -x "$LT/bin/k6" ] || "$LT/build-k6.sh"

SAMPLER="" K6_PIDS=()
cleanup() {
  local p
  for p in "${K6_PIDS[@]}" $SAMPLER; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  stack_down
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "== soak: ${MINUTES} min, results in ${OUT#"$ROOT"/}"
mkdir -p "$FERRY_RUN_DIR"
"${NICE_CMD[@]}" "$STACK" up >"$OUT/logs/stack-up.log" 2>&1 || { cat "$OUT/logs/stack-up.log" >&2; exit 1; }
root_sql=(mariadb --defaults-file="$FERRY_RUN_DIR/mysql-root.cnf" --socket="$FERRY_MYSQL_SOCKET")
"${root_sql[@]}" ferry -e "
  DROP TABLE IF EXISTS soak_kv;
  CREATE TABLE soak_kv (k BIGINT PRIMARY KEY, v BIGINT NOT NULL, note TEXT) ENGINE=InnoDB;
  INSERT INTO soak_kv (k, v, note) SELECT b.seq + v.seq * 1000 + k.seq, 0, 'seed'
    FROM seq_0_to_500000_step_500000 b, seq_1_to_200 v, seq_0_to_99 k;"
# Every key a VU touches exists before the load (k6/soak.js: KEYBASE + VU × 1000 + 0…99, with
# KEYBASE 0 and 500000): statements on missing keys would take gap locks, and transactions
# inserting into the same gap deadlock (MariaDB error 1213) — a property of the load, not of Ferry.

declare -A PID
for name in envoy shim mysql; do PID[$name]=$(cat "$FERRY_RUN_DIR/pids/$name.pid"); done
echo "  pids: envoy ${PID[envoy]}, shim ${PID[shim]}, mariadb ${PID[mysql]}"

# sample PHASE: one CSV row per process.
CSV="$OUT/samples.csv"
echo "ts_utc,elapsed_s,phase,process,pid,rss_kib,fds,threads,cpu_ticks,loadavg1" >"$CSV"
T0=$(date +%s)
sample() {
  local now name pid rss fds thr ticks load
  now=$(date +%s); read -r load _ </proc/loadavg
  for name in envoy shim mysql; do
    pid=${PID[$name]}
    rss=$(awk '/^VmRSS:/ { print $2 }' "/proc/$pid/status" 2>/dev/null || echo "")
    thr=$(awk '/^Threads:/ { print $2 }' "/proc/$pid/status" 2>/dev/null || echo "")
    fds=$(ls "/proc/$pid/fd" 2>/dev/null | wc -l)
    ticks=$(sed 's/^.*) //' "/proc/$pid/stat" 2>/dev/null | awk '{ print $12 + $13 }' || echo "")
    echo "$(date -u -d "@$now" +%FT%TZ),$((now - T0)),$1,$name,$pid,${rss:-},${fds},${thr:-},${ticks:-},$load" >>"$CSV"
  done
}
sampler() {
  while :; do
    sample load
    sleep "$SAMPLE" & wait $!
  done
}
sampler &
SAMPLER=$!

# One k6 per protocol; their keys do not overlap (KEYBASE).
k6run() {
  local client=$1 keybase=$2
  "${NICE_CMD[@]}" env SSL_CERT_FILE="$CA" "$LT/bin/k6" run --quiet --no-color --log-output=stderr --address "" \
    -e CLIENT="$client" -e FERRY_URL="https://127.0.0.1:$FERRY_PORT" -e CA="$CA" \
    -e DURATION="${MINUTES}m" -e RATE="${SOAK_RATE:-1}" -e KEYBASE="$keybase" \
    -e LABELS="{\"workload\":\"soak\",\"client\":\"$client\",\"minutes\":$MINUTES}" \
    -e SUMMARY="$OUT/runs/soak.$client.json" "$LT/k6/soak.js" \
    >"$OUT/logs/k6.$client.out" 2>"$OUT/logs/k6.$client.log"
}
k6run h2 0 & K6_PIDS+=($!)
k6run h3 500000 & K6_PIDS+=($!)
k6rc=0
for p in "${K6_PIDS[@]}"; do wait "$p" || k6rc=$?; done
K6_PIDS=()
kill "$SAMPLER" 2>/dev/null || true; wait "$SAMPLER" 2>/dev/null || true; SAMPLER=""
sleep 5; sample idle # after the load: connections closed
[ "$k6rc" = 0 ] || echo "  k6 exited with $k6rc: see $OUT/logs/k6.*.log" >&2
{ grep -h -v '^$' "$OUT"/logs/k6.*.log | head -40 || true; } | sed 's/^/  k6: /' >&2

set +e
report "$OUT"
rc=$?
set -e
echo "  results: ${OUT#"$ROOT"/}/ (summary.md, samples.csv)"
[ "$k6rc" = 0 ] || rc=1
exit "$rc"
