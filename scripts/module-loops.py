#!/usr/bin/env python3
"""Fails when the modules of a crate import each other in a loop of more than two files.

Each crate under crates/ (and fuzz/) is read: a file's module path comes from where it lies
(`src/a.rs` and `src/a/mod.rs` are `a`, `src/a/b.rs` is `a::b`), and its imports from the
paths it names in code: `use crate::...` (groups expanded), `crate::a::b` written inline, and
`super::...`. A path goes to the deepest module file it names. Comments and a file's
`#[cfg(test)]` module at its end are not read (a test module's `super::` is its own file).
Loops are the strongly connected components of the import graph; one of more than two files
is reported with the imports that close it, and the exit status is 1.

    python3 scripts/module-loops.py            # the repository's crates
    python3 scripts/module-loops.py DIR        # the crates of another checkout
    python3 scripts/module-loops.py --self-test
"""

import os
import re
import sys
import tempfile

USE = re.compile(r"\buse\s+((?:crate|super|self)\b[^;]*);", re.S)
INLINE = re.compile(r"\b((?:crate|super)(?:::\w+)+)")
TEST_MOD = re.compile(r"^#\[cfg\((?:all\()?test\b.*\n(?:#\[.*\]\n)*\s*mod \w+ \{", re.M)


def module_of(src, path):
    rel = os.path.relpath(path, src)[:-3].split(os.sep)
    if rel[-1] == "mod" or (len(rel) == 1 and rel[0] in ("lib", "main")):
        rel = rel[:-1]
    return tuple(rel)


def expand(tree):
    """`crate::a::{b, c::{d, e}}` -> the paths it names."""
    tree = re.sub(r"\s+", "", tree)
    out = []

    def walk(prefix, s):
        i = s.find("{")
        if i < 0:
            for part in s.split(","):
                if part:
                    out.append(prefix + part.split(" as ")[0])
            return
        head, body = s[:i], s[i + 1 : s.rfind("}")]
        depth, start, items = 0, 0, []
        for j, ch in enumerate(body):
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            elif ch == "," and depth == 0:
                items.append(body[start:j])
                start = j + 1
        items.append(body[start:])
        for item in items:
            walk(prefix + head, item)

    walk("", tree)
    return out


def strip(text):
    text = re.sub(r"//[^\n]*", "", text)
    m = TEST_MOD.search(text)
    return text[: m.start()] if m else text


def resolve(path, here, modules):
    parts = path.split("::")
    base = list(here)
    if parts[0] == "crate":
        base, parts = [], parts[1:]
    elif parts[0] == "self":
        parts = parts[1:]
    while parts and parts[0] == "super":
        base, parts = base[:-1], parts[1:]
    full = base + parts
    for n in range(len(full), -1, -1):
        if tuple(full[:n]) in modules:
            return tuple(full[:n])
    return None


def crate_loops(src):
    files = {}
    for root, _, names in os.walk(src):
        for n in names:
            if n.endswith(".rs"):
                p = os.path.join(root, n)
                files[module_of(src, p)] = p
    edges = {m: {} for m in files}
    for m, p in files.items():
        with open(p, encoding="utf-8") as f:
            text = strip(f.read())
        paths = []
        for u in USE.findall(text):
            paths += expand(u)
        paths += INLINE.findall(USE.sub("", text))
        for path in paths:
            to = resolve(path, m, files)
            if to is not None and to != m and to != ():
                edges[m].setdefault(to, path)
    return files, edges, sccs(edges)


def sccs(edges):
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(comp)

    sys.setrecursionlimit(10000)
    for v in edges:
        if v not in index:
            visit(v)
    return out


def check(roots):
    bad = 0
    for src in roots:
        files, edges, comps = crate_loops(src)
        for comp in comps:
            if len(comp) <= 2:
                continue
            bad += 1
            print(f"{os.path.relpath(src)}: a loop of {len(comp)} files:")
            for m in sorted(comp):
                for to, via in sorted(edges[m].items()):
                    if to in comp:
                        a, b = os.path.relpath(files[m], src), os.path.relpath(files[to], src)
                        print(f"  {a} -> {b} ({via})")
    return bad


def self_test():
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "src")
        os.makedirs(os.path.join(src, "b"))
        w = lambda name, text: open(os.path.join(src, name), "w").write(text)
        w("lib.rs", "pub mod a;\npub mod b;\npub mod c;\n")
        w("a.rs", "use crate::b::{x, y::Z};\n")
        w("b/mod.rs", "pub mod y;\n")
        w("b/y.rs", "// use crate::a;\nfn f() { crate::c::g(); }\n")
        w("c.rs", "use super::a::A;\n#[cfg(test)]\nmod tests {\n    use super::*;\n}\n")
        _, edges, comps = crate_loops(src)
        assert edges[("a",)] == {("b",): "crate::b::x", ("b", "y"): "crate::b::y::Z"}, edges
        assert edges[("b", "y")] == {("c",): "crate::c::g"}, edges
        big = [c for c in comps if len(c) > 2]
        assert big and set(big[0]) == {("a",), ("b", "y"), ("c",)}, comps
        assert check([src]) == 1
        w("c.rs", "fn g() {}\n")
        assert check([src]) == 0
    print("module-loops: self-test passed")


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    top = sys.argv[1] if len(sys.argv) > 1 else here
    roots = [os.path.join(top, "crates", c, "src") for c in sorted(os.listdir(os.path.join(top, "crates")))]
    roots.append(os.path.join(top, "fuzz", "fuzz_targets"))
    roots = [r for r in roots if os.path.isdir(r)]
    bad = check(roots)
    if bad:
        sys.exit(f"module-loops: {bad} loop(s) of more than two files")
    print(f"module-loops: no loop of more than two files in {len(roots)} crates")


if __name__ == "__main__":
    main()
