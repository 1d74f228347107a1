#!/usr/bin/python3
"""Independent numpy reference for the per-tensor figures of docs/metrics.md.

Written from the definitions alone (no code shared with the C library), so the two can check each
other. Run it with Debian's /usr/bin/python3 (numpy 1.24, h5py 3.7).

Library use:
    tensor_figures(a, b, compare_dtype, tol, a_kind='float'|'int'|'complex') -> dict
    read_tensor(h5py_dataset) -> Tensor  (values promoted exactly, logical dtype applied)
    pair_figures(tensor_a, tensor_b, tol) -> dict (compare dtype per docs/metrics.md)
Every public name of the reference is importable from here; the code lives by job in
ref_float.py (formats, ordinals, ULPs), ref_figures.py (tolerance criteria, per-tensor figures),
ref_read.py (dtypes of a pair, tensors read from HDF5), ref_report.py (report numbers and their
comparison) and ref_selftest.py.

Command line:
    pc_reference.py check REPORT.json A.h5 B.h5 [--tol-json FILE]
        Recompute the figures of every pass/drift tensor of a paritycheck JSON report and list
        every difference; exit 1 if there is any, 0 otherwise, 2 on usage or I/O errors.
    pc_reference.py figures A.h5 B.h5 --tol-json FILE
        Print the reference figures of every dataset present in both files as JSON.
    pc_reference.py selftest
        Check the fast rounding paths against exact rational arithmetic and hand-computed cases.

A tolerance is a dict with any subset of atol, rtol, max_ulp, max_mismatch_fraction; a missing key
or None means "not set".
"""

import json
import sys

# The library's public names, re-exported for `import pc_reference as ref`.
from ref_figures import tensor_figures
from ref_float import (FLOAT_RANK, FORMATS, INT_INFO, U64_MAX, FloatFormat, decode_bits,
                       exact_sum_u64, not_representable_count, ordinal, ordinal_exact,
                       representable, round_to, ulp_distance)
from ref_read import Tensor, compare_dtype_of, pair_figures, read_float_raw, read_tensor
from ref_report import (compare_figures, from_json_number, same_float, same_int, to_json_number,
                        tol_from_report)
from ref_selftest import selftest

__all__ = ['FLOAT_RANK', 'FORMATS', 'INT_INFO', 'U64_MAX', 'FloatFormat', 'Tensor',
           'compare_dtype_of', 'compare_figures', 'decode_bits', 'exact_sum_u64',
           'from_json_number', 'not_representable_count', 'ordinal', 'ordinal_exact',
           'pair_figures', 'read_float_raw', 'read_tensor', 'representable', 'round_to',
           'same_float', 'same_int', 'selftest', 'tensor_figures', 'to_json_number',
           'tol_from_report', 'ulp_distance', 'cmd_check', 'cmd_figures', 'main']

# --------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------


def _load_tol_json(path):
    with open(path) as fh:
        return json.load(fh)


def _tol_for(tol_json, path):
    if tol_json is None:
        return None
    if any(k.startswith('/') for k in tol_json):
        return tol_json.get(path, {})
    return tol_json


def cmd_check(argv):
    import h5py
    tol_json = None
    if '--tol-json' in argv:
        i = argv.index('--tol-json')
        tol_json = _load_tol_json(argv[i + 1])
        argv = argv[:i] + argv[i + 2:]
    if len(argv) != 3:
        print('usage: pc_reference.py check REPORT.json A.h5 B.h5 [--tol-json FILE]',
              file=sys.stderr)
        return 2
    with open(argv[0]) as fh:
        report = json.load(fh)
    diffs = []
    checked = 0
    with h5py.File(argv[1], 'r') as fa, h5py.File(argv[2], 'r') as fb:
        for t in report.get('tensors', []):
            if t.get('verdict') not in ('pass', 'drift'):
                continue
            path = t['path']
            tol = _tol_for(tol_json, path)
            if tol is None:
                tol = tol_from_report(t)
            try:
                ta, tb = read_tensor(fa[path]), read_tensor(fb[path])
            except (KeyError, OSError, TypeError) as e:
                diffs.append('%s: cannot read with h5py: %s' % (path, e))
                continue
            fig = pair_figures(ta, tb, tol)
            diffs += compare_figures(path, fig, t)
            checked += 1
    for line in diffs:
        print(line)
    print('pc_reference check: %d tensors checked, %d differences' % (checked, len(diffs)))
    return 1 if diffs else 0


def _walk(f):
    import h5py
    paths = []

    def visit(name, obj):
        if isinstance(obj, h5py.Dataset):
            paths.append('/' + name)
    f.visititems(visit)
    return paths


def cmd_figures(argv):
    import h5py
    tol_json = {}
    if '--tol-json' in argv:
        i = argv.index('--tol-json')
        tol_json = _load_tol_json(argv[i + 1])
        argv = argv[:i] + argv[i + 2:]
    if len(argv) != 2:
        print('usage: pc_reference.py figures A.h5 B.h5 [--tol-json FILE]', file=sys.stderr)
        return 2
    out = {}
    with h5py.File(argv[0], 'r') as fa, h5py.File(argv[1], 'r') as fb:
        for p in _walk(fa):
            if p not in fb:
                continue
            fig = pair_figures(read_tensor(fa[p]), read_tensor(fb[p]), _tol_for(tol_json, p))
            out[p] = {k: (to_json_number(v) if not isinstance(v, dict) else
                          {kk: to_json_number(vv) for kk, vv in v.items()})
                      for k, v in fig.items()}
    json.dump(out, sys.stdout, indent=1)
    print()
    return 0


def main(argv):
    if len(argv) >= 1 and argv[0] == 'check':
        return cmd_check(argv[1:])
    if len(argv) >= 1 and argv[0] == 'figures':
        return cmd_figures(argv[1:])
    if len(argv) == 1 and argv[0] == 'selftest':
        return selftest()
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
