#!/usr/bin/python3
"""End-to-end tests of the paritycheck binary: exit codes and every figure of the fixture pairs.

    /usr/bin/python3 tests/cli/test_cli.py PATH/TO/paritycheck FIXTURES_DIR

FIXTURES_DIR is made by tests/gen/make_fixtures.py; its expected.json holds numpy's figures
(tests/oracle/pc_reference.py, docs/metrics.md) for every tensor. The tolerance files are the YAML files
beside this script. Prints one line per failure and a last line "N passed, M failed"; the exit
status is 1 when anything failed. The same binary on the same fixtures, by job:
test_cli_usage.py (usage errors, unreadable files, --help), test_cli_text.py (the text report,
annotations, colour, JSON on stdout) and test_cli_reads.py (results independent of how the data
are read: blocks, threads, direct reads, partly written datasets); cli_pairs.py holds what they
share.
"""

import os
import re
import subprocess
import sys

import h5py
import numpy as np

import cli_pairs as fixture  # first: it puts tests/ and tests/oracle on the path
from checks import check  # noqa: E402
import pc_reference as ref  # noqa: E402
from cli_pairs import (LOOSE, REFERENCE, STRICT, pair_paths, reference_check, run,  # noqa: E402
                       run_json, run_report, short)


# ------------------------------------------------------------------------------------------
# Figures
# ------------------------------------------------------------------------------------------


INT_FIELDS = ('count', 'mismatches', 'nan_mismatches', 'inf_mismatches', 'max_ulp')
FLOAT_FIELDS = ('max_abs', 'max_rel')


def tensor_problems(exp, got):
    """Differences between an expected.json entry and a report tensor (list of strings)."""
    probs = []
    if got.get('verdict') != exp['verdict']:
        probs.append('verdict: want %r, got %r (message %r)' % (exp['verdict'], got.get('verdict'),
                                                                 got.get('message')))
    if 'count' not in exp:
        if exp.get('message_contains'):
            msg = got.get('message') or ''
            if exp['message_contains'].lower() not in msg.lower():
                probs.append('message %r lacks %r' % (msg, exp['message_contains']))
        for k in ('count', 'max_abs', 'max_rel', 'max_ulp', 'mean_ulp', 'worst'):
            if k in got and got[k] is not None:
                probs.append('%s present for a %s tensor' % (k, exp['verdict']))
        return probs
    for k in ('compare_dtype', 'dtype_a', 'dtype_b'):
        if got.get(k) != exp[k]:
            probs.append('%s: want %r, got %r' % (k, exp[k], got.get(k)))
    if list(got.get('shape') or []) != exp['shape'] or 'shape' not in got:
        probs.append('shape: want %r, got %r' % (exp['shape'], got.get('shape')))
    for k in INT_FIELDS:
        if not ref.same_int(exp[k], got.get(k)):
            probs.append('%s: want %r, got %r' % (k, exp[k], got.get(k)))
    for k in ('not_representable_a', 'not_representable_b'):
        if not ref.same_int(exp[k], got.get(k, 0)):
            probs.append('%s: want %r, got %r' % (k, exp[k], got.get(k)))
    for k in FLOAT_FIELDS:
        if not ref.same_float(exp[k], got.get(k)):
            probs.append('%s: want %r, got %r' % (k, exp[k], got.get(k)))
    want_mean = float(ref.from_json_number(exp['mean_ulp']))
    gm = ref.from_json_number(got.get('mean_ulp'))
    if not isinstance(gm, (int, float)) or isinstance(gm, bool) or \
            not abs(float(gm) - want_mean) <= 1e-12 * abs(want_mean):
        probs.append('mean_ulp: want %r, got %r' % (want_mean, gm))
    # tolerance applied: the same criteria set, to the same values
    gt = got.get('tolerance')
    if not isinstance(gt, dict):
        probs.append('tolerance missing: %r' % (gt,))
    else:
        for k in ('atol', 'rtol', 'max_ulp', 'max_mismatch_fraction'):
            w, g = exp['tolerance'].get(k), gt.get(k)
            if k == 'max_mismatch_fraction' and w is None:
                w = 0.0  # unset means 0: either spelling is right
                g = 0.0 if g is None else g
            if (w is None) != (g is None) or (w is not None and not ref.same_float(w, g)):
                probs.append('tolerance %s: want %r, got %r' % (k, w, g))
    if exp.get('cross_grid') and not got.get('note'):
        probs.append('cross-grid pair without a note')
    ew, gw = exp.get('worst'), got.get('worst')
    if ew is None:
        if gw:
            probs.append('worst present for an empty tensor: %r' % (gw,))
    elif not isinstance(gw, dict):
        probs.append('worst missing')
    else:
        if list(gw.get('index', [None])) != ew['index']:
            probs.append('worst index: want %r, got %r' % (ew['index'], gw.get('index')))
        for k in ('a', 'b'):
            wv, gv = ew[k], gw.get(k)
            if isinstance(wv, list):
                ok = isinstance(gv, list) and len(gv) == 2 and all(
                    ref.same_float(x, y) for x, y in zip(wv, gv))
            else:
                ok = ref.same_float(wv, gv)
            if not ok:
                probs.append('worst %s: want %r, got %r' % (k, wv, gv))
        for k in ('abs', 'rel'):
            if not ref.same_float(ew[k], gw.get(k)):
                probs.append('worst %s: want %r, got %r' % (k, ew[k], gw.get(k)))
        if not ref.same_int(ew['ulp'], gw.get('ulp')):
            probs.append('worst ulp: want %r, got %r' % (ew['ulp'], gw.get('ulp')))
    return probs


