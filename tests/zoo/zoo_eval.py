#!/usr/bin/python3
"""Calibrate paritycheck's profiles on a zoo of real dumps, and score them leave-one-family-out.

A zoo is one or more directories of <family>_<backend>.h5 dumps (tests/zoo/make_zoo.py,
fixtures/real). For each profile (PROFILES) the honest pairs of a family are the backends of
PROFILES[profile]["honest"]; the bug runs inject one bug into one tensor of the profile's backend
(B), leaving every other tensor honest, and compare it with cpu_fp32 (A).

    calibrate  the rule of docs/tolerance-model.md ("Calibration"), from the honest pairs of the
               families given: the binary measures every figure and the judge's context (trend,
               noise scale) with every limit open; the rule turns what the honest tensors need,
               beyond what the trend and the noise floor explain, into coefficients.
    lofo       for every family F: calibrate on all the others, score F (honest pairs with and
               without metadata, every bug run) with that profile. This is the published score.
    write      calibrate on every family and write tolerances/<profile>.yaml.
    clusters   the cluster-held-out evaluation (issue 29, "A pass is earned", item 6): for every
               profile and every cluster C of related families (DEFAULT_CLUSTERS or --cluster),
               calibrate on the honest pairs of the families outside C only, and score each
               family of C under that fold's profile, plain (A B) and three-way (cpu_fp32 B
               --reference cpu_fp64): its honest pairs (pass, or failing as indeterminate or
               drift), every bug run (required or stretch; caught and flagged) and the
               structural sweep of its B (python/paritycheck/sweep.py). Families are
               (directory, name): a name already seen in an earlier --zoo becomes NAME@DIR
               (e.g. resnet@zoo29), in its namesake's cluster. --out writes everything as JSON.
    clusters-table
               the Markdown tables of docs/tolerance-model.md from that JSON (--coefficients
               adds each fold's fitted coefficients).

A bug is *required* at a tensor when its effect, rel_rms(B_bug, B), is at least REQUIRED_RATIO
times the honest drift there, rel_rms(B, A); it is *caught* when the run fails with its first
divergence at the injected tensor.

    /usr/bin/python3 tests/zoo/zoo_eval.py lofo --zoo /work/zoo/full --plain /work/zoo/plain
    /usr/bin/python3 tests/zoo/zoo_eval.py write --zoo /work/zoo/full

The cluster-held-out run over the shipped dumps and the seed-29 zoo (docs/tolerance-model.md;
21 families in 7 clusters, 4 profiles: 28 folds). With --jobs 2 on 2 shared cores, tf32 alone
took 292 s (its cnn and attention folds 212 s each); all 4 profiles take about 20 minutes:

    /usr/bin/python3 tests/zoo/zoo_eval.py clusters --paritycheck build/paritycheck \\
        --zoo fixtures/zoo --zoo fixtures/real --zoo /work/zoo29 --jobs 2 --out clusters.json
    /usr/bin/python3 tests/zoo/zoo_eval.py clusters-table --out clusters.json
"""

import argparse
import glob
import json
import multiprocessing
import os
import shutil
import subprocess
import sys
import tempfile
import time

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "python"))
# The calibration rule, the model's constants and the bug injector live in the package
# (python/paritycheck/calibrate.py), which `python3 -m paritycheck.calibrate` runs for users.
from paritycheck import calibrate as pccal  # noqa: E402
from paritycheck import sweep as pcsweep  # noqa: E402
from paritycheck.calibrate import (BUGS, REQUIRED_RATIO, TARGETS_PER_RUN,  # noqa: E402
                                   is_gradient, logical_store, pick_targets, rel_rms)

BUG_REFERENCE = "cpu_fp32"
TARGETS_PER_FAMILY = TARGETS_PER_RUN

PROFILES = {
    "cpu-vs-cuda-fp32": {
        "precision": "float32", "bug_backend": "cuda_fp32",
        "honest": [("cpu_fp32", "cuda_fp32"), ("cpu_fp64", "cuda_fp32"), ("cpu_fp64", "cpu_fp32"),
                   ("cuda_fp32", "cuda_fp32_b"), ("cpu_fp32", "cpu_fp32_t1")],
        "for": "CPU fp32 (A) against CUDA fp32 with TF32 off (B); also fp32 against fp64, and two "
               "fp32 runs on one device"},
    "tf32": {
        "precision": "tf32", "bug_backend": "cuda_tf32",
        "honest": [("cpu_fp32", "cuda_tf32"), ("cpu_fp64", "cuda_tf32")],
        "for": "CPU fp32 (A) against CUDA with TF32 matmuls and convolutions (B)"},
    "bf16-autocast": {
        "precision": "bfloat16", "bug_backend": "cuda_bf16",
        "honest": [("cpu_fp32", "cuda_bf16"), ("cpu_fp64", "cuda_bf16")],
        "for": "CPU fp32 (A) against CUDA under torch.autocast(bfloat16) (B)"},
    "fp16-autocast": {
        "precision": "float16", "bug_backend": "cuda_fp16",
        "honest": [("cpu_fp32", "cuda_fp16"), ("cpu_fp64", "cuda_fp16")],
        "for": "CPU fp32 (A) against CUDA under torch.autocast(float16) (B)"},
}


