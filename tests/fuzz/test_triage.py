#!/usr/bin/python3
"""tests/fuzz/triage.py decides whose a fuzzer finding is from its stack; a wrong call either fails
CI on an HDF5 fault or lets a paritycheck bug pass. Each case below is a sanitizer report as the
symbolizer prints it, shortened to the frames that decide; the expected owner is read off the
stack by hand (the first frame that is neither the sanitizer runtime nor libc).

    /usr/bin/python3 tests/fuzz/test_triage.py
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, '..'))

from checks import check, summary  # noqa: E402
import triage  # noqa: E402

SEGV = '==1==ERROR: AddressSanitizer: SEGV on unknown address 0x000000000000\n'
HDF5 = ' (/lib/x86_64-linux-gnu/libhdf5_serial.so.103+0xf54de) (BuildId: e923)\n'
FUZZ = ' (/w/build-fuzz/tests/fuzz/fuzz_loader+0xbca97) (BuildId: 3def)\n'

# A memcpy inside HDF5 (CI, 2026-11-24): with libc6-dbg the libc frame names glibc's source file,
# not libc.so, so only the path tells it apart from paritycheck's own code.
GLIBC_DBG = '#0 0x7f in __memcpy_avx512_unaligned_erms string/../sysdeps/x86_64/multiarch/' \
            'memmove-vec-unaligned-erms.S:273\n'
# The same frame without debug symbols for libc.
GLIBC_BARE = '#0 0x7f  (/lib/x86_64-linux-gnu/libc.so.6+0x15e809) (BuildId: 51657)\n'
INTERCEPTOR = '#1 0x55 in __interceptor_memcpy' + FUZZ
IN_HDF5 = '#2 0x7f in H5F__accum_read' + HDF5
IN_LOADER = '#2 0x55 in pc_walk_group /w/src/lib/load/loader.c:800:10\n'
START = '#3 0x7f in __libc_start_call_main csu/../sysdeps/nptl/libc_start_call_main.h:58:16\n'

CASES = [
    ('memcpy from HDF5, libc with debug symbols', SEGV + GLIBC_DBG + INTERCEPTOR + IN_HDF5 + START,
     'hdf5', 'H5F__accum_read'),
    ('memcpy from HDF5, libc without debug symbols',
     SEGV + GLIBC_BARE + INTERCEPTOR + IN_HDF5, 'hdf5', 'H5F__accum_read'),
    ('memcpy from the loader, libc with debug symbols',
     SEGV + GLIBC_DBG + INTERCEPTOR + IN_LOADER + START, 'paritycheck', 'pc_walk_group'),
    ('memcpy from the loader, libc without debug symbols',
     SEGV + GLIBC_BARE + INTERCEPTOR + IN_LOADER, 'paritycheck', 'pc_walk_group'),
    # A paritycheck function whose name starts like a libc one is still paritycheck's.
    ('paritycheck strtod_c',
     SEGV + '#0 0x55 in strtod_c /w/src/lib/judge/tolerance.c:61:3\n' + IN_HDF5,
     'paritycheck', 'strtod_c'),
    ('UBSan in the kernel',
     '/w/src/lib/numerics/kernel.c:10:5: runtime error: signed integer overflow\n'
     '#0 0x55 in pc_fold /w/src/lib/numerics/kernel.c:10:5\n' + START, 'paritycheck', 'pc_fold'),
    ('only runtime frames', SEGV + GLIBC_DBG + INTERCEPTOR + START, 'unknown', ''),
    ('a clean rerun', 'INFO: Running with entropic power schedule\nDone 1 runs\n', 'no-report', ''),
]


def main():
    for name, report, owner, frame in CASES:
        got, line = triage.whose(report)
        check('%s: %s' % (name, owner), got == owner, (got, line))
        check('%s: decided by %s' % (name, frame or 'no frame'),
              frame in line if frame else line == '', line)
    return summary()


if __name__ == '__main__':
    sys.exit(main())
