#!/usr/bin/python3
"""End-to-end test of untrusted names in every report (test_reports.py's part): dataset names
with control, bidi and invalid bytes are shown as visible escapes in text, Markdown, JUnit and
HTML, no raw control character reaches any of them, the JSON keeps the exact names, no name
forges a 'PASS:' line, and stderr escapes paths, tolerance-file text and arguments the same way.

    /usr/bin/python3 tests/report/test_reports_names.py PATH/TO/paritycheck SOURCE_DIR

Prints one line per failure and "N passed, M failed" last.
"""

import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

import h5py
import numpy as np

import reports_common as fixture  # first: it puts tests/ on the path
from checks import check  # noqa: E402
from reports_common import F, xmllint  # noqa: E402

# ------------------------------------------------------------------------------------------
# Untrusted names (docs/reports.md, "Untrusted names")
# ------------------------------------------------------------------------------------------

# Dataset names (as HDF5 stores them: bytes) and how every report but JSON must show them,
# written by hand: C0 controls and DEL as \xNN (\n \t \r by name), C1 and bidi controls as
# \uNNNN, a backslash doubled, bytes that are not UTF-8 as \xNN.
HOSTILE = [
    (b'esc\x1b[31mRED\x1b[0m', r'esc\x1b[31mRED\x1b[0m'),
    (b'x\nPASS: 24 tensors within tolerance', r'x\nPASS: 24 tensors within tolerance'),
    ('rtl\u202eevil.h5'.encode(), r'rtl\u202eevil.h5'),
    ('lri\u2066x\u2069'.encode(), r'lri\u2066x\u2069'),
    (b'del\x7f', r'del\x7f'),
    ('csi\u009b31m'.encode(), r'csi\u009b31m'),
    (b'back\\slash', r'back\\slash'),
    (b'tab\there\r', r'tab\there\r'),
    (b'bad\xff\xfe', r'bad\xff\xfe'),
]
# Every C0 control but NUL ('/' and NUL cannot be in an HDF5 name) and every C1 control, a few
# to a name so that each fits the text report's column; the shown form written from the rule
# of docs/reports.md: \t \n \r, other C0 and DEL as \xNN, C1 as \u00NN.
_C0_SHOWN = {9: r'\t', 10: r'\n', 13: r'\r'}
for _lo in range(1, 32, 12):
    _cs = range(_lo, min(_lo + 12, 32))
    HOSTILE.append((('c0' + ''.join(map(chr, _cs))).encode(),
                    'c0' + ''.join(_C0_SHOWN.get(c, r'\x%02x' % c) for c in _cs)))
for _lo in range(0x80, 0xA0, 8):
    _cs = range(_lo, _lo + 8)
    HOSTILE.append((('c1' + ''.join(map(chr, _cs))).encode(),
                    'c1' + ''.join(r'\u%04x' % c for c in _cs)))
LONG_NAME = b'ab\x1b' * 21846  # 64 KiB
# Raw characters that must never reach an output: C0 but newline (the formats' own line ends),
# DEL, C1, bidi controls, the line and paragraph separators.
RAW_CONTROL = re.compile('[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e'
                         '\u2066-\u2069\u2028\u2029]')


def write_hostile(path, side):
    with h5py.File(path, 'w', track_order=True) as f:
        for k, (name, _) in enumerate(HOSTILE):
            # every other one drifts, so that names reach detail lines and failure bodies too
            f.create_dataset(name, data=np.arange(4, dtype=F) + F(side == 'b' and k % 2))
        f.create_dataset(LONG_NAME, data=np.zeros(2, F))


def raw_controls(label, data):
    """Decodes data as UTF-8 (so an invalid byte fails) and lists the raw control characters."""
    try:
        text = data.decode('utf-8')
    except UnicodeDecodeError as e:
        check('%s: valid UTF-8' % label, False, e)
        return ''
    check('%s: no raw control or bidi character' % label, not RAW_CONTROL.search(text),
          sorted(set(RAW_CONTROL.findall(text))))
    return text


def run_bytes(args, **kw):
    return subprocess.run([fixture.BIN] + list(args), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, cwd=fixture.TMP, timeout=120, **kw)


