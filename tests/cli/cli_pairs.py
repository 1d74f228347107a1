"""What the end-to-end tests of the binary on the fixture pairs share (test_cli.py and its parts
test_cli_usage.py, test_cli_text.py, test_cli_reads.py): the binary, the fixture folder made by
tests/gen/make_fixtures.py with its expected.json (numpy's figures), a temporary folder; running
the binary, a fixture pair's paths and JSON report, and numpy's check of a report
(tests/oracle/pc_reference.py). tests/cli/cli_common.py is the folder tests' counterpart: it runs
the binary with --allow-same and writes inputs, where these tests read the fixture pairs."""

import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'oracle'))
sys.path.insert(0, os.path.join(HERE, '..'))
from checks import check, run_tests  # noqa: E402

# Set by main: the binary, the fixture folder, its expected.json and the temporary folder.
BIN = None
FIX = None
EXPECTED = None
TMP = None
STRICT = os.path.join(HERE, 'strict.yaml')
LOOSE = os.path.join(HERE, 'loose.yaml')
BAD_KEY = os.path.join(HERE, 'bad_key.yaml')
BAD_SYNTAX = os.path.join(HERE, 'bad_syntax.yaml')

ANSI = re.compile(r'\x1b\[')


def env():
    e = dict(os.environ)
    e.pop('NO_COLOR', None)
    return e


def run(args, timeout=120):
    return subprocess.run([BIN] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          env=env(), timeout=timeout, errors='replace', text=True)


def fx(name):
    return os.path.join(FIX, name)


def pair_paths(pair):
    p = EXPECTED['pairs'][pair]
    return fx(p['a']), fx(p['b'])


_JSON_N = [0]


def run_json(pair, extra=(), tol=True):
    """Run on a fixture pair with --json FILE; returns (process, report or None)."""
    a, b = pair_paths(pair)
    _JSON_N[0] += 1
    out = os.path.join(TMP, '%s_%d.json' % (pair, _JSON_N[0]))
    args = (['-t', STRICT] if tol else []) + list(extra) + ['--json', out, a, b]
    proc = run(args)
    report = None
    try:
        with open(out) as fh:
            report = json.load(fh)
    except (OSError, ValueError) as e:
        proc.json_error = str(e)
    return proc, report


def short(proc):
    return 'rc=%s stderr=%r' % (proc.returncode, proc.stderr[-600:])


REFERENCE = os.path.join(HERE, '..', 'oracle', 'pc_reference.py')


def reference_check(label, pair, report, name):
    """Independent read-back: h5py + numpy recompute every compared tensor of the report, with
    the tolerance each tensor reports."""
    a, b = pair_paths(pair)
    path = os.path.join(TMP, name)
    with open(path, 'w') as fh:
        json.dump(report, fh)
    rp = subprocess.run([sys.executable, REFERENCE, 'check', path, a, b], stdout=subprocess.PIPE,
                        stderr=subprocess.STDOUT, text=True, timeout=300)
    check(label, rp.returncode == 0, rp.stdout[-3000:])


def run_report(args, out):
    """Run with --json OUT; returns (process, report or None)."""
    p = run(list(args) + ['--json', out])
    try:
        with open(out) as fh:
            return p, json.load(fh)
    except (OSError, ValueError):
        return p, None


def main(argv, tests, script):
    """Run `tests` (functions) on argv = PARITYCHECK_BINARY FIXTURES_DIR in a fresh temporary
    folder; prints the tally (checks.run_tests) and returns the exit status."""
    global BIN, FIX, EXPECTED, TMP
    if len(argv) != 2:
        print('usage: %s PARITYCHECK_BINARY FIXTURES_DIR' % script, file=sys.stderr)
        return 2
    BIN = os.path.abspath(argv[0])
    FIX = os.path.abspath(argv[1])
    with open(os.path.join(FIX, 'expected.json')) as fh:
        EXPECTED = json.load(fh)
    with tempfile.TemporaryDirectory(prefix='pc_cli_') as tmp:
        TMP = tmp
        return run_tests(tests)
