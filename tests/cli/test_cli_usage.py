#!/usr/bin/python3
"""End-to-end tests of the paritycheck binary (test_cli.py's part): what the user gets wrong.
Files that cannot be read, usage errors and bad tolerance files (file:line:col), an option of one
value given twice, a mistyped --profile, and --help, -V and the defaults --help states.

    /usr/bin/python3 tests/cli/test_cli_usage.py PATH/TO/paritycheck FIXTURES_DIR

Prints one line per failure and a last line "N passed, M failed"; the exit status is 1 when
anything failed.
"""

import os
import re
import subprocess
import sys

import cli_pairs as fixture  # first: it puts tests/ on the path
from checks import check  # noqa: E402
from cli_pairs import (BAD_KEY, BAD_SYNTAX, HERE, LOOSE, STRICT, env, fx,  # noqa: E402
                       pair_paths, run, short)


# ------------------------------------------------------------------------------------------
# Unreadable files and usage errors
# ------------------------------------------------------------------------------------------


def _names_file(p, path, label):
    check('%s: exit 2' % label, p.returncode == 2, short(p))
    check('%s: stderr names the file' % label, path in p.stderr, repr(p.stderr))
    check('%s: error line starts with "paritycheck: "' % label,
          any(line.startswith('paritycheck: ') and path in line
              for line in p.stderr.splitlines()), repr(p.stderr))
    check('%s: no HDF5-DIAG without --debug' % label, 'HDF5-DIAG' not in p.stderr,
          repr(p.stderr[:400]))


def test_bad_files():
    good = pair_paths('pass')[1]
    files = fixture.EXPECTED['files']
    for kind in ('corrupt', 'not_hdf5', 'empty'):
        path = fx(files[kind])
        _names_file(run(['-t', STRICT, path, good]), path, '%s as A' % kind)
        _names_file(run(['-t', STRICT, good, path]), path, '%s as B' % kind)
    missing = os.path.join(fixture.FIX, 'no_such_file.h5')
    _names_file(run([missing, good]), missing, 'nonexistent A')
    _names_file(run([good, missing]), missing, 'nonexistent B')
    p = run(['--debug', fx(files['corrupt']), good])
    check('corrupt with --debug: exit 2', p.returncode == 2, short(p))
    check('corrupt with --debug: HDF5 error stack shown', 'HDF5-DIAG' in p.stderr,
          repr(p.stderr[:400]))


def test_usage_errors():
    a, b = pair_paths('pass')
    for label, args in (('no arguments', []), ('one argument', [a]),
                        ('three arguments', [a, b, b]), ('unknown option', ['--bogus', a, b]),
                        ('unknown short option', ['-Z', a, b]),
                        ('-t without value', ['-t']),
                        ('--block-elems 0', ['--block-elems', '0', a, b]),
                        ('--block-elems x', ['--block-elems', 'x', a, b])):
        p = run(args)
        check('usage: %s: exit 2' % label, p.returncode == 2, short(p))
        check('usage: %s: message on stderr' % label, p.stderr.strip() != '', short(p))
    p = run(['-t', BAD_KEY, a, b])
    check('bad -t (unknown key): exit 2', p.returncode == 2, short(p))
    m = re.search(re.escape(BAD_KEY) + r':(\d+):(\d+):', p.stderr)
    check('bad -t (unknown key): stderr has file:line:col', m is not None, repr(p.stderr))
    if m:
        check('bad -t (unknown key): line 6', m.group(1) == '6', m.group(0))
        check('bad -t (unknown key): column 5', m.group(2) == '5', m.group(0))
    p = run(['-t', BAD_SYNTAX, a, b])
    check('bad -t (syntax): exit 2', p.returncode == 2, short(p))
    check('bad -t (syntax): stderr has file:line:col',
          re.search(re.escape(BAD_SYNTAX) + r':\d+:\d+:', p.stderr) is not None, repr(p.stderr))
    nofile = os.path.join(fixture.TMP, 'no_such_tolerances.yaml')
    p = run(['-t', nofile, a, b])
    check('-t nonexistent file: exit 2', p.returncode == 2, short(p))
    check('-t nonexistent file: named', nofile in p.stderr, repr(p.stderr))


def test_option_twice():
    """An option of one value given twice is a usage error naming it, nothing written; lists
    (-t, --include, ...) and flags may repeat."""
    a, b = pair_paths('pass')
    j1, j2 = os.path.join(fixture.TMP, 'twice1.json'), os.path.join(fixture.TMP, 'twice2.json')
    for label, args, name in (('--json a --json b', ['--json', j1, '--json', j2], '--json'),
                              ('--json=a --json b', ['--json=' + j1, '--json', j2], '--json'),
                              ('-j 2 -j3', ['-j', '2', '-j3'], '--jobs'),
                              ('--profile twice', ['--profile', 'tf32', '--profile', 'mps'],
                               '--profile')):
        p = run(args + [a, b])
        check('%s: exit 2 naming %s' % (label, name), p.returncode == 2 and
              'option given twice (it takes one value): %s' % name in p.stderr, short(p))
        check('%s: no report written' % label,
              not os.path.exists(j1) and not os.path.exists(j2), os.listdir(fixture.TMP))
    p = run(['-t', LOOSE, '-t', LOOSE, '-q', '-q', '--include', '/x', '--include', '/y', a, b])
    check('-t, -q and --include may repeat: exit 0', p.returncode == 0, short(p))


