#!/usr/bin/python3
"""End-to-end tests of the trust model (issue 38, docs/robustness.md "Trust model"): B is the
file under test, so nothing that B carries (its attributes, a reference made from it, paths that
alias it) may widen B's allowance, and a gate records what it trusted.

    /usr/bin/python3 tests/cli/test_trust.py PATH/TO/paritycheck WORK_DIR

Every input is made here (h5py, numpy, torch). Prints one line per failure and a last line
"N passed, M failed"; the exit status is 1 when anything failed.
"""

import hashlib
import json
import os
import subprocess
import sys

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..'))
from checks import check, run_tests  # noqa: E402
import cli_common  # noqa: E402
from cli_common import fresh, run, run_json, write_h5  # noqa: E402

BIN = None
WORK = None
SOURCE = os.path.normpath(os.path.join(HERE, '..', '..'))
FP32 = ['--profile', 'cpu-vs-cuda-fp32']


def expect_exit(label, p, code, *needles):
    """p exited with `code` and its stderr holds every needle."""
    check('%s: exit %d' % (label, code), p.returncode == code, (p.returncode, p.stderr[-800:]))
    for n in needles:
        check('%s: says %r' % (label, n), n in p.stderr, p.stderr[-800:])


def run_raw(args):
    """The binary on args exactly (cli_common.run adds --allow-same to a run of A against A)."""
    return subprocess.run([BIN] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          timeout=120, errors='replace', text=True)


def by_path(report):
    return {t['path']: t for t in report['tensors']} if report else {}


def settings(report):
    """The report's settings as {name: [values]}."""
    out = {}
    for s in (report or {}).get('settings', []):
        out.setdefault(s['name'], []).append(s['value'])
    return out


def random_pair(root, n=8, size=64, attrs_b=None, attrs_a=None, seed=1, noise=None):
    """a.h5 with n standard-normal float32 tensors; b.h5 with n unrelated ones, or with A's plus
    `noise` times standard-normal noise; attrs_a and attrs_b: dataset attributes for every tensor
    of that side."""
    rng = np.random.default_rng(seed)
    a_values = [rng.standard_normal(size).astype(np.float32) for _ in range(n)]
    b_values = [(x + noise * rng.standard_normal(size)).astype(np.float32) if noise is not None
                else rng.standard_normal(size).astype(np.float32) for x in a_values]
    paths = []
    for side, attrs, values in (('a', attrs_a, a_values), ('b', attrs_b, b_values)):
        path = os.path.join(root, side + '.h5')
        with h5py.File(path, 'w', track_order=True) as f:
            for i, x in enumerate(values):
                d = f.create_dataset('/t%d' % i, data=x)
                for k, v in (attrs or {}).items():
                    d.attrs[k] = v
        paths.append(path)
    return paths


# --- 1. metadata: tolerance-affecting attributes come from A ---------------------------------

def test_b_reduction_length_is_ignored():
    root = fresh('b-reduction')
    a, b = random_pair(root, attrs_b={'reduction_length': np.int64(2 ** 62)})
    # unrelated random tensors are no rounding of each other: none passes whatever K
    p, r = run_json(FP32 + [a, b])
    check('B-only reduction_length: exit 1', p.returncode == 1, (p.returncode, p.stderr[-600:]))
    v = [t['verdict'] for t in r['tensors']] if r else []
    check('B-only reduction_length: none of 8 passes',
          len(v) == 8 and set(v) <= {'drift', 'indeterminate'}, v)
    notes = [t.get('note', '') for t in r['tensors']] if r else []
    check('B-only reduction_length: each tensor notes that B\'s value is ignored',
          len(notes) == 8 and all('reduction_length' in n and 'ignored' in n for n in notes), notes)
    check('B-only reduction_length: the run warns, naming --trust-b-metadata',
          r is not None and any('--trust-b-metadata' in w for w in r['warnings']),
          r and r['warnings'])
    check('B-only reduction_length: the report records that B\'s metadata is not trusted',
          settings(r).get('trust', [''])[0].startswith('A\'s metadata only'), settings(r))
    # opted in: B's K is used but capped at the largest tensor of B's file (64 elements), which
    # widens rtol to at most 2 u sqrt(64) = 9.5e-7: still drift
    p, r = run_json(FP32 + ['--trust-b-metadata', a, b])
    check('--trust-b-metadata: capped K, still exit 1', p.returncode == 1, p.stderr[-600:])
    rtols = [t['tolerance'].get('rtol', 0) for t in r['tensors']] if r else []
    check('--trust-b-metadata: rtol from K capped at 64 elements (<= 1e-6)',
          len(rtols) == 8 and max(rtols) <= 1e-6, rtols)
    check('--trust-b-metadata: recorded in the report',
          '--trust-b-metadata' in settings(r).get('trust', [''])[0], settings(r))
    p = run(FP32 + ['--trust-b-metadata', a, b])
    check('--trust-b-metadata: recorded in the text report', '--trust-b-metadata' in p.stdout,
          p.stdout[:800])
    md = os.path.join(root, 'r.md')
    run(FP32 + ['--trust-b-metadata', '--markdown', md, a, b])
    check('--trust-b-metadata: recorded in the Markdown report',
          os.path.exists(md) and '--trust-b-metadata' in open(md).read(), '')


