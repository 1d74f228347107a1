#!/usr/bin/env python3
"""Score paritycheck's tolerance profiles on the real fixtures, next to torch.testing's defaults.

For each shipped profile (tolerances/<name>.yaml) and its backend pair, on fixtures/real/:

    honest passed   honest pairs (A = cpu_fp32 or cpu_fp64, B = the backend; for the fp32
                    profile also cpu_fp32 vs cpu_fp64) that pass as a whole
    bugs flagged    runs with one injected bug (scripts/inject_bugs.py, B = the backend) that
                    fail
    first div ok    of those, the runs whose first divergence is the injected tensor
    claimed         the same two counts over the cases the profile claims to resolve (EXPECTED)

and the same scores for torch.testing's default tolerances, twice: paritycheck without
--profile (its built-in profile holds torch's per-dtype numbers, with an OR of atol and rtol),
and torch.testing.assert_close's own rule |b - a| <= atol + rtol * |a| (equal_nan=False, the
pair's coarser dtype's tolerances) computed here in numpy.

--calibrate prints, per profile, what the honest fixtures need of each calibrated coefficient
and what the calibration rule (docs/tolerance-model.md, "Calibration") makes of it.

This file also holds an independent numpy implementation of the tolerance model
(docs/tolerance-model.md) that tests/drift/test_drift.py checks paritycheck against.

    /usr/bin/python3 scripts/score.py [--paritycheck build/paritycheck] [--calibrate]
"""

import argparse
import math
import os
import subprocess
import sys
import tempfile

import h5py
import numpy as np
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import inject_bugs  # noqa: E402
import pc_reference as ref  # noqa: E402

FIXTURES = os.path.join(ROOT, "fixtures", "real")
TOLERANCES = os.path.join(ROOT, "tolerances")

# profile -> (backend of B, honest pairs (A backend, B backend))
PROFILES = {
    "cpu-vs-cuda-fp32": ("cuda_fp32", [("cpu_fp32", "cuda_fp32"), ("cpu_fp64", "cuda_fp32"),
                                       ("cpu_fp32", "cpu_fp64")]),
    "tf32": ("cuda_tf32", [("cpu_fp32", "cuda_tf32"), ("cpu_fp64", "cuda_tf32")]),
    "bf16-autocast": ("cuda_bf16", [("cpu_fp32", "cuda_bf16"), ("cpu_fp64", "cuda_bf16")]),
    "fp16-autocast": ("cuda_fp16", [("cpu_fp32", "cuda_fp16"), ("cpu_fp64", "cuda_fp16")]),
}
BUG_REFERENCE = "cpu_fp32"  # A of every bug run

# What each profile claims about each bug (docs/tolerance-model.md, "What each precision
# resolves"): FLAG = flagged at the injected tensor on every target but the EXCEPTIONS below;
# EDGE = flagged on some targets only (the bug is about as large as the precision's noise, so the
# tensor's size and values decide); BELOW = below the precision's noise, not claimed.
FLAG, EDGE, BELOW = "flag", "edge", "below"
_ALL = {p: FLAG for p in PROFILES}
EXPECTED = {
    "roll": dict(_ALL),
    "dropout": dict(_ALL),
    "nan": dict(_ALL),
    "grad_x2": dict(_ALL),
    "scale_1pct": dict(_ALL),
    "chan_zero": dict(_ALL),
    "bf16_round": dict(_ALL, **{"fp16-autocast": EDGE, "bf16-autocast": BELOW}),
    "ln_eps_1e-3": dict(_ALL, **{"bf16-autocast": BELOW}),
    "ln_eps_1e-6": {"cpu-vs-cuda-fp32": FLAG, "tf32": BELOW, "bf16-autocast": BELOW,
                    "fp16-autocast": BELOW},
}

# Single targets where a claimed bug is at the edge: (bug, profile, family, target) -> claim.
EXCEPTIONS = {
    # 1% = 2.56 u_bf16, but with 16 elements the scale criterion allows (0.25 + 10.5 / 4) u.
    ("scale_1pct", "bf16-autocast", "rnn", "activations/003_head"): EDGE,
}

