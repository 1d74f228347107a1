#!/usr/bin/python3
"""`python3 -m paritycheck.calibrate --from-envelopes` (docs/calibrate.md, "From envelopes"):

1. two envelope sidecars written with numpy (tests/envelope/envelope_files.py), K = 8 and K = 2
   (the K = 2 one with the scale and median tests: four tests a tensor split its rate):
   the written max_rel_rms_u and atol_rms equal the rule's values computed here from
   the member arrays, with Student's t from closed forms (t_2) and Abramowitz & Stegun 26.7.3's
   finite series (t_8), not from the package; at K = 2 the need is also the envelope judge's
   own factor x floor (the binary's JSON);
2. the binary accepts the written profile; in plain mode (--no-envelope) it passes an honest B
   (one more sample of the members' law, the tensor the envelope lacks included) and a B at half
   the fitted rel_rms limit, and fails a B at twice it, and one scaled by 1 - limit/2 (its
   rel_rms within the limit, its scale not: the scale criterion stays the base's, envelopes
   measure no scale), at that tensor;
3. the tensor of A that the envelope lacks is named, and the --report says so;
4. K = 2 with a wide spread needs an atol_rms above what a profile may give: refused (exit 2),
   nothing written; so are an envelope of format 2 and a file that is not HDF5;
   --from-envelopes with --pair is a usage error.

    /usr/bin/python3 tests/calibrate/test_calibrate_envelopes.py BINARY WORK_DIR
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
sys.path.insert(0, os.path.join(ROOT, "tests"))
from checks import check, run_tests  # noqa: E402
from envelope.envelope_files import write_envelope  # noqa: E402

BIN, WORK = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
ENV = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
PY = "/usr/bin/python3"
U = 2.0 ** -24          # the base cpu-vs-cuda-fp32's precision, float32
ALPHA, GAP = 0.01, 3.0  # docs/tolerance-model.md, "Envelope"

RNG = np.random.default_rng(11)
A1 = {"/activations/000_fc": RNG.standard_normal(4096).astype(np.float32),
      "/activations/001_relu": np.abs(RNG.standard_normal((64, 64))).astype(np.float32)}
A1_REST = {"/activations/002_out": RNG.standard_normal(256).astype(np.float32),
           "/inputs/ids": np.arange(32, dtype=np.int64)}
A2 = {"/logits": (5 * RNG.standard_normal(1000)).astype(np.float32)}
SIGMA1, SIGMA2 = 1e-4, 3e-5


def members(a, sigma, k, seed):
    g = np.random.default_rng(seed)
    return [{n: (v + sigma * g.standard_normal(v.shape)).astype(np.float32) for n, v in a.items()}
            for _ in range(k)]


M1, M2 = members(A1, SIGMA1, 8, 100), members(A2, SIGMA2, 2, 200)


def write(path, datasets):
    with h5py.File(path, "w", track_order=True) as f:
        for name, value in datasets.items():
            f.create_dataset(name, data=value)


def t2_upper(p):
    """Student's t with 2 degrees of freedom: the t with P(T > t) = p (closed form)."""
    q = 1 - 2 * p
    return q * math.sqrt(2 / (1 - q * q))


def t8_upper(p):
    """Student's t with 8 degrees of freedom: P(|T| <= t) = sin th (1 + c/2 + 3 c^2/8 +
    15 c^3/48), c = cos^2 th, th = atan(t / sqrt 8) (Abramowitz & Stegun 26.7.3); bisection."""
    def tail(t):
        th = math.atan(t / math.sqrt(8))
        c = math.cos(th) ** 2
        return (1 - math.sin(th) * (1 + c / 2 + 3 * c * c / 8 + 15 * c ** 3 / 48)) / 2
    lo, hi = 0.0, 1e4
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if tail(mid) > p else (lo, mid)
    return hi


def needs(a, ms, t_upper, tests=2):
    """(rel need, elem need) in u over the tensors of one envelope, from the member arrays;
    `tests` a tensor takes (2, 4 with the scale and median tests) split the rate."""
    tensors = len(a)
    alpha_t = ALPHA / (tests * tensors)
    rel, elem = 0.0, 0.0
    for name, av in a.items():
        av = av.astype(np.float64)
        diffs = np.array([m[name].astype(np.float64).ravel() - av.ravel() for m in ms])
        d2 = np.mean(diffs ** 2, axis=1)          # d_k^2
        s = float(np.sqrt(np.mean(diffs ** 2, axis=0)).max())  # max_i r_i
        rms_a = math.sqrt(float(np.mean(av * av)))
        floor = math.sqrt(float(np.mean(d2)) + (U * rms_a) ** 2)
        rel = max(rel, GAP * t_upper(alpha_t / 2) * floor / rms_a / U)
        elem = max(elem, GAP * t_upper(alpha_t / (2 * av.size)) * (s + floor) / rms_a / U)
    return rel, elem


