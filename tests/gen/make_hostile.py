#!/usr/bin/python3
"""Generate paritycheck's hostile-input corpus and the expected behaviour of every case.

    /usr/bin/python3 tests/gen/make_hostile.py OUTDIR

Writes the inputs into OUTDIR and the cases into OUTDIR/cases.json, which
tests/hostile/run_hostile.py runs. docs/robustness.md lists the groups and what each proves.

Every expectation comes from how the input was made: the offset of a cut, the byte and bit that
were flipped, the HDF5 file format (which checksums its version-2 metadata), the fill value that was
declared, the line and column of the offending YAML token. Nothing is read back from paritycheck.
Everything is deterministic (fixed seed, fixed values).

A case (cases.json "cases"):
  name, group    identify it; docs/robustness.md describes each group
  args           the command line after the binary (absolute paths)
  exit           the allowed exit codes
  stdout, stderr substrings that must occur (stdout is the text report)
  json           {tensor path: {verdict, message: [substrings], count, mismatches, max_abs,
                 max_rel, max_ulp, worst_index, approx: {figure: value within 1e-12}}}:
                 the driver adds --json and checks these fields of the report
  names_file     when the run exits 2, this path must appear on stdout or stderr
  no_runner_commands  no line of stdout or stderr is a GitHub Actions runner command but
                 paritycheck's own annotations ('::' at its start after whitespace, '##['
                 anywhere; docs/reports.md, "Untrusted names")
  seconds        a tighter time limit than the driver's default
  valgrind       part of the subset that .ci/valgrind.sh runs under memcheck
"""

import json
import math
import os
import random
import struct
import sys
import zipfile
import zlib

import numpy as np

import h5py

SEED = 6  # the corpus must be the same on every machine
OUT = None
CASES = []

# Sizes of the HDF5 superblock (file format specification, "Superblock"), 8-byte offsets and
# lengths: version 0 (h5py's default, libver='earliest') is 24 fixed bytes, four addresses and the
# root group's symbol table entry (40 bytes); version 3 (libver='latest') is 12 fixed bytes, four
# addresses and a checksum. A cut at or past this size leaves a superblock whose stored
# end-of-file address lies beyond the real end: HDF5 reports a truncated file.
SUPERBLOCK_BYTES = {'earliest': 24 + 4 * 8 + 40, 'latest': 12 + 4 * 8 + 4}
SIGNATURE_BYTES = 8  # "\x89HDF\r\n\x1a\n"

# The checksummed structures of the version-2 format and their 4-byte signatures (file format
# specification, sections III and IV): a flipped bit inside one fails its signature, version or
# checksum test, so HDF5 refuses the object that owns it.
OBJECT_HEADER = b'OHDR'
FIXED_ARRAY = (b'FAHD', b'FADB')
EXTENSIBLE_ARRAY = (b'EAHD', b'EAIB')
BTREE2 = (b'BTHD', b'BTLF')
# Byte offsets inside a structure that are flipped, and the bit of each: the signature, the
# version, and bytes inside the smallest of these structures (28 bytes), so under its checksum.
STRUCT_FLIPS = ((0, 1), (4, 0), (6, 3), (9, 5), (11, 7))

GOOD_VALUES = np.arange(64, dtype=np.float32) + np.float32(0.5)
HUGE = 1 << 40  # elements of the unallocated datasets


def path(name):
    return os.path.join(OUT, name)


def case(name, group, args, exit, **kw):
    c = {'name': name, 'group': group, 'args': [str(a) for a in args], 'exit': list(exit)}
    c.update(kw)
    CASES.append(c)
    return c


def h5file(name, libver='earliest', **kw):
    return h5py.File(path(name), 'w', libver=libver, **kw)


def flip(src, dst, offset, bit):
    data = bytearray(open(src, 'rb').read())
    data[offset] ^= 1 << bit
    with open(dst, 'wb') as fh:
        fh.write(data)


def find_all(data, sig):
    out, i = [], data.find(sig)
    while i >= 0:
        out.append(i)
        i = data.find(sig, i + 1)
    return out


