#!/usr/bin/python3
"""The shipped profiles on real dumps, and the tolerance model's inputs, end to end.

    /usr/bin/python3 tests/drift/test_drift.py PATH/TO/paritycheck WORK_DIR

On the committed real dumps (fixtures/real and fixtures/zoo, made on GPUs by
tests/gen/gen_real_fixtures.py and tests/zoo/make_zoo.py), for every shipped profile and its
backend pairs (tests/zoo/zoo_eval.py's PROFILES):

1. every honest pair passes (exit 0, no first divergence), as written with metadata and as
   written without any (tests/zoo/strip_metadata.py, copies in WORK_DIR);
2. bugs injected into one tensor of B (tests/zoo/zoo_eval.py's injector: roll, dropout, one NaN,
   a doubled gradient, 1% scale, the last channel zeroed, rounding to bf16) at tensors spread
   over execution order: every bug whose effect is at least 20 times the honest drift at that
   tensor (rel_rms(B_bug, B) >= 20 rel_rms(B, A)) is flagged with the first divergence at the
   injected tensor; on every bug run the JSON's reasons, root causes and first divergence are
   consistent;
3. the tensor-level criteria and the model's inputs (K, accumulation dtype, RMS of A) on small
   files whose expected outcomes are worked out by hand below;
4. --profile: the lookup, the order of layers and the errors.

Prints one line per failure and a last line "N passed, M failed"; exits 1 when anything failed.
"""

import json
import math
import os
import shutil
import subprocess
import sys

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "oracle"))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, os.path.join(ROOT, "tests", "zoo"))
from checks import check, summary  # noqa: E402
import zoo_eval  # noqa: E402

DUMPS = [os.path.join(ROOT, "fixtures", "real"), os.path.join(ROOT, "fixtures", "zoo")]

BIN = WORK = None




def run(args, env=None):
    e = dict(os.environ)
    e.pop("PARITYCHECK_TOLERANCES", None)
    e.update(env or {})
    return subprocess.run([BIN] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          env=e, text=True, timeout=300)


def run_json(args, env=None):
    p = run(["--json", "-"] + list(args), env)
    report = json.loads(p.stdout) if p.returncode in (0, 1) else None
    return p, report


def record_consistent(name, report):
    """The judge's record as the JSON renders it (docs/report-json.md, "reasons and caused_by"):
    every failing tensor gives reasons, a drift's each a value above its limit; caused_by names
    a failing root cause earlier in execution order; first_divergence is the first failing
    tensor in execution order, a root cause."""
    by_path = {t["path"]: t for t in report["tensors"]}
    failing = [t for t in report["tensors"] if t["verdict"] not in ("pass", "skipped", "error")]
    bad = []
    for t in report["tensors"]:
        if t not in failing:
            if t["caused_by"] is not None:
                bad.append("%s: %s but caused by %s" % (t["path"], t["verdict"], t["caused_by"]))
            continue
        rs = t.get("reasons") or []
        if not rs or (t["verdict"] == "drift" and not all(
                isinstance(r["value"], str) or r["value"] > r["limit"] for r in rs)):
            bad.append("%s: reasons %r" % (t["path"], rs))
        root = by_path.get(t["caused_by"]) if t["caused_by"] else None
        if t["caused_by"] and (root not in failing or root["caused_by"] is not None or
                               root["execution_index"] >= t["execution_index"]):
            bad.append("%s: caused by %s" % (t["path"], t["caused_by"]))
    first = min(failing, key=lambda t: t["execution_index"])["path"] if failing else None
    if report["first_divergence"] != first:
        bad.append("first divergence %s, first failure %s" % (report["first_divergence"], first))
    check(name + ": reasons, root causes and first divergence consistent", not bad,
          "; ".join(bad[:3]))


# ---- 1: honest pairs -----------------------------------------------------------------------

def profile_yaml(profile):
    return os.path.join(ROOT, "tolerances", profile + ".yaml")


def plain_copies():
    """Every dump of DUMPS without metadata, as other tools write them, in WORK/plain."""
    out = os.path.join(WORK, "plain")
    shutil.rmtree(out, ignore_errors=True)
    for d in DUMPS:
        subprocess.run([sys.executable, os.path.join(ROOT, "tests", "zoo", "strip_metadata.py"),
                        d, out], check=True, stdout=subprocess.DEVNULL)
    return [out]


