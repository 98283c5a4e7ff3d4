#!/usr/bin/env bash
# Upgrade without dropping traffic (issue 24): the Ferry filter is replaced by ECDS, twice,
# while k6 runs HTTP/2 and HTTP/3 load with open sessions (tests/mesh/hot-upgrade.js);
# nothing may fail.
#   tests/mesh/hot-upgrade.sh          (make hot-upgrade; needs make build and make k6)
# 1. Its own stack (scripts/stack.sh; run dir .run/hot-upgrade, ports 18470 (HTTPS + HTTP/3),
#    19970 (admin), shims 18471 and 18472, MariaDB 43370), Envoy from
#    envoy/istio-envoyfilter.yaml (the filter by ECDS from $FERRY_RUN_DIR/ecds/
#    istio-envoyfilter.yaml; header hold + session affinity, stateful_session strict) in
#    front of two shims (FERRY_SHIMS=2); stopped on exit.
# 2. Two copies of the built .wasm, $FERRY_RUN_DIR/wasm/v1.wasm and v2.wasm. Each is the
#    module plus one custom section (`ferry.hot-upgrade` = "v1" / "v2"; custom sections mean
#    nothing to the engine), so that their bytes differ: Envoy keys its wasm VMs by a hash
#    of vm_id, VM configuration and the code's bytes, so a byte-identical copy under another
#    name reloads the filter config but keeps the old VMs running (seen: config_reload moves,
#    wasm.envoy.wasm.runtime.v8.created does not). The stack starts on v1 (FERRY_WASM).
# 3. k6 for HOT_UPGRADE_DURATION (20) s: per protocol HOT_UPGRADE_VUS (8) VUs of short
#    transactions and reads and HOT_UPGRADE_LONG_VUS (4) VUs holding 8-s transactions,
#    staggered (hot-upgrade.js). Once both protocols' traffic reaches Envoy (t0), at each of
#    HOT_UPGRADE_SWAP_AT ("6 13") s after t0 the ECDS file is replaced: the rendered file
#    with only vm_config.code.local.filename changed to the other copy (checked: exactly
#    that line differs), written next to it and renamed over it (the file subscription
#    reloads on the move). Each swap waits for config_reload to move (Envoy counts it once
#    every worker runs the new config) and records the window [rename, reload seen].
# 4. Then it asserts: config_reload grew by the number of swaps; config_fail,
#    update_rejected and update_failure did not move; each swap created wasm VMs (new code
#    loaded) and no VM failed and was reloaded (wasm.*.vm_reload); k6 counted zero failed
#    requests for HTTP/2 and for HTTP/3 (and its thresholds passed); for each swap and each
#    protocol at least one transaction was open across the whole window (its INSERT
#    answered before the rename, its COMMIT sent after the reload was seen); Envoy's log of
#    this run has no `wasm trap|panicked|Function: proxy_on_.* failed`.
# 5. One summary line. Everything of the run is kept in $FERRY_RUN_DIR/hot-upgrade/
#    (k6.log: k6's JSON log, one HOTUPGRADE-FAIL line per failed request and one
#    HOTUPGRADE-TXN line per long transaction; summary.json; swaps.log;
#    stats-{before,after}.txt; envoy.log and access.log of this run).
# Knobs: HOT_UPGRADE_DURATION, HOT_UPGRADE_VUS, HOT_UPGRADE_LONG_VUS, HOT_UPGRADE_SWAP_AT,
# HOT_UPGRADE_TXN_PAUSE_MS (50: a short transaction's pause between INSERT and SELECT),
# HOT_UPGRADE_LONG_MS (8000), HOT_UPGRADE_POOL_MAX (64: the shims' FERRY_POOL_MAX), HOT_UPGRADE_SHIMS (2), HOT_UPGRADE_IDENTICAL=1 (byte-identical
# copies: shows that no new VM is loaded; the "new wasm VM" check then fails),
# HOT_UPGRADE_KEEP=1 (leave the stack up afterwards).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$ROOT"

