#!/usr/bin/python3
"""ctest bugzoo_eval: eval_bugzoo.py's counting on a tiny zoo built here with h5py, whose answers
are known by construction (no torch, no GPU).

    test_eval_bugzoo.py BINARY WORKDIR

The zoo has one family, "toy", of five tensors t0..t4 (execution_index 0..4, 64 elements) and
two backends:
  cuda_fp32  honest = A bit for bit (drift 0); bug "late_scale" doubles t2, t3, t4 (first tensor
             t2, effect rel_rms 1, ratio inf: required); bug "noisy_twin" differs from honest at
             t1 exactly as much as the backend's rerun honest_b does (run-to-run noise), and
             doubles t3: its first tensor is t3, not t1.
  cuda_bf16  honest = A rounded to bfloat16 (drift d_i > 0 at every tensor); bug "subtle"
             multiplies t3, t4 by 1 + 1e-5 (effect 1e-5, far below bf16 drift: not required);
             bug "late_scale" as above (ratio 1 / d_2: required).
A family "tuple" holds one call's tuple output h/0, h/1 (one execution_index); its bug doubles
both, and its first tensor is h/0, the first in the file.  A family "steps", is a two-step trajectory (folders of step_N.h5, N = 2 and 10, so that
a name sort would put step_10 first): its bug triples x in both steps, so its first tensor is
step_2's x, which a name sort would miss.
"""

import json
import os
import shutil
import sys

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import eval_bugzoo as ev  # noqa: E402

FAILS = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        FAILS.append(what)


