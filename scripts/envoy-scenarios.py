#!/usr/bin/env python3
# Generates every Envoy scenario in envoy/ from envoy/ferry.yaml, the only hand-written
# one: one function per scenario below, each its header comment plus edits of ferry.yaml's
# text anchored on exact snippets. An anchor that is missing or not unique stops the
# script and names it, so a change to ferry.yaml never silently skips a scenario's edit.
#   python3 scripts/envoy-scenarios.py              rewrite them all
#   python3 scripts/envoy-scenarios.py --check      fail if one is out of date (make validate)
#   python3 scripts/envoy-scenarios.py NAME...      rewrite only these (e.g. istio)
import json, os, sys

import yaml  # python3-yaml (scripts/install.sh)

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
FERRY = os.path.join(ROOT, "envoy", "ferry.yaml")


class Doc:
    """A scenario's text, edited only at exact, unique anchors."""

    def __init__(self, name, text):
        self.name, self.text = name, text

    def _fail(self, what, anchor, n, expected=1):
        first = anchor.strip().splitlines()[0] if anchor.strip() else repr(anchor)
        sys.exit(f"scripts/envoy-scenarios.py: {self.name}: {what}: found {n} times, "
                 f"expected {expected}: {first!r} (did envoy/ferry.yaml change?)")

    def _positions(self, anchor):
        """Where `anchor` occurs; one that starts with a space is indented text and must
        start a line (so `  - name: x` never matches inside `    - name: x`)."""
        found, i = [], self.text.find(anchor)
        while i >= 0:
            if not anchor.startswith(" ") or i == 0 or self.text[i - 1] == "\n":
                found.append(i)
            i = self.text.find(anchor, i + 1)
        return found

    def _find(self, anchor, what, count=1):
        found = self._positions(anchor)
        if len(found) != count:
            self._fail(what, anchor, len(found), count)
        return found

    def replace(self, old, new, count=1):
        """Replaces `old`, which must occur exactly `count` times."""
        for i in reversed(self._find(old, "replace", count)):
            self.text = self.text[:i] + new + self.text[i + len(old):]

    def insert_after(self, anchor, text):
        i = self._find(anchor, "insert after")[0] + len(anchor)
        self.text = self.text[:i] + text + self.text[i:]

    def insert_before(self, anchor, text):
        i = self._find(anchor, "insert before")[0]
        self.text = self.text[:i] + text + self.text[i:]

    def cut(self, start, end, new=""):
        """Replaces the text from `start` (included) to `end` (excluded) with `new`;
        returns what was there."""
        i = self._find(start, "cut from")[0]
        j = self._find(end, "cut up to")[0]
        if j < i:
            self._fail("cut up to (before its start)", end, 1)
        old = self.text[i:j]
        self.text = self.text[:i] + new + self.text[j:]
        return old

    def append(self, text):
        self.text += text


def ferry_body():
    """envoy/ferry.yaml after its header: the leading comment lines up to the first empty
    line (each scenario has its own header)."""
    lines = open(FERRY).read().splitlines(keepends=True)
    end = next(i for i, line in enumerate(lines) if not line.startswith("#"))
    if lines[end].strip():
        sys.exit("scripts/envoy-scenarios.py: envoy/ferry.yaml: its header comment must end with an empty line")
    return "".join(lines[end + 1:])


def scenario(name, function, header):
    """A Doc of ferry.yaml's body under `header`, which starts with the generated note."""
    note = (f"# GENERATED from envoy/ferry.yaml by scripts/envoy-scenarios.py ({function}):\n"
            "# do not edit; edit ferry.yaml or that function and rerun it (make validate fails\n"
            "# while this file is out of date).\n")
    return Doc(name, note + header + ferry_body())


# ----- pieces more than one scenario uses -----

READ_ROUTE = ("headers: [{ name: x-ferry-class, string_match: { exact: read } }]\n"
              "                route:\n                  cluster: shim")


def reads_cluster_for_read_routes(d):
    """The three read routes (`x-ferry-class: read`: psdb's StreamExecute and unary RPCs,
    Ferry's own) go to cluster `reads`."""
    d.replace(READ_ROUTE, READ_ROUTE.replace("cluster: shim", "cluster: reads"), count=3)


def anchor_shim_options(d):
    """Anchors the shim cluster's options (&typed, &circuit, &outlier, &health) for
    other clusters that share them."""
    for key in ["typed_extension_protocol_options", "circuit_breakers", "outlier_detection", "health_checks"]:
        d.replace(f"\n    {key}:\n", f"\n    {key}: &{key.split('_')[0]}\n")


