#!/usr/bin/env python3
"""docs/reference/refusals.md against the code and the tests (make check-refusals).

The doc's refusal tables are the tables whose header is `trigger | HTTP | code | message |
produced in | tested by`. For each row:

1. Its message is what the cited code says. The message is a code span; `{name}` marks a
   variable part and `…` an elided one. Every fixed part between them is found in the
   non-test code of the files the `produced in` cell names (each must exist): in their
   string literals, and their integers (an errno written as a number). A part may run
   from one literal into another where the first has a format placeholder (`{e}` holds
   another literal, as the message is built). A `"` next to a variable part is the
   quoting of Rust's `{:?}`. A row whose `message` has no code span (`—`) is not checked.
2. Its tests exist. In `tested by`, a code span that is a path (.rs, .js, .mjs, .go) names
   a test file; the code spans after it name its tests: a `#[test]` / `#[tokio::test]`
   function in Rust, a `test('title')` in JS, a `func TestName` in Go. `not tested yet`
   instead is allowed when the section "Not tested yet" lists the start of the row's
   trigger; that section lists nothing else.
3. The doc is complete. Every string literal handed to a refusal constructor of
   CONSTRUCTORS in non-test code (`#[cfg(test)]` items, tests/ and tests.rs files left out)
   has each of its fixed parts (the first 40 characters of each) in some message of the
   doc. A short part ("empty") may be found in another refusal's message.

Offline, python3 stdlib only. Prints each problem with the doc's line (or the source's);
exit 1 if there is one.
"""
import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
DOC = "docs/reference/refusals.md"
COLUMNS = ["trigger", "http", "code", "message", "produced in", "tested by"]
UNTESTED = "not tested yet"
UNTESTED_HEADING = "Not tested yet"
TEST_FILES = (".rs", ".js", ".mjs", ".go")
# (path prefix, the call whose first string literal is a message a client gets). Messages
# built elsewhere (constants, `Display` impls) are checked from the doc's side only (1).
CONSTRUCTORS = [
    ("filter/core/src/", r"\bRejection::new\s*\("),
    ("filter/core/src/connect_get.rs", r"\b(?:invalid|use_post)\s*\("),
    ("filter/core/src/envelope.rs", r"\binvalid\s*\("),
    ("shim/src/", r"\bConnectError::new\s*\("),
    ("shim/src/", r"\brpc_error\s*\("),
    ("shim/src/rpc/batch/plan.rs", r"\binvalid\s*\("),
    ("shim/src/rpc/batch/condition.rs", r"\bErr\s*\("),
    ("shim/src/idempotency/key.rs", r"\bbad\s*\("),
    ("shim/src/types/bind.rs", r"\bBindError\s*\("),
    ("shim/src/statement/run.rs", r"\bFinished::(?:Unsupported|Invalid)\s*\("),
    ("wire/src/basic_auth.rs", r"\bAuthError::\w+\s*=>"),
]
SCAN = ["filter/core/src", "shim/src", "wire/src"]
PREFIX_CHARS = 40  # of each fixed part, for 3
MIN_PART = 3  # fixed parts shorter than this (non-space characters) are not checked

CODE_SPAN = re.compile(r"(`+)\s?(.+?)\s?\1")
PLACEHOLDER = re.compile(r"\{[^{}]*\}|…")
SECTION_LINK = re.compile(r"\s*\(\[[^\]]*\]\([^)]*\)\)\s*$")
ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", "0": "\0", "'": "'", '"': '"'}
CHAR = re.compile(r"'(?:\\(?:x[0-9a-fA-F]{2}|u\{[0-9a-fA-F_]*\}|.)|[^\\'\n])'")
RAW = re.compile(r'b?r(#*)"')
INTEGER = re.compile(r"(?<![\w.])\d+(?![\w.])")
RUST_TEST = re.compile(r"#\[(?:tokio::)?test\b")


def read(rel):
    with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
        return f.read()


# ---------------------------------------------------------------- Rust source

