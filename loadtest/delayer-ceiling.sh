#!/usr/bin/env bash
# The delayer's own ceiling (docs/benchmarks/http3.md "The delayer's ceiling"): iperf3 bulk
# flows server → client through the near shape's path, with and without the delayers.
# TCP (the kernel hands the delayer 64 KiB GSO segments) and UDP in 1,200-byte datagrams
# without GSO (QUIC's packet size: the delayer's worst case, one verdict per datagram).
#   delayer-ceiling.sh [UDP offered rates…]     root; uses the bench namespaces (net.sh)
# Prints one line per flow: shape, flow, offered, received Mbit/s, datagrams lost.
set -euo pipefail
LT="$(cd "$(dirname "$0")" && pwd)"
RATES="${*:-200M 400M 600M 1000M}"
command -v iperf3 >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends iperf3 >/dev/null
"$LT/build-k6.sh" # bin/delayer
trap '"$LT/net.sh" down' EXIT
"$LT/net.sh" up

# flow ARGS...: one 3 s iperf3 run, the server in ferryb-srv sending (-R) to ferryb-cli.
flow() {
  ip netns exec ferryb-srv iperf3 -s -1 -D -p 5201 >/dev/null
  sleep 0.3
  ip netns exec ferryb-cli iperf3 -c 10.77.0.1 -p 5201 -R -t 3 -f m "$@" | awk '/receiver/ {
    for (i = 1; i <= NF; i++) if ($i == "Mbits/sec") rate = $(i - 1)
    print rate, ($0 ~ /%\)/ ? $(NF - 1) : "–") }'
}

for shape in near-nodelay near; do
  "$LT/net.sh" shape "$shape"
  echo "$shape TCP – $(flow)"
  for r in $RATES; do echo "$shape UDP-1200B $r $(flow -u -b "$r" -l 1200)"; done
done
