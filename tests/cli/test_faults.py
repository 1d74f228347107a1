#!/usr/bin/python3
"""Faults of the machine, not of the input (issue 17; docs/robustness.md, "Faults"): a full disk,
a file size limit, an interrupted run and a closed standard output. Every report file is written
to a temporary file beside it and renamed into place when complete, so a failed or interrupted
run leaves the old file, byte for byte, or none, and no temporary file.

    /usr/bin/python3 tests/cli/test_faults.py PATH/TO/paritycheck

Makes its own HDF5 files (h5py) in a temporary folder. Prints one line per failure and a last line
"N passed, M failed"; the exit status is 1 when anything failed.
"""

import os
import signal
import stat
import subprocess
import sys
import tempfile
import time

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..'))
from checks import check, run_tests  # noqa: E402

BIN = None
TMP = None

# Every report file option, with the word its error message uses.
REPORTS = [('--json', 'JSON report'), ('--markdown', 'Markdown report'),
           ('--junit', 'JUnit report'), ('--html', 'HTML report'),
           ('--save-baseline', 'baseline')]

# Long enough that a signal sent once the comparison's child process exists finds it still
# reading: 2^23 float32 elements in blocks of 16 on one thread take far longer than the poll.
LONG_ELEMS = 1 << 23


def short(p):
    return 'exit %s, stderr %r' % (p.returncode, (p.stderr or '')[-600:])


def path(name):
    return os.path.join(TMP, name)


def make_inputs():
    """many_a/b: 400 small tensors, so that every report is far above 1 KiB, named with call
    indices (NNN_) so that their inferred order raises no warning; long_a/b: one tensor of
    LONG_ELEMS elements that drift."""
    rng = np.random.default_rng(17)
    x = rng.standard_normal(LONG_ELEMS).astype(np.float32)
    with h5py.File(path('many_a.h5'), 'w') as fa, h5py.File(path('many_b.h5'), 'w') as fb:
        for i in range(400):
            v = x[i * 10:i * 10 + 10]
            fa['%03d_t' % i] = v
            fb['%03d_t' % i] = v * np.float32(1.001) if i % 3 == 0 else v
    with h5py.File(path('long_a.h5'), 'w') as fa, h5py.File(path('long_b.h5'), 'w') as fb:
        fa['x'] = x
        fb['x'] = x * np.float32(1.0001)


def fresh_dir(name):
    d = path(name)
    os.mkdir(d)
    return d


def temp_files(d):
    """What a report writer may leave behind: ".NAME.XXXXXX" files."""
    return sorted(f for f in os.listdir(d) if f.startswith('.'))


def run(args, cwd=None, **kw):
    return subprocess.run([BIN] + list(args), capture_output=True, text=True, errors='replace',
                          timeout=300, cwd=cwd, **kw)


def test_full_disk():
    """/dev/full: every write fails with ENOSPC. It is a device, so it is written directly (it
    cannot be renamed over), and the failed flush or close is the error."""
    for opt, word in REPORTS:
        p = run([opt, '/dev/full', path('many_a.h5'), path('many_b.h5')])
        check('%s /dev/full: exit 2' % opt, p.returncode == 2, short(p))
        check('%s /dev/full: says no space, names the file and the report' % opt,
              'No space left on device' in p.stderr and '/dev/full' in p.stderr and
              word in p.stderr, p.stderr)
        check('%s /dev/full: not taken for a crash' % opt, 'crashed' not in p.stderr, p.stderr)
    p = run(['--json', '/dev/null', path('many_a.h5'), path('many_b.h5')])
    check('--json /dev/null: written directly, exit 1 (drift)', p.returncode == 1, short(p))


def test_one_failure_spares_the_others():
    """The report files are written side by side (docs/reports.md): a report that fails (JSON
    and HTML to /dev/full) leaves the others whole, each byte for byte the file a run writing it
    alone makes, and every failure is named, in the order JSON, Markdown, JUnit, HTML, baseline."""
    d = fresh_dir('one_failure')
    alone = {}
    for opt, name in (('--markdown', 'r.md'), ('--junit', 'r.xml'), ('--save-baseline', 'b.json')):
        p = run([opt, os.path.join(d, 'alone-' + name), path('many_a.h5'), path('many_b.h5')])
        with open(os.path.join(d, 'alone-' + name), 'rb') as fh:
            alone[name] = fh.read()
    p = run(['--json', '/dev/full', '--markdown', os.path.join(d, 'r.md'), '--junit',
             os.path.join(d, 'r.xml'), '--html', '/dev/full', '--save-baseline',
             os.path.join(d, 'b.json'), path('many_a.h5'), path('many_b.h5')])
    check('two reports to /dev/full: exit 2', p.returncode == 2, short(p))
    lines = [line for line in p.stderr.splitlines() if '/dev/full' in line]
    check('both failures named, JSON first, then HTML',
          len(lines) == 2 and 'JSON report' in lines[0] and 'HTML report' in lines[1], p.stderr)
    for name, data in sorted(alone.items()):
        f = os.path.join(d, name)
        written = open(f, 'rb').read() if os.path.exists(f) else None
        check('%s still written, as a run writing it alone writes it' % name, written == data)
    check('no temporary file left', temp_files(d) == [], temp_files(d))


