"""Hostile corpus (make_hostile.py), valid but odd HDF5 files: odd types, shapes, fill values,
groups, links and attributes, fill values that drift, sparse and deep files, filters, data
stored elsewhere, and the resource limits (huge chunks, --max-memory)."""

import math
import struct
import zlib

import numpy as np

import h5py
from hostile_common import GOOD_VALUES, HUGE, SEED, case, h5file, path

# --------------------------------------------------------------------------------------------
# Valid but odd files
# --------------------------------------------------------------------------------------------

def raw_dataset(parent, name, tid, shape, raw):
    """A dataset of HDF5 type tid written from raw bytes of that type."""
    dsid = h5py.h5d.create(parent.id, name.encode(), tid, h5py.h5s.create_simple(shape))
    dsid.write(h5py.h5s.ALL, h5py.h5s.ALL, np.ascontiguousarray(raw), mtype=tid)


def float24_type():
    """1 sign, 7 exponent and 16 mantissa bits in 3 bytes (AMD's fp24): no pc_dtype has it."""
    tid = h5py.h5t.IEEE_F32LE.copy()
    tid.set_fields(23, 16, 7, 0, 16)
    tid.set_ebias(63)
    tid.set_precision(24)
    tid.set_size(3)
    return tid


def odd_types(f, exp):
    g = f.create_group('types')
    rng = np.random.default_rng(SEED)
    for base in ('i1', 'i2', 'i4', 'i8', 'u1', 'u2', 'u4', 'u8', 'f2', 'f4', 'f8', 'c8', 'c16'):
        for order in ('<', '>'):
            dt = np.dtype(order + base)
            if dt.kind == 'c':
                vals = (rng.standard_normal(24) + 1j * rng.standard_normal(24)).astype(dt)
            elif dt.kind == 'f':
                vals = rng.standard_normal(24).astype(dt)
            else:
                info = np.iinfo(dt)
                vals = rng.integers(info.min, info.max, size=24, dtype=dt.newbyteorder('='),
                                    endpoint=True).astype(dt)
                vals[:2] = info.min, info.max
            name = '%s_%s' % (dt.name, 'le' if order == '<' else 'be')
            g[name] = vals
            exp['/types/' + name] = {'verdict': 'pass', 'count': 24, 'mismatches': 0}
    g['bool'] = np.array([True, False, True])
    exp['/types/bool'] = {'verdict': 'pass', 'count': 3}
    g['enum_i2'] = np.array([0, 1, 1, 0], dtype=h5py.enum_dtype({'off': 0, 'on': 1},
                                                               basetype='i2'))
    exp['/types/enum_i2'] = {'verdict': 'pass', 'count': 4}
    raw_dataset(g, 'float24', float24_type(), (5,), np.zeros((5, 3), np.uint8))
    exp['/types/float24'] = {'verdict': 'skipped', 'message': ['float', '3 bytes']}
    g['float128'] = np.arange(4, dtype=np.longdouble)
    exp['/types/float128'] = {'verdict': 'skipped', 'message': ['float', '16 bytes']}
    int12 = h5py.h5t.STD_I16LE.copy()
    int12.set_precision(12)
    raw_dataset(g, 'int12', int12, (4,), np.array([1, 2, 3, 4], np.int16))
    exp['/types/int12'] = {'verdict': 'skipped', 'message': ['integer', '2 bytes']}
    raw_dataset(g, 'bitfield', h5py.h5t.STD_B8LE, (4,), np.array([1, 2, 4, 8], np.uint8))
    exp['/types/bitfield'] = {'verdict': 'skipped', 'message': ['bitfield']}
    g['str_fixed'] = np.array([b'abc', b'de'])
    g['str_vlen'] = np.array(['x', 'yz'], dtype=h5py.string_dtype())
    g['opaque'] = np.zeros(3, dtype='V8')
    g['vlen'] = np.array([np.arange(3), np.arange(1)], dtype=h5py.vlen_dtype(np.int32))
    # (numpy turns a subarray dtype into more dimensions, so the HDF5 array type is made here)
    raw_dataset(g, 'array', h5py.h5t.array_create(h5py.h5t.IEEE_F32LE, (3,)), (2,),
                np.zeros((2, 3), np.float32))
    g['compound'] = np.zeros(2, dtype=[('a', '<f4'), ('b', '<i4')])
    g['compound_ri_mixed'] = np.zeros(2, dtype=[('r', '<f4'), ('i', '<f8')])
    g['compound_ri_padded'] = np.zeros(2, dtype=np.dtype({'names': ['r', 'i'],
                                                          'formats': ['<f4', '<f4'],
                                                          'offsets': [0, 4], 'itemsize': 4096}))
    g['compound_rix'] = np.zeros(2, dtype=[('r', '<f4'), ('i', '<f4'), ('x', '<f4')])
    ref = g.create_dataset('objref', (2,), dtype=h5py.ref_dtype)
    ref[0] = g['bool'].ref
    rref = g.create_dataset('regionref', (1,), dtype=h5py.regionref_dtype)
    rref[0] = g['float32_le'].regionref[2:5]
    for name, why in (('str_fixed', 'string'), ('str_vlen', 'string'), ('opaque', 'opaque'),
                      ('vlen', 'variable-length'), ('array', 'array'),
                      ('compound', 'compound'), ('compound_ri_mixed', 'compound'),
                      ('compound_ri_padded', 'compound'), ('compound_rix', 'compound'),
                      ('objref', 'reference'), ('regionref', 'reference')):
        exp['/types/' + name] = {'verdict': 'skipped', 'message': [why]}


