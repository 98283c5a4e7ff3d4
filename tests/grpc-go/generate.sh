#!/usr/bin/env bash
# Regenerates gen/ (committed) from the project's .proto files in ../../proto:
#   protoc-gen-go         message types          gen/{psdb/v1alpha1,vitess/*}/*.pb.go
#   protoc-gen-go-grpc    google.golang.org/grpc  gen/psdb/v1alpha1/database_grpc.pb.go
#   protoc-gen-connect-go connectrpc.com/connect  gen/psdb/v1alpha1/psdbv1alpha1connect/
# driven by buf (buf.gen.yaml: local plugins, managed mode supplies go_package).
# No system protoc and no Buf Schema Registry: buf and the plugins are built with
# `go install` from the Go module proxy at the versions below, into .bin/ (git-ignored).
# The first run builds buf (~4 min on 2 cores); later runs reuse .bin/.
#
#   ./generate.sh          regenerate gen/
#   ./generate.sh --check  regenerate into a temporary dir; exit 1 if gen/ differs
set -euo pipefail
cd "$(dirname "$0")"
export PATH="$PATH:/usr/local/go/bin"

# Keep PROTOC_GEN_GO at the google.golang.org/protobuf version go.mod requires (the
# generated code needs a runtime at least as new), protoc-gen-go-grpc's output needs
# grpc >= 1.64 and protoc-gen-connect-go's needs connect >= 1.13.
TOOLS=(
  github.com/bufbuild/buf/cmd/buf@v1.75.0
  google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.11
  google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2
  connectrpc.com/connect/cmd/protoc-gen-connect-go@v1.21.1
)
BIN="$PWD/.bin"
stamp="$(printf '%s\n' "${TOOLS[@]}" "$(go env GOVERSION)")"
if [ "$(cat "$BIN/.tools" 2>/dev/null)" != "$stamp" ]; then
  mkdir -p "$BIN"
  for t in "${TOOLS[@]}"; do
    echo "generate.sh: go install $t" >&2
    GOBIN="$BIN" go install "$t"
  done
  printf '%s\n' "$stamp" > "$BIN/.tools"
fi
export PATH="$BIN:$PATH"  # buf runs the local plugins from PATH

case "${1:-}" in
  "")
    buf generate
    echo "generate.sh: gen/ regenerated from ../../proto" >&2
    ;;
  --check)
    tmp="$(mktemp -d)"
    trap 'rm -rf "$tmp"' EXIT
    buf generate --output "$tmp"
    if ! diff -r "$tmp/gen" gen; then
      echo "generate.sh: gen/ is stale; run tests/grpc-go/generate.sh" >&2
      exit 1
    fi
    echo "generate.sh: gen/ is current" >&2
    ;;
  *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac
