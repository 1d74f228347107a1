#!/usr/bin/python3
"""Generate paritycheck's hostile-input corpus and the expected behaviour of every case.

    /usr/bin/python3 tests/gen/make_hostile.py OUTDIR

Writes the inputs into OUTDIR and the cases into OUTDIR/cases.json, which
tests/hostile/run_hostile.py runs. docs/robustness.md lists the groups and what each proves.

Every expectation comes from how the input was made: the offset of a cut, the byte and bit that
were flipped, the HDF5 file format (which checksums its version-2 metadata), the fill value that was
declared, the line and column of the offending YAML token. Nothing is read back from paritycheck.
Everything is deterministic (fixed seed, fixed values).

A case (cases.json "cases"):
  name, group    identify it; docs/robustness.md describes each group
  args           the command line after the binary (absolute paths)
  exit           the allowed exit codes
  stdout, stderr substrings that must occur (stdout is the text report)
  json           {tensor path: {verdict, message: [substrings], count, mismatches, max_abs,
                 max_rel, max_ulp, worst_index, approx: {figure: value within 1e-12}}}:
                 the driver adds --json and checks these fields of the report
  names_file     when the run exits 2, this path must appear on stdout or stderr
  no_runner_commands  no line of stdout or stderr is a GitHub Actions runner command but
                 paritycheck's own annotations ('::' at its start after whitespace, '##['
                 anywhere; docs/reports.md, "Untrusted names")
  seconds        a tighter time limit than the driver's default
  valgrind       part of the subset that .ci/valgrind.sh runs under memcheck

The cases are written by group, one module per job: hostile_broken.py (not HDF5, truncated, bit
flips, overlapping safetensors), hostile_odd.py (valid but odd files, resource limits) and
hostile_text.py (tolerance files, runner commands, names that are not UTF-8); hostile_common.py
holds what they share.
"""

import json
import os
import random
import sys

from hostile_broken import (make_checksummed_flips, make_data_flips, make_good, make_not_hdf5,
                            make_past_eof, make_random_flips, make_st_overlaps, make_truncated)
from hostile_common import CASES, SEED, case, find_all, flip, h5file, path, setup
from hostile_odd import (make_deep, make_elsewhere, make_fill_drift, make_filters, make_limits,
                         make_odd, make_sparse)
from hostile_text import make_ci_commands, make_not_utf8, make_tolerances

# The generator's functions, as they were importable before the corpus was split by job.
__all__ = ['case', 'find_all', 'flip', 'h5file', 'main', 'make_checksummed_flips',
           'make_ci_commands', 'make_data_flips', 'make_deep', 'make_elsewhere',
           'make_fill_drift', 'make_filters', 'make_good', 'make_limits', 'make_not_hdf5',
           'make_not_utf8', 'make_odd', 'make_past_eof', 'make_random_flips', 'make_sparse',
           'make_st_overlaps', 'make_tolerances', 'make_truncated', 'path']

# --------------------------------------------------------------------------------------------

def main(argv):
    if len(argv) != 1:
        print('usage: make_hostile.py OUTDIR', file=sys.stderr)
        return 2
    out = os.path.abspath(argv[0])
    os.makedirs(out, exist_ok=True)
    setup(out)
    random.seed(SEED)
    good = make_good()
    make_not_hdf5(good)
    make_truncated()
    make_past_eof()
    make_checksummed_flips()
    make_data_flips()
    make_random_flips()
    make_odd()
    make_fill_drift()
    make_sparse()
    make_deep()
    make_filters()
    make_elsewhere()
    make_limits()
    make_tolerances()
    make_ci_commands()
    make_st_overlaps()
    make_not_utf8()
    names = [c['name'] for c in CASES]
    assert len(names) == len(set(names)), 'duplicate case names'
    with open(os.path.join(out, 'cases.json'), 'w') as fh:
        json.dump({'cases': CASES}, fh, indent=1)
        fh.write('\n')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
