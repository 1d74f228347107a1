"""Per-tensor figures of the numpy reference (pc_reference.py, docs/metrics.md): whether one
element meets a tolerance, the per-element quantities of float, complex and integer pairs, and
tensor_figures, which folds them into a tensor's figures, worst element and verdict."""

import fractions
import math

import numpy as np

from ref_float import FORMATS, U64_MAX, exact_sum_u64, ordinal, ulp_distance

# --------------------------------------------------------------------------------------------
# Tolerance
# --------------------------------------------------------------------------------------------


def _tol_get(tol, key):
    if not tol:
        return None
    v = tol.get(key)
    return v


def _mmf(tol):
    v = _tol_get(tol, 'max_mismatch_fraction')
    return 0.0 if v is None else float(v)


def _criteria(tol, absv, absa, ulp):
    """Element passes a set criterion: abs <= atol OR abs <= rtol*|a| OR ulp <= max_ulp."""
    ok = np.zeros(absv.shape, dtype=bool)
    atol = _tol_get(tol, 'atol')
    rtol = _tol_get(tol, 'rtol')
    mu = _tol_get(tol, 'max_ulp')
    if atol is not None:
        ok |= absv <= float(atol)
    if rtol is not None:
        ok |= absv <= float(rtol) * absa
    if mu is not None:
        mu = int(mu)
        if ulp.dtype == object:
            ok |= np.array([int(u) <= mu for u in ulp.ravel()], dtype=bool).reshape(ulp.shape)
        else:
            ok |= ulp <= np.uint64(min(mu, U64_MAX))
    return ok


# --------------------------------------------------------------------------------------------
# Per-element quantities and per-tensor figures
# --------------------------------------------------------------------------------------------


def _float_elements(a, b, fmt):
    a = np.asarray(a, dtype=np.float64).ravel()
    b = np.asarray(b, dtype=np.float64).ravel()
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    nan_mm = nan_a ^ nan_b
    both_nan = nan_a & nan_b
    num = ~nan_a & ~nan_b
    inf_mm = num & (np.isinf(a) | np.isinf(b)) & (a != b)
    equal = both_nan | (num & (a == b))
    with np.errstate(invalid='ignore', over='ignore', divide='ignore'):
        absv = np.abs(b - a)
        absa = np.abs(a)
        rel = np.where(a == 0, np.where(b == 0, 0.0, np.inf), absv / np.where(a == 0, 1.0, absa))
    absv = np.where(inf_mm, np.inf, absv)
    rel = np.where(inf_mm, np.inf, rel)
    absv = np.where(equal | nan_mm, 0.0, absv)
    rel = np.where(equal | nan_mm, 0.0, rel)
    oa = ordinal(np.where(num, a, 0.0), fmt)
    ob = ordinal(np.where(num, b, 0.0), fmt)
    ulp = np.where(num, ulp_distance(oa, ob), np.uint64(0))
    return dict(nan_mm=nan_mm, inf_mm=inf_mm, equal=equal, abs=absv, rel=rel, ulp=ulp,
                absa=np.where(np.isnan(a), 0.0, absa), wa=a, wb=b)