SRC_WASM="${FERRY_WASM:-$ROOT/target/wasm32-wasip1/release/ferry_filter.wasm}"
export FERRY_RUN_DIR="$ROOT/.run/hot-upgrade"
export FERRY_PORT="${HOT_UPGRADE_PORT:-18470}" FERRY_ADMIN_PORT="${HOT_UPGRADE_ADMIN_PORT:-19970}"
export FERRY_SHIM_ADDR="127.0.0.1:${HOT_UPGRADE_SHIM_PORT:-18471}" FERRY_SHIM2_ADDR="127.0.0.1:${HOT_UPGRADE_SHIM2_PORT:-18472}"
export FERRY_MYSQL_PORT="${HOT_UPGRADE_MYSQL_PORT:-43370}" FERRY_SHIM_UNIX=""
export FERRY_ENVOY_SCENARIO=istio-envoyfilter FERRY_SHIMS="${HOT_UPGRADE_SHIMS:-2}" FERRY_REPLICAS=0
export FERRY_HOST=127.0.0.1 FERRY_ADMIN_HOST=127.0.0.1 FERRY_MYSQL_FLAVOR=mariadb
export FERRY_MYSQL_SOCKET="$FERRY_RUN_DIR/mysql.sock" FERRY_ACCESS_LOG="$FERRY_RUN_DIR/logs/access.log"
export FERRY_SESSION_KEYS_FILE="$FERRY_RUN_DIR/certs/session.keys" FERRY_WAIT_HEALTHY=true
export FERRY_WASM="$FERRY_RUN_DIR/wasm/v1.wasm"
# The shims' MySQL connections per user (default 16, of which 3/4 may be pinned): every VU
# here is one user's session, most of them inside a transaction at any moment, so the
# default pin quota (12 per shim) refuses BEGINs with resource_exhausted before any swap.
export FERRY_POOL_MAX="${HOT_UPGRADE_POOL_MAX:-64}"
# shellcheck source=../../scripts/env.sh
source scripts/env.sh

DURATION="${HOT_UPGRADE_DURATION:-20}"
VUS="${HOT_UPGRADE_VUS:-8}"
LONG_VUS="${HOT_UPGRADE_LONG_VUS:-4}"
LONG_MS="${HOT_UPGRADE_LONG_MS:-8000}"
SWAP_AT="${HOT_UPGRADE_SWAP_AT:-6 13}"
PAUSE_MS="${HOT_UPGRADE_TXN_PAUSE_MS:-50}"
K6="$ROOT/loadtest/bin/k6"
R="$FERRY_RUN_DIR" OUT="$FERRY_RUN_DIR/hot-upgrade" LOGS="$FERRY_RUN_DIR/logs"
ECDS="$R/ecds/$FERRY_ENVOY_SCENARIO.yaml"
ADMIN="http://$FERRY_ADMIN_HOST:$FERRY_ADMIN_PORT"
NAME="istio-system/ferry"   # the ECDS resource's name (envoy/istio-envoyfilter.yaml)
STAT="extension_config_discovery.http_filter.$NAME"

die() { echo "hot-upgrade: $*" >&2; exit 1; }
[ -s "$SRC_WASM" ] || die "no filter at $SRC_WASM (make wasm)"
[ -x "$K6" ] || die "no k6 at $K6 (make k6)"
[ -x "$FERRY_SHIM_BIN" ] || die "no shim at $FERRY_SHIM_BIN (make shim)"
for v in DURATION VUS LONG_VUS LONG_MS PAUSE_MS; do [[ "${!v}" =~ ^[0-9]+$ ]] || die "$v: not a whole number: ${!v}"; done
for a in $SWAP_AT; do [[ "$a" =~ ^[0-9]+$ ]] && [ "$a" -lt "$DURATION" ] || die "HOT_UPGRADE_SWAP_AT: whole seconds below $DURATION: $a"; done

