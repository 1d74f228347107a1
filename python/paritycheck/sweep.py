"""The structural sweep (docs/tolerance-model.md, "The structural sweep"): change tensors of an
honest B by mutations that rounding cannot produce, and check that paritycheck never passes them.

Used by tests/zoo/sweep.py (the shipped profiles on the shipped dumps) and by
`python3 -m paritycheck.calibrate`, which refuses to write a profile under which a mutated
tensor passes. Needs h5py and numpy; the dumps are HDF5.
"""
import json
import os
import shutil
import subprocess

import h5py
import numpy as np

from .calib_cv import round_bf16

MUTATIONS = ["zero", "x2", "neg", "roll", "zero10", "shuffle"]
# Small factors (a BatchNorm or LayerNorm eps, a missing correction): not structural, and an
# honest profile may pass some of them, so they are no part of MUTATIONS; tests/zoo/
# scale_sweep.py checks that three-way mode catches every one that plain mode catches.
SCALES = ["x0.95", "x0.9", "x0.8"]
MIN_ELEMENTS = 64
STRIDE = 4


def mutate(kind, x, rng):
    """x changed by one mutation; none of them is what rounding produces."""
    if kind == "zero":
        return np.zeros_like(x)
    if kind == "x2":
        return x * 2
    if kind in SCALES:
        return x * float(kind[1:])
    if kind == "neg":
        return -x
    if kind == "roll":
        return np.roll(x, 1)  # the flattened tensor, as torch.roll(x, 1) without dims
    if kind == "zero10":
        y = x.copy().reshape(-1)
        y[rng.choice(y.size, max(1, y.size // 10), replace=False)] = 0
        return y.reshape(x.shape)
    if kind == "shuffle":
        y = x.copy().reshape(-1)
        rng.shuffle(y)
        return y.reshape(x.shape)
    raise ValueError(kind)


def to_logical(y, logical):
    """y (float32 storage) rounded to nearest even in its logical dtype (the dataset's `dtype`
    attribute), so that a scaled tensor stays one that dtype holds: the loader refuses values
    its logical dtype cannot hold."""
    if logical == "float16":
        return y.astype(np.float16).astype(y.dtype)
    if logical == "bfloat16":
        return round_bf16(y).astype(y.dtype)
    return y


def eligible(path):
    """Float datasets of at least MIN_ELEMENTS elements, in file order ("/name")."""
    out = []
    with h5py.File(path, "r") as f:
        def visit(name, obj):
            if isinstance(obj, h5py.Dataset) and obj.dtype.kind == "f" and obj.size >= MIN_ELEMENTS:
                out.append("/" + name)
        f.visititems(visit)
    return out


def changed_copy(src, dst, names, kind, seed):
    """src with each dataset of `names` mutated, at dst; returns the names changed. A mutation
    that leaves a dataset as it was (the roll of a constant) is undone and not counted."""
    shutil.copyfile(src, dst)
    rng = np.random.default_rng(seed)
    done = []
    with h5py.File(dst, "r+") as f:
        for n in names:
            x = f[n][()]
            logical = f[n].attrs.get("dtype", b"")
            logical = logical.decode() if isinstance(logical, bytes) else str(logical)
            y = to_logical(mutate(kind, x, rng).astype(x.dtype), logical)
            if np.array_equal(x, y, equal_nan=True):
                continue
            f[n][...] = y
            done.append(n)
    return done


def run(binary, tol_args, a, b, ref, work):
    """(exit code, {path: tensor JSON}) of `paritycheck -q TOL_ARGS [--reference ref] a b`."""
    out = os.path.join(work, "sweep-report.json")
    cmd = [binary, "-q"] + list(tol_args) + ["--json", out]
    if ref:
        cmd += ["--reference", ref]
    cmd += [a, b]
    p = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if p.returncode not in (0, 1):
        raise RuntimeError("%s: exit %d: %s" % (" ".join(cmd), p.returncode, p.stderr))
    with open(out) as fh:
        rep = json.load(fh)
    return p.returncode, {t["path"]: t for t in rep["tensors"]}


def sweep_pair(binary, tol_args, a, b, ref, work, res, label, kinds=None, stride=STRIDE):
    """Mutate every tensor of B of at least MIN_ELEMENTS elements by each mutation, every
    stride-th tensor per run (so those around it stay honest), and record in res:
    "mutated" (count), "passed" [(label, kind, path)], "diagnoses" {"kind:diagnosis": count},
    "verdicts" {verdict: count} (of the mutated tensors: pass, drift, indeterminate, ...),
    "honest" [(label, exit code)]."""
    code, _ = run(binary, tol_args, a, b, ref, work)
    res.setdefault("honest", []).append((label, code))
    names = eligible(b)
    mb = os.path.join(work, "sweep-b.h5")
    for kind in kinds or MUTATIONS:
        for off in range(stride):
            done = changed_copy(b, mb, names[off::stride], kind, seed=off)
            if not done:
                continue
            _, tens = run(binary, tol_args, a, mb, ref, work)
            for n in done:
                t = tens[n]
                res["mutated"] = res.get("mutated", 0) + 1
                diag = t.get("diagnosis", {}).get("kind", "none")
                key = "%s:%s" % (kind, diag)
                res.setdefault("diagnoses", {})
                res["diagnoses"][key] = res["diagnoses"].get(key, 0) + 1
                res.setdefault("verdicts", {})
                res["verdicts"][t["verdict"]] = res["verdicts"].get(t["verdict"], 0) + 1
                if t["verdict"] == "pass":
                    res.setdefault("passed", []).append((label, kind, n))
    return res