def two_digits_up(x):
    e = math.floor(math.log10(x)) - 1
    return math.ceil(x / 10.0 ** e) * 10.0 ** e


def calibrate(args):
    return subprocess.run([PY, "-m", "paritycheck.calibrate"] + args, cwd=WORK, env=ENV,
                          capture_output=True, text=True)


def defaults_all(path):
    """{key: float} of the numbers in a profile's `defaults: all:` block."""
    out, inside = {}, False
    for ln in open(path):
        if ln.strip() == "all:":
            inside = True
            continue
        if inside:
            if not ln.startswith("    "):
                break
            k, _, v = ln.split("#")[0].partition(":")
            try:
                out[k.strip()] = float(v)
            except ValueError:
                pass
    return out


def setup():
    d = os.path.join(WORK, "env")
    os.makedirs(d)
    write(os.path.join(d, "a.h5"), dict(A1, **A1_REST))
    write_envelope(os.path.join(d, "a.envelope.h5"), A1, M1)
    write(os.path.join(d, "a2.h5"), A2)
    write_envelope(os.path.join(d, "a2.envelope.h5"), A2, M2, scale_test=True, median_test=True)
    return d


def judge(profile, a, b):
    p = subprocess.run([BIN, "--no-envelope", "-q", "-t", profile, "--json", "-", a, b],
                       capture_output=True, text=True)
    try:
        return p, json.loads(p.stdout)
    except ValueError:
        return p, None


def test_fit_and_gate():
    d = setup()
    out, rep = os.path.join(d, "fitted.yaml"), os.path.join(d, "fit.json")
    p = calibrate(["--base", "cpu-vs-cuda-fp32", "--from-envelopes",
                   os.path.join(d, "a.envelope.h5"), "--from-envelopes",
                   os.path.join(d, "a2.envelope.h5"), "--out", out, "--report", rep])
    check("fit: exit 0", p.returncode == 0, (p.stdout[-800:], p.stderr[-800:]))
    if p.returncode:
        return
    rel1, elem1 = needs(A1, M1, t8_upper)
    rel2, elem2 = needs(A2, M2, t2_upper, tests=4)  # its root: scale_test and median_test 1
    got = defaults_all(out)
    want_rr = two_digits_up(max(rel1, rel2))
    want_atol = two_digits_up(max(elem1, elem2))
    check("fit: max_rel_rms_u = %g (K = 8 file's %.5g, K = 2 file's %.5g)" % (want_rr, rel1, rel2),
          math.isclose(got.get("max_rel_rms_u", -1), want_rr, rel_tol=1e-9), got)
    check("fit: atol_rms = %g (K = 8 file's %.5g, K = 2 file's %.5g)" % (want_atol, elem1, elem2),
          math.isclose(got.get("atol_rms", -1), want_atol, rel_tol=1e-9), got)
    base = defaults_all(os.path.join(ROOT, "tolerances", "cpu-vs-cuda-fp32.yaml"))
    kept = [k for k in base if k not in ("max_rel_rms_u", "atol_rms")]
    check("fit: every other key is the base's (max_scale_u, the trend, the noise floor ...)",
          kept and all(got.get(k) == base[k] for k in kept) and "precision: float32" in
          open(out).read(), [(k, got.get(k), base[k]) for k in kept])
    check("fit: each files' own maximum decides one key here (the test's premise)",
          rel1 > rel2 and elem2 > elem1, (rel1, rel2, elem1, elem2))
    check("fit: the tensor without an envelope is named",
          "1 floating tensor of A without an envelope (/activations/002_out)" in p.stdout,
          p.stdout)
    # At K = 2 the envelope judge itself takes nu = 1: its own factor and floor give the need.
    a2 = os.path.join(d, "a2.h5")
    q = subprocess.run([BIN, "--allow-same", "--json", "-", a2, a2], capture_output=True,
                       text=True)
    e = json.loads(q.stdout)["tensors"][0]["envelope"] if q.returncode == 0 else {}
    lg = A2["/logits"].astype(np.float64)
    judge_need = e.get("factor", 0) * e.get("floor", 0) / math.sqrt(np.mean(lg * lg)) / U
    check("fit: at K = 2 the need is the envelope judge's factor x floor / RMS(A) (%.6g, %.6g)"
          % (judge_need, rel2), math.isclose(judge_need, rel2, rel_tol=1e-6), e)
    r = json.load(open(rep))
    check("report: uncovered tensors per file",
          [f["uncovered"] for f in r["envelopes"]] == [["/activations/002_out"], []],
          r["envelopes"])
    a = os.path.join(d, "a.h5")
    limit = got["max_rel_rms_u"] * U
    g = np.random.default_rng(300)
    fc = A1["/activations/000_fc"].astype(np.float64)
    rms_fc = math.sqrt(float(np.mean(fc * fc)))

    def b_with(fc_rel, fc_scale=1.0):
        """B: one more honest sample of every float tensor, /activations/000_fc at rel_rms
        fc_rel (iid noise) when given, or scaled by fc_scale."""
        b = {n: (v + SIGMA1 * g.standard_normal(v.shape)).astype(np.float32)
             for n, v in A1.items()}
        b["/activations/002_out"] = (A1_REST["/activations/002_out"] +
                                     SIGMA1 * g.standard_normal(256)).astype(np.float32)
        b["/inputs/ids"] = A1_REST["/inputs/ids"]
        if fc_rel:
            z = g.standard_normal(fc.size)
            b["/activations/000_fc"] = (fc + fc_rel * rms_fc * z / math.sqrt(np.mean(z * z))
                                        ).astype(np.float32)
        if fc_scale != 1.0:
            b["/activations/000_fc"] = (fc_scale * fc).astype(np.float32)
        path = os.path.join(d, "b-%g-%g.h5" % (fc_rel, fc_scale))
        write(path, b)
        return path

    for name, rel, scale, want in (("honest", 0, 1, None), ("half the limit", 0.5 * limit, 1, None),
                                   ("twice the limit", 2 * limit, 1, "rel_rms"),
                                   ("scaled by 1 - limit/2", 0, 1 - 0.5 * limit, "scale_error")):
        q, js = judge(out, a, b_with(rel, scale))
        check("gate: a B %s gives exit %d" % (name, 1 if want else 0),
              q.returncode == (1 if want else 0), (q.returncode, q.stderr[-400:]))
        if want and js:
            bad = [(t["path"], [x["criterion"] for x in t.get("reasons", [])])
                   for t in js["tensors"] if t["verdict"] != "pass"]
            check("gate: %s: only /activations/000_fc fails, by %s" % (name, want),
                  bad == [("/activations/000_fc", [want])], bad)


