#!/usr/bin/python3
"""Writes the benchmark's HDF5 files (scripts/bench) into DIR, skipping files already there.

Each case is a pair A/B of files holding 16 datasets; B is A with honest drift (a relative
perturbation of a few float32 ULPs on most elements), so that every figure has work to do.
  f32     2 x 1 GiB float32, contiguous            (the issue's reference case)
  bf16    2 x 512 MiB float32 tagged dtype="bfloat16" (values rounded to bfloat16)
  f16     2 x 512 MiB float16
  gzip    2 x 256 MiB float32, chunked, gzip level 1 + shuffle
Usage: bench_gen.py DIR [--scale S]  (S multiplies the sizes; 1 = as above)
"""
import os
import sys

import h5py
import numpy as np

DATASETS = 16
CASES = {  # name: (MiB per file, numpy dtype, h5py keyword arguments)
    'f32': (1024, np.float32, {}),
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


def main():
    out = sys.argv[1]
    scale = float(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[2] == '--scale' else 1.0
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(20261122)
    for name, (mib, dtype, kwargs) in CASES.items():
        pair(name, max(1, int(mib * scale)), dtype, kwargs, out, rng)


if __name__ == '__main__':
    main()
