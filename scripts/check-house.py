#!/usr/bin/env python3
"""House rules of issue 25 for the workspace's Rust crates (stdlib only).

1. No import cycle between the files of a crate. A file depends on another when its
   non-test code names a path into it: `crate::a::b::X`, `super::x`, `self::x`, a child
   module's name (`child::f()`, `pub use child::X`), each resolved to the deepest
   module file that exists, or a `crate::mac!` / `$crate::mac!` macro (the file that
   holds its `macro_rules!`). `mod x;` alone is no edge. Test code is left out: files
   declared through a `#[cfg(test)]` mod (tests.rs, tests/..., #[path] tests), items
   under `#[cfg(test)]`, inline `mod tests { .. }`.
2. No file of the crates in LINE_LIMITS longer than its limit (test files excluded; a
   file's inline `#[cfg(test)] mod tests` counts, as `wc -l` does).

Usage: scripts/check-house.py [--strict] [WORKSPACE_DIR]   |   scripts/check-house.py --self-test
Exit 1 on any violation (or failed self-test).
"""
import bisect, glob, os, re, sys, tempfile

LINE_LIMITS = {"shim": 600}  # crate dir (relative to the workspace) -> max lines per file
# A file naming its own ancestor module (`super::Payload`, `crate::Encoding` of lib.rs) is
# hierarchy, not a cycle: a folder module's parent owns the shared types and delegates to
# its children. Such upward edges are counted but not followed; --strict follows them (then
# every parent that calls into a child that names the parent's items is a cycle).

TOKEN = re.compile(r"\$?[A-Za-z_]\w*|::|\S")
CHAR = re.compile(r"'(?:\\(?:x[0-9a-fA-F]{2}|u\{[0-9a-fA-F_]*\}|.)|[^\\'\n])'")
RAW = re.compile(r'b?r(#*)"')
CFG_TEST = re.compile(r"#\[cfg\(test\)\]")
PATH_ATTR = re.compile(r'#\[path\s*=\s*"')
TEST_MOD = re.compile(r"\bmod\s+(\w+)\s*;")
USE_ITEM = re.compile(r"\s*(pub(\([^)]*\))?\s+)?use\b")


def strip(src):
    """Comments and literals blanked (lines kept); returns (text, {quote offset: literal})."""
    out, lits, i, n = list(src), {}, 0, len(src)
    def blank(a, b):
        out[a:b] = [ch if ch == "\n" else " " for ch in src[a:b]]
    while i < n:
        c, two = src[i], src[i:i + 2]
        word_start = i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")
        raw = RAW.match(src, i) if word_start and c in "br" else None
        if two == "//":
            j = src.find("\n", i); j = n if j < 0 else j
            blank(i, j); i = j
        elif two == "/*":
            j, depth = i + 2, 1
            while j < n and depth:
                if src.startswith("/*", j): depth, j = depth + 1, j + 2
                elif src.startswith("*/", j): depth, j = depth - 1, j + 2
                else: j += 1
            blank(i, j); i = j
        elif raw:
            end = src.find('"' + raw.group(1), raw.end()); end = n if end < 0 else end
            lits[raw.end() - 1] = src[raw.end():end]
            blank(raw.end(), end); i = end + 1 + len(raw.group(1))
        elif c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            lits[i] = src[i + 1:j]
            blank(i + 1, j); i = j + 1
        elif c == "'" and CHAR.match(src, i):
            j = CHAR.match(src, i).end(); blank(i, j); i = j
        else:
            i += 1
    return "".join(out), lits


def item_end(text, i):
    """End offset of the item starting at i (after its attributes): `;` or its `{..}`."""
    depth, n, is_use = 0, len(text), USE_ITEM.match(text, i)
    while i < n:
        c = text[i]
        if c in "([{": depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0 and c == "}" and not is_use: return i + 1
        elif c == ";" and depth == 0: return i + 1
        i += 1
    return n


