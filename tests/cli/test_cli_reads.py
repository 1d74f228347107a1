#!/usr/bin/python3
"""End-to-end tests of the paritycheck binary (test_cli.py's part): the same results however the
data are read. Files on which HDF5 itself crashes or loops, --block-elems and -j (the JSON and
every report), contiguous datasets read directly against chunked and compact ones, partly
written datasets folded from their fill values, and quantiles computed only where shown.

    /usr/bin/python3 tests/cli/test_cli_reads.py PATH/TO/paritycheck FIXTURES_DIR

Prints one line per failure and a last line "N passed, M failed"; the exit status is 1 when
anything failed.
"""

import json
import os
import subprocess
import sys

import h5py
import numpy as np

import cli_pairs as fixture  # first: it puts tests/ on the path
from checks import check  # noqa: E402
from cli_pairs import (HERE, REFERENCE, STRICT, env, pair_paths, run, run_json,  # noqa: E402
                       run_report, short)


# ------------------------------------------------------------------------------------------
# Faults of HDF5 itself
# ------------------------------------------------------------------------------------------


FAULTS = os.path.join(HERE, '..', 'fuzz', 'known-hdf5-faults')


def test_hdf5_faults_isolated():
    """Files on which HDF5 1.10.8 itself crashes or loops: exit 2 with the reason, in bounded
    time, instead of a crash or a hang (src/cli/isolate.c)."""
    other = os.path.join(fixture.FIX, 'pass_a.h5')
    crash = os.path.join(FAULTS, 'chunk-dimension-zero-sigfpe.h5')
    p = subprocess.run([fixture.BIN, crash, other], capture_output=True, text=True, timeout=120,
                       env=env())
    check('HDF5 crash: exit 2', p.returncode == 2, short(p))
    check('HDF5 crash: says so and names the file',
          'the comparison crashed' in p.stderr and crash in p.stderr, p.stderr[-500:])
    loop = os.path.join(FAULTS, 'global-heap-endless-loop.h5')
    p = subprocess.run([fixture.BIN, '--stall-timeout', '2', loop, other], capture_output=True,
                       text=True, timeout=120, env=env())
    check('HDF5 endless loop: exit 2', p.returncode == 2, short(p))
    check('HDF5 endless loop: stopped for want of progress',
          'no progress for 2 s' in p.stderr and loop in p.stderr, p.stderr[-500:])


# ------------------------------------------------------------------------------------------
# Blocks and threads
# ------------------------------------------------------------------------------------------


# Figures built from double sums, which add per read block (docs/metrics.md, "Aggregate
# sums"): another block size may change their last bits, so they get a relative slack; every
# other field must be identical.
BLOCK_ROUNDED = {'mean_abs', 'mean_rel', 'rms', 'rel_rms', 'cosine', 'snr_db', 'scale_error',
                 'rms_a', 'rms_b', 'trend', 'noise_scale',  # these four: the judge's context
                 'value', 'statistic', 'limit'}  # reasons and diagnosis, from the same sums


def _same_up_to_sum_rounding(x, y, key=None):
    if isinstance(x, dict) and isinstance(y, dict):
        return x.keys() == y.keys() and all(_same_up_to_sum_rounding(x[k], y[k], k) for k in x)
    if isinstance(x, list) and isinstance(y, list):
        return len(x) == len(y) and all(_same_up_to_sum_rounding(u, v, key) for u, v in zip(x, y))
    if key in BLOCK_ROUNDED and isinstance(x, float) and isinstance(y, float):
        return x == y or abs(x - y) <= 1e-12 * max(abs(x), abs(y))
    return x == y


def test_block_elems():
    for pair in ('dtypes', 'layouts', 'pass'):
        _, base = run_json(pair)
        for n in ('7', '1', '4096'):
            p, rep = run_json(pair, ['--block-elems', n])
            check('--block-elems %s (%s): exit' % (n, pair),
                  p.returncode == fixture.EXPECTED['pairs'][pair]['exit'], short(p))
            same = rep is not None and base is not None and _same_up_to_sum_rounding(rep, base)
            detail = ''
            if not same and rep and base:
                diff = [t1.get('path') for t1, t2 in zip(base.get('tensors', []),
                                                         rep.get('tensors', []))
                        if not _same_up_to_sum_rounding(t1, t2)]
                detail = 'tensors differ: %r' % diff
            check('--block-elems %s (%s): JSON identical to default' % (n, pair), same, detail)