def _complex_elements(a, b, fmt):
    a = np.asarray(a, dtype=np.complex128).ravel()
    b = np.asarray(b, dtype=np.complex128).ravel()
    ar, ai, br, bi = a.real.copy(), a.imag.copy(), b.real.copy(), b.imag.copy()
    nan_a = np.isnan(ar) | np.isnan(ai)
    nan_b = np.isnan(br) | np.isnan(bi)
    nan_mm = nan_a ^ nan_b
    both_nan = nan_a & nan_b
    num = ~nan_a & ~nan_b

    def comp_inf_mm(x, y):
        return (np.isinf(x) | np.isinf(y)) & (x != y)

    inf_mm = num & (comp_inf_mm(ar, br) | comp_inf_mm(ai, bi))
    equal = both_nan | (num & (ar == br) & (ai == bi))
    with np.errstate(invalid='ignore', over='ignore', divide='ignore'):
        # A matched component (same value, the same inf included) contributes 0.
        dr = np.where(ar == br, 0.0, br - ar)
        di = np.where(ai == bi, 0.0, bi - ai)
        absv = np.hypot(dr, di)
        # rel and the rtol test scale by the modulus of a's finite components: an inf both
        # sides match must not hide the other component's error (issue 30).
        moda = np.hypot(np.where(np.isinf(ar), 0.0, ar), np.where(np.isinf(ai), 0.0, ai))
        bzero = (br == 0) & (bi == 0)
        rel = np.where(moda == 0, np.where(bzero, 0.0, np.inf),
                       absv / np.where(moda == 0, 1.0, moda))
    absv = np.where(inf_mm, np.inf, absv)
    rel = np.where(inf_mm, np.inf, rel)
    absv = np.where(equal | nan_mm, 0.0, absv)
    rel = np.where(equal | nan_mm, 0.0, rel)
    z = lambda v: np.where(num, np.where(np.isnan(v), 0.0, v), 0.0)
    ur = ulp_distance(ordinal(z(ar), fmt), ordinal(z(br), fmt))
    ui = ulp_distance(ordinal(z(ai), fmt), ordinal(z(bi), fmt))
    ulp = np.where(num, np.maximum(ur, ui), np.uint64(0))
    wa = np.stack([ar, ai], axis=-1)
    wb = np.stack([br, bi], axis=-1)
    return dict(nan_mm=nan_mm, inf_mm=inf_mm, equal=equal, abs=absv, rel=rel, ulp=ulp,
                absa=np.where(np.isnan(moda), 0.0, moda), wa=wa, wb=wb)


_INT_FAST = True  # the selftest turns it off to compare both paths


def _int_elements(a, b):
    a = np.asarray(a).ravel()
    b = np.asarray(b).ravel()
    n = a.size
    lim = 1 << 62
    if _INT_FAST and n and all(-lim <= int(v) <= lim for v in (a.min(), a.max(), b.min(), b.max())):
        # every difference fits an int64: vectorised, still exact
        ai = a.astype(np.int64)
        bi = b.astype(np.int64)
        d = np.abs(bi - ai)
        absv = d.astype(np.float64)  # rounded to nearest, as C's (double) conversion
        absa = np.abs(ai.astype(np.float64))
        with np.errstate(divide='ignore', invalid='ignore'):
            rel = np.where(ai == 0, np.where(bi == 0, 0.0, np.inf),
                           absv / np.where(ai == 0, 1.0, absa))
        ulp = d.astype(np.uint64)
        wa, wb = ai.astype(np.float64), bi.astype(np.float64)
        equal = d == 0
    else:
        # Python ints: int64 vs uint64 extremes, |b - a| up to 2^64 - 1 + 2^63
        av = [int(v) for v in a]
        bv = [int(v) for v in b]
        dl = [abs(y - x) for x, y in zip(av, bv)]
        absv = np.array([float(v) for v in dl], dtype=np.float64)
        absa = np.array([abs(float(x)) for x in av], dtype=np.float64)
        rel = np.zeros(n)
        for k in range(n):
            if av[k] == 0:
                rel[k] = 0.0 if bv[k] == 0 else math.inf
            else:
                rel[k] = absv[k] / absa[k]
        ulp = np.empty(n, dtype=object)
        for k in range(n):
            ulp[k] = min(dl[k], U64_MAX)
        wa = np.array([float(x) for x in av])
        wb = np.array([float(x) for x in bv])
        equal = np.array([v == 0 for v in dl], dtype=bool)
    false = np.zeros(n, dtype=bool)
    return dict(nan_mm=false, inf_mm=false.copy(), equal=equal, abs=absv, rel=rel, ulp=ulp,
                absa=absa, wa=wa, wb=wb)


def _elements(a, b, compare_dtype, a_kind):
    if a_kind == 'float':
        return _float_elements(a, b, FORMATS[compare_dtype])
    if a_kind == 'complex':
        return _complex_elements(a, b, FORMATS[compare_dtype])
    if a_kind == 'int':
        return _int_elements(a, b)
    raise ValueError(a_kind)


