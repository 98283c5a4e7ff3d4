#!/usr/bin/env bash
# Starts and stops the local Ferry stack: MariaDB -> shim -> Envoy (+ wasm filter).
#   stack.sh up | down | status | run (up, then follow the logs; Ctrl-C stops)
#   stack.sh gateway   shim + Envoy only, for a MariaDB that is already running
# FERRY_SHIMS=2: a second shim (pid/log name shim2) on FERRY_SHIM2_ADDR, same keys,
# no unix socket, and Envoy from envoy/two-shims.yaml (sessions pinned to their shim).
# FERRY_ENVOY_SCENARIO=NAME: Envoy from envoy/NAME.yaml instead (e.g. browser: CORS for
# the origins in FERRY_CORS_ORIGINS; envoy-gateway also starts scripts/wasm-server.py,
# pid/log name wasm-server, which serves it the filter; tokens also starts
# scripts/dev-idp.py, pid/log name dev-idp, and gives the shim a token mapping).
# FERRY_MYSQL_FLAVOR=mysql8: MySQL 8.0.33 instead of MariaDB (installed under
# $FERRY_MYSQL8_HOME by scripts/install-mysql8.sh on first use); its client is
# $FERRY_MYSQL8_HOME/bin/mysql.
# FERRY_MYSQL_FLAVOR=vitess: a local Vitess cluster instead (scripts/vitess.sh: vttestserver
# on MySQL 8, keyspace ferry in 2 shards, vtgate checking passwords; its FERRY_VITESS_*
# settings), the shim pointed at vtgate's MySQL port over TCP. `down` stops it too.
# FERRY_REPLICAS=1 with FERRY_MYSQL_FLAVOR=vitess: no second server (vtgate's replica
# tablets are the replicas): the replica's shim points at the same vtgate and, in Vitess
# mode, targets its replica tablets (`ferry@replica`); Envoy runs envoy/replicas.yaml.
# FERRY_REPLICAS=1 (MariaDB): the primary writes a binary log (GTIDs), and a second
# MariaDB (data $FERRY_RUN_DIR/mysql-replica, port FERRY_REPLICA_MYSQL_PORT, socket
# FERRY_REPLICA_MYSQL_SOCKET, read_only) replicates it with GTIDs (master_use_gtid=slave_pos);
# seeded once from a consistent dump of the primary (accounts included), as the
# replication user `ferry_repl`, whose random password is in $FERRY_RUN_DIR/mysql-repl.cnf
# (mode 0600). The primary's shim runs with FERRY_TRACK_GTID=1; a second shim
# (FERRY_SHIM_ROLE=replica, pid/log name shim-replica) on FERRY_REPLICA_SHIM_ADDR serves the
# replica; Envoy runs envoy/replicas.yaml (reads to the replica, the rest to the primary).
# Both servers take root's password from mysql-root.cnf. Pid/log names: mysql-replica.
# Pids and logs live under $FERRY_RUN_DIR/{pids,logs}; data under $FERRY_RUN_DIR/mysql.
# MariaDB's root has a random password, in $FERRY_RUN_DIR/mysql-root.cnf (mode 0600):
#   mariadb --defaults-file=.run/mysql-root.cnf --socket=.run/mysql.sock
set -euo pipefail
source "$(dirname "$0")/env.sh"
PIDS="$FERRY_RUN_DIR/pids" LOGS="$FERRY_RUN_DIR/logs" DATA="$FERRY_RUN_DIR/mysql"
mkdir -p "$PIDS" "$LOGS"
PATH="$PATH:/usr/sbin"

# A killed process nobody reaped yet (a zombie) is not running.
running() {
  [ -s "$PIDS/$1.pid" ] || return 1
  local pid; pid=$(cat "$PIDS/$1.pid")
  kill -0 "$pid" 2>/dev/null && ! grep -qE '^[0-9]+ \(.*\) Z' "/proc/$pid/stat" 2>/dev/null
}

