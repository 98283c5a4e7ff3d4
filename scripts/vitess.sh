#!/usr/bin/env bash
# A local Vitess cluster for Ferry to point at (docs/guides/vitess.md):
#   vitess.sh build    Vitess binaries (vttestserver, mysqlctl, our vtcombo) from the Go module
#                      proxy, pinned by vitess/go.mod + go.sum, into $FERRY_VITESS_HOME/bin
#                      (skipped when already built from the same go.mod, go.sum and main.go)
#   vitess.sh up       build, then vttestserver on MySQL 8: keyspace $FERRY_VITESS_KEYSPACE in
#                      $FERRY_VITESS_SHARDS shards + the unsharded $FERRY_VITESS_UNSHARDED_KEYSPACE,
#                      vtgate with a password check; returns once vtgate answers
#   vitess.sh down     stop it (the cluster's data goes with it unless FERRY_VITESS_PERSISTENT=true)
#   vitess.sh status   running or stopped, and whether vtgate answers
#   vitess.sh sql [ARGS...]  the mysql client on vtgate as the admin user (e.g. -e 'SHOW KEYSPACES')
#
# Ports, all on $FERRY_VITESS_HOST, from the base port P=$FERRY_VITESS_PORT (vttestserver's layout):
#   P vtcombo's HTTP status pages, P+1 gRPC (vtgateservice, vtctld), P+2 the tablets' mysqld,
#   and vtgate's MySQL protocol on $FERRY_VITESS_MYSQL_PORT (default P+3).
# Credentials (vtgate's static auth, $FERRY_VITESS_DIR/auth.json, mode 0600): the dev user
# $FERRY_MYSQL_USER / $FERRY_MYSQL_PASSWORD (scripts/env.sh, ferry/ferry), who may also run vschema
# DDL; and $FERRY_VITESS_ADMIN_USER with a random password, in $FERRY_VITESS_DIR/admin.cnf (0600).
# The tablets' MySQL is vttestserver's own (vt_dba etc., socket under $FERRY_VITESS_DIR/data).
# mysqlctl refuses to run as root: as root, everything runs as $FERRY_VITESS_USER (created if
# missing), which owns $FERRY_VITESS_DIR.
set -euo pipefail
source "$(dirname "$0")/env.sh"
: "${FERRY_VITESS_HOME:=$ROOT/target/vitess}"         # VTROOT: bin/ (vttestserver, mysqlctl, vtcombo) and config/
: "${FERRY_VITESS_DIR:=$FERRY_RUN_DIR/vitess}"        # data/, logs/, pids/, schema/, auth.json, admin.cnf
: "${FERRY_VITESS_HOST:=127.0.0.1}"                   # every listener's address
: "${FERRY_VITESS_PORT:=43390}"                       # base port P: P HTTP, P+1 gRPC, P+2 tablets' mysqld
: "${FERRY_VITESS_MYSQL_PORT:=$((FERRY_VITESS_PORT + 3))}"  # vtgate's MySQL protocol (what Ferry's shim points at)
: "${FERRY_VITESS_KEYSPACE:=$FERRY_MYSQL_DATABASE}"   # the sharded keyspace (default ferry: the shim's database)
: "${FERRY_VITESS_SHARDS:=2}"                         # ... its shard count
: "${FERRY_VITESS_UNSHARDED_KEYSPACE:=ferry_unsharded}"  # an unsharded keyspace (empty: none)
: "${FERRY_VITESS_REPLICA_COUNT:=2}"                  # tablets per shard: the primary + replicas (vttestserver's --replica-count;
                                                      # 2 = one replica; vtgate waits 30 s at start for a REPLICA when there is none)
