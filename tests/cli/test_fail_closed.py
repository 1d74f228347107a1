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
import signal
import struct
import subprocess
import sys
import time

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..'))
from checks import check, run_tests  # noqa: E402
import cli_common  # noqa: E402
from cli_common import fresh, run, run_json, write_h5  # noqa: E402

BIN = None
WORK = None



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


# --- 2 to 4. folder mode: what cannot be read, paired or walked ------------------------------

def as_nobody(args):
    """args run by a user without root's right to read anything: root reads a file of mode
    000, so the unreadable-file checks run the binary as nobody when the tests run as root."""
    if os.geteuid() != 0:
        return args
    return ['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups', BIN] + list(args)


def run_json_as_nobody(args):
    argv = as_nobody(list(args) + ['--json', '-'])
    if argv[0] != 'setpriv':
        return run_json(args)
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120,
                       errors='replace', text=True)
    try:
        return p, json.loads(p.stdout)
    except ValueError:
        return p, None


def by_path(report):
    return {t['path']: t for t in report['tensors']} if report else {}


def folder_pair(name, files_a, files_b):
    """Folders WORK/name/A and WORK/name/B (readable by all), each with good.h5 (the same /x)
    and the named files written by the callables given."""
    root = fresh(name)
    os.chmod(root, 0o755)
    sides = []
    for side, files in (('A', files_a), ('B', files_b)):
        d = os.path.join(root, side)
        write_h5(os.path.join(d, 'good.h5'), {'/x': X})
        for rel, make in files.items():
            make(os.path.join(d, rel))
        sides.append(d)
    return root, sides[0], sides[1]


def h5_file(path):
    write_h5(path, {'/x': X})


def unreadable_h5(path):
    write_h5(path, {'/x': X})
    os.chmod(path, 0)


def empty_file(path):
    open(path, 'wb').close()


def expect_entry(label, p, r, path, verdict, needle, code=2):
    t = by_path(r).get(path)
    check('%s: exit %d' % (label, code), p.returncode == code, (p.returncode, p.stderr[-600:]))
    check('%s: %s is %s saying %r' % (label, path, verdict, needle),
          t is not None and t['verdict'] == verdict and needle in (t.get('message') or ''),
          (t, sorted(by_path(r))))


def test_unreadable_and_empty_files():
    _, a, b = folder_pair('unreadable', {'secret.h5': unreadable_h5}, {'secret.h5': unreadable_h5})
    p, r = run_json_as_nobody([a, b])
    expect_entry('files nobody may read', p, r, 'secret.h5', 'error', 'Permission denied')
    _, a, b = folder_pair('zero-bytes', {'crash.h5': empty_file}, {'crash.h5': empty_file})
    p, r = run_json([a, b])
    expect_entry('zero-byte files on both sides', p, r, 'crash.h5', 'error', 'empty file')
    check('zero-byte files: the good pair is still compared',
          by_path(r).get('good.h5:/x', {}).get('verdict') == 'pass', sorted(by_path(r)))


def test_symlinks_fifos():
    root = fresh('links')
    for side, scale in (('A', 1), ('B', 2)):
        write_h5(os.path.join(root, 'real' + side, 'step1', 'x.h5'), {'/x': X * scale})
        os.makedirs(os.path.join(root, side))
        os.symlink(os.path.join('..', 'real' + side, 'step1'), os.path.join(root, side, 'step1'))
    p, r = run_json([os.path.join(root, 'A'), os.path.join(root, 'B')])
    t = by_path(r).get('step1/x.h5:/x')
    check('symlinked step folders are followed: exit 1', p.returncode == 1, (p.returncode, p.stderr))
    check('symlinked step folders: /x compared, drift of max_abs 7',
          t is not None and t['verdict'] == 'drift' and t['max_abs'] == 7.0, t)

    def loop(path):
        os.symlink('.', path)
    _, a, b = folder_pair('loop', {'back': loop}, {})
    p, r = run_json([a, b])
    expect_entry('a link back to a folder above', p, r, 'back', 'error', 'a loop')

    def dangling(path):
        os.symlink('no-such-file.h5', path)
    _, a, b = folder_pair('dangling', {'gone.h5': dangling}, {'gone.h5': h5_file})
    p, r = run_json([a, b])
    expect_entry('a dangling link', p, r, 'gone.h5', 'error', 'dangling symbolic link')

    _, a, b = folder_pair('fifo', {'pipe.h5': os.mkfifo}, {'pipe.h5': os.mkfifo})
    p, r = run_json([a, b])
    expect_entry('FIFOs', p, r, 'pipe.h5', 'error', 'FIFO')


