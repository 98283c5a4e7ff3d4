#!/usr/bin/env bash
# Regenerates the external-encoder fixtures of ferry-compress's tests: messages
# as other implementations encode them (Go's gzip and klauspost/compress as Go gRPC
# and Connect peers use them, Python's gzip, the gzip and zstd command-line tools).
# The plaintext is payload(rows): the rows the tests rebuild (src/tests.rs).
# Needs go, python3, gzip, zstd. The outputs are committed; this is provenance.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

(cd gen && GOFLAGS=-mod=mod go run . "$here")

python3 - "$tmp" <<'PY'
import sys
rows = 5000
with open(sys.argv[1] + "/rows5000.txt", "w") as f:
    for i in range(rows):
        f.write(f"{i}\tuser-{i}\t{(i * 7919) % 10007}\t2024-05-{i % 28 + 1:02d}\n")
PY
p="$tmp/rows5000.txt"

python3 -c 'import gzip,sys; sys.stdout.buffer.write(gzip.compress(open(sys.argv[1],"rb").read(), compresslevel=9, mtime=0))' "$p" >python-gzip9-rows5000.gz
# The gzip tool keeps the file name (FNAME) in the header.
cp "$p" "$tmp/payload.txt" && gzip -1 -c "$tmp/payload.txt" >cli-gzip1-name-rows5000.gz
# Two members: the first half, then the second half (Go's gzip.Reader reads both).
head -c 70000 "$p" | gzip -c >"$tmp/a.gz"
tail -c +70001 "$p" | gzip -c >"$tmp/b.gz"
cat "$tmp/a.gz" "$tmp/b.gz" >cli-gzip-2members-rows5000.gz

zstd -q -1 -c "$p" >cli-zstd1-rows5000.zst
zstd -q -19 --no-check -c "$p" >cli-zstd19-nocheck-rows5000.zst
# From a pipe with --long=27: the header declares a 128 MiB window, more than
# ruzstd's own 100 MiB ceiling.
cat "$p" | zstd -q --long=27 -c >cli-zstd-long27-rows5000.zst
# A skippable frame, then two frames (halves).
printf '\x50\x2a\x4d\x18\x05\x00\x00\x00hello' >"$tmp/skip"
head -c 70000 "$p" | zstd -q -3 -c >"$tmp/a.zst"
tail -c +70001 "$p" | zstd -q -3 -c >"$tmp/b.zst"
cat "$tmp/skip" "$tmp/a.zst" "$tmp/b.zst" >cli-zstd-skippable-2frames-rows5000.zst