def odd_shapes(f, exp):
    g = f.create_group('shapes')
    g['empty'] = np.zeros(0, np.float32)
    g['empty2d'] = np.zeros((3, 0), np.float64)
    g['scalar'] = np.float64(2.5)
    g['null'] = h5py.Empty('f4')
    g['rank32'] = np.arange(3, dtype=np.float32).reshape((1,) * 31 + (3,))
    for name, n in (('empty', 0), ('empty2d', 0), ('scalar', 1), ('null', 0), ('rank32', 3)):
        exp['/shapes/' + name] = {'verdict': 'pass', 'count': n, 'mismatches': 0}


def odd_fill(f, exp):
    """Never-written datasets read as their fill value; the huge ones are 2^40 elements that no
    program can read one by one in a test's time."""
    g = f.create_group('fill')
    g.create_dataset('unwritten', (1000,), 'f4', fillvalue=2.5)
    g.create_dataset('unwritten_chunked', (1000,), 'f4', chunks=(100,), fillvalue=-1.0)
    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    dcpl.set_chunk((64,))
    dcpl.set_alloc_time(h5py.h5d.ALLOC_TIME_EARLY)
    dcpl.set_fill_value(np.array(7, np.int32))
    h5py.h5d.create(g.id, b'allocated_fill', h5py.h5t.STD_I32LE, h5py.h5s.create_simple((256,)),
                    dcpl=dcpl)
    g.create_dataset('huge', (HUGE,), 'f4', chunks=(1 << 20,), fillvalue=1.0)
    g.create_dataset('huge_default_fill', (HUGE,), 'f8', chunks=(1 << 20,))
    g.create_dataset('huge_nan', (1 << 20, 1 << 20), 'f2', chunks=(1024, 1024),
                     fillvalue=np.float16('nan'))
    g.create_dataset('huge_int', (HUGE,), 'i8', chunks=(1 << 20,), fillvalue=-3)
    g.create_dataset('huge_complex', (HUGE,), 'c8', chunks=(1 << 20,))
    g.create_dataset('huge_contiguous', (HUGE,), 'u1')
    exp.update({
        '/fill/unwritten': {'verdict': 'pass', 'count': 1000, 'mismatches': 0},
        '/fill/unwritten_chunked': {'verdict': 'pass', 'count': 1000, 'mismatches': 0},
        '/fill/allocated_fill': {'verdict': 'pass', 'count': 256, 'mismatches': 0},
        '/fill/huge': {'verdict': 'pass', 'count': HUGE, 'mismatches': 0},
        '/fill/huge_default_fill': {'verdict': 'pass', 'count': HUGE, 'mismatches': 0},
        '/fill/huge_nan': {'verdict': 'pass', 'count': HUGE, 'mismatches': 0},
        '/fill/huge_int': {'verdict': 'pass', 'count': HUGE, 'mismatches': 0},
        '/fill/huge_complex': {'verdict': 'pass', 'count': HUGE, 'mismatches': 0},
        '/fill/huge_contiguous': {'verdict': 'pass', 'count': HUGE, 'mismatches': 0},
    })


