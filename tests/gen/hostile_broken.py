"""Hostile corpus (make_hostile.py), inputs that are not what they claim: files that are not
HDF5, truncated files, cuts past the stored end of file, bit flips in checksummed structures,
in data and at random, and safetensors whose data offsets overlap."""

import json
import os
import random
import struct
import zipfile

import numpy as np

import h5py
from hostile_common import (BTREE2, EXTENSIBLE_ARRAY, FIXED_ARRAY, GOOD_VALUES, OBJECT_HEADER,
                            SEED, SIGNATURE_BYTES, STRUCT_FLIPS, SUPERBLOCK_BYTES, case, find_all,
                            flip, h5file, path)

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

