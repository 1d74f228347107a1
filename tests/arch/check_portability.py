#!/usr/bin/python3
"""Calls that are not POSIX stay behind the feature checks of CMakeLists.txt, each with a fallback
(docs/install.md, "Platforms"): every use in src/ of a glibc or Linux call lies inside the
positive branch of an #if that names its PC_HAVE_ macro (or, for the running binary's path, the
system's macro); the fallback is that #if's #else, or nothing where doing nothing is the fallback
(tuning the allocator). Every --wrap link option of the CMake files lies inside
if(PC_HAVE_LD_WRAP). Prints each use outside and "N uses checked, M outside"; exit 1 when any is.
Usage: check_portability.py SOURCE_DIR"""
import os
import re
import sys

# identifier (a regular expression on code) -> the guard macros that may hold it
CALLS = {
    r'\bmallopt\b|\bM_MMAP_THRESHOLD\b': ('PC_HAVE_MALLOPT',),
    r'\bmalloc_trim\b': ('PC_HAVE_MALLOC_TRIM',),
    r'\bmadvise\s*\(|\bMADV_[A-Z]+': ('PC_HAVE_MADVISE',),
    r'\bposix_fallocate\s*\(': ('PC_HAVE_POSIX_FALLOCATE',),
    r'\bprctl\s*\(|\bPR_SET_PDEATHSIG\b|<sys/prctl\.h>': ('PC_HAVE_PRCTL',),
    r'<malloc\.h>': ('PC_HAVE_MALLOPT', 'PC_HAVE_MALLOC_TRIM'),
    r'/proc/self/': ('__linux__',),
    r'_NSGetExecutablePath|<mach-o/dyld\.h>': ('__APPLE__',),
}


def code_of(line, in_comment):
    """The line without its comments; (code, whether a comment is open at its end)."""
    out, i = '', 0
    while i < len(line):
        if in_comment:
            end = line.find('*/', i)
            if end < 0:
                return out, True
            i, in_comment = end + 2, False
        elif line.startswith('/*', i):
            in_comment, i = True, i + 2
        elif line.startswith('//', i):
            break
        else:
            out += line[i]
            i += 1
    return out, in_comment


DIRECTIVE = re.compile(r'\s*#\s*(if|ifdef|ifndef|elif|else|endif)\b(.*)')


def directives(path):
    """(line number, code, directive match or None) of path's lines, comments removed."""
    in_comment = False
    for n, raw in enumerate(open(path, encoding='utf-8', errors='replace'), 1):
        code, in_comment = code_of(raw.rstrip('\n'), in_comment)
        yield n, code, DIRECTIVE.match(code)


def check_c(path, rel, uses, outside):
    stack = []  # per open #if: [condition of this branch, positive branch]
    for n, code, d in directives(path):
        if d:
            kind, cond = d.groups()
            if kind.startswith('if'):
                stack.append([cond, kind != 'ifndef'])
            elif kind == 'elif':
                stack[-1] = [cond, True]
            elif kind == 'else':
                stack[-1][1] = False
            else:
                stack.pop()
            continue
        for pattern, guards in CALLS.items():
            if not re.search(pattern, code):
                continue
            uses.append((rel, n))
            held = any(positive and any(g in cond for g in guards) for cond, positive in stack)
            if not held:
                outside.append('%s:%d: %s outside #if %s'
                               % (rel, n, code.strip(), ' or '.join(guards)))


def check_cmake(path, rel, uses, outside):
    depth_ok = []
    for n, line in enumerate(open(path), 1):
        code = line.split('#', 1)[0]
        m = re.match(r'\s*(if|endif)\s*\((.*)', code)
        if m and m.group(1) == 'if':
            depth_ok.append('PC_HAVE_LD_WRAP' in m.group(2))
        elif m:
            depth_ok.pop()
        if '--wrap' in code and 'check_linker_flag' not in code:
            uses.append((rel, n))
            if not any(depth_ok):
                outside.append('%s:%d: --wrap outside if(PC_HAVE_LD_WRAP)' % (rel, n))


def main(argv):
    root = argv[1]
    uses, outside = [], []
    for base, _, files in os.walk(root):
        rel_base = os.path.relpath(base, root)
        if rel_base.split(os.sep)[0] in ('build', '.git') or rel_base.startswith('build'):
            continue
        for name in sorted(files):
            path = os.path.join(base, name)
            rel = os.path.relpath(path, root)
            if rel.startswith('src' + os.sep) and name.endswith(('.c', '.h')):
                check_c(path, rel, uses, outside)
            elif name == 'CMakeLists.txt':
                check_cmake(path, rel, uses, outside)
    for o in outside:
        print(o)
    print('%d uses checked, %d outside' % (len(uses), len(outside)))
    return 1 if outside or not uses else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
