#!/usr/bin/python3
"""End-to-end tests of folder mode, name mapping and provenance (issue 15, parts 2 and 3).

    /usr/bin/python3 tests/cli/test_folders.py PATH/TO/paritycheck WORK_DIR

Every dump is made here with h5py; expected figures come from numpy, expected pairings and
suggestions from the names written. Prints one line per failure and a last line
"N passed, M failed"; the exit status is 1 when anything failed.
"""

import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..'))
from checks import check, run_tests  # noqa: E402
import cli_common  # noqa: E402
from cli_common import fresh, run, run_json, write_h5  # noqa: E402

BIN = None
WORK = None



def by_path(report):
    return {t['path']: t for t in report['tensors']}


# --- folders ----------------------------------------------------------------------------------

SHARDS = ['step_1/rank_0.h5', 'step_1/rank_1.h5', 'step_2/rank_0.h5', 'step_2/rank_1.h5']


def make_shards():
    """Two steps of two ranks on each side; B lacks step_2/rank_1.h5 and has step_2/rank_2.h5
    instead; one tensor of step_1/rank_1.h5 drifts; a text file sits beside the dumps."""
    root = fresh('shards')
    rng = np.random.default_rng(15)
    data = {}
    for rel in SHARDS + ['step_2/rank_2.h5']:
        x = rng.standard_normal(64).astype(np.float32)
        y = rng.standard_normal((4, 5))
        data[rel] = (x, y)
    drift = data['step_1/rank_1.h5'][0] * np.float32(1 + 1e-3)
    for side in 'AB':
        rels = SHARDS if side == 'A' else SHARDS[:3] + ['step_2/rank_2.h5']
        for rel in rels:
            x, y = data[rel]
            if side == 'B' and rel == 'step_1/rank_1.h5':
                x = drift
            write_h5(os.path.join(root, side, rel), {'/x': x, '/y': y})
        with open(os.path.join(root, side, 'README.txt'), 'w') as f:
            f.write('not a dump\n')
    return os.path.join(root, 'A'), os.path.join(root, 'B'), data, drift


def test_folders_pair_shards():
    a, b, data, drift = make_shards()
    p, r = run_json([a, b])
    if not check('folders: JSON report', r is not None, p.stderr):
        return
    check('folders: exit 1 (drift, missing files)', p.returncode == 1, p.returncode)
    t = by_path(r)
    # step order (README, "Folders"): the step files, then README.txt, which holds no number
    expected_paths = ['%s:/%s' % (rel, n) for rel in SHARDS[:3] for n in 'xy'] + \
        ['step_2/rank_1.h5', 'step_2/rank_2.h5', 'README.txt']
    check('folders: tensors in file order', [x['path'] for x in r['tensors']] == expected_paths,
          [x['path'] for x in r['tensors']])
    check('folders: file field', t['step_1/rank_0.h5:/x'].get('file') == 'step_1/rank_0.h5',
          t['step_1/rank_0.h5:/x'])
    check('folders: non-dump skipped', t['README.txt']['verdict'] == 'skipped' and
          t['README.txt'].get('message') == 'not a tensor dump', t['README.txt'])
    check('folders: file only in A', t['step_2/rank_1.h5']['verdict'] == 'missing_in_b',
          t['step_2/rank_1.h5'])
    check('folders: file only in B', t['step_2/rank_2.h5']['verdict'] == 'missing_in_a',
          t['step_2/rank_2.h5'])
    x = data['step_1/rank_1.h5'][0].astype(np.float64)
    want = np.max(np.abs(drift.astype(np.float64) - x))
    got = t['step_1/rank_1.h5:/x']
    check('folders: the drifting shard drifts', got['verdict'] == 'drift', got['verdict'])
    check('folders: max_abs of the drifting shard', got.get('max_abs') == want,
          (got.get('max_abs'), want))
    passing = [k for k, v in t.items() if v['verdict'] == 'pass']
    check('folders: the other five pairs pass', len(passing) == 5, passing)
    # execution order: file by file in step order, A's order within a file
    order = sorted(r['tensors'], key=lambda x: x['execution_index'])
    check('folders: execution order follows the files',
          [x['path'] for x in order] == expected_paths, [x['path'] for x in order])


