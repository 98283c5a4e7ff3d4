# Generates envoy/tracing.yaml from envoy/ferry.yaml: the same gateway, plus Envoy's
# OpenTelemetry tracer on both HTTP connection managers (TCP and QUIC), exporting spans
# over OTLP/gRPC to a collector (cluster `otlp_collector`).
#   python3 scripts/envoy-tracing.py           rewrite envoy/tracing.yaml
#   python3 scripts/envoy-tracing.py --check   fail if it is out of date (make validate)
import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from envoy_scenario import ferry_body, write_or_check

header = """# Ferry with tracing: the gateway of ferry.yaml, plus Envoy's OpenTelemetry tracer on
# both HTTP connection managers (TCP: HTTP/2 and HTTP/1.1; QUIC: HTTP/3). Every request
# gets a span (kind SERVER, service `ferry-gateway`), and its upstream request to the
# shim a child span (kind CLIENT) whose context Envoy sends to the shim as W3C
# `traceparent`; the shim, with FERRY_OTLP_ENDPOINT set, continues the trace (a span
# per RPC and per MySQL statement: shim/src/trace.rs). Spans go over OTLP/gRPC to a
# collector at 127.0.0.1:4317 (cluster `otlp_collector`; scripts/render-envoy.sh takes
# host:port from FERRY_OTLP_ENDPOINT), every 5 s or 5 spans (Envoy's runtime keys
# tracing.opentelemetry.flush_interval_ms / min_flush_spans).
# Runnable from the repository root (`envoy -c envoy/tracing.yaml`), or with
#   FERRY_ENVOY_SCENARIO=tracing FERRY_OTLP_ENDPOINT=http://127.0.0.1:4317 scripts/stack.sh up
# Generated from envoy/ferry.yaml by scripts/envoy-tracing.py: edit that file or the
# script, then rerun it (make validate fails while this file is out of date).
"""
s = header + ferry_body()
tracing = """          # Tracing (OpenTelemetry): every request here (a demo; in production sample,
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
"""
for name, block in [("ferry_tcp", tracing), ("ferry_quic", "          tracing: *tracing\n")]:
    anchor = f"          stat_prefix: {name}\n"
    assert s.count(anchor) == 1, anchor
    s = s.replace(anchor, anchor + block, 1)
assert s.count("          tracing:") == 2, "both connection managers"
s += """
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
"""
write_or_check("tracing.yaml", s)
