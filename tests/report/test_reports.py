#!/usr/bin/python3
"""End-to-end tests of paritycheck's report files: Markdown, the statistics in the JSON and the
text, the baseline gate, and every output of one run on a real pair, all from single runs of
the binary.

    /usr/bin/python3 tests/report/test_reports.py PATH/TO/paritycheck SOURCE_DIR

The fixture pair is written with h5py (reports_common.py) from values chosen so that every figure
can be derived by hand; tests/report/expected/*.md hold the Markdown those derivations give
(written by hand). The statistics in the JSON are recomputed with numpy (ULP distances by
tests/oracle/pc_reference.py). The other reports, by job: test_reports_junit_html.py (JUnit
against tests/report/junit.xsd with xmllint, HTML in headless Chromium),
test_reports_cascade.py (a cascade in all five formats) and test_reports_names.py (untrusted
names). Prints one line per failure and "N passed, M failed" last.
"""

import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

import numpy as np

import reports_common as fixture  # first: it puts tests/ and tests/oracle on the path
from checks import check  # noqa: E402
import pc_reference as ref  # noqa: E402
from reports_common import (HIST, RUN_ORDER, TOL, VERDICTS, arrays, expected, read,  # noqa: E402
                            run, short, xmllint)


# ------------------------------------------------------------------------------------------
# Markdown
# ------------------------------------------------------------------------------------------


def test_all_outputs_one_run():
    """One run writes text, JSON, Markdown, JUnit, HTML and a baseline; the Markdown is the file
    derived by hand."""
    outs = {k: os.path.join(fixture.TMP, 'one.' + k) for k in ('json', 'md', 'xml', 'html')}
    p = run(['-t', TOL, '--json', outs['json'], '--markdown', outs['md'], '--junit', outs['xml'],
             '--html', outs['html'], '--save-baseline', 'base.json', 'ra.h5', 'rb.h5'])
    check('one run: exit 1 (drift)', p.returncode == 1, short(p))
    check('one run: text report on stdout', 'first divergence: /act/gelu' in p.stdout, p.stdout)
    for k, path in outs.items():
        check('one run: %s written' % k, os.path.getsize(path) > 0)
    check('one run: baseline written', os.path.getsize(os.path.join(fixture.TMP, 'base.json')) > 0)
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
    path = os.path.join(fixture.TMP, 'stats.json')
    p = run(['-t', TOL, '--json', path, 'ra.h5', 'rb.h5'])
    report = json.loads(read(path))
    check('statistics: hand fixture histograms as derived',
          {t['path']: {k: c for k, c in enumerate(t['ulp_hist']) if c}
           for t in report['tensors'] if 'ulp_hist' in t} == HIST, short(p))
    check_statistics('fixture', report, os.path.join(fixture.TMP, 'ra.h5'),
                     os.path.join(fixture.TMP, 'rb.h5'))
    a = os.path.join(fixture.SRC, 'fixtures', 'real', 'attention_cpu_fp32.h5')
    b = os.path.join(fixture.SRC, 'fixtures', 'real', 'attention_cuda_fp32.h5')
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
# Baseline gate
# ------------------------------------------------------------------------------------------


def gate_run(b, extra=()):
    path = os.path.join(fixture.TMP, 'gate.json')
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
    got = read(os.path.join(fixture.TMP, 'gate.md'))
    check('gate markdown == expected/report_order_gate.md',
          got == expected('report_order_gate.md'), got)
    v = xmllint(os.path.join(fixture.TMP, 'gate.xml'))
    check('gate junit: valid', v.returncode == 0, v.stdout)
    suite = ET.parse(os.path.join(fixture.TMP, 'gate.xml')).getroot().find('testsuite')
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
    report = json.loads(read(os.path.join(fixture.TMP, 'better.json')))
    check('gate, better: exit 0', p.returncode == 0, short(p))
    check('gate, better: gelu better', changes(report)['/act/gelu'] == ('better', False))
    # a tensor the baseline does not know, failing: new, and the gate fails
    p = run(['-t', TOL, '--allow-same', '--baseline', 'base.json', '--json', 'new.json', 'ra.h5',
             'ra.h5'])
    report = json.loads(read(os.path.join(fixture.TMP, 'new.json')))
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
        path = os.path.join(fixture.TMP, 'bad_base.json')
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
# A real CPU-vs-CUDA pair, every output from one run
# ------------------------------------------------------------------------------------------


def test_real_pair():
    a = os.path.join(fixture.SRC, 'fixtures', 'real', 'attention_cpu_fp32.h5')
    b = os.path.join(fixture.SRC, 'fixtures', 'real', 'attention_cuda_tf32.h5')
    out = {k: os.path.join(fixture.TMP, 'real.' + k) for k in ('json', 'md', 'xml', 'html')}
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
            shutil.copy(os.path.join(fixture.TMP, f), room)
        shutil.copy(fixture.BIN, os.path.join(room, 'pc'))
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


TESTS = [
    test_all_outputs_one_run,
    test_markdown_to_stdout,
    test_usage,
    test_statistics,
    test_verbose_text,
    test_baseline_gate,
    test_real_pair,
    test_output_checks_unprivileged,
]


if __name__ == '__main__':
    sys.exit(fixture.main(sys.argv[1:], TESTS, 'test_reports.py'))
