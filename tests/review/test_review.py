#!/usr/bin/python3
"""Approvals end to end through the CLI (docs/review.md): approve -> gate -> growth -> stale, hand
edits with errors (exit 2 with file:line:column), and the workflow of docs/review.md run as
written, each command's exit code checked against its "# exit N" comment.

    /usr/bin/python3 tests/review/test_review.py PATH/TO/paritycheck SOURCE_DIR
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile

import h5py
import numpy as np
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..'))
from checks import check, run_tests  # noqa: E402

BIN = SRC = WORK = None
A = B = None
DRIFTING = ['/activations/%s' % n for n in ('001_qkv', '002_scores', '003_softmax',
                                             '004_apply_attn', '005_proj', '006_ln2', '007_fc1',
                                             '008_act', '009_fc2')]
ENV = dict(os.environ, SOURCE_DATE_EPOCH='1700000000')  # 2023-11-14 UTC


def run(args):
    p = subprocess.run([BIN] + args, capture_output=True, text=True, env=ENV, cwd=WORK)
    return p.returncode, p.stdout, p.stderr


def gate_line(stdout):
    return [l for l in stdout.splitlines() if l.startswith('GATE')][-1]


def copy_with(src, name, edit):
    """A copy of src with edit(h5 file) applied."""
    dst = os.path.join(WORK, name)
    shutil.copy(src, dst)
    with h5py.File(dst, 'r+') as f:
        edit(f)
    return dst


def fnv1a64(data):
    h = 0xcbf29ce484222325
    for byte in data:
        h = ((h ^ byte) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def test_cycle():
    ap = os.path.join(WORK, 'ap.yaml')
    rc, out, err = run(['--approve', ap, '--by', 'Ada', '--reason', 'TF32 "rounding"\n',
                        '--only', '/activations/00[1-5]*', A, B])
    check('approve a part: exit 1 (4 drifting tensors not approved)', rc == 1, (rc, err))
    doc = yaml.safe_load(open(ap))
    paths = [e['tensor'] for e in doc['approvals']]
    check('only the matching drifting tensors, sorted', paths == DRIFTING[:5], paths)
    e = doc['approvals'][0]
    check('signature', (e['by'], e['date'], e['reason']) ==
          ('Ada', '2023-11-14', 'TF32 "rounding"\n'), e)
    with h5py.File(A) as fa, h5py.File(B) as fb:
        want_a = fnv1a64(fa['activations/001_qkv'][()].astype('<f4').tobytes())
        want_b = fnv1a64(fb['activations/001_qkv'][()].astype('<f4').tobytes())
        x, y = fa['activations/001_qkv'][()].astype(np.float64), fb['activations/001_qkv'][()]
    check('provenance hashes are FNV-1a 64 of the stored bytes',
          e['provenance'] == {'a': 'fnv1a64:%016x' % want_a, 'b': 'fnv1a64:%016x' % want_b},
          e['provenance'])
    d = y.astype(np.float64) - x
    check('figures: rel_rms and max_abs from numpy',
          abs(e['figures']['rel_rms'] - np.sqrt((d * d).sum() / (x * x).sum())) < 1e-12 and
          e['figures']['max_abs'] == np.abs(d).max(), e['figures'])
    # the rest, in a second sign-off that keeps the first
    rc, out, err = run(['--approve', ap, '--by', 'Bo', '--reason', 'rest', '--only',
                        '/activations/00[6-9]*', A, B])
    doc = yaml.safe_load(open(ap))
    check('second approve: exit 0, all nine, first signatures kept',
          rc == 0 and [e['tensor'] for e in doc['approvals']] == DRIFTING and
          [e['by'] for e in doc['approvals']] == ['Ada'] * 5 + ['Bo'] * 4, (rc, err, doc))
    rc, out, err = run(['--approved', ap, A, B])
    check('gate passes', rc == 0 and gate_line(out).startswith('GATE PASS: 0 tensors fail the '
                                                               'approvals'), (rc, out[-800:]))
    check('text names the approval', 'approved by Ada on 2023-11-14' in out, out[-2000:])
    md, html, junit = (os.path.join(WORK, 'd.' + e) for e in ('md', 'html', 'xml'))
    run(['--approved', ap, '--markdown', md, '--html', html, '--junit', junit, A, B])
    for p in (md, html, junit):
        body = open(p).read()
        check('%s shows "approved by NAME on DATE: REASON"' % p[-4:],
              'approved by Bo on 2023-11-14: rest' in body, body[:400])

    # growth beyond the approval: fc2 5% off
    grown = copy_with(B, 'grown.h5', lambda f: f['activations/009_fc2'].__setitem__(
        Ellipsis, f['activations/009_fc2'][()] * 1.05))
    rc, out, err = run(['--approved', ap, A, grown])
    check('growth fails naming the approval', rc == 1 and 'exceeds the approval by Bo on '
          '2023-11-14 (rest): rel_rms' in out and '(first: /activations/009_fc2)' in
          gate_line(out), (rc, out[-1500:]))

    # stale: A's content changed for an approved tensor, and an approved tensor gone
    a2 = copy_with(A, 'a2.h5', lambda f: f['activations/003_softmax'].__setitem__(
        (0, 0, 0, 0), 0.5))
    rc, out, err = run(['--approved', ap, a2, B])
    check('A changed: stale and failing', rc == 1 and 'stale approval by Ada on 2023-11-14: '
          "A's content changed" in out and '1 stale approvals' in gate_line(out),
          (rc, out[-1500:]))
    text = open(ap).read().replace('"/activations/005_proj"', '"/activations/gone"')
    open(os.path.join(WORK, 'gone.yaml'), 'w').write(text)
    rc, out, err = run(['--approved', 'gone.yaml', A, B])
    check('tensor gone: stale, and the unapproved proj fails', rc == 1 and
          '1 stale approvals' in gate_line(out) and '(first: /activations/005_proj)' in
          gate_line(out), (rc, gate_line(out)))


def test_hand_edited_errors():
    ap = os.path.join(WORK, 'good.yaml')
    run(['--approve', ap, '--by', 'Ada', '--reason', 'r', A, B])
    good = open(ap).read()
    lines = good.splitlines()
    # the inputs' file attributes are recorded, as h5py reads them, under attributes.a and .b
    doc = yaml.safe_load(good)
    for side, path in (('a', A), ('b', B)):
        with h5py.File(path, 'r') as f:
            want = {k: v for k, v in f.attrs.items() if isinstance(v, str)}
        got = (doc.get('attributes') or {}).get(side) or {}
        check('approval file: the string attributes of %s' % side,
              want and all(got.get(k) == v for k, v in want.items()), (want, got))
    fig_line = next(i for i, l in enumerate(lines) if 'rel_rms:' in l)
    hash_line = next(i for i, l in enumerate(lines) if l.strip().startswith('a: "fnv1a64'))
    by_line = next(i for i, l in enumerate(lines) if l == '    by: "Ada"')
    dtype_line = next(i for i, l in enumerate(lines) if 'compare_dtype: float32' in l)
    cases = [
        # (edit, 1-based line:column, words)
        (good.replace('approvals:\n', 'approvals:\n  - tensor: [\n', 1), None, 'invalid YAML'),
        (good.replace('version: 1', 'version: 2'), '2:10', "'version' must be 1"),
        (good.replace('    by: "Ada"', '    by: "Ada"\n    signed: yes', 1), '%d:5' % (by_line + 2),
         "unknown key 'signed' in an approval"),
        ('\n'.join(lines[:fig_line] + [lines[fig_line].replace(lines[fig_line].split(': ')[1],
                                                                 'lots')] + lines[fig_line + 1:]),
         '%d:16' % (fig_line + 1), "'rel_rms' must be a number >= 0"),
        ('\n'.join(lines[:hash_line] + ['      a: "md5:0"'] + lines[hash_line + 1:]),
         '%d:10' % (hash_line + 1), "'provenance.a' must be \"fnv1a64:\" and 16 hex digits"),
        (good.replace('compare_dtype: float32', 'compare_dtype: float33', 1),
         '%d:20' % (dtype_line + 1),
         "'compare_dtype' is not a dtype name"),
    ]
    for i, (text, at, words) in enumerate(cases):
        p = os.path.join(WORK, 'bad%d.yaml' % i)
        open(p, 'w').write(text)
        rc, out, err = run(['--approved', p, A, B])
        ok = rc == 2 and words in err and (at is None or '%s:%s: ' % (p, at) in err)
        if at is None:
            ok = ok and re.search(re.escape(p) + r':\d+:\d+: invalid YAML', err)
        check('hand-edited error %d: exit 2, %s' % (i, words), ok, (rc, err))
    rc, out, err = run(['--approve', 'x.yaml', '--by', 'Ada', A, B])
    check('--approve without --reason: exit 2', rc == 2 and '--reason' in err, (rc, err))
    rc, out, err = run(['--approved', ap, '--baseline', ap, A, B])
    check('--approved with --baseline: exit 2', rc == 2, (rc, err))


def _rows(out):
    """{tensor: (verdict, gate column)} of the text report's table rows."""
    rows = {}
    for line in out.splitlines():
        cells = line.split()
        if len(cells) > 3 and cells[2].startswith('/'):
            rows[cells[2]] = (cells[0], cells[1])
    return rows


