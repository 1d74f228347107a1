#!/usr/bin/python3
"""`python3 -m paritycheck.calibrate` (docs/calibrate.md) end to end, through the binary:

1. on the repository's dumps it reproduces the shipped cpu-vs-cuda-fp32 profile's numbers (written
   by tests/zoo/zoo_eval.py on 17 families; lstm and convbias_bn set all of them), names the
   tensor behind each, passes its own honest runs and says two models are too few to trust;
2. too few honest runs are refused (exit 2, nothing written);
3. a base profile under which a structural mutation passes is refused (exit 2, nothing written);
4. the CPU-only rehearsal of docs/calibrate.md, run as the doc writes it.

    /usr/bin/python3 tests/calibrate/test_calibrate.py BINARY WORK_DIR
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
from checks import check, summary  # noqa: E402

BIN, WORK = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
ZOO, REAL = os.path.join(ROOT, "fixtures", "zoo"), os.path.join(ROOT, "fixtures", "real")
ENV = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "python"), HERE]),
           PATH=os.pathsep.join([os.path.dirname(BIN), "/usr/bin", os.environ.get("PATH", "")]),
           PARITYCHECK_BIN=BIN)
PY = "/usr/bin/python3"


def calibrate(args, cwd=WORK):
    return subprocess.run([PY, "-m", "paritycheck.calibrate", "--binary", BIN] + args, cwd=cwd,
                          env=ENV, capture_output=True, text=True)


def defaults_all(path):
    """{key: value} of a profile's `defaults: all:` block, read as plain YAML lines."""
    out, inside = {}, False
    for ln in open(path):
        if re.match(r"\s+all\s*:", ln):
            inside = True
            continue
        if inside:
            m = re.match(r"\s{4,}(\w+)\s*:\s*([^#\s]+)", ln)
            if not m:
                break
            out[m.group(1)] = m.group(2)
    return out


def rel_rms(a_path, b_path, name):
    with h5py.File(a_path, "r") as fa, h5py.File(b_path, "r") as fb:
        a = np.asarray(fa[name][()], dtype=np.float64).ravel()
        b = np.asarray(fb[name][()], dtype=np.float64).ravel()
    return math.sqrt(float(np.sum((b - a) ** 2)) / float(np.sum(a * a)))


def test_reproduces_shipped_fp32():
    out, rep = os.path.join(WORK, "fp32.yaml"), os.path.join(WORK, "fp32.json")
    p = calibrate(["--base", "cpu-vs-cuda-fp32", "--zoo", ZOO, "--family", "lstm",
                   "--family", "convbias_bn", "--backends", "cpu_fp32:cuda_fp32:cpu_fp64",
                   "--backends", "cpu_fp64:cpu_fp32", "--backends", "cpu_fp32:cpu_fp32_t1",
                   "--bug-targets", "1", "--bugs", "nan", "--bugs", "roll",
                   "--out", out, "--report", rep])
    check("fixtures: exit 0", p.returncode == 0, p.stderr[-2000:])
    if p.returncode:
        return
    got = defaults_all(out)
    shipped = defaults_all(os.path.join(ROOT, "tolerances", "cpu-vs-cuda-fp32.yaml"))
    for k in ("atol_rms", "max_rel_rms_u", "max_scale_u", "trend_growth_backward",
              "noise_floor_u", "rtol_u", "rtol_sqrt_k", "trend_growth", "trend_crest",
              "precision"):
        check("fixtures: %s as shipped (%s)" % (k, shipped.get(k)),
              k in got and got[k] == shipped.get(k), (got.get(k), shipped.get(k)))
    text = open(out).read()
    # lstm's first output is the tensor the shipped header names for max_rel_rms_u: 66.97 u;
    # its rel_rms from the files, by numpy, gives the same need.
    m = re.search(r"max_rel_rms_u: \S+  # .*?3 x ([\d.]+) needed by lstm cpu_fp32/cuda_fp32 "
                  r"/activations/000_lstm/0", text)
    rr = rel_rms(os.path.join(ZOO, "lstm_cpu_fp32.h5"), os.path.join(ZOO, "lstm_cuda_fp32.h5"),
                 "/activations/000_lstm/0") / 2.0 ** -24
    check("fixtures: max_rel_rms_u's comment names lstm's output and its need (numpy %.4g)" % rr,
          m is not None and abs(float(m.group(1)) - rr) <= 5e-4 * rr, m and m.group(0))
    check("fixtures: every fitted key has a comment",
          all(re.search(r"\n    %s: \S+  # \S" % k, text) for k in
              ("atol_rms", "max_rel_rms_u", "max_scale_u", "trend_growth_backward",
               "noise_floor_u")), text[:400])
    check("fixtures: 2 models are too few to trust, and the profile says so",
          "TOO FEW TO TRUST: add 1 more model." in text and "too few to trust" in p.stdout,
          p.stdout[-600:])
    r = json.load(open(rep))
    # 2 families x 3 backend specs; one spec has R, so its run is scored in both modes.
    runs = [(f, a, b, ref) for f in ("convbias_bn", "lstm")
            for a, b, ref in (("cpu_fp32", "cuda_fp32", "cpu_fp64"), ("cpu_fp64", "cpu_fp32", None),
                              ("cpu_fp32", "cpu_fp32_t1", None))]
    check("fixtures: 6 runs of 2 models", len(r["runs"]) == 6 and r["models"] ==
          ["convbias_bn", "lstm"], (len(r["runs"]), r["models"]))
    folds = r["cross_validation"]["folds"]
    honest = [h for f in folds for h in f["honest"]]
    check("fixtures: CV holds out each model once, 4 honest verdicts each (3 plain, 1 three-way)",
          [f["held_out"] for f in folds] == ["convbias_bn", "lstm"] and
          [len(f["honest"]) for f in folds] == [4, 4], [(f["held_out"], len(f["honest"]))
                                                        for f in folds])
    bugs = [b for f in folds for b in f["bugs"]]
    # one target per run, nan and roll, each in every mode of the run: (3 + 1) x 2 per model
    check("fixtures: every bug run counted (16)", len(bugs) == 16, len(bugs))
    s = r["cross_validation"]["summary"]
    check("fixtures: the summary adds up the folds",
          s["plain"]["bug_runs"] + s["three-way"]["bug_runs"] == len(bugs) and
          s["plain"]["honest_runs"] + s["three-way"]["honest_runs"] == len(honest) and
          s["plain"]["bugs_caught"] + s["three-way"]["bugs_caught"] ==
          sum(b["caught"] for b in bugs), s)
    check("fixtures: a caught bug failed at its own tensor",
          all(b["first_divergence"] == b["tensor"] for b in bugs if b["caught"]), bugs[:2])
    # the written profile passes every honest pair it was fitted on
    for f, a, b, ref in runs:
        for x, y in ((a, b),) + (((ref, b),) if ref else ()):
            q = subprocess.run([BIN, "-q", "-t", out, os.path.join(ZOO, "%s_%s.h5" % (f, x)),
                                os.path.join(ZOO, "%s_%s.h5" % (f, y))], capture_output=True)
            check("fixtures: %s %s/%s passes under the written profile" % (f, x, y),
                  q.returncode == 0, q.stdout[-300:])


