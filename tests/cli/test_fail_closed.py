#!/usr/bin/python3
"""End-to-end tests of the fail-closed rule (issue 30, docs/robustness.md "Fail closed"): a run
exits 0 only when it compared what the user meant and found it within tolerance; anything it
could not read, pair or decide fails with a message that says why.

    /usr/bin/python3 tests/cli/test_fail_closed.py PATH/TO/paritycheck WORK_DIR

Every input is made here (h5py, numpy, raw bytes). Prints one line per failure and a last line
"N passed, M failed"; the exit status is 1 when anything failed.
"""

import json
import os
import shutil
import subprocess
import sys

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..'))
from checks import check, run_tests  # noqa: E402

BIN = None
WORK = None


def run(args):
    return subprocess.run([BIN] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          timeout=120, errors='replace', text=True)


def run_json(args):
    """(process, parsed JSON report or None)."""
    p = run(list(args) + ['--json', '-'])
    try:
        return p, json.loads(p.stdout)
    except ValueError:
        return p, None


def fresh(name):
    d = os.path.join(WORK, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    return d


def write_h5(path, datasets, attrs=None):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with h5py.File(path, 'w', track_order=True) as f:
        for k, v in (attrs or {}).items():
            f.attrs[k] = v
        for name, value in datasets.items():
            f.create_dataset(name, data=value)


def expect_exit(label, p, code, *needles):
    """p exited with `code` and its stderr holds every needle."""
    check('%s: exit %d' % (label, code), p.returncode == code, (p.returncode, p.stderr[-800:]))
    for n in needles:
        check('%s: says %r' % (label, n), n in p.stderr, p.stderr[-800:])


X = np.arange(8, dtype=np.float32)


# --- 1. a run that compares nothing -----------------------------------------------------------

def test_nothing_compared():
    root = fresh('empty')
    a, b = os.path.join(root, 'a.h5'), os.path.join(root, 'b.h5')
    write_h5(a, {})
    write_h5(b, {})
    hint = '--allow-empty'
    expect_exit('no tensors', run([a, b]), 2, 'nothing was compared', a, hint)
    expect_exit('no tensors, --allow-empty', run([a, b, '--allow-empty']), 0)

    ta, tb = os.path.join(root, 'ta.h5'), os.path.join(root, 'tb.h5')
    write_h5(ta, {'/layer/x': X, '/layer/y': X})
    write_h5(tb, {'/layer/x': X, '/layer/y': X})
    expect_exit('the same dumps compare', run([ta, tb]), 0)
    expect_exit('--include typo', run([ta, tb, '--include', '/layr/*']), 2,
                'nothing was compared', '--include/--exclude', hint)
    expect_exit("--exclude '*'", run([ta, tb, '--exclude', '*']), 2, 'nothing was compared')
    p, r = run_json([ta, tb, '--exclude', '*', '--allow-empty'])
    check("--exclude '*' --allow-empty: a report of no tensor, exit 0",
          p.returncode == 0 and r is not None and r['tensors'] == [], (p.returncode, p.stderr))

    sa, sb = os.path.join(root, 'sa.h5'), os.path.join(root, 'sb.h5')
    write_h5(sa, {'/names': np.array([b'x', b'y'])})
    write_h5(sb, {'/names': np.array([b'x', b'y'])})
    expect_exit('every tensor skipped', run([sa, sb]), 2, 'all 1 tensors were skipped', '/names')

    fa, fb = fresh('empty/fa'), fresh('empty/fb')
    for d in (fa, fb):
        with open(os.path.join(d, 'notes.txt'), 'w') as f:
            f.write('no dumps here\n')
    expect_exit('folders without dumps', run([fa, fb]), 2, 'nothing was compared')


def test_help_names_allow_empty():
    p = run(['--help'])
    check('--help documents --allow-empty', p.returncode == 0 and '--allow-empty' in p.stdout,
          p.stdout[-400:])


def main():
    global BIN, WORK
    BIN, WORK = sys.argv[1], sys.argv[2]
    os.makedirs(WORK, exist_ok=True)
    return run_tests([test_nothing_compared, test_help_names_allow_empty])


if __name__ == '__main__':
    sys.exit(main())
