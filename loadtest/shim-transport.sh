#!/usr/bin/env bash
# The shim's hop to MySQL: unix socket vs TCP vs TCP with TLS, side by side (issue 11,
# docs/benchmarks/cost.md "The shim's hop to MariaDB: unix socket vs TCP"). Extra shims beside a running stack, the same binary
# and settings as its own, one per TRANSPORTS (socket tcp tls): over MariaDB's unix socket,
# over TCP (127.0.0.1, plain), over TCP with TLS verified against the stack's dev CA
# (FERRY_MYSQL_TLS=verify_identity; MariaDB must serve TLS, as the benchmarks' does), each on
# a port of its own; h2load straight at each (h2c, the shim's canonical Connect proto form,
# no Envoy), rounds interleaved, CPU of that shim and of MariaDB from /proc.
#   loadtest/shim-transport.sh [OUT.md]   a stack must be up (scripts/stack.sh, same env)
# Measured per transport: warm `SELECT 1` at TRANSPORT_C (16) connections, one request at a
# time on each, TRANSPORT_N (20000) requests; the large SELECT (TRANSPORT_LARGE_QUERY,
# `SELECT * FROM large` of the bench fixtures) on 1 connection, TRANSPORT_LARGE_N (20) calls.
# Knobs: TRANSPORTS, TRANSPORT_ROUNDS (4), TRANSPORT_PORT (the stack's shim port + 10; +1, +2
# for the next).
set -euo pipefail
LT="$(cd "$(dirname "$0")" && pwd)"
source "$LT/../scripts/env.sh"
source "$LT/lib/cpu.sh" # ticks
command -v h2load >/dev/null || { echo "h2load is missing (apt install nghttp2-client; scripts/install.sh does)" >&2; exit 2; }
OUT_MD="${1:-/dev/stdout}"
N="${TRANSPORT_N:-20000}" C="${TRANSPORT_C:-16}" ROUNDS="${TRANSPORT_ROUNDS:-4}"
read -ra TRANSPORTS <<<"${TRANSPORTS:-socket tcp tls}"
LARGE_N="${TRANSPORT_LARGE_N:-20}" LARGE_Q="${TRANSPORT_LARGE_QUERY:-SELECT * FROM large}"
PIDS="$FERRY_RUN_DIR/pids"
[ -s "$PIDS/shim.pid" ] && [ -s "$PIDS/mysql.pid" ] || { echo "no stack in $FERRY_RUN_DIR (scripts/stack.sh up)" >&2; exit 2; }
STACK_SHIM=$(cat "$PIDS/shim.pid") MYSQL_PID=$(cat "$PIDS/mysql.pid")
[ -n "$FERRY_MYSQL_SOCKET" ] || { echo "FERRY_MYSQL_SOCKET is not set: no socket to compare" >&2; exit 2; }
BASE_PORT="${TRANSPORT_PORT:-$((${FERRY_SHIM_ADDR##*:} + 10))}"
DIR="$FERRY_RUN_DIR/transport"
mkdir -p "$DIR"
AUTH="authorization: Basic $(printf '%s:%s' "$FERRY_MYSQL_USER" "$FERRY_MYSQL_PASSWORD" | base64 -w0)"
# ExecuteRequest{query} (field 2, length-delimited): the shim's request body.
python3 - "$DIR" "$LARGE_Q" <<'PY'
import sys
d, large = sys.argv[1], sys.argv[2].encode()
def req(q):
    assert len(q) < 128
    return b"\x12" + bytes([len(q)]) + q
open(f"{d}/select1.bin", "wb").write(req(b"SELECT 1"))
open(f"{d}/large.bin", "wb").write(req(large))
PY

# The stack's shim's environment (settings, session keys, credentials) and OS user.
mapfile -d '' SHIM_ENV < "/proc/$STACK_SHIM/environ"
SHIM_UID=$(awk '/^Uid:/ { print $2 }' "/proc/$STACK_SHIM/status")
AS=()
if [ "$SHIM_UID" != "$(id -u)" ]; then
  AS=(setpriv --reuid="$SHIM_UID" --regid="$(awk '/^Gid:/ { print $2 }' "/proc/$STACK_SHIM/status")" --init-groups --)
fi
declare -A PORT SHIM_PID
i=0
for t in "${TRANSPORTS[@]}"; do PORT[$t]=$((BASE_PORT + i)); i=$((i + 1)); done
cleanup() { for p in "${SHIM_PID[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
for t in "${TRANSPORTS[@]}"; do
  extra=(FERRY_SHIM_ADDR="127.0.0.1:${PORT[$t]}" FERRY_SHIM_UNIX= FERRY_SHIM_ADVERTISE="127.0.0.1:${PORT[$t]}")
  unset_socket=()
  case $t in
    socket) ;;
    tcp) unset_socket=(-u FERRY_MYSQL_SOCKET) extra+=(FERRY_MYSQL_TLS=disabled) ;;
    tls) unset_socket=(-u FERRY_MYSQL_SOCKET)
      extra+=(FERRY_MYSQL_TLS=verify_identity FERRY_MYSQL_TLS_CA="$FERRY_RUN_DIR/certs/ca.pem") ;;
    *) echo "TRANSPORTS: $t is not socket, tcp or tls" >&2; exit 2 ;;
  esac
  env -i "${SHIM_ENV[@]}" "${extra[@]}" env "${unset_socket[@]}" "${AS[@]}" "$FERRY_SHIM_BIN" \
    >"$DIR/shim-$t.log" 2>&1 &
  SHIM_PID[$t]=$!
  for _ in $(seq 100); do curl -sf --http2-prior-knowledge -o /dev/null "http://127.0.0.1:${PORT[$t]}/healthz" && break; sleep 0.1; done