def check_report(pair, report, label=None):
    """Every tensor of the report against expected.json, plus order and run verdict."""
    label = label or pair
    exp = fixture.EXPECTED['pairs'][pair]
    if not check('%s: JSON report written' % label, isinstance(report, dict)):
        return
    check('%s: JSON version' % label, report.get('version') == 2, repr(report.get('version')))
    check('%s: JSON run verdict' % label, report.get('verdict') == exp['verdict'],
          'want %r, got %r' % (exp['verdict'], report.get('verdict')))
    tensors = report.get('tensors') or []
    got = {}
    for t in tensors:
        check('%s: %s listed once' % (label, t.get('path')), t.get('path') not in got)
        got[t.get('path')] = t
    for path, e in exp['tensors'].items():
        name = '%s: %s' % (label, path)
        if 'either' in e:
            if path not in got:
                check(name, 'absent' in e['either'], 'absent from the report')
                continue
            t = got[path]
            outcomes = [o for o in e['either'] if o != 'absent']
            if t.get('verdict') in outcomes:
                check(name, True)
                continue
            same = [o for o in outcomes if o.startswith('same_as:')]
            if same:
                probs = tensor_problems(e['same_as'], t)
                check(name, not probs, '; '.join(probs))
            else:
                check(name, False, 'verdict %r not among %r' % (t.get('verdict'), e['either']))
            continue
        if not check(name, path in got, 'missing from the report'):
            continue
        probs = tensor_problems(e, got[path])
        check(name, not probs, '; '.join(probs))
    extra = [p for p in got if p not in exp['tensors']]
    check('%s: no unexpected tensors' % label, not extra, repr(extra))
    order = [t.get('path') for t in tensors]
    if exp.get('order') == 'by_name':
        check('%s: report order by name' % label, order == sorted(order), repr(order))
    elif exp.get('order'):
        check('%s: report order' % label, order == exp['order'],
              'want %r, got %r' % (exp['order'], order))


# ------------------------------------------------------------------------------------------
# Tests
# ------------------------------------------------------------------------------------------


def test_tolerance_file_matches_expected():
    import yaml
    with open(STRICT) as fh:
        spec = yaml.safe_load(fh)
    check('strict.yaml == make_fixtures.STRICT_TOLERANCES',
          spec == fixture.EXPECTED['tolerances']['spec'],
          'regenerate or edit one of them')


def test_exit_codes_and_figures():
    for pair in ('pass', 'drift', 'missing', 'shape', 'order', 'order_plain', 'dtypes',
                 'layouts'):
        proc, report = run_json(pair)
        exp = fixture.EXPECTED['pairs'][pair]
        check('%s: exit %d' % (pair, exp['exit']), proc.returncode == exp['exit'], short(proc))
        check_report(pair, report)
        if report is not None and pair in ('dtypes', 'layouts', 'pass', 'drift'):
            reference_check('%s: pc_reference check of the report' % pair, pair, report,
                            'check_%s.json' % pair)


def test_reference_selftest():
    rp = subprocess.run([sys.executable, REFERENCE, 'selftest'], stdout=subprocess.PIPE,
                        stderr=subprocess.STDOUT, text=True, timeout=300)
    check('pc_reference selftest', rp.returncode == 0, rp.stdout[-2000:])


def test_builtin_defaults():
    proc = run(list(pair_paths('pass')))
    check('pass pair with built-in tolerances only: exit 0', proc.returncode == 0, short(proc))
    # Other tolerances, other mismatch counts and verdicts: numpy recomputes them from the
    # tolerance each tensor reports.
    for pair in ('dtypes', 'layouts'):
        proc, report = run_json(pair, tol=False)
        if not check('%s, built-in tolerances: JSON written' % pair, report is not None,
                     short(proc)):
            continue
        reference_check('%s, built-in tolerances: pc_reference check' % pair, pair, report,
                        'builtin_%s.json' % pair)


