#!/usr/bin/python3
"""End-to-end tests of paritycheck's report files: Markdown, JUnit, HTML, the statistics in the
JSON, and the baseline gate, all from single runs of the binary.

    /usr/bin/python3 tests/report/test_reports.py PATH/TO/paritycheck SOURCE_DIR

The fixture pair is written here with h5py from values chosen so that every figure can be derived
by hand; tests/report/expected/*.md hold the Markdown those derivations give (written by hand).
The statistics in the JSON are recomputed with numpy (ULP distances by tests/oracle/pc_reference.py).
A cascade (a real fixture pair with a bug injected into one tensor, spreading downstream, and an
independent one) is checked in all five formats: reasons, values and limits against numpy and
the profile's YAML, root causes and first divergence against the cascade rule applied here.
The HTML page is loaded in headless Chromium: its rendered rows are read back, a column is
sorted by a click, and a screenshot must not be blank. The JUnit file is validated with xmllint
against tests/report/junit.xsd. Prints one line per failure and "N passed, M failed" last.
"""

import html.parser
import hashlib
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'oracle'))
sys.path.insert(0, os.path.join(HERE, '..'))
from checks import check, run_tests  # noqa: E402
import pc_reference as ref  # noqa: E402

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
# Markdown
# ------------------------------------------------------------------------------------------


def test_all_outputs_one_run():
    """One run writes text, JSON, Markdown, JUnit, HTML and a baseline; the Markdown is the file
    derived by hand."""
    outs = {k: os.path.join(TMP, 'one.' + k) for k in ('json', 'md', 'xml', 'html')}
    p = run(['-t', TOL, '--json', outs['json'], '--markdown', outs['md'], '--junit', outs['xml'],
             '--html', outs['html'], '--save-baseline', 'base.json', 'ra.h5', 'rb.h5'])
    check('one run: exit 1 (drift)', p.returncode == 1, short(p))
    check('one run: text report on stdout', 'first divergence: /act/gelu' in p.stdout, p.stdout)
    for k, path in outs.items():
        check('one run: %s written' % k, os.path.getsize(path) > 0)
    check('one run: baseline written', os.path.getsize(os.path.join(TMP, 'base.json')) > 0)
    got = read(outs['md'])
    want = expected('report_worst.md')
    check('markdown --sort worst (default) == expected/report_worst.md', got == want, got)
    report = json.loads(read(outs['json']))
    order = [t['path'] for t in report['tensors']]
    check('JSON run order is the creation order', order == RUN_ORDER, order)
    check('JSON verdicts', {t['path']: t['verdict'] for t in report['tensors']} == VERDICTS)


def test_markdown_to_stdout():
    p = run(['-t', TOL, '--sort', 'worst', '--markdown', '-', 'ra.h5', 'rb.h5'])
    check('--markdown -: exit 1', p.returncode == 1, short(p))
    check('--markdown -: stdout is the Markdown alone',
          p.stdout == expected('report_worst.md'), p.stdout)
    # --max-rows 3: the first three rows of the hand-written table, then the four left over
    # counted: /out/logits and /act/gelu fail, /act/relu passes, /meta/name is skipped.
    p = run(['-t', TOL, '--sort', 'worst', '--max-rows', '3', '--markdown', '-', 'ra.h5', 'rb.h5'])
    full = expected('report_worst.md').splitlines(keepends=True)
    head = full[:full.index(next(l for l in full if l.startswith('|:-:'))) + 4]
    check('--max-rows 3: three rows, the rest counted',
          p.stdout == ''.join(head) + '\n4 more tensors not shown (2 of them failing).\n', p.stdout)
    p = run(['-t', TOL, '--markdown', '-', '--junit', '-', 'ra.h5', 'rb.h5'])
    check('two reports to stdout: exit 2', p.returncode == 2, short(p))
    check('two reports to stdout: says why', 'standard output' in p.stderr, p.stderr)


def test_usage():
    for args in (['--sort', 'best'], ['--baseline-factor', '0.5'], ['--baseline-factor', 'nan'],
                 ['--baseline-factor', 'x'], ['--markdown'], ['--max-rows', '0'],
                 ['--max-rows', '-1'], ['--max-rows', '2x']):
        p = run(['-t', TOL] + args + ['ra.h5', 'rb.h5'])
        check('usage %r: exit 2' % args, p.returncode == 2, short(p))
        check('usage %r: message' % args, p.stderr.startswith('paritycheck: '), p.stderr)
    p = run(['-t', TOL, '--markdown', '/nonexistent-dir/r.md', 'ra.h5', 'rb.h5'])
    check('unwritable --markdown: exit 2', p.returncode == 2, short(p))
    check('unwritable --markdown: names the file', '/nonexistent-dir/r.md' in p.stderr, p.stderr)
    # both are judged before the data are opened: B does not exist, and is not the complaint
    for args, says in ((['--json', 'ok.json', '--save-baseline', '/nonexistent-dir/b.json'],
                        '/nonexistent-dir/b.json'),
                       (['--markdown', '-', '--junit', '-'], 'standard output')):
        p = run(['-t', TOL] + args + ['ra.h5', 'no-such-b.h5'])
        check('%r, no B: exit 2' % args, p.returncode == 2, short(p))
        check('%r: reported before the data are opened' % args,
              says in p.stderr and 'no-such-b.h5' not in p.stderr, p.stderr)
    p = run(['--help'])
    for opt in ('--markdown', '--junit', '--html', '--sort', '--verbose', '--save-baseline',
                '--baseline', '--baseline-factor', '--max-rows'):
        check('--help lists %s' % opt, opt in p.stdout)


# ------------------------------------------------------------------------------------------
# Statistics
# ------------------------------------------------------------------------------------------


def bucket(u):
    return 0 if u == 0 else int(u).bit_length()


