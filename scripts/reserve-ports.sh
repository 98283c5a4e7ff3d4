#!/usr/bin/env bash
# reserve-ports.sh PORT|FROM-TO ...: takes these ports out of Linux's automatic choice of a
# local port for outgoing connections (net.ipv4.ip_local_reserved_ports), so that a fixed
# listener port inside the ephemeral range (32768-60999 by default: MariaDB's 33306 and
# 43306, Vitess's 43380-43393...) is never held by some client's connection when its server
# starts ("Bind on TCP/IP port: Address already in use"). Listeners may still bind them.
# Only root may; for anyone else it does nothing. The kernel keeps the list until reboot.
set -u
f=/proc/sys/net/ipv4/ip_local_reserved_ports
[ -w "$f" ] || exit 0
cur=$(cat "$f")
list=$cur
for p in "$@"; do
  case "$p" in ''|*[!0-9-]*) echo "reserve-ports: not a port or range: $p" >&2; exit 2 ;; esac
  list="${list:+$list,}$p"
done
[ "$list" = "$cur" ] || echo "$list" >"$f" 2>/dev/null || true