def write(path, tensors, dtype=np.float32):
    """Datasets in order, execution_index 0, 1, ...; "tN/0" and "tN/1" (a tuple output) share
    one index."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with h5py.File(path, "w", track_order=True) as f:
        ex = {}
        for name, v in tensors.items():
            call = name.split("/")[0]
            ex.setdefault(call, len(ex))
            f.create_dataset(name, data=np.asarray(v, dtype)).attrs["execution_index"] = ex[call]


def bf16(x):
    """x (float32) rounded to bfloat16 (to nearest even), as float32."""
    b = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
    return b.astype(np.uint32).view(np.float32)


def rel(x, y):
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    return float(np.linalg.norm(x - y) / np.linalg.norm(y))


def build(zoo):
    rng = np.random.default_rng(5)
    A = {"t%d" % i: rng.standard_normal(64).astype(np.float32) for i in range(5)}
    noise = np.float32(1 + 2.0 ** -20)  # a rerun that differs at t1
    fam = os.path.join(zoo, "toy")
    write(os.path.join(fam, "A.h5"), A)
    write(os.path.join(fam, "R.h5"), A, np.float64)
    scaled = dict(A, t2=2 * A["t2"], t3=2 * A["t3"], t4=2 * A["t4"])
    write(os.path.join(fam, "cuda_fp32", "honest.h5"), A)
    write(os.path.join(fam, "cuda_fp32", "honest_b.h5"), dict(A, t1=A["t1"] * noise))
    write(os.path.join(fam, "cuda_fp32", "late_scale.h5"), scaled)
    write(os.path.join(fam, "cuda_fp32", "noisy_twin.h5"),
          dict(A, t1=A["t1"] * noise, t3=2 * A["t3"]))
    H = {k: bf16(v) for k, v in A.items()}
    write(os.path.join(fam, "cuda_bf16", "honest.h5"), H)
    write(os.path.join(fam, "cuda_bf16", "honest_b.h5"), H)
    write(os.path.join(fam, "cuda_bf16", "subtle.h5"),
          dict(H, t3=H["t3"] * np.float32(1 + 1e-5), t4=H["t4"] * np.float32(1 + 1e-5)))
    write(os.path.join(fam, "cuda_bf16", "late_scale.h5"),
          dict(H, t2=2 * H["t2"], t3=2 * H["t3"], t4=2 * H["t4"]))
    st = os.path.join(zoo, "steps")
    S = {"x": rng.standard_normal(64).astype(np.float32)}
    for run, factor in (("A", 1), ("R", 1), ("cuda_fp32/honest", 1), ("cuda_fp32/honest_b", 1),
                        ("cuda_fp32/late_step", 3)):
        for n in (2, 10):
            v = S["x"] * factor
            write(os.path.join(st, run, "step_%d.h5" % n), {"x": v},
                  np.float64 if run == "R" else np.float32)
    tup = os.path.join(zoo, "tuple")
    T = {"h/0": rng.standard_normal(64).astype(np.float32),
         "h/1": rng.standard_normal(64).astype(np.float32)}
    for run, factor in (("A", 1), ("R", 1), ("cuda_fp32/honest", 1), ("cuda_fp32/honest_b", 1),
                        ("cuda_fp32/both", 2)):
        write(os.path.join(tup, run + ".h5"), {k: v * factor for k, v in T.items()},
              np.float64 if run == "R" else np.float32)
    man = {"families": {"toy": {"bugs": {"late_scale": "", "noisy_twin": "", "subtle": ""},
                                "suffix": ".h5"},
                        "tuple": {"bugs": {"both": ""}, "suffix": ".h5"},
                        "steps": {"bugs": {"late_step": ""}, "suffix": ""}},
           "backends": {"cpu_fp32": {"policy": "fp32", "profile": None},
                        "cuda_fp32": {"policy": "fp32", "profile": "cpu-vs-cuda-fp32"},
                        "cuda_bf16": {"policy": "bf16-autocast", "profile": "bf16-autocast"}}}
    with open(os.path.join(zoo, "manifest.json"), "w") as f:
        json.dump(man, f)
    return A, H


def test_effects(zoo, A, H):
    _, runs = ev.zoo_runs(zoo)
    names = sorted((r["family"], r["backend"], r["bug"] or "") for r in runs)
    check(names == sorted([("toy", "cuda_fp32", ""), ("toy", "cuda_fp32", "late_scale"),
                           ("toy", "cuda_fp32", "noisy_twin"), ("toy", "cuda_bf16", ""),
                           ("toy", "cuda_bf16", "subtle"), ("toy", "cuda_bf16", "late_scale"),
                           ("steps", "cuda_fp32", ""), ("steps", "cuda_fp32", "late_step"),
                           ("tuple", "cuda_fp32", ""), ("tuple", "cuda_fp32", "both")]),
          "zoo_runs lists every honest and bug run with a file (%s)" % names)
    eff = ev.effects(runs)
    e = eff[("toy", "cuda_fp32", "late_scale")]
    check(e["tensor"] == "/t2" and e["effect"] == 1.0 and e["ratio"] == float("inf")
          and e["required"], "late_scale on fp32: first /t2, effect 1, ratio inf (%s)" % e)
    e = eff[("toy", "cuda_fp32", "noisy_twin")]
    check(e["tensor"] == "/t3" and e["required"],
          "noisy_twin: a difference no larger than the rerun's is not an effect (%s)" % e)
    e = eff[("toy", "cuda_bf16", "subtle")]
    d3 = rel(H["t3"], A["t3"])
    check(e["tensor"] == "/t3" and not e["required"] and abs(e["drift"] - d3) < 1e-12
          and abs(e["ratio"] - e["effect"] / d3) < 1e-12 and e["ratio"] < 0.1,
          "subtle on bf16: first /t3, ratio %.3g = effect / bf16 drift, not required"
          % e["ratio"])
    e = eff[("toy", "cuda_bf16", "late_scale")]
    d2 = rel(H["t2"], A["t2"])
    check(e["tensor"] == "/t2" and abs(e["ratio"] - 1.0 / d2) < 1e-6 * e["ratio"]
          and e["required"], "late_scale on bf16: ratio 1 / drift = %.4g" % (1.0 / d2))
    e = eff[("steps", "cuda_fp32", "late_step")]
    check(e["tensor"] == "step_2.h5:/x", "trajectory: steps in numeric order, first tensor "
          "step_2.h5:/x (%s)" % e["tensor"])
    e = eff[("tuple", "cuda_fp32", "both")]
    check(e["tensor"] == "/h/0", "a tuple output's elements share an execution_index: file "
          "order decides, /h/0 first (%s)" % e["tensor"])
    return runs, eff


def test_tally(runs, eff):
    """Canned results: the counts follow from them alone."""
    idx = {(r["family"], r["backend"], r["bug"]): i for i, r in enumerate(runs)}
    canned = {("toy", "cuda_fp32", None): (0, None),
              ("toy", "cuda_fp32", "late_scale"): (1, "/t2"),
              ("toy", "cuda_fp32", "noisy_twin"): (1, "/t1"),   # caught, wrong place
              ("toy", "cuda_bf16", None): (1, "/t0"),           # an honest failure
              ("toy", "cuda_bf16", "subtle"): (0, None),        # missed, not required
              ("toy", "cuda_bf16", "late_scale"): (1, "/t2"),
              ("steps", "cuda_fp32", None): (2, None),          # an error
              ("steps", "cuda_fp32", "late_step"): (0, None)}   # required, missed
    results = {(idx[k], "plain", False): (rc, fd, {}) for k, (rc, fd) in canned.items()}
    rows = ev.tally(runs, eff, results)
    fp32 = rows[("toy", "cuda_fp32", "plain", False)]
    check((fp32["honest"], fp32["honest_pass"], fp32["bugs"], fp32["caught"], fp32["right"],
           fp32["required"], fp32["req_caught"], fp32["req_right"], fp32["wrong_fd"])
          == (1, 1, 2, 2, 1, 2, 2, 1, ["noisy_twin"]), "tally toy/cuda_fp32: %s" % fp32)
    bf = rows[("toy", "cuda_bf16", "plain", False)]
    check((bf["honest"], bf["honest_pass"], bf["bugs"], bf["caught"], bf["right"],
           bf["required"], bf["req_caught"], bf["req_right"])
          == (1, 0, 2, 1, 1, 1, 1, 1), "tally toy/cuda_bf16: %s" % bf)
    st = rows[("steps", "cuda_fp32", "plain", False)]
    check((st["errors"], st["honest"], st["bugs"], st["required"], st["req_caught"],
           st["missed"]) == (1, 0, 1, 1, 0, ["late_step"]), "tally steps: %s" % st)
    # three-way passes late_scale on fp32 and bf16, which plain fails: a lapse on fp32, where
    # plain passes the honest run, none on bf16, where plain fails the honest run too;
    # noisy_twin, caught by both, is none
    tw = {("toy", "cuda_fp32", "late_scale"): 0, ("toy", "cuda_bf16", "late_scale"): 0,
          ("toy", "cuda_fp32", "noisy_twin"): 1}
    both = dict(results)
    both.update({(idx[k], "threeway", False): (rc, None, {}) for k, rc in tw.items()})
    lapses = ev.threeway_lapses(runs, both)
    check(lapses == [("toy", "cuda_fp32", "late_scale", False)], "three-way lapses: %s" % lapses)


def test_binary(zoo, binary):
    """The real binary on runs whose verdict is not in doubt: an honest copy of A passes in
    every mode; a tensor doubled from t2 on is caught, first at /t2."""
    man, runs, eff, results, rows, _ = ev.evaluate(zoo, binary, ["plain", "threeway"], jobs=2)
    for mode in ("plain", "threeway"):
        for acc in (False, True):
            r = rows[("toy", "cuda_fp32", mode, acc)]
            check(r["errors"] == 0 and r["honest"] == 1 and r["honest_pass"] == 1,
                  "binary %s accept=%s: honest copy of A passes" % (mode, acc))
            idx = [i for i, run in enumerate(runs)
                   if (run["family"], run["backend"], run["bug"])
                   == ("toy", "cuda_fp32", "late_scale")][0]
            rc, fd, _ = results[(idx, mode, acc)]
            check(rc == 1 and fd == "/t2", "binary %s accept=%s: late_scale caught at /t2 "
                  "(exit %d, first divergence %s)" % (mode, acc, rc, fd))
            s = rows[("steps", "cuda_fp32", mode, acc)]
            check(s["errors"] == 0 and s["honest_pass"] == 1 and s["req_caught"] == 1,
                  "binary %s accept=%s: trajectory honest passes, x3 caught (%s)"
                  % (mode, acc, s))
    md = ev.markdown(runs, eff, rows, results)
    check("| toy | cuda_fp32 | plain | no | 1/1 |" in md, "Markdown row of toy/cuda_fp32")
    js = ev.json_report(man, runs, eff, rows, results, False)
    check(len(js["runs"]) == len(results) and len(js["effects"]) == len(eff),
          "JSON report: one entry per run and per bug")


def main():
    binary, work = sys.argv[1], sys.argv[2]
    zoo = os.path.join(work, "zoo")
    shutil.rmtree(work, ignore_errors=True)
    A, H = build(zoo)
    runs, eff = test_effects(zoo, A, H)
    test_tally(runs, eff)
    test_binary(zoo, binary)
    print("%d failure(s)" % len(FAILS))
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