def test_a_and_b_disagree():
    root = fresh('disagree')
    a, b = random_pair(root, attrs_a={'reduction_length': np.int64(4)},
                       attrs_b={'reduction_length': np.int64(2 ** 62)})
    p, r = run_json(FP32 + [a, b])
    check('A and B disagree: exit 1', p.returncode == 1, p.stderr[-600:])
    rtols = [t['tolerance'].get('rtol', 0) for t in r['tensors']] if r else []
    # A's K = 4: rtol = max(2 u, sqrt(4) u) = 2^-23, far below the 2^31 u of B's 2^62
    check('A and B disagree: A\'s K applies (rtol 2^-23)',
          len(rtols) == 8 and all(x == 2.0 ** -23 for x in rtols), rtols)
    notes = [t.get('note', '') for t in r['tensors']] if r else []
    check('A and B disagree: the note gives both values and says A\'s is used',
          all('A says 4' in n and 'B says 4611686018427387904' in n for n in notes), notes[:2])


def test_b_module_type_selects_no_rule():
    root = fresh('b-module-type')
    tol = os.path.join(root, 'loose.yaml')
    with open(tol, 'w') as f:
        f.write("version: 1\nrules:\n  - match_module_type: Loose\n    all: {atol: 1000.0}\n")
    # B is A with 1 % noise: drift under the built-in float32 tolerances, within atol 1000
    a, b = random_pair(root, attrs_b={'module_type': 'Loose'}, noise=0.01)
    p, r = run_json(['-t', tol, a, b])
    check('B-only module_type: the loose rule does not apply (exit 1)', p.returncode == 1,
          (p.returncode, [t['verdict'] for t in r['tensors']] if r else p.stderr[-400:]))
    a2, b2 = random_pair(fresh('a-module-type'), attrs_a={'module_type': 'Loose'}, noise=0.01)
    p = run(['-t', tol, a2, b2])
    check('A\'s module_type: the rule applies (exit 0)', p.returncode == 0, p.stderr[-400:])
    p = run(['-t', tol, '--trust-b-metadata', a, b])
    check('B-only module_type with --trust-b-metadata: the rule applies (exit 0)',
          p.returncode == 0, p.stderr[-400:])


def test_dtype_claim_the_data_contradicts():
    root = fresh('dtype-claim')
    rng = np.random.default_rng(2)
    x = rng.standard_normal(256).astype(np.float32)
    a, b = os.path.join(root, 'a.h5'), os.path.join(root, 'b.h5')
    write_h5(a, {'/x': x})
    with h5py.File(b, 'w') as f:
        d = f.create_dataset('/x', data=(x * np.float32(1.003)).astype(np.float32))
        d.attrs['dtype'] = 'bfloat16'
    # float32 values times 1.003 keep bits in their low 16: not bfloat16 values
    low = ((x * np.float32(1.003)).astype(np.float32).view(np.uint32) & 0xffff) != 0
    assert low.sum() > 0
    p = run([a, b])
    check('dtype claim contradicted: exit 2', p.returncode == 2, p.returncode)
    check('dtype claim contradicted: the report names file, dataset and claim',
          all(n in p.stdout for n in (b, '/x', 'says bfloat16')), p.stdout[-600:])
    p, r = run_json([a, b])
    t = by_path(r).get('/x', {})
    check('dtype claim contradicted: an error naming the file and the count',
          t.get('verdict') == 'error' and b in t.get('message', '') and
          ('%d of 256' % low.sum()) in t.get('message', ''), t.get('message'))
    # an honest claim: values that are bfloat16 (low 16 bits zero) compare as bfloat16
    bf = (x.view(np.uint32) & 0xffff0000).view(np.float32)
    with h5py.File(b, 'w') as f:
        d = f.create_dataset('/x', data=bf)
        d.attrs['dtype'] = 'bfloat16'
    p, r = run_json([a, b])
    check('an honest bfloat16 claim is no error', p.returncode in (0, 1) and
          by_path(r).get('/x', {}).get('verdict') in ('pass', 'drift'), p.stderr[-400:])


