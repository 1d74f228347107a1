#!/usr/bin/python3
"""Generate the HDF5 test fixtures of paritycheck and their expected figures.

    /usr/bin/python3 tests/gen/make_fixtures.py OUTDIR

Everything is deterministic (fixed seeds, fixed values). The expected figures in
OUTDIR/expected.json are computed by tests/oracle/pc_reference.py (numpy, docs/metrics.md) from the same
in-memory arrays that are written, before writing: nothing is read back from HDF5 and nothing comes
from the C program.

expected.json:
  tolerances: {file, spec}      the tolerance file the CLI tests pass with -t (tests/cli/) and its
                                content, which STRICT_TOLERANCES here must equal
  pairs: {name: {a, b, exit, verdict, order, tensors: {path: expectation}}}
    order: the expected report order of the tensors that appear (None: not checked)
    expectation: {verdict, dtype_a, dtype_b, compare_dtype, tolerance, count, mismatches, ...,
                  worst: {index, a, b, abs, rel, ulp}} for compared tensors;
                 {verdict, message_contains} for error/skipped/...;
                 {either: [outcome, ...]} where the outcome is left to the implementation, each
                 outcome "absent", a verdict name, or "same_as:/path" (compared like that tensor).
  Non-finite numbers are the strings "inf", "-inf", "nan", as in paritycheck's JSON report.
"""

import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'oracle'))
import pc_reference as ref  # noqa: E402
import tolerance_model as tm  # noqa: E402

import h5py  # noqa: E402

# tests/cli/strict.yaml, as data. test_cli.py checks the two are the same.
STRICT_TOLERANCES = {
    'version': 1,
    'defaults': {
        'float64': {'atol': 1.0e-12, 'rtol': None, 'max_ulp': None, 'max_mismatch_fraction': 0.0},
        'float32': {'atol': None, 'rtol': 1.0e-6, 'max_ulp': 4, 'max_mismatch_fraction': 0.0},
        'float16': {'atol': 1.0e-4, 'rtol': None, 'max_ulp': 2, 'max_mismatch_fraction': 0.0},
        'bfloat16': {'atol': None, 'rtol': 8.0e-3, 'max_ulp': None, 'max_mismatch_fraction': 0.0},
        'float8_e4m3fn': {'atol': None, 'rtol': None, 'max_ulp': 1, 'max_mismatch_fraction': 0.0},
        'float8_e5m2': {'atol': 0.25, 'rtol': None, 'max_ulp': None, 'max_mismatch_fraction': 0.0},
        'integer': {'atol': 1.0, 'rtol': None, 'max_ulp': None, 'max_mismatch_fraction': 0.0},
    },
    'rules': [
        {'match': '/f16_be', 'float16': {'max_ulp': 16}},
        {'match': '/f32_be', 'float32': {'max_mismatch_fraction': 0.25}},
        {'match': '/big3d', 'float32': {'max_mismatch_fraction': 0.05}},
    ],
}
TOLERANCE_FILE = 'strict.yaml'

CRITERIA = ('atol', 'rtol', 'max_ulp', 'max_mismatch_fraction')


def resolve_tolerance(spec, path, compare_dtype):
    """The element criteria one tensor gets from the tolerance document `spec`, by the one
    Python resolution (tests/oracle/tolerance_model.py)."""
    raw = tm.resolve_raw(tm.spec_layers(spec, path), compare_dtype)
    return {k: raw[k] for k in CRITERIA if raw.get(k) is not None}


# --------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------


def custom_float_type(name):
    """HDF5 float type of bfloat16 / float8 with the layouts of docs/metrics.md (little endian)."""
    tid = h5py.h5t.IEEE_F16LE.copy()
    if name == 'bfloat16':
        tid.set_fields(15, 7, 8, 0, 7)
        tid.set_ebias(127)
    elif name == 'float8_e4m3fn':
        tid.set_fields(7, 3, 4, 0, 3)
        tid.set_ebias(7)
        tid.set_precision(8)
        tid.set_size(1)
    elif name == 'float8_e5m2':
        tid.set_fields(7, 2, 5, 0, 2)
        tid.set_ebias(15)
        tid.set_precision(8)
        tid.set_size(1)
    else:
        raise ValueError(name)
    return tid


