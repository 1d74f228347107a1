#!/usr/bin/python3
"""Writes bench/bench_mpi's inputs into DIR, skipping what is there:

  shards/A, shards/B   SHARDS files a side (rank0.h5 ...), each of 16 float32 tensors of
                       MIB/16 MiB, B drifted by a few float32 ULPs (a sharded training dump);
  big_a.h5, big_b.h5   one float32 tensor of SHARDS * MIB MiB a side, drifted alike (one huge
                       tensor, which the ranks share in parts).

Usage: mpi_gen.py DIR [SHARDS] [MIB]   (defaults 8 and 64: 512 MiB a side in each input)
"""
import os
import sys

import h5py
import numpy as np


def drifted(x, rng):
    return (x * (1 + 4e-7 * rng.standard_normal(x.size, dtype=np.float32))).astype(np.float32)


def write_pair(path_a, path_b, names, elems, seed):
    if os.path.exists(path_a) and os.path.exists(path_b):
        return
    rng = np.random.default_rng(seed)
    with h5py.File(path_a, "w") as fa, h5py.File(path_b, "w") as fb:
        for name in names:
            x = rng.standard_normal(elems, dtype=np.float32)
            fa[name] = x
            fb[name] = drifted(x, rng)


def main():
    root = sys.argv[1]
    shards = int(sys.argv[2]) if len(sys.argv) > 2 else 8
    mib = int(sys.argv[3]) if len(sys.argv) > 3 else 64
    for side in "AB":
        os.makedirs(os.path.join(root, "shards", side), exist_ok=True)
    names = ["layer%02d/out" % i for i in range(16)]
    for k in range(shards):
        write_pair(os.path.join(root, "shards", "A", "rank%d.h5" % k),
                   os.path.join(root, "shards", "B", "rank%d.h5" % k),
                   names, mib * (1 << 20) // 4 // 16, k)
    write_pair(os.path.join(root, "big_a.h5"), os.path.join(root, "big_b.h5"), ["weight"],
               shards * mib * (1 << 20) // 4, 99)


if __name__ == "__main__":
    main()