def test_file_size_limit():
    """ulimit -f 1 (1 KiB) with SIGXFSZ ignored: the report's write fails half-way with EFBIG.
    The old file stays byte for byte; a new one is never made; no temporary file is left."""
    sentinel = b'{"sentinel": "the previous report, which must survive"}\n'
    for opt, word in REPORTS:
        d = fresh_dir('fsize' + opt.replace('-', '_'))
        old, new = os.path.join(d, 'old.out'), os.path.join(d, 'new.out')
        with open(old, 'wb') as fh:
            fh.write(sentinel)
        for target in (old, new):
            cmd = "trap '' XFSZ; ulimit -f 1; exec \"$0\" \"$@\""
            p = subprocess.run(['bash', '-c', cmd, BIN, opt, target, path('many_a.h5'),
                                path('many_b.h5')],
                               capture_output=True, text=True, errors='replace', timeout=300)
            label = '%s %s under ulimit -f 1' % (opt, os.path.basename(target))
            check(label + ': exit 2', p.returncode == 2, short(p))
            check(label + ': says why, naming the file and the report',
                  'File too large' in p.stderr and target in p.stderr and word in p.stderr,
                  p.stderr)
        with open(old, 'rb') as fh:
            check('%s: the old file is left byte for byte' % opt, fh.read() == sentinel)
        check('%s: no new file' % opt, not os.path.exists(new))
        check('%s: no temporary file left' % opt, temp_files(d) == [], temp_files(d))
        # the same reports without the limit are far above 1 KiB: the limit cut them half-way
        p = run([opt, new, path('many_a.h5'), path('many_b.h5')])
        check('%s: the whole report is above 1 KiB' % opt,
              p.returncode == 1 and os.path.getsize(new) > 4096, short(p))


def test_unwritable():
    """A report that cannot be made at all is a clear error; the early check still refuses a
    folder that does not exist before the data are read."""
    d = fresh_dir('unwritable')
    p = run(['--json', os.path.join(d, 'no', 'such', 'folder.json'), path('many_a.h5'),
             path('many_b.h5')])
    check('report in a missing folder: exit 2, named, refused early',
          p.returncode == 2 and 'folder.json' in p.stderr and
          'No such file or directory' in p.stderr, short(p))
    p = run(['--markdown', d, path('many_a.h5'), path('many_b.h5')])  # a folder
    check('report path that is a folder: exit 2 naming it',
          p.returncode == 2 and d in p.stderr and 'directory' in p.stderr.lower(), short(p))
    check('report path that is a folder: no temporary file', temp_files(d) == [], temp_files(d))


def test_success_leaves_no_temporaries():
    """A successful run: every report in place with the mode a new file gets (0666 less the
    umask), an existing file's mode kept, a symlink kept as a link to the new report, and no
    temporary file."""
    d = fresh_dir('success')
    keep = os.path.join(d, 'keep.md')
    with open(keep, 'w') as fh:
        fh.write('old')
    os.chmod(keep, 0o640)
    os.symlink('target.xml', os.path.join(d, 'link.xml'))
    with open(os.path.join(d, 'target.xml'), 'w') as fh:
        fh.write('old')
    p = run(['--json', 'r.json', '--markdown', 'keep.md', '--junit', 'link.xml', '--html',
             'r.html', '--save-baseline', 'b.json', path('many_a.h5'), path('many_b.h5')],
            cwd=d, preexec_fn=lambda: os.umask(0o027))
    check('all reports: exit 1 (drift)', p.returncode == 1, short(p))
    check('all reports: no temporary file', temp_files(d) == [], temp_files(d))
    for name in ('r.json', 'r.html', 'b.json'):
        mode = stat.S_IMODE(os.stat(os.path.join(d, name)).st_mode)
        check('new %s: mode 0666 & ~umask 027' % name, mode == 0o640, oct(mode))
    check('existing keep.md: its mode kept', stat.S_IMODE(os.stat(keep).st_mode) == 0o640)
    with open(keep) as fh:
        check('existing keep.md: replaced by the report', 'paritycheck: drift' in fh.read())
    check('symlink: still a link', os.path.islink(os.path.join(d, 'link.xml')))
    with open(os.path.join(d, 'target.xml')) as fh:
        check('symlink: its target holds the report', '<testsuites' in fh.read())