# ---- the zoo ---------------------------------------------------------------------------------

def dump_path(dirs, family, backend):
    for d in dirs:
        p = os.path.join(d, "%s_%s.h5" % (family, backend))
        if os.path.exists(p):
            return p
    return None


def families(dirs):
    out = set()
    for d in dirs:
        for p in glob.glob(os.path.join(d, "*_cpu_fp32.h5")):
            out.add(os.path.basename(p)[:-len("_cpu_fp32.h5")])
    return sorted(out)


def honest_pairs(dirs, profile, fams):
    out = []
    for f in fams:
        for ra, rb in PROFILES[profile]["honest"]:
            a, b = dump_path(dirs, f, ra), dump_path(dirs, f, rb)
            if a and b:
                out.append((f, ra, rb, a, b))
    return out


# ---- running paritycheck -----------------------------------------------------------------------

_MEMO = {}


def run_binary(binary, a, b, yaml_path):
    """(exit code, JSON report); the same files under the same tolerance text are run once."""
    with open(yaml_path) as f:
        key = (binary, a, b, f.read(), os.path.getmtime(b))
    if key not in _MEMO:
        _MEMO[key] = _run_binary(binary, a, b, yaml_path)
    return _MEMO[key]


def _run_binary(binary, a, b, yaml_path):
    cmd = [binary, "--json", "-", "-t", yaml_path, a, b]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)
    if p.returncode not in (0, 1):
        raise RuntimeError("%s: exit %d: %s" % (" ".join(cmd), p.returncode, p.stderr.decode()))
    return p.returncode, json.loads(p.stdout)


def profile_yaml(precision, c, comment=""):
    """The text of a profile with coefficients c (keys of docs/tolerance-model.md)."""
    base = "\n".join(["version: 1", "", "defaults:", "  all:", "    atol: null", "    rtol: null",
                      "    max_mismatch_fraction: 0", "    precision: %s" % precision,
                      "    accumulation: float32"])
    text = pccal.profile_text(base, c)
    return (comment.rstrip("\n") + "\n" if comment else "") + text


def write_tmp_yaml(work, name, text):
    p = os.path.join(work, name)
    with open(p, "w") as f:
        f.write(text)
    return p


# ---- calibration -------------------------------------------------------------------------------

def calibrate(binary, work, profile, pairs):
    """{coefficient: value} and {coefficient: (needed, where)} by the rule of
    docs/tolerance-model.md ("Calibration"), python/paritycheck/calibrate.py's fit."""
    precision = PROFILES[profile]["precision"]
    return pccal.fit(pccal.Binary(binary, work), profile_yaml(precision, {}), precision,
                     [(f, "%s/%s" % (ra, rb), a, b) for f, ra, rb, a, b in pairs])


# ---- bugs --------------------------------------------------------------------------------------

LAST_REPORTS = {}  # "family bug at target" -> the JSON report of every bug run, for tests


def float_values(ds):
    return np.asarray(ds[()], dtype=np.float64).ravel(), None


def bug_runs(binary, work, yaml_path, dirs, profile, family, targets=TARGETS_PER_FAMILY):
    """[(bug, target, required, caught, first)] for one family."""
    a = dump_path(dirs, family, BUG_REFERENCE)
    b = dump_path(dirs, family, PROFILES[profile]["bug_backend"])
    if not (a and b):
        return []
    _, rep = run_binary(binary, a, b, yaml_path)
    out = []
    rng = np.random.default_rng(0)
    dst = os.path.join(work, "bug.h5")
    for target in pick_targets(rep, targets):
        name = target.lstrip("/")
        with h5py.File(a, "r") as fa, h5py.File(b, "r") as fb:
            av, _ = float_values(fa[name])
            bv, _ = float_values(fb[name])
            shape = fb[name].shape
        honest = rel_rms(av, bv)
        for bug, fn in BUGS.items():
            if bug == "grad_x2" and not is_gradient(target):
                continue
            buggy = fn(bv.reshape(shape), rng).ravel()
            effect = rel_rms(bv, buggy)
            shutil.copyfile(b, dst)
            with h5py.File(dst, "r+") as f:
                f[name][...] = logical_store(buggy.reshape(shape), f[name])
            code, r = _run_binary(binary, a, dst, yaml_path)  # a new B every time
            LAST_REPORTS["%s %s at %s" % (family, bug, target)] = r
            first = r.get("first_divergence")
            first = first.get("path") if isinstance(first, dict) else first
            required = effect >= REQUIRED_RATIO * honest
            out.append((bug, target, required, code == 1 and first == target, first))
    return out