def test_folder_against_file():
    a, _, _, _ = make_shards()
    p = run([a, os.path.join(a, SHARDS[0])])
    check('folder vs file: exit 2', p.returncode == 2, p.returncode)
    check('folder vs file: says so', 'is a directory' in p.stderr, p.stderr)


def test_folder_file_unreadable():
    root = fresh('corrupt')
    for side in 'AB':
        write_h5(os.path.join(root, side, 'r0.h5'), {'/x': np.ones(3)})
    with open(os.path.join(root, 'B', 'r0.h5'), 'r+b') as f:
        f.truncate(600)  # the superblock stays, the objects go
    p, r = run_json([os.path.join(root, 'A'), os.path.join(root, 'B')])
    check('unreadable shard: exit 2', p.returncode == 2, (p.returncode, p.stderr))
    check('unreadable shard: one error tensor naming the file',
          r is not None and [(t['path'], t['verdict']) for t in r['tensors']] == [('r0.h5', 'error')],
          r and r['tensors'])


# --- include, exclude, map, strip-prefix --------------------------------------------------------

def test_include_exclude():
    a, b, _, _ = make_shards()
    p, r = run_json([a, b, '--include', 'step_1/*', '--exclude', '*/x'])
    if not check('include/exclude: JSON', r is not None, p.stderr):
        return
    # A file on one side only always counts, whatever the globs (issue 30): it may hold
    # tensors they select. step_2/rank_1.h5 is only in A, step_2/rank_2.h5 only in B.
    lone = ['step_2/rank_1.h5', 'step_2/rank_2.h5']
    check('include/exclude: only step_1 /y, and the lone files', [t['path'] for t in r['tensors']] ==
          ['step_1/rank_0.h5:/y', 'step_1/rank_1.h5:/y'] + lone, [t['path'] for t in r['tensors']])
    check('include/exclude: exit 1 (the lone files)', p.returncode == 1, p.returncode)
    p, r = run_json([a, b, '--include', '/y'])
    check('include on the dataset path alone', r is not None and
          [t['path'] for t in r['tensors']] ==
          ['%s:/y' % rel for rel in SHARDS[:3]] + lone,
          r and [t['path'] for t in r['tensors']])
    p = run([a, b, '--include', '[x'])
    check('include: a bad glob is exit 2', p.returncode == 2 and '[x' in p.stderr,
          (p.returncode, p.stderr))


def make_ddp():
    """A plain model's dump and the same model's under DDP: every name of B has "module." in
    front of its module path, as torch's DistributedDataParallel names them."""
    root = fresh('ddp')
    rng = np.random.default_rng(7)
    fc = rng.standard_normal((3, 4)).astype(np.float32)
    w = rng.standard_normal(4).astype(np.float32)
    out = rng.standard_normal(5).astype(np.float32)
    a = os.path.join(root, 'a.h5')
    b = os.path.join(root, 'b.h5')
    write_h5(a, {'/activations/000_fc': fc, '/activations/001_head': out,
                 '/gradients/fc.weight': w})
    write_h5(b, {'/activations/000_module.fc': fc, '/activations/001_module.head': out * 2,
                 '/gradients/module.fc.weight': w})
    return a, b, out


def test_nothing_in_common():
    a, b, _ = make_ddp()
    p = run([a, b])
    check('nothing in common: exit 2', p.returncode == 2, (p.returncode, p.stdout))
    check('nothing in common: hint names the options',
          '--strip-prefix' in p.stderr and '--map' in p.stderr, p.stderr)
    check('nothing in common: one name of each side',
          '/activations/000_fc' in p.stderr and '/activations/000_module.fc' in p.stderr, p.stderr)


def test_strip_prefix():
    a, b, out = make_ddp()
    p, r = run_json([a, b, '--strip-prefix', 'module.'])
    if not check('strip-prefix: JSON', r is not None, p.stderr):
        return
    t = by_path(r)
    check('strip-prefix: every tensor paired', sorted(t) ==
          ['/activations/000_fc', '/activations/001_head', '/gradients/fc.weight'], sorted(t))
    check('strip-prefix: the doubled head drifts', t['/activations/001_head']['verdict'] == 'drift',
          t['/activations/001_head']['verdict'])
    want = float(np.max(np.abs(out.astype(np.float64))))  # |2x - x| = |x|
    check('strip-prefix: max_abs of the head', t['/activations/001_head'].get('max_abs') == want,
          (t['/activations/001_head'].get('max_abs'), want))
    check('strip-prefix: the rest passes', t['/activations/000_fc']['verdict'] == 'pass' and
          t['/gradients/fc.weight']['verdict'] == 'pass', t)