def wait_for_child(pid):
    """Until the supervisor has forked the comparison (src/cli/isolate.c), polled, so that the
    signal lands during the comparison whatever the build's speed."""
    children = '/proc/%d/task/%d/children' % (pid, pid)
    for _ in range(3000):
        try:
            with open(children) as fh:
                if fh.read().strip():
                    return
        except OSError:
            return  # the process is gone: the caller's check reports it
        time.sleep(0.01)


def interrupted(sig, code):
    """A signal to the paritycheck process (the supervisor, src/cli/isolate.c) while the child
    compares: it passes it on, waits, and exits 128 + N; no report is made or replaced."""
    name = signal.Signals(sig).name
    d = fresh_dir('signal_' + name)
    sentinel = b'previous report\n'
    with open(os.path.join(d, 'r.json'), 'wb') as fh:
        fh.write(sentinel)
    p = subprocess.Popen([BIN, '-j', '1', '--block-elems', '16', '--json', 'r.json', '--markdown',
                          'r.md', '--junit', 'r.xml', '--html', 'r.html', '--save-baseline',
                          'b.json', path('long_a.h5'), path('long_b.h5')],
                         cwd=d, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for_child(p.pid)
    running = p.poll() is None
    check('%s: the comparison was still running when signalled' % name, running,
          'exit %s' % p.returncode)
    t0 = time.monotonic()
    if running:
        p.send_signal(sig)
    out, err = p.communicate(timeout=120)
    waited = time.monotonic() - t0
    check('%s: exit %d' % (name, code), p.returncode == code, 'exit %s, %r' % (p.returncode, err))
    check('%s: says it was interrupted, no crash' % name,
          'interrupted by signal %d' % sig in err and 'crashed' not in err, err)
    check('%s: stopped promptly' % name, waited < 10, '%.1f s' % waited)
    check('%s: no text report' % name, out == '', out[:300])
    check('%s: no report made, none replaced, no temporary file' % name,
          sorted(os.listdir(d)) == ['r.json'], sorted(os.listdir(d)))
    with open(os.path.join(d, 'r.json'), 'rb') as fh:
        check('%s: the old report is left byte for byte' % name, fh.read() == sentinel)


def test_sigint():
    interrupted(signal.SIGINT, 130)


def test_sigterm():
    interrupted(signal.SIGTERM, 143)


def test_closed_pipe():
    """Standard output whose reader is gone (issue 16): that report ends quietly, as in other
    Unix tools: nothing on stderr, the run's own exit code, and a report file asked for alongside
    is still written whole; never a death by SIGPIPE that the supervisor would blame on HDF5."""
    a, b = path('many_a.h5'), path('many_b.h5')
    with tempfile.TemporaryDirectory() as tmp:
        ref = os.path.join(tmp, 'ref.xml')
        clean = subprocess.run([BIN, '--junit', ref, a, b], capture_output=True, timeout=300)
        expected = open(ref, 'rb').read()
        for args, what in (([], 'text report'), (['--json', '-'], 'JSON report'),
                           (['--markdown', '-'], 'Markdown report')):
            junit = os.path.join(tmp, 'junit.xml')
            r, w = os.pipe()
            os.close(r)  # closed before paritycheck writes anything: the first flush fails
            p = subprocess.run([BIN, '--junit', junit] + args + [a, b], stdout=w,
                               stderr=subprocess.PIPE, text=True, timeout=300)
            os.close(w)
            label = 'closed stdout, %s' % what
            check(label + ': the exit code of the run', p.returncode == clean.returncode,
                  short(p))
            check(label + ': nothing on stderr', p.stderr == '', p.stderr)
            check(label + ': the JUnit file written whole',
                  os.path.exists(junit) and open(junit, 'rb').read() == expected)
    # as a user meets it: the JSON (about 1 MB) into head, which leaves after 10 bytes
    p = subprocess.run(['bash', '-c', '"$0" --json - "$1" "$2" | head -c 10 >/dev/null; '
                        'echo "${PIPESTATUS[0]}" >&2', BIN, a, b],
                       capture_output=True, text=True, timeout=300)
    check('--json - | head -c 10: the run\'s exit code and nothing else on stderr',
          p.stderr.strip() == str(clean.returncode), p.stderr)


TESTS = [
    test_full_disk,
    test_one_failure_spares_the_others,
    test_file_size_limit,
    test_unwritable,
    test_success_leaves_no_temporaries,
    test_sigint,
    test_sigterm,
    test_closed_pipe,
]


def main(argv):
    global BIN, TMP
    if len(argv) != 1:
        print('usage: test_faults.py PARITYCHECK_BINARY', file=sys.stderr)
        return 2
    BIN = os.path.abspath(argv[0])
    with tempfile.TemporaryDirectory(prefix='pc_faults_') as tmp:
        TMP = tmp
        make_inputs()
        return run_tests(TESTS)


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
