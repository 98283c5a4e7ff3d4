# Fuzzing at depth (issue 29; docs/benchmarks/fuzzing.md). `make fuzz-long` runs every
# fuzz target for FUZZ_LONG_SECONDS each, FUZZ_JOBS at a time (each under nice -n 19),
# a target stopping early at FUZZ_LONG_RUNS executions if set; then minimises each
# corpus (cargo fuzz cmin) into the committed fuzz/corpus/<target>, which fuzz-smoke
# starts from. FUZZ_TARGETS="a b" runs only those, in that order.
FUZZ_LONG_SECONDS ?= 600
FUZZ_JOBS ?= 1
FUZZ_LONG_RUNS ?= 0
FUZZ_TARGETS ?=

.PHONY: fuzz-long
fuzz-long:
	FUZZ_LONG_SECONDS=$(FUZZ_LONG_SECONDS) FUZZ_JOBS=$(FUZZ_JOBS) FUZZ_LONG_RUNS=$(FUZZ_LONG_RUNS) \
		FUZZ_TARGETS="$(FUZZ_TARGETS)" fuzz/long.sh
