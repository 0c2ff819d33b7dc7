#!/usr/bin/env python3
"""How the house stands: import circles between the files of each crate,
and the production functions and files past a length.

Usage: python3 scripts/structure.py [--fn-lines N (100)] [--file-lines N (700)] [--check]

A file's imports are the modules it names through `crate::` (in `use`
lines and in paths) and `super::`, except its own submodules and the
modules that contain it (a module and its submodules are one room); two
files are in a circle when each reaches the other through such imports. A file's production part ends at
its first column-0 `#[cfg(test)]`; files under `tests/` directories and
`tests.rs` files are test code and are left out of the lengths (their
imports still count). A function's length runs from its `fn` line to the
closing brace at the same indentation.

Prints the circles, the functions over --fn-lines and the files over
--file-lines. With --check it exits 1 when there is any circle or any
function over --fn-lines (files over --file-lines are reported only).
"""

import argparse
import os
import re
import sys

ROOTS = ("crates", "apps", "examples")
# Crates that are test code: the conformance suite and what the tests
# share (only ever dev-dependencies).
TEST_CRATES = ("storetest", "testsupport")
CFG_TEST_MOD = re.compile(r"^#\[cfg\(test\)\]\s*\n\s*(?:pub(?:\([a-z]+\))?\s+)?mod\s+([a-z_][a-z0-9_]*)\s*;", re.M)


def crate_dirs(repo):
    for root in ROOTS:
        base = os.path.join(repo, root)
        if not os.path.isdir(base):
            continue
        for name in sorted(os.listdir(base)):
            src = os.path.join(base, name, "src")
            if os.path.isdir(src):
                yield os.path.join(base, name), src


def module_of(src, path):
    """The module path of a source file, as a tuple (() is the crate root)."""
    rel = os.path.relpath(path, src)[: -len(".rs")].split(os.sep)
    if rel[-1] == "mod":
        rel = rel[:-1]
    if rel in (["lib"], ["main"]):
        return ()
    if rel[0] == "bin":
        return ("bin",) + tuple(rel[1:])
    return tuple(rel)


CRATE_PATH = re.compile(r"\bcrate::((?:[a-z_][a-z0-9_]*::)*[A-Za-z_][A-Za-z0-9_]*|\{)")
USE_GROUP = re.compile(r"\buse\s+(crate|super(?:::super)*)::\{([^;]*)\};", re.S)
SUPER_PATH = re.compile(r"\b((?:super::)+)((?:[a-z_][a-z0-9_]*::)*[A-Za-z_][A-Za-z0-9_]*)")


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return "\n".join(re.sub(r"//.*$", "", line) for line in text.split("\n"))


def target(modules, base, parts):
    """The longest module that `base + parts` names (None: none, or base)."""
    path = base + tuple(parts)
    while path and path not in modules:
        path = path[:-1]
    return path if path in modules else None


def imports(modules, module, text):
    text = strip_comments(text)
    found = set()
    for m in USE_GROUP.finditer(text):
        head, body = m.group(1), m.group(2)
        base = () if head == "crate" else module[: len(module) - head.count("super")]
        for item in re.split(r"[,{}\s]+", body):
            item = item.strip()
            if item and item not in ("self", "*"):
                t = target(modules, base, item.split("::"))
                if t is not None:
                    found.add(t)
    for m in CRATE_PATH.finditer(text):
        if m.group(1) != "{":
            t = target(modules, (), m.group(1).split("::"))
            if t is not None:
                found.add(t)
    for m in SUPER_PATH.finditer(text):
        ups = m.group(1).count("super::")
        t = target(modules, module[: len(module) - ups], m.group(2).split("::"))
        if t is not None:
            found.add(t)
    # A module and its own submodules use each other as one room (the
    # parent declares them, they read its items through `super::`): only
    # imports between modules neither of which contains the other count.
    return {
        t for t in found
        if t[: len(module)] != module and module[: len(t)] != t
    }


def circles(graph):
    """Strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
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
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in list(graph):
        if v not in index:
            visit(v)
    return out


def is_test_file(src, path, test_modules):
    rel = os.path.relpath(path, src).split(os.sep)
    if "tests" in rel[:-1] or rel[-1] == "tests.rs":
        return True
    module = module_of(src, path)
    return any(module[: len(t)] == t for t in test_modules)


def production_lines(text):
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if line.startswith("#[cfg(test)]"):
            return lines[:i]
    return lines


FN = re.compile(r"^(\s*)(?:pub(?:\([a-z:]+\))?\s+)?(?:const\s+)?(?:async\s+)?(?:unsafe\s+)?fn\s+([A-Za-z_][A-Za-z0-9_]*)")


def long_functions(lines):
    for i, line in enumerate(lines):
        m = FN.match(line)
        if not m:
            continue
        indent = m.group(1)
        # A declaration without a body (a trait method) ends with `;`.
        j = i
        while j < len(lines) and "{" not in lines[j] and not lines[j].rstrip().endswith(";"):
            j += 1
        if j >= len(lines) or lines[j].rstrip().endswith(";"):
            continue
        if lines[j].rstrip().endswith("}") and lines[j].count("{") == lines[j].count("}"):
            continue
        end = next(
            (k for k in range(j + 1, len(lines)) if lines[k].rstrip() == indent + "}"),
            None,
        )
        if end is not None:
            yield m.group(2), i + 1, end - i + 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fn-lines", type=int, default=100)
    ap.add_argument("--file-lines", type=int, default=700)
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    all_circles, long_fns, long_files = [], [], []
    for crate, src in crate_dirs(repo):
        files = {}
        for dirpath, _, names in os.walk(src):
            for name in names:
                if name.endswith(".rs"):
                    path = os.path.join(dirpath, name)
                    files[module_of(src, path)] = path
        texts = {}
        for module, path in files.items():
            with open(path, encoding="utf-8") as f:
                texts[module] = f.read()
        # Modules declared `#[cfg(test)] mod x;` live in files of their own.
        test_modules = [
            module + (m.group(1),)
            for module, text in texts.items()
            for m in CFG_TEST_MOD.finditer(text)
        ]
        test_crate = os.path.basename(crate) in TEST_CRATES
        graph = {}
        for module, path in files.items():
            text = texts[module]
            graph[module] = imports(files, module, text)
            if test_crate or is_test_file(src, path, test_modules):
                continue
            prod = production_lines(text)
            rel = os.path.relpath(path, repo)
            if len(prod) > args.file_lines:
                long_files.append((len(prod), rel))
            for name, line, n in long_functions(prod):
                if n > args.fn_lines:
                    long_fns.append((n, f"{rel}:{line}", name))
        for comp in circles(graph):
            all_circles.append(" <-> ".join(os.path.relpath(files[m], repo) for m in comp))
    print(f"import circles between files: {len(all_circles)}")
    for c in sorted(all_circles):
        print(f"  {c}")
    print(f"production functions over {args.fn_lines} lines: {len(long_fns)}")
    for n, where, name in sorted(long_fns, reverse=True):
        print(f"  {n:5}  {where}  {name}")
    print(f"production files over {args.file_lines} lines: {len(long_files)}")
    for n, rel in sorted(long_files, reverse=True):
        print(f"  {n:5}  {rel}")
    if args.check and (all_circles or long_fns):
        sys.exit(1)


if __name__ == "__main__":
    main()
