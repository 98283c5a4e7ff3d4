#!/usr/bin/env python3
"""Every link in the docs resolves, offline (make check-docs).

1. Markdown links. In every *.md file of the repository (git's tracked and untracked,
   not ignored, files; node_modules, target/ and fuzz corpora left out), every relative
   link `[x](path)`, `[x](path#anchor)`, `[x](#anchor)`, `![x](path)` and `[x]: path`
   must name an existing file or directory, and an anchor in a .md file must be one of
   its headings (GitHub's slugs: lowercase, punctuation but `-` and `_` dropped, spaces
   to `-`, a repeated heading gets `-1`, `-2`, ...) or an explicit `<a id|name="...">`.
   Links with a scheme (https:, mailto:, ...) are not fetched: skipped.
2. Doc references in source files. Comments (and messages) name a doc section in one
   form: a repository path to a .md file followed by the heading's text in double quotes,
   `docs/benchmarks/cost.md "Cost per query"` (in JSON or a string literal the quotes may
   be escaped: `\\"`), or `path.md#anchor`. Each must name an existing file and one of
   its headings (compared by slug). The path is taken from the repository's root, else
   from the referring file's directory. Old loose forms are reported too: a comma or a
   parenthesis between the path and the quote (`path.md, "Heading"`,
   `path.md ("Heading")`), a bare `README "Heading"`, and a quote that does not close on
   its line (the reference must not be split across lines).

Usage:
  scripts/check-links.py                    the whole repository
  scripts/check-links.py --skip shim/src/   ... but not the files under these prefixes
  scripts/check-links.py --scan DIR|FILE... only the doc references in these files (any
                                            path, e.g. a copy elsewhere), against the
                                            repository's docs
Prints every broken link as file:line: message; exits 1 if there is one.
"""
import argparse
import os
import re
import subprocess
import sys
import unicodedata
from urllib.parse import unquote

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

EXCLUDED_PARTS = ("node_modules", "target", ".run", ".venv", "__pycache__")
EXCLUDED_PREFIXES = ("fuzz/corpus/", "fuzz/artifacts/", "fuzz/seeds/", "fuzz/target/")
SOURCE_MAX_BYTES = 2_000_000
SELF = "scripts/check-links.py"  # its own docstring shows the forms

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
HTML_ANCHOR = re.compile(r"""<a\s+[^>]*?(?:id|name)\s*=\s*["']([^"']+)["']""", re.I)
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*(<[^>]*>|[^)\s]*(?:\([^)\s]*\)[^)\s]*)*)(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^)]*\)))?\s*\)")
REF_DEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)")
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")

# Doc references in source text.
PATH = r"(?<![\w/.$-])((?:\.{1,2}/)?(?:[\w.-]+/)*[\w.-]+\.md)"
REF_HEADING = re.compile(PATH + r' \\?"([^"\\\n]+)\\?"')
REF_ANCHOR = re.compile(PATH + r"#([\w-]+)")
LOOSE = [
    (re.compile(PATH + r',\s*\(?\\?"'), 'write it `path.md "Heading"` (no comma)'),
    (re.compile(PATH + r' \(\\?"'), 'write it `path.md "Heading"` (no parenthesis)'),
    (re.compile(r'(?<![\w/.-])(README),? \\?"'), 'name the file: `path/README.md "Heading"`'),
    (re.compile(PATH + r' \\?"[^"\n]*$'), "the heading's quote does not close on this line"),
]


def slug(text):
    """GitHub's anchor for a heading's text (github-slugger)."""
    text = CODE_SPAN.sub(lambda m: m.group(2), text)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # links: their text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    out = []
    for ch in text.strip().lower():
        cat = unicodedata.category(ch)
        if ch in "-_" or cat[0] in "LNM":
            out.append(ch)
        elif ch == " ":
            out.append("-")
    return "".join(out)


def list_files():
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT, check=True, capture_output=True,
        ).stdout.decode("utf-8", "replace")
    except (OSError, subprocess.CalledProcessError) as e:
        sys.exit(f"check-links: git ls-files failed: {e}")
    files = []
    for path in sorted(set(p for p in out.split("\0") if p)):
        parts = path.split("/")
        if any(p in EXCLUDED_PARTS for p in parts) or path.startswith(EXCLUDED_PREFIXES):
            continue
        if os.path.isfile(os.path.join(ROOT, path)):
            files.append(path)
    return files


def read_text(path):
    try:
        if os.path.getsize(path) > SOURCE_MAX_BYTES:
            return None
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    if b"\0" in data:
        return None
    return data.decode("utf-8", "replace")


def prose_lines(text):
    """(line number, line) of a Markdown text outside fenced code blocks."""
    fence = None
    for n, line in enumerate(text.splitlines(), 1):
        m = FENCE.match(line)
        if fence:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) \
                    and not line.strip().strip(fence[0]):
                fence = None
            continue
        if m:
            fence = m.group(1)
            continue
        yield n, line


_anchor_cache = {}


def anchors_of(path):
    """The anchors (slugs and explicit ids) of a Markdown file, or None if unreadable."""
    path = os.path.normpath(path)
    if path in _anchor_cache:
        return _anchor_cache[path]
    text = read_text(path)
    if text is None:
        _anchor_cache[path] = None
        return None
    anchors, seen = set(), {}

    def add(heading):
        s = slug(heading)
        n = seen.get(s, 0)
        seen[s] = n + 1
        anchors.add(s if n == 0 else f"{s}-{n}")

    previous = None
    for _, line in prose_lines(text):
        m = ATX.match(line)
        if m:
            add(m.group(2) or "")
            previous = None
        elif previous and SETEXT.match(line) and not previous.lstrip().startswith(("|", "-", "*", ">")):
            add(previous)
            previous = None
        else:
            previous = line if line.strip() else None
        for a in HTML_ANCHOR.findall(line):
            anchors.add(a)
    _anchor_cache[path] = anchors
    return anchors