def truncated_h5(path):
    h5_file(path)
    size = os.path.getsize(path)
    with open(path, 'r+b') as f:
        f.truncate(size // 2)


def test_file_entries_ignore_globs():
    _, a, b = folder_pair('globs', {'r1.h5': h5_file, 'r2.h5': h5_file}, {'r2.h5': truncated_h5})
    p, r = run_json([a, b, '--include', '*/x'])
    expect_entry("--include '*/x': r2.h5 truncated in B", p, r, 'r2.h5', 'error', 'truncated')
    expect_entry("--include '*/x': r1.h5 missing in B", p, r, 'r1.h5', 'missing_in_b',
                 'file only in A')
    _, a, b = folder_pair('globs-missing', {'r1.h5': h5_file}, {})
    p, r = run_json([a, b, '--exclude', 'r1.h5'])
    expect_entry("--exclude r1.h5: missing in B still counts", p, r, 'r1.h5', 'missing_in_b',
                 'file only in A', code=1)


# --- 5. two tensors of one side under one name ---------------------------------------------

def write_safetensors(path, tensors):
    """float32 tensors in the header order given (a list of (name, array))."""
    header, data = {}, b''
    for name, arr in tensors:
        raw = np.asarray(arr, dtype='<f4').tobytes()
        header[name] = {'dtype': 'F32', 'shape': list(np.shape(arr)),
                        'data_offsets': [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header).encode()
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(text)) + text + data)


def test_names_that_collide():
    root = fresh('collide')
    a, b = os.path.join(root, 'a.h5'), os.path.join(root, 'b.safetensors')
    write_h5(a, {'/fc': np.zeros(4, np.float32), '/module.fc': np.ones(4, np.float32)})
    write_safetensors(b, [('module.fc', np.zeros(4)), ('fc', np.ones(4))])
    expect_exit('--strip-prefix module.: two of A map to /fc',
                run([a, b, '--strip-prefix', 'module.']), 2, 'A: two tensors map to /fc',
                '/fc and /module.fc')
    c = os.path.join(root, 'c.h5')
    write_h5(c, {'/fc': np.zeros(4, np.float32)})
    expect_exit('--strip-prefix module.: two of B map to /fc',
                run([c, b, '--strip-prefix', 'module.']), 2, 'B: two tensors map to /fc',
                '/module.fc and /fc')
    d = os.path.join(root, 'd.h5')
    write_h5(d, {'/x': X, '/y': X})
    expect_exit('--map /y=/x: two of B map to /x', run([c, d, '--map', '/y=/x']), 2,
                'B: two tensors map to /x', '/x and /y')
    fa, fb = fresh('collide/A'), fresh('collide/B')
    write_h5(os.path.join(fa, 's1.h5'), {'/x': X})
    write_h5(os.path.join(fb, 's1.h5'), {'/x': X, '/y': X})
    expect_exit('folders: the file is named', run([fa, fb, '--map', '/y=/x']), 2,
                'B s1.h5: two tensors map to /x')


# --- 12. safetensors tensors whose bytes overlap ----------------------------------------------

def st_raw(path, entries, data):
    """A safetensors file of float32 entries (name, offsets) in this header order over data."""
    header = {name: {'dtype': 'F32', 'shape': [(end - begin) // 4], 'data_offsets': [begin, end]}
              for name, (begin, end) in entries}
    text = json.dumps(header).encode()
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(text)) + text + data)


def test_safetensors_overlaps():
    root = fresh('overlap')
    st = os.path.join(root, 'abc.safetensors')
    # a = [0, 40) holds b = [8, 16) and c = [24, 32); b and c do not touch each other
    st_raw(st, [('a', (0, 40)), ('b', (8, 16)), ('c', (24, 32)), ('d', (40, 48))],
           np.arange(12, dtype='<f4').tobytes())
    p, r = run_json([st, st])
    check('overlaps: exit 2', p.returncode == 2, (p.returncode, p.stderr))
    got = {k: (t['verdict'], t.get('message') or '') for k, t in by_path(r).items()}
    for name, other in (('/a', '/b'), ('/b', '/a'), ('/c', '/a')):
        check('overlaps: %s is an error naming %s' % (name, other),
              got.get(name, ('', ''))[0] == 'error' and
              ('overlap those of %s' % other) in got[name][1], got)
    check('overlaps: /d, after them, is compared', got.get('/d', ('',))[0] == 'pass', got)


