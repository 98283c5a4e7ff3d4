#!/usr/bin/env python3
"""docs/reference/settings.md's stack table against scripts/env.sh, the stack's settings.

Every variable env.sh defaults (`: "${NAME:=default}"`) has one row, with that default
(`$ROOT/` dropped, `$FERRY_RUN_DIR` shown as `.run`, `$FERRY_VENV` as `.venv`; empty: —);
every row names a variable env.sh defaults or a script reads. The shim's and the
filter's tables are checked by their own crates' tests. Exit 1 on any difference."""
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOC = ROOT / "docs/reference/settings.md"
ENV = ROOT / "scripts/env.sh"


def shown(default):
    for var, text in (("$ROOT/", ""), ("$FERRY_RUN_DIR", ".run"), ("$FERRY_VENV", ".venv")):
        default = default.replace(var, text)
    return f"`{default}`" if default else "—"


def main():
    env = {}
    for line in ENV.read_text().splitlines():
        m = re.match(r': "\$\{([A-Z0-9_]+):?=([^}]*)\}"', line)
        if m:
            env[m.group(1)] = m.group(2)
    doc = DOC.read_text()
    m = re.search(r"<!-- stack settings: begin -->(.*?)<!-- stack settings: end -->", doc, re.S)
    if not m:
        sys.exit(f"check-settings: no stack settings markers in {DOC}")
    rows = {}
    errors = []
    for row in re.findall(r"^\| `([A-Z0-9_]+)` \| ([^|]*) \|", m.group(1), re.M):
        name, default = row[0], row[1].strip()
        if name in rows:
            errors.append(f"{name}: two rows")
        rows[name] = default
    for name, default in env.items():
        if name not in rows:
            errors.append(f"{name}: set in scripts/env.sh, missing from the stack table")
        elif rows[name] != shown(default):
            errors.append(f"{name}: the table says {rows[name]}, scripts/env.sh {shown(default)}")
    for name in rows:
        if name in env:
            continue
        found = subprocess.run(["git", "grep", "-q", "-w", name, "--", "scripts", "Makefile", "mk"],
                               cwd=ROOT).returncode == 0
        if not found:
            errors.append(f"{name}: in the stack table, but no script reads it")
    for e in errors:
        print(f"check-settings: {e}")
    if errors:
        sys.exit(1)
    print(f"check-settings: the stack table matches scripts/env.sh ({len(env)} variables)")


if __name__ == "__main__":
    main()