# start NAME CMD...: detached from this shell (setsid), so it outlives the caller.
start() {
  local name=$1; shift
  running "$name" && { echo "$name already running (pid $(cat "$PIDS/$name.pid"))"; return; }
  setsid "$@" >>"$LOGS/$name.log" 2>&1 < /dev/null &
  echo $! > "$PIDS/$name.pid"
}

wait_for() { # wait_for WHAT SECONDS CMD...
  local what=$1 secs=$2; shift 2
  for _ in $(seq $((secs * 10))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "timed out waiting for $what; see $LOGS" >&2; return 1
}

ROOT_CNF="$FERRY_RUN_DIR/mysql-root.cnf"
REPL_CNF="$FERRY_RUN_DIR/mysql-repl.cnf" RDATA="$FERRY_RUN_DIR/mysql-replica"
case "$FERRY_REPLICAS" in 0) ;; 1) [ "$FERRY_MYSQL_FLAVOR" != mysql8 ] && [ "$FERRY_SHIMS" = 1 ] \
  || { echo "FERRY_REPLICAS=1 needs FERRY_MYSQL_FLAVOR=mariadb or vitess, and FERRY_SHIMS=1" >&2; exit 2; } ;;
  *) echo "FERRY_REPLICAS must be 0 or 1" >&2; exit 2 ;; esac
case "$FERRY_MYSQL_FLAVOR" in
  mariadb) CLIENT=mariadb ADMIN=mariadb-admin ;;
  mysql8) CLIENT="$FERRY_MYSQL8_HOME/bin/mysql" ADMIN="$FERRY_MYSQL8_HOME/bin/mysqladmin" ;;
  vitess) # The shim talks to vtgate (scripts/vitess.sh's defaults: 127.0.0.1:43393).
    FERRY_MYSQL_TRANSPORT=tcp FERRY_MYSQL_HOST="${FERRY_VITESS_HOST:-127.0.0.1}"
    FERRY_MYSQL_PORT="${FERRY_VITESS_MYSQL_PORT:-$((${FERRY_VITESS_PORT:-43390} + 3))}"
    export FERRY_MYSQL_TRANSPORT FERRY_MYSQL_HOST FERRY_MYSQL_PORT ;;
  *) echo "FERRY_MYSQL_FLAVOR must be mariadb, mysql8 or vitess" >&2; exit 2 ;;
esac
sql_root() { "$CLIENT" --defaults-file="$ROOT_CNF" --socket="$FERRY_MYSQL_SOCKET" "$@"; }

# root_sql PASSWORD: the only root account is root@localhost, with this password.
# (MySQL 8's --initialize makes no anonymous or remote root accounts.)
root_sql() {
  [ "$FERRY_MYSQL_FLAVOR" = mysql8 ] || cat <<SQL
DELETE FROM mysql.global_priv WHERE User = '' OR (User = 'root' AND Host <> 'localhost');
FLUSH PRIVILEGES;
SQL
  echo "ALTER USER 'root'@'localhost' IDENTIFIED BY '$1';"
}

write_root_cnf() { (umask 077 && printf '[client]\nuser=root\npassword=%s\n' "$1" > "$ROOT_CNF"); }

# MySQL 8.0: the same steps as MariaDB's below, with its own tools.
mysql8_init() {
  "$(dirname "$0")/install-mysql8.sh"
  [ -d "$DATA/mysql" ] && return
  echo "initialising MySQL 8.0 data dir $DATA"
  rm -rf "$DATA" && mkdir -p "$DATA"
  # root gets its random password during --initialize (--init-file runs there), so it
  # is never passwordless on a running server.
  local pw init="$FERRY_RUN_DIR/mysql-init.sql"
  pw=$(openssl rand -hex 24)
  (umask 077 && root_sql "$pw" > "$init")
  "$FERRY_MYSQL8_HOME/bin/mysqld" --no-defaults --initialize-insecure --user="$(id -un)" \
    --basedir="$FERRY_MYSQL8_HOME" --datadir="$DATA" --init-file="$init" \
    >"$LOGS/mysql-init.log" 2>&1 || { rm -f "$init"; cat "$LOGS/mysql-init.log" >&2; return 1; }
  rm -f "$init"
  write_root_cnf "$pw"
}

