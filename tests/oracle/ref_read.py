"""Tensors of an HDF5 pair for the numpy reference (pc_reference.py, docs/metrics.md): the
compare dtype of two logical dtypes, a dataset read exactly from its stored bits, and the
figures or the outcome of a pair of such tensors."""

from typing import NamedTuple

import numpy as np

from ref_figures import tensor_figures
from ref_float import FLOAT_RANK, FORMATS, INT_INFO, decode_bits, not_representable_count

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