def _profile_run(name, env_extra=None):
    e = env()
    e.pop('PARITYCHECK_TOLERANCES', None)
    e.update(env_extra or {})
    a, b = pair_paths('pass')
    return subprocess.run([fixture.BIN, '--profile', name, a, b], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, env=e, text=True)


def test_profile_messages():
    """A mistyped --profile: "did you mean" the shipped profile (a swap, a '_' for '-', a name
    cut short), and then no PARITYCHECK_TOLERANCES hint; the hint only for a name close to none,
    and not when the variable is set already."""
    hint = 'PARITYCHECK_TOLERANCES'
    for typed, meant in (('tf23', 'tf32'), ('bf16_autocast', 'bf16-autocast'),
                         ('fp16', 'fp16-autocast'), ('cpu-vs-cuda', 'cpu-vs-cuda-fp32')):
        p = _profile_run(typed)
        check('--profile %s: exit 2, did you mean %s, no hint' % (typed, meant),
              p.returncode == 2 and "did you mean '%s'?" % meant in p.stderr and
              hint not in p.stderr, p.stderr)
    p = _profile_run('nope')
    check('--profile nope: no suggestion, the hint', p.returncode == 2 and
          'did you mean' not in p.stderr and hint in p.stderr, p.stderr)
    folder = os.path.join(fixture.TMP, 'my_profiles')
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, 'mine.yaml'), 'w') as fh:
        fh.write('version: 1\n')
    p = _profile_run('nope', {'PARITYCHECK_TOLERANCES': folder})
    check('--profile nope with PARITYCHECK_TOLERANCES set: its folder listed, no hint',
          p.returncode == 2 and '(in %s: mine)' % folder in p.stderr and
          'hint' not in p.stderr, p.stderr)


# ------------------------------------------------------------------------------------------
# Help
# ------------------------------------------------------------------------------------------


def test_help_version():
    p = run(['-h'])
    check('-h: exit 0', p.returncode == 0, short(p))
    check('-h: usage on stdout', 'Usage' in p.stdout or 'usage' in p.stdout, p.stdout[:200])
    p = run(['--help'])
    check('--help: exit 0', p.returncode == 0, short(p))
    p = run(['-V'])
    check('-V: exit 0', p.returncode == 0, short(p))
    check('-V: prints the version', re.search(r'paritycheck \d+\.\d+', p.stdout) is not None,
          p.stdout)


def _header_constant(header, name):
    """The value of `#define NAME (...)` or `NAME = ...` in a public header, evaluated here, so that
    the help is checked against the one definition rather than a copy."""
    path = os.path.join(HERE, '..', '..', 'include', 'paritycheck', header)
    with open(path) as fh:
        text = fh.read()
    m = re.search(r'#define %s (.+)|\b%s = ([^,}\n]+)' % (name, name), text)
    expr = (m.group(1) or m.group(2)).strip()
    expr = re.sub(r'\((size_t|uint64_t)\)', '', expr)
    return eval(expr, {})  # the header's own integer or float expression


def test_help_defaults():
    """The defaults --help states are the library's (defined once, printed from there)."""
    text = ' '.join(run(['--help']).stdout.split())
    rows = _header_constant('report.h', 'PC_REPORT_MAX_ROWS')
    block = _header_constant('compare.h', 'PC_DEFAULT_BLOCK_ELEMS')
    memory = _header_constant('compare.h', 'PC_DEFAULT_MAX_MEMORY')
    factor = _header_constant('baseline.h', 'PC_BASELINE_FACTOR_DEFAULT')
    check('--help: max rows default', 'rest are only counted (default %d)' % rows in text, text)
    check('--help: block default', 'read block (default %d)' % block in text, text)
    check('--help: baseline factor default', '>= 1 (default %g)' % factor in text, text)
    unit = next(u for k, u in ((3, 'T'), (2, 'G'), (1, 'M'), (0, 'K'))
                if memory % 1024 ** (k + 1) == 0)
    shown = '%d%s' % (memory // 1024 ** ('KMGT'.index(unit) + 1), unit)
    check('--help: max memory default', '(default %s;' % shown in text, (shown, text))


TESTS = [
    test_bad_files,
    test_usage_errors,
    test_option_twice,
    test_profile_messages,
    test_help_version,
    test_help_defaults,
]


if __name__ == '__main__':
    sys.exit(fixture.main(sys.argv[1:], TESTS, 'test_cli_usage.py'))