def test_approval_gate_one_verdict():
    """An approval gate prints one verdict: its table's column is 'approval' with rows reading
    approved / NEW / WORSE / -, the run's line carries no PASS or FAIL, the gate's line counts
    the words."""
    ap = os.path.join(WORK, 'one.yaml')
    run(['--approve', ap, '--by', 'Ada', '--reason', 'r', A, B])
    rc, out, err = run(['--approved', ap, A, B])
    verdicts = [l for l in out.splitlines() if re.match(r'(GATE )?[A-Z]+: ', l)]
    check('passing approval gate: exit 0, one verdict line, GATE PASS', rc == 0 and
          len(verdicts) == 1 and verdicts[0].startswith('GATE PASS: '), (rc, verdicts))
    check('the run line says what fails without the approvals',
          'without the approvals: 9 of 24 tensors fail (9 drift)' in out, out[-600:])
    check('the gate line counts the words', gate_line(out).endswith(
        '; 9 approved, 0 new, 0 worse, 0 better'), gate_line(out))
    header = [l for l in out.splitlines() if l.startswith('verdict ')]
    check('the column is headed approval', header and header[0].split()[:3] ==
          ['verdict', 'approval', 'tensor'], header)
    rows = _rows(out)
    check('drifting tensors read approved, the others -',
          len(rows) == 24 and all(rows[p] == ('DRIFT', 'approved') for p in DRIFTING) and
          all(v == ('pass', '-') for p, v in rows.items() if p not in DRIFTING), rows)
    bug = copy_with(B, 'one_bug.h5', lambda f: f['gradients/fc2.bias'].__setitem__(
        Ellipsis, f['gradients/fc2.bias'][()] * 1.01))
    grown = copy_with(bug, 'one_grown.h5', lambda f: f['activations/009_fc2'].__setitem__(
        Ellipsis, f['activations/009_fc2'][()] * 1.05))
    rc, out, err = run(['--approved', ap, A, grown])
    rows = _rows(out)
    check('a new failure reads NEW, grown drift WORSE; GATE FAIL, no FAIL: line',
          rc == 1 and rows.get('/gradients/fc2.bias') == ('DRIFT', 'NEW') and
          rows.get('/activations/009_fc2') == ('DRIFT', 'WORSE') and
          gate_line(out).endswith('; 8 approved, 1 new, 1 worse, 0 better') and
          not re.search(r'^(FAIL|PASS):', out, re.M), (rc, rows, out[-600:]))