# ---- scoring -----------------------------------------------------------------------------------

def score_family(binary, work, yaml_path, dirs, plain, profile, family):
    res = {"honest": [], "honest_plain": [], "bugs": []}
    for key, ds in (("honest", dirs), ("honest_plain", plain)):
        if not ds:
            continue
        for f, ra, rb, a, b in honest_pairs(ds, profile, [family]):
            code, rep = run_binary(binary, a, b, yaml_path)
            fails = [(t["path"], t.get("reasons")) for t in rep["tensors"]
                     if t["verdict"] != "pass"]
            res[key].append(("%s/%s" % (ra, rb), code == 0, fails))
    res["bugs"] = bug_runs(binary, work, yaml_path, dirs, profile, family)
    return res


def lofo(binary, dirs, plain, profs, fams, out_json=None):
    table = {}
    with tempfile.TemporaryDirectory() as work:
        for profile in profs:
            table[profile] = {}
            for fam in fams:
                train = [f for f in fams if f != fam]
                c, need = calibrate(binary, work, profile, honest_pairs(dirs, profile, train))
                y = write_tmp_yaml(work, "fold.yaml",
                                   profile_yaml(PROFILES[profile]["precision"], c))
                r = score_family(binary, work, y, dirs, plain, profile, fam)
                r["coefficients"] = c
                table[profile][fam] = r
                print_row(profile, fam, r)
                sys.stdout.flush()
    if out_json:
        with open(out_json, "w") as f:
            json.dump(table, f, indent=1, default=str)
    return table


def summary(r):
    hp = sum(ok for _, ok, _ in r["honest"])
    pp = sum(ok for _, ok, _ in r["honest_plain"])
    req = [x for x in r["bugs"] if x[2]]
    caught = sum(x[3] for x in req)
    flagged_all = sum(x[3] for x in r["bugs"])
    return hp, len(r["honest"]), pp, len(r["honest_plain"]), caught, len(req), flagged_all, \
        len(r["bugs"])


def print_row(profile, fam, r):
    hp, h, pp, p, caught, req, fa, nb = summary(r)
    misses = ["%s@%s(first %s)" % (b, t, f) for b, t, rq, ok, f in r["bugs"] if rq and not ok]
    fails = sorted({"%s %s" % (pair, path) for pair, ok, fl in r["honest"] + r["honest_plain"]
                    for path, _ in fl})
    print("%-17s %-18s honest %d/%d plain %d/%d required bugs caught %d/%d (all %d/%d)" %
          (profile, fam, hp, h, pp, p, caught, req, fa, nb))
    for m in misses[:6]:
        print("    missed %s" % m)
    for x in fails[:6]:
        print("    honest fail %s" % x)


def markdown_table(table):
    """The leave-one-family-out table of docs/tolerance-model.md from lofo's JSON."""
    profs = list(table)
    fams = sorted({f for p in profs for f in table[p]})
    out = ["| family | " + " | ".join(profs) + " |", "|:--" + "|:-:" * len(profs) + "|"]
    totals = {p: [0] * 6 for p in profs}
    for f in fams:
        cells = []
        for p in profs:
            r = table[p].get(f)
            if not r:
                cells.append("")
                continue
            hp, h, pp, pn, caught, req, _, _ = summary(r)
            for i, v in enumerate((hp, h, pp, pn, caught, req)):
                totals[p][i] += v
            mark = "" if hp == h and pp == pn else " ❌"
            cells.append("%d/%d, %d/%d; %d/%d%s" % (hp, h, pp, pn, caught, req, mark))
        out.append("| %s | %s |" % (f, " | ".join(cells)))
    out.append("| **all** | %s |" % " | ".join(
        "**%d/%d, %d/%d; %d/%d**" % tuple(totals[p]) for p in profs))
    return "\n".join(out)


def torch_defaults(binary, dirs, profs, fams):
    """Honest pairs that pass under torch.testing's per-dtype defaults (paritycheck's built-in
    profile), per profile's backend pairs."""
    for profile in profs:
        pairs = honest_pairs(dirs, profile, fams)
        ok = 0
        for f, ra, rb, a, b in pairs:
            p = subprocess.run([binary, "-q", a, b], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, check=False)
            ok += p.returncode == 0
        print("%-17s torch defaults pass %d of %d honest pairs" % (profile, ok, len(pairs)))


# ---- cluster-held-out evaluation (issue 29, "Honest evaluation") --------------------------------