def test_hostile_names():
    """Names with control, bidi and invalid bytes: visible escapes in text, Markdown, JUnit and
    HTML, no raw control character in any of them, the exact names in the JSON; no forged
    'PASS:' line; stderr escapes paths, tolerance-file text and arguments the same way."""
    a, b = os.path.join(fixture.TMP, 'hostile_a.h5'), os.path.join(fixture.TMP, 'hostile_b.h5')
    write_hostile(a, 'a')
    write_hostile(b, 'b')
    out = {k: os.path.join(fixture.TMP, 'hostile.' + k) for k in ('json', 'md', 'xml', 'html')}
    p = run_bytes(['--json', out['json'], '--markdown', out['md'], '--junit', out['xml'],
                   '--html', out['html'], '-v', a, b])
    check('hostile: exit 1 (drift)', p.returncode == 1, p.stderr)
    text = raw_controls('hostile text report', p.stdout)
    raw_controls('hostile stderr', p.stderr)
    lines = text.split('\n')
    check('hostile text: no forged PASS line', not any(ln.startswith('PASS') for ln in lines),
          [ln for ln in lines if ln.startswith('PASS')])
    check('hostile text: one summary line, FAIL',
          [ln[:5] for ln in lines if re.match('[A-Z]+:', ln)] == ['FAIL:'], lines[-3:])
    for name, shown in HOSTILE:
        check('hostile text shows %s' % shown, re.search(
            r'^(pass|DRIFT|INDETERMINATE) +/%s +float32 ' % re.escape(shown), text, re.M),
            text[:3000])
    # the 64 KiB name keeps the tail that fits the column (60 with '...'): 9 times 'ab\x1b'
    # (6 each); one more '\x1b' would make 58, and the cut is never inside an escape
    long_line = [ln for ln in lines if '...' in ln]
    check('hostile text: the long name is cut before an escape',
          len(long_line) == 1 and re.search(r' \.\.\.(ab\\x1b){9} ', long_line[0]), long_line)
    md = raw_controls('hostile Markdown', open(out['md'], 'rb').read())
    xml = raw_controls('hostile JUnit', open(out['xml'], 'rb').read())
    page = raw_controls('hostile HTML', open(out['html'], 'rb').read())
    cases = {c.get('name') for c in ET.fromstring(xml).iter('testcase')}
    for name, shown in HOSTILE:
        check('hostile Markdown shows %s' % shown, '`/%s`' % shown in md)
        check('hostile JUnit shows %s' % shown, shown in cases, sorted(cases))
        check('hostile HTML shows %s in <bdi>' % shown,
              '<td class="path"><bdi>/%s</bdi></td>' % shown in page)
    check('hostile JUnit: failure bodies name the path',
          'path /%s\n' % HOSTILE[1][1] in xml and 'path /%s\n' % HOSTILE[7][1] in xml)
    check('hostile Markdown: no line starts with a forged PASS',
          not any(ln.startswith('PASS') for ln in md.split('\n')))
    v = xmllint(out['xml'])
    check('hostile JUnit: valid against junit.xsd', v.returncode == 0, v.stdout)
    # JSON is data: the exact names (jansson escapes them); bytes that are not UTF-8 as \xNN
    # each (docs/report-json.md)
    paths = [t['path'] for t in json.loads(open(out['json'], 'rb').read())['tensors']]
    want = ['/' + (n.decode() if n != b'bad\xff\xfe' else 'bad\\xff\\xfe') for n, _ in HOSTILE]
    check('hostile JSON keeps the exact names', sorted(paths) == sorted(want + [
        '/' + LONG_NAME.decode()]), [x for x in paths if x not in want][:3])
    # stderr: a file path, text quoted from a tolerance file, an argument
    evil = os.path.join(fixture.TMP, 'evil\x1b]0;pwned\x07\nPASS.h5')
    with open(evil, 'wb') as fh:
        fh.write(b'not hdf5')
    tol = os.path.join(fixture.TMP, 'hostile.yaml')
    with open(tol, 'w') as fh:
        fh.write('version: 1\n"k\\e[31m\\nPASS: all good\\u202e\\\\\\x9b\\u2066": 1\n')
    for label, args, want in (
            ('a path', [evil, b], 'evil\\x1b]0;pwned\\x07\\nPASS.h5: not a tensor dump '
             '(HDF5, safetensors, npy or npz)\n'),
            ('tolerance-file text', ['-t', tol, a, b],
             "hostile.yaml:2:1: unknown key 'k\\x1b[31m\\nPASS: all good\\u202e\\\\\\u009b"
             "\\u2066' in the top level"),
            ('an argument', ['--sort', '\x1b[2J\n', a, b],
             'paritycheck: --sort wants worst or order: \\x1b[2J\\n\n')):
        p = run_bytes(args)
        err = raw_controls('hostile stderr, %s' % label, p.stderr)
        check('hostile stderr, %s: exit 2, escaped' % label, p.returncode == 2 and want in err,
              err)
        check('hostile stderr, %s: no forged PASS line' % label,
              not any(ln.startswith('PASS') for ln in err.split('\n')), err)


TESTS = [
    test_hostile_names,
]


if __name__ == '__main__':
    sys.exit(fixture.main(sys.argv[1:], TESTS, 'test_reports_names.py'))