: "${FERRY_VITESS_RDONLY_COUNT:=1}"                   # rdonly tablets per shard (vtcombo makes at least 1). All tablets share one mysqld.
: "${FERRY_VITESS_AUTH:=static}"                      # vtgate's MySQL auth: static (passwords checked) | none (any password)
: "${FERRY_VITESS_ADMIN_USER:=ferry_admin}"           # a second vtgate user, random password in admin.cnf
: "${FERRY_VITESS_SERVER_VERSION:=8.0.33-Vitess}"     # the version vtgate announces (matches the tablets' MySQL)
: "${FERRY_VITESS_SCHEMA_DIR:=}"                      # vttestserver --schema-dir (empty: generated, see schema_dir below)
: "${FERRY_VITESS_PERSISTENT:=false}"                 # true: keep data and vschema across down/up
: "${FERRY_VITESS_USER:=}"                            # OS user to run as (empty: ferry-vitess as root, else the caller)
: "${FERRY_VITESS_READY_TIMEOUT:=120}"                # seconds `up` waits for vtgate
# Extra vtcombo flags, after vttestserver's own (so they win). vttestserver sizes each tablet's
# pools at 4 (4 open transactions per shard): raised here for pooled clients and benchmarks.
: "${FERRY_VITESS_FLAGS=--queryserver-config-pool-size 16 --queryserver-config-stream-pool-size 16 --queryserver-config-transaction-cap 32}"
export FERRY_VITESS_HOME FERRY_VITESS_DIR FERRY_VITESS_HOST FERRY_VITESS_PORT FERRY_VITESS_MYSQL_PORT \
  FERRY_VITESS_KEYSPACE FERRY_VITESS_SHARDS FERRY_VITESS_UNSHARDED_KEYSPACE FERRY_VITESS_REPLICA_COUNT FERRY_VITESS_RDONLY_COUNT \
  FERRY_VITESS_AUTH FERRY_VITESS_ADMIN_USER FERRY_VITESS_SERVER_VERSION FERRY_VITESS_SCHEMA_DIR \
  FERRY_VITESS_PERSISTENT FERRY_VITESS_USER FERRY_VITESS_READY_TIMEOUT FERRY_VITESS_FLAGS
