#!/usr/bin/python3
"""The library's rooms are layered in pipeline order (docs/architecture.md): a file may include
the internal headers of its own room and of the rooms below it, never of a room above, and
only the public headers its layer may use. Fails naming every include that points upward."""
import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..'))
LIB = os.path.join(ROOT, 'src', 'lib')

# Bottom to top. '' is the library root (pc_internal.h: errors, allocation helpers).
ROOMS = ['', 'numerics', 'load', 'envelope', 'judge', 'compare', 'report']
# The public headers a room may include, by the lowest room that may: the result model and its
# vocabulary everywhere; the comparator's entry points from compare up; reports' from report.
PUBLIC = {'error.h': '', 'dtype.h': '', 'tolerance.h': '', 'result.h': '',
          'compare.h': 'compare', 'plan.h': 'compare', 'baseline.h': 'report', 'approval.h': 'report',
          'report.h': 'report',
          'paritycheck.h': 'report'}
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)


def room_of_file(path):
    rel = os.path.relpath(path, LIB).split(os.sep)
    return rel[0] if len(rel) > 1 else ''


def header_rooms():
    """Each internal header's room."""
    where = {}
    for dirpath, _, files in os.walk(LIB):
        for name in files:
            if name.endswith('.h'):
                where[name] = room_of_file(os.path.join(dirpath, name))
    return where


def upward_includes():
    where = header_rooms()
    bad = []
    for dirpath, _, files in os.walk(LIB):
        for name in sorted(files):
            if not name.endswith(('.c', '.h')):
                continue
            path = os.path.join(dirpath, name)
            level = ROOMS.index(room_of_file(path))
            with open(path, encoding='utf-8') as fh:
                text = fh.read()
            for kind, inc in INCLUDE.findall(text):
                if kind == '"':
                    target = where.get(inc)
                elif inc.startswith('paritycheck/'):
                    target = PUBLIC.get(inc.split('/', 1)[1])
                else:
                    continue  # a system header
                if target is None:
                    bad.append('%s: unknown header %s' % (os.path.relpath(path, ROOT), inc))
                elif ROOMS.index(target) > level:
                    bad.append('%s (%s) includes %s (%s)' %
                               (os.path.relpath(path, ROOT), room_of_file(path) or 'root', inc,
                                target or 'root'))
    return bad


def main():
    bad = upward_includes()
    for line in bad:
        print('upward include:', line)
    print('%d upward includes' % len(bad))
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
