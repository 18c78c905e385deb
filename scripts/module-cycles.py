#!/usr/bin/env python3
"""Finds import circles among the files of a Rust crate.

Usage: scripts/module-cycles.py CRATE_SRC_DIR [-v]
       scripts/module-cycles.py --workspace

With --workspace, checks every crates/*/src: a circle fails unless it is
listed in scripts/module-cycles.known (circles older than this check, each
with why it stays), and a listed circle that no longer exists fails too, so
the list only shrinks. crates/server is never listed: it must have none.

Each file under CRATE_SRC_DIR is a module (`a/b.rs` and `a/b/mod.rs` are
`a::b`; `lib.rs`/`main.rs` is the crate root). An edge runs from a module to
every module it names through a `crate::` or `super::` path (in `use` lines or
inline), after comments, string literals and the `#[cfg(test)] mod tests`
block are cut. A path names the longest module prefix that exists, so
`crate::transport::ws::WsWire` names `transport::ws`. A parent declaring its
children (`mod x;`) is not an edge.

Prints every strongly connected component with more than one module and
exits 1 if there is any; with -v prints the whole graph. Run by
scripts/test.sh over crates/server/src and every other crate.
"""
import os
import re
import sys


def modules(src):
    mods = {}
    for root, _, files in os.walk(src):
        for f in files:
            if not f.endswith(".rs"):
                continue
            path = os.path.join(root, f)
            rel = os.path.relpath(path, src)[:-3].split(os.sep)
            if rel[-1] == "mod":
                rel = rel[:-1]
            if rel in (["lib"], ["main"]):
                rel = []
            mods["::".join(rel)] = path
    return mods


def strip(text):
    # cut the unit-test module: everything from `#[cfg(test)]\nmod tests` on
    m = re.search(r"#\[cfg\(test\)\]\s*mod\s+tests\b", text)
    if m:
        text = text[: m.start()]
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r'r#*"(?:.|\n)*?"#*', '""', text)
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', text)
    text = re.sub(r"'(?:\\.|[^'\\])'", "''", text)
    return text


def expand_use(text):
    """Yields every path a `use` tree names, braces expanded."""
    for m in re.finditer(r"\buse\s+([^;]+);", text):
        yield from expand(m.group(1).replace("\n", " ").replace(" ", ""))
    # inline paths outside `use`
    for m in re.finditer(r"\b((?:crate|super)(?:::\w+)+)", text):
        yield m.group(1)


def expand(tree):
    i = tree.find("{")
    if i < 0:
        yield tree
        return
    prefix, body = tree[:i], tree[i + 1 : tree.rfind("}")]
    depth, start = 0, 0
    for j, c in enumerate(body + ","):
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        elif c == "," and depth == 0:
            part = body[start:j]
            start = j + 1
            if part:
                for p in expand(part):
                    yield prefix + p if p != "self" else prefix.rstrip(":")


def resolve(path, here, mods):
    parts = path.split("::")
    if parts[0] == "crate":
        base = []
        parts = parts[1:]
    elif parts[0] == "super":
        base = here.split("::") if here else []
        while parts and parts[0] == "super":
            base = base[:-1]
            parts = parts[1:]
    else:
        return None
    full = base + parts
    for n in range(len(full), -1, -1):
        name = "::".join(full[:n])
        if name in mods:
            return name
    return None


def graph(src):
    mods = modules(src)
    edges = {m: set() for m in mods}
    for m, path in mods.items():
        with open(path, encoding="utf-8") as f:
            text = strip(f.read())
        for p in expand_use(text):
            t = resolve(p, m, mods)
            if t is None or t == m:
                continue
            # a module reaching its own parent for a re-export is still an edge;
            # the crate root is everyone's parent and only declares modules
            if t == "":
                continue
            edges[m].add(t)
    return edges


def sccs(edges):
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]
    sys.setrecursionlimit(10000)

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
            out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def workspace():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    known = set()
    with open(os.path.join(root, "scripts", "module-cycles.known"), encoding="utf-8") as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                crate, mods = line.split(":", 1)
                known.add((crate.strip(), " ".join(sorted(mods.split()))))
    found = set()
    crates = sorted(os.listdir(os.path.join(root, "crates")))
    for c in crates:
        src = os.path.join(root, "crates", c, "src")
        if not os.path.isdir(src):
            continue
        for comp in sccs(graph(src)):
            if len(comp) > 1:
                found.add((c, " ".join(comp)))
    bad = 0
    for c, mods in sorted(found - known):
        print(f"crates/{c}/src: new import circle: {mods}")
        bad = 1
    for c, mods in sorted(known - found):
        print(f"crates/{c}/src: listed circle is gone, drop it from scripts/module-cycles.known: {mods}")
        bad = 1
    if not bad:
        print(f"{len(crates)} crates: no import circle beyond the {len(known)} listed")
    return bad


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    if sys.argv[1] == "--workspace":
        return workspace()
    src = sys.argv[1]
    edges = graph(src)
    if "-v" in sys.argv:
        for m in sorted(edges):
            print(f"{m or '(root)'} -> {', '.join(sorted(edges[m])) or '-'}")
    bad = [c for c in sccs(edges) if len(c) > 1]
    for c in bad:
        print(f"{src}: import circle among {len(c)} modules: {' '.join(c)}")
    if not bad:
        print(f"{src}: {len(edges)} modules, no import circle")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
