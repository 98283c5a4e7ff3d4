#!/usr/bin/env bash
# The large SELECT with clients that are not the bottleneck (issue 30; docs/benchmarks/cost.md
# "Goals"): ferry-h3, one Rust tool for all three ways, against a running stack —
#   MySQL+TLS  `--mysql`: mysql_async over TLS 1.3 straight to MariaDB, every row read;
#   HTTP/2     `--h2`: reqwest (hyper's h2) through Envoy;
#   HTTP/3     quinn + h3 through Envoy, a 7 MiB UDP receive buffer.
# k6's clients are the bottleneck on a large answer: its Go HTTP/2 client spends ~2.3 ms of
# CPU per MB against go-sql-driver's ~1.3 (cost.md), and its quic-go drops Envoy's bursts
# past a 256-packet queue (docs/benchmarks/http3.md); the cost run keeps their rows beside.
#   loadtest/large-answer.sh [OUT.md]   a stack with the bench fixtures and MariaDB serving TLS
#                                       on FERRY_MYSQL_PORT must be up (bench.sh cost's)
# Per way and format: LARGE_N (10) calls on one warm connection, LARGE_ROUNDS (3) rounds,
# the order reversed every other round; p50 = the median of the rounds' p50s; Envoy and
# MariaDB ms per call from /proc; the host's UDP receive-buffer drops (/proc/net/snmp
# RcvbufErrors) during the HTTP/3 runs, which must stay 0 for the client to be one that
# keeps every packet. With OUT.md, OUT.json gets the goals' figures.
# Knobs: LARGE_N, LARGE_ROUNDS, LARGE_QUERY (SELECT * FROM large), FERRY_H3_BIN (the tool).
set -euo pipefail
LT="$(cd "$(dirname "$0")" && pwd)"
source "$LT/../scripts/env.sh"
source "$LT/lib/cpu.sh" # ticks
OUT_MD="${1:-/dev/stdout}"
N="${LARGE_N:-10}" ROUNDS="${LARGE_ROUNDS:-3}" Q="${LARGE_QUERY:-SELECT * FROM large}"
TOOL="${FERRY_H3_BIN:-$LT/../target/release/ferry-h3}" # (bench.sh smoke: the e2e tests' debug build)
[ -x "$TOOL" ] || (cd "$LT/.." && cargo build --release -q -p ferry-e2e --bin ferry-h3)
for p in envoy mysql; do
  [ -s "$FERRY_RUN_DIR/pids/$p.pid" ] || { echo "no stack in $FERRY_RUN_DIR (scripts/stack.sh up)" >&2; exit 2; }
done
ENVOY_PID=$(cat "$FERRY_RUN_DIR/pids/envoy.pid") MYSQL_PID=$(cat "$FERRY_RUN_DIR/pids/mysql.pid")

rcvbuf_errors() { awk '/^Udp:/ { if (!h) { for (i = 1; i <= NF; i++) if ($i == "RcvbufErrors") c = i; h = 1 } else print $c }' /proc/net/snmp; }

# measure WAY [FORMAT]: prints "p50_ms envoy_ms_per_call mariadb_ms_per_call rcvbuf_errors".
measure() {
  local args=(--repeat "$N") e0 e1 m0 m1 b0 b1 out
  case $1 in mysql) args+=(--mysql) ;; h2) args+=(--h2) ;; esac
  [ "${2:-}" = proto ] && args+=(--proto)
  e0=$(ticks "$ENVOY_PID") m0=$(ticks "$MYSQL_PID") b0=$(rcvbuf_errors)
  out=$("$TOOL" "${args[@]}" "$Q")
  e1=$(ticks "$ENVOY_PID") m1=$(ticks "$MYSQL_PID") b1=$(rcvbuf_errors)
  # "calls N p50 X ms …"; the warm-up call is not timed, but its CPU is in the ticks.
  awk -v e=$((e1 - e0)) -v m=$((m1 - m0)) -v hz="$(getconf CLK_TCK)" -v n="$N" -v b=$((b1 - b0)) \
    '/^calls/ { printf "%s %.1f %.1f %d\n", $4, e * 1000 / hz / (n + 1), m * 1000 / hz / (n + 1), b }' <<<"$out"
}

