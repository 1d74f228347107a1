#!/usr/bin/python3
"""The rooms of src/lib call one way (docs/architecture.md, "The rooms"). From the static
library's symbol tables (nm), each object file's calls into another give a file graph; this
fails on
  - a call from a lower room into a higher one (the order of check_layers.ROOMS), so the rooms
    form no circle;
  - a circle between files of one room (a strongly connected set of two or more files);
  - a C or Python source file (src/, include/, python/, tests/, bench/, scripts/) over
    MAX_LINES lines.
Also, no circle between the CLI's files (their object files, in CLI_OBJECT_DIR when given) nor
between the Python package's modules (python/paritycheck, by their relative imports).
Usage: check_rooms.py LIBPARITYCHECK.a [CLI_OBJECT_DIR]. Static functions and inline
definitions in headers are not symbols; check_layers.py keeps their includes in order."""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_layers import LIB, ROOMS, ROOT, room_of_file  # noqa: E402

MAX_LINES = 800
SOURCE_TREES = ('src', 'include', 'python', 'tests', 'bench', 'scripts')


def sources_by_object():
    """Object member name ('judge.c.o') -> the source file's path; names are unique in src/lib."""
    out = {}
    for dirpath, _, files in os.walk(LIB):
        for name in files:
            if name.endswith('.c'):
                out[name + '.o'] = os.path.join(dirpath, name)
    return out


def symbol_tables(archive, where=None):
    """(defined, used): symbol -> defining source; source -> the symbols it uses. `archive`: a
    static library or a list of object files; `where`: object name -> source (src/lib's)."""
    files = [archive] if isinstance(archive, str) else archive
    text = subprocess.run(['nm', '-A'] + files, check=True, capture_output=True,
                          text=True).stdout
    where = where if where is not None else sources_by_object()
    defined, used = {}, {}
    for line in text.splitlines():
        head, _, rest = line.rpartition(':')
        member = os.path.basename(head.rsplit(':', 1)[-1])
        fields = rest.split()
        if member not in where or len(fields) < 2:
            continue
        src, kind, sym = where[member], fields[-2], fields[-1]
        if kind == 'U':
            used.setdefault(src, set()).add(sym)
        elif kind in 'TDBR':
            defined[sym] = src
    return defined, used


def file_graph(archive, where=None):
    defined, used = symbol_tables(archive, where)
    graph = {}
    for src, syms in used.items():
        graph[src] = {defined[s] for s in syms if s in defined and defined[s] != src}
    return graph


def upward_calls(graph):
    bad = []
    for src, targets in sorted(graph.items()):
        for dst in sorted(targets):
            if ROOMS.index(room_of_file(dst)) > ROOMS.index(room_of_file(src)):
                bad.append('%s (%s) calls into %s (%s)' % (
                    os.path.relpath(src, ROOT), room_of_file(src) or 'root',
                    os.path.relpath(dst, ROOT), room_of_file(dst) or 'root'))
    return bad


def strong_components(graph):
    """Tarjan's algorithm, iteratively: the strongly connected sets of the graph."""
    index, low, stack, on, out = {}, {}, [], set(), []
    nodes = sorted(set(graph) | {d for t in graph.values() for d in t})
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is None:
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
            elif nxt not in index:
                index[nxt] = low[nxt] = len(index)
                stack.append(nxt)
                on.add(nxt)
                work.append((nxt, iter(sorted(graph.get(nxt, ())))))
            elif nxt in on:
                low[node] = min(low[node], index[nxt])
    return out


def room_circles(graph):
    bad = []
    for room in ROOMS:
        sub = {s: {d for d in t if room_of_file(d) == room}
               for s, t in graph.items() if room_of_file(s) == room}
        for comp in strong_components(sub):
            if len(comp) > 1:
                bad.append('%s: %s' % (room or 'root',
                                       ' <-> '.join(os.path.relpath(c, ROOT) for c in comp)))
    return bad


def cli_circles(object_dir):
    """Circles between the CLI's files, from the object files CMake left in object_dir."""
    cli = os.path.join(ROOT, 'src', 'cli')
    objects = sorted(os.path.join(object_dir, n) for n in os.listdir(object_dir)
                     if n.endswith('.c.o'))
    where = {os.path.basename(o): os.path.join(cli, os.path.basename(o)[:-2]) for o in objects}
    graph = file_graph(objects, where)
    return ['cli: ' + ' <-> '.join(os.path.relpath(c, ROOT) for c in comp)
            for comp in strong_components(graph) if len(comp) > 1]


IMPORT = re.compile(r'^\s*from\s+\.(\w+)\s+import\b|^\s*from\s+\.\s+import\s+([\w, ]+)', re.M)


def python_circles():
    """Circles between the Python package's modules, by their relative imports."""
    pkg = os.path.join(ROOT, 'python', 'paritycheck')
    mods = {n[:-3] for n in os.listdir(pkg) if n.endswith('.py')}
    graph = {}
    for m in sorted(mods):
        with open(os.path.join(pkg, m + '.py'), encoding='utf-8') as fh:
            text = fh.read()
        deps = set()
        for one, many in IMPORT.findall(text):
            names = [one] if one else [n.split(' as ')[0].strip() for n in many.split(',')]
            deps |= {n for n in names if n in mods and n != m}
        graph[m] = deps
    return ['python: ' + ' <-> '.join(comp) for comp in strong_components(graph) if len(comp) > 1]


def long_files():
    bad = []
    for tree in SOURCE_TREES:
        for dirpath, _, files in os.walk(os.path.join(ROOT, tree)):
            for name in sorted(files):
                if name.endswith(('.c', '.h', '.py')):
                    path = os.path.join(dirpath, name)
                    with open(path, encoding='utf-8') as fh:
                        n = sum(1 for _ in fh)
                    if n > MAX_LINES:
                        bad.append('%s: %d lines' % (os.path.relpath(path, ROOT), n))
    return bad


def main(argv):
    graph = file_graph(argv[1])
    circles = room_circles(graph) + python_circles()
    if len(argv) > 2:
        circles += cli_circles(argv[2])
    checks = [('upward call', upward_calls(graph)), ('circle', circles),
              ('over %d lines' % MAX_LINES, long_files())]
    for what, bad in checks:
        for line in bad:
            print('%s: %s' % (what, line))
    total = sum(len(bad) for _, bad in checks)
    print('%d problems' % total)
    return 1 if total else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