def drop_tests(text):
    """Blank every `#[cfg(test)]` item and inline `mod tests { .. }`; -> (text, spans)."""
    out, spans = list(text), []
    starts = [m.start() for m in CFG_TEST.finditer(text)]
    starts += [m.start() for m in re.finditer(r"\bmod\s+tests\s*\{", text)]
    for s in sorted(starts):
        i = s if text[s] == "m" else s + len("#[cfg(test)]")
        while True:  # further attributes of the same item
            m = re.compile(r"\s*#\[").match(text, i)
            if not m: break
            i = item_end(text, m.end() - 1)
        e = item_end(text, i)
        out[s:e] = [ch if ch == "\n" else " " for ch in text[s:e]]
        spans.append((s, e))
    return "".join(out), spans


def use_paths(toks, i):
    """Parse a use tree from toks[i]; returns ([(segments, line)], index after `;`)."""
    paths = []
    def tree(i, prefix):
        segs = list(prefix)
        while i < len(toks):
            t, line = toks[i]
            if t == "{":
                i += 1
                while toks[i][0] != "}":
                    i = tree(i, segs)
                    if toks[i][0] == ",": i += 1
                return i + 1
            if t == "*": return i + 1
            if t in (",", "}", ";"):
                if len(segs) > len(prefix): paths.append((segs, line))
                return i
            if t == "as":
                paths.append((segs, line)); return i + 2
            if t != "::": segs.append(t)
            i += 1
        return i
    i = tree(i, [])
    while i < len(toks) and toks[i][0] != ";": i += 1
    return paths, i + 1


def parse(path):
    """-> dict(mods=[(inline prefix, name, #[path] or None)], refs=[(prefix, segs, macro?, line)],
    macros=[names], lines=int, test=bool)."""
    src = open(path, encoding="utf-8").read()
    text, lits = strip(src)
    info = dict(mods=[], refs=[], macros=[], test_mods=[], lines=len(src.splitlines()),
                test=bool(re.search(r"#!\[cfg\(test\)\]", text)))
    kept, spans = drop_tests(text)
    for a, b in spans:  # `#[cfg(test)] mod x;` declares a test file
        m, pa = TEST_MOD.search(text, a, b), PATH_ATTR.search(text, a, b)
        if m: info["test_mods"].append((m.group(1), lits.get(pa.end() - 1) if pa else None))
    text = kept
    starts = [0] + [m.end() for m in re.finditer("\n", text)]
    found = list(TOKEN.finditer(text))
    toks = [(m.group(), bisect.bisect(starts, m.start())) for m in found]
    offs = [m.start() for m in found]
    attrs = [(m.end(), lits.get(m.end() - 1)) for m in PATH_ATTR.finditer(text)]
    stack, pending, boundary, i = [], None, 0, 0
    while i < len(toks):
        t, line = toks[i]
        nxt = toks[i + 1][0] if i + 1 < len(toks) else ""
        prefix = tuple(s for s in stack if s)
        if t in ("{", "}", ";"):
            if t == "{": stack.append(pending); pending = None
            elif t == "}" and stack: stack.pop()
            boundary = offs[i]
        if t == "mod" and i + 2 < len(toks) and toks[i + 2][0] in ";{":
            if toks[i + 2][0] == "{":
                pending = nxt
            else:
                attr = [lit for end, lit in attrs if boundary < end < offs[i]]
                info["mods"].append((prefix, nxt, attr[-1] if attr else None))
            i += 2; continue
        if t == "macro_rules" and nxt == "!" and i + 2 < len(toks):
            info["macros"].append(toks[i + 2][0])
        if t == "use":
            found, i = use_paths(toks, i + 1)
            info["refs"] += [(prefix, segs, False, ln) for segs, ln in found]
            continue
        starts_path = i == 0 or toks[i - 1][0] != "::"
        after_in = i >= 2 and toks[i - 1][0] == "in" and toks[i - 2][0] == "("  # pub(in path)
        if re.match(r"\$?[A-Za-z_]", t) and nxt == "::" and starts_path and not after_in:
            segs, j = [t], i + 1
            while j + 1 < len(toks) and toks[j][0] == "::" and re.match(r"[A-Za-z_]", toks[j + 1][0]):
                segs.append(toks[j + 1][0]); j += 2
            macro = j < len(toks) and toks[j][0] == "!"
            info["refs"].append((prefix, segs, macro, line))
            i = j; continue
        i += 1
    return info


