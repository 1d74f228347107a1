#!/usr/bin/python3
"""HDF5's own memory counts against --max-memory (issue 38, docs/robustness.md "Resource
limits"): a dataset of 300,000 one-element chunks is compared within a 64 MiB limit, and blocks
that meet many chunks, read in tiles, give every element in its place.

    /usr/bin/python3 tests/cli/test_chunk_memory.py PATH/TO/paritycheck WORK_DIR [--sanitized]

Every input is made here with h5py. The peak is the largest resident set of the run's processes
(the CLI compares in a child process, src/cli/isolate.c), read with getrusage(RUSAGE_CHILDREN)
in a fresh Python process whose only child is the CLI. --sanitized (an ASan/UBSan build, whose
shadow memory and quarantine are not the program's) leaves the peak unchecked. Prints one line
per failure and a last line "N passed, M failed"; the exit status is 1 when anything failed.
"""

import os
import shutil
import subprocess
import sys

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..'))
from checks import check, run_tests  # noqa: E402
import cli_common  # noqa: E402
from cli_common import fresh, run_json  # noqa: E402

SANITIZED = False
LIMIT = 64 << 20  # --max-memory 64M, in bytes

# Runs argv[1:] and prints the largest resident set of its process tree, in KiB (Linux's
# ru_maxrss unit): the CLI waits for its child, so the child's peak reaches us through it.
PEAK = ('import resource, subprocess, sys\n'
        'p = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)\n'
        'sys.stderr.write(p.stderr.decode(errors="replace"))\n'
        'print(p.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n')


def peak_run(args):
    """(exit status, peak resident set in bytes, stderr) of the CLI on args."""
    p = subprocess.run([sys.executable, '-c', PEAK, cli_common.BIN] + args,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)
    code, kib = p.stdout.split()
    return int(code), int(kib) * 1024, p.stderr


def by_path(report):
    return {t['path']: t for t in report['tensors']} if report else {}


# --- 1. 300,000 one-element chunks under --max-memory 64M -------------------------------------

N = 300_000
DRIFT = {7: 0.25, 150_001: 4.0, 299_999: -1.0}  # index -> added to B; the worst at 150,001


def one_element_chunks(path, values):
    with h5py.File(path, 'w') as f:
        f.create_dataset('x', data=values, chunks=(1,))


def test_many_chunks_within_limit():
    d = fresh('many-chunks')
    a, b = os.path.join(d, 'a.h5'), os.path.join(d, 'b.h5')
    values = np.arange(N, dtype=np.float32) * np.float32(0.5)
    one_element_chunks(a, values)
    shutil.copyfile(a, b)
    with h5py.File(b, 'r+') as f:
        for i, delta in DRIFT.items():
            f['x'][i] = values[i] + np.float32(delta)
    with h5py.File(a, 'r') as f:
        check('many chunks: A has one chunk per element', f['x'].id.get_num_chunks() == N,
              f['x'].id.get_num_chunks())
    args = ['-j', '2', '--max-memory', '64M', a, b]
    code, peak, err = peak_run(args)
    check('many chunks: exit 1 (three elements drift)', code == 1, (code, err[-800:]))
    if not SANITIZED:
        check('many chunks: peak resident set within --max-memory 64M', peak <= LIMIT,
              '%d bytes' % peak)
    p, r = run_json(args)
    t = by_path(r).get('/x', {})
    check('many chunks: every element read in its place (3 mismatches, the worst at 150001)',
          t.get('mismatches') == len(DRIFT) and t.get('worst', {}).get('index') == [150_001] and
          t.get('max_abs') == 4.0, (p.returncode, {k: t.get(k) for k in ('mismatches', 'worst')}))


# --- 2. tiles: blocks that meet more chunks than one read takes --------------------------------

# shape, chunks: each meets more than 256 chunks in a block, so a block is read in tiles (rows
# of chunks; columns of a wide row; an odometer over three dimensions), with partial edge chunks.
LAYOUTS = [((600, 700), (7, 3)), ((4, 5000), (4, 1)), ((40, 50, 60), (3, 7, 11))]


def layout_pair(d, shape, chunks, hits):
    """A contiguous, B chunked: the same values but at `hits` (index tuple -> added)."""
    n = int(np.prod(shape))
    values = (np.arange(n, dtype=np.float64) % 1000 + 1).reshape(shape)
    changed = values.copy()
    for at, delta in hits.items():
        changed[at] += delta
    a, b = os.path.join(d, 'a.h5'), os.path.join(d, 'b.h5')
    with h5py.File(a, 'w') as f:
        f.create_dataset('x', data=values)
    with h5py.File(b, 'w') as f:
        f.create_dataset('x', data=changed, chunks=chunks)
    return a, b


def test_tiles_put_every_element_in_place():
    for k, (shape, chunks) in enumerate(LAYOUTS):
        d = fresh('tiles-%d' % k)
        last = tuple(s - 1 for s in shape)
        mid = tuple(s // 2 + 1 for s in shape)
        hits = {last: 3.0, mid: 50.0, tuple(1 for _ in shape): -2.0}
        a, b = layout_pair(d, shape, chunks, hits)
        for side, (x, y) in (('B chunked', (a, b)), ('A chunked', (b, a))):
            p, r = run_json(['-j', '2', x, y])
            t = by_path(r).get('/x', {})
            check('tiles %s %s: %s: exit 1, 3 mismatches, the worst at %s' %
                  (shape, chunks, side, list(mid)),
                  p.returncode == 1 and t.get('mismatches') == 3 and
                  t.get('worst', {}).get('index') == list(mid) and t.get('max_abs') == 50.0,
                  (p.returncode, p.stderr[-400:], {k: t.get(k) for k in ('mismatches', 'worst')}))
        p, r = run_json(['-j', '2', '--allow-same', b, b])
        check('tiles %s %s: the chunked file against itself passes' % (shape, chunks),
              p.returncode == 0 and by_path(r).get('/x', {}).get('mismatches') == 0,
              (p.returncode, p.stderr[-400:]))


def main():
    global SANITIZED
    args = [x for x in sys.argv[1:] if x != '--sanitized']
    SANITIZED = len(args) != len(sys.argv) - 1
    cli_common.setup(os.path.abspath(args[0]), os.path.abspath(args[1]))
    os.makedirs(cli_common.WORK, exist_ok=True)
    return run_tests([test_many_chunks_within_limit, test_tiles_put_every_element_in_place])


if __name__ == '__main__':
    sys.exit(main())
