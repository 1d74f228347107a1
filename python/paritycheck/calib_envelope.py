"""paritycheck.calibrate --from-envelopes: a plain-mode profile fitted to measured envelopes
(docs/envelope.md), for users who gate without one (docs/calibrate.md, "From envelopes").

An envelope holds, per tensor of A, the RMS distance d_k of each of its K honest reruns to A
(`member_rms_err`), the largest per-element RMS over members (`scale`, s) and RMS(A) (`a_rms`).
The fit reads those attributes only, through the envelope judge's own law
(docs/tolerance-model.md, "Envelope"; src/lib/envelope/law.c) taken at nu = 1, the widest law it
admits (exactly its law when K = 2): an honest B is one more exchangeable sample, so
RMS(b - a)^2 / mean_k d_k^2 follows F(1, K) = t_K^2, and (b_i - a_i) / r_i follows t_K. With the
false-alarm rate alpha = 0.01 per envelope file split over its T tensors and two tests,
alpha_t = alpha / (2 T) (one test more for each of its root's scale_test and median_test that
is 1: alpha / (4 T) with both), and
the gap G_e = 3 for a backend whose algorithm differs:

    floor       = sqrt(mean_k d_k^2 + (u RMS(A))^2)       one rounding at the profile's precision u
    rel need    = G_e t_K^-1(1 - alpha_t / 2)      floor       / RMS(A) / u   -> max_rel_rms_u
    elem need   = G_e t_K^-1(1 - alpha_t / (2 n)) (s + floor) / RMS(A) / u   -> atol_rms

Each coefficient is the largest need over every tensor of every envelope, rounded up to two
digits. The envelope does not measure a scale (it stores no projection of m_k - a on a), so the
scale criterion (max_scale_u, scale_z) stays the base's, as does everything else. The profile
is the base profile with those two keys set in its `defaults: all:` block: it applies to every
tensor, those the envelope does not hold included (they are counted and named)."""
import functools
import math
import os

import h5py
import numpy as np

from .calib_profile import (UNIT, Refused, base_value, find_profile, fmt, overridden_keys,
                            profile_text, round_up)

ALPHA = 0.01  # PC_ENVELOPE_ALPHA: false alarms per envelope file
GAP = 3.0     # PC_ENVELOPE_GAP: G_e
MAX_COEFFICIENT = 1e6  # the largest max_rel_rms_u, atol_rms, max_scale_u a profile may give
FITTED = ("atol_rms", "max_rel_rms_u")
SUFFIX = ".envelope.h5"


# ---- Student's t -------------------------------------------------------------------------------

def _betacf(a, b, x):
    """The continued fraction of the regularized incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 500):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def t_upper_tail(t, k):
    """P(T > t) for Student's t with k degrees of freedom, t >= 0: I_x(k/2, 1/2) / 2 with
    x = k / (k + t^2), by the continued fraction, which keeps the far tail's relative accuracy."""
    a, b, x = k / 2.0, 0.5, k / (k + t * t)
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) +
                     a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return 0.5 * front * _betacf(a, b, x) / a
    return 0.5 * (1.0 - front * _betacf(b, a, 1.0 - x) / b)


@functools.lru_cache(maxsize=None)  # tensors of one shape share it
def t_quantile_upper(p, k):
    """t with P(T > t) = p (0 < p < 1/2), Student's t with k degrees of freedom, by bisection."""
    lo, hi = 0.0, 1.0
    while t_upper_tail(hi, k) > p:
        lo, hi = hi, 2.0 * hi
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if t_upper_tail(mid, k) > p:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-14 * hi:
            break
    return hi


# ---- reading envelopes -------------------------------------------------------------------------