def test_too_few():
    out = os.path.join(WORK, "few.yaml")
    p = calibrate(["--base", "tf32", "--zoo", ZOO, "--family", "lstm", "--backends",
                   "cpu_fp32:cuda_tf32:cpu_fp64", "--backends", "cpu_fp64:cuda_tf32",
                   "--out", out])
    check("too few: one model (2 runs) is refused with exit 2", p.returncode == 2 and
          "too few to calibrate" in p.stderr and not os.path.exists(out), p.stderr)
    pairs = ["--pair", "lstm:%s:%s" % (os.path.join(ZOO, "lstm_cpu_fp32.h5"),
                                       os.path.join(ZOO, "lstm_cuda_tf32.h5")),
             "--pair", "rnn:%s:%s" % (os.path.join(REAL, "rnn_cpu_fp32.h5"),
                                      os.path.join(REAL, "rnn_cuda_tf32.h5"))]
    p = calibrate(["--base", "tf32", "--out", out] + pairs)
    check("too few: two models, two runs are refused with exit 2", p.returncode == 2 and
          "2 honest runs of 2 models" in p.stderr and not os.path.exists(out), p.stderr)


def test_refuses_structural_pass():
    """A base profile that judges every activation by a probability metric alone, with a limit
    hardly any tensor can break (max_prob_diff <= 0.999): elementwise: false switches the
    structural tests off, so a zeroed activation passes; the command must not write such a
    profile. (A limit that no tensor can break, max: 1, paritycheck refuses itself.)"""
    base = os.path.join(WORK, "loose.yaml")
    with open(os.path.join(ROOT, "tolerances", "tf32.yaml")) as f:
        text = f.read()
    rule = ("\nrules:\n  - match: \"/activations/*\"\n    elementwise: false\n"
            "    metrics:\n      max_prob_diff: {max: %s}\n")
    a, b = os.path.join(ZOO, "resnet_cpu_fp32.h5"), os.path.join(ZOO, "resnet_cuda_tf32.h5")
    with open(base, "w") as f:
        f.write(text + rule % "1")
    q = subprocess.run([BIN, "-q", "-t", base, a, b], capture_output=True, text=True)
    check("a metric that cannot fail beside elementwise: false is refused", q.returncode == 2 and
          "cannot fail" in q.stderr, (q.returncode, q.stderr[-300:]))
    with open(base, "w") as f:
        f.write(text + rule % "0.999")
    zeroed = os.path.join(WORK, "zeroed.h5")
    shutil.copyfile(b, zeroed)
    with h5py.File(zeroed, "r+") as f:
        f["/activations/005_blocks.0.bn2"][...] = 0
    q = subprocess.run([BIN, "-q", "-t", base, a, zeroed], capture_output=True)
    check("loose base: a zeroed activation passes under it (the premise)", q.returncode == 0,
          q.returncode)
    out = os.path.join(WORK, "loose-out.yaml")
    pairs = []
    for fam, d in (("resnet", ZOO), ("lstm", ZOO), ("rnn", REAL)):
        pairs += ["--pair", "%s:%s:%s" % (fam, os.path.join(d, fam + "_cpu_fp32.h5"),
                                          os.path.join(d, fam + "_cuda_tf32.h5"))]
    p = calibrate(["--base", base, "--out", out, "--sweep-stride", "8"] + pairs)
    check("loose base: refused with exit 2, nothing written, the sweep named",
          p.returncode == 2 and "structurally mutated tensors pass" in p.stderr and
          not os.path.exists(out), (p.returncode, p.stderr[-800:]))


