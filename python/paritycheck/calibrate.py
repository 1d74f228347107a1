"""paritycheck.calibrate: fit a tolerance profile to your own honest runs, cross-validate it, and
refuse it when it would let a structural bug through (docs/calibrate.md).

    python3 -m paritycheck.calibrate --base mps --trios runs/ --out tolerances/my-mps.yaml

Honest runs are pairs A B (optionally with R, the CPU fp64 reference), each tagged with the model
(family) it comes from:

    --pair FAMILY:A:B[:R]          files or folders, repeatable
    --trios DIR                    DIR/FAMILY/{a,b,ref}.h5 or DIR/FAMILY/RUN/{a,b,ref}.h5, as
                                   `python3 -m paritycheck.dump --trio` writes them
    --zoo DIR --backends A:B[:R]   DIR/<family>_<backend>.h5, as tests/zoo/make_zoo.py writes

Known bug pairs (optional): --bug FAMILY:A:B[:R]@TENSOR, B carrying a bug first visible at
TENSOR.

What it does, all through the paritycheck binary's JSON report (the judge is never
re-implemented here):

1. Fit: the rule of docs/tolerance-model.md ("Calibration") on every honest pair (A B, and R B
   where R is given): the binary measures every tensor with every limit open; each coefficient
   is 3 times what the most demanding honest tensor needs beyond the run's trend and noise
   floor, with the model's floors.
2. Sweep: every tensor of >= 64 elements of each honest B, zeroed, doubled, negated, rolled,
   10 % zeroed and shuffled (paritycheck.sweep), plain and three-way. If any mutated tensor
   passes under the fitted profile, nothing is written and the exit status is 2.
3. Cross-validation: leave one model (or one --cluster of models) out, fit on the rest, score the
   held-out honest runs (plain and three-way) and bugs injected into one tensor of their B at a
   time, plus the known bug pairs of the held-out models. Every bug run is counted.
4. Write the profile (the base profile with the fitted coefficients in its `defaults: all:`
   block, each with a comment saying where it came from) and, with --report, the CV as JSON.

Exit status: 0 written; 2 refused (too few honest runs, a mutated tensor passes, a pair the
binary cannot compare) or bad usage.
"""
import argparse
import collections
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile

import h5py
import numpy as np

from . import sweep as pcsweep

PROG = "python3 -m paritycheck.calibrate"

# ---- the model's constants (docs/tolerance-model.md) ------------------------------------------

# The run's trend (docs/tolerance-model.md, "The run's trend"): fixed, not fitted.
TREND_GROWTH = 4.0    # G: honest error may grow 4x over the largest of the last W tensors
TREND_WINDOW = 8      # W
TREND_CREST = 45.0    # P: twice the largest crest factor of an honest error the trend forgives
RTOL_U, RTOL_SQRT_K = 2.0, 1.0
# The rule's constants (docs/tolerance-model.md, "Calibration").
MARGIN = 3.0
SCALE_SE_Z = 3.0
SCALE_U_FLOOR = 1.0   # a systematic scale of one rounding of u is what normalisations do
NOISE_REL_RMS = 0.25  # an honest tensor this far off is rounding noise on both sides
# The noise floor is at least what the model gives: a bias gradient's noise is a sum of up to
# 4096 terms rounded in fp32 (sqrt(4096) u_fp32) or its inputs rounded to the profile's u (4 u).
NOISE_FLOOR_MIN = (64 * 2.0 ** -24, 8.0)
# A MobileNetV2-like net with batch 2 drifts 2e-5 in rel_rms between honest fp32 runs at its
# late layers (issue 13); the fp32 floor is twice that.
REL_RMS_U_MIN = {"float32": 2 * 2e-5 / 2.0 ** -24}
CREST_OF_FLOOR = 5.0  # atol_rms is at least 5 x max_rel_rms_u: an element 5 RMS errors out
NOISE_U_MAX = 64.0    # a tensor further from zero is not rounding noise: the trend must cover it
NOISE_VALUE = 2.0 ** -10  # PC_NOISE_VALUE of src/lib/judge/judge.c