def test_map():
    a, b, _ = make_ddp()
    p, r = run_json([a, b, '--map', '/activations/*_module.*=/activations/*_*',
                     '--map', '/gradients/module.=/gradients/'])
    if not check('map: JSON', r is not None, p.stderr):
        return
    check('map: every tensor paired', sorted(by_path(r)) ==
          ['/activations/000_fc', '/activations/001_head', '/gradients/fc.weight'],
          sorted(by_path(r)))
    p = run([a, b, '--map', 'nothing'])
    check('map: without = is exit 2', p.returncode == 2 and '--map' in p.stderr, p.stderr)
    p = run([a, b, '--map', '/a=/*'])
    check('map: more stars in TO is exit 2', p.returncode == 2, p.stderr)


def test_did_you_mean():
    """Modules renamed between A and B (the call indices agree)."""
    root = fresh('renamed')
    a, b = os.path.join(root, 'a.h5'), os.path.join(root, 'b.h5')
    v = np.arange(4.0)
    write_h5(a, {'/000_embed': v, '/001_layer': v, '/002_head': v})
    write_h5(b, {'/000_embed': v, '/001_layers': v, '/002_heads': v, '/003_norm': v})
    p, r = run_json([a, b])
    if not check('did you mean: JSON', r is not None, p.stderr):
        return
    t = by_path(r)
    # edit distances: 001_layer -> 001_layers 1, 002_head -> 002_heads 1
    check('did you mean: A side', t['/001_layer'].get('did_you_mean') == '/001_layers' and
          t['/002_head'].get('did_you_mean') == '/002_heads', t)
    check('did you mean: B side', t['/002_heads'].get('did_you_mean') == '/002_head', t)
    # "/003_norm" is 5 edits from "/001_layer" and more from the rest: beyond 9 // 4 = 2
    check('did you mean: none when too far', 'did_you_mean' not in t['/003_norm'], t['/003_norm'])
    check('did you mean: no re-alignment (no name pairs but for its index)',
          not r.get('warnings'), r.get('warnings'))
    p = run([a, b])
    check('did you mean: in the text report', 'did you mean /001_layers?' in p.stdout, p.stdout)


def _calls(names, values):
    """{"/activations/NNN_name": values[name][k]} for the k-th call of each name, in order."""
    seen, out = {}, {}
    for i, name in enumerate(names):
        k = seen.get(name, 0)
        seen[name] = k + 1
        out['/activations/%03d_%s' % (i, name)] = values[name][k]
    return out


