#!/usr/bin/python3
"""Independent numpy reference for the per-tensor figures of docs/metrics.md.

Written from the definitions alone (no code shared with the C library), so the two can check each
other. Run it with Debian's /usr/bin/python3 (numpy 1.24, h5py 3.7).

Library use:
    tensor_figures(a, b, compare_dtype, tol, a_kind='float'|'int'|'complex') -> dict
    read_tensor(h5py_dataset) -> Tensor  (values promoted exactly, logical dtype applied)
    pair_figures(tensor_a, tensor_b, tol) -> dict (compare dtype per docs/metrics.md)

Command line:
    pc_reference.py check REPORT.json A.h5 B.h5 [--tol-json FILE]
        Recompute the figures of every pass/drift tensor of a paritycheck JSON report and list
        every difference; exit 1 if there is any, 0 otherwise, 2 on usage or I/O errors.
    pc_reference.py figures A.h5 B.h5 --tol-json FILE
        Print the reference figures of every dataset present in both files as JSON.
    pc_reference.py selftest
        Check the fast rounding paths against exact rational arithmetic and hand-computed cases.

A tolerance is a dict with any subset of atol, rtol, max_ulp, max_mismatch_fraction; a missing key
or None means "not set".
"""

import fractions
import json
import math
import sys
from typing import NamedTuple

import numpy as np

# --------------------------------------------------------------------------------------------
# Float formats
# --------------------------------------------------------------------------------------------


class FloatFormat(NamedTuple):
    name: str
    nbits: int
    ebits: int
    mbits: int
    bias: int
    fn: bool  # "finite" variant: no inf, only S.1111.111 is NaN (float8_e4m3fn)

    @property
    def emask(self):
        return (1 << self.ebits) - 1

    @property
    def mmask(self):
        return (1 << self.mbits) - 1

    @property
    def max_pattern(self):
        """Bit pattern (sign clear) of the largest finite value = its ordinal."""
        if self.fn:
            return (1 << (self.nbits - 1)) - 2
        return (self.emask << self.mbits) - 1

    @property
    def over_ordinal(self):
        """Ordinal of +inf / "beyond the range" (one past the largest finite value)."""
        return self.max_pattern + 1

    @property
    def emin(self):
        return 1 - self.bias


FORMATS = {
    'float64': FloatFormat('float64', 64, 11, 52, 1023, False),
    'float32': FloatFormat('float32', 32, 8, 23, 127, False),
    'float16': FloatFormat('float16', 16, 5, 10, 15, False),
    'bfloat16': FloatFormat('bfloat16', 16, 8, 7, 127, False),
    'float8_e4m3fn': FloatFormat('float8_e4m3fn', 8, 4, 3, 7, True),
    'float8_e5m2': FloatFormat('float8_e5m2', 8, 5, 2, 15, False),
}

# Coarseness rank for the compare dtype: higher is finer.
FLOAT_RANK = {'float64': 4, 'float32': 3, 'float16': 2, 'bfloat16': 2,
              'float8_e4m3fn': 1, 'float8_e5m2': 1}

INT_INFO = {  # name -> (bits, signed)
    'int8': (8, True), 'int16': (16, True), 'int32': (32, True), 'int64': (64, True),
    'uint8': (8, False), 'uint16': (16, False), 'uint32': (32, False), 'uint64': (64, False),
    'bool': (1, False),
}

U64_MAX = (1 << 64) - 1


def decode_bits(bits, fmt):
    """Exact float64 values of stored bit patterns (any integer array) of float format `fmt`."""
    if isinstance(fmt, str):
        fmt = FORMATS[fmt]
    bits = np.asarray(bits).astype(np.uint64)
    sign = ((bits >> np.uint64(fmt.nbits - 1)) & np.uint64(1)).astype(bool)
    e = ((bits >> np.uint64(fmt.mbits)) & np.uint64(fmt.emask)).astype(np.int64)
    m = (bits & np.uint64(fmt.mmask)).astype(np.int64)
    # m < 2^52 and m + 2^52 < 2^53: both exact in float64; ldexp by a power of two is exact.
    mf = m.astype(np.float64)
    with np.errstate(over='ignore'):  # exponent all ones overflows for float64; replaced below
        normal = np.ldexp(mf + float(1 << fmt.mbits), (e - fmt.bias - fmt.mbits).astype(np.int32))
    sub = np.ldexp(mf, np.int32(fmt.emin - fmt.mbits))
    val = np.where(e == 0, sub, normal)
    if fmt.fn:
        special = (e == fmt.emask) & (m == fmt.mmask)
        val = np.where(special, np.nan, val)
    else:
        special = e == fmt.emask
        val = np.where(special, np.where(m == 0, np.inf, np.nan), val)
    return np.where(sign, -val, val)