# torch.testing.assert_close's defaults (rtol, atol) per dtype, as in tolerances/default.yaml.
TORCH_DEFAULTS = {"float64": (1e-7, 1e-7), "float32": (1.3e-6, 1e-5), "float16": (1e-3, 1e-5),
                  "bfloat16": (1.6e-2, 1e-5)}

# ---- the tolerance model, in numpy ----------------------------------------------------------

TF32_MANTISSA_BITS = 10
PLAIN = ("atol", "rtol", "max_ulp", "max_mismatch_fraction")


def unit_roundoff(name):
    """u = 2^-p of a format name (p = stored mantissa bits + 1); 0 for non-floats."""
    if name == "tf32":
        return 2.0 ** -(TF32_MANTISSA_BITS + 1)
    fmt = ref.FORMATS.get(name)
    return 2.0 ** -(fmt.mbits + 1) if fmt else 0.0


def load_layers(profile=None):
    """The `defaults` layers that apply: tolerances/default.yaml, then the profile's, if any.
    Shipped profiles have no rules (asserted)."""
    paths = [os.path.join(TOLERANCES, "default.yaml")]
    if profile:
        paths.append(os.path.join(TOLERANCES, profile + ".yaml"))
    layers = []
    for p in paths:
        with open(p) as f:
            doc = yaml.safe_load(f)
        assert not doc.get("rules"), "%s: the numpy model reads defaults only" % p
        layers.append(doc.get("defaults") or {})
    return layers


def _dtype_key(compare):
    return compare if compare in ref.FORMATS else "integer"


def resolve(layers, compare, K=None, acc=None, rms=None):
    """The tolerance of one tensor (docs/tolerances.md, docs/tolerance-model.md) as a dict:
    atol, rtol (None = unset), fraction, max_rel_rms, max_scale, max_scale_sqrt_n (None =
    unset)."""
    raw = {}
    for layer in layers:
        for key in ("all", _dtype_key(compare)):
            raw.update(layer.get(key) or {})
    tol = {k: raw.get(k) for k in ("atol", "rtol")}
    tol["fraction"] = raw.get("max_mismatch_fraction") or 0.0
    tol.update(max_rel_rms=None, max_scale=None, max_scale_sqrt_n=None)
    if compare not in ref.FORMATS:
        return tol
    u = max(unit_roundoff(compare), unit_roundoff(raw.get("precision") or ""))
    if acc:
        u_acc = unit_roundoff(acc)
    else:
        u_acc = unit_roundoff(raw.get("accumulation") or compare)

    def widen(key, v):
        tol[key] = v if tol[key] is None else max(tol[key], v)

    if raw.get("atol_rms") is not None and rms is not None:
        widen("atol", raw["atol_rms"] * u * rms)
    if raw.get("rtol_u") is not None:
        widen("rtol", raw["rtol_u"] * u)
    if raw.get("rtol_sqrt_k") is not None and K:
        widen("rtol", raw["rtol_sqrt_k"] * math.sqrt(K) * u_acc)
    if raw.get("max_rel_rms_u") is not None:
        tol["max_rel_rms"] = raw["max_rel_rms_u"] * u
    c1, c2 = raw.get("max_scale_u"), raw.get("max_scale_u_sqrt_n")
    if c1 is not None or c2 is not None:
        tol["max_scale"] = (c1 or 0) * u
        tol["max_scale_sqrt_n"] = (c2 or 0) * u
    return tol


def aggregates(a, b):
    """(n, rel_rms, scale_error) over the pairs where both are finite (docs/metrics.md)."""
    fin = np.isfinite(a) & np.isfinite(b)
    a, b = a[fin], b[fin]
    saa, sbb = float(np.dot(a, a)), float(np.dot(b, b))
    sdd, sab = float(np.dot(b - a, b - a)), float(np.dot(a, b))
    if saa == 0:
        rel_rms = 0.0 if sdd == 0 else math.inf
        scale = 0.0 if sbb == 0 else math.inf
    else:
        rel_rms = math.sqrt(sdd / saa)
        scale = sab / saa - 1
    return int(a.size), rel_rms, scale