# --- 14. exact integer-vs-float, complex with a matched inf -----------------------------------

def test_integer_vs_float_and_complex_inf():
    root = fresh('exact')
    tol = os.path.join(root, 'atol.yaml')
    with open(tol, 'w') as f:
        f.write('version: 1\ndefaults:\n  float64: {atol: 0.5, rtol: null, max_ulp: null, '
                'max_mismatch_fraction: 0.0}\n')
    a, b = os.path.join(root, 'a.h5'), os.path.join(root, 'b.h5')
    # |2^53 - (2^53 + 1)| = 1 and |2^63 - (2^63 - 1)| = 1 would pass if the integer were rounded
    # to double first; an integer against a float is not compared at all now (issue 38)
    write_h5(a, {'/i': np.array([2 ** 53 + 1, 2 ** 63 - 1, 7, 3], np.int64)})
    write_h5(b, {'/i': np.array([2.0 ** 53, 2.0 ** 63, 7.0, 3.5], np.float64)})
    p, r = run_json(['-t', tol, a, b])
    t = by_path(r).get('/i', {})
    check('int64 vs float64 beyond 2^53: exit 1', p.returncode == 1, (p.returncode, p.stderr))
    check('int64 vs float64: a dtype_mismatch', t.get('verdict') == 'dtype_mismatch', t)

    ca, cb = os.path.join(root, 'ca.h5'), os.path.join(root, 'cb.h5')
    write_h5(ca, {'/c': np.array([complex(np.inf, 0), 1 + 1j], np.complex128)})
    write_h5(cb, {'/c': np.array([complex(np.inf, 1), 1 + 1j], np.complex128)})
    p, r = run_json([ca, cb])
    t = by_path(r).get('/c', {})
    check('complex inf+0j vs inf+1j: exit 1', p.returncode == 1, (p.returncode, p.stderr))
    check('complex inf+0j vs inf+1j: the imaginary error counts (abs 1, rel inf)',
          t.get('mismatches') == 1 and t.get('inf_mismatches') == 0 and t.get('max_abs') == 1.0
          and t.get('max_rel') == 'inf', t)


# --- 15. a gate's file made under another tolerance set ---------------------------------------

def test_gate_tolerance_record():
    root = fresh('tolset')
    a, b = os.path.join(root, 'a.h5'), os.path.join(root, 'b.h5')
    write_h5(a, {'/x': X})
    write_h5(b, {'/x': X * np.float32(1 + 2 ** -10)})  # drifts
    strict = os.path.join(root, 'strict.yaml')
    with open(strict, 'w') as f:
        f.write('version: 1\ndefaults:\n  float32: {atol: 0.0, rtol: null, max_ulp: null}\n')
    base = os.path.join(root, 'base.json')
    p = run(['-t', strict, '--save-baseline', base, a, b])
    check('tolerance record: the baseline is saved (drift under strict)', p.returncode == 1 and
          os.path.exists(base), (p.returncode, p.stderr))
    expect_exit('tolerance record: gated without -t strict.yaml', run(['--baseline', base, a, b]),
                2, 'made under other tolerances', strict, '--profile, -t')
    expect_exit('tolerance record: gated with the same tolerances',
                run(['-t', strict, '--baseline', base, a, b]), 0)
    with open(strict, 'a') as f:  # the same path, other content
        f.write('  float64: {atol: 0.0}\n')
    expect_exit('tolerance record: the file changed since', run(['-t', strict, '--baseline', base,
                                                                 a, b]), 2,
                'made under other tolerances')

    approvals = os.path.join(root, 'approvals.yaml')
    sign = ['--by', 'R. Viewer', '--reason', 'accepted']
    p = run(['-t', strict, '--approve', approvals] + sign + [a, b])
    check('tolerance record: approvals signed', p.returncode == 0 and os.path.exists(approvals),
          (p.returncode, p.stderr))
    expect_exit('tolerance record: --approved under the same tolerances',
                run(['-t', strict, '--approved', approvals, a, b]), 0)
    expect_exit('tolerance record: --approved without them', run(['--approved', approvals, a, b]),
                2, 'made under other tolerances')
    expect_exit('tolerance record: --approve into a file of another set',
                run(['--approve', approvals] + sign + [a, b]), 2, 'made under other tolerances')


# --- 8. names that are not UTF-8 in baseline and approval files ------------------------------