_TABLES = {}


def _positive_table(fmt):
    """Values of the positive patterns 0 .. max_pattern + 1, where the last entry is where the
    next value would lie with an unbounded exponent (max + one ulp of the top binade)."""
    if fmt.name not in _TABLES:
        pats = np.arange(fmt.max_pattern + 2, dtype=np.int64)
        e = pats >> fmt.mbits
        m = pats & fmt.mmask
        mf = m.astype(np.float64)
        normal = np.ldexp(mf + float(1 << fmt.mbits), (e - fmt.bias - fmt.mbits).astype(np.int32))
        sub = np.ldexp(mf, np.int32(fmt.emin - fmt.mbits))
        vals = np.where(e == 0, sub, normal)
        assert np.all(np.diff(vals) > 0)
        _TABLES[fmt.name] = vals
    return _TABLES[fmt.name]


def _ordinal_abs_table(ax, fmt):
    """Ordinal of round(|x|) by nearest with ties to the even pattern, from the sorted table.
    ax: float64 array of non-negative, non-NaN values (inf allowed)."""
    table = _positive_table(fmt)
    last = len(table) - 1  # == over_ordinal
    idx = np.searchsorted(table, ax, side='left')  # table[idx-1] < ax <= table[idx]
    beyond = idx > last
    idx = np.minimum(idx, last)
    hi = table[idx]
    lo = table[np.maximum(idx - 1, 0)]
    mid = (lo + hi) * 0.5  # exact: adjacent values of a format with <= 8 significant bits
    up = ax > mid
    tie = ax == mid
    even_hi = (idx % 2) == 0
    choose_hi = (ax == hi) | up | (tie & even_hi)
    ordv = np.where(choose_hi, idx, idx - 1)
    ordv = np.where(beyond, last, ordv)
    return ordv.astype(np.int64)


def ordinal(x, fmt):
    """Ordinal (int64 array) of round(x) to `fmt` per docs/metrics.md; x: float64 array without
    NaN. +0 and -0 -> 0; beyond the range and +-inf -> +-(max ordinal + 1)."""
    if isinstance(fmt, str):
        fmt = FORMATS[fmt]
    x = np.asarray(x, dtype=np.float64)
    assert not np.isnan(x).any(), "ordinal() of NaN"
    if fmt.name in ('float64', 'float32', 'float16'):
        # numpy's float64 -> float32 (C cast) and float64 -> float16 (npy_double_to_half) both
        # round once, directly from the double, ties to even; overflow gives inf, whose pattern is
        # max + 1. The selftest checks this against exact rational rounding.
        nt, it = {'float64': (np.float64, np.int64), 'float32': (np.float32, np.int32),
                  'float16': (np.float16, np.int16)}[fmt.name]
        with np.errstate(over='ignore'):
            r = x.astype(nt)
        bits = r.view(it).astype(np.int64)
        mag = bits & np.int64((1 << (fmt.nbits - 1)) - 1)
        return np.where(bits < 0, -mag, mag)
    mag = _ordinal_abs_table(np.abs(x), fmt)
    return np.where(np.signbit(x), -mag, mag)


def ordinal_exact(x, fmt):
    """Scalar, slow, exact (fractions) version of ordinal(): the selftest's yardstick."""
    if isinstance(fmt, str):
        fmt = FORMATS[fmt]
    assert not math.isnan(x)
    if x == 0:
        return 0
    sgn = -1 if x < 0 else 1
    if math.isinf(x):
        return sgn * fmt.over_ordinal
    ax = fractions.Fraction(abs(x))
    e = math.frexp(abs(x))[1] - 1  # 2^e <= |x| < 2^(e+1)
    q = max(e, fmt.emin) - fmt.mbits  # quantum of |x|'s binade
    n = round(ax / fractions.Fraction(2) ** q)  # Fraction.__round__: half to even
    # value = n * 2^q; with a carry n may be 2^(mbits+1), the next binade: renormalise.
    if n >= (2 << fmt.mbits):
        n >>= 1
        q += 1
    if n < (1 << fmt.mbits):  # subnormal (or zero)
        assert q == fmt.emin - fmt.mbits
        o = n
    else:
        o = ((q + fmt.mbits - fmt.emin + 1) << fmt.mbits) + (n - (1 << fmt.mbits))
    return sgn * min(o, fmt.over_ordinal)