k6_pid=""
cleanup() {
  local rc=$?
  if [ -n "$k6_pid" ] && kill -0 "$k6_pid" 2>/dev/null; then kill "$k6_pid" 2>/dev/null || true; wait "$k6_pid" 2>/dev/null || true; fi
  if [ "${HOT_UPGRADE_KEEP:-0}" = 1 ]; then
    echo "hot-upgrade: stack left up (HOT_UPGRADE_KEEP=1; stop: FERRY_RUN_DIR=$R scripts/stack.sh down)" >&2
  else
    scripts/stack.sh down >/dev/null 2>&1 || true
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The stack of an earlier run that was not stopped.
scripts/stack.sh down >/dev/null 2>&1 || true
rm -rf "$OUT" && mkdir -p "$OUT" "$R/wasm" "$LOGS"

# The two copies: the module + a custom section (id 0) naming the copy.
mark() { # mark SRC DST LABEL
  if [ "${HOT_UPGRADE_IDENTICAL:-0}" = 1 ]; then cp "$1" "$2.tmp"; else
  python3 - "$1" "$2.tmp" "$3" <<'PY'
import sys
def leb(n):
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)
src, dst, label = sys.argv[1], sys.argv[2], sys.argv[3].encode()
data = open(src, "rb").read()
if data[:8] != b"\0asm\x01\0\0\0":
    sys.exit(f"{src}: not a wasm module (version 1)")
name = b"ferry.hot-upgrade"
body = leb(len(name)) + name + label
open(dst, "wb").write(data + b"\0" + leb(len(body)) + body)
PY
  fi
  mv -f "$2.tmp" "$2"
}
mark "$SRC_WASM" "$R/wasm/v1.wasm" v1
mark "$SRC_WASM" "$R/wasm/v2.wasm" v2

# Envoy's logs of this run only (stack.sh appends).
envoy_log_from=$(stat -c %s "$LOGS/envoy.log" 2>/dev/null || echo 0)
access_log_from=$(stat -c %s "$FERRY_ACCESS_LOG" 2>/dev/null || echo 0)
echo "hot-upgrade: starting the stack ($FERRY_ENVOY_SCENARIO, $FERRY_SHIMS shim(s), run dir $R)"
scripts/stack.sh up > "$OUT/stack.log" 2>&1 || { cat "$OUT/stack.log" >&2; die "the stack did not start"; }
[ -s "$ECDS" ] || die "no ECDS file at $ECDS"
grep -q "filename: $R/wasm/v1.wasm " "$ECDS" || die "$ECDS does not load $R/wasm/v1.wasm"

stats() { curl -sf "$ADMIN/stats${1:+?filter=$1}"; }
stat_of() { # stat_of FILE NAME: the value of counter NAME in a /stats dump (0 if absent)
  awk -v k="$2:" '$1 == k { v = $2 } END { print v + 0 }' "$1"
}
sum_of() { # sum_of FILE ERE: the sum of the counters whose names match ERE
  awk -v re="$2" '{ n = $1; sub(/:$/, "", n) } n ~ re { s += $2 } END { print s + 0 }' "$1"
}
now_ms() { date +%s%3N; }

stats > "$OUT/stats-before.txt"
reload0=$(stat_of "$OUT/stats-before.txt" "$STAT.config_reload")
[ "$reload0" -ge 1 ] || die "Envoy has not loaded the filter from $ECDS ($STAT.config_reload = $reload0)"
tcp_rq="http.outbound_0.0.0.0_9443_.downstream_rq_total"
udp_rq="http.outbound_udp_0.0.0.0_9443_.downstream_rq_total"
udp0=$(stat_of "$OUT/stats-before.txt" "$udp_rq")
tcp0=$(stat_of "$OUT/stats-before.txt" "$tcp_rq")

