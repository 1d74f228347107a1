"""paritycheck.calibrate: fit a tolerance profile to your own honest runs, cross-validate it, and
refuse it when it would let a structural bug through (docs/calibrate.md).

    python3 -m paritycheck.calibrate --base mps --trios runs/ --out tolerances/my-mps.yaml

Honest runs are pairs A B (optionally with R, the CPU fp64 reference), each tagged with the model
(family) it comes from:

    --pair FAMILY:A:B[:R]          files or folders, repeatable
    --trios DIR                    DIR/FAMILY/{a,b,ref}.h5 or DIR/FAMILY/RUN/{a,b,ref}.h5, as
                                   `python3 -m paritycheck.dump --trio` writes them
    --zoo DIR --backends A:B[:R]   DIR/<family>_<backend>.h5, as tests/zoo/make_zoo.py writes

Known bug pairs (optional): --bug FAMILY:A:B[:R]@TENSOR, B carrying a bug first visible at
TENSOR.

What it does, all through the paritycheck binary's JSON report (the judge is never
re-implemented here):

1. Fit: the rule of docs/tolerance-model.md ("Calibration") on every honest pair (A B, and R B
   where R is given): the binary measures every tensor with every limit open; each coefficient
   is 3 times what the most demanding honest tensor needs beyond the run's trend and noise
   floor, with the model's floors.
2. Sweep: every tensor of >= 64 elements of each honest B, zeroed, doubled, negated, rolled,
   10 % zeroed and shuffled (paritycheck.sweep), plain and three-way. If any mutated tensor
   passes under the fitted profile, nothing is written and the exit status is 2.
3. Cross-validation: leave one model (or one --cluster of models) out, fit on the rest, score the
   held-out honest runs (plain and three-way) and bugs injected into one tensor of their B at a
   time, plus the known bug pairs of the held-out models. Every bug run is counted.
4. Write the profile (the base profile with the fitted coefficients in its `defaults: all:`
   block, each with a comment saying where it came from) and, with --report, the CV as JSON.

With --from-envelopes FILE (repeatable) it fits a plain-mode profile to envelope sidecars
(A.envelope.h5, docs/envelope.md) instead of honest runs: calib_envelope.py, docs/calibrate.md
("From envelopes").

Exit status: 0 written; 2 refused (too few honest runs, a mutated tensor passes, a pair the
binary cannot compare) or bad usage.
"""
import argparse
import os
import shutil
import sys
import tempfile

import h5py

from . import sweep as pcsweep
# The calibration's parts, one file per job: the profile's text (calib_profile), the fit
# (calib_fit), the cross-validation (calib_cv) and the report (calib_report). Their names that
# tests/zoo/zoo_eval.py uses are importable from here as before (__all__).
from .calib_cv import (BUGS, REQUIRED_RATIO, TARGETS_PER_RUN, _first, cross_validate,
                       cv_summary, logical_store, pick_targets, rel_rms, score_run)
from .calib_envelope import calibrate_from_envelopes
from .calib_fit import Binary, Run, calibration_pairs, fit, is_gradient, provenance, run_name
from .calib_profile import (UNIT, Refused, base_value, find_profile, fmt, overridden_keys,
                            profile_text)
from .calib_report import (PROG, TRUST_MODELS, TRUST_RUNS, log_cv, log_fit,
                           profile_header, report_json, too_few, write_outputs)

__all__ = ["BUGS", "REQUIRED_RATIO", "TARGETS_PER_RUN", "Binary", "Refused", "Run", "_first",
           "calibrate", "fit", "fmt", "is_gradient", "logical_store", "main", "pick_targets",
           "profile_text", "rel_rms", "score_run"]

# Fewer honest runs than this cannot be calibrated on at all (calib_report.TRUST_* say when
# there are enough to trust).
MIN_MODELS, MIN_RUNS = 2, 3


# ---- inputs ------------------------------------------------------------------------------------