def test_b_coarser_than_the_profile():
    root = fresh('coarse')
    rng = np.random.default_rng(3)
    x = rng.standard_normal(512).astype(np.float32)
    a, b = os.path.join(root, 'a.h5'), os.path.join(root, 'b.h5')
    write_h5(a, {'/x': x})
    write_h5(b, {'/x': (x * np.float32(1.003)).astype(np.float16)})
    p, r = run_json(FP32 + [a, b])
    t = by_path(r).get('/x', {})
    check('B float16 under cpu-vs-cuda-fp32: exit 1', p.returncode == 1, p.stderr[-400:])
    check('B float16 under cpu-vs-cuda-fp32: fails saying B is coarser than the profile',
          t.get('verdict') == 'dtype_mismatch' and 'coarser' in t.get('message', '') and
          'float16' in t.get('message', '') and 'float32' in t.get('message', ''), t)
    # without a profile (torch.testing's defaults) float16 is compared in float16, as before
    p, r = run_json([a, b])
    check('B float16 without a profile: compared in float16',
          by_path(r).get('/x', {}).get('compare_dtype') == 'float16', p.stderr[-400:])


# --- 2. same file, aliased outputs, files that are not regular --------------------------------

def test_same_file():
    root = fresh('same')
    a = os.path.join(root, 'a.h5')
    write_h5(a, {'/x': np.arange(8, dtype=np.float32)})
    os.symlink('a.h5', os.path.join(root, 'link.h5'))
    os.link(a, os.path.join(root, 'hard.h5'))
    for label, other in (('one path', a), ('a symbolic link', os.path.join(root, 'link.h5')),
                         ('a hard link', os.path.join(root, 'hard.h5'))):
        expect_exit('A and B the same file (%s)' % label, run_raw([a, other]), 2, 'the same file',
                    '--allow-same')
    expect_exit('--allow-same', run_raw(['--allow-same', a, a]), 0)
    fa = os.path.join(root, 'fa')
    write_h5(os.path.join(fa, 's.h5'), {'/x': np.arange(8, dtype=np.float32)})
    os.symlink('fa', os.path.join(root, 'fb'))
    expect_exit('A and B the same folder (a link)', run_raw([fa, os.path.join(root, 'fb')]), 2,
                'the same folder')


def test_report_aliases():
    root = fresh('aliases')
    a, b = os.path.join(root, 'a.h5'), os.path.join(root, 'b.h5')
    x = np.arange(8, dtype=np.float32)
    write_h5(a, {'/x': x})
    write_h5(b, {'/x': x})
    before = open(a, 'rb').read()
    expect_exit('--json A', run_raw(['--json', a, a, b]), 2, 'is an input')
    check('--json A: A left as it was', open(a, 'rb').read() == before, '')
    os.symlink('b.h5', os.path.join(root, 'lb.h5'))
    expect_exit('--markdown LINK to B', run(['--markdown', os.path.join(root, 'lb.h5'), a, b]), 2,
                'is an input')
    out = os.path.join(root, 'r.out')
    expect_exit('two reports to one path', run(['--json', out, '--markdown', out, a, b]), 2,
                'two reports')
    expect_exit('three reports to one path (one spelt ./)',
                run(['--json', out, '--html', out, '--junit', os.path.join(root, '.', 'r.out'),
                     a, b]), 2, 'two reports')
    check('no report written', not os.path.exists(out), '')


