"""Float formats of the numpy reference (pc_reference.py): their bit layouts, exact values of
stored bit patterns, the ordinal of a value rounded to a format (docs/metrics.md), rounding,
representability and ULP distances without wraparound."""

import fractions
import math
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
