#!/usr/bin/python3
"""The man page kept in the repository (docs/paritycheck.1, installed by every install) is the one
help2man makes from the binary's --help: with help2man on the PATH, the page is made again and must
equal the kept one line for line but the .TH line (it holds the date); without it, every option
that --help lists must be in the page. --write remakes the kept page (cmake --build build --target
manpage, after a change to --help).
Usage: test_manpage.py PARITYCHECK SOURCE_DIR VERSION [--write]"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..'))
from checks import check, run_tests  # noqa: E402

EXE = PAGE = VERSION = None
NAME = 'numeric parity between tensor dumps of two ML backends'


def help2man(out):
    return subprocess.run(['help2man', '--no-info', '--name', NAME, '--version-string', VERSION,
                           '-o', out, EXE], stderr=subprocess.PIPE, text=True)


def body(path):
    with open(path) as fh:
        return [line for line in fh.read().splitlines() if not line.startswith('.TH ')]


def test_page_matches_help():
    check('docs/paritycheck.1 exists', os.path.exists(PAGE), PAGE)
    if not os.path.exists(PAGE):
        return
    if shutil.which('help2man'):
        with tempfile.TemporaryDirectory() as tmp:
            made = os.path.join(tmp, 'paritycheck.1')
            p = help2man(made)
            check('help2man runs', p.returncode == 0, p.stderr)
            kept, fresh = body(PAGE), body(made)
            diff = [(a, b) for a, b in zip(kept, fresh) if a != b][:3]
            check('docs/paritycheck.1 is what help2man makes from --help now (remake it: '
                  'cmake --build build --target manpage)', kept == fresh,
                  diff or 'lengths %d != %d' % (len(kept), len(fresh)))
    else:
        print('help2man not found: checking the options only')
    text = subprocess.run([EXE, '--help'], stdout=subprocess.PIPE, text=True).stdout
    with open(PAGE) as fh:
        page = fh.read().replace('\\-', '-')
    options = sorted(set(re.findall(r'--[a-z][a-z-]+', text)))
    missing = [o for o in options if o not in page]
    check('every option of --help is in the page', options and not missing, missing)


def main(argv):
    global EXE, PAGE, VERSION
    EXE, PAGE, VERSION = argv[1], os.path.join(argv[2], 'docs', 'paritycheck.1'), argv[3]
    if '--write' in argv[4:]:
        p = help2man(PAGE)
        sys.stderr.write(p.stderr)
        return p.returncode
    return run_tests([test_page_matches_help])


if __name__ == '__main__':
    sys.exit(main(sys.argv))
