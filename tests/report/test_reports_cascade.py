#!/usr/bin/python3
"""End-to-end test of a cascade in every report (test_reports.py's part): a real fixture pair with
a bug injected into one tensor, spreading downstream, and an independent one, checked in all five
formats: reasons, values and limits against numpy and the profile's YAML, root causes and the
first divergence against the cascade rule applied here.

    /usr/bin/python3 tests/report/test_reports_cascade.py PATH/TO/paritycheck SOURCE_DIR

Prints one line per failure and "N passed, M failed" last.
"""

import json
import math
import os
import re
import shutil
import sys
import xml.etree.ElementTree as ET

import h5py
import numpy as np

import reports_common as fixture  # first: it puts tests/ and tests/oracle on the path
from checks import check  # noqa: E402
from reports_common import chromium, read, rendered_rows, run, short, xmllint  # noqa: E402


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
    with open(os.path.join(fixture.SRC, 'tolerances', CASCADE_PROFILE + '.yaml')) as fh:
        profile = yaml.safe_load(fh)['defaults']['all']
    return {k: profile[k] for k in CASCADE_KEYS if k in profile}


def make_cascade():
    import yaml
    with open(os.path.join(fixture.TMP, 'cascade.yaml'), 'w') as fh:
        yaml.safe_dump({'version': 1, 'defaults': {'all': cascade_coefficients()}}, fh)
    src = os.path.join(fixture.SRC, 'fixtures', 'real', 'attention_cuda_tf32.h5')
    dst = os.path.join(fixture.TMP, 'cascade_b.h5')
    shutil.copy(src, dst)
    with h5py.File(dst, 'r+') as f:
        for name, d in CASCADE_SCALES.items():
            f[name][...] = (f[name][()].astype(np.float64) * (1 + d)).astype(np.float32)
        f[CASCADE_OTHER][...] = f[CASCADE_OTHER][()] * np.float32(2)
    return os.path.join(fixture.SRC, 'fixtures', 'real', 'attention_cpu_fp32.h5'), dst


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
    out = {k: os.path.join(fixture.TMP, 'cascade.' + k) for k in ('json', 'md', 'xml', 'html')}
    tol = ['-t', os.path.join(fixture.TMP, 'cascade.yaml')]
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
    clicked = os.path.join(fixture.TMP, 'cascade_clicked.html')
    with open(clicked, 'w', encoding='utf-8') as fh:
        fh.write(read(out['html']).replace(
            '</body>', '<script>document.querySelector("button.fold").click();</script></body>'))
    _, rendered = rendered_rows(clicked)
    check('cascade HTML: a click unfolds the members',
          all('hidden' not in r['attrs'] for r in rendered if r['cells'][2] in mine),
          [r['attrs'] for r in rendered if r['cells'][2] in mine])


TESTS = [
    test_cascade,
]


if __name__ == '__main__':
    sys.exit(fixture.main(sys.argv[1:], TESTS, 'test_reports_cascade.py'))
