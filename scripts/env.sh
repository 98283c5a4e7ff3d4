# Ferry's settings: every port, path and credential, with its default.
# Sourced by the other scripts; override any of them from the environment.
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
: "${FERRY_RUN_DIR:=$ROOT/.run}"            # data, pids, logs, certs (git-ignored)
case "$FERRY_RUN_DIR" in /*) ;; *) FERRY_RUN_DIR="$ROOT/$FERRY_RUN_DIR" ;; esac
: "${FERRY_HOST:=127.0.0.1}"                # HTTPS (TCP) + HTTP/3 (UDP) listener address
: "${FERRY_PORT:=8443}"                     # ... and port
: "${FERRY_ADMIN_HOST:=127.0.0.1}"          # Envoy admin (stats: /stats/prometheus)
: "${FERRY_ADMIN_PORT:=9901}"
: "${FERRY_SHIM_ADDR:=127.0.0.1:8081}"      # shim, h2c
: "${FERRY_SHIM_UNIX:=}"                    # shim: optional extra unix socket
: "${FERRY_SHIMS:=1}"                       # shims behind Envoy: 1 (envoy/ferry.yaml) or 2 (envoy/two-shims.yaml)
: "${FERRY_SHIM2_ADDR:=127.0.0.1:8082}"     # the second shim (FERRY_SHIMS=2), h2c
: "${FERRY_REPLICAS:=0}"                    # 1: also a MariaDB GTID replica of the primary (on Vitess: vtgate's replica tablets), its own shim, envoy/replicas.yaml
: "${FERRY_REPLICA_SHIM_ADDR:=127.0.0.1:8083}"  # the replica's shim (FERRY_REPLICAS=1; FERRY_SHIM_ROLE=replica), h2c
: "${FERRY_REPLICA_MYSQL_PORT:=33307}"      # the replica MariaDB (FERRY_REPLICAS=1): TCP port ...
: "${FERRY_REPLICA_MYSQL_SOCKET:=$FERRY_RUN_DIR/mysql-replica.sock}"  # ... and socket (data: $FERRY_RUN_DIR/mysql-replica)
: "${FERRY_SESSION_KEYS_FILE:=$FERRY_RUN_DIR/certs/session.keys}"  # shim: session sealing keys (dev-cert.sh)
: "${FERRY_SHIM_USER:=}"                    # run the shim as this OS user (default: the caller)
: "${FERRY_MYSQL_HOST:=127.0.0.1}"          # MariaDB TCP
: "${FERRY_MYSQL_PORT:=33306}"
: "${FERRY_MYSQL_SOCKET:=$FERRY_RUN_DIR/mysql.sock}"  # the shim prefers it when set
: "${FERRY_MYSQL_TRANSPORT:=socket}"        # how the shim reaches MariaDB: socket | tcp
: "${FERRY_EARLY_DATA:=true}"               # HTTP/3 0-RTT (the filter runs only replay-safe requests in it)
: "${FERRY_COMPRESS_MIN_RTT_MS:=5}"        # compress answers only for clients at least this many ms away (0: any)
: "${FERRY_COMPRESS_NEAR_NETWORKS=127.0.0.0/8,::1/128}"  # without a measured round trip (HTTP/3), clients from these are near (comma-separated CIDRs; set but empty: none)
: "${FERRY_SHIM_TLS_NAME:=localhost}"      # envoy/shim-tls.yaml: the name Envoy checks in the shim's certificate
: "${FERRY_ENVOY_SCENARIO:=}"               # envoy/<name>.yaml to run (empty: ferry, or two-shims with FERRY_SHIMS=2)
: "${FERRY_ENVOY_CONCURRENCY:=}"            # Envoy's worker threads (empty: one per core, Envoy's default)
: "${FERRY_OTLP_ENDPOINT:=}"                # OTLP/gRPC collector, http://host:port: the shim exports spans there (unset: off); envoy/tracing.yaml's too (default 127.0.0.1:4317)
: "${FERRY_CORS_ORIGINS=https://localhost:5173}"   # browser origins allowed by envoy/browser.yaml (comma-separated; set but empty: none)
: "${FERRY_MYSQL_EXTRA_ARGS:=}"             # extra mariadbd/mysqld arguments (e.g. TLS for benchmarks)
: "${FERRY_MYSQL_FLAVOR:=mariadb}"          # the stack's database: mariadb (Debian's) | mysql8 (8.0.33, install-mysql8.sh) | vitess (scripts/vitess.sh)
: "${FERRY_MYSQL8_HOME:=$ROOT/target/mysql-8.0.33}"  # where install-mysql8.sh puts MySQL 8.0
: "${FERRY_ACCESS_LOG:=$FERRY_RUN_DIR/logs/access.log}"  # Envoy's access log: JSON lines (docs/reference/access-log.md "Access log")
: "${FERRY_WAIT_HEALTHY:=true}"             # stack.sh: return only once Envoy has seen the shims healthy (~1 s)
: "${FERRY_MYSQL_DATABASE:=ferry}"          # dev database, user and password
: "${FERRY_MYSQL_USER:=ferry}"
: "${FERRY_MYSQL_PASSWORD:=ferry}"
: "${FERRY_WASM:=$ROOT/target/wasm32-wasip1/release/ferry_filter.wasm}"
: "${FERRY_WASM_HTTPS_PORT:=8449}"          # envoy/envoy-gateway.yaml: scripts/wasm-server.py serves the .wasm over HTTPS on 127.0.0.1 at this port (as Envoy Gateway's own server)
: "${FERRY_TOKEN_ISSUER:=https://idp.ferry.invalid/file}"  # envoy/tokens.yaml: the issuer of tokens signed with the keys in a file ($FERRY_RUN_DIR/tokens/jwks-file.json)
: "${FERRY_TOKEN_URL_ISSUER:=https://idp.ferry.invalid/url}"  # envoy/tokens.yaml: the issuer whose keys Envoy fetches over HTTPS
: "${FERRY_TOKEN_AUDIENCE:=ferry}"           # envoy/tokens.yaml: the audience (`aud`) a token must name
: "${FERRY_JWKS_HTTPS_PORT:=8450}"          # envoy/tokens.yaml: scripts/dev-idp.py serves the fetched JWKS over HTTPS on 127.0.0.1 at this port
: "${FERRY_SHIM_BIN:=$ROOT/target/release/ferry-shim}"
: "${FERRY_VENV:=$ROOT/.venv}"
: "${ENVOY:=$FERRY_VENV/bin/envoy}"
export FERRY_RUN_DIR FERRY_HOST FERRY_PORT FERRY_ADMIN_HOST FERRY_ADMIN_PORT FERRY_SHIM_ADDR \
  FERRY_SHIM_UNIX FERRY_SHIMS FERRY_SHIM2_ADDR FERRY_REPLICAS FERRY_REPLICA_SHIM_ADDR FERRY_REPLICA_MYSQL_PORT FERRY_REPLICA_MYSQL_SOCKET FERRY_SESSION_KEYS_FILE FERRY_SHIM_USER FERRY_MYSQL_TRANSPORT FERRY_MYSQL_HOST FERRY_MYSQL_PORT FERRY_MYSQL_SOCKET FERRY_MYSQL_EXTRA_ARGS FERRY_MYSQL_FLAVOR FERRY_MYSQL8_HOME FERRY_WAIT_HEALTHY FERRY_ACCESS_LOG FERRY_EARLY_DATA FERRY_COMPRESS_MIN_RTT_MS FERRY_COMPRESS_NEAR_NETWORKS FERRY_SHIM_TLS_NAME FERRY_ENVOY_SCENARIO FERRY_ENVOY_CONCURRENCY FERRY_OTLP_ENDPOINT FERRY_CORS_ORIGINS FERRY_MYSQL_DATABASE \
  FERRY_MYSQL_USER FERRY_MYSQL_PASSWORD FERRY_WASM FERRY_WASM_HTTPS_PORT FERRY_TOKEN_ISSUER FERRY_TOKEN_URL_ISSUER FERRY_TOKEN_AUDIENCE FERRY_JWKS_HTTPS_PORT FERRY_SHIM_BIN FERRY_VENV ENVOY