UNIT = {"float64": 2.0 ** -53, "float32": 2.0 ** -24, "tf32": 2.0 ** -11, "float16": 2.0 ** -11,
        "bfloat16": 2.0 ** -8, "float8_e4m3fn": 2.0 ** -4, "float8_e5m2": 2.0 ** -3}

COEFFICIENTS = ["atol_rms", "rtol_u", "rtol_sqrt_k", "max_rel_rms_u", "max_scale_u",
                "max_scale_u_sqrt_n", "scale_z", "trend_growth", "trend_growth_backward",
                "trend_window", "trend_crest", "noise_floor_u"]

# Fewer honest runs than this cannot be calibrated on at all; fewer than TRUST_* are reported
# as too few to trust (the leave-one-out estimate rests on a handful of held-out runs).
MIN_MODELS, MIN_RUNS = 2, 3
TRUST_MODELS, TRUST_RUNS = 3, 5

# A bug is *required* at a tensor when its effect rel_rms(B_bug, B) is at least this many times
# the honest drift there, rel_rms(B, A) (docs/tolerance-model.md, "Scores").
REQUIRED_RATIO = 20.0
TARGETS_PER_RUN = 8


class Refused(Exception):
    """Calibration cannot give a profile worth writing; the message says why (exit 2)."""


def round_up(x, digits=2):
    """x rounded up to `digits` significant digits; 0 for x <= 0."""
    if x <= 0:
        return 0.0
    e = math.floor(math.log10(x)) - digits + 1
    return math.ceil(round(x / 10 ** e, 9)) * 10 ** e


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


# ---- profile text ------------------------------------------------------------------------------

def fmt(v):
    return "%.6g" % v


def _defaults_all_block(lines):
    """(index of the `all:` line, end index, key indent) of the block-style `defaults: all:`
    mapping of a profile, or None where the file has no `defaults:`. Raises Refused for flow
    style, which this editor does not rewrite."""
    d = None
    for i, ln in enumerate(lines):
        if re.match(r"defaults\s*:", ln):
            d = i
            if not re.match(r"defaults\s*:\s*(#.*)?$", ln):
                raise Refused("the base profile's `defaults:` is not in block style; write it "
                              "as `defaults:` then `  all:` on their own lines")
            break
    if d is None:
        return None
    i = d + 1
    while i < len(lines):
        ln = lines[i]
        if ln.strip() and not ln.lstrip().startswith("#") and not ln.startswith(" "):
            break  # the next top-level key
        m = re.match(r"(\s+)all\s*:\s*(.*)$", ln)
        if m:
            rest = m.group(2).split("#")[0].strip()
            if rest:
                raise Refused("the base profile's `defaults: all:` is in flow style; write one "
                              "key per line")
            ind = None
            j = i + 1
            while j < len(lines):
                lj = lines[j]
                if lj.strip() and not lj.lstrip().startswith("#"):
                    k = len(lj) - len(lj.lstrip())
                    if k <= len(m.group(1)):
                        break
                    ind = ind or k
                j += 1
            while j > i + 1 and not lines[j - 1].strip():
                j -= 1
            return i, j, ind or len(m.group(1)) + 2
        i += 1
    return d, d + 1, None


def profile_text(base_text, c, notes=None, header=None):
    """base_text with the coefficients c set in its `defaults: all:` block (added where
    missing), each followed by notes[key] as a comment, and header lines prepended."""
    lines = base_text.splitlines()
    if header is not None:  # the base's own header describes the base, not this profile
        while lines and (lines[0].startswith("#") or not lines[0].strip()):
            lines.pop(0)
    blk = _defaults_all_block(lines)
    if blk is None:
        lines += ["", "defaults:", "  all:"]
        start, end, ind = len(lines) - 1, len(lines), 4
    else:
        start, end, ind = blk
        if ind is None:  # `defaults:` without `all:`
            lines.insert(start + 1, "  all:")
            start, end, ind = start + 1, start + 2, 4
    block = lines[start + 1:end]
    for k in COEFFICIENTS:
        if k not in c:
            continue
        new = "%s%s: %s" % (" " * ind, k, fmt(c[k]))
        if notes and notes.get(k):
            new += "  # " + notes[k]
        for n, ln in enumerate(block):
            if re.match(r"\s+%s\s*:" % k, ln):
                block[n] = new
                break
        else:
            block.append(new)
    lines[start + 1:end] = block
    head = ["# " + h if h else "#" for h in (header or [])]
    if header is not None:
        head.append("")
    return "\n".join(head + lines) + "\n"