run_id="hu$(date -u +%Y%m%d%H%M%S)$$"
echo "hot-upgrade: k6 for ${DURATION} s, per protocol (HTTP/2, HTTP/3) $VUS VUs + $LONG_VUS holding ${LONG_MS}-ms transactions; swaps at +${SWAP_AT// /s, +}s (run $run_id)"
k6_start=$(now_ms)
SSL_CERT_FILE="$R/certs/ca.pem" "$K6" run --quiet --no-color --log-output=stderr --log-format=json \
  -e FERRY_URL="https://$FERRY_HOST:$FERRY_PORT" -e CA="$R/certs/ca.pem" -e RUN_ID="$run_id" \
  -e VUS="$VUS" -e LONG_VUS="$LONG_VUS" -e LONG_MS="$LONG_MS" -e DURATION_S="$DURATION" -e TXN_PAUSE_MS="$PAUSE_MS" \
  -e DB_USER="$FERRY_MYSQL_USER" -e DB_PASSWORD="$FERRY_MYSQL_PASSWORD" -e SUMMARY="$OUT/summary.json" \
  tests/mesh/hot-upgrade.js > "$OUT/k6.out" 2> "$OUT/k6.log" &
k6_pid=$!

# t0: both protocols' requests reach Envoy (k6's setup is one request over HTTP/2).
t0=""
for _ in $(seq 300); do
  kill -0 "$k6_pid" 2>/dev/null || break
  stats '^http\.outbound_.*downstream_rq_total$' > "$OUT/stats-now.txt" || true
  if [ "$(stat_of "$OUT/stats-now.txt" "$udp_rq")" -gt "$udp0" ] && [ "$(stat_of "$OUT/stats-now.txt" "$tcp_rq")" -gt $((tcp0 + 1)) ]; then
    t0=$(now_ms); break
  fi
  sleep 0.1
done
[ -n "$t0" ] || { cat "$OUT/k6.log" >&2; die "k6's load never reached Envoy"; }
echo "t0 $t0: load reached Envoy $((t0 - k6_start)) ms after k6 started" > "$OUT/swaps.log"

# swap TARGET: the ECDS file with only vm_config.code.local.filename changed, by a rename;
# then wait for config_reload to move. Records the window [rename, reload seen].
current="$R/wasm/v1.wasm"
swaps=0 swap_errors=() swap_mv=() swap_seen=()
swap() {
  local target=$1 tmp changed before after="" created0 created1 t seen=""
  tmp=$(mktemp "$ECDS.XXXXXX")
  sed -E "/^ *local: \\{ filename: [^ }]+ \\}/s#filename: [^ }]+#filename: $target#" "$ECDS" > "$tmp"
  # Exactly one line differs: the old filename's, now the target's.
  changed=$(diff "$ECDS" "$tmp" | grep -c '^[<>]' || true)
  if [ "$changed" != 2 ] || ! grep -q "filename: $current " "$ECDS" || ! grep -q "filename: $target " "$tmp"; then
    rm -f "$tmp"; swap_errors+=("swap to $target: the edit changed $changed lines, not the filename alone"); return
  fi
  stats '^(extension_config_discovery|wasm)\.' > "$OUT/stats-now.txt"
  before=$(stat_of "$OUT/stats-now.txt" "$STAT.config_reload")
  created0=$(stat_of "$OUT/stats-now.txt" wasm.envoy.wasm.runtime.v8.created)
  t=$(now_ms)
  mv -f "$tmp" "$ECDS"
  swaps=$((swaps + 1))
  for _ in $(seq 1000); do # up to ~10 s
    after=$(stats "^extension_config_discovery\\.http_filter\\.$NAME\\.config_reload\$" | awk '{ print $2 }') || true
    [ "${after:-0}" -gt "$before" ] && { seen=$(now_ms); break; }
    sleep 0.01
  done
  swap_mv+=("$t") swap_seen+=("${seen:-0}")
  sleep 0.2
  stats '^(extension_config_discovery|wasm)\.' > "$OUT/stats-now.txt" || true
  created1=$(stat_of "$OUT/stats-now.txt" wasm.envoy.wasm.runtime.v8.created)
  echo "swap $swaps at +$((t - t0)) ms ($t): $(basename "$current") -> $(basename "$target"); config_reload $before -> ${after:-?}, $([ -n "$seen" ] && echo "seen after $((seen - t)) ms" || echo "never seen"); wasm VMs created +$((created1 - created0))" >> "$OUT/swaps.log"
  [ -n "$seen" ] || swap_errors+=("swap $swaps: config_reload did not move within 10 s")
  [ "$created1" -gt "$created0" ] || swap_errors+=("swap $swaps: no new wasm VM was created (the old code kept running)")
  current=$target
}
for at in $SWAP_AT; do
  wait_ms=$((t0 + at * 1000 - $(now_ms)))
  [ "$wait_ms" -le 0 ] || sleep "$(awk -v m="$wait_ms" 'BEGIN { printf "%.3f", m / 1000 }')"
  kill -0 "$k6_pid" 2>/dev/null || { swap_errors+=("k6 ended before the swap at +${at}s"); break; }
  if [ "$current" = "$R/wasm/v1.wasm" ]; then swap "$R/wasm/v2.wasm"; else swap "$R/wasm/v1.wasm"; fi
