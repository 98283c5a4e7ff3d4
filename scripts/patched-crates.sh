#!/usr/bin/env bash
# The MySQL client crates the shim builds with, patched (shim/patches/README.md): copies
# each crate's published source (exact version, from Cargo's registry) into
# target/patched-crates/<name> and applies shim/patches/<name>-<version>.patch. Cargo.toml's
# [patch.crates-io] points there, so every cargo command in the workspace needs it: the
# Makefile runs this first, and it does nothing when the copies are current. Needs cargo
# and git; prints nothing when there is nothing to do.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OUT="$ROOT/target/patched-crates"
command -v cargo >/dev/null || { echo "patched-crates: cargo is not installed yet" >&2; exit 0; }
CARGO_HOME="${CARGO_HOME:-$HOME/.cargo}"

source_of() { # NAME VERSION: the registry's unpacked source directory, fetched if missing
  local dir
  dir=$(ls -d "$CARGO_HOME"/registry/src/*/"$1-$2" 2>/dev/null | head -1 || true)
  if [ -z "$dir" ]; then
    local tmp
    tmp=$(mktemp -d)
    mkdir -p "$tmp/src" && touch "$tmp/src/lib.rs"
    printf '[package]\nname = "fetch"\nversion = "0.0.0"\nedition = "2021"\n[dependencies]\n%s = { version = "=%s", default-features = false }\n' "$1" "$2" >"$tmp/Cargo.toml"
    (cd "$tmp" && cargo fetch -q) >&2
    rm -rf "$tmp"
    dir=$(ls -d "$CARGO_HOME"/registry/src/*/"$1-$2" 2>/dev/null | head -1 || true)
  fi
  [ -n "$dir" ] || { echo "patched-crates: no source for $1 $2 in $CARGO_HOME/registry" >&2; exit 1; }
  echo "$dir"
}

for patch in "$ROOT"/shim/patches/*.patch; do
  base=$(basename "$patch" .patch)          # mysql_common-0.37.3
  name=${base%-*} version=${base##*-}
  dest="$OUT/$name"
  stamp="$(sha256sum "$patch" | cut -d' ' -f1) $version"
  [ -f "$dest/.ferry-patch" ] && [ "$(cat "$dest/.ferry-patch")" = "$stamp" ] && continue
  src=$(source_of "$name" "$version")
  rm -rf "$dest" && mkdir -p "$OUT" && cp -r "$src" "$dest"
  # Not inside this repository (target/ is in its work tree): a plain patch.
  (cd "$dest" && GIT_CEILING_DIRECTORIES="$OUT" git apply -p1 --whitespace=nowarn "$patch")
  echo "$stamp" >"$dest/.ferry-patch"
  echo "patched-crates: $name $version patched ($(basename "$patch"))" >&2
done