def decode(body):
    """A Rust string literal's text: escapes resolved, `\\` + newline + indent dropped."""
    out, i = [], 0
    while i < len(body):
        c = body[i]
        if c != "\\" or i + 1 >= len(body):
            out.append(c)
            i += 1
            continue
        e = body[i + 1]
        if e == "\n":
            i += 2
            while i < len(body) and body[i] in " \t\r\n":
                i += 1
        elif e == "x":
            out.append(chr(int(body[i + 2:i + 4], 16)))
            i += 4
        elif e == "u":
            j = body.index("}", i)
            out.append(chr(int(body[i + 3:j].replace("_", ""), 16)))
            i = j + 1
        else:
            out.append(ESCAPES.get(e, e))
            i += 2
    return "".join(out)


def lex(src):
    """(code with comments, literals and chars blanked; [(offset, text)] of string literals)."""
    out, lits, i, n = list(src), [], 0, len(src)

    def blank(a, b):
        out[a:b] = [ch if ch == "\n" else " " for ch in src[a:b]]

    while i < n:
        c, two = src[i], src[i:i + 2]
        word_start = i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")
        raw = RAW.match(src, i) if word_start and c in "br" else None
        if two == "//":
            j = src.find("\n", i)
            j = n if j < 0 else j
            blank(i, j)
            i = j
        elif two == "/*":
            j, depth = i + 2, 1
            while j < n and depth:
                if src.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif src.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            blank(i, j)
            i = j
        elif raw:
            end = src.find('"' + raw.group(1), raw.end())
            end = n if end < 0 else end
            lits.append((i, src[raw.end():end]))
            blank(i, end + 1 + len(raw.group(1)))
            i = end + 1 + len(raw.group(1))
        elif c == '"' or (two == 'b"' and word_start):
            start = i
            j = i + (2 if c == "b" else 1)
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            lits.append((start, decode(src[src.index('"', start) + 1:j])))
            blank(start, j + 1)
            i = j + 1
        elif c == "'" and CHAR.match(src, i):
            m = CHAR.match(src, i)
            blank(i, m.end())
            i = m.end()
        else:
            i += 1
    return "".join(out), lits


def matching(code, i, open_ch, close_ch):
    """The offset just past the bracket closing the one opened before `i`."""
    depth = 1
    while i < len(code) and depth:
        if code[i] == open_ch:
            depth += 1
        elif code[i] == close_ch:
            depth -= 1
        i += 1
    return i


def test_regions(code):
    """[(start, end)] of `#[cfg(test)]` items: `mod x;`, or up to the item's closing brace."""
    regions = []
    for m in re.finditer(r"#\[cfg\(test\)\]", code):
        semi, brace = code.find(";", m.end()), code.find("{", m.end())
        if semi >= 0 and (brace < 0 or semi < brace):
            regions.append((m.start(), semi + 1))
        elif brace >= 0:
            regions.append((m.start(), matching(code, brace + 1, "{", "}")))
    return regions


SOURCES = {}


def source(rel):
    """(code, string literals, test regions, integer literals) of a file, the literals of
    its test code left out; a file that is not Rust is one literal."""
    if rel not in SOURCES:
        text = read(rel)
        if rel.endswith(".rs"):
            code, lits = lex(text)
            tests = test_regions(code)

            def outside(at):
                return not any(a <= at < b for a, b in tests)

            lits = [(o, t) for o, t in lits if outside(o)]
            numbers = sorted({m.group() for m in INTEGER.finditer(code) if outside(m.start())})
            SOURCES[rel] = (code, lits, tests, numbers)
        else:
            SOURCES[rel] = (text, [(0, text)], [], [])
    return SOURCES[rel]


def pieces(literal):
    """A literal's fixed parts, split at format placeholders (`{{` and `}}` are braces)."""
    parts, buf, i = [], [], 0
    while i < len(literal):
        if literal.startswith("{{", i) or literal.startswith("}}", i):
            buf.append(literal[i])
            i += 2
        elif literal[i] == "{" and "}" in literal[i:]:
            parts.append("".join(buf))
            buf = []
            i = literal.index("}", i) + 1
        else:
            buf.append(literal[i])
            i += 1
    parts.append("".join(buf))
    return [p for p in parts if p]


