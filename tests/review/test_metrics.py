#!/usr/bin/python3
"""Product metrics (docs/metrics.md, "Product metrics") end to end through the CLI, against numpy
and torch (float64) on real logits from the fixtures, and against values worked out by hand on
the edge cases: ties, NaN rows, +-inf logits, a row of only -inf, a single class, k beyond the
classes, scalars. Also the tolerance-file errors of `metrics` and `elementwise`.

    /usr/bin/python3 tests/review/test_metrics.py PATH/TO/paritycheck SOURCE_DIR
"""

import json
import math
import os
import subprocess
import sys
import tempfile

import h5py
import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..'))
from checks import check, run_tests  # noqa: E402

BIN = None
SRC = None
WORK = None

ALL_METRICS = """
    metrics:
      top1_agreement: {min: 0.99}
      topk_overlap: {k: %d, min: 0.5}
      kl_divergence: {max: 1.0e-3}
      max_prob_diff: {max: 1.0e-2}
"""


# ---- the reference: numpy and torch, written from docs/metrics.md -------------------------------

def rows_of(x):
    x = np.asarray(x, dtype=np.float64)
    return x.reshape(1, 1) if x.ndim == 0 else x.reshape(-1, x.shape[-1])


def ref_top1(a, b):
    a, b = rows_of(a), rows_of(b)
    ok = [not (np.isnan(ra).any() or np.isnan(rb).any()) and np.argmax(ra) == np.argmax(rb)
          for ra, rb in zip(a, b)]
    return float(np.mean(ok))


def ref_topk(a, b, k):
    a, b = rows_of(a), rows_of(b)
    k = min(k, a.shape[1])
    vals = []
    for ra, rb in zip(a, b):
        if np.isnan(ra).any() or np.isnan(rb).any():
            vals.append(0.0)
            continue
        sa = set(np.argsort(-ra, kind='stable')[:k].tolist())
        sb = set(np.argsort(-rb, kind='stable')[:k].tolist())
        vals.append(len(sa & sb) / k)
    return float(np.mean(vals))


def ref_kl_and_diff(a, b):
    """For finite logits: torch's float64 log_softmax and kl_div (an implementation of its own)."""
    ta = torch.from_numpy(rows_of(a))
    tb = torch.from_numpy(rows_of(b))
    lp, lq = torch.log_softmax(ta, dim=-1), torch.log_softmax(tb, dim=-1)
    kl = torch.nn.functional.kl_div(lq, lp, log_target=True, reduction='none').sum(-1)
    diff = (torch.softmax(ta, -1) - torch.softmax(tb, -1)).abs().max()
    return float(kl.mean()), float(diff)


# ---- running the CLI ----------------------------------------------------------------------------