def doc_block(heading):
    """The first ```bash block after `heading` in docs/calibrate.md."""
    doc = open(os.path.join(ROOT, "docs", "calibrate.md")).read()
    at = doc.index(heading)
    m = re.search(r"```bash\n(.*?)```", doc[at:], re.S)
    return m.group(1)


def test_walkthrough():
    script = doc_block("## Rehearse it on a CPU-only machine")
    mac = doc_block("## On a Mac (MPS)")
    check("walkthrough: the Mac block dumps trios on mps", "--trio" in mac and
          "--device mps" in mac, mac)
    d = os.path.join(WORK, "walk")
    os.makedirs(d)
    sh = "python3() { %s \"$@\"; }\nset -e\n%s" % (PY, script)
    p = subprocess.run(["bash", "-c", sh], cwd=d, env=ENV, capture_output=True, text=True)
    check("walkthrough: the doc's block runs to exit 0", p.returncode == 0,
          (p.stdout[-1500:], p.stderr[-1500:]))
    if p.returncode:
        return
    check("walkthrough: says 4 runs of 2 models are too few to trust",
          "4 honest runs of 2 models" in p.stdout and "too few to trust" in p.stdout,
          p.stdout[-800:])
    r = json.load(open(os.path.join(d, "calibration.json")))
    folds = r["cross_validation"]["folds"]
    check("walkthrough: both models held out, each with 2 runs in two modes",
          sorted(f["held_out"] for f in folds) == ["cnn", "mlp"] and
          all(len(f["honest"]) == 4 for f in folds), [len(f["honest"]) for f in folds])
    # The sweep's count, from the files: every float dataset of B with >= 64 elements, six
    # mutations, plain and three-way; a mutation that changes nothing (the roll or shuffle of a
    # constant, the zeroing of zeros) is not counted.
    n, n_var = 0, 0
    for model in ("cnn", "mlp"):
        for seed in (1, 2):
            with h5py.File(os.path.join(d, "runs", model, "seed%d" % seed, "b.h5"), "r") as f:
                def visit(name, obj):
                    nonlocal n, n_var
                    if isinstance(obj, h5py.Dataset) and obj.dtype.kind == "f" and obj.size >= 64:
                        n += 1
                        x = obj[()]
                        n_var += bool(np.ptp(x) > 0 and np.all(x != 0))
                f.visititems(visit)
    mutated = r["sweep"]["mutated"]
    check("walkthrough: sweep counted %d..%d mutated tensors" % (12 * n_var, 12 * n),
          12 * n_var <= mutated <= 12 * n and not r["sweep"]["passed"], mutated)
    prof = os.path.join(d, "standin.yaml")
    run = os.path.join(d, "runs", "mlp", "seed2")
    bad = os.path.join(d, "bad.h5")
    shutil.copyfile(os.path.join(run, "b.h5"), bad)
    with h5py.File(bad, "r+") as f:
        x = f["/activations/003_3"][()]
        f["/activations/003_3"][...] = 2 * x
    for name, b, want in (("honest", os.path.join(run, "b.h5"), 0), ("doubled", bad, 1)):
        q = subprocess.run([BIN, "-q", "-t", prof, "--reference", os.path.join(run, "ref.h5"),
                            os.path.join(run, "a.h5"), b], capture_output=True)
        check("walkthrough: the CI gate gives exit %d on the %s mlp run" % (want, name),
              q.returncode == want, q.stdout[-300:])


if __name__ == "__main__":
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    test_too_few()
    test_refuses_structural_pass()
    test_reproduces_shipped_fp32()
    test_walkthrough()
    sys.exit(summary())