def parse_pair(spec, opt):
    family, sep, rest = spec.partition(":")
    parts = rest.split(":") if sep else []
    if not family or len(parts) not in (2, 3) or not all(parts):
        raise Refused("%s %r: expected FAMILY:A:B or FAMILY:A:B:R" % (opt, spec))
    for p in parts:
        if not os.path.exists(p):
            raise Refused("%s %r: %s does not exist" % (opt, spec, p))
    return family, parts[0], parts[1], parts[2] if len(parts) == 3 else None


def trio_runs(root):
    """Runs of a directory of trios: ROOT/FAMILY/{a,b,ref}.h5 or ROOT/FAMILY/RUN/{a,b,ref}.h5."""
    out = []

    def trio(d, family, label):
        a, b, r = (os.path.join(d, n) for n in ("a.h5", "b.h5", "ref.h5"))
        if os.path.isfile(a) and os.path.isfile(b):
            out.append(Run(family, label, a, b, r if os.path.isfile(r) else None,
                           ("a", "b", "ref")))
            return True
        return False

    if not os.path.isdir(root):
        raise Refused("--trios %s: not a directory" % root)
    for fam in sorted(os.listdir(root)):
        d = os.path.join(root, fam)
        if not os.path.isdir(d):
            continue
        if trio(d, fam, ""):
            continue
        for run in sorted(os.listdir(d)):
            if os.path.isdir(os.path.join(d, run)):
                trio(os.path.join(d, run), fam, run + " ")
    return out


def zoo_runs(dirs, backends):
    """Runs of directories of <family>_<backend>.h5 for each backend spec A:B[:R]."""
    out = []
    fams = set()
    for d in dirs:
        if not os.path.isdir(d):
            raise Refused("--zoo %s: not a directory" % d)
        for n in os.listdir(d):
            for spec in backends:
                bk = spec.split(":")[0]
                if n.endswith("_%s.h5" % bk):
                    fams.add(n[:-len("_%s.h5" % bk)])

    def path(f, bk):
        for d in dirs:
            p = os.path.join(d, "%s_%s.h5" % (f, bk))
            if os.path.exists(p):
                return p
        return None

    for f in sorted(fams):
        for spec in backends:
            parts = spec.split(":")
            if len(parts) not in (2, 3) or not all(parts):
                raise Refused("--backends %r: expected A:B or A:B:R" % spec)
            ps = [path(f, bk) for bk in parts]
            if ps[0] and ps[1]:
                r = ps[2] if len(parts) == 3 else None
                out.append(Run(f, "", ps[0], ps[1], r, tuple(parts + [""])[:3]))
    return out


def collect(a):
    runs = []
    for spec in a.pair or ():
        fam, pa, pb, pr = parse_pair(spec, "--pair")
        runs.append(Run(fam, "", pa, pb, pr,
                        tuple(os.path.basename(os.path.normpath(p)) if p else ""
                              for p in (pa, pb, pr))))
    for d in a.trios or ():
        runs += trio_runs(d)
    if a.zoo:
        if not a.backends:
            raise Refused("--zoo needs --backends A:B[:R] (e.g. cpu_fp32:cuda_tf32:cpu_fp64)")
        runs += zoo_runs(a.zoo, a.backends)
    if a.family:
        runs = [r for r in runs if r.family in a.family]
    known = []
    for spec in a.bug or ():
        body, at, tensor = spec.rpartition("@")
        if not at or not tensor:
            raise Refused("--bug %r: expected FAMILY:A:B[:R]@TENSOR" % spec)
        known.append(parse_pair(body, "--bug") + (tensor,))
    return runs, known


def make_clusters(runs, specs):
    """[(name, set of families)]: each --cluster NAME=F1,F2, then each family left alone."""
    fams = sorted({r.family for r in runs})
    out, taken = [], set()
    for spec in specs or ():
        name, eq, members = spec.partition("=")
        ms = {m for m in members.split(",") if m}
        if not eq or not ms:
            raise Refused("--cluster %r: expected NAME=FAMILY1,FAMILY2" % spec)
        unknown = ms - set(fams)
        if unknown:
            raise Refused("--cluster %r: no honest run of %s" % (spec, ", ".join(sorted(unknown))))
        if ms & taken:
            raise Refused("--cluster %r: %s already in another cluster"
                          % (spec, ", ".join(sorted(ms & taken))))
        out.append((name, ms))
        taken |= ms
    out += [(f, {f}) for f in fams if f not in taken]
    return out



