"""What the report tests share (test_reports.py and its parts test_reports_junit_html.py,
test_reports_cascade.py, test_reports_names.py): the binary, the source tree and a temporary
folder (set by main), the hand-made fixture pair and the figures derived from it by hand,
running the binary, the expected Markdown files, and the JUnit schema and headless Chromium
that read reports back."""

import hashlib
import html.parser
import os
import shutil
import subprocess
import sys
import tempfile

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'oracle'))
sys.path.insert(0, os.path.join(HERE, '..'))
from checks import run_tests  # noqa: E402

# Set by main: the binary, the source tree and the temporary folder the tests run in.
BIN = None
SRC = None
TMP = None
TOL = os.path.join(HERE, 'report.yaml')
XSD = os.path.join(HERE, 'junit.xsd')
EXPECTED = os.path.join(HERE, 'expected')


# The order the fixture's datasets are created in, which is the run order (A tracks it).
RUN_ORDER = ['/act/relu', '/act/gelu', '/act/nan', '/out/logits', '/only_a', '/meta/name',
             '/shape/x']
# Worst first (docs/reports.md, "Row order"): failures not compared (run order), the nan
# mismatch, then the drifts by mismatch fraction (a tie: 1/1000 each) and max_ulp (2^21 > 2),
# the pass, the skipped tensor.
WORST_ORDER = ['/only_a', '/shape/x', '/act/nan', '/out/logits', '/act/gelu', '/act/relu',
               '/meta/name']
VERDICTS = {'/act/relu': 'pass', '/act/gelu': 'drift', '/act/nan': 'drift',
            '/out/logits': 'drift', '/only_a': 'missing_in_b', '/meta/name': 'skipped',
            '/shape/x': 'shape_mismatch'}
# Compared tensors and their nonempty ULP buckets (bucket k >= 1 holds [2^(k-1), 2^k)):
# gelu has 998 zeros, one 1 and one 2; logits 999 zeros and one 2^21 (bucket 22).
HIST = {'/act/relu': {0: 4}, '/act/gelu': {0: 998, 1: 1, 2: 1}, '/act/nan': {0: 1},
        '/out/logits': {0: 999, 22: 1}}


def run(args, cwd=None, timeout=120):
    env = dict(os.environ)
    env.pop('NO_COLOR', None)
    return subprocess.run([BIN] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          cwd=cwd or TMP, timeout=timeout, text=True, errors='replace', env=env)


def short(p):
    return 'rc=%s stderr=%r stdout=%r' % (p.returncode, p.stderr[-800:], p.stdout[-400:])


def read(path):
    with open(path, encoding='utf-8') as fh:
        return fh.read()


def expected(name):
    """tests/report/expected/NAME with @TOL@ replaced by the `tolerance file` setting every
    report records: the -t file's path as given and the SHA-256 of its bytes (hashlib's)."""
    with open(TOL, 'rb') as fh:
        digest = hashlib.sha256(fh.read()).hexdigest()
    return read(os.path.join(EXPECTED, name)).replace('@TOL@', '%s sha256:%s' % (TOL, digest))


# ------------------------------------------------------------------------------------------
# Fixtures
# ------------------------------------------------------------------------------------------


F = np.float32


def write_side(path, side, worse=False):
    """A (side 'a') or B. B differs from A by: gelu[10] one ULP up, gelu[20] two (with `worse`
    also gelu[30] and gelu[40] two), logits[999] 2 -> 2.5, nan[1] NaN; /only_a is only in A and
    /shape/x is 2x3 in A, 3x2 in B."""
    with h5py.File(path, 'w', track_order=True) as f:
        for group in ('act', 'out'):
            f.create_group(group, track_order=True)
        f.create_dataset('act/relu', data=np.array([1, 2, 4, 8], F))
        g = np.ones(1000, F)
        if side == 'b':
            one_up = np.nextafter(F(1), F(2))
            two_up = np.nextafter(one_up, F(2))
            g[10] = one_up
            g[[20, 30, 40] if worse else [20]] = two_up
        f.create_dataset('act/gelu', data=g)
        f.create_dataset('act/nan', data=np.array([1, 2 if side == 'a' else np.nan], F))
        lg = np.full(1000, 2, F)
        if side == 'b':
            lg[999] = 2.5
        f.create_dataset('out/logits', data=lg)
        if side == 'a':
            f.create_dataset('only_a', data=np.array([1, 2], F))
        f.create_dataset('meta/name', data=np.bytes_('model'))
        f.create_dataset('shape/x', data=np.zeros((2, 3) if side == 'a' else (3, 2), F))