def round_to(x, fmt):
    """round(x) to `fmt` as float64 (+-inf where beyond the range); NaN stays NaN."""
    if isinstance(fmt, str):
        fmt = FORMATS[fmt]
    x = np.asarray(x, dtype=np.float64)
    nan = np.isnan(x)
    o = ordinal(np.where(nan, 0.0, x), fmt)
    mag = np.abs(o)
    table = _positive_table(fmt) if fmt.nbits <= 16 else None
    if table is not None:
        v = np.where(mag >= fmt.over_ordinal, np.inf, table[np.minimum(mag, fmt.max_pattern)])
    else:
        v = decode_bits(mag.astype(np.uint64), fmt)
    v = np.where(o < 0, -v, v)
    return np.where(nan, np.nan, v)


def representable(x, fmt):
    """Boolean array: x is exactly a value of `fmt` (NaN always; +-inf unless fmt has no inf)."""
    if isinstance(fmt, str):
        fmt = FORMATS[fmt]
    x = np.asarray(x, dtype=np.float64)
    r = round_to(x, fmt)
    ok = (r == x) | np.isnan(x)
    if fmt.fn:
        ok &= ~np.isinf(x)
    return ok


def not_representable_count(x, logical):
    return int(np.count_nonzero(~representable(x, logical)))


def ulp_distance(oa, ob):
    """|oa - ob| of two int64 ordinal arrays as uint64, without wraparound (the true distance is
    below 2^64, so the modular uint64 difference of the larger minus the smaller is exact)."""
    ua = oa.astype(np.uint64)
    ub = ob.astype(np.uint64)
    return np.where(oa >= ob, ua - ub, ub - ua)


def exact_sum_u64(u):
    """Exact Python-int sum of a uint64 array."""
    u = np.asarray(u, dtype=np.uint64).ravel()
    if u.size == 0:
        return 0
    hi = int(np.sum(u >> np.uint64(32), dtype=np.uint64))  # each < 2^32: no overflow below 2^32 terms
    lo = int(np.sum(u & np.uint64(0xFFFFFFFF), dtype=np.uint64))
    return (hi << 32) + lo


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


# --------------------------------------------------------------------------------------------
# Dtypes of a pair
# --------------------------------------------------------------------------------------------


def compare_dtype_of(la, lb):
    """(compare dtype, cross_grid) of two logical dtypes per docs/metrics.md, or (None, False)
    when they are not comparable (complex vs real is handled by the caller)."""
    fa, fb = la in FORMATS, lb in FORMATS
    if fa and fb:
        ra, rb = FLOAT_RANK[la], FLOAT_RANK[lb]
        if ra == rb and la != lb:
            return 'float32', True
        return (la if ra <= rb else lb), False
    if fa and lb in INT_INFO:
        return la, False
    if fb and la in INT_INFO:
        return lb, False
    if la in INT_INFO and lb in INT_INFO:
        return (la if INT_INFO[la][0] >= INT_INFO[lb][0] else lb), False
    return None, False


class Tensor(NamedTuple):
    kind: str        # 'float', 'int', 'complex', 'other'
    stored: str      # stored dtype name ('float32', 'bfloat16', 'int8', 'complex64', ...)
    logical: str     # logical dtype name (component dtype for complex)
    values: object   # numpy array: float64 / Python-int-able ints / complex128; None for 'other'
    shape: tuple


def _float_layout_name(tid):
    """Float format name of an HDF5 float type from its bit layout, or None."""
    size = tid.get_size()
    spos, epos, esize, mpos, msize = tid.get_fields()
    bias = tid.get_ebias()
    for f in FORMATS.values():
        if (size * 8 == f.nbits and spos == f.nbits - 1 and epos == f.mbits and esize == f.ebits
                and mpos == 0 and msize == f.mbits and bias == f.bias):
            return f.name
    return None


