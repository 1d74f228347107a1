#!/usr/bin/python3
"""`tests/zoo/zoo_eval.py clusters` (the cluster-held-out evaluation) on a tiny zoo: convbias_bn
and lstm of fixtures/zoo, and a copy of lstm in a second directory ("seed2", standing in for a
second seed), under the tf32 profile, two bug targets per family (an input, where every bug is
required, and a gradient, where bf16_round is a stretch), the fastest sweep stride.

The checks are structural and computed here from the files, not from zoo_eval's own helpers:
a fold never trains on a family it holds out (a second seed included), every bug run is in the
JSON once with its required/stretch class (the class recomputed for the deterministic bugs),
the counts add up, the sweep mutated every eligible tensor of B by every mutation, two jobs
give what one job gives, and clusters-table prints its tables.

    /usr/bin/python3 tests/zoo/test_zoo_eval.py BINARY WORK_DIR
"""
import json
import math
import os
import re
import shutil
import subprocess
import sys

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from checks import check, run_tests  # noqa: E402

BIN, WORK = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
ZOO = os.path.join(ROOT, "fixtures", "zoo")
EVAL = os.path.join(HERE, "zoo_eval.py")
PY = "/usr/bin/python3"

# What the test holds to be true, written out here rather than imported.
HONEST_TF32 = [("cpu_fp32", "cuda_tf32"), ("cpu_fp64", "cuda_tf32")]
BUG_BACKEND = "cuda_tf32"
BUGS = ["roll", "dropout", "nan", "grad_x2", "scale_1pct", "chan_zero", "bf16_round"]
MUTATIONS = ["zero", "x2", "neg", "roll", "zero10", "shuffle"]
SEED2 = os.path.join(WORK, "seed2")
FAMILIES = {"convbias_bn": (ZOO, "convbias_bn"), "lstm": (ZOO, "lstm"),
            "lstm@seed2": (SEED2, "lstm")}
CLUSTERS = {"cnn": {"convbias_bn"}, "recurrent": {"lstm", "lstm@seed2"}}


def path(label, backend):
    d, name = FAMILIES[label]
    return os.path.join(d, "%s_%s.h5" % (name, backend))


def values(p, name):
    with h5py.File(p, "r") as f:
        return np.asarray(f[name][()], dtype=np.float64)


def rel_rms(x, y):
    x, y = x.ravel(), y.ravel()
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        return math.inf
    s = float(np.sum(x * x))
    d = float(np.sum((y - x) ** 2))
    return math.sqrt(d / s) if s > 0 else (0.0 if d == 0 else math.inf)


def is_gradient(p):
    return any(w in ("grad", "grads", "gradient", "gradients")
               for w in re.split(r"[/._:-]", p.lower()))


def expected_mutated(b_file):
    """Mutated tensors of a sweep of b_file: every float dataset of >= 64 elements by every
    mutation, less those a mutation leaves as they were (zeroing, doubling or negating an
    all-zero tensor; rolling or shuffling a constant one)."""
    n = 0
    with h5py.File(b_file, "r") as f:
        def visit(name, obj):
            nonlocal n
            if not (isinstance(obj, h5py.Dataset) and obj.dtype.kind == "f" and obj.size >= 64):
                return
            x = obj[()].ravel()
            allzero = not np.any(x)
            constant = bool(np.all(x == x[0]))
            for m in MUTATIONS:
                if m in ("zero", "x2", "neg", "zero10") and allzero:
                    continue
                if m in ("roll", "shuffle") and constant:
                    continue
                n += 1
        f.visititems(visit)
    return n


def run_clusters(out, jobs):
    cmd = [PY, EVAL, "clusters", "--paritycheck", BIN, "--zoo", ZOO, "--zoo", SEED2,
           "--family", "convbias_bn", "--family", "lstm", "--profile", "tf32", "--targets", "2",
           "--sweep-stride", "1", "--jobs", str(jobs), "--out", out]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=WORK)


STATE = {}


def setup():
    if os.path.isdir(WORK):
        shutil.rmtree(WORK)
    os.makedirs(SEED2)
    for bk in ("cpu_fp32", "cpu_fp64", "cuda_tf32"):
        shutil.copyfile(os.path.join(ZOO, "lstm_%s.h5" % bk),
                        os.path.join(SEED2, "lstm_%s.h5" % bk))
    out = os.path.join(WORK, "clusters.json")
    p = run_clusters(out, 2)
    ok = check("clusters --jobs 2: exit 0", p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:])
    STATE["stdout"] = p.stdout
    if ok:
        with open(out) as f:
            STATE["res"] = json.load(f)
        STATE["out"] = out
    return ok