def numpy_figures(a, b):
    """docs/metrics.md "Aggregate sums" and "Error distribution" for float32 tensors, computed
    here from the values: sums with math.fsum (exact rounding), ULPs by pc_reference."""
    nan_mm = np.isnan(a) != np.isnan(b)
    keep = ~nan_mm
    both_nan = np.isnan(a) & np.isnan(b)
    ak, bk = np.where(both_nan, 0, a)[keep], np.where(both_nan, 0, b)[keep]
    with np.errstate(invalid='ignore'):
        absv = np.where(ak == bk, 0.0, np.abs(bk - ak))  # equal infinities are equal
    with np.errstate(divide='ignore', invalid='ignore'):
        rel = np.where(absv == 0, 0.0, np.where(ak == 0, np.inf, absv / np.abs(ak)))
    ulp = ref.ulp_distance(ref.ordinal(ak, 'float32'), ref.ordinal(bk, 'float32'))
    fin = np.isfinite(a) & np.isfinite(b)
    fa, fb = a[fin], b[fin]
    saa, sbb = math.fsum(fa * fa), math.fsum(fb * fb)
    sab, sdd = math.fsum(fa * fb), math.fsum((fb - fa) ** 2)
    n = len(ak)
    hist = {}
    for u in ulp:
        hist[bucket(int(u))] = hist.get(bucket(int(u)), 0) + 1
    return dict(
        mean_abs=math.fsum(absv) / n if n else 0.0,
        mean_rel=math.fsum(rel) / n if n else 0.0,
        rms=math.sqrt(sdd / len(fa)) if len(fa) else 0.0,
        rel_rms=math.sqrt(sdd / saa) if saa else (0.0 if sdd == 0 else math.inf),
        cosine=(sab / math.sqrt(saa * sbb)) if saa and sbb else (1.0 if saa == sbb else 0.0),
        snr_db=(10 * math.log10(saa / sdd)) if sdd and saa else (math.inf if sdd == 0
                                                                  else -math.inf),
        scale_error=(math.fsum(fa * (fb - fa)) / saa) if saa else (0.0 if sbb == 0 else math.inf),
        hist=hist)


def close(x, y):
    if isinstance(x, str) or isinstance(y, str):
        return ref.from_json_number(x) == ref.from_json_number(y) or x == y
    if math.isinf(x) or math.isinf(y):
        return x == y
    return abs(x - y) <= 1e-9 * max(abs(x), abs(y)) + 1e-300


def check_statistics(label, report, path_a, path_b):
    for t in report['tensors']:
        if t['verdict'] not in ('pass', 'drift'):
            for k in ('mean_abs', 'rms', 'ulp_hist', 'quantiles'):
                check('%s %s: no %s when not compared' % (label, t['path'], k), k not in t)
            continue
        a, b = arrays(path_a, path_b, t['path'])
        want = numpy_figures(a, b)
        for k in ('mean_abs', 'mean_rel', 'rms', 'rel_rms', 'cosine', 'snr_db', 'scale_error'):
            check('%s %s: %s' % (label, t['path'], k), close(t.get(k), want[k]),
                  'want %r, got %r' % (want[k], t.get(k)))
        hist = t.get('ulp_hist', [])
        got = {k: c for k, c in enumerate(hist) if c}
        check('%s %s: ulp_hist' % (label, t['path']), got == want['hist'] and
              (not hist or hist[-1] != 0), 'want %r, got %r' % (want['hist'], hist))
        q = t.get('quantiles')
        check('%s %s: quantiles p50..p99.9 of abs, rel, ulp' % (label, t['path']),
              isinstance(q, dict) and list(q) == ['p50', 'p90', 'p99', 'p99.9'] and
              all(list(v) == ['abs', 'rel', 'ulp'] for v in q.values()), repr(q))


def test_statistics():
    path = os.path.join(TMP, 'stats.json')
    p = run(['-t', TOL, '--json', path, 'ra.h5', 'rb.h5'])
    report = json.loads(read(path))
    check('statistics: hand fixture histograms as derived',
          {t['path']: {k: c for k, c in enumerate(t['ulp_hist']) if c}
           for t in report['tensors'] if 'ulp_hist' in t} == HIST, short(p))
    check_statistics('fixture', report, os.path.join(TMP, 'ra.h5'), os.path.join(TMP, 'rb.h5'))
    a = os.path.join(SRC, 'fixtures', 'real', 'attention_cpu_fp32.h5')
    b = os.path.join(SRC, 'fixtures', 'real', 'attention_cuda_fp32.h5')
    p = run(['--json', path, a, b])
    check_statistics('attention cpu vs cuda', json.loads(read(path)), a, b)


def test_verbose_text():
    p = run(['-t', TOL, '-v', 'ra.h5', 'rb.h5'])
    # gelu: mean abs (2^-23 + 2^-22) / 1000 = 3.58e-10, mean ulp 3 / 1000; rms
    # sqrt((2^-46 + 2^-44) / 1000) = 2^-23 sqrt(0.005) = 8.43e-9, and so is rel_rms (sum a^2 =
    # 1000); snr 10 log10(1000 * 2^46 / 5) = 161.5
    check('-v: gelu statistics line',
          'mean abs 3.58e-10, rel 3.58e-10, ulp 0.003; rms 8.43e-09, rel_rms 8.43e-09, '
          'cosine 1, snr 161 dB' in p.stdout, p.stdout)
    check('-v: gelu histogram line', 'ulp histogram: 0: 998, 1: 1, 2-3: 1\n' in p.stdout,
          p.stdout)
    check('-v: quantile line', 'p50/p90/p99/p99.9: abs 0/0/0/' in p.stdout, p.stdout)
    q = run(['-t', TOL, 'ra.h5', 'rb.h5'])
    check('without -v: no statistics', 'ulp histogram' not in q.stdout, q.stdout)
    header = [ln for ln in q.stdout.splitlines() if ln.startswith('verdict ')]
    check('key figures: an snr_db column', header and 'snr_db' in header[0], q.stdout)


# ------------------------------------------------------------------------------------------
# JUnit
# ------------------------------------------------------------------------------------------


def xmllint(path):
    return subprocess.run(['xmllint', '--noout', '--schema', XSD, path], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)