# ---- main --------------------------------------------------------------------------------------

def structural_sweep(binpath, binary, text, runs, stride, work, log):
    """Step 2: every honest B mutated (paritycheck.sweep) under the fitted profile, plain and
    three-way. Returns the sweep's result; raises Refused when any mutated tensor passes."""
    res = {}
    y = binary.yaml(text)
    for r in runs:
        if not (os.path.isfile(r.b) and h5py.is_hdf5(r.b)):
            continue
        for mode, ref in [("plain", None)] + ([("three-way", r.ref)] if r.ref else []):
            pcsweep.sweep_pair(binpath, ["-t", y], r.a, r.b, ref, work, res,
                               (r.family, run_name(r), mode), stride=stride)
    passed = res.get("passed", [])
    log("structural sweep: %d mutated tensors, %d pass" % (res.get("mutated", 0),
                                                           len(passed)))
    if not res.get("mutated"):
        raise Refused("the structural sweep mutated no tensor (no HDF5 float tensor of at "
                      "least %d elements in the honest B files)" % pcsweep.MIN_ELEMENTS)
    if passed:
        lines = ["  %s %s %s: %s of %s passes" % (lab[0], lab[1], lab[2], kind, n)
                 for lab, kind, n in passed[:10]]
        raise Refused("the fitted profile lets %d structurally mutated tensors pass; not "
                      "writing it:\n%s" % (len(passed), "\n".join(lines)))
    return res


def binary_path(a):
    """The paritycheck executable: --binary, $PARITYCHECK_BIN, else paritycheck on PATH."""
    binpath = a.binary or os.environ.get("PARITYCHECK_BIN") or shutil.which("paritycheck")
    if not binpath:
        raise Refused("no paritycheck binary: give --binary or set PARITYCHECK_BIN")
    return binpath


def calibrate(a, log):
    """Everything but argument parsing; returns (profile text, report dict). Raises Refused."""
    binpath = binary_path(a)
    base_text = find_profile(a.base, binpath)
    precision = a.precision or base_value(base_text, "precision")
    if precision not in UNIT:
        raise Refused("the base profile sets no `precision` in `defaults: all:` that calibration "
                      "knows (%s); give --precision" % ", ".join(UNIT))
    runs, known = collect(a)
    fams = sorted({r.family for r in runs})
    log("%d honest runs of %d models (%s)" % (len(runs), len(fams), ", ".join(fams)))
    if len(fams) < MIN_MODELS or len(runs) < MIN_RUNS:
        raise Refused("%d honest runs of %d models: too few to calibrate on (at least %d runs of "
                      "%d models; %d runs of %d or more models before the result can be "
                      "trusted)" % (len(runs), len(fams), MIN_RUNS, MIN_MODELS, TRUST_RUNS,
                                    TRUST_MODELS))
    short = too_few(len(runs), len(fams))
    clusters = make_clusters(runs, a.cluster)
    if len(clusters) < 2:
        raise Refused("one cluster holds every model: nothing to hold out")
    over = overridden_keys(base_text)
    if over:
        log("warning: the base profile also sets %s outside `defaults: all:`; tensors it matches "
            "keep those values, which the fit does not see" % ", ".join(over))
    with tempfile.TemporaryDirectory(prefix="paritycheck-calibrate-") as work:
        binary = Binary(binpath, work)
        pairs = calibration_pairs(runs)
        # 1. the fit
        c, need = fit(binary, base_text, precision, pairs)
        log_fit(log, c, need, len(pairs))
        text = profile_text(base_text, c)
        # 2. the structural sweep under the fitted profile
        res = structural_sweep(binpath, binary, text, runs, a.sweep_stride, work, log)
        # 3. cross-validation
        log("cross-validation, leave one %s out:" % ("cluster" if a.cluster else "model"))
        folds = cross_validate(binary, base_text, precision, runs, clusters, known,
                               a.bug_targets, a.bugs or list(BUGS), work, log)
        summ = cv_summary(folds)
        log_cv(log, summ, short, len(runs), len(fams))
        # 4. the profile and the report
        header = profile_header(a.base, len(runs), len(pairs), fams, res["mutated"], summ, short)
        out_text = profile_text(base_text, c, provenance(c, need, precision), header)
        report = report_json(a, precision, runs, fams, short, c, need, res, clusters, summ,
                             folds, binary)
        return out_text, report