def is_test_file(rel):
    parts = rel.split(os.sep)
    return "tests" in parts[:-1] or parts[-1] == "tests.rs"


def mod_file(f, mdir, prefix, name, attr):
    """The file of `mod name;` declared in f (children of f live in mdir), or None."""
    if attr: cands = [os.path.join(os.path.dirname(f), *prefix, attr)]
    else: cands = [os.path.join(mdir, *prefix, name + ".rs"), os.path.join(mdir, *prefix, name, "mod.rs")]
    return next((c for c in cands if os.path.isfile(c)), None)


def crate_graph(crate_dir):
    """-> files reachable from the crate's roots, edges {(a, b): line}, upward edges, infos."""
    src = os.path.join(crate_dir, "src")
    roots = [os.path.join(src, f) for f in ("lib.rs", "main.rs") if os.path.isfile(os.path.join(src, f))]
    if os.path.isdir(os.path.join(src, "bin")):
        roots += sorted(glob.glob(os.path.join(src, "bin", "*.rs")))
    infos, edges, up = {}, {}, set()
    for root in roots:
        modules, macros, todo = {(): root}, {}, [((), root, os.path.dirname(root))]
        while todo:  # the module tree: module path -> file
            modpath, f, mdir = todo.pop()
            if f not in infos: infos[f] = parse(f)
            info = infos[f]
            if info["test"]: continue
            for name in info["macros"]: macros.setdefault(name, f)
            for name, attr in info["test_mods"]:
                t = mod_file(f, mdir, (), name, attr)
                if t: infos.setdefault(t, dict(test=True))
            for prefix, name, attr in info["mods"]:
                modules.setdefault(modpath + prefix, f)
                child, path = mod_file(f, mdir, prefix, name, attr), modpath + prefix + (name,)
                if child and is_test_file(os.path.relpath(child, src)):
                    infos.setdefault(child, dict(test=True))
                elif child:
                    stem, _ = os.path.splitext(child)
                    modules[path] = child
                    todo.append((path, child, os.path.dirname(child) if child.endswith("mod.rs") else stem))
        modof = {}  # file -> its module path (the shortest, were a file declared twice)
        for p, f in sorted(modules.items(), key=lambda kv: len(kv[0])):
            modof.setdefault(f, p)
        for f, base in modof.items():
            for prefix, segs, macro, line in infos[f]["refs"]:
                target = resolve(base + prefix, segs, macro, modules, macros)
                if target and target != f:
                    edges.setdefault((f, target), line)
                    if modof[target] == base[:len(modof[target])]:
                        up.add((f, target))
    nodes = sorted(f for f in infos if not infos[f]["test"])
    return nodes, edges, up, infos


def resolve(here, segs, macro, modules, macros):
    """The file a path names (deepest module file), or None when it leaves the crate."""
    head, rest = segs[0], list(segs[1:])
    if head in ("crate", "$crate"): base = ()
    elif head == "self": base = here
    elif head == "super":
        base = here[:-1]
        while rest and rest[0] == "super": base, rest = base[:-1], rest[1:]
    elif here + (head,) in modules: base, rest = here, list(segs)
    else: return None
    if macro and rest and rest[-1] in macros:  # crate::name! -> where macro_rules! name is
        return macros[rest[-1]]
    for s in rest:
        if base + (s,) not in modules: break
        base += (s,)
    else: return modules[base]
    if base == () and s in macros:  # use crate::name; of a #[macro_export] macro
        return macros[s]
    return modules.get(base)