def _int_name(tid):
    import h5py
    size = tid.get_size()
    signed = tid.get_sign() == h5py.h5t.SGN_2
    return ('int' if signed else 'uint') + str(size * 8)


def _attr_logical(ds):
    if 'dtype' not in ds.attrs:
        return None
    v = ds.attrs['dtype']
    if isinstance(v, np.ndarray) and v.shape == ():
        v = v[()]
    if isinstance(v, (bytes, np.bytes_)):
        v = bytes(v).decode('utf-8', 'replace')
    if isinstance(v, str) and v in ('bfloat16', 'float16'):
        return v
    return None


def read_float_raw(ds, name):
    """Exact float64 values of a float dataset, decoded from its raw bits (any byte order)."""
    import h5py
    tid = ds.id.get_type()
    fmt = FORMATS[name]
    size = tid.get_size()
    if ds.size == 0:
        return np.zeros(ds.shape, dtype=np.float64)
    buf = np.empty(ds.shape, dtype=np.dtype('u%d' % size))
    ds.id.read(h5py.h5s.ALL, h5py.h5s.ALL, buf, mtype=tid)  # no conversion: the file's bytes
    if size > 1 and tid.get_order() == h5py.h5t.ORDER_BE:
        buf = buf.byteswap()
    return decode_bits(buf, fmt).reshape(ds.shape)


def read_tensor(ds):
    """Classify and read one h5py dataset per docs/metrics.md."""
    import h5py
    tid = ds.id.get_type()
    cls = tid.get_class()
    shape = tuple(ds.shape) if ds.shape is not None else None
    if cls == h5py.h5t.FLOAT:
        name = _float_layout_name(tid)
        if name is None:
            return Tensor('other', 'float?', None, None, shape)
        vals = read_float_raw(ds, name)
        logical = name
        if name in ('float32', 'float64'):
            logical = _attr_logical(ds) or name
        return Tensor('float', name, logical, vals, shape)
    if cls == h5py.h5t.INTEGER:
        name = _int_name(tid)
        vals = ds[()] if ds.size else np.zeros(shape, dtype=ds.dtype)
        return Tensor('int', name, name, np.asarray(vals), shape)
    if cls == h5py.h5t.ENUM and ds.dtype == np.bool_:
        vals = ds[()] if ds.size else np.zeros(shape, dtype=bool)
        return Tensor('int', 'bool', 'bool', np.asarray(vals), shape)
    if cls == h5py.h5t.COMPOUND and tid.get_nmembers() == 2:
        names = [tid.get_member_name(i) for i in range(2)]
        mt = [tid.get_member_type(i) for i in range(2)]
        if (names == [b'r', b'i'] and all(t.get_class() == h5py.h5t.FLOAT for t in mt)):
            comp = [_float_layout_name(t) for t in mt]
            if comp[0] == comp[1] and comp[0] in ('float32', 'float64'):
                vals = ds[()] if ds.size else np.zeros(shape, dtype=np.complex128)
                stored = {'float32': 'complex64', 'float64': 'complex128'}[comp[0]]
                return Tensor('complex', stored, comp[0], np.asarray(vals, dtype=np.complex128),
                              shape)
    return Tensor('other', 'other', None, None, shape)


def pair_figures(ta, tb, tol):
    """Figures of a pair of Tensors, or dict(verdict=...) for non-compared outcomes."""
    if ta.kind == 'other' and tb.kind == 'other':
        return dict(verdict='skipped')
    if ta.kind == 'other' or tb.kind == 'other':
        return dict(verdict='dtype_mismatch')
    if (ta.kind == 'complex') != (tb.kind == 'complex'):
        return dict(verdict='dtype_mismatch')
    if (ta.kind == 'int') != (tb.kind == 'int'):
        return dict(verdict='dtype_mismatch')  # a float and an integer (issue 38)
    if ta.shape != tb.shape:
        return dict(verdict='shape_mismatch')
    cd, cross = compare_dtype_of(ta.logical, tb.logical)
    if ta.kind == 'complex':
        fig = tensor_figures(ta.values, tb.values, cd, tol, 'complex')
    elif ta.kind == 'int' and tb.kind == 'int':
        fig = tensor_figures(ta.values, tb.values, cd, tol, 'int')
    else:
        fa = np.asarray(ta.values).astype(np.float64) if ta.kind == 'int' else ta.values
        fb = np.asarray(tb.values).astype(np.float64) if tb.kind == 'int' else tb.values
        fig = tensor_figures(fa, fb, cd, tol, 'float')
    fig['cross_grid'] = cross
    fig['not_representable_a'] = (not_representable_count(ta.values, ta.logical)
                                  if ta.kind == 'float' and ta.logical != ta.stored else 0)
    fig['not_representable_b'] = (not_representable_count(tb.values, tb.logical)
                                  if tb.kind == 'float' and tb.logical != tb.stored else 0)
    if fig['not_representable_a'] or fig['not_representable_b']:
        return dict(verdict='error')  # a dtype attribute the values contradict (issue 38)
    return fig


