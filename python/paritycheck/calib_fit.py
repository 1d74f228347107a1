"""paritycheck.calibrate's fit: the rule of docs/tolerance-model.md ("Calibration") on honest
runs, measured through the paritycheck binary's JSON report (the judge is never re-implemented
here), and the comment that says where each fitted value came from."""
import collections
import json
import math
import os
import subprocess

import h5py
import numpy as np

from .calib_profile import (CREST_OF_FLOOR, MARGIN, NOISE_FLOOR_MIN, NOISE_REL_RMS,
                            NOISE_U_MAX, NOISE_VALUE, REL_RMS_U_MIN, RTOL_SQRT_K, RTOL_U,
                            SCALE_SE_Z, SCALE_U_FLOOR, TREND_CREST, TREND_GROWTH, TREND_WINDOW,
                            UNIT, Refused, fmt, profile_text, round_up)


# A run: its model (family), a name ("" or e.g. "seed1 "), the files or folders A, B and R
# (None without one) and what to call each side in messages (e.g. "cpu_fp32", "cuda_tf32").
Run = collections.namedtuple("Run", "family label a b ref sides")


def calibration_pairs(runs):
    """[(family, label, a, b)]: each run's A B, and R B where the run has R."""
    out = []
    for r in runs:
        na, nb, nr = r.sides
        out.append((r.family, "%s%s/%s" % (r.label, na, nb), r.a, r.b))
        if r.ref:
            out.append((r.family, "%s%s/%s" % (r.label, nr, nb), r.ref, r.b))
    return out


def run_name(r):
    return "%s%s/%s%s" % (r.label, r.sides[0], r.sides[1], "/" + r.sides[2] if r.ref else "")


def measuring_coefficients(noise_floor_u):
    """Every limit open, so every honest tensor passes and the trend sees them all."""
    big = 1e6  # the largest value a tolerance file may give them (docs/tolerances.md)
    return {"atol_rms": big, "rtol_u": RTOL_U, "rtol_sqrt_k": RTOL_SQRT_K, "max_rel_rms_u": big,
            "max_scale_u": big, "max_scale_u_sqrt_n": 0.0, "trend_growth": TREND_GROWTH,
            "trend_window": TREND_WINDOW, "trend_crest": TREND_CREST,
            "noise_floor_u": noise_floor_u}


# ---- running paritycheck -----------------------------------------------------------------------

class Binary:
    """The paritycheck executable; the same files under the same tolerance text run once."""

    def __init__(self, path, work):
        self.path = path
        self.work = work
        self.memo = {}
        self.runs = 0
        self._n = 0

    def yaml(self, text):
        self._n += 1
        p = os.path.join(self.work, "profile-%d.yaml" % self._n)
        with open(p, "w") as f:
            f.write(text)
        return p

    def run(self, text, a, b, ref=None, memo=True):
        """(exit code, JSON report) of `paritycheck -t PROFILE [--reference ref] a b`."""
        key = (text, a, b, ref)
        if memo and key in self.memo:
            return self.memo[key]
        y = self.yaml(text)
        cmd = [self.path, "--json", "-", "-t", y]
        if ref:
            cmd += ["--reference", ref]
        cmd += [a, b]
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)
        self.runs += 1
        os.unlink(y)
        if p.returncode not in (0, 1):
            raise Refused("%s: exit %d: %s" % (" ".join(cmd), p.returncode,
                                               p.stderr.decode(errors="replace").strip()))
        out = (p.returncode, json.loads(p.stdout))
        if memo:
            self.memo[key] = out
        return out


# ---- reading tensors ---------------------------------------------------------------------------

def tensor_location(side, t):
    """(HDF5 file, dataset name) of a report's tensor on one side (a file or a folder)."""
    if "file" in t:
        name = t["path"][len(t["file"]) + 1:]
        return os.path.join(side, t["file"]), name
    return side, t["path"]


def read_float(path, name):
    """A dataset's values as a flat float64 array, or None where it is not HDF5 float data
    (another format, or a float layout numpy lacks)."""
    try:
        with h5py.File(path, "r") as f:
            ds = f[name]
            if ds.dtype.kind != "f":
                return None
            return np.asarray(ds[()], dtype=np.float64).ravel()
    except (OSError, KeyError, TypeError, ValueError):
        return None