# Plain mode cannot tell amplified rounding from a bug beyond the profile's allowance (the trend
# no longer feeds itself): an honest plain pair may fail, but only on tensors that look like
# noise (and say so, suggesting --reference) or keep no digit, and the same pair passes with
# the family's CPU fp64 run as the reference (docs/tolerance-model.md).
# (every diagnosis that is not structural: noise, no digits, rounded, slice, a small factor)
PLAIN_HONEST_FAILURES = set()

# Tracked expected failures (issue 29: in place of an allowlist of cases): how many honest pairs
# fail in plain mode (each must be diagnosed and pass three-way, above) and how many required
# bug runs go unclaimed (NOT_CLAIMED, or behind such a failure), as measured on the shipped
# dumps. The test prints both counts and fails when one grows; when one shrinks it says so, and
# the number here should be lowered with the change that did it.
TRACKED = {"plain honest pair failures": 8, "required bug runs not claimed": 13}
COUNTS = {k: 0 for k in TRACKED}


def test_honest_pairs(plain):
    for profile in zoo_eval.PROFILES:
        for label, dirs in (("", DUMPS), (", no metadata", plain)):
            pairs = zoo_eval.honest_pairs(dirs, profile, zoo_eval.families(dirs))
            check("%s%s: honest pairs to test" % (profile, label), len(pairs) >= 8, len(pairs))
            for family, ra, rb, a, b in pairs:
                name = "%s %s vs %s (%s%s)" % (family, ra, rb, profile, label)
                p, rep = run_json(["--profile", profile, a, b])
                fails = rep and [t for t in rep["tensors"] if t["verdict"] != "pass"]
                if p.returncode == 0 and rep["first_divergence"] is None:
                    check(name + " passes", True)
                    continue
                PLAIN_HONEST_FAILURES.add((family, profile))
                COUNTS["plain honest pair failures"] += 1
                diags = [t.get("diagnosis") or {} for t in fails or []]
                check(name + ": plain failures are not structural, each diagnosed",
                      p.returncode == 1 and all(d.get("kind") and not d.get("structural")
                                                for d in diags),
                      sorted({(d.get("kind"), d.get("structural")) for d in diags}))
                r = zoo_eval.dump_path(dirs, family, "cpu_fp64")
                if r and ra != "cpu_fp64":
                    p3, rep3 = run_json(["--profile", profile, "--reference", r, a, b])
                    check(name + ": passes with the fp64 reference", p3.returncode == 0,
                          rep3 and [t["path"] for t in rep3["tensors"]
                                    if t["verdict"] != "pass"][:3])


# ---- 2: the bug matrix ----------------------------------------------------------------------

# What the profiles do not claim (docs/tolerance-model.md, "What each profile resolves"):
# rounding to bf16 is bf16 autocast's own precision, so no comparison can tell it from the
# autocast; required by the 20x rule only where the honest drift is 0 (inputs, lookups).
NOT_CLAIMED = {("bf16_round", "bf16-autocast")}


def test_bug_matrix():
    for profile in zoo_eval.PROFILES:
        for family in zoo_eval.families(DUMPS):
            runs = zoo_eval.bug_runs(BIN, WORK, profile_yaml(profile), DUMPS, profile, family,
                                     targets=4)
            for bug, target, required, caught, first in runs:
                name = "%s %s at %s (%s)" % (family, bug, target, profile)
                why = None
                if (family, profile) in PLAIN_HONEST_FAILURES and not caught:
                    why = "honest tensors of this pair fail in plain mode before the bug"
                if (bug, profile) in NOT_CLAIMED or why:
                    print("info: %s: %s, not claimed%s" % (
                        name, "flagged" if caught else "not flagged", why and ": " + why or ""))
                    COUNTS["required bug runs not claimed"] += required and not caught
                elif required:
                    check(name + " is flagged at the injected tensor", caught,
                          "first divergence %s" % first)
            for rep_name in zoo_eval.LAST_REPORTS:
                record_consistent(rep_name, zoo_eval.LAST_REPORTS[rep_name])
            zoo_eval.LAST_REPORTS.clear()


# ---- 3: hand-worked cases -------------------------------------------------------------------

def write_pair(name, a, b, attrs=None):
    """Files A and B of float64 datasets /t (values a, b) in WORK; returns their paths."""
    paths = []
    for side, v in (("a", a), ("b", b)):
        path = os.path.join(WORK, "%s_%s.h5" % (name, side))
        with h5py.File(path, "w") as f:
            ds = f.create_dataset("t", data=np.asarray(v, dtype=np.float64))
            for k, x in (attrs or {}).items():
                ds.attrs[k] = x
        paths.append(path)
    return paths