def test_families_and_folds():
    res = STATE["res"]
    check("families: (directory, name), the second lstm labelled lstm@seed2",
          set(res["families"]) == set(FAMILIES), sorted(res["families"]))
    check("clusters: the two lstm in one cluster, convbias_bn in cnn",
          {k: set(v) for k, v in res["clusters"].items()} == CLUSTERS, res["clusters"])
    folds = res["folds"]["tf32"]
    check("one fold per cluster", set(folds) == set(CLUSTERS), sorted(folds))
    for name, fold in folds.items():
        held = set(fold["held_out"])
        train = set(fold["trained_on"])
        check("%s: held out what the cluster holds" % name, held == CLUSTERS[name], held)
        check("%s: never trained on a held-out family" % name, not (held & train), held & train)
        check("%s: trained on every other family" % name,
              train == set(FAMILIES) - CLUSTERS[name], train)
        used = {p.split()[0] for p in fold["training_pairs"]}
        check("%s: its training pairs are of the training families only" % name,
              used == train, fold["training_pairs"])
        pairs = ["%s %s/%s" % (lab, a, b) for lab in sorted(train) for a, b in HONEST_TF32]
        check("%s: every honest pair of the training families, no other" % name,
              sorted(fold["training_pairs"]) == sorted(pairs), fold["training_pairs"])
        check("%s: coefficients recorded" % name,
              "max_rel_rms_u" in fold.get("coefficients", {}), fold.get("coefficients"))
        check("%s: scored each held-out family" % name, set(fold["families"]) == held,
              sorted(fold["families"]))


def test_honest():
    for name, fold in STATE["res"]["folds"]["tf32"].items():
        for lab, fr in fold["families"].items():
            got = sorted((h["mode"], h["pair"]) for h in fr["honest"])
            want = sorted([("plain", "%s/%s" % p) for p in HONEST_TF32] +
                          [("three-way", "cpu_fp32/cuda_tf32/cpu_fp64")])
            check("%s %s: the honest runs" % (name, lab), got == want, got)
            for h in fr["honest"]:
                verdicts = {v for _, v in h["failing"]}
                consistent = (h["outcome"] == "pass") == h["pass"] and (
                    h["outcome"] != "indeterminate" or verdicts == {"indeterminate"}) and (
                    h["outcome"] != "drift" or verdicts - {"indeterminate"})
                check("%s %s %s %s: outcome %s agrees with the failing tensors"
                      % (name, lab, h["mode"], h["pair"], h["outcome"]), consistent,
                      h["failing"])


