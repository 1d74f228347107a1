#!/usr/bin/python3
"""End-to-end tests of paritycheck's JUnit and HTML reports (test_reports.py's part), on the
hand-made fixture pair: the JUnit file validated with xmllint against tests/report/junit.xsd
(which must itself reject bad files) and its cases, counts and messages; the HTML page loaded in
headless Chromium, its rendered rows read back, a column sorted by a click, and a screenshot
that must not be blank.

    /usr/bin/python3 tests/report/test_reports_junit_html.py PATH/TO/paritycheck SOURCE_DIR

Prints one line per failure and "N passed, M failed" last.
"""

import os
import sys
import xml.etree.ElementTree as ET

import reports_common as fixture  # first: it puts tests/ on the path
from checks import check  # noqa: E402
from reports_common import (HIST, RUN_ORDER, TOL, VERDICTS, WORST_ORDER, browse,  # noqa: E402
                            chromium, read, rendered_rows, run, short, xmllint)


# ------------------------------------------------------------------------------------------
# JUnit
# ------------------------------------------------------------------------------------------


def test_schema_rejects():
    """The schema is not vacuous: a testcase without a classname, or with two outcomes, fails."""
    for label, doc in (('no classname', '<testcase name="x"/>'),
                       ('two outcomes', '<testcase name="x" classname="c"><failure message="m"/>'
                                        '<error message="m"/></testcase>')):
        path = os.path.join(fixture.TMP, 'bad.xml')
        with open(path, 'w') as fh:
            fh.write('<testsuites tests="1" failures="0" errors="0" skipped="0"><testsuite '
                     'name="s" tests="1" failures="0" errors="0" skipped="0">%s</testsuite>'
                     '</testsuites>' % doc)
        check('junit.xsd rejects %s' % label, xmllint(path).returncode != 0)


def test_junit():
    path = os.path.join(fixture.TMP, 'r.xml')
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


def test_html():
    if not check('chromium is installed (scripts/install-deps.sh)', chromium() is not None):
        return
    page = os.path.join(fixture.TMP, 'r.html')
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
    clicked = os.path.join(fixture.TMP, 'clicked.html')
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
    shot = os.path.join(fixture.TMP, 'shot.png')
    proc = browse(['--screenshot=' + shot, '--window-size=1200,900'], 'file://' + page)
    if check('html: screenshot taken', os.path.exists(shot), proc.stderr[-500:]):
        from PIL import Image
        img = Image.open(shot).convert('RGB')
        colors = img.getcolors(maxcolors=1 << 20) or []
        white = sum(c for c, rgb in colors if rgb == (255, 255, 255))
        inked = 1 - white / (img.width * img.height)
        check('html: screenshot is not blank', len(colors) > 8 and inked > 0.02,
              '%d colours, %.3f inked' % (len(colors), inked))


TESTS = [
    test_schema_rejects,
    test_junit,
    test_html,
]


if __name__ == '__main__':
    sys.exit(fixture.main(sys.argv[1:], TESTS, 'test_reports_junit_html.py'))