def test_save_baseline_under_set_e():
    """docs/reports.md's baseline example under set -e on the real TF32 pair (it drifts): saving
    exits 1 (the run's drift), which the example accepts, and stderr says so; the gate with the
    saved file exits 0; with --baseline the exit code stays the gate's; an error still stops
    the example."""
    text = open(os.path.join(SRC, 'docs', 'reports.md')).read()
    block = re.search(r'```sh\n(set -e\n.*?--save-baseline.*?)```', text, re.S)
    check('docs/reports.md has the set -e example', block is not None)
    if not block:
        return
    script = block.group(1).replace('cpu.h5', A).replace('cuda.h5', B)
    root = os.path.join(WORK, 'save-baseline')
    os.makedirs(os.path.join(root, 'bin'))
    os.symlink(os.path.abspath(BIN), os.path.join(root, 'bin', 'paritycheck'))
    env = dict(ENV, PATH=os.path.join(root, 'bin') + os.pathsep + os.environ['PATH'])
    p = subprocess.run(['bash', '-c', script + 'echo done\n'], cwd=root, env=env,
                       capture_output=True, text=True)
    check('the example runs to its end under set -e', p.returncode == 0 and
          p.stdout.endswith('done\n'), (p.returncode, p.stdout[-600:], p.stderr))
    check('saving says what exit 1 means', "baseline accepted.json saved; exit 1 is this run's "
          'drift' in p.stderr, p.stderr)
    broken = os.path.join(root, 'broken.h5')
    with open(broken, 'w') as fh:
        fh.write('not a dump')
    p = subprocess.run(['bash', '-c', script.replace(B, broken) + 'echo done\n'], cwd=root,
                       env=env, capture_output=True, text=True)
    check('an error (exit 2) still stops the example', p.returncode != 0 and
          'done' not in p.stdout, (p.returncode, p.stdout[-300:], p.stderr))
    bug = copy_with(B, 'sb_bug.h5', lambda f: f['gradients/fc2.bias'].__setitem__(
        Ellipsis, f['gradients/fc2.bias'][()] * 1.01))
    rc, out, err = run(['--baseline', os.path.join(root, 'accepted.json'), '--save-baseline',
                        os.path.join(root, 'next.json'), A, bug])
    check('--baseline with --save-baseline: the gate fails on new drift, exit 1', rc == 1 and
          os.path.exists(os.path.join(root, 'next.json')), (rc, err))


