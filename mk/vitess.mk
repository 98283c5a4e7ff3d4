# A local Vitess cluster (issue 27; scripts/vitess.sh, docs/guides/vitess.md). Not part of
# `make test` yet.
#   make vitess-build    pinned Vitess binaries (vitess/go.mod, go.sum) into target/vitess/bin;
#                        cached: rebuilt only when vitess/ changes (2.5-3.5 min the first time)
#   make vitess-up       vttestserver on MySQL 8: keyspace ferry (2 shards) + ferry_unsharded,
#                        vtgate's MySQL port 127.0.0.1:43393 with a password check (ready in ~5 s)
#   make vitess-down     stop it
#   make vitess-status   running or stopped
#   make bench-vitess    Ferry → vtgate vs MySQL+TLS → vtgate: point selects (one shard) and scatter
#                        reads at 1 and 32 clients, HTTP/2 and HTTP/3, CPU per query of every
#                        process, and the far-shape cold start (loadtest/vitess.sh; ~9 min; root;
#                        docs/benchmarks/vitess.md). Its own cluster and gateway: ports 43420-43423,
#                        48473, 49932, 48111 (BENCH_VITESS_* in loadtest/vitess.sh)
# Settings: the FERRY_VITESS_* variables at the top of scripts/vitess.sh.
.PHONY: vitess-build vitess-up vitess-down vitess-status bench-vitess

vitess-build:
	scripts/vitess.sh build

vitess-up:
	scripts/vitess.sh up

vitess-down:
	scripts/vitess.sh down

vitess-status:
	scripts/vitess.sh status

bench-vitess: build vitess-build
	loadtest/vitess.sh run