def test_schema_rejects():
    """The schema is not vacuous: a testcase without a classname, or with two outcomes, fails."""
    for label, doc in (('no classname', '<testcase name="x"/>'),
                       ('two outcomes', '<testcase name="x" classname="c"><failure message="m"/>'
                                        '<error message="m"/></testcase>')):
        path = os.path.join(TMP, 'bad.xml')
        with open(path, 'w') as fh:
            fh.write('<testsuites tests="1" failures="0" errors="0" skipped="0"><testsuite '
                     'name="s" tests="1" failures="0" errors="0" skipped="0">%s</testsuite>'
                     '</testsuites>' % doc)
        check('junit.xsd rejects %s' % label, xmllint(path).returncode != 0)


def test_junit():
    path = os.path.join(TMP, 'r.xml')
    p = run(['-t', TOL, '--junit', path, 'ra.h5', 'rb.h5'])
    check('junit: exit 1', p.returncode == 1, short(p))
    v = xmllint(path)
    check('junit: valid against junit.xsd', v.returncode == 0, v.stdout)
    root = ET.parse(path).getroot()
    suite = root.find('testsuite')
    cases = suite.findall('testcase')
    check('junit: one testcase per tensor, run order',
          [(c.get('classname'), c.get('name')) for c in cases] ==
          [('act', 'relu'), ('act', 'gelu'), ('act', 'nan'), ('out', 'logits'),
           ('(root)', 'only_a'), ('meta', 'name'), ('shape', 'x')],
          [(c.get('classname'), c.get('name')) for c in cases])
    counts = {k: suite.get(k) for k in ('tests', 'failures', 'errors', 'skipped')}
    check('junit: counts', counts == {'tests': '7', 'failures': '5', 'errors': '0',
                                      'skipped': '1'}, counts)
    check('junit: root counts as the suite', all(root.get(k) == v for k, v in counts.items()))
    by = {c.get('name'): c for c in cases}
    gelu = by['gelu'].find('failure')
    # the judge's reason: 1 of 1000 elements against torch's float32 tolerance, none allowed;
    # its diagnosis: noise, rel_rms = sqrt((2^-23)^2 + (2^-22)^2) / sqrt(1000) = 8.43e-9
    gelu_diagnosis = ('noise-like, no pattern proven (rel_rms 8.43e-09); '
                      'a reference run (--reference) or an envelope (--envelope) can decide')
    check('junit: gelu failure message',
          gelu is not None and gelu.get('message') ==
          'mismatch_fraction 0.001 > limit 0 (1 of 1000 elements); diagnosis: ' +
          gelu_diagnosis + '; worst [20]: a=1, b=1.0000002',
          None if gelu is None else gelu.get('message'))
    check('junit: gelu failure body, full precision',
          gelu is not None and 'worst [20]: a=1, b=1.0000002384185791' in gelu.text, gelu.text)
    check('junit: gelu failure body, diagnosis',
          gelu is not None and '\ndiagnosis ' + gelu_diagnosis + '\n' in gelu.text, gelu.text)
    nan = by['nan'].find('failure')
    check('junit: nan failure names the nan mismatch', nan is not None and
          nan.get('message').startswith('nan_mismatch 1 > limit 0; mismatch_fraction 0.5 > limit 0'),
          None if nan is None else nan.get('message'))
    check('junit: nan failure gives its diagnosis', nan is not None and
          '; diagnosis: NaN injected (1 elements); ' in nan.get('message'),
          None if nan is None else nan.get('message'))
    # /out/logits fails after /act/nan with a finite error: a NaN upstream does not explain it
    # (docs/tolerance-model.md, "Cascades"), and /act/gelu, the one finite failure before it, is
    # 2.4e-7 / 2 off against its 0.0079: a root cause of its own
    logits = by['logits'].find('failure')
    check('junit: logits is a root cause', logits is not None and
          'caused by' not in logits.get('message') + logits.text,
          None if logits is None else logits.get('message'))
    check('junit: missing tensor', by['only_a'].find('failure').get('message') == 'only in A')
    check('junit: skipped tensor', by['name'].find('skipped') is not None)
    check('junit: passing tensor has no outcome', len(list(by['relu'])) == 0)
    props = {q.get('name'): q.get('value') for q in suite.find('properties')}
    check('junit: properties', props.get('verdict') == 'drift' and
          props.get('first_divergence') == '/act/gelu' and props.get('a') == 'ra.h5', props)


# ------------------------------------------------------------------------------------------
# HTML in headless Chromium
# ------------------------------------------------------------------------------------------


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


def test_html():
    if not check('chromium is installed (scripts/install-deps.sh)', chromium() is not None):
        return
    page = os.path.join(TMP, 'r.html')
    p = run(['-t', TOL, '--html', page, 'ra.h5', 'rb.h5'])
    check('html: exit 1', p.returncode == 1, short(p))
    text = read(page)
    check('html: self-contained (no src/href/url()/@import)',
          not any(s in text for s in ('src=', 'href=', 'url(', '@import')))
    proc, rows = rendered_rows(page)
    paths = [r['cells'][2] for r in rows]
    check('html: rendered rows, worst first', paths == WORST_ORDER,
          '%r; stderr %r' % (paths, proc.stderr[-500:]))
    verdicts = {r['cells'][2]: r['cells'][1] for r in rows}
    check('html: verdict cells', verdicts == VERDICTS, verdicts)
    # a rect per nonempty histogram bucket, none for tensors that were not compared
    bars = {r['cells'][2]: r['rects'] for r in rows}
    want = {p: len(HIST.get(p, {})) for p in RUN_ORDER}
    check('html: one SVG bar per nonempty ULP bucket', bars == want, bars)
    by = {r['cells'][2]: r['cells'] for r in rows}
    check('html: logits figures', by.get('/out/logits', [])[5:11] ==
          ['1/1000', '0.5', '0.25', '2097152', '0', '42'], by.get('/out/logits'))
    # sorting: a click on "max ULP" (first click: largest first), run in the page itself
    clicked = os.path.join(TMP, 'clicked.html')
    with open(clicked, 'w', encoding='utf-8') as fh:
        fh.write(text.replace('</body>', '<script>Array.prototype.find.call(document.querySelectorAll('
                              '"#delta th"), function (th) { return th.textContent === "max ULP"; '
                              '}).click();</script></body>'))
    proc, rows = rendered_rows(clicked)
    paths = [r['cells'][2] for r in rows]
    check('html: sorted by max ULP, largest first, no figure last',
          paths[:2] == ['/out/logits', '/act/gelu'] and
          set(paths[2:4]) == {'/act/nan', '/act/relu'} and
          set(paths[4:]) == {'/only_a', '/meta/name', '/shape/x'}, paths)
    shot = os.path.join(TMP, 'shot.png')
    proc = browse(['--screenshot=' + shot, '--window-size=1200,900'], 'file://' + page)
    if check('html: screenshot taken', os.path.exists(shot), proc.stderr[-500:]):
        from PIL import Image
        img = Image.open(shot).convert('RGB')
        colors = img.getcolors(maxcolors=1 << 20) or []
        white = sum(c for c, rgb in colors if rgb == (255, 255, 255))
        inked = 1 - white / (img.width * img.height)
        check('html: screenshot is not blank', len(colors) > 8 and inked > 0.02,
              '%d colours, %.3f inked' % (len(colors), inked))