done

k6_rc=0
wait "$k6_pid" || k6_rc=$?
k6_pid=""
echo "k6 ended at +$(($(now_ms) - t0)) ms, exit $k6_rc" >> "$OUT/swaps.log"
sleep 1.2 # Envoy writes its access log out every second
stats > "$OUT/stats-after.txt"
tail -c +$((envoy_log_from + 1)) "$LOGS/envoy.log" > "$OUT/envoy.log" 2>/dev/null || true
tail -c +$((access_log_from + 1)) "$FERRY_ACCESS_LOG" > "$OUT/access.log" 2>/dev/null || true
# k6's log lines are JSON ({"level","msg","time",...}); our markers are in msg.
k6_msgs() { jq -Rr --arg p "$1" 'fromjson? | .msg // empty | select(startswith($p))' "$OUT/k6.log"; }
k6_msgs "HOTUPGRADE-TXN " > "$OUT/long-txns.txt"
k6_msgs "HOTUPGRADE-FAIL " > "$OUT/failures.txt"

# ---- Checks.
problems=("${swap_errors[@]}")
delta() { echo $(( $(stat_of "$OUT/stats-after.txt" "$1") - $(stat_of "$OUT/stats-before.txt" "$1") )); }
reloads=$(delta "$STAT.config_reload")
config_fail=$(delta "$STAT.config_fail")
rejected=$(delta "$STAT.update_rejected")
update_failure=$(delta "$STAT.update_failure")
created=$(delta wasm.envoy.wasm.runtime.v8.created)
vm_reload=$(( $(sum_of "$OUT/stats-after.txt" '^wasm[.].*[.]vm_reload$') - $(sum_of "$OUT/stats-before.txt" '^wasm[.].*[.]vm_reload$') ))
[ "$swaps" -gt 0 ] || problems+=("no swap happened")
[ "$reloads" = "$swaps" ] || problems+=("$STAT.config_reload grew by $reloads, not by the $swaps swap(s)")
[ "$config_fail" = 0 ] || problems+=("$STAT.config_fail grew by $config_fail")
[ "$rejected" = 0 ] || problems+=("$STAT.update_rejected grew by $rejected")
[ "$update_failure" = 0 ] || problems+=("$STAT.update_failure grew by $update_failure")
[ "$vm_reload" = 0 ] || problems+=("a wasm VM failed and was reloaded $vm_reload time(s) (wasm.*.vm_reload)")

# Sessions open across each whole swap window, per protocol.
open_across=()
for i in "${!swap_mv[@]}"; do
  mv_t=${swap_mv[$i]} seen_t=${swap_seen[$i]}
  [ "$seen_t" != 0 ] || continue
  n2=$(awk -v a="$mv_t" -v b="$seen_t" '$2 == "h2" && $3 < a && $4 > b' "$OUT/long-txns.txt" | wc -l)
  n3=$(awk -v a="$mv_t" -v b="$seen_t" '$2 == "h3" && $3 < a && $4 > b' "$OUT/long-txns.txt" | wc -l)
  open_across+=("swap $((i + 1)): h2 $n2, h3 $n3")
  echo "swap $((i + 1)): transactions open across the whole window ($((seen_t - mv_t)) ms) and committed after it: HTTP/2 $n2, HTTP/3 $n3" >> "$OUT/swaps.log"
  [ "$LONG_VUS" = 0 ] || { [ "$n2" -gt 0 ] && [ "$n3" -gt 0 ]; } \
    || problems+=("swap $((i + 1)): no transaction open across the swap for HTTP/2 ($n2) or HTTP/3 ($n3)")
