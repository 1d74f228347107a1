#!/usr/bin/python3
"""Run paritycheck on every case of the hostile corpus and check the documented behaviour.

    /usr/bin/python3 tests/hostile/run_hostile.py PARITYCHECK CORPUS_DIR [options]

CORPUS_DIR is made by tests/gen/make_hostile.py; its cases.json says, for each case, the command
line, the allowed exit codes and what the output must say (docs/robustness.md). Every run must
also end by itself (no signal, no sanitizer or valgrind report) within its time limit, and stay
within a memory bound: the driver reads each child's peak resident size from wait4(), and in
plain builds also caps its address space so that a runaway allocation fails instead of eating
the machine.

Options:
  --sanitized     the binary has ASan/UBSan: no address-space cap, looser time and memory bounds
  --wrapper CMD   run each case under CMD (e.g. valgrind), split on spaces; implies the bounds
                  of --sanitized, doubled
  --subset NAME   only the cases marked NAME in cases.json (e.g. valgrind)
  --jobs N        cases run at once (default: the number of CPUs)
  --match TEXT    only the cases whose name contains TEXT

Prints one line per failed check and a last line "N passed, M failed"; exit status 1 when
anything failed.
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
# Bounds per run: (seconds, peak resident MiB). Normal runs of the corpus take milliseconds and
# a few tens of MiB; the bounds only have to tell "bounded" from "runaway".
BOUNDS = {'plain': (30, 512), 'sanitized': (120, 1536), 'wrapped': (600, 3072)}
ADDRESS_SPACE_CAP = 4 << 30  # plain builds: a larger allocation fails at once
# Relative tolerance of the "approx" figures: a few roundings of a double (sums, a division, a
# square root or a logarithm) apart from the same formula evaluated in Python.
APPROX = 1e-12
SANITIZER_MARKS = ('Sanitizer', 'runtime error:', 'LeakSanitizer')


def sanitizer_env():
    env = dict(os.environ)
    env.pop('NO_COLOR', None)
    # A sanitizer finding aborts (a signal), so it can never pass for an exit code; malloc may
    # return NULL, as the program handles it. HDF5's own faults on corrupt metadata are
    # suppressed (hdf5.asan.supp and hdf5.lsan.supp say which), which needs full stacks.
    env['ASAN_OPTIONS'] = ('abort_on_error=1:detect_leaks=1:allocator_may_return_null=1:'
                           'fast_unwind_on_malloc=0:suppressions=%s:%s' % (
                               os.path.join(HERE, 'hdf5.asan.supp'), env.get('ASAN_OPTIONS', '')))
    env['LSAN_OPTIONS'] = 'suppressions=%s:%s' % (os.path.join(HERE, 'hdf5.lsan.supp'),
                                                  env.get('LSAN_OPTIONS', ''))
    env['UBSAN_OPTIONS'] = ('abort_on_error=1:halt_on_error=1:print_stacktrace=1:'
                            + env.get('UBSAN_OPTIONS', ''))
    return env


def cap_address_space():
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_CAP, ADDRESS_SPACE_CAP))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def run_one(argv, env, seconds, capped, tmp):
    """Returns (status from wait4, peak RSS in MiB, wall seconds, stdout, stderr, timed_out)."""
    out_path, err_path = os.path.join(tmp, 'out'), os.path.join(tmp, 'err')
    with open(out_path, 'wb') as out, open(err_path, 'wb') as err:
        start = time.monotonic()
        proc = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env,
                                preexec_fn=cap_address_space if capped else None)
        killed = []
        timer = threading.Timer(seconds, lambda: (killed.append(True), proc.kill()))
        timer.start()
        _, status, usage = os.wait4(proc.pid, 0)
        timer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.monotonic() - start
    with open(out_path, errors='replace') as fh:
        stdout = fh.read()
    with open(err_path, errors='replace') as fh:
        stderr = fh.read()
    return status, usage.ru_maxrss / 1024, wall, stdout, stderr, bool(killed)


def check_json(report, want):
    """Differences between the report's tensors and the expectations (list of strings)."""
    probs = []
    tensors = {t['path']: t for t in report.get('tensors', [])}
    for path, exp in want.items():
        got = tensors.get(path)
        if got is None:
            probs.append('%r: not in the report' % path[:80])
            continue
        if got.get('verdict') != exp['verdict']:
            probs.append('%r: verdict %r, want %r (message %r)' % (
                path[:80], got.get('verdict'), exp['verdict'], got.get('message')))
        for sub in exp.get('message', []):
            if sub not in (got.get('message') or ''):
                probs.append('%r: message %r lacks %r' % (path[:80], got.get('message'), sub))
        for key in ('count', 'mismatches', 'max_abs', 'max_rel', 'max_ulp'):
            if key in exp and got.get(key) != exp[key]:
                probs.append('%r: %s %r, want %r' % (path[:80], key, got.get(key), exp[key]))
        for key, want in exp.get('approx', {}).items():
            if not isinstance(got.get(key), (int, float)) or \
                    abs(got[key] - want) > APPROX * abs(want):
                probs.append('%r: %s %r, want %r' % (path[:80], key, got.get(key), want))
        if 'worst_index' in exp and (got.get('worst') or {}).get('index') != exp['worst_index']:
            probs.append('%r: worst %r, want index %r' % (path[:80], got.get('worst'),
                                                          exp['worst_index']))
    return probs