# Families that share building blocks are held out together, so that no fold is scored on a
# family whose near-copy it was calibrated on. The grouping is conservative: where a family
# shares blocks with a group, it joins the group, which can only make the held-out score worse
# (its fold has seen less like it), never better. unet (Conv2d, GroupNorm, pooling, transposed
# convs) is built from the CNNs' convolution blocks, so it is a cnn even though its norm is
# GroupNorm, not BatchNorm. moe has no attention, but its LayerNorm, softmax router and
# Linear-GELU-Linear experts are a transformer block's pieces, so it is held out with the
# attention families. Every family not named here (mixer, reductions, embedding_sparse,
# mlp_b1, ...) is a cluster of its own. A family of a second zoo directory (another seed) has
# the same blocks as its namesake and is always in its namesake's cluster.
DEFAULT_CLUSTERS = [
    ("cnn", ["resnet", "mobilenet", "convbias_bn", "cnn_eval", "unet"]),
    ("attention", ["attention", "gpt_explicit", "gpt_sdpa", "encoder", "moe"]),
    ("recurrent", ["lstm", "gru", "rnn"]),
]
MODES = ("plain", "three-way")
THREE_WAY_A, THREE_WAY_REF = "cpu_fp32", "cpu_fp64"


class Family:
    """One family of one zoo directory. Its label is its name in the first directory that holds
    it and name@DIR (the directory's base name) in every later one: two seeds of one model are
    two families for scoring, one for clustering."""

    def __init__(self, label, name, d):
        self.label, self.name, self.dir = label, name, d

    def path(self, backend):
        p = os.path.join(self.dir, "%s_%s.h5" % (self.name, backend))
        return p if os.path.exists(p) else None


def zoo_families(dirs):
    """[Family] of every <family>_cpu_fp32.h5 in each directory, in the directories' order."""
    out, used = [], set()
    for d in dirs:
        if not os.path.isdir(d):
            raise SystemExit("--zoo %s: not a directory" % d)
        for name in families([d]):
            label = name
            if label in used:
                base = "%s@%s" % (name, os.path.basename(os.path.normpath(d)))
                label, n = base, 2
                while label in used:
                    label, n = "%s-%d" % (base, n), n + 1
            used.add(label)
            out.append(Family(label, name, os.path.abspath(d)))
    return out


def make_clusters(fams, specs=None):
    """[(cluster, [labels])]: --cluster NAME=F1,F2 (each F a family name, covering every
    directory's family of that name, or one label such as resnet@zoo29) in place of
    DEFAULT_CLUSTERS when given; every family named in none is a cluster of its own. Clusters
    without a family present are dropped."""
    if specs:
        groups = []
        for spec in specs:
            name, eq, members = spec.partition("=")
            ms = [m for m in members.split(",") if m]
            if not eq or not name or not ms:
                raise SystemExit("--cluster %r: expected NAME=FAMILY1,FAMILY2" % spec)
            for m in ms:
                if not any(m in (f.name, f.label) for f in fams):
                    raise SystemExit("--cluster %r: no family %s in the zoo" % (spec, m))
            groups.append((name, ms))
    else:
        groups = DEFAULT_CLUSTERS
    out, where = [], {}
    for name, ms in groups:
        labels = [f.label for f in fams if f.label in ms or f.name in ms]
        for lab in labels:
            if lab in where:
                raise SystemExit("cluster %s: %s is already in cluster %s"
                                 % (name, lab, where[lab]))
            where[lab] = name
        if labels:
            out.append((name, labels))
    singles = {}
    for f in fams:  # a family in no group: a cluster of its own, with its namesakes
        if f.label not in where:
            singles.setdefault(f.name, []).append(f.label)
    for name, labels in singles.items():
        if name in dict(out):
            raise SystemExit("family %s has the name of a cluster; rename the cluster" % name)
        out.append((name, labels))
    return out


def outcome(code, rep):
    """pass (exit 0), indeterminate (every failing tensor is indeterminate) or drift (any other
    failure), and the failing tensors [(path, verdict)]."""
    failing = [(t["path"], t["verdict"]) for t in rep["tensors"]
               if t["verdict"] not in ("pass", "skipped")]
    if code == 0:
        return "pass", failing
    if failing and all(v == "indeterminate" for _, v in failing):
        return "indeterminate", failing
    return "drift", failing


def honest_record(binobj, text, pair, mode, a, b, ref):
    code, rep = binobj.run(text, a, b, ref)
    out, failing = outcome(code, rep)
    return {"pair": pair, "mode": mode, "pass": code == 0, "outcome": out,
            "failing": failing, "first_divergence": pccal._first(rep)}