def odd_groups_and_links(f, exp):
    g = f.create_group('deep40')
    for level in range(40):
        g = g.create_group('g%02d' % level)
    g['x'] = GOOD_VALUES
    exp['/deep40/' + '/'.join('g%02d' % i for i in range(40)) + '/x'] = {'verdict': 'pass',
                                                                        'count': 64}
    links = f.create_group('links')
    links['soft'] = h5py.SoftLink('/types/float32_le')
    links['dangling'] = h5py.SoftLink('/nowhere')
    links['external'] = h5py.ExternalLink('other_file.h5', '/x')
    links['self'] = h5py.SoftLink('/links')  # a soft link back to its own group
    links['up'] = f['/']                     # a hard link to the root: a cycle
    exp['/links/soft'] = {'verdict': 'pass', 'count': 24}
    exp['/links/dangling'] = {'verdict': 'skipped', 'message': ['dangling']}
    exp['/links/external'] = {'verdict': 'skipped', 'message': ['external']}
    names = f.create_group('names')
    for name in ('with space', 'per%cent%s%n', 'new\nline', 'ünïcødé', 'x' * 4000):
        names[name] = GOOD_VALUES[:4]
        exp['/names/' + name] = {'verdict': 'pass', 'count': 4}


def odd_attrs(f, exp):
    """The dumper's attributes, hostile: wrong types, shapes and sizes are ignored."""
    g = f.create_group('attrs')
    cases = {
        'dtype_huge': {'dtype': 'b' * (1 << 20)},
        'dtype_int': {'dtype': 5},
        'dtype_array': {'dtype': np.array([b'bfloat16', b'float16'])},
        'dtype_empty': {'dtype': h5py.Empty('S10')},
        'reduction_negative': {'reduction_length': -5},
        'reduction_huge': {'reduction_length': np.uint64(1 << 63)},
        'reduction_string': {'reduction_length': 'many'},
        'reduction_array': {'reduction_length': np.arange(3)},
        'accumulation_garbage': {'accumulation_dtype': 'float9000'},
    }
    for name, attrs in cases.items():
        ds = g.create_dataset(name, data=GOOD_VALUES[:8])
        for k, v in attrs.items():
            ds.attrs[k] = v
        exp['/attrs/' + name] = {'verdict': 'pass', 'count': 8}


def make_odd():
    """Two identical files full of odd but valid content: everything readable passes, the rest
    is skipped with a reason, and the run passes."""
    exp = {}
    for side in ('a', 'b'):
        exp.clear()
        with h5file('odd_%s.h5' % side, track_order=True) as f:
            odd_types(f, exp)
            odd_shapes(f, exp)
            odd_fill(f, exp)
            odd_groups_and_links(f, exp)
            odd_attrs(f, exp)
    a, b = path('odd_a.h5'), path('odd_b.h5')
    case('odd/identical', 'odd', [a, b], [0], json=dict(exp), stdout=['PASS'], valgrind=True,
         seconds=60)
    # The same file on both sides.
    case('odd/self', 'odd', [a, a], [0], stdout=['PASS'])


def fill_figures(n, a, b):
    """The aggregate figures of docs/metrics.md for n copies of the pair (a, b), by hand:
    sums n*a^2, n*b^2, n*a*b and n*(b-a)^2."""
    return {'mean_ulp': float(1 << 22), 'rms': abs(b - a), 'rel_rms': abs(b - a) / abs(a),
            'cosine': 1.0, 'snr_db': 10 * math.log10(a * a / ((b - a) * (b - a)))}