def test_bug_runs():
    for name, fold in STATE["res"]["folds"]["tf32"].items():
        for lab, fr in fold["families"].items():
            a, b = path(lab, "cpu_fp32"), path(lab, BUG_BACKEND)
            bugs = fr["bugs"]
            targets = {x["tensor"] for x in bugs}
            check("%s %s: two targets (--targets 2)" % (name, lab), len(targets) == 2, targets)
            want = sorted((t, bug, mode) for t in targets for bug in BUGS
                          for mode in ("plain", "three-way")
                          if bug != "grad_x2" or is_gradient(t))
            got = sorted((x["tensor"], x["bug"], x["mode"]) for x in bugs)
            check("%s %s: every bug at the target, in both modes, once" % (name, lab),
                  got == want, (got, want))
            for t in targets:
                with h5py.File(b, "r") as f:
                    ok = t in f and f[t].dtype.kind == "f" and f[t].size >= 16 and \
                        f[t].shape[-1] > 1
                check("%s %s: target %s is a float tensor of B, >= 16 elements" % (name, lab, t),
                      ok)
            for x in bugs:
                where = "%s %s %s %s" % (name, lab, x["bug"], x["mode"])
                check("%s: class is required or stretch, as `required` says" % where,
                      x["class"] == ("required" if x["required"] else "stretch"), x)
                check("%s: caught means the run fails at the injected tensor" % where,
                      x["caught"] == (x["run_failed"] and x["first_divergence"] == x["tensor"]),
                      x)
                check("%s: flagged means the tensor's verdict is not a pass" % where,
                      x["flagged"] == (x["verdict_at_tensor"] != "pass"), x)
            # the class of the deterministic bugs, from the files
            for x in bugs:
                if x["bug"] not in ("roll", "nan", "scale_1pct", "chan_zero"):
                    continue
                av, bv = values(a, x["tensor"]), values(b, x["tensor"])
                if x["bug"] == "roll":
                    buggy = np.roll(bv, 1, axis=-1)
                elif x["bug"] == "scale_1pct":
                    buggy = 1.01 * bv
                elif x["bug"] == "chan_zero":
                    buggy = bv.copy()
                    buggy[..., -1] = 0
                else:
                    buggy = bv.copy()
                    buggy.flat[buggy.size // 2] = np.nan
                effect = rel_rms(bv, buggy)
                required = effect >= 20 * rel_rms(av, bv)
                check("%s %s %s %s: required = effect >= 20 x honest drift" %
                      (name, lab, x["bug"], x["mode"]), x["required"] == required,
                      (x, effect, rel_rms(av, bv)))
            for mode in ("plain", "three-way"):
                s = fold["summary"][mode]
                mine = [x for f in fold["families"].values() for x in f["bugs"]
                        if x["mode"] == mode]
                check("%s %s: required + stretch = bug runs" % (name, mode),
                      s["required_runs"] + s["stretch_runs"] == s["bug_runs"] == len(mine), s)
                check("%s %s: caught and flagged counted" % (name, mode),
                      s["bugs_caught"] == sum(x["caught"] for x in mine) and
                      s["bugs_flagged"] == sum(x["flagged"] for x in mine), s)


def test_both_classes():
    bugs = [x for f in STATE["res"]["folds"]["tf32"].values() for r in f["families"].values()
            for x in r["bugs"]]
    check("the bug runs hold required and stretch ones (the class checks bite)",
          {x["class"] for x in bugs} == {"required", "stretch"}, {x["class"] for x in bugs})
    check("the bug runs hold grad_x2 at a gradient", any(x["bug"] == "grad_x2" for x in bugs))


def test_sweep():
    for name, fold in STATE["res"]["folds"]["tf32"].items():
        total = {"plain": 0, "three-way": 0}
        for lab, fr in fold["families"].items():
            want = expected_mutated(path(lab, BUG_BACKEND))
            check("%s %s: some tensor is eligible" % (name, lab), want > 0)
            for mode in ("plain", "three-way"):
                s = fr["sweep"].get(mode)
                if not check("%s %s %s: swept" % (name, lab, mode), s is not None):
                    continue
                check("%s %s %s: mutated = eligible tensors x mutations (%d)" %
                      (name, lab, mode, want), s["mutated"] == want, s["mutated"])
                check("%s %s %s: every mutated tensor has one verdict" % (name, lab, mode),
                      sum(s["verdicts"].values()) == s["mutated"], s["verdicts"])
                check("%s %s %s: passed lists the passing ones" % (name, lab, mode),
                      len(s["passed"]) == s["verdicts"].get("pass", 0), s["passed"])
                total[mode] += s["mutated"]
        for mode in ("plain", "three-way"):
            s = fold["summary"][mode]
            check("%s %s: sweep totals add up" % (name, mode),
                  s["sweep_mutated"] == total[mode] ==
                  s["sweep_passed"] + s["sweep_indeterminate"] + s["sweep_drift"] +
                  s["sweep_other"], s)


def strip_times(res):
    res = json.loads(json.dumps(res))
    res.pop("seconds", None)
    for folds in res["folds"].values():
        for fold in folds.values():
            fold.pop("seconds", None)
    return res


def test_one_job_same():
    out = os.path.join(WORK, "clusters-j1.json")
    p = run_clusters(out, 1)
    if check("clusters --jobs 1: exit 0", p.returncode == 0, p.stderr[-3000:]):
        with open(out) as f:
            one = json.load(f)
        check("--jobs 1 and --jobs 2 give the same JSON",
              strip_times(one) == strip_times(STATE["res"]))


def test_table():
    check("progress: a line per fold", sum(" held out " in ln for ln in
                                           STATE["stdout"].splitlines()) == len(CLUSTERS),
          STATE["stdout"][-2000:])
    p = subprocess.run([PY, EVAL, "clusters-table", "--out", STATE["out"], "--coefficients"],
                       capture_output=True, text=True)
    check("clusters-table: exit 0", p.returncode == 0, p.stderr)
    lines = p.stdout.splitlines()
    check("clusters-table: a plain and a three-way table",
          any(ln.startswith("**plain**") for ln in lines) and
          any(ln.startswith("**three-way**") for ln in lines), p.stdout)
    rows = [ln for ln in lines if ln.startswith("| recurrent (2) |")]
    check("clusters-table: the recurrent row in both tables", len(rows) == 2, p.stdout)
    for mode in ("plain", "three-way"):
        n = sum(f["summary"][mode]["bug_runs"] for f in STATE["res"]["folds"]["tf32"].values())
        m = sum(f["summary"][mode]["sweep_mutated"]
                for f in STATE["res"]["folds"]["tf32"].values())
        tot = [ln for ln in lines if ln.startswith("| **all** |")]
        i = 0 if mode == "plain" else 1
        check("clusters-table %s: totals row counts %d bug runs and %d mutated tensors" %
              (mode, n, m), len(tot) == 2 and re.search(r"bugs \d+/%d " % n, tot[i]) and
              re.search(r"sweep \d+/%d" % m, tot[i]), tot)


def test_cluster_override():
    sys.path.insert(0, HERE)
    import zoo_eval
    fams = zoo_eval.zoo_families([ZOO, SEED2])
    cl = dict(zoo_eval.make_clusters(fams, ["seq=lstm,gpt_sdpa"]))
    check("--cluster: replaces the defaults; lstm of both directories with gpt_sdpa",
          set(cl["seq"]) == {"lstm", "lstm@seed2", "gpt_sdpa"}, cl)
    check("--cluster: every other family its own cluster",
          cl.get("resnet") == ["resnet"] and cl.get("convbias_bn") == ["convbias_bn"], cl)


if __name__ == "__main__":
    if not setup():
        print("0 passed, 1 failed")
        sys.exit(1)
    sys.exit(run_tests([test_families_and_folds, test_honest, test_bug_runs, test_both_classes,
                        test_sweep,
                        test_one_job_same, test_table, test_cluster_override]))
