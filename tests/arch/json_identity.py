#!/usr/bin/python3
"""The architecture work (issue 14) moved code, not numbers: every figure and verdict on every
fixture pair is the same from the binary built at the last commit before it (OLD_REV) and from
this one. Usage: json_identity.py OLD_BIN NEW_BIN REPO. A figure is compared as the JSON text
both write (17 significant digits), so 'equal' means byte-identical; verdicts are compared
under tolerance files with elementwise criteria only, which both versions read the same way.
Fields the old schema lacks (reasons, context, ...) are new and not compared."""
import glob
import json
import os
import subprocess
import sys
import tempfile

OLD_REV = 'd4955c3'  # 'Review: JUnit's full-precision worst line ...', before the result model
# Per-tensor fields that carry figures or the verdict; 'tolerance' is left out (the new one also
# names the run-level allowances).
FIELDS = ['path', 'dtype_a', 'dtype_b', 'compare_dtype', 'shape', 'count', 'mismatches',
          'nan_mismatches', 'inf_mismatches', 'max_abs', 'max_rel', 'max_ulp', 'mean_abs',
          'mean_rel', 'mean_ulp', 'rms', 'rel_rms', 'cosine', 'snr_db', 'scale_error', 'worst',
          'quantiles', 'ulp_hist']
# Verdicts are no longer compared: the judge of issue 29 decides them from structural evidence
# and may call a tensor indeterminate, by design; the figures above must still be identical.


def pairs(repo):
    """Every fixture pair a user runs: each family's CPU float32 dump against each other dump."""
    out = []
    for folder in ('real', 'zoo'):
        for ref in sorted(glob.glob(os.path.join(repo, 'fixtures', folder, '*_cpu_fp32.h5'))):
            family = ref[:-len('_cpu_fp32.h5')]
            for other in sorted(glob.glob(family + '_*.h5')):
                if other != ref and os.path.basename(other)[len(os.path.basename(family)) + 1:] \
                        .split('_')[0] in ('cpu', 'cuda'):
                    out.append((ref, other))
    return out


def run(binary, tol, a, b, tmp):
    path = os.path.join(tmp, 'r.json')
    p = subprocess.run([binary, '-j', '1', '-t', tol, '--json', path, a, b],
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if p.returncode not in (0, 1):
        raise RuntimeError('%s %s %s: exit %d: %s' % (binary, a, b, p.returncode, p.stderr))
    with open(path) as fh:
        return json.load(fh)


def differences(old, new):
    diffs = []
    by_path = {t['path']: t for t in new['tensors']}
    for t in old['tensors']:
        n = by_path.get(t['path'])
        if n is None:
            diffs.append('%s: missing in the new report' % t['path'])
            continue
        for f in FIELDS:
            if f in t and json.dumps(t[f], sort_keys=True) != json.dumps(n.get(f), sort_keys=True):
                diffs.append('%s: %s: old %s, new %s' % (t['path'], f, json.dumps(t[f])[:80],
                                                         json.dumps(n.get(f))[:80]))
    if len(old['tensors']) != len(new['tensors']):
        diffs.append('tensor count: old %d, new %d' % (len(old['tensors']), len(new['tensors'])))
    return diffs


def main(argv):
    old_bin, new_bin, repo = argv[1:4]
    tols = [os.path.join(repo, 'tests', 'cli', name) for name in ('strict.yaml', 'loose.yaml')]
    failures, compared = 0, 0
    with tempfile.TemporaryDirectory() as tmp:
        for a, b in pairs(repo):
            for tol in tols:
                diffs = differences(run(old_bin, tol, a, b, tmp), run(new_bin, tol, a, b, tmp))
                compared += 1
                for d in diffs[:5]:
                    print('DIFF %s vs %s (%s): %s' % (os.path.basename(a), os.path.basename(b),
                                                      os.path.basename(tol), d))
                failures += bool(diffs)
    print('%d of %d runs identical' % (compared - failures, compared))
    return 1 if failures or not compared else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
