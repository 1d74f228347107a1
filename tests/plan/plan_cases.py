"""Inputs and reference reports for the plan tests (issue 18): test_plan.py runs each case as a
plan shared among N simulated processes (plan_sim), test_mpi.py under mpirun; both compare every
report byte for byte with what the single-process CLI writes for the same case.

Cases:
  real      a real CPU-vs-CUDA TF32 dump pair (fixtures/real), the tf32 profile;
  big       a generated pair with a tensor far larger than the others (cut into parts once there
            are 3 processes or more), a gzip-chunked one, complex, int, float16, a partly
            written (sparse) one, logits judged by product metrics and a float64 scalar;
  shards    two folders of 4 shards of real dumps (attention, mixer, rnn, reductions), with a
            file only in B and a file that is not a dump;
  envelope  a pair whose A carries an envelope sidecar, its large tensor (cut into parts) with
            three elements beyond their per-element bound (issue 36).
"""
import json
import os
import shutil
import subprocess

import sys

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
REAL = os.path.join(ROOT, "fixtures", "real")
sys.path.insert(0, os.path.join(ROOT, "tests"))
from envelope.envelope_files import write_envelope  # noqa: E402
TF32 = os.path.join(ROOT, "tolerances", "tf32.yaml")

# Every file a run writes besides its text report on stdout, with the CLI option that writes it.
REPORTS = [("--json", "report.json"), ("--markdown", "report.md"), ("--junit", "report.xml"),
           ("--html", "report.html"), ("--save-baseline", "baseline.json")]

METRICS_YAML = """version: 1
rules:
  - match: "/head/logits"
    metrics:
      top1_agreement: {min: 0.99}
      max_prob_diff: {max: 1.0e-2}
  - match: "/loss"
    elementwise: false
    metrics:
      scalar_rel: {max: 1.0e-4}
"""


def _drift(rng, x, rel):
    return (x * (1 + rel * rng.standard_normal(x.shape))).astype(x.dtype)


def _write_big(path, side):
    """One side of the big pair; the same seed on both sides, B drifted."""
    rng = np.random.default_rng(18)
    big = rng.standard_normal((64, 128, 130)).astype(np.float32)
    cplx = (rng.standard_normal(3000) + 1j * rng.standard_normal(3000)).astype(np.complex64)
    ints = rng.integers(-1000, 1000, size=200000).astype(np.int32)
    half = rng.standard_normal(100000).astype(np.float16)
    logits = rng.standard_normal((64, 100)).astype(np.float32)
    with h5py.File(path, "w") as f:
        f["act/big"] = big if side == "a" else _drift(rng, big, 1e-6)
        gz = big[:32] if side == "a" else _drift(rng, big[:32], 1e-5)
        f.create_dataset("act/gz", data=gz, chunks=(4, 128, 130), compression="gzip")
        f["act/cplx"] = cplx if side == "a" else cplx * np.complex64(1 + 1e-6)
        f["act/ints"] = ints if side == "a" else np.where(np.arange(ints.size) % 1000 == 0,
                                                          ints + 1, ints)
        f["act/half"] = half if side == "a" else _drift(rng, half, 1e-3)
        sparse = f.create_dataset("act/sparse", shape=(400000,), dtype="f4", chunks=(1000,),
                                  fillvalue=0.5)
        sparse[5000:9000] = 1.0 if side == "a" else np.float32(1.0000001)
        f["head/logits"] = logits if side == "a" else _drift(rng, logits, 1e-4)
        f["loss"] = np.float64(2.5) if side == "a" else np.float64(2.5000001)


def _write_shards(root):
    """Folders A and B of four shards each, B's from the CUDA TF32 runs."""
    for side, run in (("A", "cpu_fp32"), ("B", "cuda_tf32")):
        os.makedirs(os.path.join(root, side, "ranks"), exist_ok=True)
        for k, model in enumerate(("attention", "mixer", "rnn", "reductions")):
            shutil.copy(os.path.join(REAL, "%s_%s.h5" % (model, run)),
                        os.path.join(root, side, "ranks", "rank%d.h5" % k))
        with open(os.path.join(root, side, "README.txt"), "w") as f:
            f.write("not a dump\n")
    shutil.copy(os.path.join(REAL, "rnn_cuda_tf32.h5"), os.path.join(root, "B", "extra.h5"))