def make_fixtures():
    write_side(os.path.join(TMP, 'ra.h5'), 'a')
    write_side(os.path.join(TMP, 'rb.h5'), 'b')
    write_side(os.path.join(TMP, 'rb_worse.h5'), 'b', worse=True)
    shutil.copy(os.path.join(TMP, 'rb.h5'), os.path.join(TMP, 'rb_extra.h5'))
    with h5py.File(os.path.join(TMP, 'rb_extra.h5'), 'a') as f:
        f.create_dataset('extra', data=np.zeros(3, F))


def arrays(path_a, path_b, name):
    with h5py.File(path_a, 'r') as fa, h5py.File(path_b, 'r') as fb:
        return fa[name][()].astype(np.float64).ravel(), fb[name][()].astype(np.float64).ravel()


# ------------------------------------------------------------------------------------------
# Reading reports back: xmllint with the JUnit schema, headless Chromium
# ------------------------------------------------------------------------------------------


def xmllint(path):
    return subprocess.run(['xmllint', '--noout', '--schema', XSD, path], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)


def chromium():
    for name in ('chromium', 'chromium-browser'):
        path = shutil.which(name)
        if path:
            return path
    return None


def browse(extra, url):
    profile = tempfile.mkdtemp(prefix='chromium_', dir=TMP)
    return subprocess.run([chromium(), '--headless', '--no-sandbox', '--disable-gpu',
                           '--disable-quic', '--no-first-run', '--disable-background-networking',
                           '--disable-component-update', '--disable-sync',
                           '--user-data-dir=' + profile] + extra + [url],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=90)


class Rows(html.parser.HTMLParser):
    """The rows of table#delta's body: for each, the text of its cells and its <rect> count."""

    def __init__(self):
        super().__init__()
        self.rows, self.in_delta, self.in_body, self.cell = [], False, False, None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == 'table' and a.get('id') == 'delta':
            self.in_delta = True
        elif self.in_delta and tag == 'tbody':
            self.in_body = True
        elif self.in_body and tag == 'tr':
            self.rows.append({'cells': [], 'rects': 0, 'attrs': a})
        elif self.in_body and tag in ('td', 'th'):
            self.cell = []
        elif self.in_body and tag == 'rect':
            self.rows[-1]['rects'] += 1

    def handle_endtag(self, tag):
        if tag == 'table' and self.in_delta:
            self.in_delta = self.in_body = False
        elif self.in_body and tag in ('td', 'th') and self.cell is not None:
            self.rows[-1]['cells'].append(''.join(self.cell).strip())
            self.cell = None

    def handle_data(self, data):
        if self.cell is not None and not data.startswith(('0 ULP', '1 ULP')):
            self.cell.append(data)


def rendered_rows(page):
    p = browse(['--dump-dom'], 'file://' + page)
    parser = Rows()
    parser.feed(p.stdout)
    return p, parser.rows


def main(argv, tests, script):
    """Run `tests` (functions) on argv = PARITYCHECK_BINARY SOURCE_DIR in a fresh temporary
    folder holding the fixture pair; prints the tally (checks.run_tests) and returns the exit
    status."""
    global BIN, SRC, TMP
    if len(argv) != 2:
        print('usage: %s PARITYCHECK_BINARY SOURCE_DIR' % script, file=sys.stderr)
        return 2
    BIN, SRC = os.path.abspath(argv[0]), os.path.abspath(argv[1])
    with tempfile.TemporaryDirectory(prefix='pc_reports_') as tmp:
        TMP = tmp
        make_fixtures()
        return run_tests(tests)