def element_mismatches(a, b, atol, rtol):
    """(mismatches, nan or inf mismatch present) under abs <= atol OR abs <= rtol |a|."""
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    equal = (a == b) | (nan_a & nan_b)
    with np.errstate(invalid="ignore"):
        e = np.abs(b - a)
        ok = np.zeros(a.shape, dtype=bool)
        if atol is not None:
            ok |= e <= atol
        if rtol is not None:
            ok |= e <= rtol * np.abs(a)
    special = (nan_a ^ nan_b) | ((np.isinf(a) | np.isinf(b)) & ~equal)
    bad = ~equal & (special | ~ok)
    return int(bad.sum()), bool(special.any())


def magnitude_rms(a):
    fin = a[np.isfinite(a)]
    return float(np.sqrt(np.mean(fin * fin))) if fin.size else 0.0


def judge(a, b, tol):
    """'pass' or 'drift' of one float tensor pair under a resolved tolerance, and why."""
    n_bad, special = element_mismatches(a, b, tol["atol"], tol["rtol"])
    if special:
        return "drift", "nan/inf mismatch"
    if n_bad and n_bad / a.size > tol["fraction"]:
        return "drift", "%d mismatches" % n_bad
    n, rel_rms, scale = aggregates(a, b)
    if n and tol["max_rel_rms"] is not None and not rel_rms <= tol["max_rel_rms"]:
        return "drift", "rel_rms"
    if n and tol["max_scale"] is not None and \
            not abs(scale) <= tol["max_scale"] + tol["max_scale_sqrt_n"] / math.sqrt(n):
        return "drift", "scale"
    return "pass", ""


# ---- reading dumps --------------------------------------------------------------------------

def datasets_in_order(path):
    """Dataset paths (no leading '/') in creation order, as paritycheck runs them."""
    out = []

    def walk(g, prefix):
        names = []
        g.id.links.iterate(lambda n: names.append(n.decode()), idx_type=h5py.h5.INDEX_CRT_ORDER)
        for n in names:
            o = g[n]
            if isinstance(o, h5py.Dataset):
                out.append(prefix + n)
            else:
                walk(o, prefix + n + "/")
    with h5py.File(path, "r") as f:
        walk(f, "")
    return out


class Dump:
    """Every dataset of a fixture as (float64 values, logical dtype, K, accumulation)."""

    def __init__(self, path):
        self.order = datasets_in_order(path)
        self.t = {}
        with h5py.File(path, "r") as f:
            for n in self.order:
                ds = f[n]
                t = ref.read_tensor(ds)
                assert t.kind == "float", (path, n, t.kind)
                acc = ds.attrs.get("accumulation_dtype")
                self.t[n] = (np.asarray(t.values, dtype=np.float64).ravel(), t.logical,
                             int(ds.attrs.get("reduction_length", 0)) or None,
                             acc.decode() if isinstance(acc, bytes) else acc)

    def replaced(self, name, values):
        """A copy whose dataset `name` holds `values` instead."""
        d = Dump.__new__(Dump)
        d.order, d.t = self.order, dict(self.t)
        v, la, K, acc = self.t[name]
        d.t[name] = (np.asarray(values, dtype=np.float64).ravel(), la, K, acc)
        return d


def model_run(A, B, layers):
    """[(path, verdict, tolerance)] in A's order under the numpy model, and the first
    divergence (None when every tensor passes)."""
    out, first = [], None
    for n in A.order:
        a, la, K, acc = A.t[n]
        b, lb, Kb, accb = B.t[n]
        compare, _ = ref.compare_dtype_of(la, lb)
        tol = resolve(layers, compare, K or Kb, acc or accb, magnitude_rms(a))
        verdict, _ = judge(a, b, tol)
        out.append((n, verdict, tol))
        if verdict != "pass" and first is None:
            first = n
    return out, first


def torch_run(A, B):
    """First tensor in A's order that torch.testing.assert_close(B, A) rejects with its
    default tolerances (None when all pass)."""
    for n in A.order:
        a, la, _, _ = A.t[n]
        b, lb, _, _ = B.t[n]
        compare, _ = ref.compare_dtype_of(la, lb)
        rtol, atol = TORCH_DEFAULTS[compare]
        with np.errstate(invalid="ignore"):
            close = np.abs(b - a) <= atol + rtol * np.abs(a)
        close |= (a == b)  # equal infinities; NaN is never close (equal_nan=False)
        if not close.all():
            return n
    return None


