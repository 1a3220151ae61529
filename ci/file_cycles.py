#!/usr/bin/python3
"""Fails when files depend on each other in a circle.

Two graphs, each checked for strongly connected components of more than one
file: includes (file A -> file B when A has `#include "B"`, B a file of the
tree) over src/, reference/ and verify/; calls (A.c -> B.c when A's object
file has an undefined symbol that B's object file defines, read with nm) over
the object files of the libraries and the parity binary in a build folder.
Each circle is printed with its files and, per edge, one include line or one
symbol. Not a layering check between modules (the link order of the static
libraries is that); what it catches is two files of one module, or of the
binary, that need each other.

Usage: ci/file_cycles.py SOURCE_DIR BUILD_DIR   (exit 0 none, 1 circles, 2 usage)
       ci/file_cycles.py --self-test            (makes a circle of each kind, and none)
Test: ctest -R test_file_cycles (tests/CMakeLists.txt).
"""
import contextlib
import io
import os
import re
import subprocess
import sys
import tempfile

SOURCE_ROOTS = ("src", "reference", "verify")
SOURCE_EXT = (".c", ".h", ".inc")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def sccs(graph):
    """Tarjan's strongly connected components of {node: {succ: label}}."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        work = [(v, iter(sorted(graph.get(v, {}))))]
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        while work:
            node, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, {})))))
                    advanced = True
                    break
                if w in on:
                    low[node] = min(low[node], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return [c for c in out if len(c) > 1]


def include_graph(root):
    files = {}
    for top in SOURCE_ROOTS:
        for d, _, names in os.walk(os.path.join(root, top)):
            for n in names:
                if n.endswith(SOURCE_EXT):
                    files.setdefault(n, []).append(os.path.relpath(os.path.join(d, n), root))
    graph = {}
    for paths in files.values():
        for path in paths:
            with open(os.path.join(root, path), errors="replace") as f:
                text = f.read()
            edges = graph.setdefault(path, {})
            for name in INCLUDE.findall(text):
                for target in files.get(os.path.basename(name), []):
                    if target != path:
                        edges.setdefault(target, '#include "%s"' % name)
    return graph


def object_files(build):
    """{source path relative to the source tree: object path} of the libraries and parity."""
    objs = {}
    top = os.path.join(build, "CMakeFiles")
    for target in sorted(os.listdir(top)) if os.path.isdir(top) else []:
        if not target.endswith(".dir") or not (target.startswith("par_") or target == "parity.dir"):
            continue
        base = os.path.join(top, target)
        for d, _, names in os.walk(base):
            for n in names:
                if n.endswith(".c.o"):
                    path = os.path.join(d, n)
                    objs[os.path.relpath(path, base)[: -len(".o")]] = path
    return objs


def symbols(obj):
    """(defined globals, undefined) of an object file, by nm."""
    out = subprocess.run(["nm", "-P", obj], check=True, capture_output=True, text=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        name, kind = parts[0], parts[1]
        if kind == "U":
            undefined.add(name)
        elif kind in "TDBRCGSVWI":
            defined.add(name)
    return defined, undefined


def call_graph(objs):
    syms = {src: symbols(obj) for src, obj in objs.items()}
    owner = {}
    for src, (defined, _) in syms.items():
        for s in defined:
            owner.setdefault(s, []).append(src)
    graph = {}
    for src, (_, undefined) in syms.items():
        edges = graph.setdefault(src, {})
        for s in sorted(undefined):
            for other in owner.get(s, []):
                if other != src:
                    edges.setdefault(other, s)
    return graph


def report(kind, graph):
    circles = sccs(graph)
    for comp in circles:
        members = set(comp)
        print("%s circle of %d files: %s" % (kind, len(comp), ", ".join(comp)))
        for a in comp:
            for b, label in sorted(graph.get(a, {}).items()):
                if b in members:
                    print("  %s -> %s (%s)" % (a, b, label))
    return len(circles)


def check(source, build):
    n = report("include", include_graph(source))
    objs = object_files(build)
    if not objs:
        print("file_cycles: no object files under %s/CMakeFiles (build it first)" % build)
        return 2
    n += report("call", call_graph(objs))
    print("file_cycles: %d circle%s (%d object files, sources under %s)"
          % (n, "" if n == 1 else "s", len(objs), ", ".join(SOURCE_ROOTS)))
    return 1 if n else 0


def self_test():
    """A tree with one circle of each kind must fail, naming them; one without, pass."""
    ok = True
    with tempfile.TemporaryDirectory() as t:
        src = os.path.join(t, "src", "m")
        os.makedirs(src)
        obj = os.path.join(t, "build", "CMakeFiles", "par_m.dir", "src", "m")
        os.makedirs(obj)
        files = {
            "a.h": '#ifndef A_H\n#define A_H\n#include "b.h"\nint a(int);\n#endif\n',
            "b.h": '#ifndef B_H\n#define B_H\n#include "a.h"\nint b(int);\n#endif\n',
            "c.c": '#include "a.h"\nint d(int);\nint c(int x) { return x ? d(x - 1) : 0; }\n',
            "d.c": "int c(int);\nint d(int x) { return x ? c(x - 1) : 1; }\n",
            "e.c": "int c(int);\nint e(int x) { return c(x); }\n",
        }
        for name, text in files.items():
            with open(os.path.join(src, name), "w") as f:
                f.write(text)
        for name in ("c.c", "d.c", "e.c"):
            subprocess.run(["cc", "-c", os.path.join(src, name), "-o",
                            os.path.join(obj, name + ".o")], check=True)
        inc = sccs(include_graph(t))
        calls = sccs(call_graph(object_files(os.path.join(t, "build"))))
        ok &= inc == [["src/m/a.h", "src/m/b.h"]]
        ok &= calls == [["src/m/c.c", "src/m/d.c"]]
        text = io.StringIO()
        with contextlib.redirect_stdout(text):
            ok &= check(t, os.path.join(t, "build")) == 1
        for line in ("include circle of 2 files: src/m/a.h, src/m/b.h",
                     '  src/m/a.h -> src/m/b.h (#include "b.h")',
                     "call circle of 2 files: src/m/c.c, src/m/d.c",
                     "  src/m/c.c -> src/m/d.c (d)", "  src/m/d.c -> src/m/c.c (c)",
                     "file_cycles: 2 circles (3 object files, sources under src, reference, "
                     "verify)"):
            ok &= line in text.getvalue().splitlines()
        # Without the circles: b.h includes nothing, d.c calls no one.
        with open(os.path.join(src, "b.h"), "w") as f:
            f.write("int b(int);\n")
        with open(os.path.join(src, "d.c"), "w") as f:
            f.write("int d(int x) { return x; }\n")
        subprocess.run(["cc", "-c", os.path.join(src, "d.c"), "-o",
                        os.path.join(obj, "d.c.o")], check=True)
        ok &= sccs(include_graph(t)) == []
        ok &= sccs(call_graph(object_files(os.path.join(t, "build")))) == []
        ok &= check(t, os.path.join(t, "build")) == 0
    print("file_cycles self-test: %s" % ("ok" if ok else "FAIL"))
    return 0 if ok else 1


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    if len(argv) != 3:
        sys.stderr.write(__doc__)
        return 2
    return check(argv[1], argv[2])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
