#!/usr/bin/python3
"""Three-way catches every scale plain catches (issue 36; docs/tolerance-model.md,
"Indeterminate"): every STRIDE-th tensor of at least 64 elements of every honest shipped pair,
scaled by 0.95, 0.9 and 0.8 (python/paritycheck/sweep.py SCALES), judged under each shipped
profile in plain mode and in three-way mode (--reference R, the CPU fp64 run). A scaled tensor
that plain mode catches (fails, where it passes the tensor unscaled) must not pass in three-way
mode either. Counts what each mode catches. A tensor plain mode fails unscaled (an
ill-conditioned net's honest gradient under bf16) is no catch of plain's: three-way may pass it
scaled where the scale is a small part of an error the reference explains.

    /usr/bin/python3 tests/zoo/scale_sweep.py --binary build/paritycheck

Exit 0 when three-way passed no scaled tensor that plain caught; 1 otherwise, listing them.
"""

import argparse
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, HERE)
from paritycheck import sweep as pcsweep  # noqa: E402
from sweep import DIRS, PROFILES, families, family_paths  # noqa: E402


def verdicts(binary, profile, paths, backend, work):
    """{(kind, path): {mode: verdict}} of every scaled tensor of the pair; mode "honest":
    plain mode's verdict on the tensor unscaled."""
    out = {}
    b = paths[backend]
    _, honest = pcsweep.run(binary, ["--profile", profile], paths["cpu_fp32"], b, None, work)
    names = pcsweep.eligible(b)
    mb = os.path.join(work, "scaled-b.h5")
    for kind in pcsweep.SCALES:
        for off in range(pcsweep.STRIDE):
            done = pcsweep.changed_copy(b, mb, names[off::pcsweep.STRIDE], kind, seed=off)
            for mode, ref in (("plain", None), ("three-way", paths["cpu_fp64"])):
                _, tens = pcsweep.run(binary, ["--profile", profile], paths["cpu_fp32"], mb, ref,
                                      work)
                for n in done:
                    v = out.setdefault((kind, n), {"honest": honest[n]["verdict"]})
                    v[mode] = tens[n]["verdict"]
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "paritycheck"))
    a = ap.parse_args(argv)
    binary = os.path.abspath(a.binary)
    caught = {"plain": 0, "three-way": 0}
    total, lost, unfair = 0, [], 0
    with tempfile.TemporaryDirectory() as work:
        for d, fam in families(DIRS):
            paths = family_paths(d, fam)
            for profile, backend in PROFILES.items():
                if not os.path.exists(paths[backend]) or not os.path.exists(paths["cpu_fp64"]):
                    continue
                for (kind, n), v in verdicts(binary, profile, paths, backend, work).items():
                    total += 1
                    for mode in caught:
                        caught[mode] += v[mode] != "pass"
                    unfair += v["honest"] != "pass"
                    if v["honest"] == "pass" and v["plain"] != "pass" and v["three-way"] == "pass":
                        lost.append((fam, profile, kind, n, v["plain"]))
    print("scaled tensors: %d; not passed: plain %d, three-way %d; plain fails %d of them "
          "unscaled" % (total, caught["plain"], caught["three-way"], unfair))
    for x in lost:
        print("  THREE-WAY PASSED  %s %s %s %s (plain: %s)" % x)
    return 1 if lost or not total else 0


if __name__ == "__main__":
    sys.exit(main())
