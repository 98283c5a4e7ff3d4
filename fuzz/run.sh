#!/usr/bin/env bash
# Runs every fuzz target (or those named after the seconds) for SECONDS each:
#   fuzz/run.sh [SECONDS] [TARGET...]          (make fuzz / make fuzz-smoke)
# Corpora grow in target/fuzz-corpus/<target> (not committed), seeded from
# fuzz/seeds/<target> and fuzz/corpus/<target> (make fuzz-long's minimised, committed
# corpus; both only read); a crash is saved under fuzz/artifacts/<target>/ and fails the
# run. Prints one summary line per target: libFuzzer's executions ("Done N runs in
# S second(s)") and the outcome.
set -uo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true

scripts/install-fuzz.sh || exit 1
# Debug assertions and overflow checks on (-a), AddressSanitizer (cargo-fuzz's default).
cargo +nightly fuzz build -a || exit 1

if [ $# -gt 0 ]; then targets=("$@"); else mapfile -t targets < <(cargo +nightly fuzz list); fi
logs=target/fuzz-logs
mkdir -p "$logs"
summary=()
failed=0
for t in "${targets[@]}"; do
  corpus=target/fuzz-corpus/$t
  mkdir -p "$corpus" "fuzz/artifacts/$t"
  seeds=()
  [ -d "fuzz/seeds/$t" ] && seeds+=("fuzz/seeds/$t")
  # The kept corpus of `make fuzz-long` (mk/fuzz-long.mk), read like the seeds.
  [ -d "fuzz/corpus/$t" ] && seeds+=("fuzz/corpus/$t")
  echo "== fuzz $t: ${seconds}s"
  # New inputs go to the first corpus directory; seeds are only read. One allocation
  # over 32 MiB is a crash too (a decoder trusting a declared size).
  cargo +nightly fuzz run -a "$t" "$corpus" "${seeds[@]}" -- \
      -max_total_time="$seconds" -max_len=16384 -malloc_limit_mb=32 \
      -print_final_stats=1 >"$logs/$t.log" 2>&1
  rc=$?
  runs=$(grep -oE 'Done [0-9]+ runs in [0-9]+ second' "$logs/$t.log" | tail -1 | awk '{print $2}')
  [ -n "$runs" ] || runs=$(grep -oE '^stat::number_of_executed_units: *[0-9]+' "$logs/$t.log" | awk '{print $2}')
  [ -n "$runs" ] || runs="?"
  units=$(ls "$corpus" | wc -l)
  if [ $rc -eq 0 ]; then
    summary+=("$(printf 'fuzz %-20s ok     %12s runs in %ss, corpus %s' "$t" "$runs" "$seconds" "$units")")
  else
    failed=1
    artifact=$(grep -oE 'Test unit written to [^ ]+' "$logs/$t.log" | tail -1 | awk '{print $5}')
    summary+=("$(printf 'fuzz %-20s FAILED %12s runs (exit %s) %s, log %s' "$t" "$runs" "$rc" "${artifact:-}" "$logs/$t.log")")
    grep -E 'panicked at|ERROR: |SUMMARY: ' "$logs/$t.log" | head -5 | sed 's/^/    /'
  fi
done
printf '%s\n' "${summary[@]}"
exit $failed