def check_target(source_dir, dest, where, errors):
    dest = dest.strip()
    if dest.startswith("<") and dest.endswith(">"):
        dest = dest[1:-1]
    if not dest or SCHEME.match(dest) or dest.startswith("//"):
        return
    path, _, anchor = dest.partition("#")
    path = unquote(path)
    if path:
        target = os.path.normpath(os.path.join(ROOT, path.lstrip("/")) if path.startswith("/")
                                  else os.path.join(source_dir, path))
        if not (target == ROOT or target.startswith(ROOT + os.sep)):
            errors.append(f"{where}: {dest}: outside the repository")
            return
        if not os.path.exists(target):
            errors.append(f"{where}: {dest}: no such file")
            return
    else:
        target = None
    if anchor:
        if target is None:
            return  # checked by the caller against the file itself
        if os.path.isdir(target) or not target.endswith(".md"):
            return
        anchors = anchors_of(target)
        if anchors is not None and unquote(anchor) not in anchors:
            errors.append(f"{where}: {dest}: no heading #{anchor} in {os.path.relpath(target, ROOT)}")


def check_markdown(rel, errors):
    path = os.path.join(ROOT, rel)
    text = read_text(path)
    if text is None:
        return
    own = anchors_of(path) or set()
    # The prose only (code blocks and code spans blanked, line numbers kept), as one text:
    # a link's text may run over several lines.
    prose = [""] * (text.count("\n") + 1)
    for n, line in prose_lines(text):
        prose[n - 1] = CODE_SPAN.sub(lambda m: " " * len(m.group(0)), line)
    joined = "\n".join(prose)
    found = [(m.start(), m.group(1)) for m in INLINE_LINK.finditer(joined)]
    for n, line in enumerate(prose, 1):
        m = REF_DEF.match(line)
        if m:
            found.append((None, m.group(1), n))
    for item in found:
        if len(item) == 2:
            pos, dest = item
            n = joined.count("\n", 0, pos) + 1
        else:
            _, dest, n = item
        where = f"{rel}:{n}"
        d = dest.strip("<>").strip()
        if d.startswith("#"):
            if unquote(d[1:]) not in own:
                errors.append(f"{where}: {d}: no such heading in this file")
            continue
        check_target(os.path.dirname(path), dest, where, errors)


def resolve_doc(ref, source_dir):
    for base in (ROOT, source_dir):
        p = os.path.normpath(os.path.join(base, ref))
        if os.path.isfile(p):
            return p
    return None


def check_references(display, path, text, errors, markdown=False):
    lines = prose_lines(text) if markdown else enumerate(text.splitlines(), 1)
    source_dir = os.path.dirname(path)
    for n, line in lines:
        where = f"{display}:{n}"
        if markdown:
            line = CODE_SPAN.sub(lambda m: " " * len(m.group(0)), line)
            line = INLINE_LINK.sub(lambda m: " " * len(m.group(0)), line)
            line = re.sub(r"\]\([^)\s]*\)", " ", line)  # the end of a link whose text began a line before
        else:
            # Markdown links in source text (settings' descriptions) are rendered into
            # a doc, where they are checked from the doc's own folder.
            line = re.sub(r"\]\([^)\s]*\)", " ", line)
        found = []
        for m in REF_HEADING.finditer(line):
            found.append((m.group(1), m.group(2), True))
        for m in REF_ANCHOR.finditer(line):
            found.append((m.group(1), m.group(2), False))
        for ref, what, is_heading in found:
            doc = resolve_doc(ref, source_dir)
            if doc is None:
                errors.append(f"{where}: {ref}: no such file")
                continue
            anchors = anchors_of(doc) or set()
            key = slug(what) if is_heading else what
            if key not in anchors:
                shown = f'"{what}"' if is_heading else f"#{what}"
                errors.append(f"{where}: {ref} {shown}: no such heading in {os.path.relpath(doc, ROOT)}")
        for pattern, advice in LOOSE:
            for m in pattern.finditer(line):
                errors.append(f"{where}: {m.group(0).strip()}...: {advice}")


def scan_paths(paths):
    for p in paths:
        if os.path.isdir(p):
            for d, dirs, files in os.walk(p):
                dirs[:] = sorted(x for x in dirs if x not in EXCLUDED_PARTS)
                for f in sorted(files):
                    yield os.path.join(d, f)
        else:
            yield p


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--skip", action="append", default=[], metavar="PREFIX",
                    help="leave out the repository's files under this path prefix")
    ap.add_argument("--scan", nargs="+", metavar="PATH",
                    help="check only the doc references in these files or directories")
    args = ap.parse_args()
    errors = []
    if args.scan:
        for p in scan_paths(args.scan):
            text = read_text(p)
            if text is not None:
                # References are resolved from the repository's root (a copy's own
                # directory is not the original's).
                check_references(p, os.path.join(ROOT, "."), text, errors, markdown=p.endswith(".md"))
    else:
        for rel in list_files():
            if any(rel.startswith(s) for s in args.skip):
                continue
            if rel.endswith(".md"):
                check_markdown(rel, errors)
            text = read_text(os.path.join(ROOT, rel))
            if text is not None and rel != SELF:
                check_references(rel, os.path.join(ROOT, rel), text, errors, markdown=rel.endswith(".md"))
    for e in errors:
        print(e)
    if errors:
        print(f"check-links: {len(errors)} broken link(s)")
        return 1
    print("check-links: every link resolves")
    return 0


if __name__ == "__main__":
    sys.exit(main())
