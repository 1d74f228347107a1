"""What the parts of the hostile corpus (make_hostile.py) share: the output folder and the list of
cases being written (set by setup), the facts of the HDF5 file format the cases are cut from,
and helpers to name an output file, record a case, open an HDF5 file and flip a bit."""

import os

import numpy as np

import h5py

SEED = 6  # the corpus must be the same on every machine
OUT = None
CASES = []


def setup(out):
    """Write into the folder `out` from now on, and start an empty list of cases."""
    global OUT
    OUT = out
    del CASES[:]


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