def score_held_family(binpath, binobj, text, yaml_path, fam, profile, targets, stride, work):
    """A held-out family under its fold's profile: honest pairs (plain; cpu_fp32 against the
    bug backend three-way), every bug run in both modes, the structural sweep in both modes."""
    prof = PROFILES[profile]
    bk = prof["bug_backend"]
    res = {"family": fam.name, "dir": fam.dir, "honest": [], "bugs": [], "sweep": {}}
    for ra, rb in prof["honest"]:
        a, b = fam.path(ra), fam.path(rb)
        if a and b:
            res["honest"].append(honest_record(binobj, text, "%s/%s" % (ra, rb), "plain", a, b,
                                               None))
    a, b, r = fam.path(THREE_WAY_A), fam.path(bk), fam.path(THREE_WAY_REF)
    if not (a and b):
        return res
    if r:
        res["honest"].append(honest_record(binobj, text, "%s/%s/%s" % (THREE_WAY_A, bk,
                                                                       THREE_WAY_REF),
                                           "three-way", a, b, r))
    # Bug runs: calibrate.score_run injects each bug at each target and runs it in both modes
    # (plain, and three-way where R exists). Its "flagged" is "the run fails"; here flagged
    # means the injected tensor's own verdict is not a pass, and the run's failure is kept as
    # run_failed. Every bug run is kept: required or stretch.
    run = pccal.Run(fam.label, "", a, b, r, (THREE_WAY_A, bk, THREE_WAY_REF))
    scored = pccal.score_run(binobj, text, run, targets, list(BUGS), work,
                             np.random.default_rng(0))
    for x in scored["bugs"]:
        x["run_failed"] = x.pop("flagged")
        x["flagged"] = x["verdict_at_tensor"] != "pass"
        x["class"] = "required" if x["required"] else "stretch"
        res["bugs"].append(x)
    for mode, ref in (("plain", None), ("three-way", r)):
        if mode == "three-way" and not ref:
            continue
        s = {}
        pcsweep.sweep_pair(binpath, ["-t", yaml_path], a, b, ref, work, s, (fam.label, mode),
                           stride=stride)
        res["sweep"][mode] = {
            "honest_exit": s["honest"][0][1], "eligible": len(pcsweep.eligible(b)),
            "mutations": list(pcsweep.MUTATIONS), "mutated": s.get("mutated", 0),
            "passed": [[kind, n] for _, kind, n in s.get("passed", [])],
            "verdicts": s.get("verdicts", {}), "diagnoses": s.get("diagnoses", {})}
    return res


_PROC_ROOT = None


def _fold_init(root):
    global _PROC_ROOT
    _PROC_ROOT = root


def run_fold(task):
    """Fit the profile on every family outside the held-out cluster, score the cluster's
    families under it. Runs in a worker process, in a work directory of its own."""
    t0 = time.time()
    binpath, profile, cluster, held, train = (task[k] for k in
                                              ("binary", "profile", "cluster", "held", "train"))
    fams = {f.label: f for f in task["families"]}
    work = tempfile.mkdtemp(prefix="fold-", dir=_PROC_ROOT or task["root"])
    try:
        pairs = [(lab, ra, rb, fams[lab].path(ra), fams[lab].path(rb))
                 for lab in train for ra, rb in PROFILES[profile]["honest"]
                 if fams[lab].path(ra) and fams[lab].path(rb)]
        fold = {"profile": profile, "cluster": cluster, "held_out": list(held),
                "trained_on": sorted({p[0] for p in pairs}),
                "training_pairs": ["%s %s/%s" % p[:3] for p in pairs], "families": {}}
        if not pairs:
            fold["skipped"] = "no honest pair outside the cluster to calibrate on"
            return fold
        c, need = calibrate(binpath, work, profile, pairs)
        text = profile_yaml(PROFILES[profile]["precision"], c,
                            "# fold of zoo_eval.py clusters: %s, %s held out" % (profile, cluster))
        y = write_tmp_yaml(work, "fold.yaml", text)
        fold["coefficients"] = c
        fold["needs"] = {k: {"value": v, "where": w} for k, (v, w) in need.items()}
        fold["yaml"] = text
        binobj = pccal.Binary(binpath, work)
        for lab in held:
            fold["families"][lab] = score_held_family(binpath, binobj, text, y, fams[lab],
                                                      profile, task["targets"], task["stride"],
                                                      work)
        fold["summary"] = fold_summary(fold)
        fold["seconds"] = round(time.time() - t0, 1)
        return fold
    finally:
        shutil.rmtree(work, ignore_errors=True)


