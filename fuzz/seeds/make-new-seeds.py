#!/usr/bin/env python3
"""Writes the seeds of the targets added for issue 29 (basic_auth, statement,
placeholder, affinity, route_class, early_data, connect_get) into fuzz/seeds/<target>.
Protobuf is encoded by hand (no dependency). Run from anywhere; idempotent."""
import base64, json, os, urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))

def write(target, name, data):
    d = os.path.join(HERE, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())

def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)

def field(num, wire, payload):
    key = varint(num << 3 | wire)
    if wire == 0:
        return key + varint(payload)
    return key + varint(len(payload)) + payload

def s(num, text):
    return field(num, 2, text.encode() if isinstance(text, str) else text)

def signature(pinned, holder=b""):
    # version 1, 52 bytes, flags at 53, holder length, holder, 32-byte MAC.
    sig = bytes([1]) + bytes(52) + bytes([1 if pinned else 0])
    return sig + bytes([len(holder)]) + holder + bytes(32)

def session(pinned=False, holder=b"", in_tx=False, autocommit=True):
    vitess = (field(1, 0, 1) if in_tx else b"") + (field(4, 0, 1) if autocommit else b"")
    return s(1, signature(pinned, holder)) + s(2, vitess)

def execute(query, sess=None, binds=None):
    out = (s(1, sess) if sess is not None else b"") + s(2, query)
    for k, v in (binds or {}).items():
        out += s(3, s(1, k) + s(2, field(1, 0, 6) + s(2, v)))  # Type INT64 = 6? any enum
    return out

def batch(queries, mode=0, read_only=False, sess=None):
    out = s(1, sess) if sess is not None else b""
    for q in queries:
        out += s(2, s(1, q))
    if mode:
        out += field(3, 0, mode)
    if read_only:
        out += s(4, field(2, 0, 1))
    return out

# basic_auth: Authorization header values.
for i, h in enumerate([
    "Basic " + base64.b64encode(b"ferry:secret").decode(),
    "basic   dTpw  ",
    "Basic dTpwdw",
    "Basic " + base64.b64encode("usér:pä:ss".encode()).decode(),
    "Bearer eyJhbGciOiJIUzI1NiJ9.e30.x",
    "Basic " + base64.b64encode(b":nouser").decode(),
    "Basic %%%",
    "Basic " + base64.b64encode(b"nocolon").decode(),
    "ferry:password",
]):
    write("basic_auth", f"header-{i}", h)

SQL = [
    "SELECT 1",
    "select id, name from users where id = ? and tenant = :tenant",
    "SELECT * FROM t WHERE a IN ::ids LIMIT 10",
    "WITH x AS (SELECT 1 AS a) SELECT a FROM x",
    "SELECT * FROM t FOR UPDATE",
    "SELECT @v := 1",
    "SELECT 'it''s', \"q\", `c` /* comment */ -- tail\n",
    "SELECT 'a\\'b' FROM t",
    "INSERT INTO t (a) VALUES (1), (2)",
    "BEGIN",
    "START TRANSACTION READ ONLY",
    "ROLLBACK",
    "rollback work",
    "ROLLBACK TO SAVEPOINT s1",
    "COMMIT AND CHAIN",
    "SET autocommit = 0",
    "SET @a = 1, SESSION sql_mode = 'ANSI', NAMES utf8mb4",
    "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED",
    "SET GLOBAL max_connections = 10",
    "SELECT GET_LOCK('x', 1)",
    "/*!40101 SET NAMES utf8 */",
    "CREATE PROCEDURE p() BEGIN SELECT 1; SELECT 2; END",
    "CREATE TEMPORARY TABLE t (a int)",
    "SELECT 1; SELECT 2",
    "CALL p(@out)",
    "SELECT a INTO @x FROM t",
    "EXPLAIN ANALYZE SELECT 1",
    "SHOW TABLES",
    "DESCRIBE t",
    "LOCK TABLES t READ",
    "SELECT SLEEP(1)",
    "(SELECT 1) UNION (SELECT 2)",
    "SELECT x := 1, a::text, b = :v.x FROM t WHERE c = ?",
]
for i, q in enumerate(SQL):
    write("statement", f"sql-{i:02}", q)
    write("placeholder", f"sql-{i:02}", q)

