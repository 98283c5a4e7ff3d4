#!/usr/bin/env bash
# Renders an envoy/*.yaml scenario with this environment's ports and paths:
# every line tagged `# FERRY_<NAME>` gets its value from scripts/env.sh.
#   scripts/render-envoy.sh envoy/ferry.yaml > .run/envoy.yaml
# A scenario whose Ferry filter comes by ECDS from a file (envoy/istio*.yaml) carries that
# file's resource in its lines starting `#ECDS `: they are rendered the same way and
# written, without that prefix, to $FERRY_RUN_DIR/ecds/<scenario>.yaml (by a rename: a
# running Envoy reloads it), where the scenario's `# FERRY_ECDS` line points.
set -euo pipefail
source "$(dirname "$0")/env.sh"
src="${1:?usage: render-envoy.sh envoy/<scenario>.yaml}"
[[ "$FERRY_COMPRESS_MIN_RTT_MS" =~ ^[0-9]+$ ]] \
  || { echo "render-envoy.sh: FERRY_COMPRESS_MIN_RTT_MS: not a whole number of ms: $FERRY_COMPRESS_MIN_RTT_MS" >&2; exit 2; }
shim_host="${FERRY_SHIM_ADDR%:*}" shim_port="${FERRY_SHIM_ADDR##*:}"
shim2_host="${FERRY_SHIM2_ADDR%:*}" shim2_port="${FERRY_SHIM2_ADDR##*:}"
replica_host="${FERRY_REPLICA_SHIM_ADDR%:*}" replica_port="${FERRY_REPLICA_SHIM_ADDR##*:}"
# The OTLP/gRPC collector of envoy/tracing.yaml: host:port of FERRY_OTLP_ENDPOINT
# (http://host:port; unset: 127.0.0.1:4317).
otlp="${FERRY_OTLP_ENDPOINT:-http://127.0.0.1:4317}"; otlp="${otlp#*://}"; otlp="${otlp%%/*}"
[[ "$otlp" == *:* ]] || otlp="$otlp:4317"
otlp_host="${otlp%:*}" otlp_port="${otlp##*:}"
# CORS origins (envoy/browser.yaml): FERRY_CORS_ORIGINS, comma-separated, each exactly
# scheme://host[:port] (no wildcard, no path) -> [{ exact: "..." }, ...]
cors=""
IFS=', ' read -ra origins <<< "$FERRY_CORS_ORIGINS"
for o in "${origins[@]}"; do
  [ -n "$o" ] || continue
  [[ "$o" =~ ^https?://([A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(:[0-9]{1,5})?$ ]] \
    || { echo "render-envoy.sh: FERRY_CORS_ORIGINS: not an origin (scheme://host[:port]): $o" >&2; exit 2; }
  cors="${cors:+$cors, }{ exact: \"$o\" }"
done
# compression.near_networks (the filter's settings): FERRY_COMPRESS_NEAR_NETWORKS,
# comma-separated, each an IPv4 or IPv6 address with an optional /prefix -> ["...", ...]
# (the filter checks them fully when Envoy loads it).
near=""
IFS=', ' read -ra nets <<< "$FERRY_COMPRESS_NEAR_NETWORKS"
for n in "${nets[@]}"; do
  [ -n "$n" ] || continue
  [[ "$n" =~ ^([0-9]{1,3}(\.[0-9]{1,3}){3}|[0-9A-Fa-f]*:[0-9A-Fa-f:.]*)(/[0-9]{1,3})?$ ]] \
    || { echo "render-envoy.sh: FERRY_COMPRESS_NEAR_NETWORKS: not a network (such as 10.0.0.0/8 or ::1/128): $n" >&2; exit 2; }
  near="${near:+$near, }\"$n\""
done
# The .wasm's sha256 (envoy/envoy-gateway.yaml fetches the module over HTTPS and checks
# it), only for a scenario that asks for it.
sha=""
if grep -q '# FERRY_WASM_SHA256$' "$src"; then
  sha=$(sha256sum "$FERRY_WASM" | cut -d' ' -f1) \
    || { echo "render-envoy.sh: no filter at $FERRY_WASM to take its sha256 (make wasm)" >&2; exit 2; }
fi
[[ "$FERRY_WASM_HTTPS_PORT" =~ ^[0-9]+$ ]] \
  || { echo "render-envoy.sh: FERRY_WASM_HTTPS_PORT: not a port: $FERRY_WASM_HTTPS_PORT" >&2; exit 2; }
[[ "$FERRY_JWKS_HTTPS_PORT" =~ ^[0-9]+$ ]] \
  || { echo "render-envoy.sh: FERRY_JWKS_HTTPS_PORT: not a port: $FERRY_JWKS_HTTPS_PORT" >&2; exit 2; }
# Token issuers and audience (envoy/tokens.yaml): written inside double quotes, so a URL
# or a plain name without quotes, `&`, `|` or spaces.
for v in FERRY_TOKEN_ISSUER FERRY_TOKEN_URL_ISSUER FERRY_TOKEN_AUDIENCE; do
  [[ "${!v}" =~ ^[A-Za-z0-9._~:/?@!\$*+,\;=%-]+$ ]] \
    || { echo "render-envoy.sh: $v: not an issuer or audience (a URL or a plain name): ${!v}" >&2; exit 2; }
done
ecds="$FERRY_RUN_DIR/ecds/$(basename "$src" .yaml).yaml"
render() {
  sed -E \
    -e "/# FERRY_ADMIN\$/s/ address: [^,]+, port_value: [0-9]+/ address: $FERRY_ADMIN_HOST, port_value: $FERRY_ADMIN_PORT/" \
    -e "/# FERRY_LISTEN\$/s/ address: [^,]+, port_value: [0-9]+/ address: $FERRY_HOST, port_value: $FERRY_PORT/" \
    -e "/# FERRY_SHIM\$/s/ address: [^,]+, port_value: [0-9]+/ address: $shim_host, port_value: $shim_port/" \
    -e "/# FERRY_SHIM2\$/s/ address: [^,]+, port_value: [0-9]+/ address: $shim2_host, port_value: $shim2_port/" \
  -e "/# FERRY_SHIM2_OPT\$/s/ address: [^,]+, port_value: [0-9]+/ address: $shim2_host, port_value: $shim2_port/" \
  -e "$([ "${FERRY_SHIMS:-1}" = 2 ] || echo '/# FERRY_SHIM2_OPT$/d')" \
    -e "/# FERRY_REPLICA_SHIM\$/s/ address: [^,]+, port_value: [0-9]+/ address: $replica_host, port_value: $replica_port/" \
    -e "/# FERRY_OTLP\$/s/ address: [^,]+, port_value: [0-9]+/ address: $otlp_host, port_value: $otlp_port/" \
    -e "/# FERRY_ALTSVC\$/s/h3=\":[0-9]+\"/h3=\":$FERRY_PORT\"/" \
    -e "/# FERRY_CORS_ORIGINS\$/s#allow_origin_string_match: \[.*\]#allow_origin_string_match: [$cors]#" \
    -e "/# FERRY_CERT\$/s#filename: [^ }]+#filename: $FERRY_RUN_DIR/certs/server.pem#" \
    -e "/# FERRY_EARLY_DATA\$/s/enable_early_data: [a-z]+/enable_early_data: $FERRY_EARLY_DATA/" \
    -e "/# FERRY_COMPRESS_MIN_RTT_MS\$/s/min_rtt_ms: [0-9]+/min_rtt_ms: $FERRY_COMPRESS_MIN_RTT_MS/" \
    -e "/# FERRY_COMPRESS_NEAR_NETWORKS\$/s#near_networks: \[.*\]#near_networks: [$near]#" \
    -e "/# FERRY_TICKET\$/s#filename: [^ }]+#filename: $FERRY_RUN_DIR/certs/ticket.key#" \
    -e "/# FERRY_KEY\$/s#filename: [^ }]+#filename: $FERRY_RUN_DIR/certs/server.key#" \
    -e "/# FERRY_ENVOY_CLIENT_CERT\$/s#filename: [^ }]+#filename: $FERRY_RUN_DIR/certs/envoy-client.pem#" \
    -e "/# FERRY_ENVOY_CLIENT_KEY\$/s#filename: [^ }]+#filename: $FERRY_RUN_DIR/certs/envoy-client.key#" \
    -e "/# FERRY_SHIM_TLS_CA\$/s#filename: [^ }]+#filename: $FERRY_RUN_DIR/certs/ca.pem#" \
    -e "/# FERRY_SHIM_TLS_NAME\$/s/(sni|exact): [^ }]+/\\1: $FERRY_SHIM_TLS_NAME/" \
    -e "/# FERRY_ACCESS_LOG\$/s#path: [^ }]+#path: $FERRY_ACCESS_LOG#" \
    -e "/# FERRY_WASM\$/s#filename: [^ }]+#filename: $FERRY_WASM#" \
    -e "/# FERRY_PLUGIN_JSON\$/s/\"min_rtt_ms\": ?[0-9]+/\"min_rtt_ms\":$FERRY_COMPRESS_MIN_RTT_MS/" \
    -e "/# FERRY_PLUGIN_JSON\$/s#\"near_networks\": ?\\[[^]]*\\]#\"near_networks\":[${near//, /,}]#" \
    -e "/# FERRY_WASM_SHA256\$/s/sha256: [0-9a-f]+/sha256: $sha/" \
    -e "/# FERRY_WASM_HTTPS\$/s/port_value: [0-9]+/port_value: $FERRY_WASM_HTTPS_PORT/" \
    -e "/# FERRY_WASM_HTTPS\$/s#(https://[^:/]+):[0-9]+/#\\1:$FERRY_WASM_HTTPS_PORT/#" \
    -e "/# FERRY_JWKS_HTTPS\$/s/port_value: [0-9]+/port_value: $FERRY_JWKS_HTTPS_PORT/" \
    -e "/# FERRY_JWKS_HTTPS\$/s#(https://[^:/]+):[0-9]+/#\\1:$FERRY_JWKS_HTTPS_PORT/#" \
    -e "/# FERRY_TOKEN_ISSUER\$/s|issuer: \"[^\"]*\"|issuer: \"$FERRY_TOKEN_ISSUER\"|" \
    -e "/# FERRY_TOKEN_URL_ISSUER\$/s|issuer: \"[^\"]*\"|issuer: \"$FERRY_TOKEN_URL_ISSUER\"|" \
    -e "/# FERRY_TOKEN_AUDIENCE\$/s|audiences: \[.*\]|audiences: [\"$FERRY_TOKEN_AUDIENCE\"]|" \
    -e "/# FERRY_TOKEN_JWKS_FILE\$/s#filename: [^ }]+#filename: $FERRY_RUN_DIR/tokens/jwks-file.json#" \
    -e "/# FERRY_CA\$/s#filename: [^ }]+#filename: $FERRY_RUN_DIR/certs/ca.pem#" \
    -e "/# FERRY_ECDS\$/s#path: [^ }]+#path: $ecds#" \
    "$@"
}
if grep -q '^#ECDS ' "$src"; then
  mkdir -p "$(dirname "$ecds")"
  tmp=$(mktemp "$ecds.XXXXXX")
  sed -n 's/^#ECDS //p' "$src" | render > "$tmp" || { rm -f "$tmp"; exit 2; }
  mv -f "$tmp" "$ecds"
fi
render "$src"