class Side:
    """What was written to one file: path -> pc_reference.Tensor (exact in-memory values)."""

    def __init__(self, h5file):
        self.f = h5file
        self.t = {}

    def native(self, path, arr, attrs=None, **kw):
        """A dataset of a dtype h5py maps natively (floats of either byte order, ints, bool,
        complex)."""
        arr = np.asarray(arr)
        ds = self.f.create_dataset(path, data=arr, **kw)
        logical = None
        for k, v in (attrs or {}).items():
            ds.attrs[k] = v
            if k == 'dtype':
                logical = v.decode() if isinstance(v, bytes) else str(v)
        dt = arr.dtype
        if dt.kind == 'f':
            stored = {2: 'float16', 4: 'float32', 8: 'float64'}[dt.itemsize]
            vals = arr.astype(np.float64)  # exact
            self.t[path] = ref.Tensor('float', stored, logical or stored, vals, arr.shape)
        elif dt.kind == 'c':
            stored = {8: 'complex64', 16: 'complex128'}[dt.itemsize]
            comp = {8: 'float32', 16: 'float64'}[dt.itemsize]
            self.t[path] = ref.Tensor('complex', stored, comp, arr.astype(np.complex128),
                                      arr.shape)
        elif dt.kind == 'b':
            self.t[path] = ref.Tensor('int', 'bool', 'bool', arr, arr.shape)
        elif dt.kind in 'iu':
            name = ('int' if dt.kind == 'i' else 'uint') + str(8 * dt.itemsize)
            self.t[path] = ref.Tensor('int', name, name, arr, arr.shape)
        else:
            self.t[path] = ref.Tensor('other', 'other', None, None, arr.shape)
        return ds

    def custom(self, path, bits, name):
        """A bfloat16 / float8 dataset written as raw bit patterns with a custom float type."""
        bits = np.ascontiguousarray(bits, dtype=np.uint16 if name == 'bfloat16' else np.uint8)
        tid = custom_float_type(name)
        space = h5py.h5s.create_simple(bits.shape)
        grp, _, leaf = path.rpartition('/')
        parent = self.f[grp or '/']
        dsid = h5py.h5d.create(parent.id, leaf.encode(), tid, space)
        dsid.write(h5py.h5s.ALL, h5py.h5s.ALL, bits, mtype=tid)
        vals = ref.decode_bits(bits, name)
        self.t[path] = ref.Tensor('float', name, name, vals, bits.shape)

    def other(self, path, ds_maker):
        ds_maker(self.f)
        self.t[path] = ref.Tensor('other', 'other', None, None, None)


def f16_from_bits(bits):
    return np.asarray(bits, dtype=np.uint16).view(np.float16)


def f32_from_bits(bits):
    return np.asarray(bits, dtype=np.uint32).view(np.float32)


# --------------------------------------------------------------------------------------------
# Expectations
# --------------------------------------------------------------------------------------------


def jsonable(x):
    if isinstance(x, dict):
        return {k: jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, (np.floating,)):
        x = float(x)
    if isinstance(x, (np.integer,)):
        x = int(x)
    return ref.to_json_number(x)


def expect_pair(path, ta, tb, spec):
    """Expected report entry of a dataset present in both files."""
    out = ref.pair_figures(ta, tb, None)  # first pass: verdict class and compare dtype
    if 'count' not in out:
        return {'verdict': out['verdict']}
    cd = out['compare_dtype']
    tol = resolve_tolerance(spec, path, cd)
    fig = ref.pair_figures(ta, tb, tol)
    e = {k: fig[k] for k in ('verdict', 'compare_dtype', 'count', 'mismatches', 'nan_mismatches',
                             'inf_mismatches', 'max_abs', 'max_rel', 'max_ulp', 'mean_ulp',
                             'not_representable_a', 'not_representable_b')}
    e['ulp_sum'] = str(fig['ulp_sum'])
    e['cross_grid'] = fig['cross_grid']
    e['dtype_a'] = ta.stored if ta.kind == 'complex' else ta.logical
    e['dtype_b'] = tb.stored if tb.kind == 'complex' else tb.logical
    e['shape'] = list(ta.shape)
    e['tolerance'] = tol
    if 'worst' in fig:
        w = dict(fig['worst'])
        del w['flat']
        e['worst'] = w
    return e