# affinity, route_class: a selector byte, then a canonical message.
msgs = {
    "execute-plain": execute("SELECT 1"),
    "execute-session": execute("SELECT * FROM t", session()),
    "execute-pinned": execute("SELECT 1", session(True, b"10.0.0.7:8080")),
    "execute-pinned-v6": execute("UPDATE t SET a = 1", session(True, b"[fd00::1]:8080")),
    "execute-in-tx": execute("SELECT 1", session(in_tx=True)),
    "execute-autocommit-off": execute("SELECT 1", session(autocommit=False)),
    "execute-binds": execute("SELECT * FROM t WHERE a = :a", session(), {"a": b"1"}),
    "execute-write": execute("INSERT INTO t VALUES (1)", session()),
    "execute-split-session": s(1, s(1, signature(True, b"h:1"))) + s(2, "SELECT 1") + s(1, s(2, field(1, 0, 1))),
    "batch-ro": batch(["SELECT 1", "SELECT 2"], read_only=True, sess=session()),
    "batch-pipeline": batch(["SELECT 1", "SHOW TABLES"], mode=1),
    "batch-write": batch(["INSERT INTO t VALUES (1)", "SELECT 1"]),
    "batch-pinned": batch(["SELECT 1"], mode=1, sess=session(True, b"h:1")),
    "batch-empty-pipeline-in-tx": batch([], mode=1, sess=session(in_tx=True)),
}
for name, m in msgs.items():
    sel = 2 if name.startswith("batch") else 0
    write("affinity", name, bytes([0]) + m)
    write("route_class", name, bytes([sel]) + m)

# early_data: selector (0-2 Execute proto/json/grpc, 3-5 ExecuteBatch), then the body.
def grpc(m):
    return bytes([0]) + len(m).to_bytes(4, "big") + m
for name, m in msgs.items():
    if name.startswith("execute"):
        write("early_data", name + "-proto", bytes([0]) + m)
        write("early_data", name + "-grpc", bytes([2]) + grpc(m))
    else:
        write("early_data", name + "-proto", bytes([3]) + m)
        write("early_data", name + "-grpc", bytes([5]) + grpc(m))
write("early_data", "execute-json", bytes([1]) + json.dumps({"query": "SELECT 1"}).encode())
write("early_data", "execute-json-session", bytes([1]) + json.dumps(
    {"query": "SELECT a FROM t WHERE b = 1", "session": {"signature": base64.b64encode(signature(False)).decode()}}).encode())
write("early_data", "batch-json", bytes([4]) + json.dumps(
    {"statements": [{"query": "SELECT 1"}], "mode": "PIPELINE"}).encode())

# connect_get: selector (bit 0: path, bit 1: end of stream), then the query string.
def q(params):
    return urllib.parse.urlencode(params)
gets = {
    "json": q({"connect": "v1", "encoding": "json", "message": json.dumps({"query": "SELECT 1"})}),
    "json-session": q({"encoding": "json", "message": json.dumps({"query": "SELECT * FROM t WHERE id = 7", "session": {}})}),
    "proto-b64": q({"connect": "v1", "encoding": "proto", "base64": "1",
                    "message": base64.urlsafe_b64encode(execute("SELECT 1")).decode().rstrip("=")}),
    "proto-b64-pinned": q({"encoding": "proto", "base64": "1",
                           "message": base64.urlsafe_b64encode(execute("SELECT 1", session(True, b"h:1"))).decode()}),
    "json-write": q({"encoding": "json", "message": json.dumps({"query": "DELETE FROM t"})}),
    "json-gzip-b64": q({"encoding": "json", "compression": "gzip", "base64": "1",
                        "message": base64.urlsafe_b64encode(__import__("gzip").compress(b'{"query":"SELECT 2"}')).decode()}),
    "percent": "encoding=json&message=%7B%22query%22%3A%22SELECT+1%22%7D&connect=v1",
    "dup": "encoding=json&encoding=proto&message=x",
}
for name, g in gets.items():
    write("connect_get", name, bytes([0]) + g.encode())
write("connect_get", "json-eos", bytes([2]) + gets["json"].encode())