def test_fifo_where_a_file_is_read_whole():
    root = fresh('fifos')
    a, b = os.path.join(root, 'a.h5'), os.path.join(root, 'b.h5')
    write_h5(a, {'/x': np.arange(8, dtype=np.float32)})
    write_h5(b, {'/x': np.arange(8, dtype=np.float32)})
    fifo = os.path.join(root, 'fifo')
    os.mkfifo(fifo)
    for opt in ('--reference', '--baseline', '--approved'):
        p = subprocess.run([BIN, '--stall-timeout', '30', opt, fifo, a, b], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=20, text=True, errors='replace')
        expect_exit('%s FIFO' % opt, p, 2, 'not a regular file')
    # a tolerance file may be a pipe (-t <(...)): one without a writer reads as empty, at once
    p = subprocess.run([BIN, '--stall-timeout', '30', '-t', fifo, a, b], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=20, text=True, errors='replace')
    expect_exit('-t FIFO without a writer', p, 2, 'missing version')
    profiles = fresh('fifo-profiles')
    os.mkfifo(os.path.join(profiles, 'x.yaml'))
    p = subprocess.run([BIN, '--profile', 'x', a, b], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=20, text=True, errors='replace',
                       env=dict(os.environ, PARITYCHECK_TOLERANCES=profiles))
    expect_exit('--profile naming a FIFO', p, 2, 'not a regular file')


# --- 3. --accept-indeterminate ----------------------------------------------------------------

def test_accept_indeterminate_needs_a_pass():
    root = fresh('indeterminate')
    a, b = random_pair(root, n=4, size=256, seed=5, noise=0.8)
    # B is A plus noise of 0.8 its RMS, beyond a tolerance that allows 150 u of bfloat16 = 0.586
    # of the value: the allowance reaches 1/2, so every tensor is indeterminate (issue 36)
    wide = os.path.join(root, 'wide.yaml')
    with open(wide, 'w') as f:
        f.write('version: 1\ndefaults:\n  float32: {precision: bfloat16, max_rel_rms_u: 150, '
                'max_mismatch_fraction: 1.0}\n')
    tol = ['-t', wide]
    p, r = run_json(tol + [a, b])
    v = [t['verdict'] for t in r['tensors']] if r else []
    check('random B: every tensor indeterminate', v == ['indeterminate'] * 4, v)
    p, r = run_json(tol + ['--accept-indeterminate', a, b])
    check('--accept-indeterminate, nothing within tolerance: exit 1', p.returncode == 1,
          (p.returncode, p.stderr[-400:]))
    check('--accept-indeterminate, nothing within tolerance: verdict drift',
          r is not None and r['verdict'] == 'drift', r and r['verdict'])
    p = run(tol + ['--accept-indeterminate', a, b])
    check('--accept-indeterminate: the summary says why', 'no tensor within tolerance' in p.stdout,
          p.stdout[-400:])


# --- 4. folders: every file is paired ----------------------------------------------------------

def test_folder_names_with_colons():
    root = fresh('colons')
    x = np.arange(8, dtype=np.float32) + 1
    name = 'ckpt_2024-05-01T12:00:00.h5'
    pct = 'p%3A.h5'  # a '%' stays distinct from an escaped ':'
    for side, sign in (('A', 1), ('B', -1)):
        write_h5(os.path.join(root, side, name), {'/w': x * sign})
        write_h5(os.path.join(root, side, pct), {'/w': x})
        write_h5(os.path.join(root, side, 'p:.h5'), {'/w': x})
    p, r = run_json([os.path.join(root, 'A'), os.path.join(root, 'B')])
    t = by_path(r)
    check('a file with ":" is paired, and its negated copy drifts (exit 1)', p.returncode == 1,
          (p.returncode, sorted(t)))
    esc = 'ckpt_2024-05-01T12%3A00%3A00.h5'
    check('its tensor path escapes ":" as %3A', t.get(esc + ':/w', {}).get('verdict') == 'drift',
          sorted(t))
    check('its file field is the escaped name', t.get(esc + ':/w', {}).get('file') == esc, '')
    check('"%" is escaped as %25 and ":" as %3A: three files, three tensors',
          t.get('p%253A.h5:/w', {}).get('verdict') == 'pass' and
          t.get('p%3A.h5:/w', {}).get('verdict') == 'pass' and len(t) == 3, sorted(t))
    os.remove(os.path.join(root, 'B', name))
    p, r = run_json([os.path.join(root, 'A'), os.path.join(root, 'B')])
    check('a file with ":" missing in B is missing_in_b (exit 1)', p.returncode == 1 and
          by_path(r).get(esc, {}).get('verdict') == 'missing_in_b', sorted(by_path(r)))


# --- 5. bounds ----------------------------------------------------------------------------------

