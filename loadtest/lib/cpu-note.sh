# Sourced by the benchmarks (bench.sh, vitess.sh).
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