def found(part, parts):
    """Whether `part` is in one fixed part, or runs from the end of one into whole others
    and the start of a last one (each join a placeholder filled with another literal)."""
    if any(part in p for p in parts):
        return True
    todo = {k for p in parts for k in range(1, min(len(p), len(part)) + 1)
            if p.endswith(part[:k])}
    seen = set()
    while todo:
        i = todo.pop()
        seen.add(i)
        rest = part[i:]
        for p in parts:
            if p.startswith(rest):
                return True
            if rest.startswith(p) and i + len(p) not in seen:
                todo.add(i + len(p))
    return False


# ---------------------------------------------------------------- the doc

def cells(line):
    """A table row's cells (`\\|` is a `|` inside a cell)."""
    body = line.strip()
    body = body[1:] if body.startswith("|") else body
    body = body[:-1] if body.endswith("|") and not body.endswith("\\|") else body
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", body)]


def spans(cell):
    return [m.group(2) for m in CODE_SPAN.finditer(cell)]


def plain(text):
    """A cell's text without Markdown: code spans' text, links' text, spaces collapsed."""
    text = CODE_SPAN.sub(lambda m: m.group(2), text)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    return " ".join(text.split())


def rows(doc):
    """[(line number, {column: cell})] of the refusal tables."""
    out, header = [], None
    for number, line in enumerate(doc.splitlines(), 1):
        if not line.lstrip().startswith("|"):
            header = None
            continue
        row = cells(line)
        if header is None:
            names = [c.lower() for c in row]
            header = names if names == COLUMNS else []
        elif header and not set("".join(row)) <= set("-: "):
            if len(row) != len(header):
                out.append((number, None))
            else:
                out.append((number, dict(zip(header, row))))
    return out


def section(doc, heading):
    """The lines of a `## heading` section."""
    lines, inside = [], False
    for line in doc.splitlines():
        if line.startswith("## "):
            inside = line[3:].strip() == heading
        elif inside:
            lines.append(line)
    return lines


def message_parts(message):
    """The fixed parts of a doc message, without the quotes of `{:?}` next to a gap."""
    parts = []
    pieces_ = PLACEHOLDER.split(message)
    for i, part in enumerate(pieces_):
        if i > 0 and part.startswith('"'):
            part = part[1:]
        if i < len(pieces_) - 1 and part.endswith('"'):
            part = part[:-1]
        if len(part.strip()) >= MIN_PART:
            parts.append(part)
    return parts


def is_path(span):
    return "/" in span and not span.startswith("/") and " " not in span and (
        os.path.splitext(span)[1] != "" or span.endswith("/"))


# ---------------------------------------------------------------- tests

def has_test(rel, name):
    """Whether the test file has this test (Rust: a function with a test attribute in the
    six lines above it)."""
    text = read(rel)
    if rel.endswith(".rs"):
        fn = re.compile(r"(?m)^[ \t]*(?:pub\s+)?(?:async\s+)?fn\s+" + re.escape(name) + r"\b")
        return any(RUST_TEST.search("\n".join(text[:m.start()].splitlines()[-6:]))
                   for m in fn.finditer(text))
    if rel.endswith((".js", ".mjs")):
        quoted = "|".join(q + re.escape(name) + q for q in ("'", '"', "`"))
        return re.search(r"\b(?:test|it)(?:\.\w+)?\(\s*(?:" + quoted + ")", text) is not None
    if rel.endswith(".go"):
        return re.search(r"(?m)^func\s+" + re.escape(name) + r"\(", text) is not None
    return False


def check_tests(cell, where, errors):
    """Checks a `tested by` cell; whether it says the row is not tested yet."""
    if plain(cell).lower() == UNTESTED:
        return True
    current = None
    named = 0
    for span in spans(cell):
        if is_path(span):
            if not span.endswith(TEST_FILES):
                errors.append(f"{where}: {span}: not a test file ({', '.join(TEST_FILES)})")
            elif not os.path.isfile(os.path.join(ROOT, span)):
                errors.append(f"{where}: test file {span} does not exist")
                current = None
                continue
            current = span
        elif current is None:
            errors.append(f"{where}: test {span!r} follows no test file")
        else:
            named += 1
            if not has_test(current, span):
                errors.append(f"{where}: no test {span!r} in {current}")
    if named == 0:
        errors.append(f"{where}: `tested by` names no test (or write `{UNTESTED}`)")
    return False


