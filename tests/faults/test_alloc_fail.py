#!/usr/bin/python3
"""Allocation-failure injection (issue 17; docs/robustness.md, "Faults"). Runs one real
comparison that touches every stage (a tolerance file, a baseline to judge against, a
--reference file, every report file) once to count its allocations, then once for each N with the
Nth allocation failing (tests/faults/alloc_fail.c); then the same, for every N, for a smaller
comparison of an npz file against a safetensors file (the loaders that are not HDF5). Every run
must:

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
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..'))
from checks import check, run_tests  # noqa: E402
from fault_run import (REPORTS, SANITIZER_WORDS, arguments, make_baseline,  # noqa: E402
                       make_flat_inputs, make_inputs, run_in_fresh_folder, sanitizer_env)

EVERY_UP_TO = 3000
STRIDED = 1000

BIN = None
TMP = None

# paritycheck's own message, and strerror(ENOMEM) where a report's writer (jansson's json_dumpf)
# fails for want of memory and the report is then a write error with that reason.
OOM_WORDS = ('out of memory', 'Cannot allocate memory')


def environment(n, count_file):
    env = sanitizer_env(dict(os.environ))
    env.pop('PC_FAIL_ALLOC', None)
    if n:
        env['PC_FAIL_ALLOC'] = str(n)
    env['PC_ALLOC_COUNT'] = count_file
    return env


def run_once(n, args=None):
    """Runs with the Nth allocation failing (0: none); returns the exit code, stdout, stderr,
    the files left (name -> bytes), the allocations counted and whether one failed. args: the
    command line after the binary (default: fault_run.arguments(True))."""
    count_file = os.path.join(TMP, 'n%d.%d.count' % (n, 0 if args is None else 1))
    try:
        rc, out, err, files = run_in_fresh_folder([BIN] + (args or arguments(True)), TMP,
                                                  environment(n, count_file), 'n%d' % n)
        with open(count_file) as fh:
            lines = [line.split() for line in fh if line.strip()]
    finally:
        if os.path.exists(count_file):
            os.remove(count_file)
    total = max(int(c) for _, c, _ in lines)
    failed = any(f == '1' for _, _, f in lines)
    return rc, out, err, files, total, failed


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
    check('baseline made', make_baseline(BIN, TMP, environment(0, os.path.join(TMP, 'b.count'))))
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


# npz and safetensors inputs: their loaders allocate apart from HDF5's walk (names, shapes, npy
# headers; not libzip's own allocations, nor jansson's inside the header's parser). One report:
# the writers' allocations are the first test's.
FLAT_ARGS = ['-j', '1', '--json', 'o.json', '../a.npz', '../b.safetensors']


def test_flat_formats_fail_cleanly():
    clean = run_once(0, FLAT_ARGS)
    rc0, _, err0, files0, total, failed0 = clean
    check('npz vs safetensors, clean run: exit 1 (x drifts, only_a missing)',
          rc0 == 1 and not failed0, err0)
    check('npz vs safetensors, clean run: its report', sorted(files0) == ['o.json'], sorted(files0))
    ns = list(range(1, total + 1))
    workers = max(1, min(4, os.cpu_count() or 1))
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        for n, result in zip(ns, pool.map(lambda k: run_once(k, FLAT_ARGS), ns)):
            for name, ok, detail in judge_run(n, clean, result):
                check('npz vs safetensors, ' + name, ok, detail)
    print('npz vs safetensors: %d allocations, all run' % total)


def main(argv):
    global BIN, TMP
    if len(argv) != 1:
        print('usage: test_alloc_fail.py PARITYCHECK_ALLOCFAIL_BINARY', file=sys.stderr)
        return 2
    BIN = os.path.abspath(argv[0])
    with tempfile.TemporaryDirectory(prefix='pc_allocfail_') as tmp:
        TMP = tmp
        make_inputs(TMP)
        make_flat_inputs(TMP)
        return run_tests([test_every_allocation_fails_cleanly, test_flat_formats_fail_cleanly])


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