def expect_file_pair(side_a, side_b, spec, order=None, overrides=None):
    tensors = {}
    for p, ta in side_a.t.items():
        if p in side_b.t:
            tensors[p] = expect_pair(p, ta, side_b.t[p], spec)
        else:
            tensors[p] = {'verdict': 'missing_in_b'}
    for p in side_b.t:
        if p not in side_a.t:
            tensors[p] = {'verdict': 'missing_in_a'}
    for p, v in (overrides or {}).items():
        tensors[p] = v
    verdicts = [t['verdict'] for t in tensors.values() if 'verdict' in t]
    if 'error' in verdicts:
        run = 'error'
    elif any(v not in ('pass', 'skipped') for v in verdicts):
        run = 'drift'
    else:
        run = 'pass'
    return {'verdict': run, 'exit': {'pass': 0, 'drift': 1, 'error': 2}[run],
            'order': order, 'tensors': tensors}


# --------------------------------------------------------------------------------------------
# Fixture contents
# --------------------------------------------------------------------------------------------

F32MAX = float(np.finfo(np.float32).max)
F64MAX = float(np.finfo(np.float64).max)
INF, NAN = np.inf, np.nan


def drift(rng, x, rel):
    return x * (1.0 + rel * rng.standard_normal(x.shape))


def make_dtypes(outdir, spec):
    rng = np.random.default_rng(20240601)
    fa = h5py.File(os.path.join(outdir, 'dtypes_a.h5'), 'w')
    fb = h5py.File(os.path.join(outdir, 'dtypes_b.h5'), 'w')
    A, B = Side(fa), Side(fb)

    # float64, (4, 6): edges in the first two rows, random drift after. The inf mismatch at
    # [1, 2] comes before the nan mismatch at [1, 5]: worst = the first of them.
    a = [1.0, -2.5, 3.0e10, 1e-300, 0.0, 5e-324,
         INF, -INF, INF, F64MAX, NAN, NAN]
    b = [1.0 + 2 ** -52, -2.5 - 1e-9, 3.0e10 + 1e-3, -1e-300, -0.0, 1e-323,
         INF, -INF, 1e308, -F64MAX, NAN, 1.0]
    r = rng.standard_normal(12)
    a64 = np.array(a + list(r)).reshape(4, 6)
    b64 = np.array(b + list(r + np.array([0, 1e-13, -5e-13, 2e-12, 0, 3e-11] * 2))).reshape(4, 6)
    A.native('/f64', a64)
    B.native('/f64', b64)

    # float32, (30,): the nan mismatch at [3] comes before the inf mismatch at [7].
    sub = float(f32_from_bits([1])[0])
    a = [F32MAX, sub, 0.0, NAN, 1.0, -0.0, INF, INF, -INF, NAN, 1e-30, 65504.0]
    b = [-F32MAX, -sub, sub, 0.0, 1.0 + 2 ** -23, 0.0, INF, F32MAX, -INF, NAN, -1e-30, 65520.0]
    r = rng.standard_normal(18).astype(np.float32)
    rb = (r * np.float32(1 + 3e-7)).astype(np.float32)
    rb[::5] = np.nextafter(r[::5], np.float32(10))
    A.native('/f32', np.concatenate([np.array(a, np.float32), r]))
    B.native('/f32', np.concatenate([np.array(b, np.float32), rb]))

    # float16, (5, 4): NaNs with different payloads (equal), 65504 vs inf, subnormals.
    a = f16_from_bits([0x7E00, 0x7BFF, 0x0001, 0x8001, 0x3C00, 0x0000, 0xFC00, 0x7C00,
                       0x3C01, 0x4000, 0x0400, 0x03FF, 0x7E00, 0xC000, 0x5640, 0x1000,
                       0x2E66, 0xB800, 0x7BFF, 0x0000])
    b = f16_from_bits([0x7C01, 0x7C00, 0x0000, 0x0001, 0x3C02, 0x8000, 0xFC00, 0x7C00,
                       0x3C00, 0x4001, 0x03FF, 0x0400, 0x3C00, 0xC003, 0x5641, 0x1005,
                       0x2E68, 0x3800, 0xFBFF, 0x0002])
    A.native('/f16', a.reshape(5, 4))
    B.native('/f16', b.reshape(5, 4))

    # bfloat16 stored as an HDF5 custom float (raw bits).
    a = [0x3F80, 0x7F7F, 0x0001, 0x7FC0, 0x7F80, 0xFF80, 0x4049, 0x0000,
         0x3F80, 0xC2F7, 0x7FC0, 0x0080, 0x3DCC, 0x4780, 0x8000, 0x447A]
    b = [0x3F81, 0xFF7F, 0x8001, 0x7FC1, 0x7F80, 0x7F80, 0x4048, 0x8000,
         0x7FC0, 0xC2F8, 0x3F80, 0x007F, 0x3DCD, 0x4781, 0x0001, 0x4480]
    A.custom('/bf16', np.array(a, np.uint16).reshape(2, 8), 'bfloat16')
    B.custom('/bf16', np.array(b, np.uint16).reshape(2, 8), 'bfloat16')

    # float32 holding bfloat16 values (attribute dtype="bfloat16", variable-length string).
    # A: one value not representable in bfloat16; B: two (one beyond bfloat16's range).
    bf = lambda v: float(ref.decode_bits([v], 'bfloat16')[0])  # noqa: E731
    a = [1.0, bf(0x3F81), 1.0 + 2 ** -10, bf(0x7F7F), 2.0, -3.0, 0.0, bf(0x0001), 100.0, 1.0]
    b = [bf(0x3F81), bf(0x3F81), 1.0, F32MAX, 2.0 + 2 ** -6, -3.0, 1e-30, bf(0x0002), 100.5,
         1.0 + 2 ** -8]
    A.native('/bf16_attr', np.array(a, np.float32), attrs={'dtype': 'bfloat16'})
    B.native('/bf16_attr', np.array(b, np.float32), attrs={'dtype': 'bfloat16'})

    # float64 with dtype="bfloat16": values that double-round wrongly through float32.
    a = [1.0 + 2 ** -8 + 2 ** -40, 1.0 + 2 ** -8, 1.0 + 3 * 2 ** -8, 1.0 - 2 ** -9 - 2 ** -45,
         -(1.0 + 2 ** -8 + 2 ** -40), 3.0]
    b = [1.0 + 2 ** -7, 1.0, 1.0 + 2 ** -6, 1.0, -(1.0 + 2 ** -7), 3.0]
    A.native('/bf16_attr64', np.array(a), attrs={'dtype': 'bfloat16'})
    B.native('/bf16_attr64', np.array(b), attrs={'dtype': 'bfloat16'})

    # float32 with dtype="float16" as a fixed-length byte-string attribute; 70000 is beyond
    # float16's range (not representable, ordinal one past the max).
    a = [1.0, 70000.0, 1.0 + 2 ** -11, 65504.0, 0.5, 2.0 ** -24, -1.0, INF]
    b = [1.0 + 2 ** -10, 65504.0, 1.0, 70000.0, 0.5 + 2 ** -11, 0.0, -1.0 - 2 ** -9, INF]
    A.native('/f16_attr', np.array(a, np.float32), attrs={'dtype': np.bytes_(b'float16')})
    B.native('/f16_attr', np.array(b, np.float32), attrs={'dtype': np.bytes_(b'float16')})

    # Attribute on A only: compare dtype = the coarser of bfloat16 and float32 = bfloat16.
    a = [1.0, 2.0, bf(0x4049), 0.25]
    b = [1.0 + 2 ** -9, 2.0 + 2 ** -5, 3.140625, 0.25]
    A.native('/bf16_attr_a_only', np.array(a, np.float32), attrs={'dtype': 'bfloat16'})
    B.native('/bf16_attr_a_only', np.array(b, np.float32))

    # float8 e4m3fn (no inf; 0x7F / 0xFF NaN; max 448) and e5m2 (inf 0x7C, max 57344).
    a = [0x7E, 0x7F, 0x7F, 0x01, 0x38, 0x40, 0x00, 0xB8, 0x77, 0x08, 0x30, 0x7E]
    b = [0xFE, 0xFF, 0x7E, 0x81, 0x39, 0x40, 0x80, 0xB9, 0x76, 0x07, 0x32, 0x7D]
    A.custom('/e4m3', np.array(a, np.uint8).reshape(3, 4), 'float8_e4m3fn')
    B.custom('/e4m3', np.array(b, np.uint8).reshape(3, 4), 'float8_e4m3fn')
    a = [0x7B, 0x7C, 0x7C, 0x7D, 0x7E, 0x3C, 0x01, 0xFC, 0x40, 0x3C, 0x00, 0x44]
    b = [0xFB, 0x7C, 0x7B, 0x7D, 0x3C, 0x3D, 0x81, 0xFC, 0x41, 0x3C, 0x80, 0x46]
    A.custom('/e5m2', np.array(a, np.uint8), 'float8_e5m2')
    B.custom('/e5m2', np.array(b, np.uint8), 'float8_e5m2')

    # Big-endian; no nan/inf: worst = the largest-abs mismatch, with a tie (first wins).
    r = rng.standard_normal(16).astype(np.float32)
    rb = r.copy()
    r[3], rb[3] = 1.25, 1.75
    r[9], rb[9] = 1.25, 0.75  # |b - a| = 0.5 at [3] and [9], exactly: the first wins
    rb[5] = np.nextafter(r[5], np.float32(10))
    rb[11] = r[11] * np.float32(1.001)
    rb[14] = r[14] * np.float32(1.0001)
    A.native('/f32_be', r.astype('>f4'))
    B.native('/f32_be', rb.astype('>f4'))
    a = f16_from_bits([0x3C00, 0x4000, 0x4200, 0xBC00, 0x3555, 0x5000, 0x0200, 0x7000])
    b = f16_from_bits([0x3C05, 0x4000, 0x4210, 0xBC11, 0x3555, 0x5002, 0x0201, 0x7000])
    A.native('/f16_be', a.astype('>f2'))
    B.native('/f16_be', b.astype('>f2'))

    # float64 vs float32: compare dtype float32; ties to even; beyond float32's range.
    a = [1.0 / 3.0, 1.0 + 2 ** -24, 1.0 + 3 * 2 ** -24, 1e39, 1e39, -1e300, 0.1, 2.5,
         1.0 + 2 ** -24 + 2 ** -50, 1e-46]
    b = [float(np.float32(1.0 / 3.0)), 1.0, 1.0 + 2 ** -23, INF, F32MAX, -INF, 0.1, 2.5 + 2 ** -21,
         1.0, 0.0]
    A.native('/f64_vs_f32', np.array(a))
    B.native('/f64_vs_f32', np.array(b, np.float32))

    # float64 vs float16: rounding straight from the double (1 + 2^-11 + 2^-40 rounds up).
    a = [1.0 + 2 ** -11 + 2 ** -40, 1.0 + 2 ** -11, 65520.0, 65519.99, 1e-8, 3.0000001, -2.0, 0.0]
    b = [1.0 + 2 ** -10, 1.0, INF, 65504.0, 0.0, 3.0, -2.0, 2 ** -24]
    A.native('/f64_vs_f16', np.array(a))
    B.native('/f64_vs_f16', np.array(b, np.float16))

    # float16 vs e4m3fn: compare dtype float8_e4m3fn; 464 ties to 448; 465 and inf are beyond.
    a = np.array([448.0, 464.0, 465.0, INF, 500.0, -INF, 1.0, 0.0078125, 1.0625, 2.0], np.float16)
    b = [0x7E, 0x7E, 0x7E, 0x7E, 0x7E, 0xFF, 0x38, 0x00, 0x38, 0x41]
    A.native('/e4m3_vs_f16', a)
    B.custom('/e4m3_vs_f16', np.array(b, np.uint8), 'float8_e4m3fn')

    # float16 vs bfloat16: no common grid, compared in float32 ULPs.
    a = f16_from_bits([0x3C00, 0x4000, 0x3555, 0x7BFF, 0x0001, 0xC500, 0x7C00, 0x7E00])
    b = [0x3F80, 0x4001, 0x3EAB, 0x477F, 0x0000, 0xC0A0, 0x7F80, 0x7FC0]
    A.native('/f16_vs_bf16', a)
    B.custom('/f16_vs_bf16', np.array(b, np.uint16), 'bfloat16')

    # e5m2 vs e4m3fn: no common grid either.
    a = [0x3C, 0x40, 0x7B, 0x01, 0x7C]
    b = [0x38, 0x41, 0x7E, 0x01, 0x7E]
    A.custom('/e5m2_vs_e4m3', np.array(a, np.uint8), 'float8_e5m2')
    B.custom('/e5m2_vs_e4m3', np.array(b, np.uint8), 'float8_e4m3fn')

    # Integers: exact; the int64 extremes give |b - a| = 2^64 - 1.
    ints = {
        '/i8': ('i1', [-128, 127, 0, 5, -3, 100], [127, -128, 0, 6, -3, 98]),
        '/i16': ('i2', [-32768, 32767, 1, 2, 3, 4], [-32768, 32766, 1, 4, 3, 4]),
        '/i32': ('i4', [-2 ** 31, 2 ** 31 - 1, 7, -7, 0, 1000], [2 ** 31 - 1, -2 ** 31, 8, -7, 0,
                                                                  1001]),
        '/i64': ('i8', [-2 ** 63, 2 ** 63 - 1, 0, -1, 2 ** 53 + 1, 10],
                 [2 ** 63 - 1, -2 ** 63, 0, 0, 2 ** 53, 10]),
        '/u8': ('u1', [0, 255, 1, 2, 200, 7], [255, 0, 1, 3, 202, 7]),
        '/u16': ('u2', [0, 65535, 10, 20, 30, 40], [65535, 65535, 11, 20, 30, 39]),
        '/u32': ('u4', [0, 2 ** 32 - 1, 5, 6, 7, 8], [2 ** 32 - 1, 0, 5, 6, 7, 9]),
        '/u64': ('u8', [0, 2 ** 64 - 1, 2 ** 63, 12345, 0, 1], [2 ** 64 - 1, 0, 2 ** 63 - 1, 12345, 1,
                                                               1]),
    }
    for path, (dt, a, b) in ints.items():
        A.native(path, np.array(a, dtype=dt).reshape(2, 3))
        B.native(path, np.array(b, dtype=dt).reshape(2, 3))
    A.native('/bool', np.array([True, False, True, True, False, False]))
    B.native('/bool', np.array([True, True, False, True, False, False]))

    # Complex: modulus of the difference; NaN / inf by component; a = 0 with b != 0.
    a = np.array([1 + 2j, complex(NAN, 0), complex(0, NAN), 3 + 4j, 0j, complex(INF, 1),
                  complex(1, -INF), 1e-3 + 1e-3j, -1 - 1j, 0j], np.complex64)
    b = np.array([1 + 2.000001j, complex(0, NAN), 1 + 1j, 3 + 4.0000005j, 1e-6j,
                  complex(INF, 1), complex(1, INF), 1.0001e-3 + 1e-3j, -1 - 1j, 0j], np.complex64)
    A.native('/c64', a)
    B.native('/c64', b)
    a = np.array([1 + 1j, complex(INF, 1), 2 - 3j, 1e-300 + 0j, 5 + 0j, -7j], np.complex128)
    b = np.array([1 + (1 + 2 ** -52) * 1j, complex(INF, 2), 2 - 3j, 0j, 5 + 1e-12j, -7j * (1 + 1e-9)],
                 np.complex128)
    A.native('/c128', a.reshape(2, 3))
    B.native('/c128', b.reshape(2, 3))

    # Complex vs real, and non-numeric vs numeric: dtype_mismatch.
    A.native('/c64_vs_f32', np.array([1 + 1j, 2 + 0j], np.complex64))
    B.native('/c64_vs_f32', np.array([1.0, 2.0], np.float32))
    A.native('/str_vs_f32', np.array([b'ab', b'cd'], dtype='S2'))
    B.native('/str_vs_f32', np.array([1.0, 2.0], np.float32))

    # Integer in A, float in B: compared as float32.
    A.native('/i32_vs_f32', np.array([0, 1, -5, 16777217, 100, 3], np.int32))
    B.native('/i32_vs_f32', np.array([0.0, 1.0000001, -5.0, 16777216.0, 100.5, INF], np.float32))

    fa.close()
    fb.close()
    paths = sorted(A.t)
    return expect_file_pair(A, B, spec, order=paths)