def test_widening_parameters_have_maxima():
    root = fresh('bounds')
    for key, value, line, col in (('noise_floor_u', '1.0e300', 5, 20),
                                  ('trend_growth', '1.0e17', 5, 19),
                                  ('atol_rms', '1.0e30', 5, 15)):
        tol = os.path.join(root, key + '.yaml')
        with open(tol, 'w') as f:
            f.write('version: 1\ndefaults:\n  all:\n    precision: float32\n    %s: %s\n'
                    % (key, value))
        a, b = random_pair(fresh('bounds/' + key))
        p = run(['-t', tol, a, b])
        expect_exit('%s: %s' % (key, value), p, 2, '%s:%d:%d:' % (tol, line, col),
                    "'%s' must be <= " % key)


def test_elementwise_off_needs_a_metric_that_can_fail():
    root = fresh('elementwise')
    tol = os.path.join(root, 't.yaml')
    with open(tol, 'w') as f:
        f.write("version: 1\nrules:\n  - match: '/x'\n    elementwise: false\n"
                "    metrics:\n      top1_agreement: {min: 0}\n")
    a, b = os.path.join(root, 'a.h5'), os.path.join(root, 'b.h5')
    write_h5(a, {'/x': np.ones((2, 4), np.float32)})
    write_h5(b, {'/x': np.full((2, 4), np.nan, np.float32)})
    expect_exit('elementwise false, top1_agreement min 0', run(['-t', tol, a, b]), 2,
                '%s:4:18:' % tol, 'cannot fail')


def test_float_against_integer_is_a_dtype_mismatch():
    root = fresh('float-int')
    a, b = os.path.join(root, 'a.h5'), os.path.join(root, 'b.h5')
    write_h5(a, {'/x': np.arange(8, dtype=np.float32)})
    write_h5(b, {'/x': np.arange(8, dtype=np.int32)})
    p, r = run_json([a, b])
    t = by_path(r).get('/x', {})
    check('float32 A vs int32 B: exit 1, dtype_mismatch', p.returncode == 1 and
          t.get('verdict') == 'dtype_mismatch' and 'integer' in t.get('message', ''), t)


def test_nothing_finite_compared():
    root = fresh('nothing-finite')
    a, b = os.path.join(root, 'a.h5'), os.path.join(root, 'b.h5')
    write_h5(a, {'/x': np.full(8, np.nan, np.float32), '/y': np.full(3, np.nan, np.float32)})
    write_h5(b, {'/x': np.full(8, np.nan, np.float32), '/y': np.full(3, np.nan, np.float32)})
    expect_exit('all NaN on both sides', run([a, b]), 2, 'nothing finite was compared',
                '--allow-empty')
    expect_exit('all NaN on both sides, --allow-empty', run(['--allow-empty', a, b]), 0)
    write_h5(a, {'/x': np.zeros((0, 4), np.float32)})
    write_h5(b, {'/x': np.zeros((0, 4), np.float32)})
    expect_exit('every tensor 0 elements', run([a, b]), 2, 'nothing finite was compared')
    write_h5(a, {'/x': np.zeros((0, 4), np.float32), '/i': np.arange(3, dtype=np.int32)})
    write_h5(b, {'/x': np.zeros((0, 4), np.float32), '/i': np.arange(3, dtype=np.int32)})
    expect_exit('an integer tensor compared', run([a, b]), 0)


# --- 8. provenance of the tolerances -------------------------------------------------------------

def test_tolerance_provenance():
    root = fresh('provenance')
    a, b = random_pair(root, n=2)
    tol = os.path.join(root, 'extra.yaml')
    with open(tol, 'w') as f:
        f.write('version: 1\ndefaults:\n  float32: {atol: 10.0}\n')
    p, r = run_json(FP32 + ['-t', tol, a, b])
    s = settings(r)
    prof = os.path.join(SOURCE, 'tolerances', 'cpu-vs-cuda-fp32.yaml')
    want = ['%s sha256:%s' % (path, hashlib.sha256(open(path, 'rb').read()).hexdigest())
            for path in (prof, tol)]
    check('every tolerance file with its SHA-256', s.get('tolerance file') == want,
          (s.get('tolerance file'), want))
    check('no environment override recorded without one', 'PARITYCHECK_TOLERANCES' not in s, s)
    env_dir = fresh('provenance/profiles')
    other = os.path.join(env_dir, 'cpu-vs-cuda-fp32.yaml')
    with open(other, 'w') as f:
        f.write('version: 1\ndefaults:\n  float32: {atol: 100.0}\n')
    p = subprocess.run([BIN, '--json', '-'] + FP32 + [a, b], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=60,
                       env=dict(os.environ, PARITYCHECK_TOLERANCES=env_dir))
    r = json.loads(p.stdout) if p.stdout.startswith('{') else None
    s = settings(r)
    check('$PARITYCHECK_TOLERANCES recorded', s.get('PARITYCHECK_TOLERANCES') == [env_dir], s)
    check('the overriding profile file with its SHA-256', s.get('tolerance file') == [
        '%s sha256:%s' % (other, hashlib.sha256(open(other, 'rb').read()).hexdigest())], s)