done
grep -h "msg=listening" "$DIR"/shim-*.log | sed 's/^/  /' >&2

# measure TRANSPORT BODY CONNECTIONS REQUESTS: prints "req/s mean_ms shim_us mysql_us" per request.
measure() {
  local t=$1 body=$2 c=$3 n=$4 s0 m0 s1 m1 out
  local h2=(h2load -c "$c" -m 1 -d "$body" -H "content-type: application/proto" -H "$AUTH"
    "http://127.0.0.1:${PORT[$t]}/psdb.v1alpha1.Database/Execute")
  s0=$(ticks "${SHIM_PID[$t]}") m0=$(ticks "$MYSQL_PID")
  out=$("${h2[@]}" -n "$n" 2>&1)
  s1=$(ticks "${SHIM_PID[$t]}") m1=$(ticks "$MYSQL_PID")
  grep -q "status codes: $n 2xx" <<<"$out" || { echo "$t: not every request succeeded:" >&2; grep -E 'status codes|requests:' <<<"$out" >&2; exit 1; }
  python3 - "$out" "$n" "$(getconf CLK_TCK)" $((s1 - s0)) $((m1 - m0)) <<'PY'
import re, sys
out, n, hz = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
qps = float(re.search(r"finished in [\d.]+\w+, ([\d.]+) req/s", out).group(1))
m = re.search(r"time for request:\s+\S+\s+\S+\s+([\d.]+)(us|ms|s)\b", out)
mean_ms = float(m.group(1)) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[m.group(2)]
print(qps, mean_ms, *(int(t) * 1e6 / hz / n for t in sys.argv[4:6]))
PY
}

for t in "${TRANSPORTS[@]}"; do # warm: the pools' connections, MariaDB's caches
  measure "$t" "$DIR/select1.bin" "$C" 2000 >/dev/null
  measure "$t" "$DIR/large.bin" 1 2 >/dev/null
done
declare -A small large
for r in $(seq "$ROUNDS"); do
  # Odd rounds in the given order, even rounds reversed: drift hits every transport alike.
  order=("${TRANSPORTS[@]}")
  [ $((r % 2)) = 1 ] || order=($(printf '%s\n' "${TRANSPORTS[@]}" | tac))
  for t in "${order[@]}"; do
    res=$(measure "$t" "$DIR/select1.bin" "$C" "$N")
    small[$t]="${small[$t]:-}$res;"
    echo "  round $r $t SELECT 1: $(awk '{ printf "%.0f req/s, us/req shim %.1f mysql %.1f", $1, $3, $4 }' <<<"$res")" >&2
    res=$(measure "$t" "$DIR/large.bin" 1 "$LARGE_N")
    large[$t]="${large[$t]:-}$res;"
    echo "  round $r $t large: $(awk '{ printf "mean %.1f ms, ms/call shim %.1f mysql %.1f", $2, $3 / 1000, $4 / 1000 }' <<<"$res")" >&2
  done
done
{
  echo "| shim → MariaDB | SELECT 1 req/s | shim µs/req | MariaDB µs/req | large SELECT mean ms | shim ms/call | MariaDB ms/call |"
  echo "|---|---|---|---|---|---|---|"
  for t in "${TRANSPORTS[@]}"; do
    python3 - "$t" "${small[$t]}" "${large[$t]}" <<'PY'
import statistics, sys
def med(runs):
    rows = [list(map(float, r.split())) for r in runs.split(";") if r.strip()]
    return [statistics.median(col) for col in zip(*rows)], rows
s, _ = med(sys.argv[2])
l, lrows = med(sys.argv[3])
rng = f"{min(r[1] for r in lrows):.1f}–{max(r[1] for r in lrows):.1f}"
label = {"tls": "tcp + TLS (verify_identity)"}.get(sys.argv[1], sys.argv[1])
print(f"| {label} | {s[0]:,.0f} | {s[2]:.0f} | {s[3]:.0f} | {l[1]:.1f} ({rng}) | {l[2] / 1000:.1f} | {l[3] / 1000:.1f} |")
PY
  done
  echo
  echo "Medians of $ROUNDS interleaved rounds, straight at the shim (h2c, no Envoy): warm SELECT 1,"
  echo "h2load -c $C -m 1, $N requests; large SELECT ($LARGE_Q), 1 connection, $LARGE_N calls (h2load's"
  echo "mean; the rounds' range in brackets). CPU = utime + stime of that shim and of MariaDB ÷ requests."
} > "$OUT_MD"