# --------------------------------------------------------------------------------------------
# Inputs that are not HDF5 files
# --------------------------------------------------------------------------------------------

def make_good():
    with h5file('good.h5') as f:
        f['x'] = GOOD_VALUES
    return path('good.h5')


def make_not_hdf5(good):
    """Each input on either side: exit 2, the message names the input and says why."""
    open(path('empty.bin'), 'wb').close()
    with open(path('text.txt'), 'w') as fh:
        fh.write('this is not an HDF5 file\n' * 40)
    with zipfile.ZipFile(path('archive.zip'), 'w') as z:
        z.writestr('model.h5', 'not really')
    with open(path('signature_only.h5'), 'wb') as fh:
        fh.write(b'\x89HDF\r\n\x1a\n')
    with open(path('signature_then_noise.h5'), 'wb') as fh:
        fh.write(b'\x89HDF\r\n\x1a\n' + bytes(random.Random(SEED).randrange(256)
                                              for _ in range(4096)))
    os.makedirs(path('a_directory'), exist_ok=True)
    fifo = path('a_fifo')
    if os.path.exists(fifo):
        os.unlink(fifo)
    os.mkfifo(fifo)
    # 4 GiB and a byte of nothing (sparse: no disk used), past any 32-bit size: HDF5 looks for
    # its signature at 0, 512, 1024, ... up to the end.
    with open(path('sparse_4g.bin'), 'wb') as fh:
        fh.truncate((4 << 30) + 1)
    loop = path('symlink_loop')
    if os.path.lexists(loop):
        os.unlink(loop)
    os.symlink(loop, loop)
    inputs = [
        ('empty', path('empty.bin'), 'empty file'),
        ('text', path('text.txt'), 'not a tensor dump'),
        ('zip', path('archive.zip'), 'not a tensor dump'),
        ('signature_only', path('signature_only.h5'), 'cannot open'),
        ('signature_then_noise', path('signature_then_noise.h5'), 'cannot open'),
        ('directory', path('a_directory'), 'is a directory'),
        ('dev_null', '/dev/null', 'not a regular file'),
        ('fifo', fifo, 'not a regular file'),
        ('sparse_4g', path('sparse_4g.bin'), 'not a tensor dump'),
        ('symlink_loop', loop, 'Too many levels of symbolic links'),
        ('missing', path('does_not_exist.h5'), 'No such file or directory'),
    ]
    for label, p, why in inputs:
        for side in ('a', 'b'):
            args = [p, good] if side == 'a' else [good, p]
            case('not_hdf5/%s/%s' % (label, side), 'not_hdf5', args, [2], stderr=[p, why],
                 valgrind=side == 'a', seconds=10)


# --------------------------------------------------------------------------------------------
# Truncated files
# --------------------------------------------------------------------------------------------

def make_base(name, libver):
    """A few datasets of every storage kind, small enough to cut and flip everywhere."""
    with h5file(name, libver) as f:
        f['good'] = GOOD_VALUES
        f.create_dataset('chunked', data=GOOD_VALUES * 2, chunks=(16,))
        f.create_dataset('gzip', data=GOOD_VALUES * 3, chunks=(16,), compression='gzip',
                         fletcher32=True)
        g = f.create_group('group')
        g['ints'] = np.arange(-20, 20, dtype=np.int64)
        g.attrs['note'] = 'attribute'
    return path(name)