def base_value(base_text, key):
    """The value of `key` in the base profile's `defaults: all:` block, as a string, or None."""
    lines = base_text.splitlines()
    blk = _defaults_all_block(lines)
    if not blk or blk[2] is None:
        return None
    for ln in lines[blk[0] + 1:blk[1]]:
        m = re.match(r"\s+%s\s*:\s*([^#\s]+)" % key, ln)
        if m:
            return m.group(1)
    return None


def overridden_keys(base_text):
    """Fitted keys that the base profile also sets outside `defaults: all:` (a dtype's defaults
    or a rule); those tensors keep the base's value, which the fit does not see."""
    lines = base_text.splitlines()
    blk = _defaults_all_block(lines)
    inside = set(range(blk[0], blk[1])) if blk else set()
    out = set()
    for i, ln in enumerate(lines):
        if i in inside:
            continue
        for k in COEFFICIENTS:
            if re.search(r"(^|[\s{,])%s\s*:" % k, ln.split("#")[0]):
                out.add(k)
    return sorted(out)


def find_profile(name, binary):
    """The text of a profile given as a path or a shipped name (as --profile looks for it:
    $PARITYCHECK_TOLERANCES, PREFIX/share/paritycheck/tolerances beside the binary, the
    source tree)."""
    if os.path.isfile(name):
        with open(name) as f:
            return f.read()
    dirs = []
    if os.environ.get("PARITYCHECK_TOLERANCES"):
        dirs.append(os.environ["PARITYCHECK_TOLERANCES"])
    real = shutil.which(binary) or binary
    dirs.append(os.path.join(os.path.dirname(os.path.abspath(real)), "..", "share", "paritycheck",
                             "tolerances"))
    here = os.path.dirname(os.path.abspath(__file__))
    dirs.append(os.path.join(here, "..", "..", "tolerances"))
    for d in dirs:
        p = os.path.join(d, name + ".yaml")
        if os.path.isfile(p):
            with open(p) as f:
                return f.read()
    raise Refused("base profile %r is neither a file nor a shipped profile (looked in %s)"
                  % (name, ", ".join(os.path.normpath(d) for d in dirs)))


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
    """The judge's test (src/lib/judge/judge.c, pc_is_gradient): the path holds the word grad,
    grads, gradient or gradients between separators."""
    words = re.split(r"[/._:-]", path.lower())
    return any(w in ("grad", "grads", "gradient", "gradients") for w in words)


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


# ---- inputs ------------------------------------------------------------------------------------

def parse_pair(spec, opt):
    family, sep, rest = spec.partition(":")
    parts = rest.split(":") if sep else []
    if not family or len(parts) not in (2, 3) or not all(parts):
        raise Refused("%s %r: expected FAMILY:A:B or FAMILY:A:B:R" % (opt, spec))
    for p in parts:
        if not os.path.exists(p):
            raise Refused("%s %r: %s does not exist" % (opt, spec, p))
    return family, parts[0], parts[1], parts[2] if len(parts) == 3 else None


def trio_runs(root):
    """Runs of a directory of trios: ROOT/FAMILY/{a,b,ref}.h5 or ROOT/FAMILY/RUN/{a,b,ref}.h5."""
    out = []

    def trio(d, family, label):
        a, b, r = (os.path.join(d, n) for n in ("a.h5", "b.h5", "ref.h5"))
        if os.path.isfile(a) and os.path.isfile(b):
            out.append(Run(family, label, a, b, r if os.path.isfile(r) else None,
                           ("a", "b", "ref")))
            return True
        return False

    if not os.path.isdir(root):
        raise Refused("--trios %s: not a directory" % root)
    for fam in sorted(os.listdir(root)):
        d = os.path.join(root, fam)
        if not os.path.isdir(d):
            continue
        if trio(d, fam, ""):
            continue
        for run in sorted(os.listdir(d)):
            if os.path.isdir(os.path.join(d, run)):
                trio(os.path.join(d, run), fam, run + " ")
    return out