# ---------------------------------------------------------------- 3: completeness

def constructed():
    """[(file, line, literal)] handed to the refusal constructors in non-test code."""
    out = []
    for top in SCAN:
        for dirpath, dirnames, filenames in os.walk(os.path.join(ROOT, top)):
            dirnames[:] = sorted(d for d in dirnames if d != "tests")
            for name in sorted(filenames):
                if not name.endswith(".rs") or name in ("tests.rs",) or name.endswith("_tests.rs"):
                    continue
                rel = os.path.relpath(os.path.join(dirpath, name), ROOT)
                patterns = [p for prefix, p in CONSTRUCTORS if rel.startswith(prefix)]
                if not patterns:
                    continue
                code, lits, tests, _ = source(rel)
                for pattern in patterns:
                    for m in re.finditer(pattern, code):
                        if any(a <= m.start() < b for a, b in tests):
                            continue
                        if code[m.end() - 1] == "(":
                            end = matching(code, m.end(), "(", ")")
                            lit = next((t for o, t in lits if m.end() <= o < end), None)
                        else:  # `X =>` then the literal
                            lit = next((t for o, t in lits if o >= m.end()
                                        and not code[m.end():o].strip()), None)
                        if lit is not None:
                            line = code.count("\n", 0, m.start()) + 1
                            out.append((rel, line, lit))
    return out


# ---------------------------------------------------------------- main

def main():
    errors = []
    doc = read(DOC)
    table = rows(doc)
    if not table:
        sys.exit(f"check-refusals: no refusal table in {DOC} (header: {' | '.join(COLUMNS)})")
    messages, untested = [], []
    for number, row in table:
        where = f"{DOC}:{number}"
        if row is None:
            errors.append(f"{where}: the row has not {len(COLUMNS)} cells")
            continue
        files = [s for s in spans(row["produced in"]) if is_path(s)]
        if not files:
            errors.append(f"{where}: `produced in` names no file")
        for f in files:
            if not os.path.exists(os.path.join(ROOT, f)):
                errors.append(f"{where}: {f} does not exist")
        files = [f for f in files if os.path.isfile(os.path.join(ROOT, f))]
        # The fixed parts of the files' string literals, and their integers (an errno
        # written as a number joins the text around it).
        parts = [p for f in files for _, lit in source(f)[1] for p in pieces(lit)]
        parts += [n for f in files for n in source(f)[3]]
        for message in spans(row["message"]):
            messages.append(message)
            for part in message_parts(message):
                if not found(part, parts):
                    errors.append(f"{where}: {part!r} (of the message) is not in {', '.join(files)}")
        if check_tests(row["tested by"], where, errors):
            untested.append((where, plain(row["trigger"])))

    # Each item: the start of an untested row's trigger, then its section's link.
    listed = [plain(SECTION_LINK.sub("", line[2:])) for line in section(doc, UNTESTED_HEADING)
              if line.startswith("- ")]
    if untested and not listed:
        errors.append(f"{DOC}: rows are `{UNTESTED}` but there is no \"## {UNTESTED_HEADING}\" list")
    for where, trigger in untested:
        if not any(trigger.startswith(item) for item in listed):
            errors.append(f"{where}: `{UNTESTED}`, but \"{UNTESTED_HEADING}\" lists no start of its trigger {trigger!r}")
    for item in listed:
        if not any(trigger.startswith(item) for _, trigger in untested):
            errors.append(f"{DOC}: \"{UNTESTED_HEADING}\" lists {item!r}, which starts no `{UNTESTED}` row's trigger")

    for rel, line, lit in constructed():
        for part in pieces(lit):
            start = part.strip().strip('"').strip()[:PREFIX_CHARS]
            if len(start) >= MIN_PART and not any(start in m for m in messages):
                errors.append(f"{rel}:{line}: {start!r} (a refusal's message) is in no message of {DOC}")

    for e in errors:
        print(e)
    if errors:
        print(f"check-refusals: {len(errors)} problem(s)")
        return 1
    print(f"check-refusals: {len(table)} refusals, {len(table) - len(untested)} tested, "
          f"{len(untested)} not tested yet; every message is in its code, every test exists")
    return 0


if __name__ == "__main__":
    sys.exit(main())
