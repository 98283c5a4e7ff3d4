# tcp_rtt_ms HOST PORT: the median of 9 TCP connects to HOST:PORT from the client's side (run
# through the caller's CLI_NS array: a network namespace, or empty), in ms. Sourced by the
# benchmarks (bench.sh, vitess.sh).
tcp_rtt_ms() {
  "${CLI_NS[@]}" python3 - "$1" "$2" <<'PY'
import socket, sys, time
t = []
for _ in range(9):
    s = time.perf_counter(); c = socket.create_connection((sys.argv[1], int(sys.argv[2]))); t.append(time.perf_counter() - s); c.close()
print(f"{sorted(t)[4] * 1000:.3f}")
PY
}