def reduction_length(path, name):
    try:
        with h5py.File(path, "r") as f:
            return int(f[name].attrs.get("reduction_length", 0)) or None
    except (OSError, KeyError, TypeError, ValueError):
        return None


def element_need(a_side, b_side, t, u, acc_u):
    """max |b - a| / (u RMS(A)) over the finite elements that the relative terms do not cover
    (rtol_u u |a| and sqrt(K) u_acc |a|); 0 when they cover all. Where the values cannot be read
    (not HDF5), the report's max_abs bounds it from above."""
    pa, name = tensor_location(a_side, t)
    pb, _ = tensor_location(b_side, t)
    a, b = read_float(pa, name), read_float(pb, name)
    if a is None or b is None or a.shape != b.shape:
        rms = t["context"]["rms_a"]
        return t["max_abs"] / (u * rms) if rms > 0 else 0.0
    fin = np.isfinite(a) & np.isfinite(b)
    a, b = a[fin], b[fin]
    if a.size == 0:
        return 0.0
    rtol = RTOL_U * u
    K = reduction_length(pa, name)
    if K:
        rtol = max(rtol, RTOL_SQRT_K * math.sqrt(K) * acc_u)
    e = np.abs(b - a)
    out = e > rtol * np.abs(a)
    rms = float(np.sqrt(np.mean(a * a)))
    if not out.any() or rms == 0:
        return 0.0
    return float(e[out].max()) / (u * rms)


def is_gradient(path):
    """The judge's test for the backward growth (src/lib/judge/judge_order.c,
    pc_in_backward_group): the dataset's top-level group is exactly "gradients" or
    "activation_grads", the dumper's layout; in folder mode ("FILE:DATASET") the part after
    the first ':' is the dataset."""
    if not path.startswith("/") and ":" in path:
        path = path.split(":", 1)[1]
    return path.lstrip("/").split("/", 1)[0] in ("gradients", "activation_grads")


def noise_need(t, u):
    """nu that makes t noise-level (src/lib/judge/judge.c, pc_noise_level)."""
    ctx = t["context"]
    s = ctx["noise_scale"]
    nu = t["rms"] / (u * s)
    if ctx["rms_a"] > NOISE_VALUE * s:
        nu = max(nu, ctx["rms_a"] / (u * s))
    return nu


# ---- the fit -----------------------------------------------------------------------------------

def _measure(binary, base_text, pairs, noise_floor_u):
    """[(where, tensor JSON, a, b)] of every judged tensor of every pair, every limit open."""
    text = profile_text(base_text, measuring_coefficients(noise_floor_u))
    out = []
    for f, label, a, b in pairs:
        _, rep = binary.run(text, a, b)
        for t in rep["tensors"]:
            if "context" in t:
                out.append(("%s %s %s" % (f, label, t["path"]), t, a, b))
    return out