def test_refused():
    d = os.path.join(WORK, "wide")
    os.makedirs(d)
    write_envelope(os.path.join(d, "a.envelope.h5"), A1, members(A1, SIGMA1, 2, 400))
    out = os.path.join(d, "wide.yaml")
    p = calibrate(["--base", "cpu-vs-cuda-fp32", "--from-envelopes",
                   os.path.join(d, "a.envelope.h5"), "--out", out])
    check("K = 2, sigma 1e-4: refused with exit 2, atol_rms named, nothing written",
          p.returncode == 2 and "atol_rms would be" in p.stderr and not os.path.exists(out),
          (p.returncode, p.stderr[-600:]))
    v2, junk = os.path.join(d, "v2.envelope.h5"), os.path.join(d, "junk.envelope.h5")
    write_envelope(v2, A1, M1, version=2)
    with open(junk, "w") as f:
        f.write("not HDF5\n")
    for path, why in ((v2, "not an envelope of format 1"), (junk, "cannot be read as HDF5")):
        p = calibrate(["--base", "cpu-vs-cuda-fp32", "--from-envelopes", path, "--out", out])
        check("%s: refused (exit 2, %r), nothing written" % (os.path.basename(path), why),
              p.returncode == 2 and why in p.stderr and not os.path.exists(out),
              (p.returncode, p.stderr[-600:]))
    p = calibrate(["--base", "cpu-vs-cuda-fp32", "--from-envelopes",
                   os.path.join(d, "a.envelope.h5"), "--pair", "x:%s:%s" % (out, out),
                   "--out", out])
    check("--from-envelopes with --pair: usage error (exit 2)",
          p.returncode == 2 and "--from-envelopes" in p.stderr and not os.path.exists(out),
          p.stderr[-400:])


if __name__ == "__main__":
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    sys.exit(run_tests([test_fit_and_gate, test_refused]))
