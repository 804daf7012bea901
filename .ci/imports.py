#!/usr/bin/env python3
"""The library's module import graph, and its circles.

Reads every non-test `.rs` file under `src/` (not `src/bin`, not test files), collects each
path it names through `crate::a::…` (plain, in `use crate::{…}` groups) and `super::…`, and
resolves it to a node: a top-level module (`trace`, `limiter`, …), or, inside the modules
given with `--split`, one of their files (`registrar::builder`). Prints each strongly connected
component of more than one node; exits 1 if there is any.

    python3 .ci/imports.py                      # top-level modules
    python3 .ci/imports.py --split registrar    # registrar's files as nodes of their own
"""
import os
import re
import sys

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
split = set()
args = sys.argv[1:]
while args:
    if args[0] == "--split" and len(args) > 1:
        split.add(args[1])
        args = args[2:]
    else:
        sys.exit(f"usage: {sys.argv[0]} [--split MODULE]...")


def is_test(rel):
    base = os.path.basename(rel)
    parts = rel.split(os.sep)
    return (
        base == "tests.rs"
        or base.endswith("_tests.rs")
        or base.endswith("_test.rs")
        or "tests" in parts
        or "api_tests" in parts
        or parts[0] == "bin"
    )


def module_of(rel):
    """The module path of a file, as a list: src/a/b.rs -> [a, b]; src/a/mod.rs -> [a]."""
    parts = rel[:-3].split(os.sep)
    if parts[-1] == "mod":
        parts = parts[:-1]
    if parts == ["lib"]:
        return []
    return parts


def node(path):
    """The graph node of a module path."""
    if not path:
        return "(root)"
    if path[0] in split and len(path) > 1:
        return f"{path[0]}::{path[1]}"
    return path[0]


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    out = []
    for line in text.splitlines():
        i = line.find("//")
        out.append(line if i < 0 else line[:i])
    return "\n".join(out)


def drop_cfg_test(text):
    """Drops `#[cfg(test)]` items of one line or one braced block."""
    out, i = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]", text):
        if m.start() < i:
            continue
        out.append(text[i : m.start()])
        j = m.end()
        semi, brace = text.find(";", j), text.find("{", j)
        if brace < 0 or (0 <= semi < brace):
            i = semi + 1
            continue
        depth, k = 0, brace
        while k < len(text):
            depth += {"{": 1, "}": -1}.get(text[k], 0)
            k += 1
            if depth == 0:
                break
        i = k
    out.append(text[i:])
    return "".join(out)


def group_heads(body):
    """The first identifier of each top-level item of a `{…}` use group."""
    heads, depth, cur = [], 0, ""
    for ch in body:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        if ch == "," and depth == 0:
            heads.append(cur)
            cur = ""
        else:
            cur += ch
    heads.append(cur)
    return [re.match(r"\s*(\w*)", h).group(1) for h in heads if h.strip()]


edges = {}
for root, _, files in os.walk(SRC):
    for f in files:
        if not f.endswith(".rs"):
            continue
        rel = os.path.relpath(os.path.join(root, f), SRC)
        if is_test(rel):
            continue
        here = module_of(rel)
        src_node = node(here)
        text = drop_cfg_test(strip_comments(open(os.path.join(root, f)).read()))
        targets = []
        for m in re.finditer(r"\bcrate::(\{)?", text):
            if m.group(1):
                k, depth = m.end(), 1
                while k < len(text) and depth:
                    depth += {"{": 1, "}": -1}.get(text[k], 0)
                    k += 1
                for h in group_heads(text[m.end() : k - 1]):
                    targets.append([h])
            else:
                h = re.match(r"(\w+)(?:::(\w+))?", text[m.end() :])
                if h:
                    targets.append([g for g in h.groups() if g])
        # `super` from a file's module: its parent (for mod.rs, the module's parent).
        parent = here[:-1]
        for m in re.finditer(r"\bsuper::(\{)?", text):
            if m.group(1):
                k, depth = m.end(), 1
                while k < len(text) and depth:
                    depth += {"{": 1, "}": -1}.get(text[k], 0)
                    k += 1
                for h in group_heads(text[m.end() : k - 1]):
                    targets.append(parent + [h])
            else:
                h = re.match(r"(\w+)", text[m.end() :])
                if h:
                    targets.append(parent + [h.group(1)])
        for t in targets:
            # A name that is no file of the module (a re-export, a type) is the module itself.
            path = []
            for part in t:
                cand = path + [part]
                base = os.path.join(SRC, *cand)
                if os.path.exists(base + ".rs") or os.path.isdir(base):
                    path = cand
                else:
                    break
            dst = node(path)
            if dst != src_node and dst != "(root)":
                edges.setdefault(src_node, set()).add(dst)
                edges.setdefault(dst, set())

# Tarjan's strongly connected components.
index, low, stack, on, sccs, counter = {}, {}, [], set(), [], [0]


def visit(v):
    index[v] = low[v] = counter[0]
    counter[0] += 1
    stack.append(v)
    on.add(v)
    for w in sorted(edges.get(v, ())):
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
        sccs.append(sorted(comp))


sys.setrecursionlimit(10000)
for v in sorted(edges):
    if v not in index:
        visit(v)

circles = [c for c in sccs if len(c) > 1]
for c in circles:
    inner = {v: sorted(w for w in edges[v] if w in c) for v in c}
    print("circle: " + "; ".join(f"{v} -> {', '.join(ws)}" for v, ws in inner.items()))
print(f"{len(edges)} nodes, {sum(len(e) for e in edges.values())} edges, {len(circles)} circles")
sys.exit(1 if circles else 0)