def test_threads_identical():
    """Results do not depend on the number of worker threads, not even in the last bit."""
    for pair in ('dtypes', 'layouts', 'pass'):
        for n in ('7', '4096'):
            _, one = run_json(pair, ['--block-elems', n, '-j', '1'])
            for j in ('2', '3'):
                _, many = run_json(pair, ['--block-elems', n, '-j', j])
                check('-j %s vs -j 1, --block-elems %s (%s): JSON identical' % (j, n, pair),
                      one is not None and one == many)


def test_reports_threads_identical():
    """Every report is the same bytes whatever -j: their rows are formatted on -j threads and
    written in order (src/lib/report/ordered.c). Real dumps with cascades (fp16 autocast against
    fp32) and a pass; text plain, quiet (root causes first) and verbose."""
    real = os.path.join(HERE, '..', '..', 'fixtures', 'real')
    pairs = [('attention_cpu_fp32.h5', 'attention_cuda_fp16.h5'),
             ('mixer_cpu_fp32.h5', 'mixer_cuda_fp32.h5')]
    files = ('json', 'md', 'xml', 'html')
    for a, b in pairs:
        for mode in ([], ['-q'], ['-v']):
            got = {}
            for j in ('1', '2', '5'):
                out = os.path.join(fixture.TMP, 'threads_%s_%s' % (a, j))
                args = ['-j', j, '--json', out + '.json', '--markdown', out + '.md',
                        '--junit', out + '.xml', '--html', out + '.html']
                proc = run(args + mode + [os.path.join(real, a), os.path.join(real, b)])
                texts = [proc.stdout]
                for ext in files:
                    with open('%s.%s' % (out, ext)) as fh:
                        texts.append(fh.read())
                got[j] = (proc.returncode, texts)
            label = '%s vs %s %s' % (a, b, ' '.join(mode) or 'plain')
            # -q on a pass prints the summary alone
            rows = 0 if mode == ['-q'] and got['1'][0] == 0 else 10
            check('%s: reports written, text has rows' % label,
                  got['1'][0] in (0, 1) and got['1'][1][0].count('\n') > rows, got['1'][0])
            for j in ('2', '5'):
                check('%s: -j %s, every report identical to -j 1' % (label, j),
                      got[j] == got['1'])


def test_quantiles_on_demand():
    """Quantiles are computed only when a report shows them (-v, JSON, Markdown, HTML). Every
    other output is byte-identical with and without them: the text report, JUnit and the
    baseline file, each written once by a run that computes quantiles (it also writes JSON) and
    once by one that does not; and the JSON run does carry quantiles."""
    for pair in fixture.EXPECTED['pairs']:
        a, b = pair_paths(pair)
        outs = {}
        for label, extra in (('without', []),
                             ('with', ['--json', os.path.join(fixture.TMP, 'q.json')])):
            junit, base = (os.path.join(fixture.TMP, 'q_%s.%s' % (label, e))
                           for e in ('xml', 'json'))
            p = run(['-t', STRICT, '--block-elems', '7', '--junit', junit, '--save-baseline',
                     base] + extra + [a, b])
            with open(junit) as fj, open(base) as fb:
                outs[label] = (p.returncode, p.stdout, fj.read(), fb.read())
        check('%s: exit, text, JUnit and baseline identical with and without quantiles' % pair,
              outs['with'] == outs['without'],
              [k for k, x, y in zip(('exit', 'text', 'junit', 'baseline'), outs['with'],
                                    outs['without']) if x != y])
        with open(os.path.join(fixture.TMP, 'q.json')) as fh:
            rep = json.load(fh)
        compared = [t for t in rep['tensors'] if t['verdict'] in ('pass', 'drift')]
        check('%s: the JSON run has quantiles for every compared tensor' % pair,
              all('quantiles' in t for t in compared), [t['path'] for t in compared])


# ------------------------------------------------------------------------------------------
# Direct reads (docs/performance.md, "Direct reads")
# ------------------------------------------------------------------------------------------


