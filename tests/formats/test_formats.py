#!/usr/bin/python3
"""The tensor-dump formats end to end (docs/formats.md): the same data written as HDF5 (h5py),
safetensors (written here from the specification), npy and npz (numpy: stored and deflated, C
and Fortran order, little and big endian) gives exactly the HDF5 pair's JSON figures for every
pair of formats, A in one and B in another; hostile safetensors, npy and npz files end with their
documented exit code and a message naming the file and tensor, never a crash.

    test_formats.py PARITYCHECK WORKDIR
"""

import itertools
import json
import os
import shutil
import struct
import subprocess
import sys
import zipfile

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
from checks import check, run_tests  # noqa: E402

EXE = os.path.abspath(sys.argv[1])
WORK = os.path.abspath(sys.argv[2])
# Small blocks, so that every tensor is read in several blocks: the Fortran-order gather and the
# forward-only stream of a deflated member cross block boundaries.
BLOCK = ['--block-elems', '16']


def path(name):
    return os.path.join(WORK, name)


def same_file_ok(args):
    """--allow-same before a run that compares a file with itself on purpose (a hostile file's
    message, a reader's figures): A and B one file is otherwise exit 2 (issue 38)."""
    args = list(args)
    return ['--allow-same'] + args if len(args) >= 2 and args[-1] == args[-2] else args