def run(args):
    p = subprocess.run([BIN] + args, capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def write_yaml(name, text):
    path = os.path.join(WORK, name)
    with open(path, 'w') as f:
        f.write(text)
    return path


def tensor_json(a_path, b_path, tol, path, extra=()):
    out = os.path.join(WORK, 'out.json')
    if os.path.exists(out):  # a run that writes no report must not read the last one's
        os.remove(out)
    rc, stdout, stderr = run(['-t', tol, '--json', out] + list(extra) + [a_path, b_path])
    with open(out) as f:
        doc = json.load(f)
    return rc, [t for t in doc['tensors'] if t['path'] == path][0], stderr


def pair(name, a, b, dtype=np.float64):
    paths = []
    for side, x in (('a', a), ('b', b)):
        p = os.path.join(WORK, '%s_%s.h5' % (name, side))
        with h5py.File(p, 'w') as f:
            f.create_dataset('logits', data=np.asarray(x, dtype=dtype))
        paths.append(p)
    return paths


def value(m):
    """A JSON figure: a number, or "nan" / "inf" / "-inf"."""
    return float(m) if not isinstance(m, str) else float(m.replace('inf', 'inf'))


def close(x, y, rel=1e-12, abs_=1e-15):
    if math.isnan(y):
        return math.isnan(x)
    if math.isinf(y):
        return x == y
    return abs(x - y) <= abs_ + rel * abs(y)


# ---- real logits ----------------------------------------------------------------------------------

REAL = [
    ('fixtures/zoo/gpt_sdpa_cpu_fp32.h5', 'fixtures/zoo/gpt_sdpa_cuda_tf32.h5',
     '/activations/019_head', 5),
    ('fixtures/zoo/gpt_sdpa_cpu_fp64.h5', 'fixtures/zoo/gpt_sdpa_cuda_bf16.h5',
     '/activations/019_head', 10),
    ('fixtures/zoo/resnet_cpu_fp32.h5', 'fixtures/zoo/resnet_cuda_fp16.h5', '/activations/038_fc',
     3),
    ('fixtures/real/mixer_cpu_fp32.h5', 'fixtures/real/mixer_cuda_bf16.h5', '/activations/018_head',
     2),
]


def test_real_logits():
    for fa, fb, path, k in REAL:
        fa, fb = os.path.join(SRC, fa), os.path.join(SRC, fb)
        tol = write_yaml('real.yaml', 'version: 1\nrules:\n  - match: "%s"\n' % path +
                         ALL_METRICS % k)
        rc, t, err = tensor_json(fa, fb, tol, path)
        with h5py.File(fa) as f, h5py.File(fb) as g:
            a, b = f[path][()].astype(np.float64), g[path][()].astype(np.float64)
        m = t.get('metrics', {})
        name = '%s %s' % (os.path.basename(fb), path)
        kl, diff = ref_kl_and_diff(a, b)
        check(name + ' top1', close(value(m['top1_agreement']['value']), ref_top1(a, b)), m)
        check(name + ' topk', close(value(m['topk_overlap']['value']), ref_topk(a, b, k)) and
              m['topk_overlap']['k'] == k, m)
        check(name + ' kl', close(value(m['kl_divergence']['value']), kl, rel=1e-9, abs_=1e-17),
              (m['kl_divergence'], kl))
        check(name + ' max_prob_diff', close(value(m['max_prob_diff']['value']), diff, rel=1e-12),
              (m['max_prob_diff'], diff))
        check(name + ' limits', m['top1_agreement']['limit'] == 0.99 and
              m['kl_divergence']['limit'] == 1e-3, m)


def test_real_loss():
    """scalar_abs and scalar_rel on the loss, with elementwise: false: the loss passes or fails on
    them alone."""
    fa = os.path.join(SRC, 'fixtures/zoo/gpt_sdpa_cpu_fp32.h5')
    fb = os.path.join(SRC, 'fixtures/zoo/gpt_sdpa_cuda_tf32.h5')
    with h5py.File(fa) as f, h5py.File(fb) as g:
        a, b = float(f['outputs/loss'][()]), float(g['outputs/loss'][()])
    want_abs, want_rel = abs(b - a), abs(b - a) / abs(a)
    for limit, verdict in ((want_rel * 2, 'pass'), (want_rel / 2, 'drift')):
        tol = write_yaml('loss.yaml', 'version: 1\nrules:\n  - match: /outputs/loss\n'
                         '    elementwise: false\n    metrics:\n      scalar_abs: {max: 1}\n'
                         '      scalar_rel: {max: %r}\n' % limit)
        rc, t, err = tensor_json(fa, fb, tol, '/outputs/loss')
        m = t['metrics']
        check('loss scalar_abs', close(m['scalar_abs']['value'], want_abs), m)
        check('loss scalar_rel', close(m['scalar_rel']['value'], want_rel), m)
        check('loss verdict %s' % verdict, t['verdict'] == verdict, t)
        if verdict == 'drift':
            check('loss reason', t['reasons'] == [{'criterion': 'scalar_rel',
                                                   'value': m['scalar_rel']['value'],
                                                   'limit': limit}], t['reasons'])


# ---- edge cases, worked out by hand ---------------------------------------------------------------

def metrics_of(name, a, b, k=2, dtype=np.float64):
    fa, fb = pair(name, a, b, dtype)
    tol = write_yaml(name + '.yaml', 'version: 1\nrules:\n  - match: /logits\n'
                     '    elementwise: false\n' + ALL_METRICS % k)
    rc, t, err = tensor_json(fa, fb, tol, '/logits')
    return rc, t


def test_ties():
    # argmax: [1,3,3,0] -> 1, [1,3,2,3] -> 1 (agree); [2,2] rows cannot be mixed with 4 columns,
    # so: [5,5,0,0] -> 0 vs [0,5,5,0] -> 1 (disagree); [0,0,0,0] -> 0 vs [0,0,0,0] -> 0 (agree).
    a = [[1, 3, 3, 0], [5, 5, 0, 0], [0, 0, 0, 0]]
    b = [[1, 3, 2, 3], [0, 5, 5, 0], [0, 0, 0, 0]]
    rc, t = metrics_of('ties', a, b, k=2)
    m = t['metrics']
    check('ties top1 2/3', close(m['top1_agreement']['value'], 2 / 3), m)
    # top2 (ties to the lower index): {1,2} & {1,3} = 1; {0,1} & {1,2} = 1; {0,1} & {0,1} = 2.
    check('ties top2 (1/2 + 1/2 + 1) / 3', close(m['topk_overlap']['value'], 2 / 3), m)
    check('ties top1 fails min 0.99', t['verdict'] == 'drift' and rc == 1 and
          {'criterion': 'top1_agreement', 'value': m['top1_agreement']['value'], 'limit': 0.99}
          in t['reasons'], t)


def test_nan_row():
    a = [[0, 1, 2], [0, float('nan'), 1]]
    b = [[0, 1, 2], [0, 1, 1]]
    rc, t = metrics_of('nanrow', a, b, k=1)
    m = t['metrics']
    check('nan row never agrees', close(m['top1_agreement']['value'], 0.5), m)
    check('nan row overlap 0', close(m['topk_overlap']['value'], 0.5), m)
    check('nan row kl is nan and fails', m['kl_divergence']['value'] == 'nan' and
          not m['kl_divergence']['pass'], m)
    check('nan row max_prob_diff is nan', m['max_prob_diff']['value'] == 'nan', m)


def test_infinities():
    inf = float('inf')
    # row 0: p = [.5, 0, .5], q = [1, 0, 0]: KL = .5 log .5 + .5 (log .5 - log 0) = inf, diff .5
    # row 1: both all mass on index 0: KL 0, diff 0
    rc, t = metrics_of('inf', [[inf, 0, inf], [inf, 1, 2]], [[inf, 0, 0], [inf, 5, 0]], k=1)
    m = t['metrics']
    check('+inf kl inf', m['kl_divergence']['value'] == 'inf', m)
    check('+inf max_prob_diff .5', close(m['max_prob_diff']['value'], 0.5), m)
    check('+inf top1 (ties to index 0) 1', close(m['top1_agreement']['value'], 1.0), m)
    # -inf: p = [0, .5, .5], q = [1/3] * 3: KL = log(1.5), diff 1/3
    rc, t = metrics_of('ninf', [[-inf, 0, 0]], [[0, 0, 0]], k=2)
    m = t['metrics']
    check('-inf kl log 1.5', close(m['kl_divergence']['value'], math.log(1.5)), m)
    check('-inf max_prob_diff 1/3', close(m['max_prob_diff']['value'], 1 / 3), m)
    check('-inf top2 {1,2} & {0,1}', close(m['topk_overlap']['value'], 0.5), m)
    # a row of only -inf has no distribution
    rc, t = metrics_of('allninf', [[-inf, -inf], [0, 1]], [[0, 0], [0, 1]], k=1)
    m = t['metrics']
    check('all -inf row: kl nan', m['kl_divergence']['value'] == 'nan', m)
    check('all -inf row: top1 ties to 0', close(m['top1_agreement']['value'], 1.0), m)


def test_single_class():
    rc, t = metrics_of('one', [[3.0], [-1.0]], [[-7.0], [2.0]], k=5)
    m = t['metrics']
    check('single class: everything agrees',
          [m[n]['value'] for n in ('top1_agreement', 'topk_overlap', 'kl_divergence',
                                   'max_prob_diff')] == [1, 1, 0, 0], m)
    check('single class passes', t['verdict'] == 'pass' and rc == 0, t)


def test_float32_logits_numpy():
    """High-entropy float32 logits with exact duplicates, checked against the reference."""
    rng = np.random.default_rng(7)
    a = rng.standard_normal((50, 33)).astype(np.float32) * 4
    b = a + rng.standard_normal(a.shape).astype(np.float32) * 0.3
    b[::5] = a[::5]
    a[3, 7] = a[3, 8] = a[3].max() + 1
    rc, t = metrics_of('rand', a, b, k=4, dtype=np.float32)
    m = t['metrics']
    kl, diff = ref_kl_and_diff(a, b)
    check('random top1', close(m['top1_agreement']['value'], ref_top1(a, b)), m)
    check('random top4', close(m['topk_overlap']['value'], ref_topk(a, b, 4)), m)
    check('random kl', close(m['kl_divergence']['value'], kl, rel=1e-9), (m, kl))
    check('random max_prob_diff', close(m['max_prob_diff']['value'], diff), (m, diff))


def test_scalars():
    cases = [(0.0, 0.0, 0.0, 0.0), (0.0, 1.0, 1.0, 'inf'), (2.0, 2.5, 0.5, 0.25),
             (-4.0, -3.0, 1.0, 0.25), (float('inf'), float('inf'), 0.0, 0.0)]
    for i, (a, b, want_abs, want_rel) in enumerate(cases):
        fa, fb = pair('scalar%d' % i, a, b)
        tol = write_yaml('s.yaml', 'version: 1\nrules:\n  - match: /logits\n    metrics:\n'
                         '      scalar_abs: {max: 10}\n      scalar_rel: {max: 10}\n')
        # inf against inf holds no finite pair: such a run is exit 2 without --allow-empty
        rc, t, err = tensor_json(fa, fb, tol, '/logits', ['--allow-empty'])
        m = t['metrics']
        check('scalar %r %r abs' % (a, b), m['scalar_abs']['value'] == want_abs, m)
        check('scalar %r %r rel' % (a, b), m['scalar_rel']['value'] == want_rel, m)
    fa, fb = pair('notscalar', [1.0, 2.0], [1.0, 2.0])
    out = os.path.join(WORK, 'e.json')
    rc, stdout, stderr = run(['-t', tol, '--json', out, fa, fb])
    t = json.load(open(out))['tensors'][0]
    check('scalar metric on 2 elements is an error', rc == 2 and t['verdict'] == 'error' and
          'one element, this has 2' in t['message'], (rc, t))


def test_reports_show_metrics():
    fa, fb = pair('rep', [[0, 1, 2]], [[0, 2, 1]])
    tol = write_yaml('rep.yaml', 'version: 1\nrules:\n  - match: /logits\n    metrics:\n'
                     '      top1_agreement: {min: 0.5}\n')
    outs = {ext: os.path.join(WORK, 'rep.' + ext) for ext in ('md', 'xml', 'html')}
    rc, stdout, stderr = run(['-t', tol, '--markdown', outs['md'], '--junit', outs['xml'],
                              '--html', outs['html'], fa, fb])
    want = 'top1_agreement 0 (min 0.5, fails)'
    check('text shows the metric', want in stdout, stdout)
    check('text shows the reason', 'top1_agreement 0 < limit 0.5' in stdout, stdout)
    for ext, p in outs.items():
        body = open(p).read()
        check('%s shows the metric' % ext, 'top1_agreement' in body and '(min 0.5' in body, body)


# ---- tolerance-file errors ------------------------------------------------------------------------

def test_yaml_errors():
    fa, fb = pair('yerr', [[0, 1]], [[0, 1]])
    cases = [
        # (text, line:column of the offending node, words of the message)
        ('version: 1\nrules:\n  - match: x\n    metrics:\n      top1_agreement: {max: 0.9}\n',
         '5:23', "'top1_agreement' takes 'min', not 'max'"),
        ('version: 1\nrules:\n  - match: x\n    metrics:\n      topk_overlap: {min: 0.9}\n',
         '5:21', "'topk_overlap' needs 'k'"),
        ('version: 1\nrules:\n  - match: x\n    metrics:\n      kl_divergence: {max: 1, k: 2}\n',
         '5:22', "'kl_divergence' takes no 'k'"),
        ('version: 1\nrules:\n  - match: x\n    metrics:\n      top1: {min: 0.9}\n',
         '5:7', "unknown key 'top1' in 'metrics'"),
        ('version: 1\nrules:\n  - match: x\n    metrics:\n      top1_agreement: {min: 1.5}\n',
         '5:29', "'top1_agreement.min' must be <= 1"),
        ('version: 1\nrules:\n  - match: x\n    metrics:\n      topk_overlap: {k: 0, min: 1}\n',
         '5:25', "'topk_overlap.k' must be >= 1"),
        ('version: 1\nrules:\n  - match: x\n    elementwise: no\n',
         '4:18', "'elementwise' must be true or false"),
        ('version: 1\ndefaults:\n  metrics: {}\n', '3:3', "unknown key 'metrics' in 'defaults'"),
    ]
    for i, (text, at, words) in enumerate(cases):
        tol = write_yaml('bad%d.yaml' % i, text)
        rc, stdout, stderr = run(['-t', tol, fa, fb])
        check('bad metrics yaml %d: exit 2, %s' % (i, words),
              rc == 2 and '%s:%s: %s' % (tol, at, words) in stderr, (rc, stderr))


def main():
    global BIN, SRC, WORK
    BIN, SRC = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as work:
        WORK = work
        return run_tests([test_real_logits, test_real_loss, test_ties, test_nan_row,
                          test_infinities, test_single_class, test_float32_logits_numpy,
                          test_scalars, test_reports_show_metrics, test_yaml_errors])


if __name__ == '__main__':
    sys.exit(main())