def test_realigned_call_indices():
    """One extra module call in B shifts every later call index: the dumper's names pair by
    module path and call order, only the extra call is unpaired, and a warning says so once.
    Each call holds its own values, so a wrong pair would drift."""
    rng = np.random.default_rng(5)
    values = {n: [rng.standard_normal(6) for _ in range(2)]
              for n in ('embed', 'block.ln1', 'block.attn', 'block.ln2', 'act', 'head', 'extra')}
    calls_a = ['embed', 'block.ln1', 'block.attn', 'block.ln2', 'act', 'head', 'act']
    calls_b = calls_a[:2] + ['extra'] + calls_a[2:]
    cases = (('one extra call', calls_a, calls_b, ['/activations/002_extra'], 5,
              "A's /activations/002_block.attn with B's /activations/003_block.attn"),
             # B's names under DDP's module. (the names are then copies: --strip-prefix)
             ('one extra call, --strip-prefix', calls_a, ['module.' + c for c in calls_b],
              ['/activations/002_extra'], 5,
              "A's /activations/002_block.attn with B's /activations/003_module.block.attn"),
             # two extra calls: A's 003_act (its second act) and B's 003_act (its first) have
             # the same name, and must not pair
             ('two extra calls', ['embed', 'act', 'head', 'act'],
              ['extra', 'block.ln1', 'embed', 'act', 'head', 'act'],
              ['/activations/000_extra', '/activations/001_block.ln1'], 4,
              "A's /activations/000_embed with B's /activations/002_embed"))
    for label, ca, cb, lone, moved, example in cases:
        root = fresh('realign')
        a, b = os.path.join(root, 'a.h5'), os.path.join(root, 'b.h5')
        grad = {'/gradients/w': np.arange(3.0)}
        write_h5(a, dict(_calls(ca, values), **grad))
        strip = ['--strip-prefix', 'module.'] if cb[0].startswith('module.') else []
        values_b = dict(values, **{'module.' + k: v for k, v in values.items()})
        write_h5(b, dict(_calls(cb, values_b), **grad))
        p, r = run_json(strip + [a, b])
        if not check('%s: JSON' % label, r is not None, p.stderr):
            continue
        t = by_path(r)
        verdicts = {k: v['verdict'] for k, v in t.items()}
        want = dict({k: 'pass' for k in _calls(ca, values)}, **{k: 'missing_in_a' for k in lone})
        want['/gradients/w'] = 'pass'
        check('%s: every call paired and equal, only the extra unpaired (exit 1)' % label,
              p.returncode == 1 and verdicts == want, verdicts)
        check('%s: no "did you mean" for the extra call' % label,
              all('did_you_mean' not in t[k] for k in lone), [t[k] for k in lone])
        warning = ('the call indices (NNN_) of A and B disagree: %d tensors paired by module '
                   'path and call order instead of by name, e.g. %s' % (moved, example))
        check('%s: said once' % label, r.get('warnings') == [warning], r.get('warnings'))
        q = run(strip + [a, b])
        check('%s: the warning on stderr, once' % label,
              q.stderr.count('call indices') == 1 and warning in q.stderr, q.stderr)


def test_unused_rule_warning():
    a, b, _ = make_ddp()
    tol = os.path.join(WORK, 'rules.yaml')
    with open(tol, 'w') as f:
        f.write('version: 1\nrules:\n  - match: "/activations/*"\n    float32: {rtol: 1.0e-3}\n'
                '  - match: "/encoder/*"\n    float32: {rtol: 1.0e-3}\n')
    p, r = run_json([a, b, '--strip-prefix', 'module.', '-t', tol])
    check('unused rule: on stderr', "tolerance rule '/encoder/*' matches no tensor" in p.stderr
          and '/activations/*' not in p.stderr, p.stderr)
    check('unused rule: in JSON', r is not None and
          r.get('warnings') == ["tolerance rule '/encoder/*' matches no tensor"], r and r.get('warnings'))


# --- provenance ----------------------------------------------------------------------------------

PROV_A = {'backend': 'cpu', 'torch_version': '1.13.1', 'num_threads': np.int64(16),
          'allow_tf32': np.bool_(False), 'only_a': 'x'}
PROV_B = {'backend': 'cuda', 'torch_version': '1.13.1', 'num_threads': np.int64(16),
          'allow_tf32': np.bool_(True), 'only_b': np.float64(1.5)}
# differs: A's attributes in A's order, then B's own
PROV_DIFFERS = ['backend', 'allow_tf32', 'only_a', 'only_b']


def make_provenance():
    root = fresh('prov')
    a, b = os.path.join(root, 'a.h5'), os.path.join(root, 'b.h5')
    write_h5(a, {'/x': np.ones(3)}, PROV_A)
    write_h5(b, {'/x': np.ones(3)}, PROV_B)
    return root, a, b