# --------------------------------------------------------------------------------------------
# JSON helpers
# --------------------------------------------------------------------------------------------


def to_json_number(x):
    """A float as the report writes it: non-finite values are the strings inf, -inf, nan."""
    if isinstance(x, float):
        if math.isnan(x):
            return 'nan'
        if math.isinf(x):
            return 'inf' if x > 0 else '-inf'
    return x


def from_json_number(x):
    if isinstance(x, str):
        return float(x)  # 'inf', '-inf', 'nan'
    return x


def same_float(x, y):
    """Exact equality with NaN == NaN (any non-finite JSON spelling accepted)."""
    x, y = from_json_number(x), from_json_number(y)
    if x is None or y is None:
        return x is y
    try:
        x, y = float(x), float(y)
    except (TypeError, ValueError):
        return False
    if math.isnan(x) or math.isnan(y):
        return math.isnan(x) and math.isnan(y)
    return x == y


def same_int(x, y):
    """Exact integer equality; a decimal string stands for its integer (for values >= 2^63)."""
    def conv(v):
        if isinstance(v, bool):
            return None
        if isinstance(v, int):
            return v
        if isinstance(v, str) and v.isdigit():
            return int(v)
        if isinstance(v, float) and v.is_integer() and abs(v) < 2 ** 53:
            return int(v)
        return None
    # docs/report-json.md: a count above 2^63 - 1 is written as a double (the nearest one).
    for big, other in ((x, y), (y, x)):
        if isinstance(big, int) and not isinstance(big, bool) and big > (1 << 63) - 1 and \
                isinstance(other, float):
            return float(big) == other
    cx, cy = conv(x), conv(y)
    return cx is not None and cx == cy


def tol_from_report(t):
    """The tolerance dict of a report tensor (missing or null keys: unset)."""
    raw = t.get('tolerance') or {}
    tol = {}
    for k in ('atol', 'rtol', 'max_ulp', 'max_mismatch_fraction'):
        v = raw.get(k)
        if v is not None:
            tol[k] = int(v) if k == 'max_ulp' and not isinstance(v, float) else from_json_number(v)
    return tol


def compare_figures(path, fig, t, mean_slack=1e-15):
    """Differences (list of strings) between reference figures and one report tensor."""
    diffs = []

    def d(field, want, got):
        diffs.append('%s: %s: reference %r, report %r' % (path, field, want, got))

    if fig.get('verdict') != t.get('verdict'):
        d('verdict', fig.get('verdict'), t.get('verdict'))
    if 'count' not in fig:
        return diffs
    for k in ('count', 'mismatches', 'nan_mismatches', 'inf_mismatches', 'max_ulp'):
        if not same_int(fig[k], t.get(k)):
            d(k, fig[k], t.get(k))
    for k in ('not_representable_a', 'not_representable_b'):
        if k in fig and not same_int(fig[k], t.get(k, 0)):
            d(k, fig[k], t.get(k))
    for k in ('max_abs', 'max_rel'):
        if not same_float(fig[k], t.get(k)):
            d(k, fig[k], t.get(k))
    got = from_json_number(t.get('mean_ulp'))
    want = fig['mean_ulp']
    if not isinstance(got, (int, float)) or isinstance(got, bool) or \
            abs(float(got) - want) > mean_slack * abs(want):
        d('mean_ulp', want, got)
    if fig.get('compare_dtype') and t.get('compare_dtype') != fig['compare_dtype']:
        d('compare_dtype', fig['compare_dtype'], t.get('compare_dtype'))
    fw, tw = fig.get('worst'), t.get('worst')
    if fw is None or not isinstance(tw, dict):
        if bool(fw) != bool(tw):
            d('worst', fw, tw)
        return diffs
    if list(tw.get('index', [None])) != fw['index']:
        d('worst.index', fw['index'], tw.get('index'))
    for k in ('a', 'b'):
        want, got = fw[k], tw.get(k)
        if isinstance(want, list):
            ok = isinstance(got, list) and len(got) == 2 and all(
                same_float(x, y) for x, y in zip(want, got))
        else:
            ok = same_float(want, got)
        if not ok:
            d('worst.' + k, want, got)
    for k in ('abs', 'rel'):
        if not same_float(fw[k], tw.get(k)):
            d('worst.' + k, fw[k], tw.get(k))
    if not same_int(fw['ulp'], tw.get('ulp')):
        d('worst.ulp', fw['ulp'], tw.get('ulp'))
    return diffs


