#!/usr/bin/python3
"""Allocation-failure injection (issue 17; docs/robustness.md, "Faults"). Runs one real
comparison that touches every stage (a tolerance file, a baseline to judge against, a
--reference file, every report file) once to count its allocations, then once for each N with the
Nth allocation failing (tests/faults/alloc_fail.c). Every run must:

  - exit 2 with "out of memory" (or strerror's "Cannot allocate memory") on stderr, or, where
    the program recovers from the failed allocation, give exactly the clean run's exit code,
    standard output and report files;
  - not crash: no signal, no sanitizer report (in the ASan build, with leak detection: no leak);
  - leave only complete report files, each byte for byte the clean run's, or none, and no
    temporary file ".NAME.XXXXXX".

    /usr/bin/python3 tests/faults/test_alloc_fail.py PATH/TO/paritycheck_allocfail

Every N up to EVERY_UP_TO is run; beyond it, a fixed stride that keeps the total near
EVERY_UP_TO + STRIDED (the same Ns on every run). Prints one line per failure and a last line
"N passed, M failed"; the exit status is 1 when anything failed.
"""

import concurrent.futures
import os
import shutil
import subprocess
import sys
import tempfile

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..'))
from checks import check, run_tests  # noqa: E402

EVERY_UP_TO = 3000
STRIDED = 1000

BIN = None
TMP = None

REPORTS = ['o.json', 'o.md', 'o.xml', 'o.html', 'o.base.json']
# -j 1: one worker thread, so that the Nth allocation is the same one on every run.
ARGS = ['-j', '1', '-t', '../tol.yaml', '--baseline', '../base.json', '--reference', '../r.h5',
        '--json', 'o.json', '--markdown', 'o.md', '--junit', 'o.xml', '--html', 'o.html',
        '--save-baseline', 'o.base.json', '../a.h5', '../b.h5']
# paritycheck's own message, and strerror(ENOMEM) where a report's writer (jansson's json_dumpf)
# fails for want of memory and the report is then a write error with that reason.
OOM_WORDS = ('out of memory', 'Cannot allocate memory')
SANITIZER_WORDS = ('Sanitizer', 'runtime error', 'crashed', 'Segmentation', 'Aborted')


def path(name):
    return os.path.join(TMP, name)


def make_inputs():
    """A and B hold a contiguous dataset (read by the workers with pread) that drifts in every
    7th element, a chunked deflated one in a group (read by HDF5), integers, one dataset only in
    A, a shape and a dtype mismatch, a dataset never written (its fill values are compared), a name
    beyond ASCII;
    R is A again, as the reference."""
    rng = np.random.default_rng(17)
    x = rng.standard_normal(1000).astype(np.float32)
    y = rng.standard_normal(1000).astype(np.float32)
    for name, side in (('a.h5', 'a'), ('b.h5', 'b'), ('r.h5', 'r')):
        with h5py.File(path(name), 'w') as f:
            xx = x.copy()
            if side == 'b':
                xx[::7] *= np.float32(1.01)
            f['x'] = xx
            f.create_dataset('grp/y', data=y, chunks=(100,), compression='gzip')
            f['i'] = np.arange(50, dtype=np.int32)
            if side != 'b':
                f['only_a'] = x[:10]
            f['shape'] = x[:11] if side == 'b' else x[:10]
            f['dt'] = x[:10].astype(np.float64) if side == 'b' else x[:10]
            f.create_dataset('fill', (100,), 'f4', fillvalue=0.5)  # never written
            f['caf\u00e9'] = y[:20]  # a name in UTF-8 beyond ASCII
    with open(path('tol.yaml'), 'w') as fh:
        fh.write('version: 1\nrules:\n  - match: "/grp/*"\n    float32: {atol: 1.0e-6}\n')


def environment(n, count_file):
    env = dict(os.environ)
    env.pop('PC_FAIL_ALLOC', None)
    if n:
        env['PC_FAIL_ALLOC'] = str(n)
    env['PC_ALLOC_COUNT'] = count_file
    # A sanitizer report is told apart from paritycheck's exit 2 by its exit status and text.
    env['ASAN_OPTIONS'] = 'detect_leaks=1:exitcode=99'
    env['LSAN_OPTIONS'] = 'exitcode=98'
    env['UBSAN_OPTIONS'] = 'halt_on_error=1:print_stacktrace=1'
    return env