def _root(f, path):
    """(K, T, emulate) of an envelope file's root attributes; Refused where they are not
    docs/envelope.md's format 1."""
    at = f.attrs
    if int(at.get("paritycheck_envelope", 0)) != 1:
        raise Refused("%s: not an envelope of format 1 (root attribute paritycheck_envelope)"
                      % path)
    k, t = int(at.get("members", 0)), int(at.get("tensors", 0))
    emulate = at.get("emulate", b"")
    emulate = emulate.decode() if isinstance(emulate, bytes) else str(emulate)
    if k < 2 or t < 1:
        raise Refused("%s: members %d and tensors %d: an envelope has K >= 2 and T >= 1"
                      % (path, k, t))
    return k, t, emulate


def _tensor(path, name, ds, k):
    """(d_k array, s, RMS(A), n, nonfinite) of one envelope dataset, checked."""
    at = ds.attrs
    try:
        d = np.asarray(at["member_rms_err"], dtype=np.float64).ravel()
        s, a_rms = float(at["scale"]), float(at["a_rms"])
        n, bad = int(at["count"]), int(at.get("nonfinite", 0))
    except (KeyError, TypeError, ValueError):
        raise Refused("%s %s: lacks docs/envelope.md's attributes (member_rms_err, scale, "
                      "a_rms, count)" % (path, name))
    if d.size != k or not np.all(np.isfinite(d)) or np.any(d < 0) or \
            not (math.isfinite(s) and s >= 0 and math.isfinite(a_rms) and a_rms >= 0 and n >= 1):
        raise Refused("%s %s: bad attributes (member_rms_err of %d values for K = %d, scale %r, "
                      "a_rms %r, count %d)" % (path, name, d.size, k, s, a_rms, n))
    return d, s, a_rms, n, bad


def envelope_needs(path, u):
    """[(name, rel need, elem need, nonfinite)] in units of u, of every dataset of one envelope,
    and (K, T, emulate, names of datasets whose A is all zero: no relative need)."""
    out, zero = [], []
    try:
        f = h5py.File(path, "r")
    except OSError as e:
        raise Refused("%s: cannot be read as HDF5 (%s)" % (path, e))
    with f:
        k, t, emulate = _root(f, path)
        # the judge's split: two tests a tensor, plus the scale and the median test where the
        # envelope holds them
        tests = 2.0 + sum(1.0 for a in ("scale_test", "median_test") if f.attrs.get(a, 0) == 1)
        alpha_t = ALPHA / (tests * t)
        q_rel = t_quantile_upper(alpha_t / 2.0, k)
        names = []
        f.visititems(lambda name, obj: names.append("/" + name)
                     if isinstance(obj, h5py.Dataset) else None)
        for name in names:
            d, s, a_rms, n, bad = _tensor(path, name, f[name], k)
            if a_rms == 0:
                zero.append(name)
                continue
            floor = math.sqrt(float(np.mean(d * d)) + (u * a_rms) ** 2)
            q_elem = t_quantile_upper(alpha_t / (2.0 * n), k)
            out.append((name, GAP * q_rel * floor / a_rms / u,
                        GAP * q_elem * (s + floor) / a_rms / u, bad))
    return out, (k, t, emulate, zero)


def uncovered(path, names):
    """Float datasets of A (NAME.h5 beside NAME.envelope.h5) the envelope does not hold, or None
    where A is not there."""
    a = path[:-len(SUFFIX)] + ".h5" if path.endswith(SUFFIX) else None
    if not a or not os.path.isfile(a):
        return None
    out = []

    def visit(name, obj):
        if isinstance(obj, h5py.Dataset) and obj.dtype.kind in "fc" and "/" + name not in names:
            out.append("/" + name)
    try:
        with h5py.File(a, "r") as f:
            f.visititems(visit)
    except OSError:
        return None  # A is not HDF5 here: nothing to count
    return out


# ---- the fit -----------------------------------------------------------------------------------