def make_fill_drift():
    """Never-written datasets whose fill values differ: every element is a mismatch. float32
    1.0 vs 1.5: abs 0.5, rel 0.5, 0.5 / 2^-23 = 2^22 ulp; int64 -3 vs 4: abs 7, rel 7/3."""
    for side, fill, ifill in (('a', 1.0, -3), ('b', 1.5, 4)):
        with h5file('filldiff_%s.h5' % side) as f:
            f.create_dataset('huge', (HUGE,), 'f4', chunks=(1 << 20,), fillvalue=fill)
            f.create_dataset('small', (10,), 'f4', fillvalue=fill)
            f.create_dataset('huge_int', (HUGE,), 'i8', chunks=(1 << 20,), fillvalue=ifill)
    a, b = path('filldiff_a.h5'), path('filldiff_b.h5')
    exp = {'/huge': {'verdict': 'drift', 'count': HUGE, 'mismatches': HUGE, 'worst_index': [0],
                     'max_abs': 0.5, 'max_rel': 0.5, 'max_ulp': 1 << 22,
                     'approx': fill_figures(HUGE, 1.0, 1.5)},
           '/small': {'verdict': 'drift', 'count': 10, 'mismatches': 10, 'worst_index': [0],
                      'max_abs': 0.5, 'max_rel': 0.5, 'max_ulp': 1 << 22,
                      'approx': fill_figures(10, 1.0, 1.5)},
           '/huge_int': {'verdict': 'drift', 'count': HUGE, 'mismatches': HUGE,
                         'worst_index': [0], 'max_abs': 7.0, 'max_rel': 7 / 3}}
    case('fill/drift', 'odd', [a, b], [1], json=exp, seconds=60, valgrind=True)
    # One side never written, the other written with the same values: read, and equal.
    with h5file('fillwritten.h5') as f:
        f['small'] = np.full(10, 1.0, np.float32)
    exp = {'/small': {'verdict': 'pass', 'count': 10, 'mismatches': 0},
           '/huge': {'verdict': 'missing_in_a'}}
    case('fill/one_side_written', 'odd', [path('fillwritten.h5'), a], [1], json=exp)


def make_sparse():
    """Partly written datasets of 2^40 elements: only the chunks one side wrote are read, the
    rest is folded from the two fill values, in well under a second (reading every element would
    take hours). Values by hand, float32 ordinals (sign-magnitude bit patterns): 1.0 is
    0x3F800000, 1.5 0x3FC00000, 3.0 0x40400000, 4.0 0x40800000, -1.5 -0x3FC00000.
    - /huge: A fills 1.0 and writes 4.0 at 3, B fills 1.5 and writes -1.5 at 2^39. Every pair is
      a mismatch; abs 0.5 but 2.5 at 3 (rel 0.625) and 2.5 at 2^39 (rel 2.5): the worst is the
      first of the two, 3; max ulp 0x3F800000 + 0x3FC00000 at 2^39.
    - /huge2d: (2^20, 2^20) in (4, 4096) chunks, A fills 1.0 and writes 3.0 at [5, 100], B is
      never written (fill 1.5): abs 1.5 and rel 0.5 at [5, 100], ulp 0x40400000 - 0x3FC00000.
    - /huge_int: int64, A fills -3 and writes 10 at 7, B fills 4 and writes nothing but 4 at 7:
      abs 7 (rel 7/3) everywhere but at 7 (abs 6, rel 0.6)."""
    chunk = 1 << 16
    for side in ('a', 'b'):
        with h5file('sparse_%s.h5' % side) as f:
            fill = 1.0 if side == 'a' else 1.5
            d = f.create_dataset('huge', (HUGE,), 'f4', chunks=(chunk,), fillvalue=fill)
            d2 = f.create_dataset('huge2d', (1 << 20, 1 << 20), 'f4', chunks=(4, 4096),
                                  fillvalue=fill)
            di = f.create_dataset('huge_int', (HUGE,), 'i8', chunks=(chunk,),
                                  fillvalue=-3 if side == 'a' else 4)
            if side == 'a':
                d[3] = 4.0
                d2[5, 100] = 3.0
                di[7] = 10
            else:
                d[1 << 39] = -1.5
                di[7] = 4
    a, b = path('sparse_a.h5'), path('sparse_b.h5')
    exp = {'/huge': {'verdict': 'drift', 'count': HUGE, 'mismatches': HUGE, 'max_abs': 2.5,
                     'max_rel': 2.5, 'max_ulp': 0x3F800000 + 0x3FC00000, 'worst_index': [3]},
           '/huge2d': {'verdict': 'drift', 'count': HUGE, 'mismatches': HUGE, 'max_abs': 1.5,
                       'max_rel': 0.5, 'max_ulp': 0x40400000 - 0x3FC00000,
                       'worst_index': [5, 100]},
           '/huge_int': {'verdict': 'drift', 'count': HUGE, 'mismatches': HUGE, 'max_abs': 7.0,
                         'max_rel': 7 / 3, 'worst_index': [0]}}
    case('sparse/drift', 'sparse', [a, b], [1], json=exp, seconds=5, valgrind=True)
    case('sparse/drift_j1', 'sparse', ['-j', '1', '--block-elems', '64', a, b], [1], json=exp,
         seconds=5)
    same = {k: {'verdict': 'pass', 'count': HUGE, 'mismatches': 0} for k in exp}
    case('sparse/self', 'sparse', [a, a], [0], json=same, seconds=5)