def fold_summary(fold):
    """Per mode: honest runs and outcomes, bug runs caught / flagged (required, stretch), and
    the sweep's mutated tensors by verdict."""
    out = {}
    fr = list(fold.get("families", {}).values())
    for mode in MODES:
        h = [x for r in fr for x in r["honest"] if x["mode"] == mode]
        b = [x for r in fr for x in r["bugs"] if x["mode"] == mode]
        sw = [r["sweep"][mode] for r in fr if mode in r["sweep"]]
        req = [x for x in b if x["class"] == "required"]
        st = [x for x in b if x["class"] == "stretch"]
        verdicts = {}
        for s in sw:
            for k, v in s["verdicts"].items():
                verdicts[k] = verdicts.get(k, 0) + v
        out[mode] = {
            "honest_runs": len(h), "honest_pass": sum(x["outcome"] == "pass" for x in h),
            "honest_indeterminate": sum(x["outcome"] == "indeterminate" for x in h),
            "honest_drift": sum(x["outcome"] == "drift" for x in h),
            "bug_runs": len(b), "bugs_caught": sum(x["caught"] for x in b),
            "bugs_flagged": sum(x["flagged"] for x in b),
            "required_runs": len(req), "required_caught": sum(x["caught"] for x in req),
            "required_flagged": sum(x["flagged"] for x in req),
            "stretch_runs": len(st), "stretch_caught": sum(x["caught"] for x in st),
            "sweep_mutated": sum(s["mutated"] for s in sw),
            "sweep_passed": verdicts.get("pass", 0),
            "sweep_indeterminate": verdicts.get("indeterminate", 0),
            "sweep_drift": verdicts.get("drift", 0),
            "sweep_other": sum(v for k, v in verdicts.items()
                               if k not in ("pass", "indeterminate", "drift"))}
    return out


def progress_line(fold):
    if fold.get("skipped"):
        return "%-17s held out %-16s skipped: %s" % (fold["profile"], fold["cluster"],
                                                     fold["skipped"])
    s = fold["summary"]
    parts = []
    for mode in MODES:
        m = s[mode]
        parts.append("%s: honest %d/%d (%d indet.), bugs caught %d/%d (req %d/%d), sweep pass "
                     "%d/%d" % (mode, m["honest_pass"], m["honest_runs"],
                                m["honest_indeterminate"], m["bugs_caught"], m["bug_runs"],
                                m["required_caught"], m["required_runs"], m["sweep_passed"],
                                m["sweep_mutated"]))
    return "%-17s held out %-16s (%d fam., trained on %d) %s [%.0f s]" % (
        fold["profile"], fold["cluster"], len(fold["held_out"]), len(fold["trained_on"]),
        "; ".join(parts), fold["seconds"])


def clusters_eval(binary, dirs, profs, fams, clusters, targets, stride, jobs, out_json=None):
    """Every (profile, cluster) fold; returns the JSON-able result, also written to out_json."""
    t0 = time.time()
    binary = os.path.abspath(binary)
    if not os.access(binary, os.X_OK):
        raise SystemExit("no paritycheck binary at %s (give --paritycheck)" % binary)
    result = {"command": "clusters", "zoo": [os.path.abspath(d) for d in dirs],
              "binary": binary, "profiles": list(profs), "targets": targets,
              "sweep_stride": stride, "required_ratio": REQUIRED_RATIO, "bugs": list(BUGS),
              "mutations": list(pcsweep.MUTATIONS), "clusters": dict(clusters),
              "families": {f.label: {"name": f.name, "dir": f.dir} for f in fams}, "folds": {}}
    with tempfile.TemporaryDirectory(prefix="zoo-clusters-") as root:
        tasks = []
        for p in profs:
            for name, held in clusters:
                train = [f.label for f in fams if f.label not in held]
                tasks.append({"binary": binary, "profile": p, "cluster": name, "held": held,
                              "train": train, "families": fams, "targets": targets,
                              "stride": stride, "root": root})
        tasks.sort(key=lambda t: -len(t["held"]))  # the biggest folds first
        print("%d folds (%d profiles x %d clusters) over %d families, %d job%s" % (
            len(tasks), len(profs), len(clusters), len(fams), jobs, "s" if jobs > 1 else ""),
            flush=True)
        done = {}
        if jobs > 1:
            with multiprocessing.Pool(jobs, initializer=_fold_init, initargs=(root,)) as pool:
                for fold in pool.imap_unordered(run_fold, tasks):
                    done[(fold["profile"], fold["cluster"])] = fold
                    print(progress_line(fold), flush=True)
        else:
            for t in tasks:
                fold = run_fold(t)
                done[(fold["profile"], fold["cluster"])] = fold
                print(progress_line(fold), flush=True)
    for p in profs:
        result["folds"][p] = {name: done[(p, name)] for name, _ in clusters}
    result["seconds"] = round(time.time() - t0, 1)
    print("%d folds in %.0f s" % (len(tasks), result["seconds"]), flush=True)
    if out_json:
        with open(out_json + ".tmp", "w") as f:
            json.dump(result, f, indent=1, default=str)
        os.replace(out_json + ".tmp", out_json)
    return result


