# Generates envoy/replicas.yaml from envoy/ferry.yaml: the same gateway, plus a `reads`
# cluster (replica shims at priority 0, the primary's at 1) for the read routes.
#   python3 scripts/envoy-replicas.py           rewrite envoy/replicas.yaml
#   python3 scripts/envoy-replicas.py --check   fail if it is out of date (make validate)
import os, re, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from envoy_scenario import ferry_body, write_or_check

header = """# Ferry with a read replica ("a shim per target"): the gateway of ferry.yaml (same
# listeners, filters, classification routes) in front of two shims, one per MySQL
# target: the primary shim (FERRY_SHIM_ROLE=primary, FERRY_TRACK_GTID=1) on the
# primary, and a replica shim (FERRY_SHIM_ROLE=replica) on a GTID replica of it.
# Envoy is the only thing that routes:
# - `x-ferry-class: read` (set by the filter: one replay-safe read outside a
#   transaction or pinned session) -> cluster `reads`: the replica shim(s) at priority
#   0, the primary shim at priority 1. Reads go to the replica; if it is down or
#   unhealthy (active health check, outlier detection) they go to the primary; a read
#   that fails on it (connect failure, reset, 503) is retried once more on the next
#   priority (previous_priorities). A replica answers 503 when it has not applied the
#   session's own writes within FERRY_READ_AFTER_WRITE_WAIT_MS, so that read is
#   retried on the primary: read-your-writes.
# - everything else (`write`, `session`: writes, transactions, session state,
#   CreateSession, CloseSession, Prepare) -> cluster `shim` (the primary shim only),
#   no retry policy: never run twice.
# Runnable from the repository root (`envoy -c envoy/replicas.yaml`), or with
#   FERRY_REPLICAS=1 scripts/stack.sh up
# which starts the replica MariaDB and its shim and renders this file.
# Generated from envoy/ferry.yaml by scripts/envoy-replicas.py: edit that file or the
# script, then rerun it (make validate fails while this file is out of date).
"""
s = header + ferry_body()
# The read routes go to `reads`.
n_before = s.count("cluster: shim")
s = re.sub(r"(headers: \[\{ name: x-ferry-class, string_match: \{ exact: read \} \}\]\n                route:\n                  )cluster: shim", r"\1cluster: reads", s)
assert s.count("cluster: reads") == 2, "read routes"
# Clusters: anchor the shim cluster's options, add `reads`.
ci = s.index("  clusters:\n")
c = s[ci:]
c = c.replace("  # The shim: canonical Connect-proto over h2c.\n  - name: shim\n",
  "  # The primary shim: canonical Connect-proto over h2c. Writes, transactions and\n  # session state come here only.\n  - name: shim\n", 1)
for key in ["typed_extension_protocol_options", "circuit_breakers", "outlier_detection", "health_checks"]:
    assert c.count(f"    {key}:\n") == 1, key
    c = c.replace(f"    {key}:\n", f"    {key}: &{key.split('_')[0]}\n", 1)
c += """  # Safe reads: the replica shim(s) first (priority 0), the primary shim (priority 1)
  # when no replica is healthy or a read failed on one. Same protocol, breakers,
  # outlier detection and health checks as `shim`: a replica shim's /healthz answers
  # 503 when its MariaDB is unreachable.
  - name: reads
    type: STATIC
    connect_timeout: 1s
    lb_policy: ROUND_ROBIN
    typed_extension_protocol_options: *typed
    circuit_breakers: *circuit
    outlier_detection: *outlier
    health_checks: *health
    load_assignment:
      cluster_name: reads
      endpoints:
      - priority: 0
        lb_endpoints:
        - endpoint:
            address:
              socket_address: { address: 127.0.0.1, port_value: 8083 }  # FERRY_REPLICA_SHIM
      - priority: 1
        lb_endpoints:
        - endpoint:
            address:
              socket_address: { address: 127.0.0.1, port_value: 8081 }  # FERRY_SHIM
"""
s = s[:ci] + c
write_or_check("replicas.yaml", s)