def is_runner_command(line):
    """A line the GitHub Actions runner reads as a command, other than paritycheck's own
    annotations: '::' at its start after whitespace, or '##[' anywhere."""
    own = line.startswith(('::error title=paritycheck ', '::warning title=paritycheck'))
    return '##[' in line or (line.lstrip().startswith('::') and not own)


def check_case(c, binary, opts, env):
    mode = 'wrapped' if opts.wrapper else 'sanitized' if opts.sanitized else 'plain'
    seconds, max_mib = BOUNDS[mode]
    if 'seconds' in c and mode == 'plain':
        seconds = min(seconds, c['seconds'])
    with tempfile.TemporaryDirectory() as tmp:
        args = list(c['args'])
        if len(args) >= 2 and args[-1] == args[-2]:
            # a file against itself, on purpose (its own figures, a tolerance file's error): A
            # and B one file is otherwise exit 2 (issue 38)
            args.insert(0, '--allow-same')
        argv = (opts.wrapper.split() if opts.wrapper else []) + [binary] + args
        report_path = os.path.join(tmp, 'report.json')
        if 'json' in c:
            argv[-2:-2] = ['--json', report_path]
        status, rss, wall, stdout, stderr, timed_out = run_one(argv, env, seconds,
                                                               mode == 'plain', tmp)
        probs = []
        if timed_out:
            probs.append('did not end within %ds' % seconds)
        elif os.WIFSIGNALED(status):
            probs.append('killed by signal %d' % os.WTERMSIG(status))
        rc = os.waitstatus_to_exitcode(status)
        if not timed_out and rc not in c['exit']:
            probs.append('exit %d, want %s' % (rc, c['exit']))
        if any(m in stderr for m in SANITIZER_MARKS):
            probs.append('sanitizer report')
        # The CLI turns a crash or an endless loop into exit 2 (src/cli/isolate.c): in this
        # corpus that would hide a fault, so the message itself is a failure.
        if 'the comparison crashed' in stderr or 'no progress for' in stderr:
            probs.append('crash or stall caught by the process isolation')
        if rss > max_mib:
            probs.append('peak RSS %.0f MiB > %d MiB' % (rss, max_mib))
        for where, text in (('stdout', stdout), ('stderr', stderr)):
            for sub in c.get(where, []):
                if sub not in text:
                    probs.append('%s lacks %r' % (where, sub[:120]))
        if c.get('no_runner_commands'):
            probs += ['%s line is a runner command: %r' % (where, line[:120])
                      for where, text in (('stdout', stdout), ('stderr', stderr))
                      for line in text.splitlines() if is_runner_command(line)]
        if c.get('names_file') and rc == 2 and c['names_file'] not in stdout + stderr:
            probs.append('exit 2 without naming %s' % c['names_file'])
        if 'json' in c and not timed_out and rc in c['exit']:
            try:
                with open(report_path) as fh:
                    probs += check_json(json.load(fh), c['json'])
            except (OSError, ValueError) as e:
                probs.append('no JSON report: %s' % e)
        if probs:
            probs.append('stderr: %r; stdout tail: %r' % (stderr[-800:], stdout[-800:]))
        return c['name'], probs, wall, rss


def main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument('binary')
    ap.add_argument('corpus')
    ap.add_argument('--sanitized', action='store_true')
    ap.add_argument('--wrapper')
    ap.add_argument('--subset')
    ap.add_argument('--jobs', type=int, default=os.cpu_count())
    ap.add_argument('--match')
    opts = ap.parse_args(argv)
    with open(os.path.join(opts.corpus, 'cases.json')) as fh:
        cases = json.load(fh)['cases']
    if opts.subset:
        cases = [c for c in cases if c.get(opts.subset)]
    if opts.match:
        cases = [c for c in cases if opts.match in c['name']]
    env = sanitizer_env()
    passed, failed = 0, []
    slowest = (0, '')
    peak = (0, '')
    with ThreadPoolExecutor(max_workers=max(1, opts.jobs)) as pool:
        futures = [pool.submit(check_case, c, opts.binary, opts, env) for c in cases]
        for fut in futures:
            name, probs, wall, rss = fut.result()
            slowest = max(slowest, (wall, name))
            peak = max(peak, (rss, name))
            if probs:
                failed.append(name)
                for p in probs:
                    print('FAIL %s: %s' % (name, p))
            else:
                passed += 1
    print('slowest %.2fs (%s); peak RSS %.0f MiB (%s)' % (slowest + peak))
    print('%d passed, %d failed' % (passed, len(failed)))
    return 1 if failed or not cases else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