def tensor_figures(a, b, compare_dtype, tol, a_kind='float', chunk=1 << 22):
    """Figures of docs/metrics.md for one tensor pair.

    a, b: arrays of the same shape holding the stored values promoted exactly (float64 for
      'float', complex128 for 'complex', any integer/bool dtype for 'int'). For an integer-vs-float
      pair pass the integer side converted to float64 and a_kind='float'.
    compare_dtype: a float format name (component dtype for complex), ignored for 'int'.
    tol: dict with any of atol, rtol, max_ulp, max_mismatch_fraction (missing/None: unset).
    chunk: elements per pass, to bound memory on large dumps (figures do not depend on it).
    Returns a dict of plain Python values (floats may be inf; worst a/b may be NaN)."""
    a = np.asarray(a)
    b = np.asarray(b)
    assert a.shape == b.shape, (a.shape, b.shape)
    shape = a.shape
    if a_kind != 'complex' and (np.iscomplexobj(a) or np.iscomplexobj(b)):
        raise TypeError("complex values need a_kind='complex'")
    af, bf = a.reshape(-1), b.reshape(-1)
    n = int(a.size)
    mismatches = nan_mm = inf_mm = nkeep = 0
    max_abs = max_rel = 0.0
    max_ulp = ulp_sum = 0
    first_special = None       # flat index of the first nan/inf mismatch
    best_mm = (-1.0, None)     # (abs, flat) of the largest-abs mismatch, first on ties
    best_all = (-1.0, None)    # (abs, flat) of the largest-abs element, first on ties
    for lo in range(0, n, max(1, int(chunk))):
        el = _elements(af[lo:lo + chunk], bf[lo:lo + chunk], compare_dtype, a_kind)
        crit = _criteria(tol, el['abs'], el['absa'], el['ulp'])
        special = el['nan_mm'] | el['inf_mm']
        mism = ~(el['equal'] | (~special & crit))
        keep = ~el['nan_mm']  # elements taking part in the maxima and the mean
        mismatches += int(np.count_nonzero(mism))
        nan_mm += int(np.count_nonzero(el['nan_mm']))
        inf_mm += int(np.count_nonzero(el['inf_mm']))
        k = int(np.count_nonzero(keep))
        if k:
            nkeep += k
            max_abs = max(max_abs, float(np.max(el['abs'][keep])))
            max_rel = max(max_rel, float(np.max(el['rel'][keep])))
            ulps = el['ulp'][keep]
            if ulps.dtype == object:
                max_ulp = max(max_ulp, int(max(ulps)))
                ulp_sum += int(sum(int(u) for u in ulps))
            else:
                max_ulp = max(max_ulp, int(np.max(ulps)))
                ulp_sum += exact_sum_u64(ulps)
        if first_special is None and special.any():
            first_special = lo + int(np.argmax(special))
        if mism.any():
            i = int(np.argmax(np.where(mism, el['abs'], -1.0)))
            if float(el['abs'][i]) > best_mm[0]:
                best_mm = (float(el['abs'][i]), lo + i)
        if len(el['abs']):
            i = int(np.argmax(el['abs']))
            if float(el['abs'][i]) > best_all[0]:
                best_all = (float(el['abs'][i]), lo + i)
    out = dict(count=n, mismatches=mismatches, nan_mismatches=nan_mm, inf_mismatches=inf_mm,
               max_abs=max_abs, max_rel=max_rel, max_ulp=max_ulp, ulp_sum=ulp_sum,
               ulp_terms=nkeep,
               mean_ulp=float(fractions.Fraction(ulp_sum, nkeep)) if nkeep else 0.0)
    if n:
        if first_special is not None:
            w = first_special
        elif best_mm[1] is not None:
            w = best_mm[1]
        else:
            w = best_all[1]
        el = _elements(af[w:w + 1], bf[w:w + 1], compare_dtype, a_kind)
        idx = [int(i) for i in np.unravel_index(w, shape)] if shape else []
        wa, wb = el['wa'][0], el['wb'][0]
        if a_kind == 'complex':
            wa, wb = [float(wa[0]), float(wa[1])], [float(wb[0]), float(wb[1])]
        else:
            wa, wb = float(wa), float(wb)
        # A nan mismatch has no distance: metrics.md gives it abs = rel = NaN (and ulp 0).
        nan_w = bool(el['nan_mm'][0])
        out['worst'] = dict(index=idx, flat=w, a=wa, b=wb,
                            abs=math.nan if nan_w else float(el['abs'][0]),
                            rel=math.nan if nan_w else float(el['rel'][0]), ulp=int(el['ulp'][0]))
    ok = nan_mm == 0 and inf_mm == 0
    if ok and n:
        ok = mismatches / n <= _mmf(tol)  # a double division, as the C code's
    out['verdict'] = 'pass' if ok else 'drift'
    out['compare_dtype'] = compare_dtype
    return out