def write_yaml(name, text):
    path = os.path.join(WORK, name + ".yaml")
    with open(path, "w") as f:
        f.write("version: 1\n" + text)
    return path


def test_tracked_counts():
    for k, limit in TRACKED.items():
        print("tracked: %s: %d (tracked %d)%s" % (
            k, COUNTS[k], limit, "; lower TRACKED" if COUNTS[k] < limit else ""))
        check("%s: %d, at most the tracked %d" % (k, COUNTS[k], limit), COUNTS[k] <= limit)


def test_tensor_level_criteria():
    # u = 2^-8 (precision bfloat16; the compare dtype float64 is finer). atol 1 lets every element
    # pass, so only the tensor-level criterion decides. B = A (1 + d) has scale_error = d and
    # rel_rms = |d| (docs/metrics.md), up to double rounding far below the margins used here.
    a4, a16 = [1.0, 2.0, 3.0, 4.0], [float(i) for i in range(1, 17)]
    cases = [  # (yaml defaults, A, d, expected exit)
        ("max_scale_u: 1", a4, 0.0039, 0),            # allowance u = 0.00390625
        ("max_scale_u: 1", a4, 0.0040, 1),
        ("max_scale_u: 1", a4, -0.0040, 1),           # |scale_error|
        ("max_scale_u_sqrt_n: 2", a4, 0.0039, 0),     # 2 u / sqrt(4) = u
        ("max_scale_u_sqrt_n: 2", a4, 0.0040, 1),
        ("max_scale_u_sqrt_n: 2", a16, 0.0019, 0),    # 2 u / sqrt(16) = u / 2 = 0.001953125
        ("max_scale_u_sqrt_n: 2", a16, 0.0020, 1),
        ("{max_scale_u: 0.5, max_scale_u_sqrt_n: 2}", a16, 0.0039, 0),  # (0.5 + 0.5) u
        ("{max_scale_u: 0.5, max_scale_u_sqrt_n: 2}", a16, 0.0040, 1),
        ("max_rel_rms_u: 1", a4, -0.0039, 0),
        ("max_rel_rms_u: 1", a4, 0.0040, 1),
    ]
    for i, (crit, a, d, code) in enumerate(cases):
        crit = crit.strip("{}")
        y = write_yaml("agg%d" % i, "defaults: {all: {precision: bfloat16, atol: 1, %s}}\n" % crit)
        pa, pb = write_pair("agg%d" % i, a, [x * (1 + d) for x in a])
        p = run(["-t", y, pa, pb])
        check("%s, N=%d, d=%g: exit %d" % (crit, len(a), d, code), p.returncode == code,
              "exit %d" % p.returncode)
    # Sigma a^2 = 0: rel_rms and scale_error are 0 when B is zero too, +inf otherwise.
    y = write_yaml("agg_zero", "defaults: {all: {precision: bfloat16, atol: 1, max_scale_u: 1}}\n")
    for b, code in (([0.0, 0.0], 0), ([0.0, 0.5], 1)):
        pa, pb = write_pair("agg_zero", [0.0, 0.0], b)
        check("A = 0, B = %s: exit %d" % (b, code), run(["-t", y, pa, pb]).returncode == code)
    # An element mismatch still fails with every tensor-level criterion met.
    pa, pb = write_pair("agg_elem", a4, [1.0, 2.0, 3.0, 6.0])
    check("element mismatch beside tensor-level criteria",
          run(["-t", write_yaml("agg_elem", "defaults: {all: {precision: bfloat16, atol: 1,"
                                             " max_rel_rms_u: 1000}}\n"),
               pa, pb]).returncode == 1)


