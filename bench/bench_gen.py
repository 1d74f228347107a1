#!/usr/bin/python3
"""Writes the benchmark's HDF5 files (bench/bench) into DIR, skipping files already there.

Each case is a pair A/B of files holding 16 datasets; B is A with honest drift (a relative
perturbation of a few float32 ULPs on most elements), so that every figure has work to do.
  f32     2 x 1 GiB float32, contiguous            (the issue's reference case: mostly different)
  f32eq   2 x 1 GiB float32, contiguous, B = A except about 10 % of the elements one ULP away
          (mostly equal: h5diff's time depends on how many elements differ)
  bf16    2 x 512 MiB float32 tagged dtype="bfloat16" (values rounded to bfloat16)
  f16     2 x 512 MiB float16
  gzip    2 x 256 MiB float32, chunked, gzip level 1 + shuffle
Usage: bench_gen.py DIR [--scale S] [--cases C,...]  (S multiplies the sizes; 1 = as above;
                                                       C: the cases to write, default all)
       bench_gen.py DIR --large GIB      (bench/bench_large: one float32 dataset of GIB GiB
                                          per file, mostly holes; see large_pair)
       bench_gen.py DIR --check-large REPORT   (the report's figures against numpy)
"""
import argparse
import json
import os
import sys

import h5py
import numpy as np

DATASETS = 16
CASES = {  # name: (MiB per file, numpy dtype, h5py keyword arguments)
    'f32': (1024, np.float32, {}),
    'f32eq': (1024, np.float32, {}),
    'bf16': (512, np.float32, {}),
    'f16': (512, np.float16, {}),
    'gzip': (256, np.float32, {'chunks': (1 << 16,), 'compression': 'gzip',
                               'compression_opts': 1, 'shuffle': True}),
}


def to_bf16(x):
    """Round float32 values to bfloat16 (nearest even) and back to float32."""
    bits = x.view(np.uint32)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return rounded.astype(np.uint32).view(np.float32)


def pair(name, mib, dtype, kwargs, out, rng):
    pa, pb = (os.path.join(out, '%s_%s.h5' % (name, s)) for s in 'ab')
    if os.path.exists(pa) and os.path.exists(pb):
        return
    n = mib * (1 << 20) // np.dtype(dtype).itemsize // DATASETS
    with h5py.File(pa + '.tmp', 'w') as fa, h5py.File(pb + '.tmp', 'w') as fb:
        for i in range(DATASETS):
            a = rng.standard_normal(n, dtype=np.float32)
            if name == 'f32eq':
                b = a.copy()
                moved = rng.random(n) < 0.1
                b[moved] = np.nextafter(a[moved], np.float32(np.inf))
            else:
                b = a * (1 + rng.standard_normal(n, dtype=np.float32) * np.float32(2e-7))
            if name == 'bf16':
                a, b = to_bf16(a), to_bf16(b)
            a, b = a.astype(dtype), b.astype(dtype)
            fa.create_dataset('t%02d' % i, data=a, **kwargs)
            fb.create_dataset('t%02d' % i, data=b, **kwargs)
            if name == 'bf16':
                fa['t%02d' % i].attrs['dtype'] = 'bfloat16'
                fb['t%02d' % i].attrs['dtype'] = 'bfloat16'
    os.replace(pa + '.tmp', pa)
    os.replace(pb + '.tmp', pb)


LARGE_STRIDE = 1 << 26  # elements between two written stretches (256 MiB of float32)
LARGE_WRITTEN = 1 << 20  # elements written at each stretch (4 MiB)


def large_stretches(n):
    """The first elements of the written stretches of a large dataset of n elements."""
    return range(0, n - LARGE_WRITTEN + 1, LARGE_STRIDE)


def large_pair(gib, out, rng):
    """One contiguous float32 dataset of GIB GiB per file, larger than the machine's RAM but
    cheap on disk: HDF5 allocates contiguous storage at the first write and writes only what
    it is given, so the file is sparse and the unwritten stretches read as zeros (identical on
    both sides). Every LARGE_STRIDE elements, LARGE_WRITTEN elements hold data with honest
    drift in B, so the comparison has mismatching work all along the dataset."""
    pa, pb = (os.path.join(out, 'large_%s.h5' % s) for s in 'ab')
    n = gib * (1 << 30) // 4
    with h5py.File(pa, 'w') as fa, h5py.File(pb, 'w') as fb:
        da = fa.create_dataset('t', shape=(n,), dtype=np.float32)
        db = fb.create_dataset('t', shape=(n,), dtype=np.float32)
        for start in large_stretches(n):
            a = rng.standard_normal(LARGE_WRITTEN, dtype=np.float32)
            b = a * (1 + rng.standard_normal(LARGE_WRITTEN, dtype=np.float32) * np.float32(2e-7))
            da[start:start + LARGE_WRITTEN] = a
            db[start:start + LARGE_WRITTEN] = b.astype(np.float32)


def large_check(out, report):
    """Checks the report of the large pair against numpy on the written stretches only:
    element count, maximum abs error and its first index, mean abs error and RMS."""
    with open(report) as f:
        t = json.load(f)['tensors'][0]
    with h5py.File(os.path.join(out, 'large_a.h5')) as fa, \
            h5py.File(os.path.join(out, 'large_b.h5')) as fb:
        n = fa['t'].shape[0]
        best, best_at, sum_abs, sum_sq = -1.0, 0, 0.0, 0.0
        for start in large_stretches(n):
            a = fa['t'][start:start + LARGE_WRITTEN].astype(np.float64)
            d = np.abs(fb['t'][start:start + LARGE_WRITTEN].astype(np.float64) - a)
            if d.max() > best:
                best, best_at = d.max(), start + int(d.argmax())
            sum_abs += d.sum()
            sum_sq += (d * d).sum()
    want = {'count': n, 'max_abs': best, 'worst': best_at,
            'mean_abs': sum_abs / n, 'rms': np.sqrt(sum_sq / n)}
    got = {'count': t['count'], 'max_abs': t['max_abs'], 'worst': t['worst']['index'][0],
           'mean_abs': t['mean_abs'], 'rms': t['rms']}
    ok = all(np.isclose(got[k], want[k], rtol=1e-9, atol=0) for k in want)
    print('numpy check (written stretches):', 'agrees' if ok else 'DISAGREES', got, want)
    sys.exit(0 if ok else 1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('dir')
    ap.add_argument('--scale', type=float, default=1.0)
    ap.add_argument('--large', type=int, metavar='GIB')
    ap.add_argument('--check-large', metavar='REPORT')
    ap.add_argument('--cases', default=','.join(CASES))
    args = ap.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    rng = np.random.default_rng(20261122)
    if args.check_large:
        large_check(args.dir, args.check_large)
        return
    if args.large:
        large_pair(args.large, args.dir, rng)
        return
    for name in args.cases.split(','):
        if name not in CASES:
            sys.exit('bench_gen.py: no case %r (cases: %s)' % (name, ', '.join(CASES)))
        mib, dtype, kwargs = CASES[name]
        # Seeded per case, so that a case's files do not depend on which others are written.
        seed = [20261122, list(CASES).index(name)]
        pair(name, max(1, int(mib * args.scale)), dtype, kwargs, args.dir,
             np.random.default_rng(seed))


if __name__ == '__main__':
    main()