def make_deep():
    """Groups nested past the walk's limit (256): the deepest group is an error, the rest of
    the file is compared."""
    for side in ('a', 'b'):
        with h5file('deep300_%s.h5' % side) as f:
            f['shallow'] = GOOD_VALUES
            g = f
            for level in range(300):
                g = g.create_group('g')
            g['x'] = GOOD_VALUES
    too_deep = '/g' * 257
    exp = {'/shallow': {'verdict': 'pass'},
           too_deep: {'verdict': 'error', 'message': ['nested deeper than 256']}}
    case('groups/deep300', 'groups', [path('deep300_a.h5'), path('deep300_b.h5')], [2], json=exp,
         valgrind=True)


def make_filters():
    """A filter this HDF5 lacks makes its dataset an error; the other datasets are compared."""
    for side in ('a', 'b'):
        with h5file('filters_%s.h5' % side) as f:
            f.create_dataset('lzf', data=GOOD_VALUES, chunks=(16,), compression='lzf')
            f.create_dataset('shuffle_gzip', data=GOOD_VALUES, chunks=(16,), shuffle=True,
                             compression='gzip')
            f.create_dataset('scaleoffset', data=np.arange(64, dtype=np.int32), chunks=(16,),
                             scaleoffset=0)
            f.create_dataset('fletcher32', data=GOOD_VALUES, chunks=(16,), fletcher32=True)
            # An optional filter HDF5 cannot find is skipped when writing (the chunks' filter
            # masks say so); it is still an error, since only every chunk's mask could tell.
            dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
            dcpl.set_chunk((16,))
            dcpl.set_filter(32123, h5py.h5z.FLAG_OPTIONAL, ())
            dsid = h5py.h5d.create(f.id, b'optional_missing', h5py.h5t.IEEE_F32LE,
                                   h5py.h5s.create_simple((64,)), dcpl=dcpl)
            dsid.write(h5py.h5s.ALL, h5py.h5s.ALL, GOOD_VALUES)
    a, b = path('filters_a.h5'), path('filters_b.h5')
    exp = {'/lzf': {'verdict': 'error', 'message': ['lzf', 'not available', a]},
           '/shuffle_gzip': {'verdict': 'pass', 'count': 64},
           '/scaleoffset': {'verdict': 'pass', 'count': 64},
           '/fletcher32': {'verdict': 'pass', 'count': 64},
           '/optional_missing': {'verdict': 'error', 'message': ['32123', 'not available', a]}}
    case('filters/unavailable', 'filters', [a, b], [2], json=exp, stdout=['/lzf'], valgrind=True)


def make_elsewhere():
    """Datasets whose values live in other files (external raw storage, virtual datasets) are
    not read: another file named by an untrusted input could be a FIFO that blocks forever, or
    missing (HDF5 then returns fill values as if they were data)."""
    fifo = path('a_fifo')
    raw = path('external_raw.bin')
    GOOD_VALUES.tofile(raw)
    src = path('vds_source.h5')
    with h5file('vds_source.h5') as f:
        f['x'] = GOOD_VALUES
    for side in ('a', 'b'):
        with h5file('elsewhere_%s.h5' % side, 'latest') as f:
            f['good'] = GOOD_VALUES
            f.create_dataset('external_raw', (64,), 'f4', external=[(raw, 0, 256)])
            f.create_dataset('external_fifo', (64,), 'f4', external=[(fifo, 0, 256)])
            layout = h5py.VirtualLayout((64,), 'f4')
            layout[:] = h5py.VirtualSource(src, 'x', (64,))
            f.create_virtual_dataset('virtual', layout)
            layout = h5py.VirtualLayout((64,), 'f4')
            layout[:] = h5py.VirtualSource(path('vds_missing.h5'), 'x', (64,))
            f.create_virtual_dataset('virtual_missing', layout, fillvalue=0)
    a, b = path('elsewhere_a.h5'), path('elsewhere_b.h5')
    exp = {'/good': {'verdict': 'pass'},
           '/external_raw': {'verdict': 'error', 'message': ['external file', a]},
           '/external_fifo': {'verdict': 'error', 'message': ['external file', a]},
           '/virtual': {'verdict': 'error', 'message': ['virtual', a]},
           '/virtual_missing': {'verdict': 'error', 'message': ['virtual', a]}}
    case('elsewhere/external_and_virtual', 'elsewhere', [a, b], [2], json=exp, seconds=10,
         valgrind=True)