declare -A runs
ORDER=(mysql h2/json h3/json h2/proto h3/proto)
for r in $(seq "$ROUNDS"); do
  order=("${ORDER[@]}")
  [ $((r % 2)) = 1 ] || order=(h3/proto h2/proto h3/json h2/json mysql)
  for k in "${order[@]}"; do
    res=$(measure "${k%/*}" "$([ "$k" = mysql ] || echo "${k#*/}")")
    [ -n "$res" ] || { echo "large-answer: $k gave no timing" >&2; exit 1; }
    runs[$k]="${runs[$k]:-}$res;"
    echo "  round $r $k: $(awk '{ printf "p50 %s ms, Envoy %s ms, MariaDB %s ms a call, UDP drops %s", $1, $2, $3, $4 }' <<<"$res")" >&2
  done
done
python3 - "$OUT_MD" "$N" "$ROUNDS" "${runs[mysql]}" "${runs[h2/json]}" "${runs[h3/json]}" "${runs[h2/proto]}" "${runs[h3/proto]}" <<'PY'
import json, statistics, sys
out, n, rounds = sys.argv[1], sys.argv[2], sys.argv[3]
def parse(text):
    rows = [list(map(float, r.split())) for r in text.split(";") if r.strip()]
    return {"p50": statistics.median(r[0] for r in rows), "p50s": [r[0] for r in rows],
            "envoy": statistics.median(r[1] for r in rows), "mysql": statistics.median(r[2] for r in rows),
            "drops": int(sum(r[3] for r in rows))}
c = dict(zip(["mysql", "h2/json", "h3/json", "h2/proto", "h3/proto"], map(parse, sys.argv[4:9])))
rng = lambda x: f" ({min(x['p50s']):.1f}–{max(x['p50s']):.1f})" if len(x["p50s"]) > 1 else ""
base = c["mysql"]["p50"]
lines = ["| client | p50 ms | × MySQL+TLS | × HTTP/2 | Envoy ms/call | MariaDB ms/call | UDP receive drops |",
         "|---|---|---|---|---|---|---|",
         f"| MySQL+TLS (mysql_async) | {base:.1f}{rng(c['mysql'])} | 1.00 | – | – | {c['mysql']['mysql']:.1f} | – |"]
names = {"h2": "HTTP/2 (reqwest)", "h3": "HTTP/3 (quinn)"}
figures = {"mysql_p50_ms": base}
for f, fname in (("json", "Connect JSON"), ("proto", "Connect proto")):
    a, b = c["h2/" + f], c["h3/" + f]
    figures[f] = {"h2_p50_ms": a["p50"], "h3_p50_ms": b["p50"], "h2_x_mysql": a["p50"] / base,
                  "h3_x_h2": b["p50"] / a["p50"], "udp_drops": b["drops"]}
    for way, x in (("h2", a), ("h3", b)):
        over = f"{x['p50'] / a['p50']:.2f}" if way == "h3" else "1.00"
        drops = str(x["drops"]) if way == "h3" else "–"
        lines.append(f"| {names[way]} {fname} | {x['p50']:.1f}{rng(x)} | {x['p50'] / base:.2f} | {over} | "
                     f"{x['envoy']:.1f} | {x['mysql']:.1f} | {drops} |")
lines += ["", f"ferry-h3 for every row (`--mysql`: mysql_async over TLS 1.3, every row read; `--h2`: reqwest; "
          f"HTTP/3: quinn), {n} calls on one warm connection per run, medians of {rounds} rounds (their p50s' "
          "range in brackets), the order reversed every other round; Envoy and MariaDB ms of CPU per call "
          "from /proc; UDP receive drops = the host's RcvbufErrors during the HTTP/3 runs (0: the client "
          "kept every packet)."]
text = "\n".join(lines) + "\n"
if out == "/dev/stdout":
    sys.stdout.write(text)
else:
    open(out, "w").write(text)
    json.dump(figures, open(out.rsplit(".", 1)[0] + ".json", "w"), indent=1)
PY