mysql8_start() {
  start mysql "$FERRY_MYSQL8_HOME/bin/mysqld" --no-defaults --user="$(id -un)" \
    --basedir="$FERRY_MYSQL8_HOME" --datadir="$DATA" \
    --socket="$FERRY_MYSQL_SOCKET" --port="$FERRY_MYSQL_PORT" --bind-address="$FERRY_MYSQL_HOST" \
    --mysqlx=OFF --skip-log-bin --pid-file="$DATA/mysqld.pid" --log-error="$LOGS/mysql-error.log" \
    --max-connections=500 --innodb-buffer-pool-size=256M $FERRY_MYSQL_EXTRA_ARGS
}

mysql_up() {
  if [ "$FERRY_MYSQL_FLAVOR" = vitess ]; then
    "$(dirname "$0")/vitess.sh" up; return # replicas included: its replica tablets
  fi
  # Its port may be in Linux's ephemeral range (33306, 43306...): keep connections off it.
  "$(dirname "$0")/reserve-ports.sh" "$FERRY_MYSQL_PORT"
  if [ "$FERRY_MYSQL_FLAVOR" = mysql8 ]; then
    mysql8_init
    mysql8_start
  else
    mariadb_init
    # Its own temporary directory (large sorts spill there), not a /tmp others may clean.
    mkdir -p "$FERRY_RUN_DIR/mysql-tmp"
    # With replicas: a binary log (GTIDs), kept a day, for the replica to follow.
    local binlog=()
    [ "$FERRY_REPLICAS" != 1 ] || binlog=(--server-id=1 --log-bin="$DATA/binlog" --binlog-format=ROW --expire-logs-days=1)
    start mysql mariadbd --no-defaults --user="$(id -un)" --datadir="$DATA" \
      --socket="$FERRY_MYSQL_SOCKET" --port="$FERRY_MYSQL_PORT" --bind-address="$FERRY_MYSQL_HOST" \
      --pid-file="$DATA/mariadbd.pid" --log-error="$LOGS/mysql-error.log" --tmpdir="$FERRY_RUN_DIR/mysql-tmp" \
      --max-connections=500 --innodb-buffer-pool-size=256M "${binlog[@]}" $FERRY_MYSQL_EXTRA_ARGS
  fi
  mysql_ready
  [ "$FERRY_REPLICAS" != 1 ] || replica_up
}

# The replica (FERRY_REPLICAS=1): its own data dir, made once with root's password from
# mysql-root.cnf, then seeded from the primary and replicating it.
sql_replica() { mariadb --defaults-file="$ROOT_CNF" --socket="$FERRY_REPLICA_MYSQL_SOCKET" "$@"; }
replica_up() {
  "$(dirname "$0")/reserve-ports.sh" "$FERRY_REPLICA_MYSQL_PORT"
  [ "$(sql_root -N -e 'SELECT @@log_bin')" = 1 ] \
    || { echo "the primary MariaDB runs without a binary log: stop it (make down) and start again with FERRY_REPLICAS=1" >&2; return 1; }
  if ! [ -d "$RDATA/mysql" ]; then
    echo "initialising the replica's data dir $RDATA"
    mkdir -p "$RDATA"
    local pw init="$FERRY_RUN_DIR/mysql-replica-init.sql"
    pw=$(sed -n 's/^password=//p' "$ROOT_CNF")
    (umask 077 && { echo "FLUSH PRIVILEGES;"; root_sql "$pw"; } > "$init")
    mariadb-install-db --no-defaults --user="$(id -un)" --datadir="$RDATA" \
      --auth-root-authentication-method=normal --skip-test-db --extra-file="$init" \
      >"$LOGS/mysql-replica-init.log" 2>&1 || { rm -f "$init"; cat "$LOGS/mysql-replica-init.log" >&2; return 1; }
    rm -f "$init"
  fi
  mkdir -p "$FERRY_RUN_DIR/mysql-replica-tmp"
  # read_only: only replication (and root) write here. Relay logs in its data dir.
  start mysql-replica mariadbd --no-defaults --user="$(id -un)" --datadir="$RDATA" \
    --socket="$FERRY_REPLICA_MYSQL_SOCKET" --port="$FERRY_REPLICA_MYSQL_PORT" --bind-address="$FERRY_MYSQL_HOST" \
    --pid-file="$RDATA/mariadbd.pid" --log-error="$LOGS/mysql-replica-error.log" --tmpdir="$FERRY_RUN_DIR/mysql-replica-tmp" \
    --server-id=2 --relay-log="$RDATA/relay" --read-only --max-connections=500 --innodb-buffer-pool-size=128M \
    $FERRY_MYSQL_EXTRA_ARGS
  wait_for "the replica MariaDB" 60 mariadb-admin --no-defaults --socket="$FERRY_REPLICA_MYSQL_SOCKET" ping
  wait_for "the replica MariaDB login as root" 30 sql_replica -e 'SELECT 1'
  [ -z "$(sql_replica -N -e 'SHOW SLAVE STATUS')" ] && replica_seed
  # Replicating (I/O and SQL threads running) before anything relies on it.
  wait_for "replication to run" 30 sh -c "$(printf '%q ' mariadb --defaults-file="$ROOT_CNF" \
    --socket="$FERRY_REPLICA_MYSQL_SOCKET") -e 'SHOW SLAVE STATUS\G' | grep -c -E 'Slave_(IO|SQL)_Running: Yes' | grep -qx 2"
}