def cut_offsets(size):
    fixed = [1, 4, 7, 8, 9, 16, 32, 47, 48, 49, 64, 95, 96, 97, 128, 256, 511, 512, 1024, 2048]
    spread = [size * k // 16 for k in range(1, 16)]
    return sorted({o for o in fixed + spread + [size - 8, size - 1] if 0 < o < size})


def make_truncated():
    for libver in ('earliest', 'latest'):
        base = make_base('base_%s.h5' % libver, libver)
        data = open(base, 'rb').read()
        for cut in cut_offsets(len(data)):
            p = path('cut_%s_%06d.h5' % (libver, cut))
            with open(p, 'wb') as fh:
                fh.write(data[:cut])
            why = [p]
            if cut < SIGNATURE_BYTES:
                why.append('not a tensor dump')
            elif cut >= SUPERBLOCK_BYTES[libver]:
                why.append('truncated')
            case('truncated/%s/%d' % (libver, cut), 'truncated', [p, base], [2], stderr=why,
                 valgrind=cut in (1, 8, 64, len(data) - 1))
        # Bytes after the end HDF5 recorded are ignored: still the same file.
        p = path('appended_%s.h5' % libver)
        with open(p, 'wb') as fh:
            fh.write(data + b'garbage after the end of the file' * 32)
        case('truncated/%s/appended_garbage' % libver, 'truncated', [p, base], [0],
             stdout=['PASS'], valgrind=True)


# The end-of-file address of a version 0 superblock (see SUPERBLOCK_BYTES): after the 24 fixed
# bytes, the base address and the free-space address.
EOF_ADDRESS_AT = 24 + 2 * 8


def make_past_eof():
    """Contiguous data past the end of the file: the file cut inside the last dataset's data,
    with the superblock's end-of-file address set to the cut so that HDF5 opens it; or whole,
    with the end-of-file address set inside the data (HDF5 would read zeros past it). Neither may
    be read, by HDF5 or directly (HDF5 1.10.8 returns zeros past its end of file): an error naming the file,
    exit 2, and /good still passes."""
    base = path('past_eof_base.h5')
    with h5py.File(base, 'w', libver='earliest') as f:
        f['good'] = GOOD_VALUES
        f['tail'] = np.arange(4096, dtype=np.float32)
        at, nbytes = f['tail'].id.get_offset(), f['tail'].id.get_storage_size()
    data = open(base, 'rb').read()
    assert at + nbytes == len(data), 'the last dataset must end the file'
    assert struct.unpack_from('<Q', data, EOF_ADDRESS_AT)[0] == len(data)
    cuts = (('cut', at + nbytes // 2, at + nbytes // 2,
             'declares %d bytes of data at byte %d, past the end of the file' % (nbytes, at)),
            ('eoa_inside_data', len(data), at + nbytes // 2,
             'declares %d bytes of data at byte %d, past the end of the file that HDF5 recorded'
             % (nbytes, at)))
    for label, size, eoa, why in cuts:
        p = path('past_eof_%s.h5' % label)
        cut = bytearray(data[:size])
        struct.pack_into('<Q', cut, EOF_ADDRESS_AT, eoa)
        with open(p, 'wb') as fh:
            fh.write(cut)
        case('truncated/past_eof/%s' % label, 'truncated', [p, base], [2], names_file=p,
             json={'/tail': {'verdict': 'error', 'message': [p, why]},
                   '/good': {'verdict': 'pass', 'count': 64}}, valgrind=True)


# --------------------------------------------------------------------------------------------
# Bit flips
# --------------------------------------------------------------------------------------------

def make_target_file(name, **target_kw):
    """libver='latest' (checksummed metadata): /good and /target, where target_kw chooses the
    storage of /target and so which chunk index it gets."""
    with h5file(name, 'latest') as f:
        f['good'] = GOOD_VALUES
        f.create_dataset('target', data=GOOD_VALUES.reshape(target_kw.pop('shape', (64,))),
                         **target_kw)
        addr = {'target': h5py.h5o.get_info(f['target'].id).addr,
                'root': h5py.h5o.get_info(f['/'].id).addr}
    return path(name), addr


def target_error(p):
    """/target is an error naming the file, /good is still compared."""
    return {'/target': {'verdict': 'error', 'message': [p]}, '/good': {'verdict': 'pass'}}


def make_checksummed_flips():
    """Flips in version-2 metadata: the owner fails, the rest is compared, exit 2."""
    layouts = {
        'fixed_array': (dict(chunks=(16,)), FIXED_ARRAY),
        'extensible_array': (dict(chunks=(16,), maxshape=(None,)), EXTENSIBLE_ARRAY),
        'btree2': (dict(shape=(8, 8), chunks=(4, 4), maxshape=(None, None)), BTREE2),
        'contiguous': (dict(), ()),
    }
    for label, (kw, sigs) in layouts.items():
        src, addr = make_target_file('target_%s.h5' % label, **kw)
        data = open(src, 'rb').read()
        structs = [(s.decode(), o) for s in sigs for o in find_all(data, s)]
        structs.append(('OHDR', addr['target']))
        assert data[addr['target']:addr['target'] + 4] == OBJECT_HEADER
        for sig, at in structs:
            for off, bit in STRUCT_FLIPS:
                p = path('flip_%s_%s_%d_%d.h5' % (label, sig, at + off, bit))
                flip(src, p, at + off, bit)
                case('bitflip/%s/%s+%d.%d' % (label, sig, off, bit), 'bitflip_checksummed',
                     [p, src], [2], json=target_error(p), valgrind=(off, bit) == (4, 0))
        if label == 'contiguous':
            # The superblock and the root group's header: the file cannot be opened at all.
            for off, bit in STRUCT_FLIPS:
                for what, at in (('superblock', 0), ('root_OHDR', addr['root'])):
                    p = path('flip_%s_%d_%d.h5' % (what, at + off, bit))
                    flip(src, p, at + off, bit)
                    case('bitflip/%s+%d.%d' % (what, off, bit), 'bitflip_checksummed', [p, src],
                         [2], stderr=[p])


def make_data_flips():
    """Flips in raw data: exactly the flipped element drifts; in a checksummed or compressed
    chunk the dataset cannot be read."""
    with h5file('data.h5') as f:
        f['contiguous'] = GOOD_VALUES
        f.create_dataset('chunked', data=GOOD_VALUES, chunks=(16,))
        f.create_dataset('fletcher32', data=GOOD_VALUES, chunks=(16,), fletcher32=True)
        f.create_dataset('gzip', data=GOOD_VALUES, chunks=(16,), compression='gzip')
        off = {'contiguous': f['contiguous'].id.get_offset(),
               'chunked': f['chunked'].id.get_chunk_info(2).byte_offset,  # elements 32..47
               'fletcher32': f['fletcher32'].id.get_chunk_info(1).byte_offset,
               'gzip': f['gzip'].id.get_chunk_info(3).byte_offset}
    src = path('data.h5')
    # Bit 23 is the lowest exponent bit of a little-endian float32: the value halves or doubles.
    element, bit = 17, 23
    for name, index in (('contiguous', element), ('chunked', 32 + 5)):
        byte = off[name] + 4 * (index - (32 if name == 'chunked' else 0)) + bit // 8
        p = path('dataflip_%s.h5' % name)
        flip(src, p, byte, bit % 8)
        # The flipped element is 2x or 0.5x its value: drift under any default tolerance.
        exp = {'/' + name: {'verdict': 'drift', 'count': 64, 'mismatches': 1,
                            'worst_index': [index]}}
        for other in off:
            if other != name:
                exp['/' + other] = {'verdict': 'pass'}
        case('dataflip/%s' % name, 'dataflip', [src, p], [1], json=exp, valgrind=True)
    for name in ('fletcher32', 'gzip'):
        p = path('dataflip_%s.h5' % name)
        flip(src, p, off[name] + 2, 4)
        exp = {'/' + name: {'verdict': 'error', 'message': [p, 'cannot read']},
               '/contiguous': {'verdict': 'pass'}}
        case('dataflip/%s' % name, 'dataflip', [src, p], [2], json=exp, valgrind=True)


def make_random_flips():
    """Anywhere, in files without (earliest) and with (latest) metadata checksums: the outcome
    depends on what the bit was, but never a crash, a hang or a silent error."""
    rng = random.Random(SEED)
    for libver, nflips in (('earliest', 150), ('latest', 80)):
        src = path('base_%s.h5' % libver)
        size = os.path.getsize(src)
        for i in range(nflips):
            offset, bit = rng.randrange(size), rng.randrange(8)
            p = path('rflip_%s_%03d.h5' % (libver, i))
            flip(src, p, offset, bit)
            case('random_flip/%s/%d@%d.%d' % (libver, i, offset, bit), 'random_flip', [p, src],
                 [0, 1, 2], names_file=p, valgrind=i % 25 == 0)
        for i in range(20):
            data = bytearray(open(src, 'rb').read())
            at = rng.randrange(size - 16)
            data[at:at + 16] = bytes(rng.randrange(256) for _ in range(16))
            p = path('rgarbage_%s_%02d.h5' % (libver, i))
            with open(p, 'wb') as fh:
                fh.write(data)
            case('random_garbage/%s/%d@%d' % (libver, i, at), 'random_flip', [p, src], [0, 1, 2],
                 names_file=p)


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


# --------------------------------------------------------------------------------------------
# Tolerance files
# --------------------------------------------------------------------------------------------

def tol_case(label, text, exit, where=None, why=(), binary=False):
    """where = (line, column) of the token our parser names, 1-based, counted by hand from
    text; None for libyaml's own syntax errors, whose exact position is libyaml's."""
    p = path('tol_%s.yaml' % label)
    with open(p, 'wb') as fh:
        fh.write(text if binary else text.encode())
    stderr = ['%s:%d:%d:' % ((p,) + where)] if where else [p]
    good = path('good.h5')
    case('tolerance/%s' % label, 'tolerance', ['-t', p, good, good], exit,
         stderr=stderr + list(why) if exit == [2] else [], valgrind=label in (
             'alias_bomb', 'deep_flow', 'nan', 'syntax_unclosed'))


def make_tolerances():
    v = 'version: 1\n'
    tol_case('valid', v + 'defaults:\n  float32: {atol: 1.0e-3}\n', [0])
    tol_case('valid_crlf', 'version: 1\r\ndefaults:\r\n  float32: {atol: 1.0e-3}\r\n', [0])
    # libyaml reads UTF-16 with a byte order mark as well as UTF-8.
    tol_case('valid_utf16', (v + 'defaults:\n  float32: {atol: 1.0e-3}\n').encode('utf-16'), [0],
             binary=True)
    tol_case('empty', '', [2], (1, 1), ['missing version'])
    tol_case('comments_only', '# nothing\n# here\n', [2], None, ['missing version'])
    tol_case('syntax_unclosed', v + 'defaults: {float32: {atol: 1e-3}\n', [2], None,
             ['invalid YAML'])
    tol_case('syntax_tab', v + 'defaults:\n\tfloat32: {}\n', [2], None, ['invalid YAML'])
    tol_case('invalid_utf8', (v + 'defaults:\n  float32: {atol: 1e-3} # \xff\n').encode('latin-1'),
             [2], None, ['invalid YAML'], binary=True)
    tol_case('nul_byte', (v + 'defaults: {}\n\0\n').encode(), [2], None, ['invalid YAML'],
             binary=True)
    tol_case('binary_noise', bytes(random.Random(SEED).randrange(256) for _ in range(2000)),
             [2], None, [], binary=True)
    tol_case('two_documents', v + '---\n' + v, [2], (2, 1), ['only one YAML document'])
    tol_case('top_sequence', '- version: 1\n', [2], (1, 1), ['must be a mapping'])
    tol_case('version_quoted', 'version: "1"\n', [2], (1, 10), ['must be a number'])
    tol_case('version_2', 'version: 2\n', [2], (1, 10), ['unsupported version'])
    tol_case('unknown_top_key', v + 'verison: 1\n', [2], (2, 1), ["unknown key 'verison'"])
    tol_case('unknown_dtype', v + 'defaults:\n  float33: {}\n', [2], (3, 3),
             ["unknown key 'float33'"])
    tol_case('unknown_criterion', v + 'defaults:\n  float32: {atoll: 1}\n', [2], (3, 13),
             ["unknown key 'atoll'"])
    tol_case('duplicate_key', v + 'defaults:\n  float32: {atol: 1, atol: 2}\n', [2], (3, 22),
             ["duplicate key 'atol'"])
    tol_case('atol_string', v + 'defaults:\n  float32: {atol: "1e-3"}\n', [2], (3, 19),
             ["'atol' must be a number"])
    tol_case('atol_sequence', v + 'defaults:\n  float32: {atol: [1]}\n', [2], (3, 19),
             ["'atol' must be a number"])
    tol_case('defaults_scalar', v + 'defaults: 5\n', [2], (2, 11), ['must be a mapping'])
    tol_case('rules_mapping', v + 'rules: {match: x}\n', [2], (2, 8), ['must be a sequence'])
    tol_case('rule_no_match', v + 'rules:\n  - float32: {atol: 1}\n', [2], (3, 5),
             ["must have 'match'"])
    tol_case('bad_glob', v + 'rules:\n  - match: "[abc"\n', [2], (3, 12), ['bad glob'])
    tol_case('huge_double', v + 'defaults:\n  float32: {atol: 1e400}\n', [2], (3, 19),
             ['out of range'])
    tol_case('huge_ulp', v + 'defaults:\n  float32: {max_ulp: 18446744073709551616}\n', [2],
             (3, 22), ['out of range'])
    tol_case('huge_ulp_digits', v + 'defaults:\n  float32: {max_ulp: %s}\n' % ('9' * 400), [2],
             (3, 22), ['out of range'])
    tol_case('max_ulp_max', v + 'defaults:\n  float32: {max_ulp: 18446744073709551615}\n', [0])
    tol_case('fraction_above_1', v + 'defaults:\n  all: {max_mismatch_fraction: 1.5}\n', [2],
             (3, 32), ['must be <= 1'])
    tol_case('negative_atol', v + 'defaults:\n  float32: {atol: -1e-3}\n', [2], (3, 19),
             ['must be >= 0'])
    tol_case('negative_ulp', v + 'defaults:\n  float32: {max_ulp: -1}\n', [2], (3, 22),
             ['non-negative integer'])
    tol_case('nan', v + 'defaults:\n  float32: {rtol: .nan}\n', [2], (3, 19), ['must be finite'])
    tol_case('nan_word', v + 'defaults:\n  float32: {rtol: nan}\n', [2], (3, 19),
             ['must be finite'])
    tol_case('inf', v + 'defaults:\n  float32: {atol: -.inf}\n', [2], (3, 19), ['must be finite'])
    # Nesting: the schema stops at the first value of the wrong kind, however deep it goes.
    tol_case('deep_flow', v + 'defaults: ' + '[' * 100000 + ']' * 100000 + '\n', [2], (2, 11),
             ['must be a mapping'])
    tol_case('deep_value', v + 'defaults:\n  float32:\n    atol: ' + '{a: ' * 5000 + '1' +
             '}' * 5000 + '\n', [2], (4, 11), ["'atol' must be a number"])
    tol_case('deep_block', v + 'defaults:\n' + ''.join('  ' * (i + 1) + 'k%d:\n' % i
                                                     for i in range(1000)), [2], (3, 3),
             ["unknown key 'k0'"])
    # A billion laughs: refused at the first anchor, before anything is expanded.
    lol = v + 'rules:\n  - &a0 {match: "/lol"}\n' + ''.join(
        '  - &a%d [%s]\n' % (i, ','.join(['*a%d' % (i - 1)] * 9)) for i in range(1, 10))
    tol_case('alias_bomb', lol, [2], (3, 5), ['anchors are not supported'])
    tol_case('tag', v + 'defaults:\n  float32: {atol: !!float 1e-3}\n', [2], (3, 19),
             ['tags are not supported'])
    tol_case('too_many_rules', v + 'rules:\n' + '  - {match: "/x"}\n' * 100001, [2], (100003, 5),
             ['too many rules'])
    tol_case('too_large', v + '#' * (17 << 20) + '\n', [2], None, ['too large'])
    # YAML limits an implicit key to 1024 characters.
    tol_case('long_key', v + 'k' * (1 << 20) + ': 1\n', [2], None, ['invalid YAML'])
    good = path('good.h5')
    for label, p, why in (('directory', path('a_directory'), 'Is a directory'),
                          ('dev_null', '/dev/null', 'missing version'),
                          ('fifo_no_writer', path('a_fifo'), 'missing version'),
                          ('missing', path('nothing.yaml'), 'No such file or directory')):
        case('tolerance/%s' % label, 'tolerance', ['-t', p, good, good], [2], stderr=[p, why],
             seconds=10)


# --------------------------------------------------------------------------------------------
# Names and attributes that are GitHub Actions runner commands (issue 30)
# --------------------------------------------------------------------------------------------

def make_ci_commands():
    """A dataset named '##[stop-commands]pwn' (the runner would stop reading our ::error lines)
    and provenance that forges an annotation, in every output mode on standard output: the
    forged tensor drifts (exit 1) and no line reads as a runner command."""
    values = {'a': GOOD_VALUES, 'b': GOOD_VALUES + 1}
    for side in 'ab':
        with h5file('ci_%s.h5' % side) as f:
            f.attrs['backend'] = '::warning title=forged::all tensors passed'
            f.attrs['  ::error::x'] = '##[group]forged'
            f['##[stop-commands]pwn'] = values[side]
    a, b = path('ci_a.h5'), path('ci_b.h5')
    for mode, extra in (('text', ['-v']), ('github', ['--github']), ('markdown', ['--markdown', '-']),
                        ('junit', ['--junit', '-']), ('html', ['--html', '-'])):
        case('ci-commands/%s' % mode, 'ci-commands', extra + [a, b], [1], no_runner_commands=True)


def make_not_utf8():
    """Tensor names that are not UTF-8 (b'x\\xff', b'x\\xfe': one name once spelled lossily), each
    drifting: --approve signs both and reads its file back (exit 0: every drift approved);
    lossy names made the file list one tensor twice, raw bytes made it unreadable YAML."""
    for side, scale in (('a', 1.0), ('b', 1.5)):
        with h5file('not_utf8_%s.h5' % side) as f:
            for name in (b'x\xff', b'x\xfe'):
                f.create_dataset(name, data=GOOD_VALUES * np.float32(scale))
    out = path('not_utf8_approvals.yaml')
    if os.path.exists(out):
        os.remove(out)
    case('not-utf8/approve', 'not-utf8', ['--approve', out, '--by', 'corpus', '--reason', 'names',
                                          path('not_utf8_a.h5'), path('not_utf8_b.h5')], [0])


def make_st_overlaps():
    """safetensors offsets a = [0, 40), b = [8, 16), c = [24, 32): every overlapping pair is an
    error, c too, though its neighbour by offset (b) does not touch it; d after them passes."""
    header = {'a': [0, 40], 'b': [8, 16], 'c': [24, 32], 'd': [40, 48]}
    text = json.dumps({k: {'dtype': 'F32', 'shape': [(e - b) // 4], 'data_offsets': [b, e]}
                       for k, (b, e) in header.items()}).encode()
    p = path('st_overlaps.safetensors')
    with open(p, 'wb') as fh:
        fh.write(struct.pack('<Q', len(text)) + text + np.arange(12, dtype='<f4').tobytes())
    err = {'verdict': 'error', 'message': ['overlap those of /a']}
    case('st-overlaps', 'st-overlaps', [p, p], [2],
         json={'/a': {'verdict': 'error', 'message': ['overlap those of /b']}, '/b': err,
               '/c': err, '/d': {'verdict': 'pass', 'count': 2}})


# --------------------------------------------------------------------------------------------

def main(argv):
    global OUT
    if len(argv) != 1:
        print('usage: make_hostile.py OUTDIR', file=sys.stderr)
        return 2
    OUT = os.path.abspath(argv[0])
    os.makedirs(OUT, exist_ok=True)
    random.seed(SEED)
    good = make_good()
    make_not_hdf5(good)
    make_truncated()
    make_past_eof()
    make_checksummed_flips()
    make_data_flips()
    make_random_flips()
    make_odd()
    make_fill_drift()
    make_sparse()
    make_deep()
    make_filters()
    make_elsewhere()
    make_limits()
    make_tolerances()
    make_ci_commands()
    make_st_overlaps()
    make_not_utf8()
    names = [c['name'] for c in CASES]
    assert len(names) == len(set(names)), 'duplicate case names'
    with open(os.path.join(OUT, 'cases.json'), 'w') as fh:
        json.dump({'cases': CASES}, fh, indent=1)
        fh.write('\n')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