# ------------------------------------------------------------------------------------------
# Baseline gate
# ------------------------------------------------------------------------------------------


def gate_run(b, extra=()):
    path = os.path.join(TMP, 'gate.json')
    if os.path.exists(path):
        os.unlink(path)
    p = run(['-t', TOL, '--baseline', 'base.json', '--json', path] + list(extra) + ['ra.h5', b])
    report = json.loads(read(path)) if os.path.exists(path) else None
    return p, report


def changes(report):
    return {t['path']: (t['baseline']['change'], t['baseline']['fails_gate'])
            for t in report['tensors']}


def test_baseline_gate():
    p = run(['-t', TOL, '--save-baseline', 'base.json', 'ra.h5', 'rb.h5'])
    check('save-baseline: exit 1 (the run drifts)', p.returncode == 1, short(p))
    # the same run against its own baseline: every drift is accepted
    p, report = gate_run('rb.h5')
    check('gate, same run: exit 0', p.returncode == 0, short(p))
    check('gate, same run: all unchanged', report is not None and
          set(changes(report).values()) == {('unchanged', False)}, report and changes(report))
    check('gate, same run: text says GATE PASS', 'GATE PASS: 0 tensors fail' in p.stdout, p.stdout)
    check('gate, same run: JSON run verdict still drift', report and report['verdict'] == 'drift')
    # gelu has 3 of 1000 mismatches instead of 1: 0.003 > 2 x 0.001, worse
    p, report = gate_run('rb_worse.h5', ['--sort', 'order', '--markdown', 'gate.md',
                                         '--junit', 'gate.xml'])
    check('gate, worse: exit 1', p.returncode == 1, short(p))
    want = {path: ('unchanged', False) for path in RUN_ORDER}
    want['/act/gelu'] = ('worse', True)
    check('gate, worse: labels', report is not None and changes(report) == want,
          report and changes(report))
    check('gate, worse: summary', report and report['baseline'] == {
        'file': 'base.json', 'factor': 2.0, 'verdict': 'drift', 'fails_gate': 1, 'new': 0,
        'worse': 1, 'better': 0, 'unchanged': 6, 'baseline_only': 0}, report and
        report.get('baseline'))
    got = read(os.path.join(TMP, 'gate.md'))
    check('gate markdown == expected/report_order_gate.md',
          got == expected('report_order_gate.md'), got)
    v = xmllint(os.path.join(TMP, 'gate.xml'))
    check('gate junit: valid', v.returncode == 0, v.stdout)
    suite = ET.parse(os.path.join(TMP, 'gate.xml')).getroot().find('testsuite')
    check('gate junit: only the gated tensor fails', suite.get('failures') == '1' and
          [c.get('name') for c in suite.findall('testcase') if c.find('failure') is not None] ==
          ['gelu'])
    # a larger factor accepts it: 0.003 <= 4 x 0.001
    p, report = gate_run('rb_worse.h5', ['--baseline-factor', '4'])
    check('gate, factor 4: exit 0', p.returncode == 0, short(p))
    check('gate, factor 4: gelu unchanged', report and
          changes(report)['/act/gelu'] == ('unchanged', False))
    # the other way round: the worse run as baseline, the first as the run: gelu better
    run(['-t', TOL, '--save-baseline', 'worse.json', 'ra.h5', 'rb_worse.h5'])
    p = run(['-t', TOL, '--baseline', 'worse.json', '--json', 'better.json', 'ra.h5', 'rb.h5'])
    report = json.loads(read(os.path.join(TMP, 'better.json')))
    check('gate, better: exit 0', p.returncode == 0, short(p))
    check('gate, better: gelu better', changes(report)['/act/gelu'] == ('better', False))
    # a tensor the baseline does not know, failing: new, and the gate fails
    p = run(['-t', TOL, '--allow-same', '--baseline', 'base.json', '--json', 'new.json', 'ra.h5',
             'ra.h5'])
    report = json.loads(read(os.path.join(TMP, 'new.json')))
    check('gate, A vs A: exit 0 (better everywhere)', p.returncode == 0, short(p))
    p = run(['-t', TOL, '--baseline', 'base.json', 'rb.h5', 'ra.h5'])
    # /only_a: missing_in_b in the baseline, missing_in_a now: another failure, so worse
    check('gate, B vs A: /only_a fails otherwise than before: exit 1', p.returncode == 1,
          short(p))
    check('gate, B vs A: text labels it WORSE', 'MISSING_IN_A    WORSE      /only_a' in p.stdout,
          p.stdout)
    p = run(['-t', TOL, '--baseline', 'base.json', 'ra.h5', 'rb_extra.h5'])
    check('gate, a tensor only in B: exit 1', p.returncode == 1, short(p))
    check('gate, a tensor only in B: labelled NEW', 'MISSING_IN_A    NEW        /extra'
          in p.stdout, p.stdout)
    # errors: the baseline cannot be read
    for label, content in (('missing', None), ('not JSON', '{'), ('not a baseline', '{}')):
        path = os.path.join(TMP, 'bad_base.json')
        if os.path.exists(path):
            os.unlink(path)
        if content is not None:
            with open(path, 'w') as fh:
                fh.write(content)
        p = run(['-t', TOL, '--baseline', path, 'ra.h5', 'rb.h5'])
        check('bad baseline (%s): exit 2' % label, p.returncode == 2, short(p))
        check('bad baseline (%s): names the file' % label, path in p.stderr, p.stderr)
        # read before the data: B does not exist, and only the baseline is reported
        p = run(['-t', TOL, '--baseline', path, 'ra.h5', 'no-such-b.h5'])
        check('bad baseline (%s), no B: exit 2' % label, p.returncode == 2, short(p))
        check('bad baseline (%s): reported before the data are opened' % label,
              path in p.stderr and 'no-such-b.h5' not in p.stderr, p.stderr)


