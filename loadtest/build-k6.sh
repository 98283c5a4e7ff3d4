#!/usr/bin/env bash
# Builds bin/k6 (k6 v1.8.1 + our extensions) and the suite's Go tools
# (bin/fixtures, bin/report, bin/delayer). Idempotent: rebuilds only when a Go
# source, go.mod or go.sum is newer than the binary.
set -euo pipefail
cd "$(dirname "$0")"
export GOFLAGS="${GOFLAGS:--mod=readonly}" CGO_ENABLED=0
command -v go >/dev/null || { echo "build-k6.sh: Go toolchain not found" >&2; exit 1; }
mkdir -p bin

# build OUT PKG DIRS...: go build PKG into bin/OUT unless it is newer than DIRS' sources.
build() {
  local out=bin/$1 pkg=$2; shift 2
  if [ -x "$out" ] && [ -z "$(find "$@" go.mod go.sum -name '*.go' -newer "$out" -o -name 'go.*' -newer "$out" | head -1)" ]; then
    return
  fi
  echo "building $out" >&2
  go build -trimpath -o "$out.tmp" "$pkg" && mv "$out.tmp" "$out"
}

build k6       ./cmd/k6       cmd/k6 xk6
build fixtures ./cmd/fixtures cmd/fixtures
build report   ./cmd/report   cmd/report
build delayer  ./cmd/delayer  cmd/delayer