def sccs(nodes, edges):
    """Tarjan: strongly connected components with more than one node."""
    succ = {n: sorted(b for (a, b) in edges if a == n) for n in nodes}
    index, low, stack, on, out = {}, {}, [], set(), []
    def visit(v):
        index[v] = low[v] = len(index); stack.append(v); on.add(v)
        for w in succ.get(v, []):
            if w not in index: visit(w); low[v] = min(low[v], low[w])
            elif w in on: low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop(); on.discard(w); comp.append(w)
                if w == v: break
            if len(comp) > 1: out.append(sorted(comp))
    sys.setrecursionlimit(10000)
    for n in nodes:
        if n not in index: visit(n)
    return sorted(out)


def members(ws):
    text = open(os.path.join(ws, "Cargo.toml"), encoding="utf-8").read()
    m = re.search(r"^members\s*=\s*\[(.*?)\]", text, re.S | re.M)
    return [d for d in re.findall(r'"([^"]+)"', m.group(1) if m else "")
            if os.path.isdir(os.path.join(ws, d, "src"))]


def check(ws, strict=False, out=print):
    """Check every member crate; returns {crate: [violation, ...]}."""
    found = {}
    for crate in members(ws):
        src = os.path.join(ws, crate, "src")
        rel = lambda f: os.path.relpath(f, src)
        nodes, edges, up, infos = crate_graph(os.path.join(ws, crate))
        if not strict:
            edges = {e: line for e, line in edges.items() if e not in up}
        cycles = sccs(nodes, edges)
        note = f" (+{len(up)} to an ancestor, not followed)" if up and not strict else ""
        out(f"{crate}: {len(nodes)} files, {len(edges)} edges{note}, {len(cycles)} cycles")
        loose = [rel(f) for f in sorted(glob.glob(os.path.join(src, "**", "*.rs"), recursive=True))
                 if f not in infos and not is_test_file(rel(f))]
        if loose:  # no `mod` names them: not compiled, so not checked either
            out("  not in the module tree, unchecked: " + ", ".join(loose))
        bad = found.setdefault(crate, [])
        for comp in cycles:
            bad.append("cycle: " + " <-> ".join(rel(f) for f in comp))
            out("  " + bad[-1])
            for (a, b), line in sorted(edges.items()):
                if a in comp and b in comp:
                    text = open(a, encoding="utf-8").read().splitlines()[line - 1].strip()
                    out(f"    {rel(a)}:{line} -> {rel(b)}   {text[:90]}")
        limit = LINE_LIMITS.get(crate)
        for f in nodes if limit else []:  # whole file, its inline #[cfg(test)] mod included
            if infos[f]["lines"] > limit:
                bad.append(f"too long: {rel(f)} {infos[f]['lines']} lines (limit {limit})")
                out("  " + bad[-1])
    return found


