"""paritycheck.calibrate's cross-validation: leave one model (or cluster) out, fit on the rest,
and score the held-out honest runs and bugs injected into their B (docs/tolerance-model.md,
"Scores")."""
import math
import os
import shutil

import h5py
import numpy as np

from .calib_fit import calibration_pairs, fit, is_gradient, run_name
from .calib_profile import profile_text

# A bug is *required* at a tensor when its effect rel_rms(B_bug, B) is at least this many times
# the honest drift there, rel_rms(B, A) (docs/tolerance-model.md, "Scores").
REQUIRED_RATIO = 20.0
TARGETS_PER_RUN = 8


# ---- bugs --------------------------------------------------------------------------------------

def round_bf16(x):
    """x rounded to bfloat16 (round to nearest even), as float64."""
    f = np.asarray(x, dtype=np.float32)
    bits = f.view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    out = rounded.astype(np.uint32).view(np.float32).astype(np.float64)
    return np.where(np.isnan(f), np.nan, out)


def _dropout(b, rng):
    keep = rng.random(b.shape) >= 0.1
    return np.where(keep, b / 0.9, 0.0)


def _nan(b, rng):
    out = b.copy()
    out.flat[out.size // 2] = np.nan
    return out


def _chan_zero(b, rng):
    out = b.copy()
    out[..., -1] = 0.0
    return out


# The injected bugs (docs/tolerance-model.md, "Scores"); grad_x2 only in gradients.
BUGS = {
    "roll": lambda b, rng: np.roll(b, 1, axis=-1),
    "dropout": _dropout,
    "nan": _nan,
    "grad_x2": lambda b, rng: 2.0 * b,
    "scale_1pct": lambda b, rng: 1.01 * b,
    "chan_zero": _chan_zero,
    "bf16_round": lambda b, rng: round_bf16(b),
}


def pick_targets(rep, n=TARGETS_PER_RUN):
    """Up to n float tensors of at least 16 elements, spread evenly over the execution order,
    gradients included."""
    ts = [t for t in rep["tensors"] if "context" in t and t["count"] >= 16 and
          t.get("shape") and t["shape"][-1] > 1]
    ts.sort(key=lambda t: t.get("execution_index", 0))
    if len(ts) <= n:
        return [t["path"] for t in ts]
    step = len(ts) / n
    return [ts[int(i * step)]["path"] for i in range(n)]


def logical_store(values, ds):
    """values as ds stores them (bfloat16 data is float32 rounded to bfloat16)."""
    if ds.attrs.get("dtype", None) in ("bfloat16", b"bfloat16"):
        values = round_bf16(values)
    return values.astype(ds.dtype)


def rel_rms(x, y):
    fin = np.isfinite(x) & np.isfinite(y)
    if not fin.all():
        return math.inf
    d = float(np.sum((y - x) ** 2))
    s = float(np.sum(x * x))
    return math.sqrt(d / s) if s > 0 else (0.0 if d == 0 else math.inf)


def inject(b_file, dst, name, bug, rng):
    """Copy b_file to dst with `bug` applied to dataset `name`; returns (effect, B's values)."""
    with h5py.File(b_file, "r") as fb:
        bv = np.asarray(fb[name][()], dtype=np.float64)
    buggy = BUGS[bug](bv, rng)
    shutil.copyfile(b_file, dst)
    with h5py.File(dst, "r+") as f:
        f[name][...] = logical_store(buggy, f[name])
    return rel_rms(bv.ravel(), buggy.ravel()), bv


# ---- cross-validation --------------------------------------------------------------------------

def _first(rep):
    f = rep.get("first_divergence")
    return f.get("path") if isinstance(f, dict) else f


def score_run(binary, text, run, targets, bugs, work, rng):
    """The held-out run under profile text: honest verdicts and every injected bug run."""
    out = {"honest": [], "bugs": []}
    modes = [("plain", None)] + ([("three-way", run.ref)] if run.ref else [])
    for mode, ref in modes:
        code, rep = binary.run(text, run.a, run.b, ref)
        out["honest"].append({"family": run.family, "run": run_name(run), "mode": mode,
                              "pass": code == 0,
                              "failing": [t["path"] for t in rep["tensors"]
                                          if t["verdict"] != "pass"][:20]})
    if not targets or not all(os.path.isfile(x) and h5py.is_hdf5(x) for x in (run.a, run.b)):
        return out  # bugs are injected into HDF5 files only
    _, rep = binary.run(text, run.a, run.b)
    dst = os.path.join(work, "bug.h5")
    for target in pick_targets(rep, targets):
        name = target
        with h5py.File(run.a, "r") as fa, h5py.File(run.b, "r") as fb:
            if name not in fa or name not in fb or fb[name].dtype.kind != "f":
                continue
            av = np.asarray(fa[name][()], dtype=np.float64).ravel()
        for bug in bugs:
            if bug == "grad_x2" and not is_gradient(target):
                continue
            effect, bv = inject(run.b, dst, name, bug, rng)
            honest = rel_rms(av, bv.ravel())
            for mode, ref in modes:
                code, r = binary.run(text, run.a, dst, ref, memo=False)
                tr = next((t for t in r["tensors"] if t["path"] == target), {})
                out["bugs"].append({
                    "family": run.family, "run": run_name(run), "mode": mode, "bug": bug,
                    "tensor": target, "required": effect >= REQUIRED_RATIO * honest,
                    "flagged": code == 1, "caught": code == 1 and _first(r) == target,
                    "first_divergence": _first(r), "verdict_at_tensor": tr.get("verdict"),
                    "diagnosis": tr.get("diagnosis", {}).get("text")})
    return out


def score_known_bug(binary, text, bug):
    family, a, b, ref, tensor = bug
    out = []
    for mode, r in [("plain", None)] + ([("three-way", ref)] if ref else []):
        code, rep = binary.run(text, a, b, r)
        out.append({"family": family, "run": os.path.basename(b), "mode": mode, "bug": "known",
                    "tensor": tensor, "required": True, "flagged": code == 1,
                    "caught": code == 1 and _first(rep) == tensor,
                    "first_divergence": _first(rep), "verdict_at_tensor": None,
                    "diagnosis": None})
    return out


def cross_validate(binary, base_text, precision, runs, clusters, known_bugs, targets, bugs,
                   work, log):
    """Leave one cluster out: fit on the others, score the held-out runs. Returns the folds."""
    folds = []
    rng = np.random.default_rng(0)
    for name, fams in clusters:
        train = [r for r in runs if r.family not in fams]
        held = [r for r in runs if r.family in fams]
        if not train or not held:
            continue
        c, need = fit(binary, base_text, precision, calibration_pairs(train))
        text = profile_text(base_text, c)
        fold = {"held_out": name, "families": sorted(fams), "coefficients": c,
                "honest": [], "bugs": []}
        for r in held:
            s = score_run(binary, text, r, targets, bugs, work, rng)
            fold["honest"] += s["honest"]
            fold["bugs"] += s["bugs"]
        for kb in known_bugs:
            if kb[0] in fams:
                fold["bugs"] += score_known_bug(binary, text, kb)
        folds.append(fold)
        h = fold["honest"]
        log("  held out %-20s honest %d/%d pass; bugs caught at the tensor %d/%d "
            "(required %d/%d)" % (name, sum(x["pass"] for x in h), len(h),
                                  sum(x["caught"] for x in fold["bugs"]), len(fold["bugs"]),
                                  sum(x["caught"] for x in fold["bugs"] if x["required"]),
                                  sum(1 for x in fold["bugs"] if x["required"])))
    return folds


def cv_summary(folds):
    """Totals over the folds, per mode: honest passes, bug runs caught at the right tensor."""
    s = {}
    for mode in ("plain", "three-way"):
        h = [x for f in folds for x in f["honest"] if x["mode"] == mode]
        b = [x for f in folds for x in f["bugs"] if x["mode"] == mode]
        if not h and not b:
            continue
        req = [x for x in b if x["required"]]
        s[mode] = {"honest_pass": sum(x["pass"] for x in h), "honest_runs": len(h),
                   "bugs_caught": sum(x["caught"] for x in b), "bug_runs": len(b),
                   "bugs_flagged": sum(x["flagged"] for x in b),
                   "required_caught": sum(x["caught"] for x in req), "required_runs": len(req)}
    return s
