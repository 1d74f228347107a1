#!/usr/bin/python3
"""Copy every .h5 of SRC_DIR to DST_DIR "as other tools write it": the same dataset paths,
values and stored dtypes, but no attributes at all (file, group or dataset: no
execution_index, reduction_length, module, dtype="bfloat16", ...; bf16 data stays the float32
it is stored as), no compression, and groups created without track_order (h5py's default),
so that readers list datasets in name order.  This is what a user's plain h5py forward-hook
dumper writes.

    /usr/bin/python3 tests/zoo/strip_metadata.py SRC_DIR DST_DIR

Needs h5py and numpy only.  Prints one line per file.
"""

import glob
import os
import sys

import h5py


def strip(src, dst):
    """Write the datasets of ``src`` into a new file ``dst``; returns their count."""
    names = []
    with h5py.File(src, "r") as f:
        f.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
        with h5py.File(dst, "w", track_order=False) as g:
            for n in names:
                ds = f[n]
                parent = os.path.dirname(n)
                if parent:
                    g.require_group(parent)  # intermediate groups: h5py defaults
                g.create_dataset(n, data=ds[()], dtype=ds.dtype)
    return len(names)


def main(argv):
    if len(argv) != 3:
        sys.exit(__doc__)
    src_dir, dst_dir = argv[1], argv[2]
    os.makedirs(dst_dir, exist_ok=True)
    files = sorted(glob.glob(os.path.join(src_dir, "*.h5")))
    if not files:
        sys.exit("no .h5 files in %s" % src_dir)
    for p in files:
        q = os.path.join(dst_dir, os.path.basename(p))
        n = strip(p, q)
        print("%s: %d datasets, %d bytes" % (q, n, os.path.getsize(q)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