def _direct_tensors():
    """(name, A, B, chunk shape, attributes): odd sizes, so that blocks are partial; NaN, +-inf,
    -0 and subnormals on both sides, some in the same places and some not. Every chunk is longer
    than 4 blocks of --block-elems 7 and 33 along the dimension the blocks step through, so
    chunked files are cut in exactly the blocks of contiguous ones (src/lib/load/loader.c,
    pc_reader_plan) and even the double sums must agree to the bit."""
    rng = np.random.default_rng(20)
    special32 = [np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-45, -1e-40, np.finfo(np.float32).tiny]
    a32 = rng.standard_normal(1001).astype(np.float32)
    a32[:8] = special32
    b32 = a32 + (rng.standard_normal(1001) * 2e-6).astype(np.float32)
    b32[:8] = [np.nan, -np.inf, np.inf, 0.0, -0.0, 3e-45, -1e-40, 0.0]
    b32[500] = np.nan
    a64 = rng.standard_normal(777)
    a64[:6] = [np.nan, np.inf, -0.0, 5e-324, -2e-310, np.finfo(np.float64).tiny]
    b64 = a64 * (1 + rng.standard_normal(777) * 1e-15)
    b64[:6] = [np.nan, np.inf, 0.0, 1e-323, -2e-310, 0.0]
    ai = rng.integers(-2 ** 31, 2 ** 31, 513, dtype=np.int32)
    bi = ai.copy()
    bi[::50] += 3
    a2 = rng.standard_normal((37, 29)).astype(np.float32)
    b2 = a2 * np.float32(1 + 1e-6)
    b2[3, 4] = -a2[3, 4]
    ac = (rng.standard_normal(301) + 1j * rng.standard_normal(301)).astype(np.complex64)
    bc = ac + np.complex64(1e-6 - 1e-6j)
    # tagged bfloat16: values that are bfloat16 values (low 16 bits zero), else the tag would be
    # an error (a dtype claim its values contradict, issue 38)
    to_bf16 = lambda x: (x.view(np.uint32) & np.uint32(0xffff0000)).view(np.float32)  # noqa: E731
    af = to_bf16(a32.copy())
    bf = a32.copy()
    bf[10:20] *= np.float32(1.01)
    bf = to_bf16(bf)
    return [
        ('f32', a32, b32, (300,), {}),
        ('f32_same', a32, a32.copy(), (300,), {}),
        ('f32_be', a32.astype('>f4'), b32.astype('>f4'), (300,), {}),
        ('bf16_tagged', af, bf, (300,), {'dtype': 'bfloat16'}),
        ('f64', a64, b64, (300,), {}),
        ('i32', ai, bi, (300,), {}),
        ('m2d', a2, b2, (16, 29), {}),
        ('c64', ac, bc, (300,), {}),
    ]


def _create_compact(f, name, data):
    """A dataset whose values live in its object header (compact layout): h5py's high-level API
    cannot make one."""
    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    dcpl.set_layout(h5py.h5d.COMPACT)
    space = h5py.h5s.create_simple(data.shape)
    dsid = h5py.h5d.create(f.id, name.encode(), h5py.h5t.py_create(data.dtype), space, dcpl=dcpl)
    dsid.write(h5py.h5s.ALL, h5py.h5s.ALL, np.ascontiguousarray(data))
    return h5py.Dataset(dsid)


def _write_direct(path, tensors, side, layout):
    kw = {'userblock_size': 512} if layout == 'userblock' else {}
    with h5py.File(path, 'w', libver='earliest', **kw) as f:
        for name, a, b, chunks, attrs in tensors:
            data = a if side == 'a' else b
            if layout == 'compact':
                d = _create_compact(f, name, data)
            else:
                d = f.create_dataset(name, data=data,
                                     chunks=chunks if layout == 'chunked' else None)
            d.attrs.update(attrs)
            if layout == 'compact':  # no address: the walk reads its creation properties
                check('direct: compact %s has no offset' % name, d.id.get_offset() is None)
            elif layout != 'chunked':  # the precondition of the direct path
                check('direct: %s %s is contiguous at a known offset' % (layout, name),
                      d.id.get_offset() is not None and d.chunks is None)


def test_direct_reads():
    """Contiguous datasets are read from the file by the workers; chunked and compact ones are
    read by HDF5. All must give the same report, tensor for tensor, with one side direct or both,
    for any -j."""
    tensors = _direct_tensors()
    files = {}
    for layout in ('contiguous', 'userblock', 'chunked', 'compact'):
        for side in 'ab':
            files[layout, side] = os.path.join(fixture.TMP, 'direct_%s_%s.h5' % (layout, side))
            _write_direct(files[layout, side], tensors, side, layout)
    pairs = (('chunked', 'chunked'), ('contiguous', 'contiguous'), ('userblock', 'userblock'),
             ('contiguous', 'chunked'), ('chunked', 'contiguous'), ('compact', 'compact'),
             ('compact', 'contiguous'), ('chunked', 'compact'))
    for block in ('7', '33'):
        want = None
        for la, lb in pairs:
            for j in ('1', '2'):
                label = 'direct: %s vs %s, --block-elems %s, -j %s' % (la, lb, block, j)
                out = os.path.join(fixture.TMP, 'direct_%s_%s_%s_%s.json' % (la, lb, block, j))
                p = run(['-t', STRICT, '--block-elems', block, '-j', j, '--json', out,
                         files[la, 'a'], files[lb, 'b']])
                check('%s: exit 1' % label, p.returncode == 1, short(p))
                try:
                    with open(out) as fh:
                        got = json.load(fh)['tensors']
                except (OSError, ValueError, KeyError) as e:
                    check('%s: JSON report' % label, False, e)
                    continue
                verdicts = {t['path']: t['verdict'] for t in got}
                check('%s: every tensor compared' % label,
                      sorted(verdicts) == sorted('/' + t[0] for t in tensors) and
                      set(verdicts.values()) <= {'pass', 'drift'}, repr(verdicts))
                if want is None:
                    want = got
                    continue
                diff = [t1['path'] for t1, t2 in zip(want, got) if t1 != t2]
                check('%s: tensors identical to chunked vs chunked, -j 1' % label,
                      want == got, 'differ: %r' % diff)