def main(argv=None):
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="docs/calibrate.md walks through it. Exit status: 0 "
                                        "written; 2 refused or bad usage.")
    ap.add_argument("--base", required=True,
                    help="the profile to start from: a YAML file or a shipped profile's name")
    ap.add_argument("--out", required=True, help="where to write the calibrated profile")
    ap.add_argument("--report", help="write the cross-validation report here as JSON")
    ap.add_argument("--pair", action="append", metavar="FAMILY:A:B[:R]",
                    help="an honest run (files or folders); repeatable")
    ap.add_argument("--trios", action="append", metavar="DIR",
                    help="DIR/FAMILY/{a,b,ref}.h5 or DIR/FAMILY/RUN/{a,b,ref}.h5; repeatable")
    ap.add_argument("--zoo", action="append", metavar="DIR",
                    help="a directory of <family>_<backend>.h5; repeatable, with --backends")
    ap.add_argument("--backends", action="append", metavar="A:B[:R]",
                    help="with --zoo: the backends of an honest run; repeatable")
    ap.add_argument("--family", action="append", help="only these families (repeatable)")
    ap.add_argument("--bug", action="append", metavar="FAMILY:A:B[:R]@TENSOR",
                    help="a known bug pair and the tensor where its bug shows first")
    ap.add_argument("--cluster", action="append", metavar="NAME=F1,F2",
                    help="hold these families out together (related models); repeatable")
    ap.add_argument("--precision", choices=list(UNIT),
                    help="the arithmetic's precision when the base profile sets none")
    ap.add_argument("--binary", help="the paritycheck executable (default $PARITYCHECK_BIN, "
                    "else paritycheck on PATH)")
    ap.add_argument("--bug-targets", type=int, default=TARGETS_PER_RUN, metavar="N",
                    help="tensors per held-out run that get injected bugs (default %d; 0: none)"
                    % TARGETS_PER_RUN)
    ap.add_argument("--bugs", action="append", choices=list(BUGS),
                    help="injected bugs to use (default all)")
    ap.add_argument("--sweep-stride", type=int, default=pcsweep.STRIDE, metavar="S",
                    help="mutate every S-th tensor per sweep run (default %d)" % pcsweep.STRIDE)
    ap.add_argument("--from-envelopes", action="append", metavar="FILE",
                    help="instead of honest runs: fit max_rel_rms_u and atol_rms to these "
                    "envelope sidecars (A.envelope.h5); repeatable (docs/calibrate.md, "
                    "\"From envelopes\")")
    ap.add_argument("-q", "--quiet", action="store_true", help="print only errors")
    a = ap.parse_args(argv)
    if a.sweep_stride < 1 or a.bug_targets < 0:
        ap.error("--sweep-stride wants >= 1, --bug-targets >= 0")
    if a.from_envelopes and (a.pair or a.trios or a.zoo or a.bug):
        ap.error("--from-envelopes fits to envelopes alone; give no --pair, --trios, --zoo "
                 "or --bug with it")

    def log(msg):
        if not a.quiet:
            print(msg, flush=True)
    try:
        if a.from_envelopes:
            binpath = a.binary or os.environ.get("PARITYCHECK_BIN") or shutil.which("paritycheck")
            text, report = calibrate_from_envelopes(a, binpath, PROG, log)
        else:
            text, report = calibrate(a, log)
    except Refused as e:
        print("%s: refused: %s" % (PROG, e), file=sys.stderr)
        return 2
    write_outputs(a.out, text, a.report, report, log)
    return 0


if __name__ == "__main__":
    sys.exit(main())
