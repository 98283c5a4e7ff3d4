# Generates envoy/shim-tls.yaml from envoy/ferry.yaml: the same gateway, with the hop to
# the shim over mutual TLS, for a shim on another host than Envoy.
#   python3 scripts/envoy-shim-tls.py           rewrite envoy/shim-tls.yaml
#   python3 scripts/envoy-shim-tls.py --check   fail if it is out of date (make validate)
import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from envoy_scenario import ferry_body, write_or_check

header = """# Ferry with the shim on another host: the gateway of ferry.yaml, with Envoy -> shim over
# mutual TLS instead of h2c. The clients' Basic credentials and every row cross that
# hop, so off one host it is encrypted; Envoy checks the shim's certificate against the
# CA and its name (`localhost` here: the dev certificate's), and presents a client
# certificate of its own, which the shim requires (shim/README.md, "TLS from Envoy").
# The shim runs with
#   FERRY_SHIM_TLS_CERT=<its certificate> FERRY_SHIM_TLS_KEY=<its key>
#   FERRY_SHIM_TLS_CLIENT_CA=<the CA of Envoy's client certificate>
# Runnable from the repository root (`envoy -c envoy/shim-tls.yaml`), or with
#   FERRY_ENVOY_SCENARIO=shim-tls FERRY_SHIM_TLS_CERT=.run/certs/server.pem \\
#   FERRY_SHIM_TLS_KEY=.run/certs/server.key FERRY_SHIM_TLS_CLIENT_CA=.run/certs/ca.pem scripts/stack.sh up
# (scripts/dev-cert.sh makes Envoy's client certificate, envoy-client.pem).
# Generated from envoy/ferry.yaml by scripts/envoy-shim-tls.py: edit that file or the
# script, then rerun it (make validate fails while this file is out of date).
"""
s = header + ferry_body()
anchor = """  - name: shim
    type: STATIC
    connect_timeout: 1s
    lb_policy: ROUND_ROBIN
"""
assert s.count(anchor) == 1, "the shim cluster"
tls = """    # Mutual TLS to the shim (its health checks too): TLS 1.3, the shim's certificate
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
"""
s = s.replace(anchor, anchor + tls, 1)
s = s.replace("  # The shim: canonical Connect-proto over h2c.\n",
              "  # The shim: canonical Connect-proto over HTTP/2 in mutual TLS.\n", 1)
write_or_check("shim-tls.yaml", s)