def test_names_not_utf8():
    root = fresh('not-utf8')
    a, b = os.path.join(root, 'a.h5'), os.path.join(root, 'b.h5')
    names = [b'x\xff', b'x\xfe']  # two names that a lossy spelling ('?') makes one
    for path, scale in ((a, 1), (b, 1 + 2 ** -10)):
        with h5py.File(path, 'w') as f:
            for n in names:
                f.create_dataset(n, data=X * np.float32(scale))
    base = os.path.join(root, 'base.json')
    p = run(['--save-baseline', base, a, b])
    check('not UTF-8: baseline saved (drift)', p.returncode == 1, (p.returncode, p.stderr))
    with open(base) as fh:
        saved = sorted(t.get('path_bytes') for t in json.load(fh)['tensors'])
    check('not UTF-8: the baseline holds both paths exactly',
          saved == sorted(('/'.encode() + n).hex() for n in names), saved)
    expect_exit('not UTF-8: the baseline gates its own run', run(['--baseline', base, a, b]), 0)

    approvals = os.path.join(root, 'approvals.yaml')
    sign = ['--by', 'R. Viewer', '--reason', 'accepted']
    expect_exit('not UTF-8: approvals signed and read back',
                run(['--approve', approvals] + sign + [a, b]), 0)
    with open(approvals, 'rb') as fh:
        text = fh.read()
    check('not UTF-8: the approval file is UTF-8 and names both tensors exactly',
          all(('tensor_bytes: "%s"' % ('/'.encode() + n).hex()).encode() in text for n in names)
          and text.decode('utf-8', 'replace').encode() == text, text[:600])
    expect_exit('not UTF-8: --approved passes the approved drift',
                run(['--approved', approvals, a, b]), 0)


# --- 7. approvals on folders -----------------------------------------------------------------

def fnv1a64(data):
    h = 0xcbf29ce484222325
    for byte in data:
        h = ((h ^ byte) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def test_approvals_on_folders():
    root = fresh('approve-folders')
    fa, fb = os.path.join(root, 'A'), os.path.join(root, 'B')
    drifted = X * np.float32(1 + 2 ** -10)
    write_h5(os.path.join(fa, 'step1', 'r0.h5'), {'/x': X, '/y': X})
    write_h5(os.path.join(fb, 'step1', 'r0.h5'), {'/x': drifted, '/y': X})
    approvals = os.path.join(root, 'approvals.yaml')
    sign = ['--by', 'R. Viewer', '--reason', 'accepted']
    expect_exit('folders: --approve signs the drifting tensor', run(['--approve', approvals] +
                                                                    sign + [fa, fb]), 0)
    text = open(approvals).read() if os.path.exists(approvals) else ''
    want = 'tensor: "step1/r0.h5:/x"'
    hashes = ('a: "fnv1a64:%016x"' % fnv1a64(X.astype('<f4').tobytes()),
              'b: "fnv1a64:%016x"' % fnv1a64(drifted.astype('<f4').tobytes()))
    check('folders: the approval names FILE:DATASET and hashes each side\'s stored bytes',
          want in text and all(h in text for h in hashes), text[-700:])
    expect_exit('folders: --approved passes the approved drift', run(['--approved', approvals,
                                                                      fa, fb]), 0)
    write_h5(os.path.join(fa, 'step1', 'r0.h5'), {'/x': X + 1, '/y': X})  # A's input changed
    p = run(['--approved', approvals, fa, fb])
    check('folders: a changed input makes the approval stale (exit 1)', p.returncode == 1 and
          "A's content changed" in p.stdout, (p.returncode, p.stdout[-600:], p.stderr))


# --- 11. two stop signals while the report files are written --------------------------------

def many_tensors(path, n, scale):
    """A safetensors file of n one-element float32 tensors: its reports take a while to write."""
    header = {'layer%05d.out' % i: {'dtype': 'F32', 'shape': [1], 'data_offsets': [4 * i, 4 * i + 4]}
              for i in range(n)}
    text = json.dumps(header).encode()
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(text)) + text +
                (np.arange(n, dtype='<f4') * np.float32(scale)).tobytes())


