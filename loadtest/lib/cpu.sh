# CPU per call, sourced by the benchmarks (bench.sh, vitess.sh, pssim.sh, and the side benches).
#
# ticks PID: utime + stime of that process (all threads), in clock ticks.
ticks() { sed 's/^.*) //' "/proc/$1/stat" | awk '{ print $12 + $13 }'; }

#
# CPU_PIDS="envoy:PID shim:PID mysql:PID": cpu_snap prints "name:ticks ..." (utime + stime of
# the whole process, all threads); PID "all" = the whole host's busy time, every core
# (/proc/stat: all but idle and iowait); PID "irq" = its interrupt and softirq part
# (loopback's packet receive work is mostly softirq, charged to no process).
cpu_snap() {
  local np
  for np in $CPU_PIDS; do
    case ${np#*:} in
      all) printf '%s:%s ' "${np%%:*}" "$(awk '$1 == "cpu" { print $2 + $3 + $4 + $7 + $8 + $9; exit }' /proc/stat)"
        continue ;;
      irq) printf '%s:%s ' "${np%%:*}" "$(awk '$1 == "cpu" { print $7 + $8; exit }' /proc/stat)"
        continue ;;
    esac
    printf '%s:%s ' "${np%%:*}" "$(ticks "${np#*:}")"
  done
}

# children_ticks VAR: this shell's waited-for children's CPU (cutime + cstime, ticks) into
# VAR. Taken around the k6 pipeline of a run, it is k6's own CPU (cpu_ms_per_call "k6"):
# no fork here, so the snapshot does not count itself.
children_ticks() {
  local st
  read -r st <"/proc/$BASHPID/stat"
  read -r -a st <<<"${st##*) }" # fields from 3 (state) on: cutime (16) and cstime (17)
  printf -v "$1" '%s' "$((st[13] + st[14]))"
}

# cpu_note SUMMARY BEFORE AFTER [UNIT]: adds cpu_ms_per_call {name: ms} to a k6 summary (JSON),
# from two snapshots of "name:ticks" words (/proc utime + stime), ÷ the run's measured calls;
# prints them in UNIT: ms (2 decimals, the default) or us.
cpu_note() {
  python3 - "$1" "$2" "$3" "$(getconf CLK_TCK)" "${4:-ms}" <<'PY'
import json, sys
path, before, after, hz, unit = sys.argv[1], sys.argv[2].split(), sys.argv[3].split(), int(sys.argv[4]), sys.argv[5]
doc = json.load(open(path))
calls = doc["metrics"].get("ferry_calls", {}).get("values", {}).get("count", 0) or 1
b = dict(x.split(":") for x in before)
doc["cpu_ms_per_call"] = {k: (int(v) - int(b[k])) * 1000 / hz / calls for k, v in (x.split(":") for x in after)}
json.dump(doc, open(path, "w"))
if unit == "us":
    print("  cpu µs/call: " + ", ".join(f"{k} {v * 1000:.0f}" for k, v in doc["cpu_ms_per_call"].items()))
else:
    print("  cpu ms/call: " + ", ".join(f"{k} {v:.2f}" for k, v in doc["cpu_ms_per_call"].items()))
PY
}