# --------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------


def _load_tol_json(path):
    with open(path) as fh:
        return json.load(fh)


def _tol_for(tol_json, path):
    if tol_json is None:
        return None
    if any(k.startswith('/') for k in tol_json):
        return tol_json.get(path, {})
    return tol_json


def cmd_check(argv):
    import h5py
    tol_json = None
    if '--tol-json' in argv:
        i = argv.index('--tol-json')
        tol_json = _load_tol_json(argv[i + 1])
        argv = argv[:i] + argv[i + 2:]
    if len(argv) != 3:
        print('usage: pc_reference.py check REPORT.json A.h5 B.h5 [--tol-json FILE]',
              file=sys.stderr)
        return 2
    with open(argv[0]) as fh:
        report = json.load(fh)
    diffs = []
    checked = 0
    with h5py.File(argv[1], 'r') as fa, h5py.File(argv[2], 'r') as fb:
        for t in report.get('tensors', []):
            if t.get('verdict') not in ('pass', 'drift'):
                continue
            path = t['path']
            tol = _tol_for(tol_json, path)
            if tol is None:
                tol = tol_from_report(t)
            try:
                ta, tb = read_tensor(fa[path]), read_tensor(fb[path])
            except (KeyError, OSError, TypeError) as e:
                diffs.append('%s: cannot read with h5py: %s' % (path, e))
                continue
            fig = pair_figures(ta, tb, tol)
            diffs += compare_figures(path, fig, t)
            checked += 1
    for line in diffs:
        print(line)
    print('pc_reference check: %d tensors checked, %d differences' % (checked, len(diffs)))
    return 1 if diffs else 0


def _walk(f):
    import h5py
    paths = []

    def visit(name, obj):
        if isinstance(obj, h5py.Dataset):
            paths.append('/' + name)
    f.visititems(visit)
    return paths


def cmd_figures(argv):
    import h5py
    tol_json = {}
    if '--tol-json' in argv:
        i = argv.index('--tol-json')
        tol_json = _load_tol_json(argv[i + 1])
        argv = argv[:i] + argv[i + 2:]
    if len(argv) != 2:
        print('usage: pc_reference.py figures A.h5 B.h5 [--tol-json FILE]', file=sys.stderr)
        return 2
    out = {}
    with h5py.File(argv[0], 'r') as fa, h5py.File(argv[1], 'r') as fb:
        for p in _walk(fa):
            if p not in fb:
                continue
            fig = pair_figures(read_tensor(fa[p]), read_tensor(fb[p]), _tol_for(tol_json, p))
            out[p] = {k: (to_json_number(v) if not isinstance(v, dict) else
                          {kk: to_json_number(vv) for kk, vv in v.items()})
                      for k, v in fig.items()}
    json.dump(out, sys.stdout, indent=1)
    print()
    return 0


def _cplx(re, im):
    z = np.empty(len(re), np.complex128)
    z.real, z.imag = re, im
    return z


