#!/usr/bin/python3
"""End-to-end tests of tolerance rules that match by what a tensor is (issue 32, item 2:
`match_module_type`, `match_attr`, docs/tolerances.md) and of the MPS starting profile
(item 3, tolerances/mps.yaml).

    /usr/bin/python3 tests/cli/test_module_rules.py PATH/TO/paritycheck WORK_DIR

The dumps are written here with h5py, with the attributes python/paritycheck/dump.py writes
(`module`, `module_type` on datasets; `backend` on the file). Every tensor of B is A scaled by
(1 + REL), so each element's relative error is REL up to one float32 rounding: more than the
built-in float32 rtol (1.3e-6, torch's default) and the built-in atol (1e-5) for |a| >= 1, and
less than the rules' rtol of 3e-5. Which tensors pass therefore tells which rules applied.
"""

import os
import re
import sys

import h5py
import numpy as np
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(HERE, '..'))
from checks import check, run_tests  # noqa: E402
import cli_common  # noqa: E402
from cli_common import run, run_json  # noqa: E402

BIN = None
WORK = None
REL = 1.0e-5
BUILTIN_RTOL = 1.3e-6  # tolerances/default.yaml, float32
RULE_RTOL = 3.0e-5

# path -> module_type (None: the dataset has no module_type attribute)
TENSORS = {'/model/stem': 'Conv2d', '/model/bn': 'BatchNorm2d', '/model/fc': 'Linear',
           '/inputs/x': None}



def verdicts(r):
    return {t['path']: t['verdict'] for t in r['tensors']} if r else {}


def write_pair(name, types=True):
    """A and B dumps of TENSORS; values in [1, 2) so that atol never decides."""
    paths = []
    for side, backend in (('a', 'cpu'), ('b', 'mps')):
        path = os.path.join(WORK, '%s_%s.h5' % (name, side))
        with h5py.File(path, 'w', track_order=True) as f:
            f.attrs['backend'] = backend
            for k, (dset, mtype) in enumerate(TENSORS.items()):
                a = (1.0 + np.random.default_rng(k).random(256)).astype(np.float32)
                v = a if side == 'a' else (a.astype(np.float64) * (1.0 + REL)).astype(np.float32)
                d = f.create_dataset(dset, data=v)
                d.attrs['execution_index'] = k
                if types and mtype is not None:
                    d.attrs['module'] = dset.rsplit('/', 1)[1]
                    d.attrs['module_type'] = mtype
        paths.append(path)
    return paths


def tol_file(name, text):
    path = os.path.join(WORK, name)
    with open(path, 'w') as f:
        f.write(text)
    return path


def test_inputs_are_what_the_docstring_says():
    a, b = write_pair('check')
    with h5py.File(a) as fa, h5py.File(b) as fb:
        for dset in TENSORS:
            x = fa[dset][()].astype(np.float64)
            rel = np.abs(fb[dset][()].astype(np.float64) - x) / np.abs(x)
            check('inputs %s: rel error above the built-in rtol' % dset,
                  rel.min() > BUILTIN_RTOL and x.min() >= 1.0, rel.min())
            check('inputs %s: rel error within the rule rtol' % dset, rel.max() < RULE_RTOL,
                  rel.max())


def test_no_rules_everything_drifts():
    a, b = write_pair('none')
    p, r = run_json([a, b])
    check('no rules: exit 1', p.returncode == 1, p.stderr)
    check('no rules: all drift', set(verdicts(r).values()) == {'drift'}, verdicts(r))


def test_type_rule_changes_only_its_type():
    a, b = write_pair('conv')
    t = tol_file('conv.yaml', 'version: 1\nrules:\n'
                 '  - match_module_type: Conv2d\n    float32: {rtol: %r}\n' % RULE_RTOL)
    p, r = run_json([a, b, '-t', t])
    v = verdicts(r)
    check('conv rule: exit 1 (others still drift)', p.returncode == 1, p.stderr)
    check('conv rule: Conv2d passes, the rest drift',
          v == {'/model/stem': 'pass', '/model/bn': 'drift', '/model/fc': 'drift',
                '/inputs/x': 'drift'}, v)
    tol = {x['path']: x['tolerance'] for x in r['tensors']} if r else {}
    check('conv rule: the applied rtol is the rule\'s',
          tol.get('/model/stem', {}).get('rtol') == RULE_RTOL and
          tol.get('/model/bn', {}).get('rtol') == BUILTIN_RTOL, tol)