# ------------------------------------------------------------------------------------------
# A cascade: reasons, root causes and the first divergence in every format
# ------------------------------------------------------------------------------------------

CASCADE_PROFILE = 'tf32'
# The tf32 profile's model coefficients, copied into a tolerance file of the test's own, so that
# allowances a profile may gain later (a run's trend, a noise floor) leave the limits below as
# they are: each is the profile's coefficient times u, and the cascade rule's G is 1.
CASCADE_KEYS = ('atol', 'rtol', 'max_mismatch_fraction', 'precision', 'accumulation', 'atol_rms',
                'rtol_u', 'rtol_sqrt_k', 'max_rel_rms_u', 'max_scale_u', 'max_scale_u_sqrt_n')
# An injected bug on the real attention pair (A cpu fp32, B the honest cuda tf32 dump, which
# passes the tf32 profile): /activations/005_proj scaled by 1 + 2%, the three tensors after it
# in execution order by a proportional, smaller amount (as a bug's effect fades downstream),
# and an independent bug later, a doubled gradient.
CASCADE_ROOT = 'activations/005_proj'
CASCADE_SCALES = {CASCADE_ROOT: 0.02, 'activations/006_ln2': 0.01, 'activations/007_fc1': 0.005,
                  'activations/008_act': 0.0025}
CASCADE_OTHER = 'gradients/fc1.weight'
CRITERIA = ('nan_mismatch', 'inf_mismatch', 'mismatch_fraction', 'rel_rms', 'scale_error')
# The reports also name the structure criterion, whose statistic fails below its limit for a
# scale test's p-value (docs/reports.md, "Diagnosis").
REASON_RE = re.compile(r'(%s|structure) ([^\s;`]+) [<>] limit ([^\s;`]+)' % '|'.join(CRITERIA))


def cascade_coefficients():
    import yaml
    with open(os.path.join(SRC, 'tolerances', CASCADE_PROFILE + '.yaml')) as fh:
        profile = yaml.safe_load(fh)['defaults']['all']
    return {k: profile[k] for k in CASCADE_KEYS if k in profile}


def make_cascade():
    import yaml
    with open(os.path.join(TMP, 'cascade.yaml'), 'w') as fh:
        yaml.safe_dump({'version': 1, 'defaults': {'all': cascade_coefficients()}}, fh)
    src = os.path.join(SRC, 'fixtures', 'real', 'attention_cuda_tf32.h5')
    dst = os.path.join(TMP, 'cascade_b.h5')
    shutil.copy(src, dst)
    with h5py.File(dst, 'r+') as f:
        for name, d in CASCADE_SCALES.items():
            f[name][...] = (f[name][()].astype(np.float64) * (1 + d)).astype(np.float32)
        f[CASCADE_OTHER][...] = f[CASCADE_OTHER][()] * np.float32(2)
    return os.path.join(SRC, 'fixtures', 'real', 'attention_cpu_fp32.h5'), dst


def inferred_order(names):
    """Execution order from the paths alone (docs/tolerance-model.md, "Execution order"), as the
    dumps hold no execution_index: inputs, forward tensors in file order, outputs and losses,
    then gradients in backward order: by their module's forward position, last first, and a
    module's own parameters last stored first."""
    def module(n):  # activations/005_proj -> proj
        return n.split('/')[1].split('_', 1)[1]
    inputs = [n for n in names if n.startswith('inputs/')]
    forward = [n for n in names if n.startswith('activations/')]
    outputs = [n for n in names if n.startswith('outputs/')]
    grads = [n for n in names if n.startswith('gradients/')]
    pos = {module(n): k for k, n in enumerate(forward)}
    grads.sort(key=lambda n: (-pos[n.split('/')[1].rsplit('.', 1)[0]], -names.index(n)))
    return inputs + forward + outputs + grads