def run_once(n):
    """Runs with the Nth allocation failing (0: none) in a fresh folder; returns the exit code,
    stdout, stderr, the files left (name -> bytes) and whether an allocation failed."""
    d = tempfile.mkdtemp(prefix='n%d_' % n, dir=TMP)
    count_file = os.path.join(d, '..', os.path.basename(d) + '.count')
    try:
        p = subprocess.run([BIN] + ARGS, cwd=d, env=environment(n, count_file),
                           capture_output=True, timeout=120)
        files = {}
        for name in os.listdir(d):
            with open(os.path.join(d, name), 'rb') as fh:
                files[name] = fh.read()
        with open(count_file) as fh:
            lines = [line.split() for line in fh if line.strip()]
        total = max(int(c) for _, c, _ in lines)
        failed = any(f == '1' for _, _, f in lines)
        return p.returncode, p.stdout, p.stderr.decode('utf-8', 'replace'), files, total, failed
    finally:
        shutil.rmtree(d)
        if os.path.exists(count_file):
            os.remove(count_file)


def make_baseline():
    """A baseline of A against itself: every tensor that A and B share passes there, so the gate
    sees /x drift further than the baseline allows."""
    p = subprocess.run([BIN, '-j', '1', '--save-baseline', path('base.json'), path('a.h5'),
                        path('a.h5')], capture_output=True, env=environment(0, path('b.count')))
    return p.returncode == 0


def ns_to_run(total):
    if total <= EVERY_UP_TO:
        return list(range(1, total + 1))
    stride = max(1, (total - EVERY_UP_TO) // STRIDED)
    return list(range(1, EVERY_UP_TO + 1)) + list(range(EVERY_UP_TO + 1, total + 1, stride))


def judge_run(n, clean, result):
    """The checks of one run; returns a list of (name, ok, detail)."""
    rc, out, err, files, _, failed = result
    rc0, out0, _, files0, _, _ = clean
    label = 'allocation %d' % n
    detail = 'exit %s, stderr %r' % (rc, err[-1500:])
    checks = [(label + ': an allocation was failed', failed, detail),
              (label + ': no crash, no sanitizer report',
               rc in (0, 1, 2) and not any(w in err for w in SANITIZER_WORDS), detail)]
    if rc == 2:
        said = any(w in err for w in OOM_WORDS)
        checks.append((label + ': exit 2 says out of memory', said, detail))
    else:
        checks.append((label + ': recovered: the clean run\'s exit code, output and reports',
                       rc == rc0 and out == out0 and files == files0, detail))
    stray = sorted(set(files) - set(REPORTS))
    checks.append((label + ': no temporary or other file', not stray, stray))
    partial = sorted(name for name in files if name in files0 and files[name] != files0[name])
    checks.append((label + ': every report left is the whole report', not partial, partial))
    return checks


def test_every_allocation_fails_cleanly():
    check('baseline made', make_baseline())
    clean = run_once(0)
    rc0, _, err0, files0, total, failed0 = clean
    # B drifts in /x (every 7th element by 1%), lacks /only_a and differs in shape and dtype:
    # drift, exit 1, and /x is worse than in the baseline of A against itself.
    check('clean run: exit 1 (drift), no failed allocation', rc0 == 1 and not failed0, err0)
    check('clean run: every report written', sorted(files0) == sorted(REPORTS), sorted(files0))
    check('clean run: counts allocations', total > 100, total)
    ns = ns_to_run(total)
    recovered = []
    workers = max(1, min(4, os.cpu_count() or 1))
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        for n, result in zip(ns, pool.map(run_once, ns)):
            for name, ok, detail in judge_run(n, clean, result):
                check(name, ok, detail)
            if result[0] != 2:
                recovered.append(n)
    print('%d allocations, %d runs, recovered from %d: %s' %
          (total, len(ns), len(recovered), recovered))


def main(argv):
    global BIN, TMP
    if len(argv) != 1:
        print('usage: test_alloc_fail.py PARITYCHECK_ALLOCFAIL_BINARY', file=sys.stderr)
        return 2
    BIN = os.path.abspath(argv[0])
    with tempfile.TemporaryDirectory(prefix='pc_allocfail_') as tmp:
        TMP = tmp
        make_inputs()
        return run_tests([test_every_allocation_fails_cleanly])


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