def test_lists_globs_attrs_and_the_path():
    a, b = write_pair('all')
    t = tol_file('all.yaml', 'version: 1\nrules:\n'
                 '  - match_module_type: [Conv2d, Linear]\n    float32: {rtol: %r}\n'
                 "  - match_module_type: 'BatchNorm*'\n    float32: {rtol: %r}\n"
                 '  - match_attr: {backend: mps}\n    match: /inputs/*\n'
                 '    float32: {rtol: %r}\n' % (RULE_RTOL, RULE_RTOL, RULE_RTOL))
    # backend: mps is B's file attribute: B may not choose its own rule (issue 38) ...
    p, r = run_json([a, b, '-t', t])
    check('attr on B only: the rule does not apply', verdicts(r).get('/inputs/x') == 'drift',
          verdicts(r))
    # ... unless the user trusts B's metadata
    p, r = run_json([a, b, '-t', t, '--trust-b-metadata'])
    check('list, glob, attr: exit 0', p.returncode == 0, (p.stderr, verdicts(r)))
    check('list, glob, attr: all pass', set(verdicts(r).values()) == {'pass'}, verdicts(r))
    # Both the glob and the type must match.
    t = tol_file('both.yaml', 'version: 1\nrules:\n'
                 "  - match: '/elsewhere/*'\n    match_module_type: Conv2d\n"
                 '    float32: {rtol: %r}\n' % RULE_RTOL)
    p, r = run_json([a, b, '-t', t])
    check('glob and type: the type alone does not apply',
          verdicts(r).get('/model/stem') == 'drift', verdicts(r))
    # A file attribute that neither side has the value of.
    t = tol_file('cuda.yaml', 'version: 1\nrules:\n'
                 '  - match_attr: {backend: cuda}\n    float32: {rtol: %r}\n' % RULE_RTOL)
    p, r = run_json([a, b, '-t', t])
    check('attr value not on either side: nothing passes',
          set(verdicts(r).values()) == {'drift'}, verdicts(r))


def test_files_without_the_attribute():
    a, b = write_pair('untyped', types=False)
    t = tol_file('untyped.yaml', 'version: 1\nrules:\n'
                 '  - match_module_type: Conv2d\n    float32: {rtol: %r}\n'
                 '  - match_attr: {module: stem}\n    float32: {rtol: %r}\n'
                 % (RULE_RTOL, RULE_RTOL))
    p, r = run_json([a, b, '-t', t])
    check('untyped: exit 1, not 2', p.returncode == 1, p.stderr)
    check('untyped: type rules do not apply', set(verdicts(r).values()) == {'drift'},
          verdicts(r))
    check('untyped: no warning about the type rules', r is not None and r['warnings'] == [],
          r and r['warnings'])


def test_bad_rule_is_an_error():
    a, b = write_pair('bad')
    t = tol_file('bad.yaml', 'version: 1\nrules:\n  - match_module_type: []\n')
    p = run([a, b, '-t', t])
    check('bad rule: exit 2', p.returncode == 2, p.stderr)
    check('bad rule: message', "bad.yaml:3:24: 'match_module_type' must not be an empty list"
          in p.stderr, p.stderr)


# ---- tolerances/mps.yaml ------------------------------------------------------------------

MPS = os.path.join(ROOT, 'tolerances', 'mps.yaml')

# (module types of a rule, compare dtype, atol, rtol) as read in PyTorch's test/test_mps.py,
# TestConsistency._compute_tolerances (docs in the profile). Written out here, not read from the
# profile, so that a changed profile fails this test.
MPS_FIGURES = [
    (['Conv2d', 'ConvTranspose2d'], 'float32', 1e-4, 3e-5),   # FP32_LOW_PRECISION_LIST
    (['LayerNorm'], 'float32', 1e-4, 1.3e-5),                  # native_layer_norm
    (['BatchNorm*', 'LayerNorm', 'GroupNorm', 'InstanceNorm*', 'Softmax', 'LogSoftmax',
      'Softmin', 'GELU', 'GLU', 'MaxPool2d'], 'float16', 2e-2, 1e-2),   # FP16_LOW_PRECISION_LIST
    (['BatchNorm*', 'LayerNorm', 'GroupNorm', 'InstanceNorm*', 'Softmax', 'LogSoftmax',
      'Softmin', 'GELU', 'GLU', 'MaxPool2d'], 'bfloat16', 5e-2, 5e-2),
    (['ConvTranspose1d', 'ConvTranspose2d', 'ConvTranspose3d', 'Linear'], 'float16', 5e-2, 5e-2),
    (['ConvTranspose1d', 'ConvTranspose2d', 'ConvTranspose3d'], 'bfloat16', 5e-2, 1e-1),
    (['Linear'], 'bfloat16', 5e-2, 5e-2),                      # BF16_LOW_PRECISION_LIST
]