case "$FERRY_VITESS_DIR" in /*) ;; *) FERRY_VITESS_DIR="$ROOT/$FERRY_VITESS_DIR" ;; esac
case "$FERRY_VITESS_AUTH" in static|none) ;; *) echo "FERRY_VITESS_AUTH must be static or none" >&2; exit 2 ;; esac

MOD="$ROOT/vitess" BIN="$FERRY_VITESS_HOME/bin"
PIDS="$FERRY_VITESS_DIR/pids" LOGS="$FERRY_VITESS_DIR/logs" DATA="$FERRY_VITESS_DIR/data"
AUTH="$FERRY_VITESS_DIR/auth.json" ADMIN_CNF="$FERRY_VITESS_DIR/admin.cnf"
PID="$PIDS/vttestserver.pid" LOG="$LOGS/vttestserver.log"

# The pinned version, from the wrapper module (vitess/go.mod).
version() { awk '$1 == "require" && $2 == "vitess.io/vitess" { print $3 } $1 == "vitess.io/vitess" { print $2 }' "$MOD/go.mod"; }
# What a build is made from: rebuilt when any of it changes.
stamp() { echo "$(version) $(go version | cut -d' ' -f3)"; cat "$MOD/go.mod" "$MOD/go.sum" "$MOD"/*.go | sha256sum | cut -c1-16; }

build() {
  command -v go >/dev/null || { echo "vitess.sh: Go is required (1.26.8 or later: Vitess's go.mod asks for it)" >&2; exit 1; }
  if [ -x "$BIN/vtcombo" ] && [ -x "$BIN/vttestserver" ] && [ -x "$BIN/mysqlctl" ] \
    && [ -s "$FERRY_VITESS_HOME/config/init_db.sql" ] && [ "$(cat "$FERRY_VITESS_HOME/.built" 2>/dev/null)" = "$(stamp)" ]; then
    return
  fi
  echo "vitess.sh: building Vitess $(version) into $BIN (2.5-3.5 min the first time)" >&2
  local t0=$SECONDS tmp="$FERRY_VITESS_HOME.tmp"
  rm -rf "$tmp" && mkdir -p "$tmp/bin"
  # -mod=readonly: only what go.sum pins. vttestserver and mysqlctl are stock (go.mod's
  # `tool` lines); vtcombo is our main (vitess/main.go), which vttestserver runs.
  ( cd "$MOD" && export CGO_ENABLED=0 GOFLAGS="-mod=readonly -buildvcs=false" \
      && go build -trimpath -o "$tmp/bin/" vitess.io/vitess/go/cmd/vttestserver vitess.io/vitess/go/cmd/mysqlctl \
      && go build -trimpath -o "$tmp/bin/vtcombo" . )
  # vttestserver reads $VTROOT/config (init_db.sql, mycnf/): the pinned module's own.
  local src; src=$(cd "$MOD" && go list -m -f '{{.Dir}}' vitess.io/vitess)
  cp -r "$src/config" "$tmp/config" && chmod -R u+w,go+rX "$tmp"
  stamp > "$tmp/.built"
  rm -rf "$FERRY_VITESS_HOME" && mv "$tmp" "$FERRY_VITESS_HOME"
  echo "vitess.sh: built in $((SECONDS - t0)) s: $("$BIN/vtcombo" --version 2>&1 | head -n1)" >&2
}

# The mysql client: MySQL 8's when installed (as the stack uses), else Debian's.
client() {
  if [ -x "$FERRY_MYSQL8_HOME/bin/mysql" ]; then echo "$FERRY_MYSQL8_HOME/bin/mysql"
  elif command -v mysql >/dev/null; then command -v mysql
  else command -v mariadb; fi
}
sql() { "$(client)" --defaults-file="$ADMIN_CNF" --protocol=TCP -h "$FERRY_VITESS_HOST" -P "$FERRY_VITESS_MYSQL_PORT" "$@"; }

# A killed process nobody reaped yet (a zombie) is not running.
running() {
  [ -s "$PID" ] || return 1
  local pid; pid=$(cat "$PID")
  kill -0 "$pid" 2>/dev/null && ! grep -qE '^[0-9]+ \(.*\) Z' "/proc/$pid/stat" 2>/dev/null
}

run_user() {
  if [ -n "$FERRY_VITESS_USER" ]; then echo "$FERRY_VITESS_USER"
  elif [ "$(id -u)" -eq 0 ]; then echo ferry-vitess
  else id -un; fi
}

# Credentials: the dev user with env.sh's password, the admin with a random one (kept
# across runs, like the stack's root password). Read by vtgate only.
write_auth() {
  local pw
  [ -s "$ADMIN_CNF" ] && pw=$(sed -n 's/^password=//p' "$ADMIN_CNF")
  [ -n "${pw:-}" ] || pw=$(openssl rand -hex 24)
  (umask 077
   printf '[client]\nuser=%s\npassword=%s\n' "$FERRY_VITESS_ADMIN_USER" "$pw" > "$ADMIN_CNF"
   python3 - "$FERRY_MYSQL_USER" "$FERRY_MYSQL_PASSWORD" "$FERRY_VITESS_ADMIN_USER" "$pw" > "$AUTH" <<'PY'
import json, sys
dev, dev_pw, admin, admin_pw = sys.argv[1:]
users = {dev: [{"Password": dev_pw, "UserData": dev}], admin: [{"Password": admin_pw, "UserData": admin}]}
print(json.dumps(users, indent=2))
PY
  )
}

# The generated schema dir: one folder per keyspace with its vschema.json. The sharded
# keyspace declares a `hash` vindex; a table is usable there once it has a primary vindex:
#   CREATE TABLE t (id BIGINT PRIMARY KEY, ...); ALTER VSCHEMA ON t ADD VINDEX hash(id);
# (the dev user may run vschema DDL), or put *.sql files and a vschema.json of your own in
# FERRY_VITESS_SCHEMA_DIR (vttestserver's --schema-dir layout).
schema_dir() {
  local d="$FERRY_VITESS_DIR/schema"
  mkdir -p "$d/$FERRY_VITESS_KEYSPACE"
  cat > "$d/$FERRY_VITESS_KEYSPACE/vschema.json" <<'JSON'
{
  "sharded": true,
  "vindexes": {
    "hash": { "type": "hash" },
    "xxhash": { "type": "xxhash" }
  },
  "tables": {}
}
JSON
  if [ -n "$FERRY_VITESS_UNSHARDED_KEYSPACE" ]; then
    mkdir -p "$d/$FERRY_VITESS_UNSHARDED_KEYSPACE"
    echo '{ "sharded": false, "tables": {} }' > "$d/$FERRY_VITESS_UNSHARDED_KEYSPACE/vschema.json"
  fi
  echo "$d"
}

up() {
  build
  if running; then echo "vitess already running (pid $(cat "$PID")); vtgate on $FERRY_VITESS_HOST:$FERRY_VITESS_MYSQL_PORT"; return; fi
  [ -x "$FERRY_MYSQL8_HOME/bin/mysqld" ] || "$(dirname "$0")/install-mysql8.sh"
  local user t0=$SECONDS; user=$(run_user)
  if [ "$user" != "$(id -un)" ]; then
    [ "$(id -u)" -eq 0 ] || { echo "FERRY_VITESS_USER=$user: only root can run as another user" >&2; exit 1; }
    id "$user" >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin "$user"
  fi
  [ "$user" != root ] || { echo "mysqlctl refuses to run as root: set FERRY_VITESS_USER" >&2; exit 1; }
  mkdir -p "$PIDS" "$LOGS"
  # A fresh cluster unless persistent (vttestserver removes it on a clean stop, not after a kill).
  [ "$FERRY_VITESS_PERSISTENT" = true ] || rm -rf "$DATA"
  mkdir -p "$DATA"
  local schema="${FERRY_VITESS_SCHEMA_DIR:-$(schema_dir)}" keyspaces="$FERRY_VITESS_KEYSPACE" shards="$FERRY_VITESS_SHARDS"
  if [ -n "$FERRY_VITESS_UNSHARDED_KEYSPACE" ]; then
    keyspaces="$keyspaces,$FERRY_VITESS_UNSHARDED_KEYSPACE" shards="$shards,1"
  fi
  # The tablets' mysqld: loopback only, no X protocol, room for the pools above.
  printf 'bind-address = %s\nmysqlx = 0\nmax_connections = 1000\n' "$FERRY_VITESS_HOST" > "$FERRY_VITESS_DIR/extra.cnf"
  write_auth
  local auth_flags="--mysql-auth-server-impl none"
  [ "$FERRY_VITESS_AUTH" != static ] || auth_flags="--mysql-auth-server-impl static --mysql-auth-server-static-file $AUTH"
  chown -R "$user" "$FERRY_VITESS_DIR"
  chmod 0600 "$AUTH" "$ADMIN_CNF"
  local as_user=()
  [ "$user" = "$(id -un)" ] || as_user=(setpriv --reuid="$user" --regid="$(id -g "$user")" --init-groups --)
  "${as_user[@]}" test -x "$BIN/vttestserver" -a -x "$FERRY_MYSQL8_HOME/bin/mysqld" -a -w "$FERRY_VITESS_DIR" \
    || { echo "$user cannot run $BIN/vttestserver or $FERRY_MYSQL8_HOME/bin/mysqld, or write $FERRY_VITESS_DIR (a parent directory closed to other users?)" >&2; exit 1; }
  local cmd=("${as_user[@]}" "$BIN/vttestserver"
    --port "$FERRY_VITESS_PORT" --data-dir "$DATA" --schema-dir "$schema"
    --keyspaces "$keyspaces" --num-shards "$shards"
    --replica-count "$FERRY_VITESS_REPLICA_COUNT" --rdonly-count "$FERRY_VITESS_RDONLY_COUNT"
    --mysql-bind-host "$FERRY_VITESS_HOST" --vtcombo-bind-host "$FERRY_VITESS_HOST" --grpc-bind-address "$FERRY_VITESS_HOST"
    --tablet-hostname "$FERRY_VITESS_HOST" --mysql-server-version "$FERRY_VITESS_SERVER_VERSION"
    --extra-my-cnf "$FERRY_VITESS_DIR/extra.cnf"
    --vschema-ddl-authorized-users "$FERRY_MYSQL_USER,$FERRY_VITESS_ADMIN_USER")
  [ "$FERRY_VITESS_PERSISTENT" != true ] || cmd+=(--persistent-mode)
  # vttestserver runs $VTROOT/bin/vtcombo (ours), which appends FERRY_VTCOMBO_FLAGS to
  # vttestserver's flags: vtgate's auth, KILL through vtgate, its MySQL port, pool sizes.
  echo "starting Vitess $(version) as $user: keyspaces $keyspaces (shards $shards), vtgate on $FERRY_VITESS_HOST:$FERRY_VITESS_MYSQL_PORT"
  : > "$LOG"; chown "$user" "$LOG"
  # Its ports are in Linux's ephemeral range: no outgoing connection may hold one meanwhile.
  "$(dirname "$0")/reserve-ports.sh" "$FERRY_VITESS_PORT-$((FERRY_VITESS_PORT + 2))" "$FERRY_VITESS_MYSQL_PORT"
  env VTROOT="$FERRY_VITESS_HOME" VTDATAROOT="$FERRY_VITESS_DIR" VT_MYSQL_ROOT="$FERRY_MYSQL8_HOME" \
    HOME="$FERRY_VITESS_DIR" TMPDIR="$FERRY_VITESS_DIR" \
    FERRY_VTCOMBO_FLAGS="$auth_flags --allow-kill-statement --mysql-server-port $FERRY_VITESS_MYSQL_PORT $FERRY_VITESS_FLAGS" \
    setsid "${cmd[@]}" >>"$LOG" 2>&1 </dev/null &
  echo $! > "$PID"
  # Ready: vttestserver prints its JSON config once the cluster and schema are up, then
  # vtgate must let the admin in.
  for _ in $(seq $((FERRY_VITESS_READY_TIMEOUT * 5))); do
    running || { echo "vttestserver exited; the end of $LOG:" >&2; tail -n 30 "$LOG" >&2; rm -f "$PID"; exit 1; }
    if grep -q '"vtcombo_mysql_port"' "$LOG" && sql -N -e 'SELECT 1' >/dev/null 2>&1; then
      echo "vitess is up in $((SECONDS - t0)) s: $(sql -N -e 'SELECT @@version') on $FERRY_VITESS_HOST:$FERRY_VITESS_MYSQL_PORT (gRPC $((FERRY_VITESS_PORT + 1)))"
      echo "  $(client) -h $FERRY_VITESS_HOST -P $FERRY_VITESS_MYSQL_PORT -u $FERRY_MYSQL_USER -p$FERRY_MYSQL_PASSWORD $FERRY_VITESS_KEYSPACE"
      return
    fi
    sleep 0.2
  done
  echo "timed out after ${FERRY_VITESS_READY_TIMEOUT}s waiting for vtgate; see $LOG" >&2
  down; exit 1
}

# vttestserver stops vtcombo and mysqld itself on SIGTERM (and removes the data unless
# persistent); whatever is left of its process group after 60 s is killed.
down() {
  if [ -s "$PID" ]; then
    local pid; pid=$(cat "$PID")
    if running; then
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 600); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    fi
    # Its process group (setsid: the group is its pid) holds vtcombo and mysqld.
    kill -9 -- "-$pid" 2>/dev/null || true
  fi
  # A tablet mysqld that outlived a killed vttestserver (its pid file is in the data dir).
  local f; for f in "$DATA"/vt_*/mysql.pid; do
    [ -s "$f" ] && kill "$(cat "$f")" 2>/dev/null || true
  done
  rm -f "$PID"
}

status() {
  if running; then
    echo "vitess: running (pid $(cat "$PID")), vtgate on $FERRY_VITESS_HOST:$FERRY_VITESS_MYSQL_PORT"
    sql -N -e 'SELECT @@version' >/dev/null 2>&1 && echo "vtgate: answers" || echo "vtgate: not answering (see $LOG)"
  else
    echo "vitess: stopped"
  fi
}

case "${1:-}" in
  build) build ;;
  up) up ;;
  down) down ;;
  status) status ;;
  sql) shift; sql "$@" ;;
  *) echo "usage: $0 build|up|down|status|sql [mysql args]" >&2; exit 2 ;;
esac