def make_layouts(outdir, spec):
    rng = np.random.default_rng(7)
    fa = h5py.File(os.path.join(outdir, 'layouts_a.h5'), 'w')
    fb = h5py.File(os.path.join(outdir, 'layouts_b.h5'), 'w')
    A, B = Side(fa), Side(fb)
    with h5py.File(os.path.join(outdir, 'layouts_ext.h5'), 'w') as fe:
        fe.create_dataset('data', data=np.arange(5, dtype=np.float32))

    x = rng.standard_normal((40, 25)).astype(np.float32)
    y = x.copy()
    y[::7, ::3] = np.nextafter(y[::7, ::3], np.float32(100))
    y[5, 5] += np.float32(0.01)
    A.native('/chunked_gzip', x, chunks=(8, 5), compression='gzip', shuffle=True)
    B.native('/chunked_gzip', y, chunks=(8, 5), compression='gzip', shuffle=True)

    x = rng.standard_normal(100)
    A.native('/fletcher32', x, chunks=(32,), fletcher32=True)
    B.native('/fletcher32', x + 1e-13 * rng.standard_normal(100), chunks=(32,), fletcher32=True)

    x = rng.integers(-1000, 1000, 60).astype(np.int32)
    y = x.copy()
    y[::10] += 1
    y[7] += 5
    A.native('/scaleoffset', x, chunks=(20,), scaleoffset=0)
    B.native('/scaleoffset', y, chunks=(20,), scaleoffset=0)

    A.native('/scalar', np.float64(3.25))
    B.native('/scalar', np.float64(3.25 + 2 ** -50))
    A.native('/empty', np.zeros((0,), np.float32))
    B.native('/empty', np.zeros((0,), np.float32))
    A.native('/empty2d', np.zeros((3, 0), np.float32))
    B.native('/empty2d', np.zeros((3, 0), np.float32))

    x = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], np.float32)
    y = x.copy()
    y[4] = np.nextafter(y[4], np.float32(0))
    for s, v in ((A, x), (B, y)):
        s.f.create_group('deep/g1/g2/g3')
        s.native('/deep/g1/g2/g3/x', v)
        s.f['soft'] = h5py.SoftLink('/deep/g1/g2/g3/x')
        s.f['ext'] = h5py.ExternalLink('layouts_ext.h5', '/data')
        s.f['dangling'] = h5py.SoftLink('/nowhere')

    x = rng.standard_normal((7, 5, 300)).astype(np.float32)
    y = (x * np.float32(1 + 2e-7)).astype(np.float32)
    y.ravel()[::41] += np.float32(1e-3)  # about 2.4% mismatches: within the rule's 5%
    A.native('/big3d', x)
    B.native('/big3d', y)

    x = np.linspace(0, 1, 50, dtype=np.float32)
    A.native('/lzf', x, chunks=(10,), compression='lzf')
    B.native('/lzf', x, chunks=(10,), compression='lzf')

    for s in (A, B):
        s.f.create_dataset('str_vlen', data=['alpha', 'beta', 'gamma'],
                           dtype=h5py.string_dtype())
        s.f.create_dataset('str_fixed', data=np.array([b'abc', b'de'], dtype='S4'))
        s.f.create_dataset('opaque', data=np.array([b'\x01\x02\x03\x04'] * 3, dtype='V4'))
        s.f.create_dataset('compound_other',
                           data=np.array([(1.0, 2), (3.0, 4)], dtype=[('x', '<f4'), ('y', '<i4')]))
        s.f.create_dataset('ref', data=[s.f['scalar'].ref], dtype=h5py.ref_dtype)
        for p in ('/str_vlen', '/str_fixed', '/opaque', '/compound_other', '/ref'):
            s.t[p] = ref.Tensor('other', 'other', None, None, None)
    fa.close()
    fb.close()

    res = expect_file_pair(A, B, spec, overrides={
        '/lzf': {'verdict': 'error', 'message_contains': 'lzf'},
    })
    same = res['tensors']['/deep/g1/g2/g3/x']
    res['tensors']['/soft'] = {'either': ['absent', 'same_as:/deep/g1/g2/g3/x'], 'same_as': same}
    res['tensors']['/ext'] = {'either': ['absent', 'skipped']}
    res['tensors']['/dangling'] = {'either': ['absent', 'skipped']}
    res['order'] = 'by_name'  # over the tensors that appear
    return res


