"""The numpy reference's self-test (pc_reference.py selftest): the fast rounding paths against
exact rational arithmetic, and figures against cases computed by hand."""

import json
import math

import numpy as np

import ref_figures
from ref_figures import tensor_figures
from ref_float import (FORMATS, U64_MAX, _positive_table, decode_bits, ordinal, ordinal_exact,
                       representable)


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
    fast = tensor_figures(ia, ib, 'int64', {'atol': 1.0}, 'int')
    ref_figures._INT_FAST = False
    slow = tensor_figures(ia, ib, 'int64', {'atol': 1.0}, 'int')
    ref_figures._INT_FAST = True
    expect('int fast == slow', fast, slow)
    print('selftest: %s' % ('ok' if failures == 0 else '%d failures' % failures))
    return 1 if failures else 0