def expected_cascade(path_a, path_b):
    """Everything the reports must show, computed here in numpy from the two files and the
    profile's YAML: per tensor the reasons (criterion, value, limit) in the judge's order, the
    root cause, the execution index; and the first divergence."""
    import tolerance_model as score  # the numpy tolerance model (tests/oracle): atol, rtol
    coef = cascade_coefficients()
    u = 2.0 ** -11  # precision tf32: 10 stored mantissa bits, coarser than float32's 2^-24
    assert coef['precision'] == 'tf32'
    growth = 1.0  # G of the cascade rule: the tolerance file sets no trend_growth
    layers = score.load_layers() + [{'all': coef}]
    A, B = score.Dump(path_a), score.Dump(path_b)
    order = inferred_order(A.order)
    want = {}
    for n in A.order:
        a, _, K, acc = A.t[n]
        b = B.t[n][0]
        tol = score.resolve(layers, 'float32', K, acc, score.magnitude_rms(a))
        bad, _ = score.element_mismatches(a, b, tol['atol'], tol['rtol'])
        fin = np.isfinite(a) & np.isfinite(b)
        fa, fb = a[fin], b[fin]
        saa = math.fsum(fa * fa)
        rel_rms = math.sqrt(math.fsum((fb - fa) ** 2) / saa)
        scale = abs(math.fsum(fa * (fb - fa)) / saa)
        limits = {'nan_mismatch': 0.0, 'inf_mismatch': 0.0,
                  'mismatch_fraction': coef['max_mismatch_fraction'],
                  'rel_rms': coef['max_rel_rms_u'] * u,
                  'scale_error': (coef['max_scale_u'] + coef['max_scale_u_sqrt_n'] /
                                  math.sqrt(len(fa))) * u}
        values = {'nan_mismatch': int((np.isnan(a) != np.isnan(b)).sum()),
                  'inf_mismatch': int(((np.isinf(a) | np.isinf(b)) & (a != b)).sum()),
                  'mismatch_fraction': bad / a.size, 'rel_rms': rel_rms, 'scale_error': scale}
        reasons = [(c, values[c], limits[c]) for c in CRITERIA if values[c] > limits[c]]
        if n == CASCADE_OTHER:
            # B = 2 A exactly: all of the error lies along A (cos^2 1), where the beta law of
            # isotropic noise puts it with probability 0, below the judge's false-alarm rate
            # 1e-6: the structure criterion fails too (scaled by 2.000)
            # -log10 of the beta tail, which underflows: -log10(DBL_MIN), against -log10(1e-6)
            reasons.append(('structure', -math.log10(2.2250738585072014e-308), 6.0))
        want['/' + n] = {'reasons': reasons, 'rel_rms': rel_rms,
                         'execution_index': order.index(n), 'caused_by': None}
    # the cascade rule, in execution order: a NaN or inf failure is explained by an earlier one,
    # a finite failure when the worst earlier finite one is at least 1/G as far off (by
    # rel_rms); it is then caused by that one's root; the first failure is a root, and the
    # first divergence
    worst, first_special, first = None, None, None
    for n in order:
        t = want['/' + n]
        if not t['reasons']:
            continue
        special = t['reasons'][0][0] in CRITERIA[:2]
        first = first or '/' + n
        if special:
            if first_special is not None:
                t['caused_by'] = want[first_special]['caused_by'] or first_special
            first_special = first_special or '/' + n
            continue
        if worst is not None and worst[1] * growth >= t['rel_rms']:
            t['caused_by'] = want[worst[0]]['caused_by'] or worst[0]
        if worst is None or t['rel_rms'] > worst[1]:
            worst = ('/' + n, t['rel_rms'])
    return want, first


def same_reasons(label, got, want, digits):
    """got: [(criterion, value, limit)] as the report shows them; at 17 digits they must agree
    with numpy to 1e-9 (sums in another order), at 3 be numpy's value rounded to 3 digits."""
    def same(x, y):
        if digits == 3:
            return x in {'%.3g' % v for v in (y, y * (1 + 1e-9), y * (1 - 1e-9))}
        return abs(float(x) - y) <= 1e-9 * abs(y)
    ok = [c for c, _, _ in got] == [c for c, _, _ in want] and all(
        same(gv, wv) and same(gl, wl) for (_, gv, gl), (_, wv, wl) in zip(got, want))
    check(label, ok, 'got %r, numpy %r' % (got, want))