def plugin_settings():
    """The Ferry filter's settings in ferry.yaml (its `configuration` Struct), as a dict."""
    doc = yaml.safe_load(open(FERRY))
    hcm = doc["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    ferry = next(f for f in hcm["http_filters"] if f["name"] == "ferry")
    return ferry["typed_config"]["config"]["configuration"]["value"]


# ----- scenarios -----

def replicas():
    d = scenario("replicas.yaml", "replicas", """\
# Ferry with a read replica ("a shim per target"): the gateway of ferry.yaml (same
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
""")
    reads_cluster_for_read_routes(d)
    d.replace("  # The shim: canonical Connect-proto over h2c.\n  - name: shim\n",
              "  # The primary shim: canonical Connect-proto over h2c. Writes, transactions and\n"
              "  # session state come here only.\n  - name: shim\n")
    anchor_shim_options(d)
    d.append("""\
  # Safe reads: the replica shim(s) first (priority 0), the primary shim (priority 1)
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
""")
    return d


def tracing():
    d = scenario("tracing.yaml", "tracing", """\
# Ferry with tracing: the gateway of ferry.yaml, plus Envoy's OpenTelemetry tracer on
# both HTTP connection managers (TCP: HTTP/2 and HTTP/1.1; QUIC: HTTP/3). Every request
# gets a span (kind SERVER, service `ferry-gateway`), and its upstream request to the
# shim a child span (kind CLIENT) whose context Envoy sends to the shim as W3C
# `traceparent`; the shim, with FERRY_OTLP_ENDPOINT set, continues the trace (a span
# per RPC and per MySQL statement: shim/src/telemetry/trace.rs). Spans go over OTLP/gRPC to a
# collector at 127.0.0.1:4317 (cluster `otlp_collector`; scripts/render-envoy.sh takes
# host:port from FERRY_OTLP_ENDPOINT), every 5 s or 5 spans (Envoy's runtime keys
# tracing.opentelemetry.flush_interval_ms / min_flush_spans).
# Runnable from the repository root (`envoy -c envoy/tracing.yaml`), or with
#   FERRY_ENVOY_SCENARIO=tracing FERRY_OTLP_ENDPOINT=http://127.0.0.1:4317 scripts/stack.sh up
""")
    d.insert_after("          stat_prefix: ferry_tcp\n", """\
          # Tracing (OpenTelemetry): every request here (a demo; in production sample,
          # e.g. random_sampling 1, or follow the client's `traceparent` decision).
          tracing: &tracing
            random_sampling: { value: 100 }
            # The router's span per upstream request (each retry its own): the shim's
            # spans hang from it.
            spawn_upstream_span: true
            # `http.url` keeps an RPC's path whole (the longest is 37 characters) and cuts
            # any query string: Connect's GET form carries the SQL text in it.
            max_path_tag_length: 37
            # Span names: the request's path without its query string (the RPC), and
            # the upstream request's cluster and path.
            operation: "%PATH(WQ)%"
            upstream_operation: "%UPSTREAM_CLUSTER% %PATH(WQ)%"
            provider:
              name: envoy.tracers.opentelemetry
              typed_config:
                "@type": type.googleapis.com/envoy.config.trace.v3.OpenTelemetryConfig
                grpc_service:
                  envoy_grpc: { cluster_name: otlp_collector }
                  timeout: 1s
                service_name: ferry-gateway
""")
    d.insert_after("          stat_prefix: ferry_quic\n", "          tracing: *tracing\n")
    d.append("""
  # The OpenTelemetry collector (OTLP/gRPC) that gets Envoy's spans.
  - name: otlp_collector
    type: STRICT_DNS
    connect_timeout: 1s
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config:
          http2_protocol_options: {}
    load_assignment:
      cluster_name: otlp_collector
      endpoints:
      - lb_endpoints:
        - endpoint:
            address:
              socket_address: { address: 127.0.0.1, port_value: 4317 }  # FERRY_OTLP
""")
    return d


def shim_tls():
    d = scenario("shim-tls.yaml", "shim_tls", """\
# Ferry with the shim on another host: the gateway of ferry.yaml, with Envoy -> shim over
# mutual TLS instead of h2c. The clients' Basic credentials and every row cross that
# hop, so off one host it is encrypted; Envoy checks the shim's certificate against the
# CA and its name (`localhost` here: the dev certificate's), and presents a client
# certificate of its own, which the shim requires (docs/guides/tls.md "TLS from Envoy").
# The shim runs with
#   FERRY_SHIM_TLS_CERT=<its certificate> FERRY_SHIM_TLS_KEY=<its key>
#   FERRY_SHIM_TLS_CLIENT_CA=<the CA of Envoy's client certificate>
# Runnable from the repository root (`envoy -c envoy/shim-tls.yaml`), or with
#   FERRY_ENVOY_SCENARIO=shim-tls FERRY_SHIM_TLS_CERT=.run/certs/server.pem \\
#   FERRY_SHIM_TLS_KEY=.run/certs/server.key FERRY_SHIM_TLS_CLIENT_CA=.run/certs/ca.pem scripts/stack.sh up
# (scripts/dev-cert.sh makes Envoy's client certificate, envoy-client.pem).
""")
    d.insert_after("  - name: shim\n    type: STATIC\n    connect_timeout: 1s\n    lb_policy: ROUND_ROBIN\n", """\
    # Mutual TLS to the shim (its health checks too): TLS 1.3, the shim's certificate
    # verified against the CA for the name below, Envoy's own presented.
    transport_socket:
      name: envoy.transport_sockets.tls
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext
        sni: localhost  # FERRY_SHIM_TLS_NAME
        common_tls_context:
          alpn_protocols: [h2]
          tls_params: { tls_minimum_protocol_version: TLSv1_3, tls_maximum_protocol_version: TLSv1_3 }
          tls_certificates:
          - certificate_chain: { filename: .run/certs/envoy-client.pem }  # FERRY_ENVOY_CLIENT_CERT
            private_key: { filename: .run/certs/envoy-client.key }  # FERRY_ENVOY_CLIENT_KEY
          validation_context:
            trusted_ca: { filename: .run/certs/ca.pem }  # FERRY_SHIM_TLS_CA
            match_typed_subject_alt_names:
            - san_type: DNS
              matcher: { exact: localhost }  # FERRY_SHIM_TLS_NAME
""")
    d.replace("  # The shim: canonical Connect-proto over h2c.\n",
              "  # The shim: canonical Connect-proto over HTTP/2 in mutual TLS.\n")
    return d


def browser():
    d = scenario("browser.yaml", "browser", """\
# Ferry for browsers on other origins: the gateway of ferry.yaml (same listeners,
# filters, routes and shim) plus CORS, answered by Envoy's CORS filter, first in the
# chain: a preflight (OPTIONS) is answered by Envoy and never reaches the Ferry filter,
# whether its origin is allowed or not (`forward_not_matching_preflights: false`).
# Browser pages call it with gRPC-Web (connect-web's createGrpcWebTransport, grpc-web
# clients: the grpc_web filter) or Connect (createConnectTransport); tests/browser uses the first.
# Allowed origins: FERRY_CORS_ORIGINS (comma-separated, exact scheme://host[:port], never
# `*`; default https://localhost:5173, a local dev server; set but empty: none), rendered
# by scripts/render-envoy.sh into the `# FERRY_CORS_ORIGINS` line. No credentials mode:
# a page sends its own `Authorization: Basic ...` header (listed below); the browser's
# cookies and HTTP auth are never involved. Runnable from the repository root
# (`envoy -c envoy/browser.yaml`), or with
#   FERRY_ENVOY_SCENARIO=browser FERRY_CORS_ORIGINS=https://app.example scripts/stack.sh up
""")
    d.insert_after('              domains: ["*"]\n', """\
              # CORS for browser pages on the allowed origins (the CORS filter acts on
              # it). Headers a page may send: credentials, the content type, gRPC-Web's
              # and Connect's own, deadlines and message encodings. Headers it may read:
              # the gRPC status (gRPC-Web trailers-only answers carry it in the headers)
              # and the encodings of compressed answers.
              typed_per_filter_config:
                envoy.filters.http.cors:
                  "@type": type.googleapis.com/envoy.extensions.filters.http.cors.v3.CorsPolicy
                  allow_origin_string_match: [{ exact: "https://localhost:5173" }]  # FERRY_CORS_ORIGINS
                  allow_methods: "POST, GET"
                  allow_headers: "authorization, content-type, x-grpc-web, x-user-agent, grpc-timeout, grpc-encoding, grpc-accept-encoding, connect-protocol-version, connect-timeout-ms, connect-content-encoding, connect-accept-encoding"
                  expose_headers: "grpc-status, grpc-message, grpc-encoding, connect-content-encoding"
                  max_age: "7200"
                  allow_credentials: false
                  # Envoy answers every preflight, allowed or not (no CORS headers then,
                  # so the browser refuses): OPTIONS never reaches the Ferry filter.
                  forward_not_matching_preflights: false
""")
    d.insert_after("          http_filters: &filters\n", """\
          # CORS first: preflights are answered here (the policy is on the virtual host),
          # and the answers of allowed origins get their Access-Control-* headers.
          - name: envoy.filters.http.cors
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.cors.v3.Cors
""")
    d.replace("          # gRPC-Web itself (docs/design/filter.md \"gRPC-Web\"). No CORS here: web pages cannot\n"
              "          # call this gateway; envoy/browser.yaml is this gateway plus CORS for chosen origins.\n",
              "          # gRPC-Web itself (docs/design/filter.md \"gRPC-Web\").\n")
    return d


def compose():
    d = scenario("compose.yaml", "compose", """\
# Ferry in docker compose (compose/docker-compose.yml): the same gateway as
# ferry.yaml, listening on all interfaces inside the container, the filter and
# certificates at fixed container paths, and the shim found by DNS as `shim`.
# compose/Dockerfile copies this file into the image as it is (not rendered): its
# `# FERRY_*` lines are rendered only by make validate, to load it here.
""")
    d.replace("{ address: 127.0.0.1, port_value: 9901 }  # FERRY_ADMIN",
              "{ address: 0.0.0.0, port_value: 9901 }  # FERRY_ADMIN")
    d.replace("address: 127.0.0.1, port_value: 8443 }  # FERRY_LISTEN",
              "address: 0.0.0.0, port_value: 8443 }  # FERRY_LISTEN", count=2)
    d.replace("filename: .run/certs/", "filename: /etc/ferry/certs/", count=5)
    d.replace("path: .run/logs/access.log  # FERRY_ACCESS_LOG", "path: /dev/stdout  # docker compose logs envoy")
    d.replace("local: { filename: target/wasm32-wasip1/release/ferry_filter.wasm }  # FERRY_WASM",
              "local: { filename: /etc/ferry/ferry_filter.wasm }  # FERRY_WASM")
    # Not rendered in compose: the defaults stay (FERRY_COMPRESS_* does not reach it).
    d.replace("min_rtt_ms: 5  # FERRY_COMPRESS_MIN_RTT_MS\n", "min_rtt_ms: 5\n")
    d.replace('near_networks: ["127.0.0.0/8", "::1/128"]  # FERRY_COMPRESS_NEAR_NETWORKS\n',
              'near_networks: ["127.0.0.0/8", "::1/128"]\n')
    # The `replicas` profile: read routes to the `reads` cluster (below).
    reads_cluster_for_read_routes(d)
    d.cut("          # Envoy's own session affinity: a request carrying `x-ferry-host`",
          "          - name: envoy.filters.http.stateful_session\n", """\
          # Session affinity as in ferry.yaml, but not `strict`: here the shim is found by
          # DNS, so its advertised address (FERRY_SHIM_ADVERTISE, default its listen
          # address 0.0.0.0:8081) is not the address Envoy resolved, and a strict
          # stateful session would refuse every pinned request. Non-strict, an unknown
          # host falls back to the load balancer (the one shim). To run several shims
          # here, give each a fixed address, set its FERRY_SHIM_ADVERTISE to it, list
          # them in the cluster (STATIC) and set `strict: true`.
""")
    d.replace("              strict: true\n", "")
    d.replace("  - name: shim\n    type: STATIC\n",
              "  - name: shim\n    type: STRICT_DNS\n    dns_lookup_family: V4_ONLY\n")
    d.replace("{ address: 127.0.0.1, port_value: 8081 }  # FERRY_SHIM",
              "{ address: shim, port_value: 8081 }  # FERRY_SHIM")
    anchor_shim_options(d)
    d.append("""\
  # Safe reads: the replica's shim (compose profile `replicas`) at priority 0, the
  # primary's at priority 1. Without the profile `shim-replica` does not resolve, its
  # priority has no host, and reads go to the primary (checked: Envoy starts and routes).
  - name: reads
    type: STRICT_DNS
    dns_lookup_family: V4_ONLY
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
              socket_address: { address: shim-replica, port_value: 8081 }
      - priority: 1
        lb_endpoints:
        - endpoint:
            address:
              socket_address: { address: shim, port_value: 8081 }
""")
    return d


def compressor():
    d = scenario("compressor.yaml", "compressor", """\
# Benchmark scenario (loadtest/bench.sh compression): envoy/ferry.yaml with Envoy's own
# compressor filters (zstd level 1, gzip BEST_SPEED; on application/json answers of
# 1 KiB and more, for clients that accept them) in front of the Ferry filter, which is
# told not to compress (`"compression": {"preference": []}`). It measures Envoy's
# compressor against the filter's own answer compression for Connect unary JSON.
""")
    d.cut("          # Connect unary answers are plain HTTP bodies", "          - name: ferry\n", """\
          # Envoy's compressors, before the Ferry filter: on the way out they see its
          # JSON answer (filters encode in reverse order). Each acts when the client's
          # Accept-Encoding names its codec; with both accepted, Envoy picks by q-value.
          - name: envoy.filters.http.compressor.zstd
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.compressor.v3.Compressor
              response_direction_config:
                common_config:
                  min_content_length: 1024
                  content_type_matcher: [{ exact: application/json }]
              compressor_library:
                name: zstd
                typed_config:
                  "@type": type.googleapis.com/envoy.extensions.compression.zstd.compressor.v3.Zstd
                  compression_level: 1
          - name: envoy.filters.http.compressor.gzip
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.compressor.v3.Compressor
              response_direction_config:
                common_config:
                  min_content_length: 1024
                  content_type_matcher: [{ exact: application/json }]
              compressor_library:
                name: gzip
                typed_config:
                  "@type": type.googleapis.com/envoy.extensions.compression.gzip.compressor.v3.Gzip
                  compression_level: BEST_SPEED
""")
    d.cut("                      envoy: [zstd]\n", "                vm_config:\n",
          "                      preference: []\n")
    return d


def two_shims():
    d = scenario("two-shims.yaml", "two_shims", """\
# Ferry with two shims behind one Envoy cluster: the gateway of ferry.yaml (same
# listeners, filter and routes), the `shim` cluster with two endpoints. Unpinned
# statements balance across both; every request of a pinned session (a transaction
# or session state) reaches the shim holding its MySQL connection: the filter reads
# the holder from the sealed session and sets `x-ferry-host`, and the
# stateful_session filter (strict) routes on it. Both shims must read the same
# session key file (FERRY_SESSION_KEYS_FILE) and advertise the address listed here
# (FERRY_SHIM_ADVERTISE, default their FERRY_SHIM_ADDR). Runnable from the
# repository root (`envoy -c envoy/two-shims.yaml`), or with
#   FERRY_SHIMS=2 scripts/stack.sh up
# which starts the second shim on FERRY_SHIM2_ADDR and renders this file.
""")
    d.replace("          # Other requests balance. Harmless with one shim; see two-shims.yaml.\n",
              "          # Other requests balance. Here: two shims.\n")
    # A dead shim out after one failed check (ferry.yaml: two), so unpinned statements
    # leave it within about a second.
    d.cut("    # Active health: the shim's /healthz answers 503", "    health_checks:\n", """\
    # A shim that dies is taken out within about a second, so unpinned statements stop
    # going to it (no_traffic_interval matters: without traffic a dead host would stay
    # healthy). Its pinned sessions get "transaction lost" either way (strict affinity).
""")
    d.replace("      unhealthy_threshold: 2\n", "      unhealthy_threshold: 1\n")
    d.insert_after("              socket_address: { address: 127.0.0.1, port_value: 8081 }  # FERRY_SHIM\n", """\
        - endpoint:
            address:
              socket_address: { address: 127.0.0.1, port_value: 8082 }  # FERRY_SHIM2
""")
    return d


# ----- mesh-shaped scenarios: what Istio's or Envoy Gateway's control plane generates -----
#
# Each is the Envoy configuration istiod or Envoy Gateway's translator would generate from
# our manifests (deploy/istio, deploy/envoy-gateway; names and settings as there), read
# off their code (istio pilot/pkg/networking/core, pilot/pkg/model/extensions.go,
# pkg/wasm; gateway internal/xds/translator, v1.9.1): how the Ferry filter is delivered,
# its configuration's form, its place among the HTTP filters, what is absent, routes'
# retries, and names. Listener TLS/QUIC settings, the shim cluster's options (health
# checks, outlier detection, breakers, HTTP/2 settings) and the access log stay
# ferry.yaml's: those control planes derive them from other resources (DestinationRule,
# Telemetry; ClientTrafficPolicy, BackendTrafficPolicy, EnvoyProxy).

# The routes of ferry.yaml after the Connect GET route is gone, by their match. Ferry's own
# RPCs (/ferry.v1alpha1.Database/) are a second match of the manifests' `read` and `rpc`
# routes (VirtualService http routes, HTTPRoute rules).
ROUTE_MATCHES = [
    "              - match:\n                  path: /psdb.v1alpha1.Database/StreamExecute\n"
    "                  headers: [{ name: x-ferry-class, string_match: { exact: read } }]\n",
    "              - match:\n                  prefix: /psdb.v1alpha1.Database/\n"
    "                  headers: [{ name: x-ferry-class, string_match: { exact: read } }]\n",
    "              - match:\n                  prefix: /ferry.v1alpha1.Database/\n"
    "                  headers: [{ name: x-ferry-class, string_match: { exact: read } }]\n",
    "              - match: { path: /psdb.v1alpha1.Database/StreamExecute }\n",
    "              - match: { prefix: /psdb.v1alpha1.Database/ }\n",
    "              - match: { prefix: /ferry.v1alpha1.Database/ }\n",
]


def name_routes(d, names, extra=lambda i: ""):
    """Gives the six routes their names (and `extra(i)` lines, e.g. per-route filter
    config), in ferry.yaml's order."""
    for i, (match, name) in enumerate(zip(ROUTE_MATCHES, names)):
        d.replace(match, f"              - name: {name}\n{extra(i)}"
                  + match.replace("              - match:", "                match:", 1))


def cut_connect_get(d):
    """No Lua filter, so no Connect GET route: a wasm filter cannot give a bodiless GET a
    body, and no mesh API adds the Lua helper (Connect GET is not served)."""
    d.cut("              # Connect's GET form of Execute: the only requests the Lua filter below runs",
          "              # Routing by the filter's classification:")


def cut_buffer_limit(d):
    """Neither control plane sets the virtual host's request_body_buffer_limit."""
    d.cut("              # The filter buffers whole messages to convert them; this bounds the\n",
          "              response_headers_to_add:\n")


def own_filters(d):
    """The HTTP filters are the scenario's own: `@FILTERS@` marks where they go."""
    d.cut("          http_filters: &filters\n", "\n  # UDP: the same routes",
          "          http_filters: &filters\n@FILTERS@")


def mesh_read_retry(d):
    """The read routes' retries as both control planes convert ours (VirtualService
    retries with retryIgnorePreviousHosts; BackendTrafficPolicy retry): no retry_priority
    (neither can say it: with one shim, or one priority, it changes nothing), and
    host_selection_retry_max_attempts 5, their constant."""
    d.replace("              # each retry on a lower priority than the ones already tried. Everything\n",
              "              # each retry on another host (no retry_priority here). Everything\n")
    d.cut("                    retry_priority:\n", "                    retry_host_predicate:\n")
    d.replace("                    host_selection_retry_max_attempts: 3\n",
              "                    host_selection_retry_max_attempts: 5\n")


def mesh_plugin_json(session_affinity):
    """The filter's settings as the JSON string both control planes hand it (a
    google.protobuf.StringValue): ferry.yaml's, without `compression.envoy` (no Envoy
    compressor here) and with `session_affinity` as given. Compact, keys sorted (as
    Istio's protojson of a WasmPlugin's pluginConfig). Neither control plane sets
    `x-ferry-client-addr`, so the filter sets it from Envoy's downstream address, over any
    value the client sent (`client_address: "peer"`)."""
    s = plugin_settings()
    s["compression"].pop("envoy")
    s["session_affinity"] = session_affinity
    s["client_address"] = "peer"
    # Without Envoy's allow_on_headers_stop_iteration (the plain plugin forms) the filter is
    # told not to try holding headers; with it (the escape hatch) it finds out ("auto",
    # the default). docs/design/filter.md "Without the header hold (meshes)".
    if not session_affinity:
        s["header_hold"] = "off"
    return json.dumps(s, sort_keys=True, separators=(",", ":"))


def json_value(indent, session_affinity):
    """The `value:` line of the configuration."""
    pad = " " * indent
    return f"{pad}value: '{mesh_plugin_json(session_affinity)}'  # FERRY_PLUGIN_JSON\n"


def ecds_resource(name, comment, body):
    """The `#ECDS ` lines scripts/render-envoy.sh writes out as the ECDS resource file, after
    a comment block."""
    res = ["resources:",
           "- \"@type\": type.googleapis.com/envoy.config.core.v3.TypedExtensionConfig",
           f"  name: {name}"] + ["  " + line if line else "" for line in body.splitlines()]
    return ("\n" + "".join(f"# {line}\n" for line in comment.splitlines())
            + "".join(f"#ECDS {line}".rstrip() + "\n" for line in res))


GRPC_WEB = """\
          - name: envoy.filters.http.grpc_web
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.grpc_web.v3.GrpcWeb
"""

ROUTER = """\
          - name: envoy.filters.http.router
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
"""

# --- Istio: the ingress gateway istio-system/istio-ingressgateway, deploy/istio/base ---

ISTIO_SHIM = "outbound|8081||ferry-shim.ferry.svc.cluster.local"


def istio_gateway(d):
    """What istiod makes of deploy/istio/base: the node, names, routes, no client distance."""
    # The node as the istio-agent's bootstrap names a gateway pod (ECDS needs one).
    d.insert_before("admin:\n", """\
node:
  id: router~127.0.0.1~istio-ingressgateway-0.istio-system~istio-system.svc.cluster.local
  cluster: istio-ingressgateway.istio-system
""")
    # Gateway ferry/ferry-gateway, server port 9443 (name https-ferry, HTTPS); HTTP/3 on a
    # gateway: a QUIC listener of its own.
    d.replace("  - name: ferry_tcp\n", "  - name: 0.0.0.0_9443\n")
    d.replace("          stat_prefix: ferry_tcp\n", "          stat_prefix: outbound_0.0.0.0_9443_\n")
    d.replace("  - name: ferry_quic\n", "  - name: udp_0.0.0.0_9443\n")
    d.replace("          stat_prefix: ferry_quic\n", "          stat_prefix: outbound_udp_0.0.0.0_9443_\n")
    # VirtualService ferry/ferry for host ferry.example.com; its domain `*` here, so that
    # 127.0.0.1 is served.
    d.replace("            name: ferry\n            virtual_hosts:\n            - name: ferry\n"
              "              domains: [\"*\"]\n",
              "            name: https.9443.https-ferry.ferry-gateway.ferry\n            virtual_hosts:\n"
              "            - name: ferry.example.com:9443\n"
              "              domains: [\"*\"]  # Istio: [ferry.example.com]; here any, for 127.0.0.1\n")
    # The `ferry` matches of routes read and rpc: istiod names a match's route
    # `<route>.<match>`.
    name_routes(d, ["stream-read", "read", "read.ferry", "stream", "rpc", "rpc.ferry"])
    mesh_read_retry(d)
    # Every route's gRPC deadline cap: its timeout (0s: none), as istiod sets it.
    d.replace("                  timeout: 0s\n",
              "                  timeout: 0s\n                  max_grpc_timeout: 0s\n", count=2)
    d.replace("                  timeout: 30s\n",
              "                  timeout: 30s\n                  max_grpc_timeout: 30s\n", count=4)
    d.replace("                  cluster: shim\n", f"                  cluster: \"{ISTIO_SHIM}\"\n", count=6)
    d.replace("  # The shim: canonical Connect-proto over h2c.\n  - name: shim\n", f"""\
  # The shim: canonical Connect-proto over h2c. Istio's name for the Service
  # ferry-shim.ferry port 8081 (an EDS cluster there; here STATIC at FERRY_SHIM_ADDR).
  - name: "{ISTIO_SHIM}"
""")
    d.replace("      cluster_name: shim\n", f"      cluster_name: \"{ISTIO_SHIM}\"\n")
    # A second shim pod when the stack runs two (FERRY_SHIMS=2: render-envoy.sh keeps the
    # lines tagged FERRY_SHIM2_OPT, else drops them), as EDS lists a Deployment's ready pods.
    d.insert_after("              socket_address: { address: 127.0.0.1, port_value: 8081 }  # FERRY_SHIM\n", """\
        - endpoint:  # FERRY_SHIM2_OPT
            address:  # FERRY_SHIM2_OPT
              socket_address: { address: 127.0.0.1, port_value: 8082 }  # FERRY_SHIM2_OPT
""")
    # No active health check: a DestinationRule cannot ask for one (Kubernetes readiness
    # decides, through EDS; outlier detection stays). Envoy's default Host for one would
    # be the cluster's name, which no HTTP/2 request may carry.
    d.cut("    # Active health: the shim's /healthz answers 503", "    load_assignment:\n", """\
    # No active health check: Istio has none (a pod's readiness decides, through EDS).
""")
    # The HTTP connection manager's early header mutation cannot be said in Istio's APIs:
    # no x-ferry-client-rtt-ms / x-ferry-client-addr for the filter.
    d.cut("          # How far the client is: the connection's last measured round trip",
          "          # Access log (docs/reference/access-log.md \"Access log\")")
    d.replace("          early_header_mutation_extensions: *client_distance\n", "")


# Istio's own filters after the plugins (listener_builder.go), on a gateway.
ISTIO_FILTERS_AFTER = """\
          # Istio's own filters after the plugins (listener_builder.go): grpc_stats, fault
          # and cors always (empty configs: they act only where a route asks). Left out,
          # Istio-build only: istio.alpn here, istio.stats (Telemetry) before the router,
          # and istio.metadata_exchange, which istiod puts first in the chain.
          - name: envoy.filters.http.grpc_stats
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.grpc_stats.v3.FilterConfig
              emit_filter_state: true
              stats_for_all_methods: false
          - name: envoy.filters.http.fault
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.fault.v3.HTTPFault
          - name: envoy.filters.http.cors
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.cors.v3.Cors
"""

ISTIO_WASM_PLUGIN = "extensions.istio.io/wasmplugin/istio-system.ferry"


def istio():
    d = scenario("istio.yaml", "istio", f"""\
# Ferry as Istio runs it with a WasmPlugin (deploy/istio/base + plain): the ingress
# gateway's Envoy as istiod configures it, the Ferry filter delivered, placed and
# configured as istiod and the istio-agent do it for WasmPlugin istio-system/ferry:
# - By ECDS: in the HTTP connection manager the filter is only a name,
#   {ISTIO_WASM_PLUGIN}, with `config_discovery` (type_urls: the
#   Wasm filter's and RBAC's: when the agent cannot pull the module it sends an RBAC
#   filter instead, deny-all, or allow-all for failStrategy FAIL_OPEN; no default_config;
#   initial_fetch_timeout 0s: the listener waits for the resource). istiod serves it over
#   ADS; here Envoy reads it from a file (path_config_source): scripts/render-envoy.sh
#   writes it, rendered, from the `#ECDS ` lines at the end of this file to
#   $FERRY_RUN_DIR/ecds/istio.yaml (make validate and stack.sh render first, so it exists;
#   replace it by a rename and a running Envoy reloads it:
#   extension_config_discovery.http_filter.<name>.config_reload).
# - The resource as the agent forwards it: vm_config.code.local (the module it pulled from
#   the OCI image), no vm_id, plugin name istio-system.ferry, root_id the pluginName,
#   failure_policy from failStrategy (FAIL_RELOAD), configuration a JSON string
#   (google.protobuf.StringValue, the pluginConfig), and no
#   allow_on_headers_stop_iteration (WasmPlugin has no field for it): the filter cannot
#   hold request headers, so no class routing and no session affinity
#   (`session_affinity: false`).
# - Order: the plugin (phase STATS) after Istio's authn/authz filters (none here), then
#   envoy.filters.http.grpc_web, Istio's grpc_stats, fault, cors, the router. (istiod adds
#   grpc_web only where the port's protocol is GRPC-Web, a sidecar's `grpc-web` port or a
#   plain-text gateway server; an HTTPS server such as ours gets none. Either way it is
#   after the plugin: the filter sees gRPC-Web as it arrives and serves it itself.)
# - Absent, as Istio's APIs cannot ask for them: the Lua filter (Connect GET is not
#   served), Envoy's zstd compressor (the filter compresses), stateful_session, the early
#   header mutation giving the filter the client's distance, and the virtual host's
#   request_body_buffer_limit (the listener's 1 MiB bounds what the filter may buffer).
# - The shim's cluster: no active health check (a DestinationRule cannot ask for one;
#   Kubernetes readiness decides, through EDS), outlier detection and the rest ferry.yaml's.
# - Routes as istiod converts the VirtualService: its route names (read.ferry, rpc.ferry:
#   the `ferry` match of read and rpc, Ferry's own RPCs), the read routes'
#   retries (no retry_priority, host_selection_retry_max_attempts 5), max_grpc_timeout =
#   the timeout (it acts on requests the router sees as gRPC: the filter hands it Connect
#   proto, so a client's grpc-timeout stays the shim's to keep). Names: listeners
#   0.0.0.0_9443 / udp_0.0.0.0_9443, route configuration
#   https.9443.https-ferry.ferry-gateway.ferry, virtual host ferry.example.com:9443,
#   cluster outbound|8081||ferry-shim.ferry.svc.cluster.local (EDS in Istio; here STATIC
#   at FERRY_SHIM_ADDR). Addresses and ports are this machine's (rendered).
# Istio-build-only filters (istio.metadata_exchange, istio.alpn, istio.stats) are left
# out: this Envoy is upstream's. Run it rendered (the ECDS file comes from rendering):
#   FERRY_ENVOY_SCENARIO=istio scripts/stack.sh up
""")
    cut_connect_get(d)
    cut_buffer_limit(d)
    own_filters(d)
    istio_gateway(d)
    d.replace("@FILTERS@", f"""\
          # The Ferry filter: WasmPlugin istio-system/ferry (phase STATS), by ECDS.
          - name: {ISTIO_WASM_PLUGIN}
            config_discovery:
              config_source:
                path_config_source: {{ path: .run/ecds/istio.yaml }}  # FERRY_ECDS
                initial_fetch_timeout: 0s
                resource_api_version: V3
              type_urls:
              - type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm
              - type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC
          # gRPC-Web after the plugin (where istiod adds it; see the top of this file).
{GRPC_WEB}{ISTIO_FILTERS_AFTER}{ROUTER}""")
    d.append(ecds_resource(ISTIO_WASM_PLUGIN, """\
---- The ECDS resource. scripts/render-envoy.sh writes the `#ECDS ` lines below, rendered
and without that prefix, to $FERRY_RUN_DIR/ecds/istio.yaml: what istiod sends for
WasmPlugin istio-system/ferry, as the istio-agent forwards it to Envoy. When the agent
cannot pull the module it forwards instead, under the same name, a typed_config
{"@type": type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC, rules: {},
rules_stat_prefix: wasm-default-deny}: every request 403.""", f"""\
typed_config:
  "@type": type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm
  config:
    name: istio-system.ferry
    root_id: ferry
    failure_policy: FAIL_RELOAD
    configuration:
      "@type": type.googleapis.com/google.protobuf.StringValue
{json_value(6, False)}\
    vm_config:
      runtime: envoy.wasm.runtime.v8
      code:
        local: {{ filename: target/wasm32-wasip1/release/ferry_filter.wasm }}  # FERRY_WASM
"""))
    return d


def istio_envoyfilter():
    d = scenario("istio-envoyfilter.yaml", "istio_envoyfilter", """\
# Ferry as Istio runs it with the EnvoyFilter escape hatch (deploy/istio/base +
# escape-hatch, instead of the WasmPlugin): envoy/istio.yaml's gateway (see there) plus
# what the EnvoyFilter istio-system/ferry adds, which a WasmPlugin cannot say:
# - EXTENSION_CONFIG (ADD; the only operation istiod applies to extension configs, so it
#   cannot amend a WasmPlugin's resource): the whole Wasm filter as an ECDS resource of its
#   own, `istio-system/ferry`, with allow_on_headers_stop_iteration: true (the header
#   hold: class routing, session affinity) and `session_affinity: true`. istiod serves it
#   over ADS (the agent rewrites its oci:// module to a local file, as for a WasmPlugin);
#   here from $FERRY_RUN_DIR/ecds/istio-envoyfilter.yaml, which scripts/render-envoy.sh
#   writes from the `#ECDS ` lines at the end of this file.
# - HTTP_FILTER, each INSERT_BEFORE the router, in this order: envoy.filters.http.grpc_web
#   (gRPC-Web made gRPC for the filter), the Ferry filter (config_discovery, default
#   fetch timeout), and Envoy's stateful_session on the filter's `x-ferry-host` (strict),
#   named ferry.stateful_session (istiod may add one called
#   envoy.filters.http.stateful_session of its own).
# - VIRTUAL_HOST (MERGE): request_body_buffer_limit as ferry.yaml's, above the filter's
#   max_response_bytes.
# Still absent, as in istio.yaml: the Lua filter (Connect GET), Envoy's zstd compressor,
# the early header mutation (client distance). Names and routes as in istio.yaml.
#   FERRY_ENVOY_SCENARIO=istio-envoyfilter scripts/stack.sh up
""")
    d.insert_before("              # The filter buffers whole messages to convert them; this bounds the\n",
                    "              # EnvoyFilter (VIRTUAL_HOST, MERGE), as in ferry.yaml:\n")
    cut_connect_get(d)
    own_filters(d)
    istio_gateway(d)
    d.replace("@FILTERS@", f"""\
{ISTIO_FILTERS_AFTER}\
          # EnvoyFilter (HTTP_FILTER, INSERT_BEFORE the router) x 3: gRPC-Web first, made
          # gRPC for the filter; the Ferry filter by ECDS (the EnvoyFilter's own
          # EXTENSION_CONFIG); Envoy's session affinity on its `x-ferry-host` (strict: a
          # pinned session's shim or 503, which the filter answers "transaction lost").
{GRPC_WEB}\
          - name: istio-system/ferry
            config_discovery:
              config_source:
                path_config_source: {{ path: .run/ecds/istio-envoyfilter.yaml }}  # FERRY_ECDS
                resource_api_version: V3
              type_urls:
              - type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm
          - name: ferry.stateful_session
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.stateful_session.v3.StatefulSession
              strict: true
              session_state:
                name: envoy.http.stateful_session.header
                typed_config:
                  "@type": type.googleapis.com/envoy.extensions.http.stateful_session.header.v3.HeaderBasedSessionState
                  name: x-ferry-host
{ROUTER}""")
    d.append(ecds_resource("istio-system/ferry", """\
---- The ECDS resource. scripts/render-envoy.sh writes the `#ECDS ` lines below, rendered
and without that prefix, to $FERRY_RUN_DIR/ecds/istio-envoyfilter.yaml: the EnvoyFilter's
EXTENSION_CONFIG (ADD), as the istio-agent forwards it to Envoy.""", f"""\
typed_config:
  "@type": type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm
  config:
    name: ferry
    root_id: ferry
    failure_policy: FAIL_RELOAD
    # What only the EnvoyFilter can say: the filter may hold request headers until it
    # has read the body (class routing, session affinity).
    allow_on_headers_stop_iteration: true
    configuration:
      "@type": type.googleapis.com/google.protobuf.StringValue
{json_value(6, True)}\
    vm_config:
      vm_id: ferry
      runtime: envoy.wasm.runtime.v8
      code:
        local: {{ filename: target/wasm32-wasip1/release/ferry_filter.wasm }}  # FERRY_WASM
"""))
    return d


# --- Envoy Gateway: Gateway ferry/ferry, listener https (443), deploy/envoy-gateway/base ---

EG_WASM = "envoy.filters.http.wasm/envoyextensionpolicy/ferry/ferry/wasm/0"
EG_CLUSTERS = [f"httproute/ferry/ferry/rule/{i}" for i in range(4)]
# ferry.yaml's routes as (HTTPRoute rule, match): rules read (1) and rpc (3) have a second
# match, Ferry's own RPCs (/ferry.v1alpha1.Database/).
EG_ROUTES = [(0, 0), (1, 0), (1, 1), (2, 0), (3, 0), (3, 1)]


def envoy_gateway():
    d = scenario("envoy-gateway.yaml", "envoy_gateway", f"""\
# Ferry as Envoy Gateway runs it with an EnvoyExtensionPolicy alone (no EnvoyPatchPolicy,
# no EnvoyProxy filterOrder): the Envoy configuration EG's translator (v1.9.1) generates
# from deploy/envoy-gateway/base without its filterOrder, plus EnvoyExtensionPolicy
# ferry/ferry with the filter as wasm[0] (name ferry, rootID ferry, code over HTTP(S)):
# - The module by vm_config.code.remote: EG pulls the image or URL itself and serves the
#   module to Envoy from its own HTTPS server, cluster `wasm_cluster` (mutual TLS: the
#   server's certificate checked against EG's CA, no name check; Envoy's client
#   certificate presented), with the module's sha256; 10 s timeout, 10 retries (1 s to 30 s
#   back-off). Here that server is scripts/wasm-server.py on 127.0.0.1:FERRY_WASM_HTTPS_PORT
#   (default 8449) with the dev CA and certificates, which scripts/stack.sh starts for this
#   scenario only (pid and log `wasm-server`); scripts/render-envoy.sh renders the .wasm's
#   sha256 at render time (`# FERRY_WASM_SHA256`) and the port (`# FERRY_WASM_HTTPS`).
# - The HTTP filter `{EG_WASM}`:
#   disabled on the listener and enabled per route (typed_per_filter_config:
#   envoy.config.route.v3.FilterConfig), vm_id its name, configuration a JSON string
#   (google.protobuf.StringValue), no failure_policy (EG sets only fail_open: a VM that
#   dies fails closed, no FAIL_RELOAD), and no allow_on_headers_stop_iteration
#   (EnvoyExtensionPolicy has no field for it): the filter cannot hold request headers,
#   so no class routing and no session affinity (`session_affinity: false`).
# - EG's default order: Wasm (200+) before grpc_web (305; ClientTrafficPolicy
#   grpc.enableWeb), then the router (suppress_envoy_headers, EG's default). The filter
#   sees gRPC-Web as it arrives and serves it itself. (deploy/envoy-gateway/base's
#   EnvoyProxy filterOrder puts grpc_web first instead.)
# - ClientTrafficPolicy: the listener's per-connection buffer 80 MiB (connection.bufferLimit,
#   TCP listener only), no virtual-host request_body_buffer_limit (EG sets none); its
#   headers.earlyRequestHeaders `set` makes the early header mutation's round trip
#   (x-ferry-client-rtt-ms) and nothing else: the filter sets x-ferry-client-addr itself
#   from Envoy's downstream address (`client_address: "peer"`), over any value the client
#   sent.
# - Absent, as EG adds none here: the Lua filter (Connect GET is not served), Envoy's zstd
#   compressor (the filter compresses), stateful_session.
# - Routes as EG converts HTTPRoute ferry/ferry (rules stream-read, read, stream, rpc;
#   read and rpc match /ferry.v1alpha1.Database/ too, as their match 1: Ferry's own RPCs;
#   timeouts.request) and BackendTrafficPolicy ferry-read (retries: no retry_priority,
#   host_selection_retry_max_attempts 5); the active health check's Host the route's
#   hostname, ferry.example.com (EG's choice). Names: listeners ferry/ferry/https and
#   ferry/ferry/https-quic (stat prefix https-10443: EG's port for 443), route configuration
#   ferry/ferry/https, virtual host ferry/ferry/https/ferry_example_com, a cluster per rule
#   (httproute/ferry/ferry/rule/0..3, the same shim; EDS in EG, here STATIC at
#   FERRY_SHIM_ADDR). Addresses and ports are this machine's (rendered).
#   FERRY_ENVOY_SCENARIO=envoy-gateway scripts/stack.sh up
""")
    cut_connect_get(d)
    cut_buffer_limit(d)
    own_filters(d)
    d.replace("  - name: ferry_tcp\n", "  - name: ferry/ferry/https\n")
    d.replace("    per_connection_buffer_limit_bytes: 1048576\n",
              "    per_connection_buffer_limit_bytes: 83886080  # ClientTrafficPolicy connection.bufferLimit: 80Mi\n")
    d.replace("          stat_prefix: ferry_tcp\n", "          stat_prefix: https-10443\n")
    d.replace("  - name: ferry_quic\n", "  - name: ferry/ferry/https-quic\n")
    d.replace("          stat_prefix: ferry_quic\n", "          stat_prefix: https-10443\n")
    d.replace("            name: ferry\n            virtual_hosts:\n            - name: ferry\n"
              "              domains: [\"*\"]\n",
              "            name: ferry/ferry/https\n            virtual_hosts:\n"
              "            - name: ferry/ferry/https/ferry_example_com\n"
              "              domains: [\"*\"]  # EG: [ferry.example.com]; here any, for 127.0.0.1\n")
    # deploy/envoy-gateway's ClientTrafficPolicy headers.earlyRequestHeaders sets the round
    # trip only (EG puts its removes after its sets, so none); the filter sets
    # x-ferry-client-addr (`client_address: "peer"`).
    d.cut("          # How far the client is: the connection's last measured round trip",
          "          early_header_mutation_extensions: &client_distance\n", """\
          # How far the client is: the connection's last measured round trip (the
          # kernel's smoothed TCP estimate), in whole ms, as `x-ferry-client-rtt-ms`. The
          # filter compresses answers only for clients at least `compression.min_rtt_ms`
          # away (docs/benchmarks/compression.md "By distance"). EG: ClientTrafficPolicy
          # headers.earlyRequestHeaders.set. QUIC connections get no measure: there a
          # client's own value passes (EG's removes come after its sets), which decides
          # only whether its own answers are compressed.
""")
    d.cut("              - remove: x-ferry-client-rtt-ms\n",
          "          # Access log (docs/reference/access-log.md \"Access log\")", """\
              - append:
                  header: { key: x-ferry-client-rtt-ms, value: "%DOWNSTREAM_CX_RTT%" }
                  append_action: OVERWRITE_IF_EXISTS_OR_ADD
""")
    enable = ("                typed_per_filter_config: *enable_ferry\n", f"""\
                # The Ferry filter, disabled on the listener, enabled on this route.
                typed_per_filter_config: &enable_ferry
                  {EG_WASM}:
                    "@type": type.googleapis.com/envoy.config.route.v3.FilterConfig
                    config: {{}}
""")
    name_routes(d, [f"{EG_CLUSTERS[r]}/match/{m}/ferry_example_com" for r, m in EG_ROUTES],
                lambda i: enable[i == 0])
    mesh_read_retry(d)
    d._find("                  cluster: shim\n", "route clusters", count=len(EG_ROUTES))
    for r, _ in EG_ROUTES:  # one cluster per HTTPRoute rule, in route order
        d.text = d.text.replace("                  cluster: shim\n", f"                  cluster: {EG_CLUSTERS[r]}\n", 1)
    d.replace("  # The shim: canonical Connect-proto over h2c.\n  - name: shim\n", f"""\
  # The shim: canonical Connect-proto over h2c, a cluster per HTTPRoute rule as EG makes
  # them (EDS there; here STATIC at FERRY_SHIM_ADDR). Rules 1-3 below share rule 0's options.
  - name: {EG_CLUSTERS[0]}
""")
    d.replace("      cluster_name: shim\n", f"      cluster_name: {EG_CLUSTERS[0]}\n")
    # BackendTrafficPolicy healthCheck.active: EG's Host for it is the route's hostname.
    d.replace("        path: /healthz\n", "        path: /healthz\n        host: ferry.example.com\n")
    anchor_shim_options(d)
    for c in EG_CLUSTERS[1:]:
        d.append(f"""\
  - name: {c}
    type: STATIC
    connect_timeout: 1s
    lb_policy: ROUND_ROBIN
    typed_extension_protocol_options: *typed
    circuit_breakers: *circuit
    outlier_detection: *outlier
    health_checks: *health
    load_assignment:
      cluster_name: {c}
      endpoints:
      - lb_endpoints:
        - endpoint:
            address:
              socket_address: {{ address: 127.0.0.1, port_value: 8081 }}  # FERRY_SHIM
""")
    d.append("""\
  # EG's wasm_cluster (its own HTTPS server, which serves the modules it pulled): here
  # scripts/wasm-server.py. As EG's: DNS, 10 s connect timeout, TLS up to 1.3 checked
  # against the CA only (no name), Envoy's client certificate presented. EG speaks
  # HTTP/2 to its server; scripts/wasm-server.py (Python's http.server) speaks HTTP/1.1.
  - name: wasm_cluster
    type: STRICT_DNS
    connect_timeout: 10s
    dns_lookup_family: V4_PREFERRED
    load_assignment:
      cluster_name: wasm_cluster
      endpoints:
      - lb_endpoints:
        - endpoint:
            address:
              socket_address: { address: 127.0.0.1, port_value: 8449 }  # FERRY_WASM_HTTPS
    transport_socket:
      name: envoy.transport_sockets.tls
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext
        common_tls_context:
          tls_params: { tls_maximum_protocol_version: TLSv1_3 }
          tls_certificates:
          - certificate_chain: { filename: .run/certs/envoy-client.pem }  # FERRY_ENVOY_CLIENT_CERT
            private_key: { filename: .run/certs/envoy-client.key }  # FERRY_ENVOY_CLIENT_KEY
          validation_context:
            trusted_ca: { filename: .run/certs/ca.pem }  # FERRY_CA
""")
    d.replace("@FILTERS@", f"""\
          # The Ferry filter (EnvoyExtensionPolicy ferry/ferry, wasm[0]): disabled here,
          # enabled by each route's typed_per_filter_config.
          - name: {EG_WASM}
            disabled: true
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm
              config:
                name: ferry
                root_id: ferry
                configuration:
                  "@type": type.googleapis.com/google.protobuf.StringValue
{json_value(18, False)}\
                vm_config:
                  vm_id: envoyextensionpolicy/ferry/ferry/wasm/0
                  runtime: envoy.wasm.runtime.v8
                  code:
                    remote:
                      http_uri:
                        uri: https://127.0.0.1:8449/ferry_filter.wasm  # FERRY_WASM_HTTPS
                        cluster: wasm_cluster
                        timeout: 10s
                      # The module's sha256, rendered from the .wasm by scripts/render-envoy.sh.
                      sha256: {'0' * 64}  # FERRY_WASM_SHA256
                      retry_policy:
                        num_retries: 10
                        retry_back_off: {{ base_interval: 1s, max_interval: 30s }}
          # gRPC-Web: ClientTrafficPolicy grpc.enableWeb (EG order 305, after Wasm's 200).
{GRPC_WEB}\
          - name: envoy.filters.http.router
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
              suppress_envoy_headers: true
""")
    return d


def browser_filter_first():
    """browser.yaml with the Ferry filter before Envoy's grpc_web, where Istio and Envoy
    Gateway put a Wasm plugin: the filter serves gRPC-Web itself (tests/browser runs
    through both)."""
    d = browser()
    d.name = "browser-filter-first.yaml"
    d.replace("# GENERATED from envoy/ferry.yaml by scripts/envoy-scenarios.py (browser):",
              "# GENERATED from envoy/ferry.yaml by scripts/envoy-scenarios.py (browser_filter_first):")
    d.replace("# Ferry for browsers on other origins: the gateway of ferry.yaml (same listeners,\n",
              "# envoy/browser.yaml with the Ferry filter BEFORE Envoy's grpc_web filter, the order\n"
              "# Istio and Envoy Gateway give a Wasm plugin: a gRPC-Web request reaches the Ferry\n"
              "# filter as it arrives and the filter serves it itself (grpc_web, after it, then\n"
              "# sees a Connect request and stays out). Otherwise as browser.yaml:\n"
              "# Ferry for browsers on other origins: the gateway of ferry.yaml (same listeners,\n")
    grpc_web = d.cut("          # gRPC-Web (browsers): Envoy's own bridge.",
                     "          # Connect's GET form of Execute")
    d.insert_before("          # Envoy's own session affinity: a request carrying", grpc_web)
    return d


def tokens():
    d = browser()
    d.name = "tokens.yaml"
    d.replace("# GENERATED from envoy/ferry.yaml by scripts/envoy-scenarios.py (browser):",
              "# GENERATED from envoy/ferry.yaml by scripts/envoy-scenarios.py (tokens):")
    d.replace("# Ferry for browsers on other origins: the gateway of ferry.yaml (same listeners,\n",
              "# Short-lived tokens instead of passwords (docs/guides/tokens.md): envoy/browser.yaml\n"
              "# plus Envoy's jwt_authn, which verifies `Authorization: Bearer <JWT>` (signature,\n"
              "# issuer, audience, expiry) and hands the shim the token's claims; the shim runs the\n"
              "# request as the MySQL account one claim names (FERRY_TOKEN_ACCOUNTS). Requests\n"
              "# with Basic credentials are served as ever. Runnable with\n"
              "#   FERRY_ENVOY_SCENARIO=tokens scripts/stack.sh up\n"
              "# (keys, a JWKS server and the shim's account mapping made for development:\n"
              "# scripts/dev-idp.py). Otherwise as browser.yaml:\n"
              "# Ferry for browsers on other origins: the gateway of ferry.yaml (same listeners,\n")
    d.insert_before("          # Envoy's own session affinity: a request carrying", """\
          # Tokens, verified after the Ferry filter: the filter lets a Bearer header
          # through, and turns this filter's plain-text 401 into the client protocol's
          # `unauthenticated` on the way back ("authentication failed at the gateway:
          # Jwt is expired"). Checked: the signature against the provider's keys (JWKS),
          # the issuer, the audience, expiry and not-before (30 s of clock skew). A
          # verified token is removed from the request (`forward: false`: it reaches
          # neither the shim, MySQL nor a log) and its claims go to the shim in
          # `x-ferry-token-claims` (a client's own value was removed on arrival). Only
          # the Authorization header carries a token, never the query string (access
          # logs). A request without a token keeps its Basic credentials
          # (`allow_missing`); remove that line to accept tokens only.
          - name: envoy.filters.http.jwt_authn
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.jwt_authn.v3.JwtAuthentication
              providers:
                # Keys from a file, read when Envoy starts (rotate: replace it, restart).
                file:
                  issuer: "https://idp.ferry.invalid/file"  # FERRY_TOKEN_ISSUER
                  audiences: ["ferry"]  # FERRY_TOKEN_AUDIENCE
                  local_jwks: { filename: .run/tokens/jwks-file.json }  # FERRY_TOKEN_JWKS_FILE
                  from_headers: [{ name: authorization, value_prefix: "Bearer " }]
                  forward: false
                  forward_payload_header: x-ferry-token-claims
                  clock_skew_seconds: 30
                # Keys from an identity provider's HTTPS URL (the `jwks` cluster below),
                # fetched when Envoy starts, kept 5 min, fetched again after a failure.
                url:
                  issuer: "https://idp.ferry.invalid/url"  # FERRY_TOKEN_URL_ISSUER
                  audiences: ["ferry"]  # FERRY_TOKEN_AUDIENCE
                  remote_jwks:
                    http_uri:
                      uri: https://127.0.0.1:8450/jwks.json  # FERRY_JWKS_HTTPS
                      cluster: jwks
                      timeout: 5s
                    cache_duration: 300s
                    async_fetch: { failed_refetch_duration: 1s }
                    retry_policy: { num_retries: 3 }
                  from_headers: [{ name: authorization, value_prefix: "Bearer " }]
                  forward: false
                  forward_payload_header: x-ferry-token-claims
                  clock_skew_seconds: 30
              rules:
              - match: { prefix: / }
                requires:
                  requires_any:
                    requirements:
                    - provider_name: file
                    - provider_name: url
                    - allow_missing: {}
""")
    d.append("""\
  # The identity provider's JWKS endpoint (jwt_authn's `url` provider): here
  # scripts/dev-idp.py serve. For a real provider: its host name, port 443, and
  # `sni` set to that name.
  - name: jwks
    type: STRICT_DNS
    connect_timeout: 5s
    dns_lookup_family: V4_PREFERRED
    load_assignment:
      cluster_name: jwks
      endpoints:
      - lb_endpoints:
        - endpoint:
            address:
              socket_address: { address: 127.0.0.1, port_value: 8450 }  # FERRY_JWKS_HTTPS
    transport_socket:
      name: envoy.transport_sockets.tls
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext
        sni: localhost
        common_tls_context:
          validation_context:
            trusted_ca: { filename: .run/certs/ca.pem }  # FERRY_CA
            match_typed_subject_alt_names:
            - san_type: DNS
              matcher: { exact: localhost }
""")
    return d


def native():
    """ferry.yaml with the Ferry filter as an Envoy dynamic module (a native .so) instead of
    the .wasm: the same core and settings."""
    d = scenario("native.yaml", "native", """\
# The gateway of ferry.yaml with the Ferry filter built natively: an Envoy dynamic module
# (filter/native, `cargo build --release -p ferry-filter-native` ->
# target/release/libferry_filter_native.so) instead of the .wasm, with the same core and
# settings. Envoy finds the module by name in ENVOY_DYNAMIC_MODULES_SEARCH_PATH, which
# scripts/stack.sh sets to target/release. Experimental, verified for Connect unary calls
# only (docs/benchmarks/cost.md "The native filter"). gRPC and gRPC-Web
# are refused (grpc-status 12, UNIMPLEMENTED) because Envoy 1.40's dynamic-module ABI
# cannot add response trailers to an answer that has none. Runnable with
#   FERRY_ENVOY_SCENARIO=native scripts/stack.sh up
""")
    settings = json.dumps(plugin_settings(), sort_keys=True, separators=(",", ":"))
    d.cut('          - name: ferry\n            typed_config:\n              "@type": type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm\n',
          "          # Envoy's own session affinity: a request carrying", f"""\
          - name: ferry
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.dynamic_modules.v3.DynamicModuleFilter
              dynamic_module_config:
                name: ferry_filter_native
                do_not_close: true
              filter_name: ferry
              # The filter's settings (filter/core/src/config.rs), as ferry.yaml's, in JSON.
              filter_config:
                "@type": type.googleapis.com/google.protobuf.StringValue
                value: '{settings}'  # FERRY_PLUGIN_JSON
""")
    return d


SCENARIOS = {
    "replicas": replicas, "tracing": tracing, "shim-tls": shim_tls, "browser": browser,
    "browser-filter-first": browser_filter_first, "tokens": tokens, "native": native,
    "compose": compose, "compressor": compressor, "two-shims": two_shims,
    "istio": istio, "istio-envoyfilter": istio_envoyfilter, "envoy-gateway": envoy_gateway,
}


def main(args):
    check = args[:1] == ["--check"]
    names = args[1:] if check else args
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        sys.exit(f"scripts/envoy-scenarios.py: no scenario {', '.join(unknown)} (have: {', '.join(SCENARIOS)})")
    stale = []
    for name in names or SCENARIOS:
        d = SCENARIOS[name]()
        if "@FILTERS@" in d.text:
            sys.exit(f"scripts/envoy-scenarios.py: {name}: @FILTERS@ left in the text")
        # Both the file and its ECDS resource (if any) must be YAML.
        yaml.safe_load(d.text)
        ecds = "".join(line[len("#ECDS "):] + "\n" for line in d.text.splitlines() if line.startswith("#ECDS "))
        if ecds:
            yaml.safe_load(ecds)
        path = os.path.join(ROOT, "envoy", d.name)
        if check:
            if not os.path.exists(path) or open(path).read() != d.text:
                stale.append(f"envoy/{d.name}")
        else:
            open(path, "w").write(d.text)
            print(f"wrote envoy/{d.name}")
    if stale:
        sys.exit(f"out of date: {' '.join(stale)}: run python3 scripts/envoy-scenarios.py")


if __name__ == "__main__":
    main(sys.argv[1:])
