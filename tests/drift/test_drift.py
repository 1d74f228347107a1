#!/usr/bin/python3
"""The bug-detection matrix and the reduction-aware tolerance model, end to end.

    /usr/bin/python3 tests/drift/test_drift.py PATH/TO/paritycheck WORK_DIR

On the committed real fixtures (fixtures/real, made on a GPU by scripts/gen_real_fixtures.py):

1. every shipped profile passes every honest pair of its backend (exit 0, no first divergence);
2. bugs injected into one tensor of B (scripts/inject_bugs.py, copies in WORK_DIR) are flagged
   with the first divergence at that tensor, for every (bug, profile) that scripts/score.py's
   EXPECTED claims the profile resolves; the other cases are printed, not asserted; on every
   bug run the JSON's reasons, root causes and first divergence are consistent;
3. on every run of 1 and 2, each tensor's verdict, atol and rtol agree with the independent
   numpy implementation of the model in scripts/score.py;
4. the shipped profiles hold exactly what the calibration rule makes of the fixtures;
5. the tensor-level criteria and the model's inputs (K, accumulation dtype, RMS of A) on small
   files whose expected outcomes are worked out by hand below;
6. --profile: the lookup, the order of layers and the errors.

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
sys.path.insert(0, os.path.join(ROOT, "scripts"))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from checks import check, summary  # noqa: E402
import inject_bugs  # noqa: E402
import score  # noqa: E402

BIN = WORK = None
# A figure this close (relative) to its threshold may land on either side in C and in numpy,
# whose sums run in a different order; such a tensor's verdict is not compared.
NEAR = 1e-9




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


def near_threshold(a, b, tol):
    """True when a tensor-level figure or an element sits within NEAR of its threshold."""
    n, rel_rms, scale = score.aggregates(a, b)
    close = []
    if tol["max_rel_rms"] is not None:
        close.append((rel_rms, tol["max_rel_rms"]))
    if tol["max_scale"] is not None and n:
        close.append((abs(scale), tol["max_scale"] + tol["max_scale_sqrt_n"] / math.sqrt(n)))
    with np.errstate(invalid="ignore"):
        e = np.abs(b - a)
    for t in (tol["atol"], None if tol["rtol"] is None else tol["rtol"] * np.abs(a)):
        if t is not None:
            close.append((e, t))
    return any(np.any(np.abs(np.asarray(x) - y) <= NEAR * np.abs(y)) for x, y in close)


def same_number(x, y):
    return (x is None and y is None) or (x is not None and y is not None and
                                         abs(x - y) <= 1e-12 * abs(y))


def agree_with_model(name, report, A, B, profile):
    """Every tensor's verdict, atol and rtol in the report equal the numpy model's."""
    layers = score.load_layers(profile)
    model, first = score.model_run(A, B, layers)
    by_path = {t["path"]: t for t in report["tensors"]}
    bad = []
    for path, verdict, tol in model:
        t = by_path["/" + path]
        got = t.get("tolerance", {})
        if not (same_number(got.get("atol"), tol["atol"]) and
                same_number(got.get("rtol"), tol["rtol"])):
            bad.append("%s: tolerance %s, numpy atol %s rtol %s" % (path, got, tol["atol"],
                                                                    tol["rtol"]))
        a, b = A.t[path][0], B.t[path][0]
        if t["verdict"] != verdict and not near_threshold(a, b, tol):
            bad.append("%s: %s, numpy %s" % (path, t["verdict"], verdict))
    check(name + " agrees with the numpy model", not bad, "; ".join(bad[:3]))
    return first


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


# ---- 1, 3: honest pairs ---------------------------------------------------------------------

def test_honest_pairs(dumps):
    for profile in score.PROFILES:
        for family, ra, rb in score.honest_pairs(profile):
            name = "%s %s vs %s (%s)" % (family, ra, rb, profile)
            p, rep = run_json(["--profile", profile, score.fixture(family, ra),
                               score.fixture(family, rb)])
            if not check(name + " passes", p.returncode == 0 and rep["first_divergence"] is None,
                         "exit %d, first divergence %s" % (
                             p.returncode, rep and rep["first_divergence"])):
                continue
            agree_with_model(name, rep, dumps[family, ra], dumps[family, rb], profile)


# ---- 2, 3: the bug matrix -------------------------------------------------------------------

def test_bug_matrix(dumps):
    outcomes = {}
    for profile, (backend, _) in score.PROFILES.items():
        for family, bug, target, claim in score.bug_cases(profile):
            src = score.fixture(family, backend)
            dst = os.path.join(WORK, "bug.h5")
            inject_bugs.inject(src, dst, bug, target)
            p, rep = run_json(["--profile", profile, score.fixture(family, score.BUG_REFERENCE),
                               dst])
            first = rep["first_divergence"] if rep else None
            name = "%s %s at %s (%s)" % (family, bug, target, profile)
            if claim == score.FLAG:
                check(name + " is flagged at the injected tensor",
                      p.returncode == 1 and first == "/" + target,
                      "exit %d, first divergence %s; stderr: %s" % (
                          p.returncode, first, p.stderr.strip()[-300:]))
            outcomes.setdefault((bug, profile, claim), []).append(first == "/" + target)
            if rep:
                record_consistent(name, rep)
            _, values = inject_bugs.buggy_values(src, family, bug, target)
            B = dumps[family, backend].replaced(target, values)
            if rep:
                agree_with_model(name, rep, dumps[family, score.BUG_REFERENCE], B, profile)
            os.remove(dst)
    for (bug, profile, claim), hits in sorted(outcomes.items()):
        if claim != score.FLAG:
            print("info: %-12s %-17s claimed %-5s flagged at the target in %d of %d" % (
                bug, profile, claim, sum(hits), len(hits)))


# ---- 4: calibration -------------------------------------------------------------------------

def test_profiles_are_calibrated():
    for profile in score.PROFILES:
        out, raw = score.calibrate(profile)
        for key, (needed, where, value) in out.items():
            check("%s: %s = %s as calibrated" % (profile, key, raw.get(key)),
                  raw.get(key) is not None and abs(raw[key] - value) <= 1e-9 * value,
                  "the calibration rule gives %s (needed %s at %s)" % (value, needed, where))


# ---- 5: hand-worked cases -------------------------------------------------------------------

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
    # A = [2, -2, 2, -2]: RMS(A) = 2. u = 2^-8 (bfloat16). K = 16 from the dataset attribute,
    # u_acc = 2^-11 from its accumulation_dtype float16 (which beats the profile's float32).
    y = write_yaml("inputs", "defaults: {all: {precision: bfloat16, accumulation: float32,"
                             " atol_rms: 4, rtol_u: 0.25, rtol_sqrt_k: 1}}\n")
    a = [2.0, -2.0, 2.0, -2.0]
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


# ---- 6: --profile ---------------------------------------------------------------------------

def test_profile_option():
    a, b = score.fixture("rnn", "cpu_fp32"), score.fixture("rnn", "cuda_tf32")
    p = run(["--profile", "no-such-profile", a, b])
    shipped = sorted(os.path.splitext(n)[0] for n in os.listdir(score.TOLERANCES)
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
    dumps = {}
    for family in inject_bugs.TARGETS:
        for backend in ("cpu_fp64", "cpu_fp32", "cuda_fp32", "cuda_tf32", "cuda_bf16",
                        "cuda_fp16"):
            dumps[family, backend] = score.Dump(score.fixture(family, backend))
    test_profile_option()
    test_tensor_level_criteria()
    test_model_inputs()
    test_profiles_are_calibrated()
    test_honest_pairs(dumps)
    test_bug_matrix(dumps)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