def zoo_runs(dirs, backends):
    """Runs of directories of <family>_<backend>.h5 for each backend spec A:B[:R]."""
    out = []
    fams = set()
    for d in dirs:
        if not os.path.isdir(d):
            raise Refused("--zoo %s: not a directory" % d)
        for n in os.listdir(d):
            for spec in backends:
                bk = spec.split(":")[0]
                if n.endswith("_%s.h5" % bk):
                    fams.add(n[:-len("_%s.h5" % bk)])

    def path(f, bk):
        for d in dirs:
            p = os.path.join(d, "%s_%s.h5" % (f, bk))
            if os.path.exists(p):
                return p
        return None

    for f in sorted(fams):
        for spec in backends:
            parts = spec.split(":")
            if len(parts) not in (2, 3) or not all(parts):
                raise Refused("--backends %r: expected A:B or A:B:R" % spec)
            ps = [path(f, bk) for bk in parts]
            if ps[0] and ps[1]:
                r = ps[2] if len(parts) == 3 else None
                out.append(Run(f, "", ps[0], ps[1], r, tuple(parts + [""])[:3]))
    return out


def collect(a):
    runs = []
    for spec in a.pair or ():
        fam, pa, pb, pr = parse_pair(spec, "--pair")
        runs.append(Run(fam, "", pa, pb, pr,
                        tuple(os.path.basename(os.path.normpath(p)) if p else ""
                              for p in (pa, pb, pr))))
    for d in a.trios or ():
        runs += trio_runs(d)
    if a.zoo:
        if not a.backends:
            raise Refused("--zoo needs --backends A:B[:R] (e.g. cpu_fp32:cuda_tf32:cpu_fp64)")
        runs += zoo_runs(a.zoo, a.backends)
    if a.family:
        runs = [r for r in runs if r.family in a.family]
    known = []
    for spec in a.bug or ():
        body, at, tensor = spec.rpartition("@")
        if not at or not tensor:
            raise Refused("--bug %r: expected FAMILY:A:B[:R]@TENSOR" % spec)
        known.append(parse_pair(body, "--bug") + (tensor,))
    return runs, known


def make_clusters(runs, specs):
    """[(name, set of families)]: each --cluster NAME=F1,F2, then each family left alone."""
    fams = sorted({r.family for r in runs})
    out, taken = [], set()
    for spec in specs or ():
        name, eq, members = spec.partition("=")
        ms = {m for m in members.split(",") if m}
        if not eq or not ms:
            raise Refused("--cluster %r: expected NAME=FAMILY1,FAMILY2" % spec)
        unknown = ms - set(fams)
        if unknown:
            raise Refused("--cluster %r: no honest run of %s" % (spec, ", ".join(sorted(unknown))))
        if ms & taken:
            raise Refused("--cluster %r: %s already in another cluster"
                          % (spec, ", ".join(sorted(ms & taken))))
        out.append((name, ms))
        taken |= ms
    out += [(f, {f}) for f in fams if f not in taken]
    return out


# ---- main --------------------------------------------------------------------------------------