def make_order(outdir, spec):
    out = {}
    with h5py.File(os.path.join(outdir, 'order_a.h5'), 'w', track_order=True) as fa, \
            h5py.File(os.path.join(outdir, 'order_b.h5'), 'w') as fb:
        A, B = Side(fa), Side(fb)
        for s in (A,):
            s.native('/zeta', np.arange(3, dtype=np.float32))
            s.native('/alpha', np.arange(3, dtype=np.float32))
            s.native('/mid', np.arange(3, dtype=np.float32))
            s.f.create_group('g', track_order=True)
            s.native('/g/inner', np.arange(3, dtype=np.float32))
        B.native('/alpha', np.arange(3, dtype=np.float32))
        B.native('/b_only', np.arange(3, dtype=np.float32))
        B.native('/g/inner', np.arange(3, dtype=np.float32))
        B.native('/mid', np.arange(3, dtype=np.float32))
        B.native('/zeta', np.arange(3, dtype=np.float32))
    out['order'] = expect_file_pair(A, B, spec,
                                    order=['/zeta', '/alpha', '/mid', '/g/inner', '/b_only'])
    with h5py.File(os.path.join(outdir, 'order_plain_a.h5'), 'w') as fa, \
            h5py.File(os.path.join(outdir, 'order_plain_b.h5'), 'w') as fb:
        A, B = Side(fa), Side(fb)
        for s in (A, B):
            s.native('/zeta', np.arange(3, dtype=np.float32))
            s.native('/alpha', np.arange(3, dtype=np.float32))
            s.native('/mid', np.arange(3, dtype=np.float32))
            s.native('/g/inner', np.arange(3, dtype=np.float32))
            s.native('/Zed', np.arange(3, dtype=np.float32))
        B.native('/b_only', np.arange(3, dtype=np.float32))
    out['order_plain'] = expect_file_pair(
        A, B, spec, order=['/Zed', '/alpha', '/g/inner', '/mid', '/zeta', '/b_only'])
    return out