def _frac(a, b):
    return "%d/%d" % (a, b)


def clusters_markdown(result, coefficients=False):
    """The Markdown tables of docs/tolerance-model.md from `clusters`' JSON: one per mode, rows
    the held-out clusters, columns the profiles, and a totals row."""
    profs = result["profiles"]
    clusters = list(result["clusters"])
    keys = ["honest_pass", "honest_runs", "honest_indeterminate", "bugs_caught", "bug_runs",
            "required_caught", "required_runs", "sweep_passed", "sweep_mutated"]
    out = []
    for mode in MODES:
        if not any(result["folds"][p][c].get("summary", {}).get(mode, {}).get("honest_runs")
                   or result["folds"][p][c].get("summary", {}).get(mode, {}).get("bug_runs")
                   for p in profs for c in clusters):
            continue
        out += ["", "**%s** (%s). Each cell: honest runs passing (indeterminate among the "
                "failures); bug runs caught at the injected tensor (required ones); mutated "
                "tensors that pass." % (mode, "A B" if mode == "plain" else
                                        "cpu_fp32 B --reference cpu_fp64"), "",
                "| held-out cluster | " + " | ".join(profs) + " |",
                "|:--" + "|:--" * len(profs) + "|"]
        tot = {p: dict.fromkeys(keys, 0) for p in profs}

        def cell(m):  # ❌ after an honest run that fails and after a mutated tensor that passes
            ind = " (%d ind.)" % m["honest_indeterminate"] if m["honest_indeterminate"] else ""
            return "honest %s%s%s; bugs %s (req %s); sweep %s%s" % (
                _frac(m["honest_pass"], m["honest_runs"]), ind,
                " ❌" if m["honest_pass"] < m["honest_runs"] else "",
                _frac(m["bugs_caught"], m["bug_runs"]),
                _frac(m["required_caught"], m["required_runs"]),
                _frac(m["sweep_passed"], m["sweep_mutated"]), " ❌" if m["sweep_passed"] else "")

        for c in clusters:
            cells = []
            for p in profs:
                m = result["folds"][p][c].get("summary", {}).get(mode)
                if not m:
                    cells.append("skipped")
                    continue
                for k in keys:
                    tot[p][k] += m[k]
                cells.append(cell(m))
            out.append("| %s (%d) | %s |" % (c, len(result["clusters"][c]), " | ".join(cells)))
        out.append("| **all** | %s |" % " | ".join("**%s**" % cell(tot[p]) for p in profs))
    if coefficients:
        ks = ["atol_rms", "max_rel_rms_u", "max_scale_u", "trend_growth_backward",
              "noise_floor_u"]
        for p in profs:
            out += ["", "**%s**: coefficients of each fold" % p, "",
                    "| held-out cluster | " + " | ".join(ks) + " |",
                    "|:--" + "|--:" * len(ks) + "|"]
            for c in clusters:
                co = result["folds"][p][c].get("coefficients")
                out.append("| %s | %s |" % (c, " | ".join(pccal.fmt(co[k]) if co else "-"
                                                          for k in ks)))
    return "\n".join(out[1:])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cmd", choices=["calibrate", "lofo", "write", "torch", "table", "clusters",
                                    "clusters-table"])
    ap.add_argument("--zoo", action="append", help="directory of dumps")
    ap.add_argument("--plain", action="append", help="the same dumps without metadata")
    ap.add_argument("--profile", action="append", choices=list(PROFILES))
    ap.add_argument("--family", action="append", help="restrict to these families")
    ap.add_argument("--paritycheck", default=os.path.join(ROOT, "build", "paritycheck"))
    ap.add_argument("--out", help="lofo, clusters: write the whole table as JSON; table, "
                    "clusters-table: read it")
    ap.add_argument("--cluster", action="append", metavar="NAME=F1,F2",
                    help="clusters: hold these families out together, in place of the default "
                    "clusters (repeatable; a family named in none is its own cluster)")
    ap.add_argument("--targets", type=int, default=TARGETS_PER_RUN, metavar="N",
                    help="clusters: tensors per held-out family that get the injected bugs "
                    "(default and at most %d)" % TARGETS_PER_RUN)
    ap.add_argument("--sweep-stride", type=int, default=pcsweep.STRIDE, metavar="S",
                    help="clusters: the sweep mutates every S-th tensor per run, so S runs per "
                    "mutation and mode (default %d; 1 is fastest)" % pcsweep.STRIDE)
    ap.add_argument("--jobs", type=int, default=1, metavar="J",
                    help="clusters: folds run in J processes (default 1)")
    ap.add_argument("--coefficients", action="store_true",
                    help="clusters-table: also each fold's fitted coefficients")
    a = ap.parse_args(argv)
    if a.cmd == "table":
        with open(a.out) as f:
            print(markdown_table(json.load(f)))
        return 0
    if a.cmd == "clusters-table":
        if not a.out:
            ap.error("clusters-table reads the JSON that clusters wrote: give --out")
        with open(a.out) as f:
            print(clusters_markdown(json.load(f), a.coefficients))
        return 0
    if not a.zoo:
        ap.error("--zoo is required")
    profs = a.profile or list(PROFILES)
    if a.cmd == "clusters":
        if not 0 <= a.targets <= TARGETS_PER_RUN or a.sweep_stride < 1 or a.jobs < 1:
            ap.error("--targets wants 0 .. %d, --sweep-stride and --jobs >= 1" % TARGETS_PER_RUN)
        zf = [f for f in zoo_families(a.zoo)
              if not a.family or f.name in a.family or f.label in a.family]
        if not zf:
            ap.error("no family (<family>_cpu_fp32.h5) in --zoo")
        res = clusters_eval(a.paritycheck, a.zoo, profs, zf, make_clusters(zf, a.cluster),
                            a.targets, a.sweep_stride, a.jobs, a.out)
        print()
        print(clusters_markdown(res))
        return 0
    fams = a.family or families(a.zoo)
    if a.cmd == "lofo":
        lofo(a.paritycheck, a.zoo, a.plain, profs, fams, a.out)
        return 0
    if a.cmd == "torch":
        torch_defaults(a.paritycheck, a.zoo, profs, fams)
        return 0
    with tempfile.TemporaryDirectory() as work:
        for profile in profs:
            c, need = calibrate(a.paritycheck, work, profile, honest_pairs(a.zoo, profile, fams))
            print(profile, json.dumps(c), json.dumps(need))
            if a.cmd == "write":
                write_profile(profile, c, need, fams)
                if profile == "cpu-vs-cuda-fp32":
                    write_mps(c)
    return 0