def test_later_tolerance_file_wins():
    a, b = pair_paths('drift')
    p = run(['-t', STRICT, '-t', LOOSE, a, b])
    check('-t strict -t loose: drift pair passes (exit 0)', p.returncode == 0, short(p))
    p = run(['-t', LOOSE, '-t', STRICT, a, b])
    check('-t loose -t strict: drift pair drifts (exit 1)', p.returncode == 1, short(p))


def test_missing_names():
    a, b = pair_paths('missing')
    p = run(['-t', STRICT, a, b])
    check('missing: exit 1', p.returncode == 1, short(p))
    check('missing: text names /only_a', '/only_a' in p.stdout, p.stdout)
    check('missing: text names /only_b', '/only_b' in p.stdout, p.stdout)
    _, report = run_json('missing')
    if report:
        v = {t.get('path'): t.get('verdict') for t in report.get('tensors', [])}
        check('missing: JSON /only_a missing_in_b', v.get('/only_a') == 'missing_in_b', repr(v))
        check('missing: JSON /only_b missing_in_a', v.get('/only_b') == 'missing_in_a', repr(v))


def test_shape_mismatch_text():
    a, b = pair_paths('shape')
    p = run(['-t', STRICT, a, b])
    check('shape: exit 1', p.returncode == 1, short(p))
    check('shape: text names /x', re.search(r'(^|\s)/x\b', p.stdout, re.M) is not None, p.stdout)


def test_lzf():
    a, b = pair_paths('layouts')
    p = run(['-t', STRICT, a, b])
    check('lzf: run exit 2', p.returncode == 2, short(p))
    lines = [ln for ln in (p.stdout + p.stderr).splitlines() if '/lzf' in ln]
    check('lzf: /lzf reported naming the filter', any('lzf' in ln.lower().replace('/lzf', '')
                                                      for ln in lines), repr(lines))
    check('lzf: other tensors still reported', '/big3d' in p.stdout and '/chunked_gzip' in
          p.stdout, p.stdout[:500])


def test_exact_integers():
    """The worst pair of an integer tensor is printed exactly, also beyond 2^53 where a double
    cannot tell the two values apart (docs/report-json.md, "worst"). Expected values are Python's
    own integers."""
    big, top, low = 2 ** 60, 2 ** 64 - 1, -2 ** 63
    data = {'i64': (np.int64, [5, big, -7], [5, big + 3, -7], 1),
            'i64min': (np.int64, [low, 0], [low + 1, 0], 0),
            'u64': (np.uint64, [top, 1], [top - 1, 1], 0)}
    paths = [os.path.join(fixture.TMP, 'ints_%s.h5' % side) for side in 'ab']
    for side, path in enumerate(paths):
        with h5py.File(path, 'w') as f:
            for name, (dt, a, b, _) in data.items():
                f[name] = np.array((a, b)[side], dtype=dt)
    md, xml = os.path.join(fixture.TMP, 'ints.md'), os.path.join(fixture.TMP, 'ints.xml')
    p, rep = run_report(['--markdown', md, '--junit', xml] + paths,
                        os.path.join(fixture.TMP, 'ints.json'))
    check('exact integers: exit 1 (every tensor differs)', p.returncode == 1, short(p))
    got = {t['path']: t for t in (rep or {}).get('tensors', [])}
    with open(md) as fh_md, open(xml) as fh_xml:
        md_text, xml_text = fh_md.read(), fh_xml.read()
    for name, (dt, a, b, i) in data.items():
        w = got.get('/' + name, {}).get('worst') or {}
        # JSON integers where they fit in int64, else the nearest double (docs/report-json.md)
        fits = [low <= v[i] <= 2 ** 63 - 1 for v in (a, b)]
        want = [v[i] if ok else float(v[i]) for v, ok in zip((a, b), fits)]
        check('%s: JSON worst index, a, b' % name,
              w.get('index') == [i] and [w.get('a'), w.get('b')] == want and
              all(type(w.get(k)) is (int if ok else float) for k, ok in zip('ab', fits)), w)
        check('%s: JSON ulp is |b - a|' % name, w.get('ulp') == abs(b[i] - a[i]), w)
        text = 'a=%d b=%d' % (a[i], b[i])
        check('%s: text shows %s' % (name, text), text in p.stdout, p.stdout)
        cell = 'worst [%d]: a=%d, b=%d' % (i, a[i], b[i])
        check('%s: Markdown shows %s' % (name, cell), cell in md_text, md_text)
        check('%s: JUnit shows %s' % (name, cell), cell in xml_text, xml_text)


TESTS = [
    test_tolerance_file_matches_expected,
    test_exit_codes_and_figures,
    test_reference_selftest,
    test_builtin_defaults,
    test_later_tolerance_file_wins,
    test_missing_names,
    test_shape_mismatch_text,
    test_lzf,
    test_exact_integers,
]


if __name__ == '__main__':
    sys.exit(fixture.main(sys.argv[1:], TESTS, 'test_cli.py'))