def calibrate(a, log):
    """Everything but argument parsing; returns the report dict. Raises Refused."""
    binpath = a.binary or os.environ.get("PARITYCHECK_BIN") or shutil.which("paritycheck")
    if not binpath:
        raise Refused("no paritycheck binary: give --binary or set PARITYCHECK_BIN")
    base_text = find_profile(a.base, binpath)
    precision = a.precision or base_value(base_text, "precision")
    if precision not in UNIT:
        raise Refused("the base profile sets no `precision` in `defaults: all:` that calibration "
                      "knows (%s); give --precision" % ", ".join(UNIT))
    runs, known = collect(a)
    fams = sorted({r.family for r in runs})
    log("%d honest runs of %d models (%s)" % (len(runs), len(fams), ", ".join(fams)))
    if len(fams) < MIN_MODELS or len(runs) < MIN_RUNS:
        raise Refused("%d honest runs of %d models: too few to calibrate on (at least %d runs of "
                      "%d models; %d runs of %d or more models before the result can be "
                      "trusted)" % (len(runs), len(fams), MIN_RUNS, MIN_MODELS, TRUST_RUNS,
                                    TRUST_MODELS))
    short = []
    if len(runs) < TRUST_RUNS:
        n = TRUST_RUNS - len(runs)
        short.append("%d more honest run%s" % (n, "s" if n > 1 else ""))
    if len(fams) < TRUST_MODELS:
        n = TRUST_MODELS - len(fams)
        short.append("%d more model%s" % (n, "s" if n > 1 else ""))
    clusters = make_clusters(runs, a.cluster)
    if len(clusters) < 2:
        raise Refused("one cluster holds every model: nothing to hold out")
    over = overridden_keys(base_text)
    if over:
        log("warning: the base profile also sets %s outside `defaults: all:`; tensors it matches "
            "keep those values, which the fit does not see" % ", ".join(over))
    with tempfile.TemporaryDirectory(prefix="paritycheck-calibrate-") as work:
        binary = Binary(binpath, work)
        pairs = calibration_pairs(runs)
        c, need = fit(binary, base_text, precision, pairs)
        log("fitted on %d honest pairs:" % len(pairs))
        for k in ("atol_rms", "max_rel_rms_u", "max_scale_u", "trend_growth_backward",
                  "noise_floor_u"):
            log("  %-22s %-8s needed %.4g by %s" % (k, fmt(c[k]), need[k][0],
                                                    need[k][1] or "(none)"))
        text = profile_text(base_text, c)
        # 2. the structural sweep under the fitted profile
        res = {}
        y = binary.yaml(text)
        for r in runs:
            if not (os.path.isfile(r.b) and h5py.is_hdf5(r.b)):
                continue
            for mode, ref in [("plain", None)] + ([("three-way", r.ref)] if r.ref else []):
                pcsweep.sweep_pair(binpath, ["-t", y], r.a, r.b, ref, work, res,
                                   (r.family, run_name(r), mode), stride=a.sweep_stride)
        passed = res.get("passed", [])
        log("structural sweep: %d mutated tensors, %d pass" % (res.get("mutated", 0),
                                                               len(passed)))
        if not res.get("mutated"):
            raise Refused("the structural sweep mutated no tensor (no HDF5 float tensor of at "
                          "least %d elements in the honest B files)" % pcsweep.MIN_ELEMENTS)
        if passed:
            lines = ["  %s %s %s: %s of %s passes" % (lab[0], lab[1], lab[2], kind, n)
                     for lab, kind, n in passed[:10]]
            raise Refused("the fitted profile lets %d structurally mutated tensors pass; not "
                          "writing it:\n%s" % (len(passed), "\n".join(lines)))
        # 3. cross-validation
        log("cross-validation, leave one %s out:" % ("cluster" if a.cluster else "model"))
        folds = cross_validate(binary, base_text, precision, runs, clusters, known,
                               a.bug_targets, a.bugs or list(BUGS), work, log)
        summ = cv_summary(folds)
        for mode, s in summ.items():
            log("  %-9s honest %d/%d pass; bug runs caught at the right tensor %d/%d (flagged "
                "%d, required %d/%d)" % (mode, s["honest_pass"], s["honest_runs"],
                                         s["bugs_caught"], s["bug_runs"], s["bugs_flagged"],
                                         s["required_caught"], s["required_runs"]))
            if s["honest_runs"] and s["honest_pass"] == s["honest_runs"]:
                log("  %-9s all %d held-out honest runs pass: a new model's failure rate is "
                    "below %.0f %% at 95 %% confidence (rule of three)"
                    % (mode, s["honest_runs"], min(100.0, 300.0 / s["honest_runs"])))
        if short:
            log("too few to trust: %d honest runs of %d models; add %s (at least %d runs of %d "
                "models) before relying on this profile" % (len(runs), len(fams),
                                                           " and ".join(short), TRUST_RUNS,
                                                           TRUST_MODELS))
        header = [
            "Tolerance profile calibrated by `%s` (docs/calibrate.md)" % PROG,
            "from the base profile %s (its header comments dropped)," % a.base,
            "on %d honest runs (%d pairs) of %d models: %s." % (len(runs), len(pairs), len(fams),
                                                              ", ".join(fams)),
            "Each fitted value: 3 x what the most demanding honest tensor needs beyond the",
            "run's trend and noise floor, or the model's floor (comment beside it).",
            "Structural sweep: %d mutated tensors, none passes." % res["mutated"]]
        for mode, s in summ.items():
            header.append("Leave-one-out, %s: honest %d/%d pass; bugs caught at the right "
                          "tensor %d/%d." % (mode, s["honest_pass"], s["honest_runs"],
                                             s["bugs_caught"], s["bug_runs"]))
        if short:
            header.append("TOO FEW TO TRUST: add %s." % " and ".join(short))
        out_text = profile_text(base_text, c, provenance(c, need, precision), header)
        report = {"base": a.base, "precision": precision,
                  "runs": [r._asdict() for r in runs], "models": fams,
                  "too_few_to_trust": short, "coefficients": c,
                  "needs": {k: {"value": v, "where": w} for k, (v, w) in need.items()},
                  "sweep": {"mutated": res["mutated"], "passed": passed,
                            "diagnoses": res.get("diagnoses", {})},
                  "clusters": {n: sorted(f) for n, f in clusters},
                  "cross_validation": {"summary": summ, "folds": folds},
                  "binary_runs": binary.runs}
        return out_text, report