# --------------------------------------------------------------------------------------------
# Resource limits
# --------------------------------------------------------------------------------------------

def zeros_deflate(nbytes, piece=1 << 20):
    """A zlib stream of nbytes zero bytes without compressing them all: after a full flush the
    compressor forgets its history, so every further piece of zeros compresses to the same
    bytes. The Adler-32 of n zero bytes is a = 1, b = n mod 65521 (RFC 1950)."""
    co = zlib.compressobj(9)
    head = co.compress(bytes(piece)) + co.flush(zlib.Z_FULL_FLUSH)
    body = co.compress(bytes(piece)) + co.flush(zlib.Z_FULL_FLUSH)
    rest = nbytes - 2 * piece
    whole, last = divmod(rest, piece)
    tail = co.compress(bytes(last)) + co.flush()
    adler = (nbytes % 65521) << 16 | 1
    stream = head + body * (whole + 1) + tail[:-4] + struct.pack('>I', adler)
    return stream


def make_limits():
    """A compressed chunk is decompressed whole, and a small file can declare a chunk of almost
    4 GiB (HDF5's limit): a dataset whose uncompressed chunk is larger than --max-memory is an
    error, the others are compared."""
    n16 = (16 << 20) // 8  # a chunk of exactly 16 MiB of float64
    nmax = ((1 << 32) - 8) // 8  # the largest float64 chunk HDF5 allows: 2^32 - 8 bytes
    for side in ('a', 'b'):
        with h5file('bomb_%s.h5' % side) as f:
            f['small'] = GOOD_VALUES
            ds = f.create_dataset('chunk16m', (n16,), 'f8', chunks=(n16,), compression='gzip')
            ds.id.write_direct_chunk((0,), zlib.compress(bytes(n16 * 8), 9))
            ds = f.create_dataset('chunk4g', (nmax,), 'f8', chunks=(nmax,), compression='gzip')
            ds.id.write_direct_chunk((0,), zeros_deflate(nmax * 8))
    a, b = path('bomb_a.h5'), path('bomb_b.h5')
    big = {'verdict': 'error', 'message': ['4294967288', a]}
    # The default limit (docs/robustness.md, 1 GiB) lies between the two.
    case('limits/default', 'limits', [a, b], [2], json={
        '/small': {'verdict': 'pass'}, '/chunk4g': big,
        '/chunk16m': {'verdict': 'pass', 'count': n16, 'mismatches': 0}}, valgrind=True)
    # The limit is inclusive: a 16 MiB chunk is read under 16M and refused under 16M - 1.
    case('limits/16M', 'limits', ['--max-memory', '16M', a, b], [2], json={
        '/small': {'verdict': 'pass'}, '/chunk4g': big,
        '/chunk16m': {'verdict': 'pass', 'count': n16, 'mismatches': 0}})
    case('limits/16M-1', 'limits', ['--max-memory', str((16 << 20) - 1), a, b], [2], json={
        '/small': {'verdict': 'pass'}, '/chunk4g': big,
        '/chunk16m': {'verdict': 'error', 'message': ['16777216', '16777215', a]}})
    for bad in ('0', '-1', '12Q', 'M', '99999999999999999999', '1.5G', '20000000T'):
        case('limits/bad_value_%s' % bad, 'limits', ['--max-memory', bad, a, b], [2],
             stderr=['--max-memory'])