# --- 10. non-UTF-8 names stay distinct in JSON -----------------------------------------------

def test_non_utf8_names_in_json():
    root = fresh('json-bytes')
    a, b = os.path.join(root, 'a.h5'), os.path.join(root, 'b.h5')
    for path in (a, b):
        with h5py.File(path, 'w') as f:
            for n in (b'x\xff', b'x\xfe'):
                f.create_dataset(n, data=np.arange(4, dtype=np.float32))
    p, r = run_json([a, b])
    paths = sorted(t['path'] for t in r['tensors']) if r else []
    check('two non-UTF-8 names stay two in JSON, bytes escaped',
          paths == ['/x\\xfe', '/x\\xff'], paths)
    pb = sorted(t.get('path_bytes') for t in r['tensors']) if r else []
    check('their exact bytes in path_bytes', pb == [b'/x\xfe'.hex(), b'/x\xff'.hex()], pb)


# --- baseline: every figure a verdict uses --------------------------------------------------

REAL = os.path.join(SOURCE, 'fixtures', 'real')
CPU_FP32 = os.path.join(REAL, 'attention_cpu_fp32.h5')
CUDA_TF32 = os.path.join(REAL, 'attention_cuda_tf32.h5')


def tampered_tf32(root, negate, scale):
    """The honest TF32 dump with `negate` negated and `scale` times 1.1."""
    path = os.path.join(root, 'b.h5')
    with open(CUDA_TF32, 'rb') as src, open(path, 'wb') as dst:
        dst.write(src.read())
    with h5py.File(path, 'r+') as f:
        f[negate][...] = -f[negate][...]
        f[scale][...] = f[scale][...] * np.float32(1.1)
    return path


def expect_worse(label, profile, base, b, worse):
    p, r = run_json(profile + ['--baseline', base, CPU_FP32, b])
    check('%s: exit 1' % label, p.returncode == 1, (p.returncode, p.stderr[-600:]))
    gate = {path: t.get('baseline', {}) for path, t in by_path(r).items()}
    got = sorted(path for path, g in gate.items() if g.get('change') == 'worse' and g['fails_gate'])
    check('%s: exactly %s fail the gate as worse' % (label, worse), got == sorted(worse), got)


def test_baseline_watches_structure_and_aggregates():
    root = fresh('baseline-figures')
    base = os.path.join(root, 'base.json')
    # Under the default profile the honest TF32 run drifts: /activations/009_fc2 and 007_fc1
    # already mismatch in 89 % and 95 % of their elements, with max_ulp near 2^31, so negation
    # and x1.1 cannot grow the mismatch fraction, max_ulp or NaN counts twofold. Negation is a
    # structure the baseline did not hold; x1.1 makes rel_rms about 0.1, far beyond twice the
    # honest 3e-4 (and |scale_error| 0.1 beyond twice ~1e-6).
    p = run(['--save-baseline', base, CPU_FP32, CUDA_TF32])
    check('honest TF32 baseline saved (exit 1: it drifts)', p.returncode == 1, p.stderr[-600:])
    saved = by_path(json.load(open(base))) if os.path.exists(base) else {}
    fc2 = saved.get('/activations/009_fc2', {})
    check('the baseline records rel_rms, scale_error, diagnosis and structural',
          all(k in fc2 for k in ('rel_rms', 'scale_error', 'diagnosis', 'structural')), fc2)
    p = run(['--baseline', base, CPU_FP32, CUDA_TF32])
    check('the honest run against its own baseline: exit 0', p.returncode == 0, p.stderr[-600:])
    negate, scale = '/activations/009_fc2', '/activations/007_fc1'
    b = tampered_tf32(root, negate, scale)
    expect_worse('negated + x1.1 against a drifting baseline', [], base, b, [negate, scale])
    # --profile tf32: the honest run passes, so both are worse as new failures
    base_tf32 = os.path.join(root, 'base-tf32.json')
    p = run(['--profile', 'tf32', '--save-baseline', base_tf32, CPU_FP32, CUDA_TF32])
    check('honest TF32 baseline under --profile tf32 saved', p.returncode == 0, p.stderr[-600:])
    expect_worse('negated + x1.1 under --profile tf32', ['--profile', 'tf32'], base_tf32, b,
                 [negate, scale])
    # A file written before the new figures: they are unknown. The structure is not in it, so
    # the negation is still worse; the x1.1 (no structure proven under this profile) is judged
    # by the old figures alone, which it does not grow.
    old = os.path.join(root, 'old.json')
    doc = json.load(open(base))
    for t in doc['tensors']:
        for k in ('rel_rms', 'scale_error', 'diagnosis', 'structural'):
            t.pop(k, None)
    json.dump(doc, open(old, 'w'))
    p = run(['--baseline', old, CPU_FP32, CUDA_TF32])
    check('an old baseline still loads; the honest run: exit 0', p.returncode == 0,
          p.stderr[-600:])
    expect_worse('negated + x1.1 against an old baseline', [], old, b, [negate])