def test_docs_workflow():
    """Every line of the ```sh blocks of docs/review.md, run from a copy of the fixtures' layout
    with paritycheck on the PATH; each must exit as its '# exit N' comment says."""
    text = open(os.path.join(SRC, 'docs', 'review.md')).read()
    blocks = re.findall(r'```sh\n(.*?)```', text, re.S)
    cmds = [l for b in blocks for l in b.splitlines() if l.strip()]
    check('docs/review.md has the workflow', len(cmds) >= 5, cmds)
    root = os.path.join(WORK, 'docs-run')
    os.makedirs(os.path.join(root, 'bin'))
    os.symlink(os.path.join(SRC, 'fixtures'), os.path.join(root, 'fixtures'))
    os.symlink(os.path.abspath(BIN), os.path.join(root, 'bin', 'paritycheck'))
    env = dict(ENV, PATH=os.path.join(root, 'bin') + os.pathsep + os.environ['PATH'])
    for cmd in cmds:
        want = re.search(r'# exit (\d+)\s*$', cmd)
        p = subprocess.run(['bash', '-c', cmd], cwd=root, env=env, capture_output=True, text=True)
        check('docs: %s' % cmd[:90], want and p.returncode == int(want.group(1)),
              (p.returncode, p.stdout[-1500:], p.stderr[-500:]))
    out = subprocess.run(['bash', '-c', cmds[-1]], cwd=root, env=env, capture_output=True,
                         text=True).stdout
    check('docs: the bug fails on the unapproved tensor as the page says',
          'GATE FAIL: 1 tensor fails the approvals approvals.yaml (slack 0.25) (first: '
          '/gradients/fc2.bias)' in out, out[-800:])


def main():
    global BIN, SRC, WORK, A, B
    BIN, SRC = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    A = os.path.join(SRC, 'fixtures/real/attention_cpu_fp32.h5')
    B = os.path.join(SRC, 'fixtures/real/attention_cuda_tf32.h5')
    with tempfile.TemporaryDirectory() as work:
        WORK = work
        return run_tests([test_cycle, test_hand_edited_errors, test_approval_gate_one_verdict,
                          test_save_baseline_under_set_e, test_docs_workflow])


if __name__ == '__main__':
    sys.exit(main())