# ---- running paritycheck --------------------------------------------------------------------

def paritycheck(binary, a, b, profile=None):
    """(exit code, parsed JSON report) of one paritycheck run."""
    import json
    cmd = [binary, "--json", "-"] + (["--profile", profile] if profile else []) + [a, b]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)
    if p.returncode not in (0, 1):
        raise RuntimeError("%s: exit %d: %s" % (" ".join(cmd), p.returncode, p.stderr.decode()))
    return p.returncode, json.loads(p.stdout)


def fixture(family, backend, root=FIXTURES):
    return os.path.join(root, "%s_%s.h5" % (family, backend))


def honest_pairs(profile):
    return [(f, ra, rb) for ra, rb in PROFILES[profile][1] for f in inject_bugs.TARGETS]


def bug_cases(profile):
    """(family, bug, target, claim) of every case for the profile's backend."""
    return [(f, bug, t, EXCEPTIONS.get((bug, profile, f, t), EXPECTED[bug][profile]))
            for f, bug, t in inject_bugs.cases()]


# ---- calibration ----------------------------------------------------------------------------

MARGIN = 2.0          # every calibrated coefficient is MARGIN x what the honest fixtures need
SCALE_SE_Z = 3.0      # max_scale_u_sqrt_n = z x max_rel_rms_u (see docs/tolerance-model.md)
SCALE_U_FLOOR = 0.25  # the smallest systematic scale error (in u) a profile claims to resolve


def round_up(x, digits=2):
    """x rounded up to `digits` significant digits."""
    if x <= 0:
        return 0.0
    e = math.floor(math.log10(x)) - digits + 1
    return math.ceil(round(x / 10 ** e, 9)) * 10 ** e


def calibrate(profile):
    """{coefficient: (needed, the tensor that needs it, calibrated value)}."""
    layers = load_layers(profile)
    raw = {}
    for layer in layers:
        raw.update(layer.get("all") or {})
    need = {"atol_rms": (0.0, ""), "max_rel_rms_u": (0.0, ""), "max_scale_u": (0.0, "")}
    cases = []
    for f, ra, rb in honest_pairs(profile):
        A, B = Dump(fixture(f, ra)), Dump(fixture(f, rb))
        for n in A.order:
            a, la, K, acc = A.t[n]
            b, lb, Kb, accb = B.t[n]
            compare, _ = ref.compare_dtype_of(la, lb)
            # the element criteria without atol_rms: what must the RMS floor cover?
            no_floor = dict(raw, atol_rms=None, atol=None)
            tol = resolve([{"all": no_floor}], compare, K or Kb, acc or accb, None)
            u = max(unit_roundoff(compare), unit_roundoff(raw.get("precision") or ""))
            fin = np.isfinite(a) & np.isfinite(b)
            e = np.abs(b[fin] - a[fin])
            outside = e > (tol["rtol"] or 0) * np.abs(a[fin])
            rms = magnitude_rms(a)
            n_, rel_rms, scale = aggregates(a, b)
            where = "%s %s/%s %s" % (f, ra, rb, n)
            if outside.any() and rms > 0:
                need["atol_rms"] = max(need["atol_rms"], (float(e[outside].max()) / (u * rms), where))
            need["max_rel_rms_u"] = max(need["max_rel_rms_u"], (rel_rms / u, where))
            cases.append((abs(scale) / u, n_, where))
    c_rr = round_up(MARGIN * need["max_rel_rms_u"][0])
    c2 = SCALE_SE_Z * c_rr
    for s, n_, where in cases:
        need["max_scale_u"] = max(need["max_scale_u"], (s - c2 / math.sqrt(n_), where))
    out = {"atol_rms": (need["atol_rms"][0], need["atol_rms"][1],
                        round_up(MARGIN * need["atol_rms"][0])),
           "max_rel_rms_u": (need["max_rel_rms_u"][0], need["max_rel_rms_u"][1], c_rr),
           "max_scale_u_sqrt_n": (None, "z = %g times max_rel_rms_u" % SCALE_SE_Z, c2),
           "max_scale_u": (need["max_scale_u"][0], need["max_scale_u"][1],
                           max(SCALE_U_FLOOR, round_up(MARGIN * need["max_scale_u"][0])))}
    return out, raw


