#!/usr/bin/env bash
# Starts and stops the local Ferry stack: MariaDB -> shim -> Envoy (+ wasm filter).
#   stack.sh up | down | status | run (up, then follow the logs; Ctrl-C stops)
#   stack.sh gateway   shim + Envoy only, for a MariaDB that is already running
# FERRY_SHIMS=2: a second shim (pid/log name shim2) on FERRY_SHIM2_ADDR, same keys,
# no unix socket, and Envoy from envoy/two-shims.yaml (sessions pinned to their shim).
# FERRY_ENVOY_SCENARIO=NAME: Envoy from envoy/NAME.yaml instead (e.g. browser: CORS for
# the origins in FERRY_CORS_ORIGINS).
# FERRY_MYSQL_FLAVOR=mysql8: MySQL 8.0.33 instead of MariaDB (installed under
# $FERRY_MYSQL8_HOME by scripts/install-mysql8.sh on first use); its client is
# $FERRY_MYSQL8_HOME/bin/mysql.
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
case "$FERRY_MYSQL_FLAVOR" in
  mariadb) CLIENT=mariadb ADMIN=mariadb-admin ;;
  mysql8) CLIENT="$FERRY_MYSQL8_HOME/bin/mysql" ADMIN="$FERRY_MYSQL8_HOME/bin/mysqladmin" ;;
  *) echo "FERRY_MYSQL_FLAVOR must be mariadb or mysql8" >&2; exit 2 ;;
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
  if [ "$FERRY_MYSQL_FLAVOR" = mysql8 ]; then
    mysql8_init
    mysql8_start
  else
    mariadb_init
    # Its own temporary directory (large sorts spill there), not a /tmp others may clean.
    mkdir -p "$FERRY_RUN_DIR/mysql-tmp"
    start mysql mariadbd --no-defaults --user="$(id -un)" --datadir="$DATA" \
      --socket="$FERRY_MYSQL_SOCKET" --port="$FERRY_MYSQL_PORT" --bind-address="$FERRY_MYSQL_HOST" \
      --pid-file="$DATA/mariadbd.pid" --log-error="$LOGS/mysql-error.log" --tmpdir="$FERRY_RUN_DIR/mysql-tmp" \
      --max-connections=500 --innodb-buffer-pool-size=256M $FERRY_MYSQL_EXTRA_ARGS
  fi
  mysql_ready
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
}

shim_up() {
  [ -x "$FERRY_SHIM_BIN" ] || { echo "no shim binary at $FERRY_SHIM_BIN (run make build)" >&2; exit 1; }
  local cmd=("$FERRY_SHIM_BIN")
  # FERRY_MYSQL_TRANSPORT=tcp: reach MySQL at host:port even though a socket is known.
  if [ "$FERRY_MYSQL_TRANSPORT" = tcp ]; then cmd=(env -u FERRY_MYSQL_SOCKET "${cmd[@]}"); fi
  [ -z "$FERRY_SHIM_UNIX" ] || mkdir -p "$(dirname "$FERRY_SHIM_UNIX")"
  if [ -n "$FERRY_SHIM_USER" ] && [ "$FERRY_SHIM_USER" != "$(id -un)" ]; then
    # The shim as its own unprivileged OS user; its unix socket's directory is its own,
    # and it may read the session keys.
    chown "$FERRY_SHIM_USER" "$FERRY_SESSION_KEYS_FILE"
    [ -z "$FERRY_SHIM_UNIX" ] || chown "$FERRY_SHIM_USER" "$(dirname "$FERRY_SHIM_UNIX")"
    cmd=(setpriv --reuid="$FERRY_SHIM_USER" --regid="$(id -g "$FERRY_SHIM_USER")" --init-groups -- "${cmd[@]}")
  fi
  start shim "${cmd[@]}"
  wait_for shim 15 curl -sf --http2-prior-knowledge "http://$FERRY_SHIM_ADDR/healthz"
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
  local scenario=ferry
  case "$FERRY_SHIMS" in 1) ;; 2) scenario=two-shims ;; *) echo "FERRY_SHIMS must be 1 or 2" >&2; exit 2 ;; esac
  scenario="${FERRY_ENVOY_SCENARIO:-$scenario}"
  [ -f "$ROOT/envoy/$scenario.yaml" ] || { echo "no Envoy scenario envoy/$scenario.yaml" >&2; exit 2; }
  "$(dirname "$0")/render-envoy.sh" "$ROOT/envoy/$scenario.yaml" > "$FERRY_RUN_DIR/envoy.yaml"
  start envoy "$ENVOY" -c "$FERRY_RUN_DIR/envoy.yaml" --disable-hot-restart --log-level warn
  wait_for Envoy 30 sh -c "curl -sf http://$FERRY_ADMIN_HOST:$FERRY_ADMIN_PORT/ready | grep -q LIVE"
  # FERRY_WAIT_HEALTHY=true: and until Envoy has seen its shims healthy. Before a health
  # check passes, strict session affinity answers a pinned request "transaction lost";
  # Envoy's first check times out while the wasm VM loads, the next comes 5 s later.
  [ "$FERRY_WAIT_HEALTHY" != true ] || wait_for "Envoy to see $FERRY_SHIMS healthy shim(s)" 30 sh -c \
    "[ \$(curl -sf http://$FERRY_ADMIN_HOST:$FERRY_ADMIN_PORT/clusters | grep -c '^shim::.*::health_flags::healthy\$') -ge $FERRY_SHIMS ]"
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
  down) stop envoy; stop shim2; stop shim; stop mysql ;;
  status) for n in mysql shim $([ "$FERRY_SHIMS" = 2 ] && echo shim2) envoy; do running "$n" && echo "$n: running (pid $(cat "$PIDS/$n.pid"))" || echo "$n: stopped"; done ;;
  run)
    trap '"$0" down; exit 0' INT TERM
    "$0" up
    tail -n 0 -F "$LOGS/shim.log" $([ "$FERRY_SHIMS" = 2 ] && echo "$LOGS/shim2.log") "$LOGS/envoy.log" "$LOGS/mysql-error.log" & wait ;;
  *) echo "usage: $0 up|down|status|run|gateway" >&2; exit 2 ;;
esac