def test_model_inputs():
    # A = [2, -2] * 8: RMS(A) = 2. u = 2^-8 (bfloat16). K = 16 from the dataset attribute (16
    # elements: a K beyond the file's largest tensor would be capped there, docs/robustness.md),
    # u_acc = 2^-11 from its accumulation_dtype float16 (which beats the profile's float32).
    y = write_yaml("inputs", "defaults: {all: {precision: bfloat16, accumulation: float32,"
                             " atol_rms: 4, rtol_u: 0.25, rtol_sqrt_k: 1}}\n")
    a = [2.0, -2.0] * 8
    for attrs, rtol in (({"reduction_length": 16, "accumulation_dtype": "float16"}, 2.0 ** -9),
                        ({"reduction_length": 16}, 2.0 ** -10),  # sqrt(16) 2^-24 < 0.25 u
                        ({}, 2.0 ** -10)):
        pa, pb = write_pair("inputs", a, a, attrs)
        p, rep = run_json(["-t", y, pa, pb])
        tol = rep["tensors"][0]["tolerance"] if rep else {}
        check("atol = 4 u RMS(A) = 2^-5 with %s" % attrs, tol.get("atol") == 2.0 ** -5, str(tol))
        check("rtol = %g with %s" % (rtol, attrs), tol.get("rtol") == rtol, str(tol))
    # A complex tensor: RMS over the moduli, |3+4i| = 5 -> atol = 4 u 5.
    paths = []
    for side in "ab":
        path = os.path.join(WORK, "inputs_c_%s.h5" % side)
        with h5py.File(path, "w") as f:
            f["t"] = np.array([3 + 4j, -3 - 4j], dtype=np.complex128)
        paths.append(path)
    p, rep = run_json(["-t", y] + paths)
    check("complex: atol = 4 u |a|_rms", rep and rep["tensors"][0]["tolerance"].get("atol") ==
          4 * 2.0 ** -8 * 5, p.stdout[-300:])


# ---- 4: --profile ---------------------------------------------------------------------------

def test_profile_option():
    a, b = (zoo_eval.dump_path(DUMPS, "rnn", k) for k in ("cpu_fp32", "cuda_tf32"))
    p = run(["--profile", "no-such-profile", a, b])
    shipped = sorted(os.path.splitext(n)[0] for n in os.listdir(os.path.join(ROOT, "tolerances"))
                     if n.endswith(".yaml"))
    check("unknown profile: exit 2", p.returncode == 2)
    check("unknown profile: names the available ones",
          "unknown profile 'no-such-profile'" in p.stderr and
          ": " + ", ".join(shipped) + ")" in p.stderr, p.stderr)
    for bad in ("../tolerances/tf32", "/etc/passwd", ".hidden", ""):
        p = run(["--profile", bad, a, b])
        check("profile name %r refused: exit 2" % bad, p.returncode == 2, p.stderr)
    check("torch defaults fail tf32 drift", run([a, b]).returncode == 1)
    check("--profile tf32 passes it", run(["--profile", "tf32", a, b]).returncode == 0)
    check("--profile=mps loads", run(["--profile=mps", a, b]).returncode in (0, 1))
    # A -t file loads after the profile wherever it stands on the command line: it unsets the
    # profile's atol_rms and sets atol 0.125, which must be what applies.
    t = write_yaml("after", "defaults: {all: {atol_rms: null, atol: 0.125}}\n")
    for args in (["-t", t, "--profile", "tf32"], ["--profile", "tf32", "-t", t]):
        p, rep = run_json(args + [a, b])
        atols = {x["tolerance"].get("atol") for x in rep["tensors"]} if rep else set()
        check("%s: the -t file comes last" % " ".join(args[:2]), atols == {0.125}, str(atols))
        check("%s: the report names the profile" % " ".join(args[:2]),
              rep and rep.get("profile") == "tf32", str(rep and rep.get("profile")))
    # PARITYCHECK_TOLERANCES replaces the folder.
    folder = os.path.join(WORK, "profiles")
    shutil.rmtree(folder, ignore_errors=True)  # a previous run's files
    os.makedirs(folder)
    with open(os.path.join(folder, "everything.yaml"), "w") as f:
        f.write("version: 1\ndefaults: {all: {atol: 1.0e+30}}\n")
    env = {"PARITYCHECK_TOLERANCES": folder}
    check("PARITYCHECK_TOLERANCES: its profile applies",
          run(["--profile", "everything", a, b], env).returncode == 0)
    p = run(["--profile", "tf32", a, b], env)
    check("PARITYCHECK_TOLERANCES: only its profiles",
          p.returncode == 2 and "(in %s: everything)" % folder in p.stderr, p.stderr)
    with open(os.path.join(folder, "broken.yaml"), "w") as f:
        f.write("version: 1\ndefaults: {all: {atol_rms: -1}}\n")
    p = run(["--profile", "broken", a, b], env)
    check("a broken profile: exit 2 with its position",
          p.returncode == 2 and "broken.yaml:2:28: 'atol_rms' must be >= 0" in p.stderr, p.stderr)


def main():
    global BIN, WORK
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    BIN, WORK = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    os.makedirs(WORK, exist_ok=True)
    test_profile_option()
    test_tensor_level_criteria()
    test_model_inputs()
    test_honest_pairs(plain_copies())
    test_bug_matrix()
    test_tracked_counts()
    return summary()


if __name__ == "__main__":
    sys.exit(main())