def _write_enveloped(root):
    """A pair whose A carries an envelope sidecar (docs/envelope.md): 4 members 1e-5 apart; B
    within it but for 3 elements of the big tensor (the per-element test, cut across ranks); with
    the scale and median tests, whose sums and counts merge across the parts too."""
    rng = np.random.default_rng(36)
    a = {"/act/big": rng.standard_normal((64, 128, 130)).astype(np.float32),
         "/head/logits": rng.standard_normal((64, 100)).astype(np.float32)}
    members = [{k: _drift(rng, v, 1e-5) for k, v in a.items()} for _ in range(4)]
    b = {k: _drift(rng, v, 1e-5) for k, v in a.items()}
    b["/act/big"].flat[[7, 500000, 1000000]] += 1.0
    for path, side in (("a.h5", a), ("b.h5", b)):
        with h5py.File(os.path.join(root, path), "w") as f:
            for k, v in side.items():
                f[k] = v
    write_envelope(os.path.join(root, "a.envelope.h5"), a, members, scale_test=True,
                   median_test=True)


def make_cases(tmp):
    """{name: (a, b, cli_args)}; cli_args hold the tolerance files and the block size."""
    big = os.path.join(tmp, "big")
    os.makedirs(big, exist_ok=True)
    _write_big(os.path.join(big, "a.h5"), "a")
    _write_big(os.path.join(big, "b.h5"), "b")
    metrics = os.path.join(big, "metrics.yaml")
    with open(metrics, "w") as f:
        f.write(METRICS_YAML)
    shards = os.path.join(tmp, "shards")
    _write_shards(shards)
    env = os.path.join(tmp, "enveloped")
    os.makedirs(env, exist_ok=True)
    _write_enveloped(env)
    return {
        "real": (os.path.join(REAL, "attention_cpu_fp32.h5"),
                 os.path.join(REAL, "attention_cuda_tf32.h5"), ["-t", TF32]),
        "big": (os.path.join(big, "a.h5"), os.path.join(big, "b.h5"),
                ["-t", TF32, "-t", metrics, "--block-elems", "4096"]),
        "shards": (os.path.join(shards, "A"), os.path.join(shards, "B"),
                   ["-t", TF32, "--block-elems", "2048"]),
        "envelope": (os.path.join(env, "a.h5"), os.path.join(env, "b.h5"),
                     ["--block-elems", "4096"]),
    }


def report_args(out):
    """The CLI options that write every report file into folder `out`."""
    args = []
    for option, name in REPORTS:
        args += [option, os.path.join(out, name)]
    return args


def run_cli(cmd, out, timeout=300):
    """Runs cmd, its stdout saved as out/report.txt; returns (exit code, stderr)."""
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "report.txt"), "wb") as stdout:
        p = subprocess.run(cmd, stdout=stdout, stderr=subprocess.PIPE, timeout=timeout)
    return p.returncode, p.stderr.decode(errors="replace")


def differences(ref, out):
    """The report files of folder `out` that differ from those of folder `ref` (or are missing)."""
    diffs = []
    for name in ["report.txt"] + [n for _, n in REPORTS]:
        a, b = os.path.join(ref, name), os.path.join(out, name)
        if not os.path.exists(b):
            diffs.append(name + " (missing)")
        elif name == "baseline.json" and \
                _baseline_without_tolerances(a) != _baseline_without_tolerances(b):
            diffs.append(name)
        elif name != "baseline.json" and open(a, "rb").read() != open(b, "rb").read():
            diffs.append(name)
    return diffs


def _baseline_without_tolerances(path):
    """The CLI's baseline without its record of the tolerance layers the CLI loaded (issue 30),
    which a plan's library caller does not make and an MPI rank may not: every other key and
    value as written."""
    doc = json.load(open(path))
    doc.pop("tolerances", None)
    return doc
