# The longer chaos run (issue 29; loadtest/chaos.sh, docs/benchmarks/chaos.md "The longer run"):
# a replica stack of its own (.run/chaos, ports 38643/39931/38281/38282/38406/38407) under
# reads, plain writes and keyed writes while Envoy, each shim and each MariaDB are killed
# in turn every CHAOS_EVERY (30) s for CHAOS_MINUTES (10); fails on a lost or doubled write
# or a fault not recovered from within CHAOS_EVERY. Output: loadtest/results/<UTC>-chaos/.
CHAOS_MINUTES ?= 10
.PHONY: chaos
chaos: build
	CHAOS_MINUTES=$(CHAOS_MINUTES) loadtest/chaos.sh