def selftest():
    """Fast paths against exact rational rounding; figures against hand-computed cases."""
    rng = np.random.default_rng(1234)
    failures = 0
    for fmt in FORMATS.values():
        vals = []
        if fmt.nbits <= 16:
            tab = _positive_table(fmt)
            mids = (tab[:-1] + tab[1:]) * 0.5
            vals += list(tab) + list(mids) + list(np.nextafter(mids, 0)) + \
                list(np.nextafter(mids, np.inf))
        top = float(decode_bits(np.array([fmt.max_pattern]), fmt)[0])
        ulp_top = math.ldexp(1.0, math.frexp(top)[1] - 1 - fmt.mbits)
        sub = math.ldexp(1.0, fmt.emin - fmt.mbits)
        vals += [top, top + ulp_top / 2, np.nextafter(top + ulp_top / 2, 0),
                 np.nextafter(top + ulp_top / 2, np.inf), top + ulp_top, math.inf, sub, sub / 2,
                 np.nextafter(sub / 2, 1), sub * 1.5, 5e-324, 1.0, 1.0 + 2.0 ** -fmt.mbits / 2,
                 1.0 + 3 * 2.0 ** -fmt.mbits / 2, 1.7976931348623157e308]
        # random doubles of every magnitude, and random midpoints of the format
        with np.errstate(over='ignore'):
            r = np.ldexp(rng.random(4000) + 0.5, rng.integers(fmt.emin - fmt.mbits - 3,
                                                              fmt.bias + 3, 4000))
        vals += list(r)
        if fmt.nbits >= 32:
            bits = rng.integers(0, fmt.max_pattern, 4000, dtype=np.int64).astype(np.uint64)
            x = decode_bits(bits, fmt)
            nx = decode_bits(bits + np.uint64(1), fmt)
            m = (x + nx) * 0.5 if fmt.nbits == 32 else x
            vals += list(m) + list(np.nextafter(m, 0)) + list(np.nextafter(m, np.inf))
        v = np.array(vals, dtype=np.float64)
        v = np.concatenate([v, -v])
        fast = ordinal(v, fmt)
        for x, o in zip(v, fast):
            e = ordinal_exact(float(x), fmt)
            if e != int(o):
                failures += 1
                if failures < 20:
                    print('ordinal mismatch %s x=%r fast=%d exact=%d' % (fmt.name, x, o, e))
    # decode/ordinal consistency: every pattern's ordinal is the pattern
    for fmt in FORMATS.values():
        if fmt.nbits > 16:
            continue
        pats = np.arange(fmt.max_pattern + 1)
        if not np.array_equal(ordinal(decode_bits(pats, fmt), fmt), pats):
            failures += 1
            print('pattern ordinal mismatch', fmt.name)

    def expect(label, got, want):
        nonlocal failures
        if got != want:
            failures += 1
            print('FAIL %s: got %r want %r' % (label, got, want))

    # hand-computed figures
    f32max = float(np.finfo(np.float32).max)
    fg = tensor_figures([f32max, 1.0, 0.0], [-f32max, 1.0, -0.0], 'float32', {})
    expect('f32 max vs -max ulp', fg['max_ulp'], 2 * 0x7F7FFFFF)
    expect('f32 mismatches', fg['mismatches'], 1)
    fg = tensor_figures([-np.inf], [np.inf], 'float64', {})
    expect('f64 -inf vs inf ulp', fg['max_ulp'], 2 * 0x7FF0000000000000)
    expect('f64 inf mm', fg['inf_mismatches'], 1)
    fg = tensor_figures([1.0, np.nan, np.nan, 2.0], [1.0, np.nan, 3.0, 2.5], 'float32',
                       {'atol': 0.5})
    expect('nan count', (fg['nan_mismatches'], fg['mismatches'], fg['max_abs']), (1, 1, 0.5))
    expect('nan worst', fg['worst']['index'], [2])
    expect('mean over non-nan', fg['mean_ulp'], (1 << 21) / 3)
    fg = tensor_figures([448.0, 464.0, 465.0, np.inf], [448.0, 448.0, 448.0, 448.0],
                        'float8_e4m3fn', {'max_ulp': 1})
    expect('e4m3 ulps', (fg['max_ulp'], fg['ulp_sum'], fg['inf_mismatches'], fg['mismatches']),
           (1, 2, 1, 1))
    fg = tensor_figures(np.array([-2 ** 63, 0], dtype=np.int64),
                        np.array([2 ** 63 - 1, 0], dtype=np.int64), 'int64', {}, 'int')
    expect('i64 extremes', (fg['max_ulp'], fg['max_abs'], fg['max_rel']),
           (U64_MAX, 18446744073709551616.0, 2.0))
    fg = tensor_figures(np.array([-2 ** 63], dtype=object), np.array([U64_MAX], dtype=object),
                        'int64', {}, 'int')
    expect('int saturation', fg['max_ulp'], U64_MAX)
    fg = tensor_figures([0.0, 1.0], [1e-30, 1.0 + 2 ** -52], 'float64', {'rtol': 1e-15})
    expect('rel a=0', (fg['max_rel'], fg['mismatches'], fg['worst']['index']), (math.inf, 1, [0]))
    fg = tensor_figures([1 + 2j, complex(np.inf, 1)], [1 + 2j, complex(np.inf, 2)], 'float64', {},
                        'complex')
    # the matched inf adds nothing, and rel is relative to the finite component 1: 1 / 1
    expect('complex matched inf', (fg['max_abs'], fg['max_rel'], fg['inf_mismatches']),
           (1.0, 1.0, 0))
    fg = tensor_figures([3 + 4j], [0j], 'float32', {}, 'complex')
    expect('complex abs', (fg['max_abs'], fg['max_rel']), (5.0, 1.0))
    # double rounding: 1 + 2^-8 + 2^-40 rounds to 1 + 2^-7 in bfloat16, not through float32
    expect('bf16 direct', int(ordinal([1 + 2 ** -8 + 2 ** -40], 'bfloat16')[0]),
           0x3F81)
    expect('bf16 tie', int(ordinal([1 + 2 ** -8], 'bfloat16')[0]), 0x3F80)
    expect('f16 direct', int(ordinal([1 + 2 ** -11 + 2 ** -40], 'float16')[0]), 0x3C01)
    expect('e5m2 overflow', int(ordinal([57344.0 + 4096.0], 'float8_e5m2')[0]), 0x7C)
    expect('e5m2 below overflow', int(ordinal([57344.0 + 4095.0], 'float8_e5m2')[0]), 0x7B)
    expect('e4m3 -464', int(ordinal([-464.0], 'float8_e4m3fn')[0]), -0x7E)
    expect('representable', list(representable([1.0, 1 + 2 ** -10, np.inf, np.nan, 70000.0],
                                               'float16')), [True, True, True, True, False])
    expect('e4m3 inf not representable', bool(representable([np.inf], 'float8_e4m3fn')[0]), False)
    # chunking changes nothing; the vectorised integer path equals the Python-int one
    x = rng.standard_normal(1000)
    y = x * (1 + 1e-7 * rng.standard_normal(1000))
    y[[17, 400]] = [np.nan, np.inf]
    x[[300, 999]] = [np.nan, -np.inf]
    y[::97] = x[::97] + 0.5
    for kind, xa, ya, cd in (('float', x, y, 'bfloat16'), ('float', x[:500], x[:500] + 1e-3,
                                                              'float32'),
                             ('complex', _cplx(x[:400], x[400:800]), _cplx(y[:400], y[400:800]),
                              'float32')):
        for tol in ({}, {'rtol': 1e-6, 'max_mismatch_fraction': 0.5}):
            whole = tensor_figures(xa, ya, cd, tol, kind)
            for c in (1, 7, 333):
                part = tensor_figures(xa, ya, cd, tol, kind, chunk=c)
                same = all(part[k] == whole[k] or (k == 'worst' and json.dumps(part[k]) ==
                                                   json.dumps(whole[k])) for k in whole)
                expect('chunk %d %s %s' % (c, kind, cd), same, True)
    ia = rng.integers(-1000, 1000, 300)
    ib = ia + rng.integers(-3, 4, 300)
    global _INT_FAST
    fast = tensor_figures(ia, ib, 'int64', {'atol': 1.0}, 'int')
    _INT_FAST = False
    slow = tensor_figures(ia, ib, 'int64', {'atol': 1.0}, 'int')
    _INT_FAST = True
    expect('int fast == slow', fast, slow)
    print('selftest: %s' % ('ok' if failures == 0 else '%d failures' % failures))
    return 1 if failures else 0


def main(argv):
    if len(argv) >= 1 and argv[0] == 'check':
        return cmd_check(argv[1:])
    if len(argv) >= 1 and argv[0] == 'figures':
        return cmd_figures(argv[1:])
    if len(argv) == 1 and argv[0] == 'selftest':
        return selftest()
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