# --- reference: R must be finer than A and B, and not B ------------------------------------

def test_reference_must_be_finer():
    root = fresh('reference-finer')
    # B: the honest TF32 dump with 2 % multiplicative noise in two tensors (drift under tf32)
    b = os.path.join(root, 'b.h5')
    with open(CUDA_TF32, 'rb') as src, open(b, 'wb') as dst:
        dst.write(src.read())
    rng = np.random.default_rng(5)
    with h5py.File(b, 'r+') as f:
        for n in ('activations/005_proj', 'activations/009_fc2'):
            x = f[n][...]
            f[n][...] = (x * (1 + 0.02 * rng.standard_normal(x.shape))).astype(np.float32)
    copy = os.path.join(root, 'r.h5')
    with open(b, 'rb') as src, open(copy, 'wb') as dst:
        dst.write(src.read())
    tf32 = ['--profile', 'tf32']
    expect_exit('R a copy of B', run(tf32 + ['--reference', copy, CPU_FP32, b]), 2,
                'the reference is B')
    expect_exit('R the file B', run(tf32 + ['--reference', b, CPU_FP32, b]), 2,
                'the reference is B')
    # float64 R holding B's values: finer by dtype, but B's values all the same
    r64 = os.path.join(root, 'r64.h5')
    with h5py.File(b, 'r') as src, h5py.File(r64, 'w') as dst:
        names = []
        src.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
        for n in names:
            dst.create_dataset(n, data=src[n][...].astype(np.float64))
    expect_exit('R a float64 copy of B', run(tf32 + ['--reference', r64, CPU_FP32, b]), 2,
                'the reference is B')
    # float32 R for float32 A and B: A itself, honest but no finer
    expect_exit('R float32 like A and B', run(tf32 + ['--reference', CPU_FP32, CPU_FP32, b]), 2,
                'not finer than A and B', 'R float32')
    p = run(tf32 + ['--reference', os.path.join(REAL, 'attention_cpu_fp64.h5'), CPU_FP32, b])
    check('an honest fp64 R still judges: exit 1, no error', p.returncode == 1 and
          'reference' not in p.stderr, (p.returncode, p.stderr[-600:]))


def main():
    global BIN, WORK
    BIN, WORK = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    cli_common.setup(BIN, WORK)
    os.makedirs(WORK, exist_ok=True)
    return run_tests([test_b_reduction_length_is_ignored, test_a_and_b_disagree,
                      test_b_module_type_selects_no_rule, test_dtype_claim_the_data_contradicts,
                      test_b_coarser_than_the_profile, test_same_file, test_report_aliases,
                      test_fifo_where_a_file_is_read_whole, test_accept_indeterminate_needs_a_pass,
                      test_folder_names_with_colons, test_widening_parameters_have_maxima,
                      test_elementwise_off_needs_a_metric_that_can_fail,
                      test_float_against_integer_is_a_dtype_mismatch, test_nothing_finite_compared,
                      test_tolerance_provenance, test_non_utf8_names_in_json,
                      test_baseline_watches_structure_and_aggregates,
                      test_reference_must_be_finer])


if __name__ == '__main__':
    sys.exit(main())
