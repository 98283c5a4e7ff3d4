#!/usr/bin/env bash
# Installs what `make fuzz` / `make fuzz-smoke` need and is missing, idempotently:
# a nightly Rust toolchain (libFuzzer's sanitizer flags are nightly-only) and
# cargo-fuzz. Does nothing when both are there.
set -euo pipefail

if ! rustup run nightly rustc --version >/dev/null 2>&1; then
  echo "install-fuzz: installing the nightly toolchain (minimal profile)"
  start=$SECONDS
  rustup toolchain install nightly --profile minimal
  echo "install-fuzz: nightly installed in $((SECONDS - start)) s"
fi

if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "install-fuzz: installing cargo-fuzz"
  start=$SECONDS
  cargo install cargo-fuzz --locked
  echo "install-fuzz: cargo-fuzz installed in $((SECONDS - start)) s"
fi