SELF_TEST = {  # crate -> {file under src/: text}; what check() must find is in EXPECT
    "nested": {"lib.rs": "mod rows;\npub use rows::Row;\n",
               "rows.rs": "mod sink;\nmod deep;\npub struct Row;\n",
               "rows/sink.rs": "use super::deep::spill::Spill;\npub struct Gone;\n",
               "rows/deep/mod.rs": "pub mod spill;\n",
               "rows/deep/spill.rs": "pub struct Spill;\npub fn f() { let _ = crate::rows::sink::Gone; }\n"},
    "sup": {"lib.rs": "mod app;\n",
            "app/mod.rs": "mod a;\nmod b;\npub use a::A;\npub struct App;\n",
            "app/a.rs": "use super::{b::B, App};\npub struct A(B, App);\n",
            "app/b.rs": "pub struct B;\npub fn f() { let _ = super::a::A; }\n"},
    "grouped": {"lib.rs": "mod x;\nmod y;\nmod z;\n#[macro_use]\nmod log;\n",
                "x.rs": "use crate::{y::{self, Y}, z};\npub struct X;\n",
                "y.rs": "use crate::{x::X as Ex};\npub struct Y;\n",
                "z.rs": "pub fn z() { crate::say!(\"hi\"); }\n",
                "log.rs": "#[macro_export]\nmacro_rules! say { ($m:expr) => {}; }\npub fn g() { crate::z::z() }\n"},
    "clean": {"lib.rs": "mod a;\nmod b;\nmod c;\n#[path = \"d/e.rs\"]\nmod d;\n#[cfg(test)]\nmod tests;\n",
              "a.rs": "use crate::b::B;\n// use crate::c::C;\npub fn f() -> &'static str { \"crate::c::x\" }\n"
                      "#[cfg(test)]\nmod tests {\n    use crate::c::C;\n}\n",
              "b.rs": "pub(in crate::c) struct B;\n#[cfg(test)]\nuse crate::a::f;\n"
                      "pub fn g(c: char) -> char { if c == '{' { '}' } else { c } }\n"
                      "#[cfg(test)]\n#[path = \"b_tests.rs\"]\nmod tests;\n",
              "b_tests.rs": "use crate::c::C;\n", "d/e.rs": "pub use crate::c::C;\n",
              "c.rs": "pub struct C;\npub fn h() { crate::a::f(); }\n/* crate::b::B /* nested */ crate::b */\n",
              "tests.rs": "use crate::c::C;\nuse crate::a::f;\n" + "\n" * 700,
              "loose.rs": "use crate::a::f;\n"},  # declared nowhere: listed, not checked
    "shim": {"lib.rs": "mod big;\nmod small;\n", "big.rs": "\n" * (LINE_LIMITS["shim"] + 1),
             "small.rs": "\n" * LINE_LIMITS["shim"]},
}
EXPECT = {"nested": ["cycle: rows/deep/spill.rs <-> rows/sink.rs"],
          "sup": ["cycle: app/a.rs <-> app/b.rs"],
          "grouped": ["cycle: log.rs <-> z.rs", "cycle: x.rs <-> y.rs"],
          "clean": [], "shim": [f"too long: big.rs {LINE_LIMITS['shim'] + 1} lines (limit {LINE_LIMITS['shim']})"]}
EXPECT_LINES = ["clean: 5 files, 3 edges, 0 cycles", "  not in the module tree, unchecked: loose.rs",
                "sup: 4 files, 3 edges (+1 to an ancestor, not followed), 1 cycles"]
EXPECT_STRICT = {"sup": ["cycle: app/a.rs <-> app/b.rs <-> app/mod.rs"]}  # a.rs: super::App


def self_test():
    lines = []
    with tempfile.TemporaryDirectory() as ws:
        with open(os.path.join(ws, "Cargo.toml"), "w") as f:
            f.write("[workspace]\nmembers = [\n" + "".join(f'  "{c}",\n' for c in SELF_TEST) + "]\n")
        for crate, files in SELF_TEST.items():
            for name, body in files.items():
                os.makedirs(os.path.dirname(os.path.join(ws, crate, "src", name)), exist_ok=True)
                with open(os.path.join(ws, crate, "src", name), "w") as f: f.write(body)
        found = check(ws, out=lines.append)
        strict = check(ws, strict=True, out=lambda line: None)
    fails = [f"{c}: got {found[c]}, want {w}" for c, w in EXPECT.items() if sorted(found[c]) != w]
    fails += [f"missing line {l!r}" for l in EXPECT_LINES if l not in lines]
    fails += [f"--strict {c}: got {strict[c]}" for c, w in EXPECT_STRICT.items() if strict[c] != w]
    for line in (lines + ["SELF-TEST FAIL " + f for f in fails]) if fails else []: print(line)
    print("self-test: " + ("FAILED" if fails else "ok"))
    return not fails


def main(argv):
    strict = "--strict" in argv
    args = [a for a in argv[1:] if a != "--strict"]
    if args == ["--self-test"]:
        return 0 if self_test() else 1
    ws = args[0] if args else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    found = check(os.path.normpath(ws), strict)
    bad = [f"{c}: {v}" for c, vs in found.items() for v in vs]
    print(f"check-house: {len(bad)} violation(s)" if bad else "check-house: ok")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