def main(argv=None):
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="docs/calibrate.md walks through it. Exit status: 0 "
                                        "written; 2 refused or bad usage.")
    ap.add_argument("--base", required=True,
                    help="the profile to start from: a YAML file or a shipped profile's name")
    ap.add_argument("--out", required=True, help="where to write the calibrated profile")
    ap.add_argument("--report", help="write the cross-validation report here as JSON")
    ap.add_argument("--pair", action="append", metavar="FAMILY:A:B[:R]",
                    help="an honest run (files or folders); repeatable")
    ap.add_argument("--trios", action="append", metavar="DIR",
                    help="DIR/FAMILY/{a,b,ref}.h5 or DIR/FAMILY/RUN/{a,b,ref}.h5; repeatable")
    ap.add_argument("--zoo", action="append", metavar="DIR",
                    help="a directory of <family>_<backend>.h5; repeatable, with --backends")
    ap.add_argument("--backends", action="append", metavar="A:B[:R]",
                    help="with --zoo: the backends of an honest run; repeatable")
    ap.add_argument("--family", action="append", help="only these families (repeatable)")
    ap.add_argument("--bug", action="append", metavar="FAMILY:A:B[:R]@TENSOR",
                    help="a known bug pair and the tensor where its bug shows first")
    ap.add_argument("--cluster", action="append", metavar="NAME=F1,F2",
                    help="hold these families out together (related models); repeatable")
    ap.add_argument("--precision", choices=list(UNIT),
                    help="the arithmetic's precision when the base profile sets none")
    ap.add_argument("--binary", help="the paritycheck executable (default $PARITYCHECK_BIN, "
                    "else paritycheck on PATH)")
    ap.add_argument("--bug-targets", type=int, default=TARGETS_PER_RUN, metavar="N",
                    help="tensors per held-out run that get injected bugs (default %d; 0: none)"
                    % TARGETS_PER_RUN)
    ap.add_argument("--bugs", action="append", choices=list(BUGS),
                    help="injected bugs to use (default all)")
    ap.add_argument("--sweep-stride", type=int, default=pcsweep.STRIDE, metavar="S",
                    help="mutate every S-th tensor per sweep run (default %d)" % pcsweep.STRIDE)
    ap.add_argument("-q", "--quiet", action="store_true", help="print only errors")
    a = ap.parse_args(argv)
    if a.sweep_stride < 1 or a.bug_targets < 0:
        ap.error("--sweep-stride wants >= 1, --bug-targets >= 0")

    def log(msg):
        if not a.quiet:
            print(msg, flush=True)
    try:
        text, report = calibrate(a, log)
    except Refused as e:
        print("%s: refused: %s" % (PROG, e), file=sys.stderr)
        return 2
    tmp = a.out + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, a.out)
    log("wrote %s" % a.out)
    if a.report:
        with open(a.report, "w") as f:
            json.dump(report, f, indent=1, default=str)
        log("wrote %s" % a.report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