def print_calibration():
    for profile in PROFILES:
        out, raw = calibrate(profile)
        print("%s (precision %s):" % (profile, raw.get("precision")))
        for k, (needed, where, value) in out.items():
            have = raw.get(k)
            mark = "" if have is not None and abs(have - value) <= 1e-9 * value else \
                "   <-- the profile has %s" % have
            if needed is None:
                why = where
            elif needed <= 0:
                why = "nothing needed: the sampling part covers every honest tensor"
            else:
                why = "needed %.4g by %s" % (needed, where)
            print("  %-19s %-7s %s%s" % (k, "%.4g" % value, why, mark))


# ---- scoring --------------------------------------------------------------------------------

def score_profile(binary, profile, work):
    """{column: [honest passed, honest, flagged, first ok, claimed flagged ok, claimed]}."""
    backend = PROFILES[profile][0]
    cols = {"profile": [0] * 6, "built-in torch": [0] * 6, "assert_close": [0] * 6}
    for f, ra, rb in honest_pairs(profile):
        A, B = fixture(f, ra), fixture(f, rb)
        runs = {"profile": paritycheck(binary, A, B, profile)[0] == 0,
                "built-in torch": paritycheck(binary, A, B)[0] == 0,
                "assert_close": torch_run(Dump(A), Dump(B)) is None}
        for c, ok in runs.items():
            cols[c][0] += ok
            cols[c][1] += 1
    dumps = {}
    for f, bug, target, claim in bug_cases(profile):
        src = fixture(f, backend)
        dst = os.path.join(work, "%s_%s_%s.h5" % (f, bug, target.replace("/", "_")))
        inject_bugs.inject(src, dst, bug, target)
        if f not in dumps:
            dumps[f] = (Dump(fixture(f, BUG_REFERENCE)), Dump(src))
        A, B = dumps[f]
        _, values = inject_bugs.buggy_values(src, f, bug, target)
        firsts = {"profile": paritycheck(binary, fixture(f, BUG_REFERENCE), dst, profile)[1],
                  "built-in torch": paritycheck(binary, fixture(f, BUG_REFERENCE), dst)[1],
                  "assert_close": torch_run(A, B.replaced(target, values))}
        for c, rep in firsts.items():
            first = rep["first_divergence"] if isinstance(rep, dict) else \
                (None if rep is None else "/" + rep)
            cols[c][2] += first is not None
            cols[c][3] += first == "/" + target
            if claim == FLAG:
                cols[c][4] += first == "/" + target
                cols[c][5] += 1
        os.remove(dst)
    return cols


def print_scores(binary):
    print("%-18s %-29s %7s %8s %9s %11s" % ("profile", "tolerances", "honest", "flagged",
                                            "first ok", "claimed ok"))
    labels = {"profile": "the profile",
              "built-in torch": "torch defaults (paritycheck)",
              "assert_close": "torch assert_close (numpy)"}
    with tempfile.TemporaryDirectory() as work:
        for profile in PROFILES:
            cols = score_profile(binary, profile, work)
            for c, (hp, h, fl, fo, co, cl) in cols.items():
                print("%-18s %-29s %7s %8s %9s %11s" % (
                    profile if c == "profile" else "", labels[c], "%d/%d" % (hp, h),
                    "%d/%d" % (fl, len(bug_cases(profile))),
                    "%d/%d" % (fo, len(bug_cases(profile))), "%d/%d" % (co, cl)))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--paritycheck", default=os.path.join(ROOT, "build", "paritycheck"),
                    help="the binary (default build/paritycheck)")
    ap.add_argument("--calibrate", action="store_true",
                    help="print what the honest fixtures need of each calibrated coefficient")
    a = ap.parse_args(argv)
    if a.calibrate:
        print_calibration()
    else:
        print_scores(a.paritycheck)
    return 0


if __name__ == "__main__":
    sys.exit(main())
