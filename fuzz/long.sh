#!/usr/bin/env bash
# `make fuzz-long`: every fuzz target (or those in FUZZ_TARGETS, in that order) for
# FUZZ_LONG_SECONDS (600) each, FUZZ_JOBS (1) at a time, each under `nice -n 19`; a
# target stops earlier once it has FUZZ_LONG_RUNS executions (0: no such limit).
# Corpora grow in target/fuzz-corpus/<target> as fuzz-smoke's do, seeded from
# fuzz/seeds/<target> and the kept corpus fuzz/corpus/<target>. Then each corpus is
# minimised (`cargo fuzz cmin`) and what is left, files of at most
# FUZZ_CORPUS_MAX_FILE (1024) bytes, becomes the kept corpus fuzz/corpus/<target>
# (committed; fuzz/run.sh reads it as seeds). A crash is saved under
# fuzz/artifacts/<target>/ and fails the run; its corpus is kept as it was.
# Logs: target/fuzz-logs/long-<target>.log; one summary line per target at the end.
set -uo pipefail
cd "$(dirname "$0")/.."
seconds=${FUZZ_LONG_SECONDS:-600}
jobs=${FUZZ_JOBS:-1}
runs=${FUZZ_LONG_RUNS:-0}
max_file=${FUZZ_CORPUS_MAX_FILE:-1024}
logs=target/fuzz-logs
mkdir -p "$logs"

scripts/install-fuzz.sh || exit 1
cargo +nightly fuzz build -a || exit 1
if [ -n "${FUZZ_TARGETS:-}" ]; then
  read -r -a targets <<<"$FUZZ_TARGETS"
else
  mapfile -t targets < <(cargo +nightly fuzz list)
fi

# One target: fuzz, then minimise into the kept corpus. Prints its summary line.
one() {
  local t=$1 corpus=target/fuzz-corpus/$1 kept=fuzz/corpus/$1 log=$logs/long-$1.log
  mkdir -p "$corpus" "$kept" "fuzz/artifacts/$t"
  local seeds=("$kept")
  [ -d "fuzz/seeds/$t" ] && seeds+=("fuzz/seeds/$t")
  local start=$SECONDS
  nice -n 19 cargo +nightly fuzz run -a "$t" "$corpus" "${seeds[@]}" -- \
      -max_total_time="$seconds" -runs="$([ "$runs" -gt 0 ] && echo "$runs" || echo -1)" \
      -max_len=16384 -malloc_limit_mb=32 -print_final_stats=1 >"$log" 2>&1
  local rc=$? took=$((SECONDS - start))
  local done_runs cov ft
  done_runs=$(grep -oE 'Done [0-9]+ runs' "$log" | tail -1 | awk '{print $2}')
  [ -n "$done_runs" ] || done_runs=$(grep -oE '^stat::number_of_executed_units: *[0-9]+' "$log" | awk '{print $2}')
  cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+' "$log" | tail -1)
  if [ $rc -ne 0 ]; then
    local artifact
    artifact=$(grep -oE 'Test unit written to [^ ]+' "$log" | tail -1 | awk '{print $5}')
    printf 'fuzz-long %-18s FAILED %11s runs in %5ss (%s) exit %s %s, log %s\n' \
      "$t" "${done_runs:-?}" "$took" "$cov" "$rc" "${artifact:-}" "$log"
    return 1
  fi
  # Minimise everything known (the kept corpus too) in place, then keep it.
  cp -n "$kept"/* "$corpus"/ 2>/dev/null
  nice -n 19 cargo +nightly fuzz cmin -a "$t" "$corpus" -- -max_len=16384 -malloc_limit_mb=32 \
      >"$logs/long-$t.cmin.log" 2>&1 || { echo "fuzz-long $t: cmin failed, log $logs/long-$t.cmin.log"; return 1; }
  rm -f "$kept"/*
  find "$corpus" -maxdepth 1 -type f -size -$((max_file + 1))c -exec cp {} "$kept"/ \;
  printf 'fuzz-long %-18s ok     %11s runs in %5ss (%s), kept corpus %s files, %s bytes\n' \
    "$t" "${done_runs:-?}" "$took" "$cov" "$(find "$kept" -type f | wc -l)" \
    "$(find "$kept" -type f -printf '%s\n' | awk '{s+=$1} END {print s+0}')"
}
export -f one
export seconds runs max_file logs

begin=$(date -u +%FT%TZ)
start=$SECONDS
printf '%s\n' "${targets[@]}" | xargs -P "$jobs" -I{} bash -c 'one "$@"' _ {} | tee "$logs/long-summary.txt"
status=${PIPESTATUS[1]}
echo "fuzz-long: ${#targets[@]} targets, $jobs at a time, from $begin to $(date -u +%FT%TZ) ($((SECONDS - start)) s)" | tee -a "$logs/long-summary.txt"
total=$(find fuzz/corpus -type f -printf '%s\n' 2>/dev/null | awk '{s+=$1} END {print s+0}')
echo "fuzz-long: kept corpus fuzz/corpus: $(find fuzz/corpus -type f | wc -l) files, $total bytes" | tee -a "$logs/long-summary.txt"
exit "$status"