def test_cascade():
    a, b = make_cascade()
    want, first = expected_cascade(a, b)
    members = sorted(p for p, t in want.items() if t['caused_by'])
    roots = sorted(p for p, t in want.items() if t['reasons'] and not t['caused_by'])
    root = '/' + CASCADE_ROOT
    # the fixture is what it was made to be, by the rule: the bug at the root explains the three
    # after it, the doubled gradient is a root of its own, nothing else fails
    check('cascade fixture: members and roots by the cascade rule',
          members == sorted('/' + n for n in CASCADE_SCALES if n != CASCADE_ROOT) and
          all(want[m]['caused_by'] == root for m in members) and
          roots == sorted([root, '/' + CASCADE_OTHER]) and first == root,
          (members, roots, first))
    out = {k: os.path.join(TMP, 'cascade.' + k) for k in ('json', 'md', 'xml', 'html')}
    tol = ['-t', os.path.join(TMP, 'cascade.yaml')]
    p = run(tol + ['--json', out['json'], '--markdown', out['md'], '--junit', out['xml'],
                   '--html', out['html'], a, b])
    check('cascade: exit 1', p.returncode == 1, short(p))

    # JSON
    rep = json.loads(read(out['json']))
    check('cascade JSON: version 2', rep['version'] == 2, rep['version'])
    check('cascade JSON: first_divergence is the root', rep['first_divergence'] == first,
          rep['first_divergence'])
    check('cascade JSON: roots', rep['summary']['roots'] == len(roots), rep['summary'])
    for t in rep['tensors']:
        w = want[t['path']]
        check('cascade JSON %s: execution_index' % t['path'],
              t['execution_index'] == w['execution_index'], t['execution_index'])
        check('cascade JSON %s: caused_by' % t['path'], t['caused_by'] == w['caused_by'],
              t['caused_by'])
        if t['verdict'] == 'pass':
            check('cascade JSON %s: a pass has no reasons' % t['path'],
                  'reasons' not in t and not w['reasons'])
            continue
        # The structure reason (a factor rounding cannot produce) is the judge's test of the
        # doubled gradient: checked by its diagnosis, the factor 1 + scale_error of numpy.
        got = [(r['criterion'], repr(r['value']), repr(r['limit'])) for r in t['reasons']]
        same_reasons('cascade JSON %s: reasons' % t['path'], got, w['reasons'], 17)
        if any(r['criterion'] == 'structure' for r in t['reasons']):
            scale = [r[1] for r in w['reasons'] if r[0] == 'scale_error']
            d = t.get('diagnosis', {})
            check('cascade JSON %s: diagnosis scaled by 1 + scale_error' % t['path'],
                  d.get('kind') == 'scaled' and scale and
                  abs(d['value'] - (1 + scale[0])) < 1e-9, (d, scale))
    other = next(t for t in rep['tensors'] if t['path'] == '/' + CASCADE_OTHER)
    check('cascade JSON: the doubled gradient is diagnosed as scaled by 2',
          other.get('diagnosis', {}).get('kind') == 'scaled' and
          other['diagnosis']['text'] == 'scaled by 2.000' and other['diagnosis']['structural'],
          other.get('diagnosis'))

    # text: under each failing tensor its reasons, "caused by" for the members; -q roots first
    failing = [path for path in want if want[path]['reasons']]
    for quiet in (False, True):
        p = run(tol + (['-q'] if quiet else []) + [a, b])
        lines = p.stdout.splitlines()
        label = 'cascade text%s' % (' -q' if quiet else '')
        # top-down: the summary line first, then the first divergence with its reasons
        check('%s: first divergence' % label,
              len(lines) > 1 and lines[0].endswith('; first divergence: %s' % first) and
              lines[1].startswith('first divergence: %s (drift): ' % first), lines[:2])
        where = {}
        for k, ln in enumerate(lines):
            f = ln.split()
            if len(f) > 1 and f[1] in want:
                where[f[1]] = k
        for path in failing:
            k = where.get(path)
            if not check('%s %s: listed' % (label, path), k is not None and k + 1 < len(lines)):
                continue
            detail = lines[k + 1]
            same_reasons('%s %s: reasons' % (label, path), REASON_RE.findall(detail),
                         want[path]['reasons'], 3)
            cause = want[path]['caused_by']
            check('%s %s: caused by' % (label, path),
                  ('; caused by %s;' % cause in detail) if cause else 'caused by' not in detail,
                  detail)
        if quiet:
            shown = sorted(where, key=where.get)
            check('cascade text -q: roots first, in run order, then the members',
                  shown == [q for q in want if q in roots] + [q for q in want if q in members],
                  shown)

    # Markdown: a row per root, "root cause" in bold, the members folded into the root's row
    md = read(out['md'])
    check('cascade Markdown: first divergence',
          '- **first divergence**: `%s`\n' % first in md, md[:600])
    rows = {re.match(r'\| [^|]*\| `([^`]*)`', ln).group(1): ln for ln in md.splitlines()
            if re.match(r'\| [^|]*\| `/', ln)}
    check('cascade Markdown: no row for a folded member', not set(members) & set(rows),
          sorted(rows))
    for r in roots:
        row = rows.get(r, '')
        details = row[:-len(' |')].rsplit(' | ', 1)[-1] if row else ''
        check('cascade Markdown %s: root cause, in bold' % r,
              details.startswith('**root cause** `'), details)
        own = details.split('<details>')[0]
        same_reasons('cascade Markdown %s: reasons' % r, REASON_RE.findall(own),
                     want[r]['reasons'], 3)
        mine = [m for m in members if want[m]['caused_by'] == r]
        fold = re.search(r'<details><summary>(\d+) tensors? caused by this</summary>(.*)'
                         r'</details>', details)
        if not mine:
            check('cascade Markdown %s: nothing folded' % r, fold is None, details)
            continue
        if not check('cascade Markdown %s: its %d members folded' % (r, len(mine)),
                     fold is not None and int(fold.group(1)) == len(mine), details):
            continue
        entries = fold.group(2).split('<br>')
        paths = [re.search(r'`(/[^`]*)`', e).group(1) for e in entries]
        check('cascade Markdown %s: members in execution order' % r,
              paths == sorted(mine, key=lambda m: want[m]['execution_index']), paths)
        for m, e in zip(paths, entries):
            same_reasons('cascade Markdown %s (folded): reasons' % m, REASON_RE.findall(e),
                         want[m]['reasons'], 3)

    # JUnit: the message states the reasons (and the root cause), the body at full precision
    v = xmllint(out['xml'])
    check('cascade JUnit: valid', v.returncode == 0, v.stdout)
    suite = ET.parse(out['xml']).getroot().find('testsuite')
    props = {q.get('name'): q.get('value') for q in suite.find('properties')}
    check('cascade JUnit: first_divergence property', props.get('first_divergence') == first,
          props)
    cases = {'/' + c.get('classname').replace('.', '/') + '/' + c.get('name'): c
             for c in suite.findall('testcase')}
    for path in failing:
        f = cases[path].find('failure')
        if not check('cascade JUnit %s: a failure' % path, f is not None):
            continue
        msg, body = f.get('message'), f.text
        same_reasons('cascade JUnit %s: message reasons' % path, REASON_RE.findall(msg),
                     want[path]['reasons'], 3)
        check('cascade JUnit %s: no element count as the only reason' % path,
              'outside tolerance' not in msg, msg)
        body_reasons = next((ln for ln in body.splitlines() if ln.startswith('reasons ')), '')
        same_reasons('cascade JUnit %s: body reasons, 17 digits' % path,
                     REASON_RE.findall(body_reasons), want[path]['reasons'], 17)
        cause = want[path]['caused_by']
        check('cascade JUnit %s: caused by' % path,
              ('; caused by %s;' % cause in msg and '\ncaused by %s\n' % cause in body)
              if cause else 'caused by' not in msg + body, msg)
        check('cascade JUnit %s: execution index' % path,
              '\nexecution index %d\n' % want[path]['execution_index'] in body, body[:300])

    # HTML in Chromium: the members' rows right after their root's, folded (hidden) by the
    # page's script; one click on the root's button unfolds them
    if not chromium():
        check('chromium is installed (scripts/install-deps.sh)', False)
        return
    proc, rendered = rendered_rows(out['html'])
    paths = [r['cells'][2] for r in rendered]
    by = {r['cells'][2]: r for r in rendered}
    k = paths.index(root) if root in paths else -1
    mine = sorted(members, key=lambda m: want[m]['execution_index'])
    check('cascade HTML: the members right after their root, in execution order',
          k >= 0 and paths[k + 1:k + 1 + len(mine)] == mine, paths)
    check('cascade HTML: members folded on load',
          all('hidden' in by[m]['attrs'] and 'cascade' in by[m]['attrs'].get('class', '')
              for m in mine) and not any('hidden' in by[r]['attrs'] for r in roots),
          {m: by.get(m, {}).get('attrs') for m in mine})
    for path in failing:
        details = by[path]['cells'][-1]
        same_reasons('cascade HTML %s: reasons' % path, REASON_RE.findall(details),
                     want[path]['reasons'], 3)
        cause = want[path]['caused_by']
        check('cascade HTML %s: root cause or caused by' % path,
              ('; caused by %s' % cause in details) if cause else
              details.startswith('root cause '), details)
    check('cascade HTML: the fold button counts the members',
          by[root]['cells'][-1].endswith('%d tensors caused by this' % len(mine)),
          by[root]['cells'][-1])
    clicked = os.path.join(TMP, 'cascade_clicked.html')
    with open(clicked, 'w', encoding='utf-8') as fh:
        fh.write(read(out['html']).replace(
            '</body>', '<script>document.querySelector("button.fold").click();</script></body>'))
    _, rendered = rendered_rows(clicked)
    check('cascade HTML: a click unfolds the members',
          all('hidden' not in r['attrs'] for r in rendered if r['cells'][2] in mine),
          [r['attrs'] for r in rendered if r['cells'][2] in mine])


