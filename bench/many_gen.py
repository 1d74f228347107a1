#!/usr/bin/python3
"""Writes the many-small-tensors benchmark pair (bench/bench_many) into DIR: N float32 tensors
of 256 to 4,096 elements each, in groups of 100, A and B = A drifted by about 1e-7 relative,
as the performance issue describes. Skips a pair already there.
Usage: many_gen.py DIR N"""
import os
import sys

import h5py
import numpy as np


def main(argv):
    out, n = argv[1], int(argv[2])
    a, b = (os.path.join(out, 'many%d_%s.h5' % (n, s)) for s in 'ab')
    if os.path.exists(a) and os.path.exists(b):
        return 0
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(5)
    with h5py.File(a + '.tmp', 'w') as fa, h5py.File(b + '.tmp', 'w') as fb:
        for i in range(n):
            size = int(rng.integers(256, 4097))
            x = rng.standard_normal(size).astype(np.float32)
            y = (x * (1 + 1e-7 * rng.standard_normal(size))).astype(np.float32)
            name = 'g%04d/t%06d' % (i // 100, i)
            fa.create_dataset(name, data=x)
            fb.create_dataset(name, data=y)
    os.rename(a + '.tmp', a)
    os.rename(b + '.tmp', b)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