def make_small_pairs(outdir, spec):
    out = {}
    rng = np.random.default_rng(99)

    def pair(name, build_a, build_b, order=None):
        with h5py.File(os.path.join(outdir, name + '_a.h5'), 'w') as fa, \
                h5py.File(os.path.join(outdir, name + '_b.h5'), 'w') as fb:
            A, B = Side(fa), Side(fb)
            build_a(A)
            build_b(B)
        out[name] = expect_file_pair(A, B, spec, order=order)

    x = rng.standard_normal(10).astype(np.float32)
    y = rng.standard_normal((3, 4))
    z = np.arange(12, dtype=np.int16)
    # within both strict.yaml and the built-in profile: one float32 ulp, 2^-50 relative
    x1 = np.nextafter(x, np.float32(10))
    y1 = y * (1 + 2.0 ** -50)

    def pass_a(s):
        s.native('/x', x)
        s.native('/y', y)
        s.native('/z', z)

    def pass_b(s):
        s.native('/x', x1)
        s.native('/y', y1)
        s.native('/z', z)

    pair('pass', pass_a, pass_b)

    def drift_a(s):
        s.native('/w', x)
        s.native('/x', x)

    def drift_b(s):
        w = x.copy()
        w[4] += np.float32(1e-3)
        s.native('/w', w)
        s.native('/x', x)

    pair('drift', drift_a, drift_b, order=['/w', '/x'])

    def missing_a(s):
        s.native('/common', x)
        s.native('/only_a', x)

    def missing_b(s):
        s.native('/common', x)
        s.native('/only_b', x)

    pair('missing', missing_a, missing_b, order=['/common', '/only_a', '/only_b'])

    def shape_a(s):
        s.native('/ok', z)
        s.native('/x', y)

    def shape_b(s):
        s.native('/ok', z)
        s.native('/x', y.reshape(4, 3))

    pair('shape', shape_a, shape_b, order=['/ok', '/x'])
    out['shape']['tensors']['/x'] = {'verdict': 'shape_mismatch'}

    # corrupt.h5: a valid file cut to half its size.
    p = os.path.join(outdir, 'corrupt.h5')
    with h5py.File(p, 'w') as f:
        f.create_dataset('data', data=np.arange(4096, dtype=np.float64))
    size = os.path.getsize(p)
    with open(p, 'r+b') as fh:
        fh.truncate(size // 2)
    with open(os.path.join(outdir, 'nothing.h5'), 'w') as fh:
        fh.write('this is not an HDF5 file\n')
    open(os.path.join(outdir, 'empty.h5'), 'wb').close()
    return out


def main(argv):
    if len(argv) != 1:
        print('usage: make_fixtures.py OUTDIR', file=sys.stderr)
        return 2
    outdir = argv[0]
    os.makedirs(outdir, exist_ok=True)
    spec = STRICT_TOLERANCES
    pairs = {}
    pairs['dtypes'] = make_dtypes(outdir, spec)
    pairs['layouts'] = make_layouts(outdir, spec)
    pairs.update(make_order(outdir, spec))
    pairs.update(make_small_pairs(outdir, spec))
    for name, pr in pairs.items():
        pr.setdefault('a', name + '_a.h5')
        pr.setdefault('b', name + '_b.h5')
    expected = {'tolerances': {'file': TOLERANCE_FILE, 'spec': spec},
                'pairs': jsonable(pairs),
                'files': {'corrupt': 'corrupt.h5', 'not_hdf5': 'nothing.h5', 'empty': 'empty.h5'}}
    with open(os.path.join(outdir, 'expected.json'), 'w') as fh:
        json.dump(expected, fh, indent=1, sort_keys=False, allow_nan=False)
        fh.write('\n')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