def test_two_signals_while_writing():
    root = fresh('signals')
    a, b = os.path.join(root, 'a.safetensors'), os.path.join(root, 'b.safetensors')
    many_tensors(a, 20000, 1.0)
    many_tensors(b, 20000, 1.001)
    out = fresh('signals/out')
    files = ['r.json', 'r.md', 'r.xml', 'r.html', 'b.json']
    for name in files:
        with open(os.path.join(out, name), 'w') as f:
            f.write('old\n')
    p = subprocess.Popen([BIN, '--json', 'r.json', '--markdown', 'r.md', '--junit', 'r.xml',
                          '--html', 'r.html', '--save-baseline', 'b.json', a, b], cwd=out,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seen = False
    while p.poll() is None and not seen:  # until a report's temporary file exists
        seen = any(f.startswith('.') for f in os.listdir(out))
    if seen:  # Ctrl-C twice, a CI cancel: SIGTERM, then SIGHUP
        p.send_signal(signal.SIGTERM)
        p.send_signal(signal.SIGHUP)
    err = p.communicate(timeout=300)[1]
    check('two signals: sent while a report file was being written', seen, err[-300:])
    check('two signals: exit 128 + a stop signal', p.returncode in (129, 143),
          (p.returncode, err[-300:]))
    left = sorted(f for f in os.listdir(out) if f.startswith('.'))
    check('two signals: no temporary file left', left == [], left)
    old = []
    for name in files:
        with open(os.path.join(out, name)) as f:
            old.append(f.read() == 'old\n')
    check('two signals: the reports are all from one run (all new or all old)',
          all(old) or not any(old), dict(zip(files, old)))


# --- 10. a slow reader, a large header, nested YAML: none is a stall ----------------------------

def test_slow_reader_is_not_a_stall():
    """A pipe nobody reads for a while (| less): the report waits for its reader."""
    root = fresh('slow-reader')
    a = os.path.join(root, 'a.safetensors')
    many_tensors(a, 3000, 1.0)  # a text report of about 200 KB: more than a pipe holds
    p = subprocess.Popen([BIN, '--allow-same', '--stall-timeout', '2', a, a], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    # Nobody reads for three times the stall timeout; the run blocks writing its report.
    time.sleep(6)
    out, err = p.communicate(timeout=300)
    check('slow reader: exit 0', p.returncode == 0, (p.returncode, err[-400:]))
    check('slow reader: not stopped as a stall', 'no progress' not in err, err[-400:])
    check('slow reader: the whole report', out.startswith('PASS: 3000 tensors within tolerance') and
          out.rstrip().endswith('/layer02999.out  float32  [1]    0/1         0        0        0'
                                '        inf') and out.count('\n') > 3000, out[-300:])


def wide_header(path, n):
    """A safetensors file of n empty float32 tensors with short names: 1.6 M tensors make the
    96 MB header of issue 30 (about 60 bytes a tensor)."""
    entries = ','.join('"%x":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}' % i
                       for i in range(n))
    text = ('{' + entries + '}').encode()
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(text)) + text)


def test_large_header_is_not_a_stall():
    root = fresh('large-header')
    a, b = os.path.join(root, 'a.safetensors'), os.path.join(root, 'b.safetensors')
    wide_header(a, 1000000)  # 56 MB of header: seconds of parsing, longer than the limit below
    write_safetensors(b, [('0', np.zeros(0))])
    p = run(['--stall-timeout', '3', '--allow-empty', '--include', '/0', a, b])  # /0 is empty
    expect_exit('large header: parsing reports progress', p, 0)
    check('large header: not stopped as a stall', 'no progress' not in p.stderr, p.stderr[-400:])


def test_nested_approvals_are_bounded():
    root = fresh('nested-yaml')
    a = os.path.join(root, 'a.h5')
    write_h5(a, {'/x': X})
    deep = os.path.join(root, 'deep.yaml')
    with open(deep, 'w') as f:  # libyaml scans this in time quadratic in its depth: hours
        f.write('version: 1\napprovals: ' + '[' * 200000 + ']' * 200000 + '\n')
    p = run(['--stall-timeout', '30', '--approved', deep, a, a])
    expect_exit('nested approvals: refused', p, 2, deep + ':2:', 'nested deeper than 32 levels')
    check('nested approvals: not stopped as a stall', 'no progress' not in p.stderr,
          p.stderr[-400:])


# --- 13. file metadata counts against --max-memory -------------------------------------------