def run(*args):
    p = subprocess.run([EXE] + same_file_ok(args), capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


def figures(a, b, *extra):
    """The JSON report of A vs B without the two file names, and the exit code."""
    rc, out, err = run('--json', '-', '-j', '2', *(BLOCK + list(extra) + [a, b]))
    try:
        rep = json.loads(out)
    except ValueError:
        return rc, err
    del rep['a'], rep['b']
    return rc, rep


# --- the data ----------------------------------------------------------------------------

RNG = np.random.default_rng(15)


def pair(a, noise):
    """A and a candidate B: A with relative noise (floats) or a few changed values (integers)."""
    if a.dtype.kind == 'f':
        return a, (a * (1 + noise * RNG.standard_normal(a.shape))).astype(a.dtype)
    if a.dtype.kind == 'c':
        return a, (a + noise * (RNG.standard_normal(a.shape) +
                                1j * RNG.standard_normal(a.shape))).astype(a.dtype)
    b = a.copy()
    b.flat[::7] = np.logical_not(b.flat[::7]) if a.dtype == bool else b.flat[::7] + 1
    return a, b


def core_data():
    """What every format holds: {name: (A, B)}. Names with dots and a slash, as the dumper's."""
    f32 = RNG.standard_normal((3, 5, 7)).astype(np.float32)
    return {
        'encoder.layer.0.weight': pair(f32, 1e-6),
        'activations/001_fc': pair(RNG.standard_normal((40,)), 1e-12),
        'half': pair((RNG.standard_normal((4, 6)) * 100).astype(np.float16), 1e-3),
        'ints': pair(RNG.integers(-1000, 1000, (5, 4)).astype(np.int32), 0),
        'bytes': pair(RNG.integers(0, 255, (3, 3, 2)).astype(np.uint8), 0),
        'i64': pair(RNG.integers(-2**62, 2**62, (6, 2)).astype(np.int64), 0),
        'mask': pair(RNG.integers(0, 2, (11,)).astype(bool), 0),
        'scalar': pair(np.array(3.25), 1e-3),
        'empty': pair(np.zeros((0, 3), np.float32), 0),
    }


def complex_data():
    """What every format but safetensors holds."""
    return {
        'c64': pair((RNG.standard_normal((4, 3)) + 1j * RNG.standard_normal((4, 3))).astype(
            np.complex64), 1e-4),
        'c128': pair(RNG.standard_normal((2, 2, 3)) + 1j * RNG.standard_normal((2, 2, 3)), 1e-9),
    }


# --- the writers -------------------------------------------------------------------------

ST_DTYPE = {'float64': 'F64', 'float32': 'F32', 'float16': 'F16', 'int8': 'I8', 'int16': 'I16',
            'int32': 'I32', 'int64': 'I64', 'uint8': 'U8', 'uint16': 'U16', 'uint32': 'U32',
            'uint64': 'U64', 'bool': 'BOOL'}


def st_bytes(tensors, metadata=None):
    """A safetensors file from the specification: u64 LE header length, JSON, the buffer.
    tensors: [(name, dtype code, shape, raw bytes)]."""
    header, blobs, off = {}, [], 0
    if metadata is not None:
        header['__metadata__'] = metadata
    for name, code, shape, raw in tensors:
        header[name] = {'dtype': code, 'shape': list(shape), 'data_offsets': [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    text = json.dumps(header).encode()
    text += b' ' * (-len(text) % 8)  # the reference pads with spaces to 8 bytes
    return struct.pack('<Q', len(text)) + text + b''.join(blobs)


def write_st(p, arrays):
    tensors = [(name, ST_DTYPE[a.dtype.name], a.shape, a.astype(a.dtype.newbyteorder('<')).tobytes())
               for name, a in arrays.items()]
    with open(p, 'wb') as fh:
        fh.write(st_bytes(tensors, {'format': 'pt', 'source': 'test_formats'}))


def write_h5(p, arrays):
    with h5py.File(p, 'w', track_order=True) as f:
        for name, a in arrays.items():
            f.create_dataset(name, data=a)


def big_fortran(a):
    """The same logical array in big-endian Fortran order (1-byte and 0-d arrays stay as they
    are: numpy writes them in C order)."""
    b = a.astype(a.dtype.newbyteorder('>'))
    return np.asfortranarray(b) if b.ndim else b  # asfortranarray makes a 0-d array 1-d


def write_npz(p, arrays, compress, transform=None):
    arrays = {n: transform(a) if transform else a for n, a in arrays.items()}
    (np.savez_compressed if compress else np.savez)(p, **arrays)


WRITERS = {
    'h5': ('.h5', write_h5),
    'safetensors': ('.safetensors', write_st),
    'npz': ('.npz', lambda p, d: write_npz(p, d, False)),
    'npz_deflated': ('.npz', lambda p, d: write_npz(p, d, True)),
    'npz_fortran_be': ('.npz', lambda p, d: write_npz(p, d, True, big_fortran)),
    'npz_fortran_stored': ('.npz', lambda p, d: write_npz(p, d, False, big_fortran)),
}


def write_sides(tag, data, formats):
    """{format: (A file, B file)} for the data in each format."""
    out = {}
    for fmt in formats:
        ext, writer = WRITERS[fmt]
        files = []
        for side in (0, 1):
            p = path('%s_%s_%s%s' % (tag, fmt, 'ab'[side], ext))
            writer(p, {n: ab[side] for n, ab in data.items()})
            files.append(p)
        out[fmt] = tuple(files)
    return out


# --- exactness ---------------------------------------------------------------------------

def check_all_pairs(tag, data, formats):
    sides = write_sides(tag, data, formats)
    rc0, want = figures(*sides['h5'])
    if not check('%s: the HDF5 pair runs' % tag, rc0 == 1 and isinstance(want, dict), want):
        return
    check('%s: the HDF5 pair compares every tensor' % tag,
          want['summary']['tensors'] == len(data) and want['summary']['error'] == 0 and
          want['summary']['drift'] > 0, want['summary'])
    for fa, fb in itertools.product(formats, formats):
        rc, got = figures(sides[fa][0], sides[fb][1])
        same = rc == rc0 and got == want
        detail = got if not isinstance(got, dict) else [
            (t['path'], {k: (t[k], w.get(k)) for k in t if t[k] != w.get(k)})
            for t, w in zip(got.get('tensors', []), want['tensors']) if t != w][:3]
        check('%s: A %s vs B %s gives the HDF5 figures' % (tag, fa, fb), same, detail)


def test_every_pair_of_formats():
    check_all_pairs('core', core_data(), list(WRITERS))


def test_complex_pairs():
    check_all_pairs('complex', complex_data(), [f for f in WRITERS if f != 'safetensors'])


def test_npy_files():
    """A .npy file holds one array, the dataset /arr_0: each array in C order little-endian
    and in Fortran order big-endian against the HDF5 file of that array alone."""
    data = dict(core_data(), **complex_data())
    for name, (a, b) in data.items():
        h5a, h5b = path('npy_a.h5'), path('npy_b.h5')
        write_h5(h5a, {'arr_0': a})
        write_h5(h5b, {'arr_0': b})
        _, want = figures(h5a, h5b, '--allow-empty')  # 'empty' compares nothing finite
        for variant, conv in (('c_le', lambda x: x.astype(x.dtype.newbyteorder('<'))),
                              ('fortran_be', big_fortran)):
            na, nb = path('a_%s.npy' % variant), path('b_%s.npy' % variant)
            np.save(na, conv(a))
            np.save(nb, conv(b))
            for x, y in ((na, nb), (h5a, nb), (na, h5b)):
                got = figures(x, y, '--allow-empty')[1]
                check('npy %s %s: %s vs %s gives the HDF5 figures' % (
                    name, variant, os.path.basename(x), os.path.basename(y)), got == want, got)


def test_fortran_order_is_transposed():
    """A C-order A and a Fortran-order B of one logical array compare equal. The file's bytes
    are really column-major, and the same bytes read in C order (a C-order file of them) are
    another array, which drifts: without the transposition the test would fail."""
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    ca, fb, untransposed = path('order_c.npy'), path('order_f.npy'), path('order_raw.npy')
    np.save(ca, a)
    np.save(fb, np.asfortranarray(a))
    stored = np.frombuffer(open(fb, 'rb').read()[-96:], np.float32)
    check('Fortran file is column-major', b"'fortran_order': True" in open(fb, 'rb').read() and
          stored[:4].tolist() == [0.0, 12.0, 4.0, 16.0], stored[:4])
    np.save(untransposed, stored.reshape(2, 3, 4))
    rc, rep = figures(ca, fb)
    check('C vs Fortran order: equal', rc == 0 and rep['tensors'][0]['max_abs'] == 0.0, rep)
    rc, rep = figures(ca, untransposed)
    check('C vs the Fortran bytes in C order: drift', rc == 1 and
          rep['tensors'][0]['max_abs'] == float(np.max(np.abs(a.reshape(-1) - stored))), rep)
    # A Fortran array needs all of its bytes (96,000) at once: a smaller limit, which the files'
    # metadata (a few hundred bytes, counted too) fits, is an error naming it.
    big = np.arange(24000, dtype=np.float32).reshape(20, 30, 40)
    cb, fbig = path('order_c_big.npy'), path('order_f_big.npy')
    np.save(cb, big)
    np.save(fbig, np.asfortranarray(big))
    rc, out, err = run('--max-memory', '64K', cb, fbig)
    check('Fortran order over the memory limit: exit 2 naming the limit',
          rc == 2 and 'order_f_big.npy' in out + err and '--max-memory' in out + err, out + err)
    rc, out, err = run('--max-memory', '64K', '--block-elems', '8', cb, cb)
    check('C order under the same limit is read in blocks', rc == 0, out + err)


def bf16_bits(x):
    """float32 values exactly representable in bfloat16 -> their bf16 bit patterns."""
    return (np.asarray(x, np.float32).view(np.uint32) >> 16).astype('<u2')


def test_bfloat16_safetensors_vs_hdf5():
    """BF16 safetensors against the dumper's HDF5 encoding of bfloat16 (float32 with the
    attribute dtype = "bfloat16"): the same figures in every pair."""
    def bf16(x):
        return (np.asarray(x, np.float32).view(np.uint32) & 0xFFFF0000).view(np.float32)
    a = bf16(RNG.standard_normal((6, 5)))
    b = bf16(a * (1 + 0.01 * RNG.standard_normal(a.shape)).astype(np.float32))
    files = {}
    for side, x in (('a', a), ('b', b)):
        h = path('bf16_%s.h5' % side)
        with h5py.File(h, 'w') as f:
            f['w'] = x
            f['w'].attrs['dtype'] = 'bfloat16'
        s = path('bf16_%s.safetensors' % side)
        with open(s, 'wb') as fh:
            fh.write(st_bytes([('w', 'BF16', x.shape, bf16_bits(x).tobytes())]))
        files[side] = (h, s)
    rc0, want = figures(files['a'][0], files['b'][0])
    check('bf16: HDF5 pair compared in bfloat16', rc0 in (0, 1) and
          want['tensors'][0]['compare_dtype'] == 'bfloat16' and want['tensors'][0]['max_abs'] > 0,
          want)
    for i, j in itertools.product((0, 1), (0, 1)):
        got = figures(files['a'][i], files['b'][j])[1]
        check('bf16: %s vs %s gives the HDF5 figures' % (
            os.path.basename(files['a'][i]), os.path.basename(files['b'][j])), got == want, got)


def fp8_value(code, e4m3):
    """The value of an fp8 bit pattern, from the definitions: E4M3 (fn: bias 7, no inf, NaN
    S.1111.111) and E5M2 (IEEE-like, bias 15)."""
    ebits, mbits, bias = (4, 3, 7) if e4m3 else (5, 2, 15)
    s = -1.0 if code >> 7 else 1.0
    e = (code >> mbits) & ((1 << ebits) - 1)
    m = code & ((1 << mbits) - 1)
    if e4m3 and e == 15 and m == 7:
        return float('nan')
    if not e4m3 and e == 31:
        return s * float('inf') if m == 0 else float('nan')
    if e == 0:
        return s * m * 2.0 ** (1 - bias - mbits)
    return s * (1 + m / 2.0 ** mbits) * 2.0 ** (e - bias)


def test_fp8_safetensors():
    """Every finite F8_E4M3 and F8_E5M2 code as A, B = the next code up: the worst element's
    values and the largest |a - b| are those of the codes decoded by hand above."""
    for code, e4m3 in (('F8_E4M3', True), ('F8_E5M2', False)):
        a = [c for c in range(256) if np.isfinite(fp8_value(c, e4m3)) and
             np.isfinite(fp8_value(c + 1, e4m3)) and c + 1 < 256 and c != 0x7F]
        b = [c + 1 for c in a]
        pa, pb = path('fp8_a.safetensors'), path('fp8_b.safetensors')
        for p, codes in ((pa, a), (pb, b)):
            with open(p, 'wb') as fh:
                fh.write(st_bytes([('q', code, [len(codes)], bytes(codes))]))
        rc, rep = figures(pa, pb)
        t = rep['tensors'][0] if isinstance(rep, dict) else {}
        diffs = [abs(fp8_value(x, e4m3) - fp8_value(y, e4m3)) for x, y in zip(a, b)]
        worst = t.get('worst', {}).get('index', [0])[0]
        check('%s: dtype, count and max |a - b|' % code,
              t.get('dtype_a') == ('float8_e4m3fn' if e4m3 else 'float8_e5m2') and
              t.get('count') == len(a) and t.get('max_abs') == max(diffs), t)
        check('%s: the worst element decodes as by hand' % code,
              t.get('worst', {}).get('a') == fp8_value(a[worst], e4m3) and
              t.get('worst', {}).get('b') == fp8_value(b[worst], e4m3), t.get('worst'))


def test_names():
    """Dots stay dots, slashes are groups: the safetensors tensor "encoder.layer.0.weight" and the
    npz member "activations/001_fc.npy" are the HDF5 datasets "/encoder.layer.0.weight" and
    "/activations/001_fc"; a name that already starts with "/" is kept."""
    x = np.arange(4, dtype=np.float32)
    st = path('names.safetensors')
    with open(st, 'wb') as fh:
        fh.write(st_bytes([('encoder.layer.0.weight', 'F32', [4], x.tobytes()),
                           ('/activations/001_fc', 'F32', [4], x.tobytes())]))
    h5 = path('names.h5')
    write_h5(h5, {'encoder.layer.0.weight': x, 'activations/001_fc': x})
    npz = path('names.npz')
    np.savez(npz, **{'encoder.layer.0.weight': x, 'activations/001_fc': x})
    for other in (h5, npz):
        rc, rep = figures(st, other)
        check('names: safetensors vs %s' % os.path.basename(other),
              rc == 0 and sorted(t['path'] for t in rep['tensors']) ==
              ['/activations/001_fc', '/encoder.layer.0.weight'], rep)


def test_magic_not_extension():
    """The format comes from the bytes: an npz named .h5, a safetensors named .npy."""
    src = write_sides('magic', {'w': core_data()['half']}, ['h5', 'npz', 'safetensors'])
    odd_npz, odd_st = path('really_npz.h5'), path('really_safetensors.npy')
    shutil.copy(src['npz'][1], odd_npz)
    shutil.copy(src['safetensors'][1], odd_st)
    want = figures(*src['h5'])[1]
    for p in (odd_npz, odd_st):
        check('magic: %s' % os.path.basename(p), figures(src['h5'][0], p)[1] == want)


# --- hostile inputs ----------------------------------------------------------------------

GOOD = np.arange(6, dtype=np.float32)


def expect(label, p, rc_want, needles):
    """p compared with itself: exit rc_want (never a signal) and every needle in the output."""
    rc, out, err = run(p, p)
    text = out + err
    check('hostile %s: exit %d' % (label, rc_want), rc == rc_want, (rc, text[-600:]))
    for n in needles:
        check('hostile %s: says %r' % (label, n), n in text, text[-600:])


def st_with(entries, buffer, meta=None):
    header = dict(entries)
    if meta is not None:
        header['__metadata__'] = meta
    text = json.dumps(header).encode()
    return struct.pack('<Q', len(text)) + text + buffer


def write(name, data):
    p = path(name)
    with open(p, 'wb') as fh:
        fh.write(data)
    return p


def test_hostile_safetensors():
    good = {'good': {'dtype': 'F32', 'shape': [6], 'data_offsets': [0, 24]}}
    buf = GOOD.tobytes() + bytes(64)
    whole = st_bytes([('good', 'F32', [6], GOOD.tobytes())])
    # The header itself is bad: exit 2 naming the file.
    for label, data, why in (
            ('st_truncated_header', whole[:20], 'safetensors header of'),
            ('st_absurd_header', struct.pack('<Q', 200000000) + b'{' + bytes(100), 'absurd'),
            ('st_invalid_json', struct.pack('<Q', 11) + b'{"a": [1, 2', 'not valid JSON'),
            ('st_not_object', struct.pack('<Q', 3) + b'{}]' , 'not valid JSON'),
            ('st_duplicate', struct.pack('<Q', 20) + b'{"a": {}, "a": {}}  ',
             'two tensors have the path /a'),
            ('st_duplicate_metadata', struct.pack('<Q', 40) +
             b'{"__metadata__": {}, "__metadata__": {}}', 'duplicate object key'),
            ('st_metadata', st_with(good, buf, {'k': 1}), '__metadata__'),
            ('st_same_path', st_with(dict(good, **{'/good': good['good']}), buf),
             'two tensors have the path /good')):
        p = write(label + '.safetensors', data)
        expect(label, p, 2, [p, why])
    # One tensor is bad: it is an error naming the file and the tensor, /good still passes.
    for label, entry, why in (
            ('st_outside', {'dtype': 'F32', 'shape': [6], 'data_offsets': [80, 104]},
             'lie outside the data buffer of 88 bytes'),
            ('st_reversed', {'dtype': 'F32', 'shape': [1], 'data_offsets': [8, 4]},
             'lie outside'),
            ('st_length', {'dtype': 'F64', 'shape': [6], 'data_offsets': [24, 40]},
             'hold 16 bytes, dtype F64 and shape need 48'),
            ('st_overflow', {'dtype': 'F32', 'shape': [2**40, 2**40], 'data_offsets': [24, 28]},
             'more than 2^64'),
            ('st_rank', {'dtype': 'U8', 'shape': [1] * 33, 'data_offsets': [24, 25]},
             'at most 32'),
            ('st_negative', {'dtype': 'U8', 'shape': [-1], 'data_offsets': [24, 25]},
             'shape is not'),
            ('st_offsets', {'dtype': 'U8', 'shape': [1], 'data_offsets': [24]},
             'data_offsets is not'),
            ('st_no_dtype', {'shape': [1], 'data_offsets': [24, 25]}, 'no dtype'),
            ('st_overlap', {'dtype': 'F32', 'shape': [2], 'data_offsets': [16, 24]},
             'overlap those of /good')):
        p = write(label + '.safetensors', st_with(dict(good, bad=entry), buf))
        expect(label, p, 2, [p + ': ', '/bad', why])
        rc, rep = figures(p, p)
        check('hostile %s: /good still passes' % label, any(
            t['path'] == '/good' and t['verdict'] == ('error' if label == 'st_overlap' else 'pass')
            for t in rep['tensors']), rep)
    # A dtype of a later specification is skipped, not an error.
    p = write('st_new_dtype.safetensors', st_with(dict(good, q={
        'dtype': 'F8_E8M0', 'shape': [2], 'data_offsets': [24, 26]}), buf))
    rc, rep = figures(p, p)
    check('hostile st_new_dtype: skipped', rc == 0 and any(
        t['path'] == '/q' and t['verdict'] == 'skipped' for t in rep['tensors']), rep)
    # Cut anywhere: never a crash.
    for cut in range(1, len(whole)):
        p = write('st_cut.safetensors', whole[:cut])
        rc = run(p, p)[0]
        if not check('hostile st cut at %d: exit 2' % cut, rc == 2, rc):
            break


def npy_bytes(header, data=b'', version=1):
    text = header.encode('latin1')
    if version == 1:
        return b'\x93NUMPY\x01\x00' + struct.pack('<H', len(text)) + text + data
    return b'\x93NUMPY' + bytes([version, 0]) + struct.pack('<I', len(text)) + text + data


def test_hostile_npy():
    d = GOOD.tobytes()
    for label, data, rc_want, why in (
            ('npy_magic_only', b'\x93NUMPY', 2, 'npy header truncated'),
            ('npy_version', npy_bytes("{}", version=9), 2, 'npy version'),
            ('npy_long_header', b'\x93NUMPY\x02\x00' + struct.pack('<I', 1 << 30) + b'{',
             2, 'longer than 1 MiB'),
            ('npy_cut_header', npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (6,), }")[:30],
             2, 'npy header truncated'),
            ('npy_not_dict', npy_bytes("[1, 2]"), 2, 'not a dict'),
            ('npy_tiny_header', npy_bytes("{"), 2, 'npy header too short'),
            ('npy_extra_key', npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (6,), "
                                        "'x': 1}", d), 2, 'a key other than'),
            ('npy_no_shape', npy_bytes("{'descr': '<f4', 'fortran_order': False}", d), 2,
             'lacks shape'),
            ('npy_bad_shape', npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (6,-1)}", d),
             2, 'shape is not'),
            ('npy_huge_dim', npy_bytes("{'descr': '<f4', 'fortran_order': False, "
                                       "'shape': (99999999999999999999,)}", d), 2, 'shape is not'),
            ('npy_bad_order', npy_bytes("{'descr': '<f4', 'fortran_order': 1, 'shape': (6,)}", d),
             2, 'fortran_order'),
            ('npy_short_data', npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (7,)}", d),
             2, 'npy data holds 24 bytes, dtype <f4 and shape need 28'),
            ('npy_overflow', npy_bytes("{'descr': '<f8', 'fortran_order': True, "
                                       "'shape': (4294967296, 4294967296)}", d), 2, '2^64'),
            ('npy_object', npy_bytes("{'descr': '|O', 'fortran_order': False, 'shape': (1,)}", d),
             2, 'nothing was compared'),
            ('npy_unicode', npy_bytes("{'descr': '<U2', 'fortran_order': False, 'shape': (3,)}", d),
             2, 'nothing was compared'),
            ('npy_structured', npy_bytes("{'descr': [('a', '<f4'), ('b', '<i4')], "
                                         "'fortran_order': False, 'shape': (3,)}", d),
             2, 'nothing was compared'),
            ('npy_long_double', npy_bytes("{'descr': '<f16', 'fortran_order': False, 'shape': (1,)}", d),
             2, 'nothing was compared'),
            ('npy_v3', npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (6,)}", d, 3),
             0, None)):
        p = write(label + '.npy', data)
        expect(label, p, rc_want, [p] + ([why] if why else []) if rc_want else [])
    # A dump of only tensors that cannot be compared compared nothing (issue 30): exit 2 above;
    # with --allow-empty, the tensor is skipped with a reason.
    rc, rep = figures(path('npy_object.npy'), path('npy_object.npy'), '--allow-empty')
    check('hostile npy_object: skipped with a reason under --allow-empty', rc == 0 and
          rep['tensors'][0]['verdict'] == 'skipped', rep)


