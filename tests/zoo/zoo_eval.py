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

A bug is *required* at a tensor when its effect, rel_rms(B_bug, B), is at least REQUIRED_RATIO
times the honest drift there, rel_rms(B, A); it is *caught* when the run fails with its first
divergence at the injected tensor.

    /usr/bin/python3 tests/zoo/zoo_eval.py lofo --zoo /work/zoo/full --plain /work/zoo/plain
    /usr/bin/python3 tests/zoo/zoo_eval.py write --zoo /work/zoo/full
"""

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "python"))
# The calibration rule, the model's constants and the bug injector live in the package
# (python/paritycheck/calibrate.py), which `python3 -m paritycheck.calibrate` runs for users.
from paritycheck import calibrate as pccal  # noqa: E402
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


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cmd", choices=["calibrate", "lofo", "write", "torch", "table"])
    ap.add_argument("--zoo", action="append", help="directory of dumps")
    ap.add_argument("--plain", action="append", help="the same dumps without metadata")
    ap.add_argument("--profile", action="append", choices=list(PROFILES))
    ap.add_argument("--family", action="append", help="restrict to these families")
    ap.add_argument("--paritycheck", default=os.path.join(ROOT, "build", "paritycheck"))
    ap.add_argument("--out", help="lofo: write the whole table as JSON; table: read it")
    a = ap.parse_args(argv)
    if a.cmd == "table":
        with open(a.out) as f:
            print(markdown_table(json.load(f)))
        return 0
    if not a.zoo:
        ap.error("--zoo is required")
    profs = a.profile or list(PROFILES)
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
