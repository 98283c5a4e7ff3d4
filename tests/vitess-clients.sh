#!/usr/bin/env bash
# The real clients through Ferry to Vitess (issue 27), against a running gateway whose shim
# points at vtgate (scripts/vitess.sh's cluster: the sharded keyspace `ferry`, 2 shards, and
# the unsharded `ferry_unsharded`):
#   1. js       the @planetscale/database driver, drizzle-orm and kysely-planetscale
#               (tests/driver: driver, transactions and types suites, FERRY_DRIVER_VITESS=1)
#   2. psdb-go  PlanetScale's Go client library (tests/psdb-go, FERRY_PSDB_VITESS=1), h2 and h3
#   3. psdbproxy + the mysql CLI: PlanetScale's psdbproxy (pinned by tests/psdbproxy/go.mod and
#               go.sum, built into target/psdbproxy) started against the gateway, then the mysql
#               client through it: DDL + vindex, inserts, reads across and per shard, transactions,
#               errors, session variables, an OLAP (StreamExecute) read of 30,000 rows
# Prints a PASS/FAIL line per check and a summary per suite; exits 1 if anything failed.
#
# Environment:
#   FERRY_PORT (required)       the gateway's HTTPS port; FERRY_HOST (127.0.0.1)
#   FERRY_RUN_DIR (required)    the gateway's run dir: certs/ca.pem is trusted; this script's
#                               logs go to $FERRY_RUN_DIR/vitess-clients/
#   FERRY_MYSQL_USER / FERRY_MYSQL_PASSWORD (ferry / ferry): a vtgate user who may run vschema DDL
#   FERRY_PSDBPROXY_PORT (18456) psdbproxy's MySQL port on 127.0.0.1
#   FERRY_MYSQL_CLIENT           MySQL 8's mysql client (default: $FERRY_MYSQL8_HOME/bin/mysql,
#                               as scripts/install-mysql8.sh installs it, else mysql on PATH).
#                               MariaDB's client cannot log in to psdbproxy: psdbproxy offers
#                               caching_sha2_password without TLS and does not send its RSA key.
#   FERRY_VITESS_UNSHARDED_KEYSPACE (ferry_unsharded)
#   FERRY_VITESS_CLIENTS         which suites (default js,psdb-go,psdbproxy)
#   FERRY_PSDBPROXY_GIT          optional: a git directory of github.com/planetscale/psdbproxy
#                               holding the pinned commit, used only when the Go module proxy
#                               does not serve the module (its content is still checked
#                               against tests/psdbproxy/go.sum)
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
: "${FERRY_PORT:?FERRY_PORT: the Vitess gateway's port}"
: "${FERRY_RUN_DIR:?FERRY_RUN_DIR: the Vitess gateway's run dir (certs/ca.pem)}"
HOST="${FERRY_HOST:-127.0.0.1}"
USER_="${FERRY_MYSQL_USER:-ferry}" PASS_="${FERRY_MYSQL_PASSWORD:-ferry}"
CA="$FERRY_RUN_DIR/certs/ca.pem"
PROXY_PORT="${FERRY_PSDBPROXY_PORT:-18456}"
UNSHARDED="${FERRY_VITESS_UNSHARDED_KEYSPACE:-ferry_unsharded}"
SUITES=",${FERRY_VITESS_CLIENTS:-js,psdb-go,psdbproxy},"
OUT="$FERRY_RUN_DIR/vitess-clients"
export PATH="$PATH:/usr/local/go/bin"
mkdir -p "$OUT"
[ -s "$CA" ] || { echo "vitess-clients: no CA at $CA" >&2; exit 2; }

declare -a SUMMARY=()
status=0
summary() { # suite pass fail [note]
  SUMMARY+=("$(printf '%-10s %3d passed, %3d failed%s' "$1" "$2" "$3" "${4:+ ($4)}")")
  [ "$3" -eq 0 ] || status=1
}