# ------------------------------------------------------------------------------------------
# A real CPU-vs-CUDA pair, every output from one run
# ------------------------------------------------------------------------------------------


def test_real_pair():
    a = os.path.join(SRC, 'fixtures', 'real', 'attention_cpu_fp32.h5')
    b = os.path.join(SRC, 'fixtures', 'real', 'attention_cuda_tf32.h5')
    out = {k: os.path.join(TMP, 'real.' + k) for k in ('json', 'md', 'xml', 'html')}
    p = run(['--json', out['json'], '--markdown', out['md'], '--junit', out['xml'], '--html',
             out['html'], a, b])
    report = json.loads(read(out['json']))
    check('real pair: exit code is the JSON verdict',
          p.returncode == {'pass': 0, 'drift': 1, 'error': 2}[report['verdict']], short(p))
    n = len(report['tensors'])
    fails = sum(t['verdict'] not in ('pass', 'skipped', 'error') for t in report['tensors'])
    md = read(out['md']).splitlines()
    rows = [ln for ln in md if ln.startswith('| ') and '`/' in ln]
    # a row per tensor that no earlier failure explains; the others folded into their root's row
    folded = [t for t in report['tensors'] if t['caused_by'] is not None]
    summaries = [int(x) for r in rows for x in re.findall(r'<summary>(\d+) tensors? caused by', r)]
    check('real pair: a Markdown row per tensor but the folded ones',
          len(rows) == n - len(folded) and sum(summaries) == len(folded),
          (len(rows), n, len(folded), summaries))
    check('real pair: failing rows marked',
          sum(r.startswith('| \u274c') for r in rows) == fails - len(folded))
    v = xmllint(out['xml'])
    check('real pair: JUnit valid', v.returncode == 0, v.stdout)
    suite = ET.parse(out['xml']).getroot().find('testsuite')
    check('real pair: JUnit testcases', len(suite.findall('testcase')) == n and
          suite.get('failures') == str(fails))
    check('real pair: HTML rows', read(out['html']).count('<tr class=') == n)


def test_output_checks_unprivileged():
    """The early check of report files (src/cli/main.c, check_output) as an unprivileged user,
    for whom permissions count (root passes them all): an existing writable file in a folder
    it cannot write is overwritten; a new file there is refused before the data are opened.
    Needs root to switch users (setpriv), as on CI; skipped, and said so, otherwise."""
    setpriv = shutil.which('setpriv')
    if os.geteuid() != 0 or not setpriv:
        print('SKIP test_output_checks_unprivileged: needs root and setpriv')
        return
    room = tempfile.mkdtemp(prefix='pc_unpriv_')
    try:
        os.chmod(room, 0o755)  # nobody may enter and read, not write
        for f in ('ra.h5', 'rb.h5'):
            shutil.copy(os.path.join(TMP, f), room)
        shutil.copy(BIN, os.path.join(room, 'pc'))
        old = os.path.join(room, 'old.json')
        open(old, 'w').close()
        os.chown(old, 65534, -1)
        for path, code in ((old, 1), (os.path.join(room, 'new.json'), 2)):
            p = subprocess.run([setpriv, '--reuid=65534', '--regid=65534', '--clear-groups',
                                os.path.join(room, 'pc'), '--json', path, 'ra.h5',
                                'rb.h5' if code == 1 else 'no-such-b.h5'],
                               cwd=room, capture_output=True, text=True, timeout=120)
            check('unprivileged --json %s: exit %d' % (os.path.basename(path), code),
                  p.returncode == code, short(p))
        check('unprivileged: the existing file was written', os.path.getsize(old) > 0)
        check('unprivileged: the new file is refused by name',
              'new.json' in p.stderr and 'no-such-b.h5' not in p.stderr, p.stderr)
    finally:
        shutil.rmtree(room)


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
    return subprocess.run([BIN] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          cwd=TMP, timeout=120, **kw)


def test_hostile_names():
    """Names with control, bidi and invalid bytes: visible escapes in text, Markdown, JUnit and
    HTML, no raw control character in any of them, the exact names in the JSON; no forged
    'PASS:' line; stderr escapes paths, tolerance-file text and arguments the same way."""
    a, b = os.path.join(TMP, 'hostile_a.h5'), os.path.join(TMP, 'hostile_b.h5')
    write_hostile(a, 'a')
    write_hostile(b, 'b')
    out = {k: os.path.join(TMP, 'hostile.' + k) for k in ('json', 'md', 'xml', 'html')}
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
    evil = os.path.join(TMP, 'evil\x1b]0;pwned\x07\nPASS.h5')
    with open(evil, 'wb') as fh:
        fh.write(b'not hdf5')
    tol = os.path.join(TMP, 'hostile.yaml')
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


TESTS = [test_all_outputs_one_run, test_markdown_to_stdout, test_usage, test_statistics,
         test_verbose_text, test_schema_rejects, test_junit, test_html, test_baseline_gate,
         test_cascade, test_real_pair, test_output_checks_unprivileged, test_hostile_names]


def main(argv):
    global BIN, SRC, TMP
    if len(argv) != 2:
        print('usage: test_reports.py PARITYCHECK_BINARY SOURCE_DIR', file=sys.stderr)
        return 2
    BIN, SRC = os.path.abspath(argv[0]), os.path.abspath(argv[1])
    with tempfile.TemporaryDirectory(prefix='pc_reports_') as tmp:
        TMP = tmp
        make_fixtures()
        return run_tests(TESTS)


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