MPS_HEADER = """# Tolerance profile: CPU fp32 (A) against Apple's MPS backend in fp32 (B).
# Select it with `paritycheck --profile mps`. The model and its keys: docs/tolerance-model.md.
#
# UNCALIBRATED: written from the model, not measured. No MPS dump has been made yet (the
# project has no Apple hardware); until one has, treat a failure as a question, not a verdict.
# To calibrate: dump honest CPU and MPS runs with python/paritycheck/dump.py, add them as a backend to
# PROFILES in tests/zoo/zoo_eval.py and run its `write` command.
#
# How it was written (tests/zoo/zoo_eval.py write): MPS computes fp32 tensors in fp32, so it
# keeps cpu-vs-cuda-fp32's structure (the floors, the sqrt(K) term, the tensor-level criteria,
# the run's trend and noise floor). Metal shaders are usually compiled with fast math, which
# loosens transcendental functions (exp, tanh, erf); as a guess at that extra drift every floor
# of cpu-vs-cuda-fp32 is widened 4x. The factor is not measured; the trend is kept.
"""
MPS_WIDENED = ("atol_rms", "rtol_u", "rtol_sqrt_k", "max_rel_rms_u", "max_scale_u",
               "noise_floor_u")


def write_mps(fp32):
    """Rewrites the `defaults` of tolerances/mps.yaml; its header and its module-type rules,
    written by hand from PyTorch's MPS tests (issue 32), are kept as they are."""
    c = {k: (4 * v if k in MPS_WIDENED else v) for k, v in fp32.items()}
    path = os.path.join(ROOT, "tolerances", "mps.yaml")
    old = open(path).read() if os.path.exists(path) else ""
    head = old[:old.index("version: 1")] if "version: 1" in old else MPS_HEADER
    rules = old[old.index("\nrules:"):] if "\nrules:" in old else ""
    with open(path, "w") as f:
        f.write(profile_yaml("float32", c, head) + rules)


def write_profile(profile, c, need, fams):
    lines = ["# Tolerance profile: %s." % PROFILES[profile]["for"],
             "# Select it with `paritycheck --profile %s`. The model and its keys:" % profile,
             "# docs/tolerance-model.md. Written by tests/zoo/zoo_eval.py write, calibrated on the",
             "# honest pairs of %d families: %s." % (len(fams), ", ".join(fams)),
             "# What the most demanding honest tensor needs beyond the run's trend and noise floor:"]
    for k, (v, where) in sorted(need.items()):
        lines.append("#   %-14s %-9.4g %s" % (k, v, where))
    text = profile_yaml(PROFILES[profile]["precision"], c, "\n".join(lines))
    with open(os.path.join(ROOT, "tolerances", profile + ".yaml"), "w") as f:
        f.write(text)


if __name__ == "__main__":
    sys.exit(main())