# Seeds the replica from a consistent snapshot of the primary and starts replication at
# that snapshot's GTID position. Accounts first (CREATE USER IF NOT EXISTS; any created
# later reach the replica through the binary log), then every other database in one
# transaction (--single-transaction) with the GTID position it was taken at.
replica_seed() {
  echo "seeding the replica from the primary"
  local pw; pw=$(openssl rand -hex 24)
  (umask 077 && printf '[client]\nuser=ferry_repl\npassword=%s\n' "$pw" > "$REPL_CNF")
  sql_root <<SQL
CREATE USER IF NOT EXISTS 'ferry_repl'@'$FERRY_MYSQL_HOST' IDENTIFIED BY '$pw';
ALTER USER 'ferry_repl'@'$FERRY_MYSQL_HOST' IDENTIFIED BY '$pw';
GRANT REPLICATION SLAVE ON *.* TO 'ferry_repl'@'$FERRY_MYSQL_HOST';
SQL
  mariadb-dump --defaults-file="$ROOT_CNF" --socket="$FERRY_MYSQL_SOCKET" --system=users --insert-ignore \
    | sql_replica
  local dbs; dbs=$(sql_root -N -e "SELECT schema_name FROM information_schema.schemata
    WHERE schema_name NOT IN ('mysql', 'information_schema', 'performance_schema', 'sys')")
  # --gtid --master-data=1: the dump sets gtid_slave_pos to the snapshot's position.
  # shellcheck disable=SC2086
  mariadb-dump --defaults-file="$ROOT_CNF" --socket="$FERRY_MYSQL_SOCKET" --single-transaction \
    --gtid --master-data=1 --routines --events --triggers --databases $dbs | sql_replica
  sql_replica <<SQL
CHANGE MASTER TO MASTER_HOST='$FERRY_MYSQL_HOST', MASTER_PORT=$FERRY_MYSQL_PORT,
  MASTER_USER='ferry_repl', MASTER_PASSWORD='$pw', MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1;
START SLAVE;
SQL
}

mariadb_init() {
  if ! [ -d "$DATA/mysql" ]; then
    echo "initialising MariaDB data dir $DATA"
    mkdir -p "$DATA"
    # root gets a random password while the data dir is created: it is never
    # passwordless on a running server.
    local pw init="$FERRY_RUN_DIR/mysql-init.sql"
    pw=$(openssl rand -hex 24)
    (umask 077 && { echo "FLUSH PRIVILEGES;"; root_sql "$pw"; } > "$init")
    mariadb-install-db --no-defaults --user="$(id -un)" --datadir="$DATA" \
      --auth-root-authentication-method=normal --skip-test-db --extra-file="$init" \
      >"$LOGS/mysql-init.log" 2>&1 || { rm -f "$init"; cat "$LOGS/mysql-init.log" >&2; return 1; }
    rm -f "$init"
    write_root_cnf "$pw"
  fi
}

mysql_ready() {
  wait_for "$FERRY_MYSQL_FLAVOR" 60 "$ADMIN" --no-defaults --socket="$FERRY_MYSQL_SOCKET" ping
  if ! [ -s "$ROOT_CNF" ]; then
    # A data dir made before root had a password: give it one now.
    local pw; pw=$(openssl rand -hex 24)
    root_sql "$pw" | "$CLIENT" --no-defaults -uroot --socket="$FERRY_MYSQL_SOCKET" \
      || { echo "cannot log in as root to $DATA: write its password to $ROOT_CNF or remove $DATA" >&2; return 1; }
    write_root_cnf "$pw"
  fi
  wait_for "$FERRY_MYSQL_FLAVOR login as root" 30 sql_root -e 'SELECT 1'
  # The dev database and user (idempotent; MySQL is the source of truth for users).
  sql_root <<SQL
CREATE DATABASE IF NOT EXISTS \`$FERRY_MYSQL_DATABASE\`;
CREATE USER IF NOT EXISTS '$FERRY_MYSQL_USER'@'localhost' IDENTIFIED BY '$FERRY_MYSQL_PASSWORD';
CREATE USER IF NOT EXISTS '$FERRY_MYSQL_USER'@'127.0.0.1' IDENTIFIED BY '$FERRY_MYSQL_PASSWORD';
GRANT ALL PRIVILEGES ON \`$FERRY_MYSQL_DATABASE\`.* TO '$FERRY_MYSQL_USER'@'localhost';
GRANT ALL PRIVILEGES ON \`$FERRY_MYSQL_DATABASE\`.* TO '$FERRY_MYSQL_USER'@'127.0.0.1';
SQL
  # Idempotency keys' records (docs/guides/idempotency.md), in the dev database.
  sql_root "$FERRY_MYSQL_DATABASE" < "$ROOT/shim/sql/idempotency.sql"
}

# The Envoy scenario this stack runs (envoy/<name>.yaml).
envoy_scenario() {
  local scenario=ferry
  case "$FERRY_SHIMS" in 1) ;; 2) scenario=two-shims ;; *) echo "FERRY_SHIMS must be 1 or 2" >&2; exit 2 ;; esac
  [ "$FERRY_REPLICAS" != 1 ] || scenario=replicas
  echo "${FERRY_ENVOY_SCENARIO:-$scenario}"
}

# envoy/tokens.yaml (docs/guides/tokens.md), for development: signing keys and their JWKS
# (scripts/dev-idp.py, kept in $FERRY_RUN_DIR/tokens), and, unless given, the shim's
# mapping `app` -> the dev user with its password in a secrets file only the shim reads.
tokens_up() {
  local dir="$FERRY_RUN_DIR/tokens"
  python3 "$(dirname "$0")/dev-idp.py" keys "$dir"
  if [ -z "${FERRY_TOKEN_SECRETS_FILE:-}" ]; then
    export FERRY_TOKEN_SECRETS_FILE="$dir/secrets"
    (umask 077 && printf '%s:%s\n' "$FERRY_MYSQL_USER" "$FERRY_MYSQL_PASSWORD" > "$FERRY_TOKEN_SECRETS_FILE")
  fi
  export FERRY_TOKEN_ACCOUNTS="${FERRY_TOKEN_ACCOUNTS:-app=$FERRY_MYSQL_USER}"
  if [ -n "$FERRY_SHIM_USER" ] && [ "$FERRY_SHIM_USER" != "$(id -un)" ]; then
    chown "$FERRY_SHIM_USER" "$FERRY_TOKEN_SECRETS_FILE"
  fi
}

shim_up() {
  [ -x "$FERRY_SHIM_BIN" ] || { echo "no shim binary at $FERRY_SHIM_BIN (run make build)" >&2; exit 1; }
  [ "$(envoy_scenario)" != tokens ] || tokens_up
  local cmd=("$FERRY_SHIM_BIN")
  # FERRY_MYSQL_TRANSPORT=tcp: reach MySQL at host:port even though a socket is known.
  if [ "$FERRY_MYSQL_TRANSPORT" = tcp ]; then cmd=(env -u FERRY_MYSQL_SOCKET "${cmd[@]}"); fi
  [ -z "$FERRY_SHIM_UNIX" ] || mkdir -p "$(dirname "$FERRY_SHIM_UNIX")"
  if [ -n "$FERRY_SHIM_USER" ] && [ "$FERRY_SHIM_USER" != "$(id -un)" ]; then
    # The shim as its own unprivileged OS user; its unix socket's directory is its own,
    # and it may read the session keys.
    chown "$FERRY_SHIM_USER" "$FERRY_SESSION_KEYS_FILE"
    [ -z "${FERRY_SHIM_TLS_KEY:-}" ] || chown "$FERRY_SHIM_USER" "$FERRY_SHIM_TLS_KEY"
    [ -z "$FERRY_SHIM_UNIX" ] || chown "$FERRY_SHIM_USER" "$(dirname "$FERRY_SHIM_UNIX")"
    cmd=(setpriv --reuid="$FERRY_SHIM_USER" --regid="$(id -g "$FERRY_SHIM_USER")" --init-groups -- "${cmd[@]}")
  fi
  # With replicas the primary's shim records each write's GTID in the session
  # (read-your-writes on the replica).
  local gtid=0; [ "$FERRY_REPLICAS" != 1 ] || gtid=1
  FERRY_SHIM_ROLE=primary FERRY_TRACK_GTID="$gtid" start shim "${cmd[@]}"
  if [ -n "${FERRY_SHIM_TLS_CERT:-}" ]; then
    # TLS on its listener (envoy/shim-tls.yaml): checked as Envoy does, with the dev CA
    # and, when the shim requires one, Envoy's client certificate.
    local c="$FERRY_RUN_DIR/certs"
    wait_for shim 15 curl -sf --http2 --cacert "$c/ca.pem" \
      ${FERRY_SHIM_TLS_CLIENT_CA:+--cert "$c/envoy-client.pem" --key "$c/envoy-client.key"} "https://$FERRY_SHIM_ADDR/healthz"
  else
    wait_for shim 15 curl -sf --http2-prior-knowledge "http://$FERRY_SHIM_ADDR/healthz"
  fi
  if [ "$FERRY_REPLICAS" = 1 ]; then
    # The replica's shim: the same command and keys, on the replica's MariaDB (socket,
    # or its port with FERRY_MYSQL_TRANSPORT=tcp), no unix socket of its own. On Vitess
    # the same vtgate, its replica tablets (FERRY_MYSQL_KIND=vitess: targeted from the
    # first connection).
    local rsock="$FERRY_REPLICA_MYSQL_SOCKET" rport="$FERRY_REPLICA_MYSQL_PORT" kind="${FERRY_MYSQL_KIND:-auto}"
    [ "$FERRY_MYSQL_FLAVOR" != vitess ] || rsock="$FERRY_MYSQL_SOCKET" rport="$FERRY_MYSQL_PORT" kind=vitess
    FERRY_MYSQL_SOCKET="$rsock" FERRY_MYSQL_PORT="$rport" FERRY_MYSQL_KIND="$kind" \
      FERRY_SHIM_ROLE=replica FERRY_TRACK_GTID=0 FERRY_SHIM_ADDR="$FERRY_REPLICA_SHIM_ADDR" \
      FERRY_SHIM_UNIX="" FERRY_SHIM_ADVERTISE="$FERRY_REPLICA_SHIM_ADDR" start shim-replica "${cmd[@]}"
    wait_for shim-replica 15 curl -sf --http2-prior-knowledge "http://$FERRY_REPLICA_SHIM_ADDR/healthz"
  fi
  if [ "$FERRY_SHIMS" = 2 ]; then
    # The same command as the first shim, on its own address and without a unix socket.
    # (FERRY_SHIM_ADVERTISE, if set, is the first shim's: the second advertises its own.)
    FERRY_SHIM_ADDR="$FERRY_SHIM2_ADDR" FERRY_SHIM_UNIX="" FERRY_SHIM_ADVERTISE="$FERRY_SHIM2_ADDR" \
      start shim2 "${cmd[@]}"
    wait_for shim2 15 curl -sf --http2-prior-knowledge "http://$FERRY_SHIM2_ADDR/healthz"
  fi
}

envoy_up() {
  [ -s "$FERRY_WASM" ] || { echo "no filter at $FERRY_WASM (run make build)" >&2; exit 1; }
  local scenario; scenario=$(envoy_scenario)
  [ -f "$ROOT/envoy/$scenario.yaml" ] || { echo "no Envoy scenario envoy/$scenario.yaml" >&2; exit 2; }
  "$(dirname "$0")/render-envoy.sh" "$ROOT/envoy/$scenario.yaml" > "$FERRY_RUN_DIR/envoy.yaml"
  # Mesh-shaped scenarios name the shim's cluster as their control plane does; and
  # envoy-gateway fetches the filter over HTTPS, from scripts/wasm-server.py.
  local shim_cluster=shim
  case "$scenario" in
    istio|istio-envoyfilter) shim_cluster='outbound|8081||ferry-shim.ferry.svc.cluster.local' ;;
    envoy-gateway) shim_cluster='httproute/ferry/ferry/rule/0'
      start wasm-server python3 "$(dirname "$0")/wasm-server.py"
      local c="$FERRY_RUN_DIR/certs"
      wait_for wasm-server 10 curl -sfI --cacert "$c/ca.pem" --cert "$c/envoy-client.pem" --key "$c/envoy-client.key" \
        "https://127.0.0.1:$FERRY_WASM_HTTPS_PORT/ferry_filter.wasm" ;;
    # tokens fetches one provider's keys over HTTPS, from scripts/dev-idp.py.
    tokens) start dev-idp python3 "$(dirname "$0")/dev-idp.py" serve "$FERRY_RUN_DIR/tokens"
      wait_for dev-idp 10 curl -sf --cacert "$FERRY_RUN_DIR/certs/ca.pem" "https://localhost:$FERRY_JWKS_HTTPS_PORT/jwks.json" ;;
  esac
  # envoy/native.yaml loads the filter as a dynamic module, by name, from here.
  ENVOY_DYNAMIC_MODULES_SEARCH_PATH="${ENVOY_DYNAMIC_MODULES_SEARCH_PATH:-$ROOT/target/release}" \
    start envoy "$ENVOY" -c "$FERRY_RUN_DIR/envoy.yaml" --disable-hot-restart --log-level warn \
    ${FERRY_ENVOY_CONCURRENCY:+--concurrency "$FERRY_ENVOY_CONCURRENCY"}
  wait_for Envoy 30 sh -c "curl -sf http://$FERRY_ADMIN_HOST:$FERRY_ADMIN_PORT/ready | grep -q LIVE"
  # FERRY_WAIT_HEALTHY=true: and until Envoy has seen its shims healthy. Before a health
  # check passes, strict session affinity answers a pinned request "transaction lost";
  # Envoy's first check times out while the wasm VM loads, the next comes 5 s later.
  [ "$FERRY_WAIT_HEALTHY" != true ] || wait_for "Envoy to see $FERRY_SHIMS healthy shim(s)" 30 sh -c \
    "[ \$(curl -sf http://$FERRY_ADMIN_HOST:$FERRY_ADMIN_PORT/clusters | grep -c '^$shim_cluster::.*::health_flags::healthy\$') -ge $FERRY_SHIMS ]"
  # With replicas: and both members (replica and primary shim) of the read cluster.
  [ "$FERRY_WAIT_HEALTHY" != true ] || [ "$scenario" != replicas ] || wait_for "Envoy to see the read cluster healthy" 30 sh -c \
    "[ \$(curl -sf http://$FERRY_ADMIN_HOST:$FERRY_ADMIN_PORT/clusters | grep -c '^reads::.*::health_flags::healthy\$') -ge 2 ]"
}

stop() {
  local name=$1
  if running "$name"; then
    local pid; pid=$(cat "$PIDS/$name.pid")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$PIDS/$name.pid"
}

usage_hint() {
  local auth; auth=$(printf '%s:%s' "$FERRY_MYSQL_USER" "$FERRY_MYSQL_PASSWORD" | base64)
  cat <<HINT

Ferry is up: https://$FERRY_HOST:$FERRY_PORT (HTTP/2, HTTP/1.1 on TCP; HTTP/3 on UDP)
  curl --cacert $FERRY_RUN_DIR/certs/ca.pem https://$FERRY_HOST:$FERRY_PORT/psdb.v1alpha1.Database/Execute \\
    -H 'content-type: application/json' -H 'authorization: Basic $auth' -d '{"query":"SELECT 1"}'
  HTTP/3: this curl has no HTTP/3; use any QUIC client, e.g. with quic-go or
    cargo run -p ferry-e2e --bin ferry-h3 -- 'SELECT 1'
  Node: NODE_EXTRA_CA_CERTS=$FERRY_RUN_DIR/certs/ca.pem and
    new Client({ url: 'https://$FERRY_MYSQL_USER:$FERRY_MYSQL_PASSWORD@$FERRY_HOST:$FERRY_PORT' }) from @planetscale/database
  Envoy admin (stats: /stats/prometheus): http://$FERRY_ADMIN_HOST:$FERRY_ADMIN_PORT
  Logs: $LOGS    Stop: make down
HINT
}

case "${1:-}" in
  up) "$(dirname "$0")/dev-cert.sh"; mysql_up; shim_up; envoy_up; usage_hint ;;
  gateway) "$(dirname "$0")/dev-cert.sh"; shim_up; envoy_up ;;
  down) stop envoy; stop wasm-server; stop dev-idp; stop shim-replica; stop shim2; stop shim; stop mysql-replica; stop mysql
    if [ "$FERRY_MYSQL_FLAVOR" = vitess ]; then "$(dirname "$0")/vitess.sh" down; fi ;;
  status) if [ "$FERRY_MYSQL_FLAVOR" = vitess ]; then "$(dirname "$0")/vitess.sh" status || true; fi
    for n in $([ "$FERRY_MYSQL_FLAVOR" = vitess ] || echo mysql) $([ "$FERRY_REPLICAS$FERRY_MYSQL_FLAVOR" = 1mariadb ] && echo mysql-replica) shim $([ "$FERRY_SHIMS" = 2 ] && echo shim2) \
      $([ "$FERRY_REPLICAS" = 1 ] && echo shim-replica) envoy; do
      running "$n" && echo "$n: running (pid $(cat "$PIDS/$n.pid"))" || echo "$n: stopped"; done ;;
  # Single parts, for tests that stop and restart one of them (e.g. tests/e2e/tests/replicas.rs):
  #   stack.sh mysql | replica | shim (the shims) -- each starts what is not running.
  mysql) mysql_up ;;
  replica) [ "$FERRY_REPLICAS$FERRY_MYSQL_FLAVOR" = 1mariadb ] || { echo "FERRY_REPLICAS=1 with MariaDB only" >&2; exit 2; }; replica_up ;;
  shim) shim_up ;;
  run)
    trap '"$0" down; exit 0' INT TERM
    "$0" up
    tail -n 0 -F "$LOGS/shim.log" $([ "$FERRY_SHIMS" = 2 ] && echo "$LOGS/shim2.log") \
      $([ "$FERRY_REPLICAS" = 1 ] && echo "$LOGS/shim-replica.log" "$LOGS/mysql-replica-error.log") \
      "$LOGS/envoy.log" "$LOGS/mysql-error.log" & wait ;;
  *) echo "usage: $0 up|down|status|run|gateway|mysql|replica|shim" >&2; exit 2 ;;
esac