done

h2_req=0 h2_fail=0 h2_txn=0 h3_req=0 h3_fail=0 h3_txn=0 duration="?" thresholds="-" h2_lat="?" h3_lat="?"
if [ -s "$OUT/summary.json" ]; then
  read -r h2_req h2_fail h2_txn h3_req h3_fail h3_txn duration thresholds h2_lat h3_lat < <(jq -r \
    'def lat: "p50/p99/max=\(.latencyMs.p50 // 0 | round)/\(.latencyMs.p99 // 0 | round)/\(.latencyMs.max // 0 | round)ms";
     [.h2.requests, .h2.failures, .h2.txns, .h3.requests, .h3.failures, .h3.txns, (.durationMs / 100 | round / 10),
      (.thresholdsFailed | join(",") | if . == "" then "-" else . end), (.h2 | lat), (.h3 | lat)] | @tsv' \
    "$OUT/summary.json")
  [ "$thresholds" = "-" ] || problems+=("k6 thresholds failed: $thresholds")
else
  problems+=("k6 wrote no summary (exit $k6_rc; see $OUT/k6.log)")
fi
[ "$h2_fail" = 0 ] || problems+=("HTTP/2: $h2_fail failed request(s)")
[ "$h3_fail" = 0 ] || problems+=("HTTP/3: $h3_fail failed request(s)")
[ "$h2_req" -gt 0 ] || problems+=("HTTP/2: no requests")
[ "$h3_req" -gt 0 ] || problems+=("HTTP/3: no requests")
[ "$k6_rc" = 0 ] || problems+=("k6 exited $k6_rc")
[ ! -s "$OUT/failures.txt" ] || [ "${#problems[@]}" -gt 0 ] || problems+=("k6 logged $(wc -l < "$OUT/failures.txt") failure(s)")
if grep -nE 'wasm trap|panicked|Function: proxy_on_.* failed' "$OUT/envoy.log" > "$OUT/envoy-errors.txt"; then
  problems+=("Envoy's log has $(wc -l < "$OUT/envoy-errors.txt") wasm trap/panic/callback failure line(s)")
fi

cat "$OUT/swaps.log"
if [ "${#problems[@]}" -gt 0 ]; then
  echo "hot-upgrade: FAILED:" >&2
  printf '  - %s\n' "${problems[@]}" >&2
  if [ -s "$OUT/failures.txt" ]; then
    echo "  failed requests (first 20 of $(wc -l < "$OUT/failures.txt"), $OUT/failures.txt):" >&2
    head -20 "$OUT/failures.txt" | sed 's/^HOTUPGRADE-FAIL /    /' >&2
  fi
  [ ! -s "$OUT/envoy-errors.txt" ] || { echo "  Envoy ($OUT/envoy-errors.txt):" >&2; head -20 "$OUT/envoy-errors.txt" | sed 's/^/    /' >&2; }
  echo "  answers other than 200 in Envoy's access log: $(jq -c 'select(.status != 200)' "$OUT/access.log" 2>/dev/null | wc -l) ($OUT/access.log)" >&2
fi
result=PASS; [ "${#problems[@]}" = 0 ] || result=FAIL
joined=$(IFS=';'; echo "${open_across[*]:-}")
echo "hot-upgrade: $result: HTTP/2 $h2_req requests ($h2_txn transactions, $h2_lat) $h2_fail failed; HTTP/3 $h3_req requests ($h3_txn transactions, $h3_lat) $h3_fail failed; config_reload +$reloads for $swaps swaps (config_fail +$config_fail, wasm VMs created +$created); open across swaps: ${joined//;/, }; ${duration} s"
[ "$result" = PASS ]
