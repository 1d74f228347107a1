#!/usr/bin/python3
"""Sort what a libFuzzer run found into paritycheck's bugs and HDF5's.

    /usr/bin/python3 tests/fuzz/triage.py FUZZ_BINARY ARTIFACT...

Each artifact (crash-*, leak-*, timeout-*, oom-*) runs again under the fuzz binary, whose
sanitizer or libFuzzer report carries a stack. Frames of the runtime (libFuzzer, the sanitizers'
interceptors, libc) are skipped; the first frame left says whose code it was in. libhdf5 is
HDF5 1.10's own fault on a corrupt file (an over-read, a leak, a crash or an endless loop in
its decoders: docs/robustness.md); anything else is paritycheck's. An artifact that runs clean
again (a timeout near the limit) is listed as no-report. Prints two lines per artifact and
exits 1 when any is paritycheck's, or fails without a stack to judge by.
"""

import re
import subprocess
import sys

FRAME = re.compile(r'^\s*#\d+ 0x[0-9a-f]+ (?:in (\S+))?(.*)$')
REPORT = re.compile(r'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:')
# glibc picks a variant of each string function for the CPU: __memcpy_avx512_unaligned_erms.
RUNTIME = re.compile(r'^(__sanitizer|__asan|__lsan|__ubsan|__interceptor|__interception|'
                     r'fuzzer::|__GI_|__libc|_start|main$|abort$|raise$|gsignal$|pthread_kill|'
                     r'(str|mem|wcs)[a-z]*$|__(str|mem|wcs|wmem)[a-z0-9_]*$|'
                     r'[a-z]*alloc$|free$|strdup$|operator )')
RUNTIME_MODULES = ('libc.so', 'libpthread', 'libstdc++', 'ld-linux')
# With glibc's debug symbols installed (libc6-dbg, as on the CI machines) the symbolizer names a
# libc frame by its source file, a path inside glibc's tree, instead of by libc.so: the frame
# of a memcpy that HDF5 calls reads '__memcpy_avx512_unaligned_erms string/../sysdeps/...'.
# Those paths are relative to glibc's tree; paritycheck's own frames carry absolute paths.
GLIBC_SOURCES = re.compile(r'^\s*(sysdeps|string|csu|nptl|stdlib|libio|malloc|signal|posix|misc)/')


def whose(report):
    """('hdf5' | 'paritycheck' | 'unknown' | 'no-report', the deciding frame)."""
    if not REPORT.search(report):
        return 'no-report', ''
    for line in report.splitlines():
        m = FRAME.match(line)
        if not m:
            continue
        func, rest = m.group(1) or '', m.group(2)
        if 'libhdf5' in rest:
            return 'hdf5', line.strip()
        if (func and RUNTIME.match(func)) or GLIBC_SOURCES.match(rest) or any(
                mod in rest for mod in RUNTIME_MODULES):
            continue
        return 'paritycheck', line.strip()
    return 'unknown', ''


def main(argv):
    if len(argv) < 1:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    binary, artifacts = argv[0], argv[1:]
    ours = 0
    for art in artifacts:
        proc = subprocess.run([binary, '-timeout=10', '-rss_limit_mb=2048', art],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              errors='replace', timeout=300)
        kind, frame = whose(proc.stdout)
        # An input that no longer fails (a timeout near the limit) is listed, not counted.
        ours += kind in ('paritycheck', 'unknown')
        print('%-12s %s\n             %s' % (kind, art, frame or proc.stdout[-400:]))
    return 1 if ours else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