def test_provenance_every_format():
    root, a, b = make_provenance()
    md, xml, html = (os.path.join(root, 'r.' + e) for e in ('md', 'xml', 'html'))
    p, r = run_json([a, b, '--markdown', md, '--junit', xml, '--html', html])
    if not check('provenance: JSON', r is not None, p.stderr):
        return
    prov = r.get('provenance', {})
    check('provenance: JSON a', prov.get('a') == {'backend': 'cpu', 'torch_version': '1.13.1',
                                                  'num_threads': 16, 'allow_tf32': False,
                                                  'only_a': 'x'}, prov.get('a'))
    check('provenance: JSON b types', prov.get('b', {}).get('only_b') == 1.5 and
          prov['b'].get('allow_tf32') is True and prov['b'].get('num_threads') == 16, prov.get('b'))
    check('provenance: JSON differs', prov.get('differs') == PROV_DIFFERS, prov.get('differs'))
    text = run([a, b]).stdout.splitlines()
    check('provenance: text marks a difference',
          any(ln.startswith('* backend') and 'cpu' in ln and 'cuda' in ln for ln in text), text)
    check('provenance: text shows only the differing attributes by default',
          not any('torch_version' in ln for ln in text) and
          'provenance: 4 of 6 attributes differ (A | B; -v shows all)' in text, text)
    text = run([a, b, '-v']).stdout.splitlines()
    check('provenance: -v shows an equal one too, unmarked',
          any(ln.startswith('  torch_version') for ln in text), text)
    with open(md) as f:
        m = f.read()
    check('provenance: Markdown', '| **`backend`** (differs) | `cpu` | `cuda` |' in m and
          '| `torch_version` | `1.13.1` | `1.13.1` |' in m and '| **`only_b`** (differs) | `-` |' in m,
          m)
    with open(xml) as f:
        x = f.read()
    check('provenance: JUnit properties',
          '<property name="provenance.a.backend" value="cpu"/>' in x and
          '<property name="provenance.b.backend" value="cuda"/>' in x and
          '<property name="provenance.differs" value="%s"/>' % ','.join(PROV_DIFFERS) in x, x)
    with open(html) as f:
        h = f.read()
    check('provenance: HTML', '<h2>Provenance</h2>' in h and
          '<th class="differs"><bdi>backend</bdi> (differs)</th>' in h, h[:3000])


def test_provenance_folders():
    """An attribute with another value in each file of a side reads as varying."""
    root = fresh('prov_dirs')
    for side in 'AB':
        for rank in range(2):
            write_h5(os.path.join(root, side, 'rank_%d.h5' % rank), {'/x': np.ones(2)},
                     {'rank': np.int64(rank), 'backend': 'cpu'})
    p, r = run_json([os.path.join(root, 'A'), os.path.join(root, 'B')])
    prov = r and r.get('provenance')
    check('provenance folders: varying rank', prov and prov['a'] ==
          {'rank': '(varies across files)', 'backend': 'cpu'} and prov['differs'] == [], prov)


def test_baseline_profile_warning():
    root, a, b = make_provenance()
    base = os.path.join(root, 'base.json')
    p = run([a, b, '--profile', 'tf32', '--save-baseline', base])
    check('baseline profile: saved', p.returncode == 0 and os.path.exists(base), p.stderr)
    # Another profile is another tolerance set, which the baseline records: the gate refuses
    # (issue 30); a baseline without that record (an older file) still gets the warning.
    p = run([a, b, '--baseline', base])
    check('baseline profile: refused under other tolerances', p.returncode == 2 and
          'made under other tolerances' in p.stderr and 'profile tf32' in p.stderr, p.stderr)
    with open(base) as fh:
        doc = json.load(fh)
    del doc['tolerances']
    with open(base, 'w') as fh:
        json.dump(doc, fh)
    p, r = run_json([a, b, '--baseline', base])
    want = "the baseline %s was saved with profile 'tf32', this run uses 'default'" % base
    check('baseline profile: stderr warning', want in p.stderr, p.stderr)
    check('baseline profile: JSON warning', r is not None and want in r.get('warnings', []),
          r and r.get('warnings'))
    p, r = run_json([a, b, '--profile', 'tf32', '--baseline', base])
    check('baseline profile: none for the same profile', 'warning' not in p.stderr and
          r is not None and r.get('warnings') == [], (p.stderr, r and r.get('warnings')))


def main():
    global BIN, WORK
    BIN, WORK = sys.argv[1], sys.argv[2]
    cli_common.setup(BIN, WORK)
    os.makedirs(WORK, exist_ok=True)
    return run_tests([test_folders_pair_shards, test_folder_against_file, test_folder_file_unreadable,
                      test_include_exclude, test_nothing_in_common, test_strip_prefix, test_map,
                      test_did_you_mean, test_realigned_call_indices, test_unused_rule_warning, test_provenance_every_format,
                      test_provenance_folders, test_baseline_profile_warning])


if __name__ == '__main__':
    sys.exit(main())