# ------------------------------------------------------------------------------------------
# Partly written datasets (docs/robustness.md, "Unwritten elements")
# ------------------------------------------------------------------------------------------


def _partly_written():
    """(name, shape, chunks, dtype, fill of A, fill of B, boxes A writes, boxes B writes; None:
    B written whole). The sides write different chunks, some overlapping, and their fill values
    differ, so unwritten elements drift too. Values are multiples of 1/8 of at most 8 (integers
    for i32), so that every double sum is exact and reports can be compared to the bit."""
    return [
        ('f32', (10000,), (100,), 'f4', 1.0, 1.25,
         [np.s_[200:300], np.s_[5000:5050]], [np.s_[250:350], np.s_[9900:10000]]),
        ('f64_2d', (300, 40), (16, 8), 'f8', 0.0, -0.5,
         [np.s_[20:40, 8:24]], [np.s_[100:101, :], np.s_[290:300, 32:40]]),
        ('i32_3d', (20, 10, 6), (4, 5, 3), 'i4', 3, 7,
         [np.s_[4:8, 0:5, 0:3]], [np.s_[16:20, 5:10, 3:6]]),
        ('b_never', (5000,), (64,), 'f4', 2.0, 2.0, [np.s_[0:100]], []),
        ('b_full', (3000,), (128,), 'f4', 0.0, 0.0, [np.s_[1000:1100]], None),
        ('f16_same', (4096,), (64,), 'f2', 0.5, 0.5, [np.s_[64:200]], [np.s_[64:200]]),
    ]


def _write_partly(path, dense_path, side, rng):
    """The partly written datasets of one side, and a dense twin: the same values (as h5py reads
    them, fill values included) written whole, contiguous."""
    with h5py.File(path, 'w') as f:
        for name, shape, chunks, dt, fa, fb, boxes_a, boxes_b in _partly_written():
            boxes = boxes_a if side == 'a' else boxes_b
            d = f.create_dataset(name, shape=shape, chunks=chunks, dtype=dt,
                                 fillvalue=fa if side == 'a' else fb)
            for box in (boxes if boxes is not None else [np.s_[...]]):
                shp = d[box].shape
                vals = rng.integers(-64, 65, shp)
                if name == 'f16_same':  # the same values on both sides
                    vals = np.arange(np.prod(shp)).reshape(shp) % 129 - 64
                d[box] = vals if dt == 'i4' else vals / 8
            if name == 'f32' and side == 'a':
                d[5001] = np.nan  # a nan mismatch inside a written chunk
    with h5py.File(path, 'r') as f, h5py.File(dense_path, 'w') as g:
        for name in f:
            g.create_dataset(name, data=f[name][()])


