#!/usr/bin/env bash
# Network shapes for the benchmark: two network namespaces joined by a veth pair,
# the server side (MariaDB, shim, Envoy) in ferryb-srv at 10.77.0.1 and the
# clients (k6) in ferryb-cli at 10.77.0.2. The subnet exists only inside them.
#   net.sh up                   create the namespaces (idempotent)
#   net.sh shape loopback|near|far   apply a shape (LOSS=<percent> adds random loss on far)
#   net.sh shape near-nodelay|near-zero   diagnostics: near's tbf without the delayers /
#                               with the delayers in the path at 0 delay (docs/benchmarks/http3.md "Large SELECT per change")
#   net.sh down                 stop the delayers, delete the namespaces
# Bandwidth: tbf on each veth end (egress). Delay: half the RTT each way, added by
# bin/delayer on the RECEIVING side's INPUT chain via NFQUEUE (this kernel has no netem).
# The NFQUEUE rules use --queue-bypass: with no delayer running, packets pass at once.
set -euo pipefail
LT="$(cd "$(dirname "$0")" && pwd)"
PATH="$PATH:/usr/sbin:/sbin"
NS_S=ferryb-srv NS_C=ferryb-cli VS=fbsrv0 VC=fbcli0 Q=7
STATE="${BENCH_NET_STATE:-$LT/../.run/bench-net}"
mkdir -p "$STATE"

in_s() { ip netns exec "$NS_S" "$@"; }
in_c() { ip netns exec "$NS_C" "$@"; }

need_tools() {
  command -v iptables >/dev/null && return
  echo "net.sh: installing iptables (apt)" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends iptables libnetfilter-queue-dev >/dev/null
}

up() {
  need_tools
  ip netns list | grep -qw "$NS_S" && return
  ip netns add "$NS_S"
  ip netns add "$NS_C"
  ip link add "$VS" netns "$NS_S" type veth peer name "$VC" netns "$NS_C"
  in_s ip addr add 10.77.0.1/24 dev "$VS"
  in_c ip addr add 10.77.0.2/24 dev "$VC"
  for ns in "$NS_S" "$NS_C"; do ip netns exec "$ns" ip link set lo up; done
  in_s ip link set "$VS" up
  in_c ip link set "$VC" up
  in_s iptables -A INPUT -i "$VS" -j NFQUEUE --queue-num "$Q" --queue-bypass
  in_c iptables -A INPUT -i "$VC" -j NFQUEUE --queue-num "$Q" --queue-bypass
}

stop_delayers() {
  for f in "$STATE"/delayer-*.pid; do
    [ -s "$f" ] || continue
    kill "$(cat "$f")" 2>/dev/null || true
    rm -f "$f"
  done
}

# delay NS ONE_WAY: start a delayer for that namespace's queue. It outlives this
# script, so it must not inherit its descriptors: under `flock LOCK net.sh shape …`
# it would hold the benchmark lock until it is stopped.
delay() {
  (
    for fd in /proc/$BASHPID/fd/*; do
      fd=${fd##*/}
      [ "$fd" -gt 2 ] && eval "exec $fd>&-"
    done
    exec ip netns exec "$1" "$LT/bin/delayer" -queue "$Q" -delay "$2" -loss "${3:-0}" \
      >>"$STATE/delayer-$1.log" 2>&1 </dev/null
  ) &
  echo $! > "$STATE/delayer-$1.pid"
}

# rate NS DEV RATE BURST: tbf on DEV's egress (replaces any earlier shape).
rate() {
  ip netns exec "$1" tc qdisc replace dev "$2" root tbf rate "$3" burst "$4" latency 50ms
}

shape() {
  stop_delayers
  in_s tc qdisc del dev "$VS" root 2>/dev/null || true
  in_c tc qdisc del dev "$VC" root 2>/dev/null || true
  case "$1" in
    loopback) ;; # clients run inside the server namespace on 127.0.0.1: nothing to shape
    near) # ≈1 ms RTT, 1 Gbit/s
      rate "$NS_S" "$VS" 1gbit 1mb; rate "$NS_C" "$VC" 1gbit 1mb
      delay "$NS_S" 500us; delay "$NS_C" 500us ;;
    near-nodelay) # near's bandwidth only: what the delayers cost
      rate "$NS_S" "$VS" 1gbit 1mb; rate "$NS_C" "$VC" 1gbit 1mb ;;
    near-zero) # the delayers in the path, holding nothing: their mechanics without the delay
      rate "$NS_S" "$VS" 1gbit 1mb; rate "$NS_C" "$VC" 1gbit 1mb
      delay "$NS_S" 0s; delay "$NS_C" 0s ;;
    far) # ≈40 ms RTT, 20 Mbit/s, optional loss (applied each way)
      rate "$NS_S" "$VS" 20mbit 32kbit; rate "$NS_C" "$VC" 20mbit 32kbit
      delay "$NS_S" 20ms "${LOSS:-0}"; delay "$NS_C" 20ms "${LOSS:-0}" ;;
    *) echo "net.sh: unknown shape $1" >&2; exit 2 ;;
  esac
  sleep 0.3 # let the delayers bind their queue
}

down() {
  stop_delayers
  ip netns del "$NS_C" 2>/dev/null || true
  ip netns del "$NS_S" 2>/dev/null || true
}

case "${1:-}" in
  up) up ;;
  shape) shape "${2:?shape name}" ;;
  down) down ;;
  *) echo "usage: $0 up|shape loopback|near|far|down" >&2; exit 2 ;;
esac