def test_hostile_npz():
    p = path('plain.zip')
    with zipfile.ZipFile(p, 'w') as z:
        z.writestr('readme.txt', 'no arrays here')
    expect('zip_without_npy', p, 2, [p, 'not a tensor dump', 'without .npy members'])
    good = path('good.npz')
    np.savez_compressed(good, good=GOOD, other=GOOD * 2)
    data = open(good, 'rb').read()
    p = write('npz_cut.npz', data[:len(data) // 2])
    expect('npz_truncated', p, 2, [p, 'not a readable zip archive'])
    # A member whose header is not npy, one whose data is short, one whose deflate stream is
    # corrupt, one that is not .npy: errors (skipped) naming the file and the tensor.
    p = path('npz_members.npz')
    with zipfile.ZipFile(p, 'w', zipfile.ZIP_DEFLATED) as z:
        z.writestr('good.npy', npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (6,)}",
                                         GOOD.tobytes()))
        z.writestr('noheader.npy', b'not npy at all')
        z.writestr('short.npy', npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (9,)}",
                                          GOOD.tobytes()))
        z.writestr('notes.txt', 'hello')
    expect('npz_members', p, 2, [p + ': member noheader.npy: no npy magic', '/noheader',
                                 p + ': npy data holds 24 bytes', '/short'])
    rc, rep = figures(p, p)
    verdicts = {t['path']: t['verdict'] for t in rep['tensors']} if isinstance(rep, dict) else rep
    check('hostile npz_members: verdicts', verdicts == {
        '/good': 'pass', '/noheader': 'error', '/short': 'error', '/notes.txt': 'skipped'},
        verdicts)
    # A member whose npy header (10 bytes) is shorter than the 12 bytes read first: an error,
    # not a read past the header's buffer (a fuzz finding).
    p = path('npz_tiny_header.npz')
    with zipfile.ZipFile(p, 'w') as z:
        z.writestr('good.npy', npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (6,)}",
                                         GOOD.tobytes()))
        z.writestr('w.npy', b'\x93NUMPY\x01\x00\x00\x00' + bytes(176))
    expect('npz_tiny_header', p, 2, [p + ': member w.npy: npy header too short', '/w'])
    # Flip bytes inside the deflated data of a large member: the read fails, naming the tensor.
    big = path('big.npz')
    np.savez_compressed(big, big=RNG.standard_normal(20000))
    raw = bytearray(open(big, 'rb').read())
    for at in range(2000, 2064):
        raw[at] ^= 0x5A
    p = write('npz_corrupt_stream.npz', bytes(raw))
    rc, out, err = run(p, big)
    check('hostile npz_corrupt_stream: exit 2 naming the file and tensor',
          rc == 2 and p in out + err and '/big' in out + err, (rc, (out + err)[-600:]))


if __name__ == '__main__':
    os.makedirs(WORK, exist_ok=True)
    sys.exit(run_tests([test_every_pair_of_formats, test_complex_pairs, test_npy_files,
                        test_fortran_order_is_transposed, test_bfloat16_safetensors_vs_hdf5,
                        test_fp8_safetensors, test_names, test_magic_not_extension,
                        test_hostile_safetensors, test_hostile_npy, test_hostile_npz]))