def test_partly_written():
    """Partly written chunked datasets: what neither side wrote is folded from the fill values
    without reading. Every figure must be numpy's on the full arrays (pc_reference check reads
    them through h5py, fill values included), the same as for dense twins of the same values,
    for any -j (to the bit) and any --block-elems (up to the rounding of double sums); the
    magnitude pass of --profile cpu-vs-cuda-fp32 (atol from A's RMS) too."""
    rng = np.random.default_rng(7)
    f = {}
    for kind in ('sparse', 'dense'):
        for side in 'ab':
            f[kind, side] = os.path.join(fixture.TMP, 'partly_%s_%s.h5' % (kind, side))
    for side in 'ab':
        _write_partly(f['sparse', side], f['dense', side], side, rng)
    reports = {}
    for tol in (['-t', STRICT], ['--profile', 'cpu-vs-cuda-fp32']):
        for block in ([], ['--block-elems', '7']):
            for j in ('1', '2'):
                for kind in ('sparse', 'dense'):
                    key = (tol[1] != STRICT, len(block) > 0, j, kind)
                    label = 'partly written: %s %s -j %s %s' % (tol[-1].split('/')[-1],
                                                                ' '.join(block), j, kind)
                    out = os.path.join(fixture.TMP, 'partly_%d_%d_%s_%s.json' % key)
                    p, rep = run_report(tol + block + ['-j', j, f[kind, 'a'], f[kind, 'b']],
                                         out)
                    check('%s: exit 1' % label, p.returncode == 1, short(p))
                    reports[key] = rep
                    if kind == 'sparse' and j == '1':
                        rp = subprocess.run([sys.executable, REFERENCE, 'check', out,
                                             f[kind, 'a'], f[kind, 'b']], stdout=subprocess.PIPE,
                                            stderr=subprocess.STDOUT, text=True, timeout=300)
                        check('%s: numpy agrees' % label, rp.returncode == 0, rp.stdout[-3000:])
    for key, rep in reports.items():
        prof, small, j, kind = key
        name = 'partly written (profile %s, small blocks %s, -j %s, %s)' % key
        if rep is None:
            check(name + ': JSON report', False)
            continue
        # A failing comparison is drift or, where B keeps no digit of A, indeterminate.
        verdicts = {t['path']: 'drift' if t['verdict'] == 'indeterminate' else t['verdict']
                    for t in rep['tensors']}
        want = {'/' + t[0]: 'drift' for t in _partly_written()}
        want['/f16_same'] = 'pass'
        if prof:  # the profile's own verdicts: only that every tensor was compared
            want = {p: verdicts.get(p) if verdicts.get(p) in ('pass', 'drift') else 'compared'
                    for p in want}
        check(name + ': every tensor compared', verdicts == want, repr(verdicts))
        if j == '2':
            check(name + ': identical to -j 1', rep == reports[prof, small, '1', kind])
        if kind == 'sparse':
            check(name + ': same as the dense twins',
                  _same_up_to_sum_rounding(rep, _renamed(reports[key[:3] + ('dense',)], rep)))
        if small:
            check(name + ': same as default blocks',
                  _same_up_to_sum_rounding(rep, reports[prof, False, j, kind]))


def _renamed(rep, like):
    """rep with the file names of `like`, for comparing reports of different files."""
    if rep is None or like is None:
        return rep
    rep = dict(rep)
    rep['a'], rep['b'] = like['a'], like['b']
    return rep


def test_partly_written_giant():
    """2^36 float32 elements declared, in chunks of 2^16, one chunk written in A and two in B,
    both filled with 0.5: compared in seconds, not the hours that reading 2^36 elements takes.
    A writes 1 .. 10 at 2^35 .. 2^35 + 9; B writes 100 at 2^35 + 5 and -1 at the last element.
    By hand: 11 mismatches (the default float32 tolerance, atol 1e-5); the worst is 2^35 + 5
    (a = 6, b = 100, abs 94, rel 94/6); the largest rel is that one too (others: 0.5/1 ...
    9.5/10 and 1.5/0.5 = 3)."""
    import time
    n, at = 1 << 36, 1 << 35
    paths = [os.path.join(fixture.TMP, 'giant_%s.h5' % s) for s in 'ab']
    for path, writes in zip(paths, ([(slice(at, at + 10), np.arange(1, 11))],
                                    [(at + 5, 100), (n - 1, -1)])):
        with h5py.File(path, 'w') as f:
            d = f.create_dataset('x', shape=(n,), chunks=(1 << 16,), dtype='f4', fillvalue=0.5)
            for where, v in writes:
                d[where] = v
    for j in ('1', '2'):
        t0 = time.monotonic()
        p, rep = run_report(['-j', j] + paths, os.path.join(fixture.TMP, 'giant_%s.json' % j))
        took = time.monotonic() - t0
        label = 'partly written giant -j %s' % j
        check('%s: exit 1' % label, p.returncode == 1, short(p))
        check('%s: in seconds' % label, took < 20, '%.1f s' % took)
        t = rep['tensors'][0] if rep else {}
        got = (t.get('count'), t.get('mismatches'), t.get('max_abs'), t.get('max_rel'),
               (t.get('worst') or {}).get('index'), (t.get('worst') or {}).get('b'))
        check('%s: figures by hand' % label, got == (n, 11, 94.0, 94 / 6, [at + 5], 100.0),
              repr(got))


TESTS = [
    test_hdf5_faults_isolated,
    test_threads_identical,
    test_block_elems,
    test_direct_reads,
    test_partly_written,
    test_partly_written_giant,
    test_quantiles_on_demand,
    test_reports_threads_identical,
]


if __name__ == '__main__':
    sys.exit(fixture.main(sys.argv[1:], TESTS, 'test_cli_reads.py'))