# ---- 1. the JS driver and ORMs -------------------------------------------------------
if [[ $SUITES == *,js,* ]]; then
  echo "==== js: @planetscale/database, drizzle-orm, kysely-planetscale (tests/driver)"
  log="$OUT/js.log"
  ( cd "$ROOT/tests/driver" \
    && { [ -d node_modules ] || npm ci --no-audit --no-fund --loglevel=error >/dev/null; } \
    && FERRY_DRIVER_VITESS=1 FERRY_HOST="$HOST" FERRY_PORT="$FERRY_PORT" FERRY_MYSQL_USER="$USER_" \
       FERRY_MYSQL_PASSWORD="$PASS_" FERRY_VITESS_UNSHARDED_KEYSPACE="$UNSHARDED" NODE_EXTRA_CA_CERTS="$CA" \
       node --test --test-reporter=tap driver.test.js transactions.test.js types.test.js ) >"$log" 2>&1
  rc=$?
  # One line per test; the failures' messages (the assertion, at most 12 lines each).
  grep -E '^(not )?ok [0-9]+ - ' "$log" | sed -e 's/^ok [0-9]* - /PASS js /' -e 's/^not ok [0-9]* - /FAIL js /'
  awk '/^not ok [0-9]+ - /{show=1; n=0; print "---- " $0; next} /^(ok|not ok) [0-9]+ - |^# Subtest/{show=0}
       show && /^  error:|^  +[-+]/ && n++ < 12 {print}' "$log"
  pass=$(sed -n 's/^# pass //p' "$log"); fail=$(sed -n 's/^# fail //p' "$log")
  pass=${pass:-0} fail=${fail:-0}
  if [ $rc -ne 0 ] && [ "$fail" -eq 0 ]; then fail=1; tail -n 20 "$log"; fi
  summary js "$pass" "$fail" "log: $log"
fi

# ---- 2. PlanetScale's Go client --------------------------------------------------------
if [[ $SUITES == *,psdb-go,* ]]; then
  echo "==== psdb-go: github.com/planetscale/psdb core/client (tests/psdb-go), HTTP/2 and HTTP/3"
  log="$OUT/psdb-go.log"
  ( cd "$ROOT/tests/psdb-go" && FERRY_PSDB_VITESS=1 FERRY_PSDB_IDENTITY= FERRY_PSDB_TRANSPORTS= \
      FERRY_URL="https://$HOST:$FERRY_PORT" FERRY_CA="$CA" FERRY_USER="$USER_" FERRY_PASSWORD="$PASS_" \
      FERRY_VITESS_UNSHARDED_KEYSPACE="$UNSHARDED" go run . ) >"$log" 2>&1
  rc=$?
  grep -E '^(PASS|FAIL) ' "$log" | sed -e 's/^PASS /PASS psdb-go /' -e 's/^FAIL /FAIL psdb-go /' | cut -c1-400
  pass=$(grep -c '^PASS ' "$log"); fail=$(grep -c '^FAIL ' "$log")
  if [ $rc -ne 0 ] && [ "$fail" -eq 0 ]; then fail=1; tail -n 20 "$log"; fi
  summary psdb-go "$pass" "$fail" "log: $log"
fi