def fit_envelopes(paths, u, log):
    """({coefficient: value}, {coefficient: (need, where)}, per-file summary) over envelopes."""
    need = {"max_rel_rms_u": (0.0, ""), "atol_rms": (0.0, "")}
    files = []
    for p in paths:
        if not os.path.isfile(p):
            raise Refused("--from-envelopes %s: no such file" % p)
        rows, (k, t, emulate, zero) = envelope_needs(p, u)
        if not rows:
            raise Refused("%s: no tensor with a non-zero A to fit on" % p)
        for name, rel, elem, _ in rows:
            need["max_rel_rms_u"] = max(need["max_rel_rms_u"], (rel, "%s %s" % (p, name)))
            need["atol_rms"] = max(need["atol_rms"], (elem, "%s %s" % (p, name)))
        held = {r[0] for r in rows} | set(zero)
        missing = uncovered(p, held)
        nonfinite = [r[0] for r in rows if r[3]]
        files.append({"path": p, "members": k, "tensors": t, "emulate": emulate,
                      "fitted": len(rows), "a_zero": zero, "nonfinite": nonfinite,
                      "uncovered": missing})
        log("%s: K = %d, emulate %s, %d tensors fitted" % (p, k, emulate, len(rows)))
        if missing:
            log("  %d floating tensor%s of A without an envelope (%s%s): the fitted limits apply "
                "to them unmeasured" % (len(missing), "s" if len(missing) > 1 else "",
                                        ", ".join(missing[:3]), ", ..." if len(missing) > 3
                                        else ""))
        if nonfinite:
            log("  %d tensors with non-finite members: no profile passes a NaN or inf mismatch"
                % len(nonfinite))
    c = {"max_rel_rms_u": round_up(need["max_rel_rms_u"][0]),
         "atol_rms": round_up(need["atol_rms"][0])}
    for key in FITTED:
        if c[key] > MAX_COEFFICIENT:
            raise Refused("%s would be %s (needed by %s), above the %g a profile may give: the "
                          "envelope's spread is too wide for a plain profile, or its K too small "
                          "for the element law (more members narrow t_K)"
                          % (key, fmt(c[key]), need[key][1], MAX_COEFFICIENT))
    return c, need, files


def notes(need):
    """{coefficient: comment} saying where each value came from."""
    rel, elem = need["max_rel_rms_u"], need["atol_rms"]
    return {"max_rel_rms_u": "3 t_K^-1(1 - alpha_t/2) floor / RMS(A) = %.4g u at %s" % rel,
            "atol_rms": "3 t_K^-1(1 - alpha_t/2n) (s + floor) / RMS(A) = %.4g u at %s" % elem}


def calibrate_from_envelopes(a, binpath, prog, log):
    """(profile text, report) of `prog --from-envelopes`. Raises Refused."""
    base_text = find_profile(a.base, binpath or "paritycheck")
    precision = a.precision or base_value(base_text, "precision")
    if precision not in UNIT:
        raise Refused("the base profile sets no `precision` in `defaults: all:` that calibration "
                      "knows (%s); give --precision" % ", ".join(UNIT))
    over = [k for k in overridden_keys(base_text) if k in FITTED]
    if over:
        log("warning: the base profile also sets %s outside `defaults: all:`; tensors it matches "
            "keep those values" % ", ".join(over))
    u = UNIT[precision]
    c, need, files = fit_envelopes(a.from_envelopes, u, log)
    for k in FITTED:
        log("  %-14s %s" % (k, fmt(c[k])))
    header = [
        "Tolerance profile fitted by `%s --from-envelopes` (docs/calibrate.md," % prog,
        "\"From envelopes\") from the base profile %s (its header comments dropped)," % a.base,
        "on %d envelope file%s: %s." % (len(files), "s" if len(files) > 1 else "",
                                       ", ".join(os.path.basename(f["path"]) for f in files)),
        "Each fitted value: the largest need over their tensors, with the envelope law at",
        "nu = 1 (alpha = %g per file over its tensors, gap G_e = %g); the rest is the base's." %
        (ALPHA, GAP)]
    text = profile_text(base_text, c, notes(need), header)
    report = {"base": a.base, "precision": precision, "alpha": ALPHA, "gap": GAP,
              "coefficients": c,
              "needs": {k: {"value": v, "where": w} for k, (v, w) in need.items()},
              "envelopes": files}
    return text, report