def mps_rules():
    with open(MPS) as f:
        doc = yaml.safe_load(f)
    out = []
    for rule in doc.get('rules') or []:
        types = rule.get('match_module_type')
        types = [types] if isinstance(types, str) else types
        out.append((types, rule))
    return out


def test_mps_profile_loads_and_runs():
    a = os.path.join(ROOT, 'fixtures', 'real', 'mixer_cpu_fp32.h5')
    b = os.path.join(ROOT, 'fixtures', 'real', 'mixer_cuda_fp32.h5')
    p, r = run_json(['--profile', 'mps', a, b])
    check('mps profile: runs without error', p.returncode in (0, 1) and r is not None,
          (p.returncode, p.stderr))
    check('mps profile: named in the report', r is not None and r['profile'] == 'mps',
          r and r['profile'])
    # The fixture has Conv2d and LayerNorm tensors (dump.py's module_type): their rules apply.
    with h5py.File(a) as f:
        types = {'/activations/' + k: f['activations'][k].attrs.get('module_type')
                 for k in f['activations']}
    tol = {t['path']: t['tolerance'] for t in r['tensors']} if r else {}
    conv = [pth for pth, ty in types.items() if ty == 'Conv2d']
    ln = [pth for pth, ty in types.items() if ty == 'LayerNorm']
    check('mps profile: the fixture has Conv2d and LayerNorm outputs', conv and ln, types)
    check('mps profile: Conv2d gets at least atol 1e-4, rtol 3e-5',
          all(tol[x]['atol'] >= 1e-4 and tol[x]['rtol'] >= 3e-5 for x in conv),
          [tol.get(x) for x in conv])
    check('mps profile: LayerNorm gets at least atol 1e-4, rtol 1.3e-5',
          all(tol[x]['atol'] >= 1e-4 and tol[x]['rtol'] >= 1.3e-5 for x in ln),
          [tol.get(x) for x in ln])


def test_mps_profile_cites_each_figure():
    rules = mps_rules()
    for types, dtype, atol, rtol in MPS_FIGURES:
        for ty in types:
            hit = [r for ts, r in rules if ts and ty in ts and
                   (r.get(dtype) or {}).get('atol') == atol and
                   (r.get(dtype) or {}).get('rtol') == rtol]
            check('mps.yaml: %s %s has (atol %g, rtol %g)' % (ty, dtype, atol, rtol), hit,
                  [(ts, r.get(dtype)) for ts, r in rules if ts and ty in ts])
    text = open(MPS).read()
    check('mps.yaml: cites test/test_mps.py and _compute_tolerances',
          'test/test_mps.py' in text and 'TestConsistency._compute_tolerances' in text)
    for lst in ('FP32_LOW_PRECISION_LIST', 'FP16_LOW_PRECISION_LIST', 'BF16_LOW_PRECISION_LIST'):
        check('mps.yaml: names %s' % lst, lst in text)
    # Every line that sets a number carries a comment that says where it comes from.
    for n, line in enumerate(text.splitlines(), 1):
        if re.search(r'\b(atol|rtol)\s*:\s*[0-9]', line):
            check('mps.yaml:%d: a number with its source' % n, '#' in line, line)
    check('mps.yaml: says it is a starting point, not calibrated on Apple hardware',
          'starting point' in text and 'not calibrated on Apple hardware' in text)
    check('mps.yaml: shows the calibrate command',
          'python3 -m paritycheck.calibrate --base mps --trios' in text and
          'docs/calibrate.md' in text)


def main():
    global BIN, WORK
    BIN, WORK = sys.argv[1], sys.argv[2]
    cli_common.setup(BIN, WORK)
    os.makedirs(WORK, exist_ok=True)
    return run_tests([test_inputs_are_what_the_docstring_says, test_no_rules_everything_drifts,
                      test_type_rule_changes_only_its_type, test_lists_globs_attrs_and_the_path,
                      test_files_without_the_attribute, test_bad_rule_is_an_error,
                      test_mps_profile_loads_and_runs, test_mps_profile_cites_each_figure])


if __name__ == '__main__':
    sys.exit(main())
