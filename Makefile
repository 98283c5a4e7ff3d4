# Ferry: MySQL over HTTP/3, HTTP/2 and gRPC (Envoy + wasm filter + shim).
# `make run` sets up and runs the whole stack; `make test` runs every test.
SHELL := /bin/bash
# Go (k6, compose check) lives in /usr/local/go on the supported images.
export PATH := $(PATH):/usr/local/go/bin
CARGO ?= cargo
# Cargo.toml patches two MySQL client crates (shim/patches/README.md): their patched copies
# must exist before any cargo command here (once made, this prints nothing). `deps` runs it
# again, for a machine that had no cargo yet when make started.
_ := $(shell scripts/patched-crates.sh >&2)
WASM := target/wasm32-wasip1/release/ferry_filter.wasm
SHIM := target/release/ferry-shim
ENVOY_CONFIGS := $(wildcard envoy/*.yaml)

.PHONY: all deps build wasm native shim run up down status test lint unit validate e2e clean \
	k6 bench bench-smoke bench-sweep-concurrency bench-sweep-compression bench-sessions bench-down

all: build

deps:
	scripts/install.sh
	scripts/patched-crates.sh

build: deps wasm native shim

wasm:
	$(CARGO) build --release -p ferry-filter --target wasm32-wasip1

# The same filter as an Envoy dynamic module (envoy/native.yaml; experimental).
native:
	$(CARGO) build --release -p ferry-filter-native

shim:
	$(CARGO) build --release -p ferry-shim

run: build
	scripts/stack.sh run

up: build
	scripts/stack.sh up

down:
	scripts/stack.sh down

status:
	scripts/stack.sh status

test: build lint check-house check-docs check-settings check-refusals unit s2-vectors fuzz-smoke validate check-deploy oci-check e2e hot-upgrade bench-smoke

# The filter and the wire crate it shares with the shim must never panic: clippy denies
# unwrap/expect/panic/indexing in them (see filter/core/src/lib.rs, wire/src/lib.rs),
# natively and for the wasm target.
lint:
	$(CARGO) fmt --all --check
	$(CARGO) clippy -p ferry-filter -p ferry-filter-adapter -p ferry-filter-core -p ferry-wire -p ferry-compress --target wasm32-wasip1 -- -D warnings
	$(CARGO) clippy --workspace --all-targets -- -D warnings

# Pure logic only; the shim's MySQL integration test runs in e2e against MariaDB.
unit:
	$(CARGO) test -p ferry-proto --lib --tests
	$(CARGO) test -p ferry-wire -p ferry-compress -p ferry-filter-core -p ferry-filter-adapter -p ferry-filter -p ferry-filter-native -p ferry-shim --lib --bins

# Every Envoy scenario must load in the real Envoy (with the real .wasm).
validate: wasm native
	@python3 scripts/envoy-scenarios.py --check
	@source scripts/env.sh && mkdir -p "$$FERRY_RUN_DIR" "$$(dirname "$$FERRY_ACCESS_LOG")" && scripts/dev-cert.sh && \
	python3 scripts/dev-idp.py keys "$$FERRY_RUN_DIR/tokens" && \
	for f in $(ENVOY_CONFIGS); do \
	  scripts/render-envoy.sh $$f > "$$FERRY_RUN_DIR/validate.yaml" && \
	  ENVOY_DYNAMIC_MODULES_SEARCH_PATH="$$PWD/target/release" "$$ENVOY" --mode validate -c "$$FERRY_RUN_DIR/validate.yaml" --disable-hot-restart -l error >/dev/null \
	    && echo "valid: $$f" || { echo "INVALID: $$f"; exit 1; }; \
	done
	@# FERRY_COMPRESS_NEAR_NETWORKS reaches the filter's settings: a list loads, and an entry
	@# that is no network is refused by the filter, by name, when Envoy loads it.
	@source scripts/env.sh && v="$$FERRY_RUN_DIR/validate.yaml" && \
	FERRY_COMPRESS_NEAR_NETWORKS="10.0.0.0/8, fd00::/8" scripts/render-envoy.sh envoy/ferry.yaml > "$$v" && \
	grep -q 'near_networks: \["10.0.0.0/8", "fd00::/8"\]' "$$v" && \
	"$$ENVOY" --mode validate -c "$$v" --disable-hot-restart -l error >/dev/null && \
	FERRY_COMPRESS_NEAR_NETWORKS="999.0.0.0/8" scripts/render-envoy.sh envoy/ferry.yaml > "$$v" && \
	if out=$$("$$ENVOY" --mode validate -c "$$v" --disable-hot-restart -l error 2>&1); then echo "INVALID: a bad near_networks loaded"; exit 1; fi && \
	grep -q 'near_networks: "999.0.0.0/8" is not a network' <<<"$$out" && echo "valid: FERRY_COMPRESS_NEAR_NETWORKS (a list loads, a bad entry is refused)" \
	  || { echo "INVALID: FERRY_COMPRESS_NEAR_NETWORKS"; exit 1; }
	@# The filter's configuration as a JSON string (how Istio and Envoy Gateway hand it) loads
	@# as the Struct does, header_hold included; a bad key is refused by the filter, by name.
	@source scripts/env.sh && v="$$FERRY_RUN_DIR/validate.yaml" s="$$FERRY_RUN_DIR/validate-string.yaml" && \
	scripts/render-envoy.sh envoy/ferry.yaml > "$$v" && \
	python3 scripts/plugin-config-as-string.py "$$v" "$$s" header_hold='"off"' session_affinity=false && \
	grep -q 'google.protobuf.StringValue' "$$s" && \
	"$$ENVOY" --mode validate -c "$$s" --disable-hot-restart -l error >/dev/null && \
	python3 scripts/plugin-config-as-string.py "$$v" "$$s" max_requests_bytes=1 && \
	if out=$$("$$ENVOY" --mode validate -c "$$s" --disable-hot-restart -l error 2>&1); then echo "INVALID: a misspelt key loaded"; exit 1; fi && \
	grep -q 'unknown field `max_requests_bytes`' <<<"$$out" && \
	python3 scripts/plugin-config-as-string.py "$$v" "$$s" header_hold='"off"' && \
	if out=$$("$$ENVOY" --mode validate -c "$$s" --disable-hot-restart -l error 2>&1); then echo "INVALID: affinity without the hold loaded"; exit 1; fi && \
	grep -q 'session_affinity needs the header hold' <<<"$$out" && \
	echo "valid: the filter's configuration as a JSON string (loads; a misspelt key and affinity without the hold are refused by name)" \
	  || { echo "INVALID: the filter's configuration as a JSON string"; exit 1; }
	@# The Grafana dashboard against Grafana's own schema (observability/check: the Grafana
	@# Foundation SDK's types, strictly; npm). Its metric names are checked in e2e.
	@cd observability/check && npm ci --no-audit --no-fund --loglevel=error >/dev/null && node check.mjs schema ../grafana/ferry-dashboard.json
	@# compose: `docker compose config` where the plugin exists, else the same loader (compose-go).
	@if docker compose version >/dev/null 2>&1; then docker compose -f compose/docker-compose.yml config -q && echo "valid: compose/docker-compose.yml"; \
	else (cd compose/check && go build -o ../../target/compose-check .) && target/compose-check compose/docker-compose.yml; fi

e2e: build
	scripts/e2e.sh

# Benchmarks (loadtest/README.md): a stack of their own on ports 28443/29901/28081/53306.
# k6 with our extensions (HTTP/3, MySQL baseline) and the suite's Go tools.
k6:
	loadtest/build-k6.sh

# Every workload × client once on loopback; fails on any error (runs in make test).
bench-smoke: build
	loadtest/bench.sh smoke

# Every workload × client × network (loopback, near, far); tens of minutes, needs root (netns).
bench: build
	loadtest/bench.sh full

bench-sweep-concurrency: build
	loadtest/bench.sh sweep-concurrency

bench-sweep-compression: build
	loadtest/bench.sh sweep-compression

# 5,000 concurrent sessions (HTTP/2 and HTTP/3) on MariaDB max_connections=100.
bench-sessions: build
	loadtest/bench.sh sessions

# Serverless-shaped sessions with state (issue 26; docs/benchmarks/sessions.md "Serverless sessions"):
# short-lived sessions that SET a variable and a setting then read them, sessions that all SET the
# same settings, and the same load without state, HTTP/2 and HTTP/3; under a minute.
# FERRY_SETTINGS_POOL_MAX=0 make bench-serverless: the same without the shim's settings pool.
.PHONY: bench-serverless
bench-serverless: build
	loadtest/bench.sh serverless

# Read/write split (issue 10, docs/benchmarks/replicas.md "Replicas"): point selects at 4…200 VUs,
# primary only vs primary + replica (two stacks, .run/bench and .run/bench-replicas),
# HTTP/2 and HTTP/3, the MySQL baseline, CPU per call of every process; ~10 minutes.
.PHONY: bench-replicas
bench-replicas: build
	loadtest/bench.sh replicas

# Cost per query (issue 11, docs/benchmarks/cost.md "Cost per query"): warm SELECT 1 at 16 and
# at 1 client and the large SELECT, MySQL+TLS vs Ferry over HTTP/2 and HTTP/3 in Connect
# JSON and proto, 2 interleaved rounds on one local stack; QPS, p50/p99, CPU per request
# (and per MB) of Envoy, the shim, MariaDB and k6 from /proc; results cost.md; ~4 minutes
# (plus loading the fixtures, the first time).
.PHONY: bench-cost
bench-cost: build
	loadtest/bench.sh cost

# Batches and idempotency keys (issue 28, docs/benchmarks/batches.md "Batches"): a 5-statement
# transaction as transaction()'s 7 requests vs one ExecuteBatch on the far shape (MySQL+TLS beside,
# HTTP/2 and HTTP/3), then a keyed against an unkeyed write on loopback with CPU per call;
# ~3 minutes; needs root (netns).
.PHONY: bench-batch
bench-batch: build
	loadtest/bench.sh batch

bench-down:
	loadtest/bench.sh down

clean:
	-scripts/stack.sh down
	rm -rf .run
	$(CARGO) clean

# S2 against the reference, klauspost/compress (tests/s2-vectors): Go writes streams
# with every writer option, our decoder reads them all and our encoder writes its own
# (the Rust test), then Go reads ours.
S2_VECTORS := $(CURDIR)/target/s2-vectors
.PHONY: s2-vectors
s2-vectors:
	cd tests/s2-vectors && go run . gen $(S2_VECTORS)
	FERRY_S2_VECTORS=$(S2_VECTORS) $(CARGO) test -p ferry-compress --test s2_reference
	cd tests/s2-vectors && go run . verify $(S2_VECTORS)

# Fuzzing (cargo-fuzz, nightly; scripts/install-fuzz.sh installs both): every target
# under fuzz/fuzz_targets for FUZZ_SECONDS each (fuzz-smoke: 10 s each). A summary line
# per target gives libFuzzer's executions; any crash fails (input in fuzz/artifacts/).
FUZZ_SECONDS ?= 60

.PHONY: fuzz fuzz-smoke
fuzz:
	fuzz/run.sh $(FUZZ_SECONDS)

fuzz-smoke:
	fuzz/run.sh 10

# Compression (docs/benchmarks/compression.md "Compression"): per codec, large SELECT/INSERT on the far
# shape against MySQL plain and zlib and MySQL 8.0's zstd 1/3/7 (installs MySQL 8.0 under
# .run/mysql80 once, ~550 MB download), the loopback cost per codec (CPU per call of Envoy,
# shim and MariaDB), and Envoy's compressor filter (envoy/compressor.yaml) against the
# Ferry filter's own. ~50 minutes; needs root (netns).
.PHONY: bench-compression
bench-compression: build
	loadtest/bench.sh compression

# Targets of their own concern (OCI image, deployment manifests, meshes): one file each.
include $(sort $(wildcard mk/*.mk))