def test_metadata_counts_against_max_memory():
    root = fresh('metadata-memory')
    a = os.path.join(root, 'a.safetensors')
    many_tensors(a, 20000, 1.0)  # a header of 1.2 MB, records of about 4 MB
    header = struct.unpack('<Q', open(a, 'rb').read(8))[0]
    expect_exit('metadata: within the default limit', run(['-q', a, a]), 0)
    p = run(['-q', '--max-memory', '4M', a, a])
    expect_exit('metadata: header and records over the limit', p, 2, a + ': its metadata would need',
                'a safetensors header of %d bytes and the records of 20000 tensors' % header,
                'more than the memory limit of 4194304 bytes (--max-memory)')
    p = run(['-q', '--max-memory', '1M', a, a])
    expect_exit('metadata: the header alone over the limit', p, 2,
                a + ': its metadata would need %d bytes for its safetensors header alone' % header)
    h5 = os.path.join(root, 'many.h5')
    write_h5(h5, {'/t%04d' % i: X for i in range(2000)})
    expect_exit('metadata: HDF5 records over the limit', run(['-q', '--max-memory', '64K', h5, h5]),
                2, h5 + ': its metadata would need more than', 'datasets so far')


# --- 9. no line of output is a GitHub Actions runner command --------------------------------

FORGED_NAME = '/##[stop-commands]pwn'
FORGED_VALUE = '::warning title=forged::all tensors passed'
OURS = ('::error title=paritycheck ', '::warning title=paritycheck')


def runner_commands(text):
    """The lines of text the Actions runner would read as a command that is not one of our own
    annotations: '::' at a line's start after whitespace, or '##[' anywhere."""
    bad = []
    for line in text.splitlines():
        if '##[' in line or (line.lstrip().startswith('::') and not line.startswith(OURS)):
            bad.append(line)
    return bad


def test_no_runner_commands():
    root = fresh('ci-commands')
    a, b = os.path.join(root, 'a.h5'), os.path.join(root, 'b.h5')
    attrs = {'backend': FORGED_VALUE, '::error::forged': 'x'}
    write_h5(a, {FORGED_NAME: X, '/ok': X}, attrs)
    write_h5(b, {FORGED_NAME: X + 1, '/ok': X}, attrs)
    modes = {'text': [], 'verbose text': ['-v'], 'github': ['--github'], 'json': ['--json', '-'],
             'markdown': ['--markdown', '-'], 'junit': ['--junit', '-'], 'html': ['--html', '-']}
    for mode, extra in modes.items():
        p = run([a, b] + extra)
        check('CI commands, %s: the forged tensor drifts (exit 1)' % mode, p.returncode == 1,
              (p.returncode, p.stderr[-400:]))
        for stream, text in (('stdout', p.stdout), ('stderr', p.stderr)):
            check('CI commands, %s: no runner command on %s' % (mode, stream),
                  runner_commands(text) == [], runner_commands(text)[:4])
    # the names are there, escaped: '#' of "##[" and the ':' that starts a text as \x23, \x3a
    p = run([a, b, '--github'])
    check('CI commands: the text report shows the escaped name',
          '/\\x23#[stop-commands]pwn' in p.stdout, p.stdout[-800:])
    # an attribute equal on both sides is shown under -v only (docs/reports.md, "Provenance")
    v = run([a, b, '-v'])
    check('CI commands: the text report shows the escaped attribute',
          '\\x3a:warning title=forged::all tensors passed' in v.stdout, v.stdout[-800:])
    errors = [ln for ln in p.stdout.splitlines() if ln.startswith('::error')]
    check('CI commands: one ::error annotation, for the forged tensor, escaped',
          len(errors) == 1 and
          errors[0].startswith('::error title=paritycheck DRIFT::/\\x23#[stop-commands]pwn: '),
          errors)
    p, r = run_json([a, b])
    check('CI commands: the JSON report reads back the exact name and value',
          r is not None and FORGED_NAME in by_path(r) and
          r['provenance']['a']['backend'] == FORGED_VALUE, r and r.get('provenance'))


def main():
    global BIN, WORK
    BIN, WORK = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    cli_common.setup(BIN, WORK)
    os.makedirs(WORK, exist_ok=True)
    return run_tests([test_nothing_compared, test_help_names_allow_empty,
                      test_unreadable_and_empty_files, test_symlinks_fifos,
                      test_file_entries_ignore_globs, test_names_that_collide,
                      test_safetensors_overlaps, test_integer_vs_float_and_complex_inf,
                      test_gate_tolerance_record, test_names_not_utf8, test_approvals_on_folders,
                      test_two_signals_while_writing, test_slow_reader_is_not_a_stall,
                      test_large_header_is_not_a_stall, test_nested_approvals_are_bounded,
                      test_metadata_counts_against_max_memory,
                      test_no_runner_commands])


if __name__ == '__main__':
    sys.exit(main())