def fit(binary, base_text, precision, pairs):
    """({coefficient: value}, {coefficient: (needed, where)}) by the rule of
    docs/tolerance-model.md ("Calibration") on pairs [(family, label, a, b)]."""
    u_prof = UNIT[precision]
    need = {"noise_floor_u": (0.0, ""), "max_rel_rms_u": (0.0, ""), "max_scale_u": (0.0, ""),
            "atol_rms": (0.0, ""), "trend_growth_backward": (0.0, "")}
    # 1. the noise floor: what the honest noise-only tensors need.
    for where, t, _, _ in _measure(binary, base_text, pairs, 0.0):
        if t["rel_rms"] >= NOISE_REL_RMS and t["context"]["noise_scale"] > 0:
            nu = noise_need(t, u_prof)
            if nu <= NOISE_U_MAX:
                need["noise_floor_u"] = max(need["noise_floor_u"], (nu, where))
    noise_u = max(NOISE_FLOOR_MIN[0] / u_prof, NOISE_FLOOR_MIN[1],
                  round_up(MARGIN * need["noise_floor_u"][0]))
    # 2. with that floor, what the trend leaves to the fixed criteria: forward tensors (and
    # gradients without a trend) set the floors, gradients the backward growth.
    tensors = [x for x in _measure(binary, base_text, pairs, noise_u)
               if not x[1]["context"]["noise_level"]]
    grads = []
    for where, t, a, b in tensors:
        u = max(u_prof, UNIT.get(t["compare_dtype"], 0))
        trend = t["context"]["trend"]
        if is_gradient(t["path"]) and trend > 0:
            grads.append((t["rel_rms"] / trend, t["rel_rms"] / u, where))
        elif t["rel_rms"] > TREND_GROWTH * trend:
            need["max_rel_rms_u"] = max(need["max_rel_rms_u"], (t["rel_rms"] / u, where))
    c_rr = max(round_up(MARGIN * need["max_rel_rms_u"][0]),
               round_up(REL_RMS_U_MIN.get(precision, 0)))
    for ratio, rr, where in grads:
        if rr > c_rr:
            need["trend_growth_backward"] = max(need["trend_growth_backward"], (ratio, where))
    g_bwd = max(TREND_GROWTH, round_up(MARGIN * need["trend_growth_backward"][0]))

    def allowed(t):
        return (g_bwd if is_gradient(t["path"]) else TREND_GROWTH) * t["context"]["trend"]

    for where, t, a, b in tensors:
        u = max(u_prof, UNIT.get(t["compare_dtype"], 0))
        if abs(t["scale_error"]) <= TREND_GROWTH * t["context"]["trend"]:
            continue  # the trend covers it (with the forward G, also for gradients)
        left = (abs(t["scale_error"]) -
                SCALE_SE_Z * t["rel_rms"] / math.sqrt(max(t["count"], 1))) / u
        need["max_scale_u"] = max(need["max_scale_u"], (left, where))
    for where, t, a, b in tensors:
        u = max(u_prof, UNIT.get(t["compare_dtype"], 0))
        if allowed(t) > c_rr * u and t["max_abs"] <= TREND_CREST * t["rms"]:
            continue  # the trend covers its elements
        if t["max_abs"] <= need["atol_rms"][0] * u * t["context"]["rms_a"]:
            continue  # cannot raise the need
        e = element_need(a, b, t, u, UNIT["float32"])
        need["atol_rms"] = max(need["atol_rms"], (e, where))
    c = {"atol_rms": max(round_up(MARGIN * need["atol_rms"][0]), CREST_OF_FLOOR * c_rr),
         "rtol_u": RTOL_U, "rtol_sqrt_k": RTOL_SQRT_K, "max_rel_rms_u": c_rr,
         "max_scale_u": max(SCALE_U_FLOOR, round_up(MARGIN * need["max_scale_u"][0])),
         "max_scale_u_sqrt_n": 0.0, "scale_z": SCALE_SE_Z, "trend_growth": TREND_GROWTH,
         "trend_growth_backward": g_bwd, "trend_window": TREND_WINDOW,
         "trend_crest": TREND_CREST, "noise_floor_u": noise_u}
    return c, need


def provenance(c, need, precision):
    """{coefficient: comment} saying where each fitted value came from."""
    def needed(k, floor_text):
        v, where = need[k]
        fitted = round_up(MARGIN * v)
        if where and fitted >= c[k]:
            return "3 x %.4g needed by %s" % (v, where)
        if where:
            return "%s (3 x %.4g needed by %s is less)" % (floor_text, v, where)
        return "%s (no honest tensor needs it)" % floor_text
    rr_floor = REL_RMS_U_MIN.get(precision)
    notes = {
        "noise_floor_u": needed("noise_floor_u", "model floor: max(64 u_fp32 / u, 8)"),
        "max_rel_rms_u": needed("max_rel_rms_u",
                                "model floor %s" % fmt(round_up(rr_floor)) if rr_floor
                                else "0"),
        "trend_growth_backward": needed("trend_growth_backward", "floor: trend_growth"),
        "max_scale_u": needed("max_scale_u", "floor: one rounding (1)"),
        "atol_rms": needed("atol_rms", "floor: 5 x max_rel_rms_u"),
    }
    for k in ("rtol_u", "rtol_sqrt_k", "max_scale_u_sqrt_n", "scale_z", "trend_growth",
              "trend_window", "trend_crest"):
        notes[k] = "model constant (docs/tolerance-model.md), not fitted"
    return notes
