# Soak (issue 29; loadtest/soak.sh, docs/benchmarks/soak.md "Soak"): a stack of its own
# (.run/soak, ports 38443/39921/38181/38306) under a moderate mixed load — reads, writes,
# transactions, StreamExecute, compressed and not, fresh and kept connections, HTTP/2 and
# HTTP/3 — for SOAK_MINUTES (30), sampling the RSS and open fds of Envoy, the shim and
# MariaDB every 10 s. Fails on any error, on fds not back within a margin of their count
# after warm-up, or on RSS growing > 10 % after warm-up. Results:
# loadtest/results/<timestamp>-soak/ (summary.md, samples.csv). Stop a left-over stack:
# loadtest/soak.sh down.
SOAK_MINUTES ?= 30
.PHONY: soak
soak: build
	SOAK_MINUTES=$(SOAK_MINUTES) loadtest/soak.sh