# ---- 3. psdbproxy and the mysql CLI ---------------------------------------------------------
# psdbproxy is built from the wrapper module tests/psdbproxy (go.mod + go.sum pin it and all
# of its dependencies; -mod=readonly uses nothing else), once: rebuilt when go.mod, go.sum
# or the go version change.
PROXY_MOD="$ROOT/tests/psdbproxy" PROXY_HOME="$ROOT/target/psdbproxy"
proxy_stamp() { go version | cut -d' ' -f3; cat "$PROXY_MOD/go.mod" "$PROXY_MOD/go.sum" | sha256sum | cut -c1-16; }
build_psdbproxy() {
  [ -x "$PROXY_HOME/bin/psdbproxy" ] && [ "$(cat "$PROXY_HOME/.built" 2>/dev/null)" = "$(proxy_stamp)" ] && return 0
  echo "building psdbproxy into $PROXY_HOME/bin (about a minute the first time)"
  local tmp="$PROXY_HOME.tmp"
  rm -rf "$tmp" "$OUT/psdbproxy-build.log" && mkdir -p "$tmp/bin"
  build() { ( cd "$PROXY_MOD" && CGO_ENABLED=0 GOFLAGS="-mod=readonly -buildvcs=false" \
      go build -trimpath -o "$tmp/bin/" github.com/planetscale/psdbproxy/cmd/psdbproxy ) >>"$OUT/psdbproxy-build.log" 2>&1; }
  if ! build; then
    if [ -z "${FERRY_PSDBPROXY_GIT:-}" ]; then
      cat "$OUT/psdbproxy-build.log" >&2
      echo "psdbproxy: the Go module proxy did not serve it; FERRY_PSDBPROXY_GIT may name a git dir of github.com/planetscale/psdbproxy" >&2
      # Not served here (the proxy refuses the module, none in the module cache): not run,
      # and said so. Any other build failure fails.
      grep -Eq 'planetscale/psdbproxy.*(403|404|410|not available|not found)' "$OUT/psdbproxy-build.log" && return 3
      return 1
    fi
    echo "psdbproxy: not from the Go module proxy; from the pinned commit in $FERRY_PSDBPROXY_GIT"
    # The module as the proxy would serve it, from the pinned commit (a module zip holds the
    # commit's files under module@version/); go.sum's hash still has to match.
    local v c t d
    v=$(awk '$1 == "github.com/planetscale/psdbproxy" { print $2 } $2 == "github.com/planetscale/psdbproxy" { print $3 }' "$PROXY_MOD/go.mod" | head -n1)
    c=${v##*-} t=${v#v0.0.0-}; t=${t%%-*}
    d="$tmp/goproxy/github.com/planetscale/psdbproxy/@v"
    mkdir -p "$d" && echo "$v" >"$d/list" \
      && printf '{"Version":"%s","Time":"%s-%s-%sT%s:%s:%sZ"}\n' "$v" "${t:0:4}" "${t:4:2}" "${t:6:2}" "${t:8:2}" "${t:10:2}" "${t:12:2}" >"$d/$v.info" \
      && git --git-dir="$FERRY_PSDBPROXY_GIT" show "$c:go.mod" >"$d/$v.mod" \
      && git --git-dir="$FERRY_PSDBPROXY_GIT" archive --format=zip --prefix="github.com/planetscale/psdbproxy@$v/" -o "$d/$v.zip" "$c" \
      && GOPROXY="file://$tmp/goproxy,$(go env GOPROXY)" build \
      || { cat "$OUT/psdbproxy-build.log" >&2; return 1; }
  fi
  proxy_stamp >"$tmp/.built"
  rm -rf "$tmp/goproxy" "$PROXY_HOME" && mv "$tmp" "$PROXY_HOME"
}

PROXY_PID=""
stop_proxy() { [ -z "$PROXY_PID" ] || { kill "$PROXY_PID" 2>/dev/null; wait "$PROXY_PID" 2>/dev/null; PROXY_PID=""; }; }
trap stop_proxy EXIT

cli_pass=0 cli_fail=0
ok() { cli_pass=$((cli_pass + 1)); echo "PASS cli $1"; }
bad() { cli_fail=$((cli_fail + 1)); echo "FAIL cli $1: $2" | cut -c1-600; }
# sql ARGS...: the mysql client through psdbproxy, batch mode without column names.
sql() { "$MYSQL" --defaults-extra-file="$OUT/psdbproxy.cnf" "${SSL_OFF[@]}" -N -B "$@" 2>&1; }
# expect NAME WANT SQL: the output must be exactly WANT.
expect() { local got; got=$(sql -e "$3"); [ "$got" = "$2" ] && ok "$1" || bad "$1" "got [${got//$'\n'/|}], want [${2//$'\n'/|}]"; }
# expect_error NAME ERE SQL: the statement fails with a message matching ERE, and the
# same connection answers the next statement (--force goes on after the error; from stdin:
# with -e the client stops at the first error).
expect_error() {
  local got; got=$(printf '%s;\nSELECT %s;\n' "$3" "'still here'" | sql --force)
  if grep -Eq "$2" <<<"$got" && grep -qx 'still here' <<<"$got"; then ok "$1 ($(head -n1 <<<"$got" | cut -c1-140))"
  else bad "$1" "got [${got//$'\n'/|}], want /$2/ then 'still here'"; fi
}

if [[ $SUITES == *,psdbproxy,* ]]; then
  echo "==== psdbproxy + mysql CLI (psdbproxy on 127.0.0.1:$PROXY_PORT -> https://$HOST:$FERRY_PORT)"
  MYSQL="${FERRY_MYSQL_CLIENT:-}"
  M8="${FERRY_MYSQL8_HOME:-$ROOT/target/mysql-8.0.33}/bin/mysql"
  [ -n "$MYSQL" ] || { [ -x "$M8" ] && MYSQL="$M8"; } \
    || MYSQL=$(command -v mysql || command -v mariadb || true)
  SSL_OFF=()  # psdbproxy's listener has no TLS; MySQL's client would otherwise try it
  "$MYSQL" --version 2>/dev/null | grep -q MariaDB || SSL_OFF=(--ssl-mode=DISABLED)
  # psdbproxy takes any user and password; the gateway's credential is its own flag.
  (umask 077 && printf '[client]\nuser=anyone\npassword=anything\nhost=127.0.0.1\nport=%s\n' "$PROXY_PORT" >"$OUT/psdbproxy.cnf")
  if [ -z "$MYSQL" ]; then
    bad "mysql client" "none found (FERRY_MYSQL_CLIENT)"
  else
    build_psdbproxy; built=$?
  fi
  if [ -z "$MYSQL" ]; then :
  elif [ "$built" = 3 ]; then
    echo "NOT RUN psdbproxy + mysql: github.com/planetscale/psdbproxy is not served by this machine's Go module proxy and is not in its module cache (FERRY_PSDBPROXY_GIT: a git dir of it with the pinned commit)"
  elif [ "$built" != 0 ]; then
    bad "build psdbproxy" "see $OUT/psdbproxy-build.log"
  else
    # The gateway's certificate is the dev CA's: Go's crypto/x509 reads it from SSL_CERT_FILE.
    SSL_CERT_FILE="$CA" "$PROXY_HOME/bin/psdbproxy" --listen "127.0.0.1:$PROXY_PORT" --host "$HOST:$FERRY_PORT" \
      --username "$USER_" --password "$PASS_" >"$OUT/psdbproxy.log" 2>&1 &
    PROXY_PID=$!
    for _ in $(seq 1 100); do sql -e 'SELECT 1' >/dev/null && break; kill -0 $PROXY_PID 2>/dev/null || break; sleep 0.1; done
    v=$(sql -e 'SELECT @@version')
    if [[ $v != *-Vitess ]]; then
      bad "connect" "SELECT @@version said [$v]; psdbproxy log: $(tail -n 5 "$OUT/psdbproxy.log")"
    else
      ok "connect through psdbproxy ($v, $("$MYSQL" --version | cut -c1-60))"
      t="cli_$$_$(date +%s)" big="cli_big_$$_$(date +%s)"
      expect "CREATE TABLE + ALTER VSCHEMA (hash vindex)" "" \
        "CREATE TABLE $t (id BIGINT NOT NULL PRIMARY KEY, v VARCHAR(20)); ALTER VSCHEMA ON $t ADD VINDEX hash(id)"
      expect "INSERT 8 rows (both shards)" "8" \
        "INSERT INTO $t (id, v) VALUES (1,'a'),(2,'b'),(3,'c'),(4,'d'),(5,'e'),(6,'f'),(7,'g'),(8,'h'); SELECT ROW_COUNT()"
      expect "SELECT across shards, ordered" "$(printf '1\ta\n2\tb\n3\tc\n4\td\n5\te\n6\tf\n7\tg\n8\th')" \
        "SELECT id, v FROM $t ORDER BY id"
      expect "aggregate across shards" "$(printf '8\t36')" "SELECT COUNT(*), SUM(id) FROM $t"
      lo=$(sql -e "USE \`ferry:-80\`; SELECT id FROM $t ORDER BY id" | paste -sd,)
      hi=$(sql -e "USE \`ferry:80-\`; SELECT id FROM $t ORDER BY id" | paste -sd,)
      all=$(printf '%s\n' "${lo//,/$'\n'}" "${hi//,/$'\n'}" | sort -n | paste -sd,)
      if [[ $lo =~ ^[0-9,]+$ && $hi =~ ^[0-9,]+$ && $all = 1,2,3,4,5,6,7,8 ]]; then ok "USE keyspace:shard reads one shard each (-80: $lo; 80-: $hi)"
      else bad "USE keyspace:shard" "-80: [$lo], 80-: [$hi]"; fi
      expect "transaction across shards rolls back" "$(printf '10\n8')" \
        "BEGIN; INSERT INTO $t (id, v) VALUES (9,'i'),(10,'j'); SELECT COUNT(*) FROM $t; ROLLBACK; SELECT COUNT(*) FROM $t"
      expect "transaction across shards commits" "$(printf '1\tA\n9\ti\n10\tj')" \
        "START TRANSACTION; INSERT INTO $t (id, v) VALUES (9,'i'),(10,'j'); UPDATE $t SET v = 'A' WHERE id = 1; COMMIT;
         SELECT id, v FROM $t WHERE id IN (1, 9, 10) ORDER BY id"
      expect "session variables on the connection" "$(printf '42\tx')" "SET @a = 42, @b = 'x'; SELECT @a, @b"
      expect "a temporary table (unsharded keyspace)" "1" \
        "CREATE TEMPORARY TABLE $UNSHARDED.${t}_tmp (x INT); INSERT INTO $UNSHARDED.${t}_tmp (x) VALUES (7); SELECT COUNT(*) FROM $UNSHARDED.${t}_tmp"
      expect_error "duplicate key" "^ERROR 1062 \(23000\).*Duplicate entry" "INSERT INTO $t (id, v) VALUES (1, 'dup')"
      expect_error "unknown table" "^ERROR [0-9]+ .*table no_such_table_cli not found" "SELECT * FROM no_such_table_cli"
      expect_error "unknown column" "^ERROR 1054 \(42S22\)" "SELECT nope FROM $t"
      expect_error "syntax error" "^ERROR [0-9]+ .*syntax error" "SELEC 1"
      expect_error "error inside a transaction, then ROLLBACK" "^ERROR 1062" \
        "BEGIN; INSERT INTO $t (id, v) VALUES (11, 'k'); INSERT INTO $t (id, v) VALUES (11, 'k'); ROLLBACK"
      expect "  ... and the rolled back row is gone" "0" "SELECT COUNT(*) FROM $t WHERE id = 11"
      # psdbproxy sends every statement of an OLAP connection to StreamExecute: 30,000 rows,
      # about 15,000 a shard, past vttablet's 10,000-row limit for OLTP results.
      got=$({ echo "CREATE TABLE $big (n BIGINT NOT NULL PRIMARY KEY); ALTER VSCHEMA ON $big ADD VINDEX hash(n);"
              for s in 1 10001 20001; do printf 'INSERT INTO %s (n) VALUES ' "$big"; seq $s $((s + 9999)) | sed 's/.*/(&)/' | paste -sd,; echo ';'; done
              echo "SELECT COUNT(*) FROM $big;"; } | sql)
      [ "$got" = 30000 ] && ok "30,000 rows written" || bad "30,000 rows written" "${got:0:300}"
      got=$(sql -e "SET workload = 'olap'; SELECT n FROM $big ORDER BY n")
      if [ "$(wc -l <<<"$got")" -eq 30000 ] && [ "$(head -n1 <<<"$got")" = 1 ] && [ "$(tail -n1 <<<"$got")" = 30000 ]; then
        ok "SET workload = 'olap' then a 30,000-row scatter read (StreamExecute)"
      else bad "SET workload = 'olap' then a 30,000-row scatter read (StreamExecute)" "$(wc -l <<<"$got") lines: $(head -c 300 <<<"$got")"; fi
      sql -e "DROP TABLE $t; DROP TABLE $big" >/dev/null
    fi
    stop_proxy
  fi
  summary cli "$cli_pass" "$cli_fail" "psdbproxy log: $OUT/psdbproxy.log"
fi

echo "==== summary (Vitess gateway https://$HOST:$FERRY_PORT)"
printf '%s\n' "${SUMMARY[@]}"
exit $status
