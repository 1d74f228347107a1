#!/usr/bin/python3
"""End-to-end tests of the paritycheck binary.

    /usr/bin/python3 tests/cli/test_cli.py PATH/TO/paritycheck FIXTURES_DIR

FIXTURES_DIR is made by tests/gen/make_fixtures.py; its expected.json holds numpy's figures
(tests/oracle/pc_reference.py, docs/metrics.md) for every tensor. The tolerance files are the YAML files
beside this script. Prints one line per failure and a last line "N passed, M failed"; the exit
status is 1 when anything failed.
"""

import json
import os
import pty
import re
import select
import subprocess
import sys
import tempfile

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'oracle'))
sys.path.insert(0, os.path.join(HERE, '..'))
from checks import check, run_tests  # noqa: E402
import pc_reference as ref  # noqa: E402

BIN = None
FIX = None
EXPECTED = None
STRICT = os.path.join(HERE, 'strict.yaml')
LOOSE = os.path.join(HERE, 'loose.yaml')
BAD_KEY = os.path.join(HERE, 'bad_key.yaml')
BAD_SYNTAX = os.path.join(HERE, 'bad_syntax.yaml')
TMP = None

ANSI = re.compile(r'\x1b\[')




def env():
    e = dict(os.environ)
    e.pop('NO_COLOR', None)
    return e


def run(args, timeout=120):
    return subprocess.run([BIN] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          env=env(), timeout=timeout, errors='replace', text=True)


def fx(name):
    return os.path.join(FIX, name)


def pair_paths(pair):
    p = EXPECTED['pairs'][pair]
    return fx(p['a']), fx(p['b'])


_JSON_N = [0]


def run_json(pair, extra=(), tol=True):
    """Run on a fixture pair with --json FILE; returns (process, report or None)."""
    a, b = pair_paths(pair)
    _JSON_N[0] += 1
    out = os.path.join(TMP, '%s_%d.json' % (pair, _JSON_N[0]))
    args = (['-t', STRICT] if tol else []) + list(extra) + ['--json', out, a, b]
    proc = run(args)
    report = None
    try:
        with open(out) as fh:
            report = json.load(fh)
    except (OSError, ValueError) as e:
        proc.json_error = str(e)
    return proc, report


def short(proc):
    return 'rc=%s stderr=%r' % (proc.returncode, proc.stderr[-600:])


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
    exp = EXPECTED['pairs'][pair]
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
    check('strict.yaml == make_fixtures.STRICT_TOLERANCES', spec == EXPECTED['tolerances']['spec'],
          'regenerate or edit one of them')


def test_exit_codes_and_figures():
    for pair in ('pass', 'drift', 'missing', 'shape', 'order', 'order_plain', 'dtypes',
                 'layouts'):
        proc, report = run_json(pair)
        exp = EXPECTED['pairs'][pair]
        check('%s: exit %d' % (pair, exp['exit']), proc.returncode == exp['exit'], short(proc))
        check_report(pair, report)
        if report is not None and pair in ('dtypes', 'layouts', 'pass', 'drift'):
            reference_check('%s: pc_reference check of the report' % pair, pair, report,
                            'check_%s.json' % pair)


REFERENCE = os.path.join(HERE, '..', 'oracle', 'pc_reference.py')


def reference_check(label, pair, report, name):
    """Independent read-back: h5py + numpy recompute every compared tensor of the report, with
    the tolerance each tensor reports."""
    a, b = pair_paths(pair)
    path = os.path.join(TMP, name)
    with open(path, 'w') as fh:
        json.dump(report, fh)
    rp = subprocess.run([sys.executable, REFERENCE, 'check', path, a, b], stdout=subprocess.PIPE,
                        stderr=subprocess.STDOUT, text=True, timeout=300)
    check(label, rp.returncode == 0, rp.stdout[-3000:])


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


def _names_file(p, path, label):
    check('%s: exit 2' % label, p.returncode == 2, short(p))
    check('%s: stderr names the file' % label, path in p.stderr, repr(p.stderr))
    check('%s: error line starts with "paritycheck: "' % label,
          any(line.startswith('paritycheck: ') and path in line
              for line in p.stderr.splitlines()), repr(p.stderr))
    check('%s: no HDF5-DIAG without --debug' % label, 'HDF5-DIAG' not in p.stderr,
          repr(p.stderr[:400]))


def test_bad_files():
    good = pair_paths('pass')[1]
    files = EXPECTED['files']
    for kind in ('corrupt', 'not_hdf5', 'empty'):
        path = fx(files[kind])
        _names_file(run(['-t', STRICT, path, good]), path, '%s as A' % kind)
        _names_file(run(['-t', STRICT, good, path]), path, '%s as B' % kind)
    missing = os.path.join(FIX, 'no_such_file.h5')
    _names_file(run([missing, good]), missing, 'nonexistent A')
    _names_file(run([good, missing]), missing, 'nonexistent B')
    p = run(['--debug', fx(files['corrupt']), good])
    check('corrupt with --debug: exit 2', p.returncode == 2, short(p))
    check('corrupt with --debug: HDF5 error stack shown', 'HDF5-DIAG' in p.stderr,
          repr(p.stderr[:400]))


def test_usage_errors():
    a, b = pair_paths('pass')
    for label, args in (('no arguments', []), ('one argument', [a]),
                        ('three arguments', [a, b, b]), ('unknown option', ['--bogus', a, b]),
                        ('unknown short option', ['-Z', a, b]),
                        ('-t without value', ['-t']),
                        ('--block-elems 0', ['--block-elems', '0', a, b]),
                        ('--block-elems x', ['--block-elems', 'x', a, b])):
        p = run(args)
        check('usage: %s: exit 2' % label, p.returncode == 2, short(p))
        check('usage: %s: message on stderr' % label, p.stderr.strip() != '', short(p))
    p = run(['-t', BAD_KEY, a, b])
    check('bad -t (unknown key): exit 2', p.returncode == 2, short(p))
    m = re.search(re.escape(BAD_KEY) + r':(\d+):(\d+):', p.stderr)
    check('bad -t (unknown key): stderr has file:line:col', m is not None, repr(p.stderr))
    if m:
        check('bad -t (unknown key): line 6', m.group(1) == '6', m.group(0))
        check('bad -t (unknown key): column 5', m.group(2) == '5', m.group(0))
    p = run(['-t', BAD_SYNTAX, a, b])
    check('bad -t (syntax): exit 2', p.returncode == 2, short(p))
    check('bad -t (syntax): stderr has file:line:col',
          re.search(re.escape(BAD_SYNTAX) + r':\d+:\d+:', p.stderr) is not None, repr(p.stderr))
    nofile = os.path.join(TMP, 'no_such_tolerances.yaml')
    p = run(['-t', nofile, a, b])
    check('-t nonexistent file: exit 2', p.returncode == 2, short(p))
    check('-t nonexistent file: named', nofile in p.stderr, repr(p.stderr))


def test_option_twice():
    """An option of one value given twice is a usage error naming it, nothing written; lists
    (-t, --include, ...) and flags may repeat."""
    a, b = pair_paths('pass')
    j1, j2 = os.path.join(TMP, 'twice1.json'), os.path.join(TMP, 'twice2.json')
    for label, args, name in (('--json a --json b', ['--json', j1, '--json', j2], '--json'),
                              ('--json=a --json b', ['--json=' + j1, '--json', j2], '--json'),
                              ('-j 2 -j3', ['-j', '2', '-j3'], '--jobs'),
                              ('--profile twice', ['--profile', 'tf32', '--profile', 'mps'],
                               '--profile')):
        p = run(args + [a, b])
        check('%s: exit 2 naming %s' % (label, name), p.returncode == 2 and
              'option given twice (it takes one value): %s' % name in p.stderr, short(p))
        check('%s: no report written' % label,
              not os.path.exists(j1) and not os.path.exists(j2), os.listdir(TMP))
    p = run(['-t', LOOSE, '-t', LOOSE, '-q', '-q', '--include', '/x', '--include', '/y', a, b])
    check('-t, -q and --include may repeat: exit 0', p.returncode == 0, short(p))


def _profile_run(name, env_extra=None):
    e = env()
    e.pop('PARITYCHECK_TOLERANCES', None)
    e.update(env_extra or {})
    a, b = pair_paths('pass')
    return subprocess.run([BIN, '--profile', name, a, b], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, env=e, text=True)


def test_profile_messages():
    """A mistyped --profile: "did you mean" the shipped profile (a swap, a '_' for '-', a name
    cut short), and then no PARITYCHECK_TOLERANCES hint; the hint only for a name close to none,
    and not when the variable is set already."""
    hint = 'PARITYCHECK_TOLERANCES'
    for typed, meant in (('tf23', 'tf32'), ('bf16_autocast', 'bf16-autocast'),
                         ('fp16', 'fp16-autocast'), ('cpu-vs-cuda', 'cpu-vs-cuda-fp32')):
        p = _profile_run(typed)
        check('--profile %s: exit 2, did you mean %s, no hint' % (typed, meant),
              p.returncode == 2 and "did you mean '%s'?" % meant in p.stderr and
              hint not in p.stderr, p.stderr)
    p = _profile_run('nope')
    check('--profile nope: no suggestion, the hint', p.returncode == 2 and
          'did you mean' not in p.stderr and hint in p.stderr, p.stderr)
    folder = os.path.join(TMP, 'my_profiles')
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, 'mine.yaml'), 'w') as fh:
        fh.write('version: 1\n')
    p = _profile_run('nope', {'PARITYCHECK_TOLERANCES': folder})
    check('--profile nope with PARITYCHECK_TOLERANCES set: its folder listed, no hint',
          p.returncode == 2 and '(in %s: mine)' % folder in p.stderr and
          'hint' not in p.stderr, p.stderr)


def test_help_version():
    p = run(['-h'])
    check('-h: exit 0', p.returncode == 0, short(p))
    check('-h: usage on stdout', 'Usage' in p.stdout or 'usage' in p.stdout, p.stdout[:200])
    p = run(['--help'])
    check('--help: exit 0', p.returncode == 0, short(p))
    p = run(['-V'])
    check('-V: exit 0', p.returncode == 0, short(p))
    check('-V: prints the version', re.search(r'paritycheck \d+\.\d+', p.stdout) is not None,
          p.stdout)


def _header_constant(header, name):
    """The value of `#define NAME (...)` or `NAME = ...` in a public header, evaluated here, so that
    the help is checked against the one definition rather than a copy."""
    path = os.path.join(HERE, '..', '..', 'include', 'paritycheck', header)
    with open(path) as fh:
        text = fh.read()
    m = re.search(r'#define %s (.+)|\b%s = ([^,}\n]+)' % (name, name), text)
    expr = (m.group(1) or m.group(2)).strip()
    expr = re.sub(r'\((size_t|uint64_t)\)', '', expr)
    return eval(expr, {})  # the header's own integer or float expression


def test_help_defaults():
    """The defaults --help states are the library's (defined once, printed from there)."""
    text = ' '.join(run(['--help']).stdout.split())
    rows = _header_constant('report.h', 'PC_REPORT_MAX_ROWS')
    block = _header_constant('compare.h', 'PC_DEFAULT_BLOCK_ELEMS')
    memory = _header_constant('compare.h', 'PC_DEFAULT_MAX_MEMORY')
    factor = _header_constant('baseline.h', 'PC_BASELINE_FACTOR_DEFAULT')
    check('--help: max rows default', 'rest are only counted (default %d)' % rows in text, text)
    check('--help: block default', 'read block (default %d)' % block in text, text)
    check('--help: baseline factor default', '>= 1 (default %g)' % factor in text, text)
    unit = next(u for k, u in ((3, 'T'), (2, 'G'), (1, 'M'), (0, 'K'))
                if memory % 1024 ** (k + 1) == 0)
    shown = '%d%s' % (memory // 1024 ** ('KMGT'.index(unit) + 1), unit)
    check('--help: max memory default', '(default %s;' % shown in text, (shown, text))


def test_github_annotations():
    """--github: one ::error per failing tensor (here the two built to drift, by numpy's count),
    none for the passing one; a name's '%' and newline cannot end or forge a command. The names
    carry call indices (NNN_), so that their inferred order raises no ::warning."""
    a, b = os.path.join(TMP, 'gh_a.h5'), os.path.join(TMP, 'gh_b.h5')
    x = np.arange(1, 9, dtype=np.float32)
    names = ['000_ok', '001_drift', '002_evil%0A::error::forged\nline']
    with h5py.File(a, 'w') as fa, h5py.File(b, 'w') as fb:
        for n in names:
            fa[n] = x
            fb[n] = x if n == '000_ok' else x * np.float32(1.5)
    want_fail = sum(1 for n in names if n != '000_ok')  # 1.5x is far outside the strict defaults
    p = run(['--github', a, b])
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith('::')]
    check('--github: exit 1 (drift)', p.returncode == 1, short(p))
    check('--github: one ::error per failing tensor',
          len(lines) == want_fail and all(ln.startswith('::error title=paritycheck DRIFT::')
                                          for ln in lines), lines)
    check('--github: the passing tensor has none', not any('::/000_ok' in ln for ln in lines),
          lines)
    evil = [ln for ln in lines if 'evil' in ln]
    check('--github: % escaped as %25 and the newline shown as \\n, in one line',
          len(evil) == 1 and '/002_evil%250A::error::forged\\nline: ' in evil[0], evil)
    p = run(['--github', '--json', '-', a, b])
    check('--github with a report on stdout: usage error', p.returncode == 2, short(p))


def test_lzf():
    a, b = pair_paths('layouts')
    p = run(['-t', STRICT, a, b])
    check('lzf: run exit 2', p.returncode == 2, short(p))
    lines = [ln for ln in (p.stdout + p.stderr).splitlines() if '/lzf' in ln]
    check('lzf: /lzf reported naming the filter', any('lzf' in ln.lower().replace('/lzf', '')
                                                      for ln in lines), repr(lines))
    check('lzf: other tensors still reported', '/big3d' in p.stdout and '/chunked_gzip' in
          p.stdout, p.stdout[:500])


def _path_line(out, path):
    m = re.search(r'(^|\s)' + re.escape(path) + r'(\s|$|:)', out, re.M)
    return m.start() if m else None


def test_text_order():
    for pair in ('order', 'order_plain'):
        a, b = pair_paths(pair)
        p = run(['-t', STRICT, a, b])
        table = p.stdout[p.stdout.find('\nverdict '):]  # the headline names failures first
        pos = [_path_line(table, q) for q in EXPECTED['pairs'][pair]['order']]
        check('%s: text lists every tensor' % pair, None not in pos, p.stdout)
        if None not in pos:
            check('%s: text order' % pair, pos == sorted(pos), p.stdout)


def test_quiet():
    a, b = pair_paths('drift')
    p = run(['-t', STRICT, a, b])
    check('drift text: lists passing /x', _path_line(p.stdout, '/x') is not None, p.stdout)
    q = run(['-t', STRICT, '-q', a, b])
    check('-q: exit 1', q.returncode == 1, short(q))
    check('-q: lists failing /w', _path_line(q.stdout, '/w') is not None, q.stdout)
    check('-q: omits passing /x', _path_line(q.stdout, '/x') is None, q.stdout)
    check('-q: summary line', q.stdout.strip() != '' and len(q.stdout.strip().splitlines()) <
          len(p.stdout.strip().splitlines()), q.stdout)
    check('-q: first line is the same summary', q.stdout.strip().splitlines()[:1] ==
          p.stdout.strip().splitlines()[:1], '%r vs %r' % (q.stdout, p.stdout))
    q = run(['-t', STRICT, '--quiet', *pair_paths('pass')])
    check('--quiet on a passing run: no tensor lines',
          all(_path_line(q.stdout, t) is None for t in ('/x', '/y', '/z')), q.stdout)


def test_quiet_no_provenance():
    """-q on the real TF32 pair, whose dumps carry a provenance block with a multi-line
    model_repr: only the table's header, the nine drifting activations (docs/review.md) with their
    detail lines, and the summary."""
    real = os.path.join(HERE, '..', '..', 'fixtures', 'real')
    q = run(['-q', os.path.join(real, 'attention_cpu_fp32.h5'),
             os.path.join(real, 'attention_cuda_tf32.h5')])
    lines = [ln for ln in q.stdout.splitlines() if ln.strip()]
    at = next((k for k, ln in enumerate(lines) if ln.startswith('verdict ')), len(lines))
    head, table = lines[:at], lines[at:]
    rows = [ln for ln in table if ln.startswith('DRIFT ')]
    details = [ln for ln in table if ln.startswith(' ')]
    check('-q, real pair: exit 1', q.returncode == 1, short(q))
    check('-q, real pair: no provenance', 'provenance' not in q.stdout and
          'model_repr' not in q.stdout and 'torch_version' not in q.stdout, q.stdout[:600])
    first = head[0].rsplit('; first divergence: ', 1)[-1] if head else None
    check('-q, real pair: the summary and the first divergence first, then the header and 9 '
          'drifting activations with a detail line each',
          len(rows) == 9 and all('/activations/' in r for r in rows) and len(details) == 9 and
          head[0].startswith('FAIL: 9 of ') and
          head[1].startswith('first divergence: %s (drift): ' % first) and
          table[0].split()[:2] == ['verdict', 'tensor'] and len(table) == 1 + 9 + 9, q.stdout)


def _run_pty(args):
    """Run with stdout on a pseudo-terminal; returns (rc, output)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([BIN] + args, stdout=slave, stderr=slave, stdin=subprocess.DEVNULL,
                            env=env())
    os.close(slave)
    chunks = []
    while True:
        r, _, _ = select.select([master], [], [], 60)
        if not r:
            break
        try:
            data = os.read(master, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    rc = proc.wait(timeout=60)
    os.close(master)
    return rc, b''.join(chunks).decode('utf-8', 'replace')


def test_color():
    a, b = pair_paths('drift')
    for label, args in (('default', ['-t', STRICT, a, b]),
                        ('--no-color', ['-t', STRICT, '--no-color', a, b])):
        p = run(args)
        check('no ANSI escapes when not a TTY (%s)' % label,
              not ANSI.search(p.stdout + p.stderr), repr(p.stdout[:200]))
    rc, out = _run_pty(['-t', STRICT, a, b])
    check('TTY: colours used', rc == 1 and ANSI.search(out) is not None, repr(out[:300]))
    rc, out = _run_pty(['-t', STRICT, '--no-color', a, b])
    check('TTY --no-color: no ANSI escapes', rc == 1 and not ANSI.search(out), repr(out[:300]))
    e = env()
    e['NO_COLOR'] = '1'
    p = subprocess.run([BIN, '-t', STRICT, a, b], capture_output=True, text=True, env=e)
    check('NO_COLOR: no ANSI escapes', not ANSI.search(p.stdout), repr(p.stdout[:200]))


def test_json_stdout():
    for pair in ('dtypes', 'missing'):
        a, b = pair_paths(pair)
        p = run(['-t', STRICT, '--json', '-', a, b])
        check('--json - (%s): exit %d' % (pair, EXPECTED['pairs'][pair]['exit']),
              p.returncode == EXPECTED['pairs'][pair]['exit'], short(p))
        try:
            doc = json.loads(p.stdout)
        except ValueError as e:
            check('--json - (%s): stdout is valid JSON' % pair, False, '%s: %r' % (e, p.stdout[:300]))
            continue
        check('--json - (%s): stdout is valid JSON' % pair, True)
        _, rep = run_json(pair)
        check('--json - (%s): same report as --json FILE' % pair, doc == rep)


# Figures built from double sums, which add per read block (docs/metrics.md, "Aggregate
# sums"): another block size may change their last bits, so they get a relative slack; every
# other field must be identical.
BLOCK_ROUNDED = {'mean_abs', 'mean_rel', 'rms', 'rel_rms', 'cosine', 'snr_db', 'scale_error',
                 'rms_a', 'rms_b', 'trend', 'noise_scale',  # these four: the judge's context
                 'value', 'statistic', 'limit'}  # reasons and diagnosis, from the same sums


def _same_up_to_sum_rounding(x, y, key=None):
    if isinstance(x, dict) and isinstance(y, dict):
        return x.keys() == y.keys() and all(_same_up_to_sum_rounding(x[k], y[k], k) for k in x)
    if isinstance(x, list) and isinstance(y, list):
        return len(x) == len(y) and all(_same_up_to_sum_rounding(u, v, key) for u, v in zip(x, y))
    if key in BLOCK_ROUNDED and isinstance(x, float) and isinstance(y, float):
        return x == y or abs(x - y) <= 1e-12 * max(abs(x), abs(y))
    return x == y


def test_block_elems():
    for pair in ('dtypes', 'layouts', 'pass'):
        _, base = run_json(pair)
        for n in ('7', '1', '4096'):
            p, rep = run_json(pair, ['--block-elems', n])
            check('--block-elems %s (%s): exit' % (n, pair),
                  p.returncode == EXPECTED['pairs'][pair]['exit'], short(p))
            same = rep is not None and base is not None and _same_up_to_sum_rounding(rep, base)
            detail = ''
            if not same and rep and base:
                diff = [t1.get('path') for t1, t2 in zip(base.get('tensors', []),
                                                         rep.get('tensors', []))
                        if not _same_up_to_sum_rounding(t1, t2)]
                detail = 'tensors differ: %r' % diff
            check('--block-elems %s (%s): JSON identical to default' % (n, pair), same, detail)


FAULTS = os.path.join(HERE, '..', 'fuzz', 'known-hdf5-faults')


def test_hdf5_faults_isolated():
    """Files on which HDF5 1.10.8 itself crashes or loops: exit 2 with the reason, in bounded
    time, instead of a crash or a hang (src/cli/isolate.c)."""
    other = os.path.join(FIX, 'pass_a.h5')
    crash = os.path.join(FAULTS, 'chunk-dimension-zero-sigfpe.h5')
    p = subprocess.run([BIN, crash, other], capture_output=True, text=True, timeout=120, env=env())
    check('HDF5 crash: exit 2', p.returncode == 2, short(p))
    check('HDF5 crash: says so and names the file',
          'the comparison crashed' in p.stderr and crash in p.stderr, p.stderr[-500:])
    loop = os.path.join(FAULTS, 'global-heap-endless-loop.h5')
    p = subprocess.run([BIN, '--stall-timeout', '2', loop, other], capture_output=True, text=True,
                       timeout=120, env=env())
    check('HDF5 endless loop: exit 2', p.returncode == 2, short(p))
    check('HDF5 endless loop: stopped for want of progress',
          'no progress for 2 s' in p.stderr and loop in p.stderr, p.stderr[-500:])


def test_threads_identical():
    """Results do not depend on the number of worker threads, not even in the last bit."""
    for pair in ('dtypes', 'layouts', 'pass'):
        for n in ('7', '4096'):
            _, one = run_json(pair, ['--block-elems', n, '-j', '1'])
            for j in ('2', '3'):
                _, many = run_json(pair, ['--block-elems', n, '-j', j])
                check('-j %s vs -j 1, --block-elems %s (%s): JSON identical' % (j, n, pair),
                      one is not None and one == many)

def test_reports_threads_identical():
    """Every report is the same bytes whatever -j: their rows are formatted on -j threads and
    written in order (src/lib/report/ordered.c). Real dumps with cascades (fp16 autocast against
    fp32) and a pass; text plain, quiet (root causes first) and verbose."""
    real = os.path.join(HERE, '..', '..', 'fixtures', 'real')
    pairs = [('attention_cpu_fp32.h5', 'attention_cuda_fp16.h5'),
             ('mixer_cpu_fp32.h5', 'mixer_cuda_fp32.h5')]
    files = ('json', 'md', 'xml', 'html')
    for a, b in pairs:
        for mode in ([], ['-q'], ['-v']):
            got = {}
            for j in ('1', '2', '5'):
                out = os.path.join(TMP, 'threads_%s_%s' % (a, j))
                args = ['-j', j, '--json', out + '.json', '--markdown', out + '.md',
                        '--junit', out + '.xml', '--html', out + '.html']
                proc = run(args + mode + [os.path.join(real, a), os.path.join(real, b)])
                texts = [proc.stdout]
                for ext in files:
                    with open('%s.%s' % (out, ext)) as fh:
                        texts.append(fh.read())
                got[j] = (proc.returncode, texts)
            label = '%s vs %s %s' % (a, b, ' '.join(mode) or 'plain')
            # -q on a pass prints the summary alone
            rows = 0 if mode == ['-q'] and got['1'][0] == 0 else 10
            check('%s: reports written, text has rows' % label,
                  got['1'][0] in (0, 1) and got['1'][1][0].count('\n') > rows, got['1'][0])
            for j in ('2', '5'):
                check('%s: -j %s, every report identical to -j 1' % (label, j),
                      got[j] == got['1'])


# ------------------------------------------------------------------------------------------
# Direct reads (docs/performance.md, "Direct reads")
# ------------------------------------------------------------------------------------------


def _direct_tensors():
    """(name, A, B, chunk shape, attributes): odd sizes, so that blocks are partial; NaN, +-inf,
    -0 and subnormals on both sides, some in the same places and some not. Every chunk is longer
    than 4 blocks of --block-elems 7 and 33 along the dimension the blocks step through, so
    chunked files are cut in exactly the blocks of contiguous ones (src/lib/load/loader.c,
    pc_reader_plan) and even the double sums must agree to the bit."""
    rng = np.random.default_rng(20)
    special32 = [np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-45, -1e-40, np.finfo(np.float32).tiny]
    a32 = rng.standard_normal(1001).astype(np.float32)
    a32[:8] = special32
    b32 = a32 + (rng.standard_normal(1001) * 2e-6).astype(np.float32)
    b32[:8] = [np.nan, -np.inf, np.inf, 0.0, -0.0, 3e-45, -1e-40, 0.0]
    b32[500] = np.nan
    a64 = rng.standard_normal(777)
    a64[:6] = [np.nan, np.inf, -0.0, 5e-324, -2e-310, np.finfo(np.float64).tiny]
    b64 = a64 * (1 + rng.standard_normal(777) * 1e-15)
    b64[:6] = [np.nan, np.inf, 0.0, 1e-323, -2e-310, 0.0]
    ai = rng.integers(-2 ** 31, 2 ** 31, 513, dtype=np.int32)
    bi = ai.copy()
    bi[::50] += 3
    a2 = rng.standard_normal((37, 29)).astype(np.float32)
    b2 = a2 * np.float32(1 + 1e-6)
    b2[3, 4] = -a2[3, 4]
    ac = (rng.standard_normal(301) + 1j * rng.standard_normal(301)).astype(np.complex64)
    bc = ac + np.complex64(1e-6 - 1e-6j)
    # tagged bfloat16: values that are bfloat16 values (low 16 bits zero), else the tag would be
    # an error (a dtype claim its values contradict, issue 38)
    to_bf16 = lambda x: (x.view(np.uint32) & np.uint32(0xffff0000)).view(np.float32)  # noqa: E731
    af = to_bf16(a32.copy())
    bf = a32.copy()
    bf[10:20] *= np.float32(1.01)
    bf = to_bf16(bf)
    return [
        ('f32', a32, b32, (300,), {}),
        ('f32_same', a32, a32.copy(), (300,), {}),
        ('f32_be', a32.astype('>f4'), b32.astype('>f4'), (300,), {}),
        ('bf16_tagged', af, bf, (300,), {'dtype': 'bfloat16'}),
        ('f64', a64, b64, (300,), {}),
        ('i32', ai, bi, (300,), {}),
        ('m2d', a2, b2, (16, 29), {}),
        ('c64', ac, bc, (300,), {}),
    ]


def _create_compact(f, name, data):
    """A dataset whose values live in its object header (compact layout): h5py's high-level API
    cannot make one."""
    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    dcpl.set_layout(h5py.h5d.COMPACT)
    space = h5py.h5s.create_simple(data.shape)
    dsid = h5py.h5d.create(f.id, name.encode(), h5py.h5t.py_create(data.dtype), space, dcpl=dcpl)
    dsid.write(h5py.h5s.ALL, h5py.h5s.ALL, np.ascontiguousarray(data))
    return h5py.Dataset(dsid)


def _write_direct(path, tensors, side, layout):
    kw = {'userblock_size': 512} if layout == 'userblock' else {}
    with h5py.File(path, 'w', libver='earliest', **kw) as f:
        for name, a, b, chunks, attrs in tensors:
            data = a if side == 'a' else b
            if layout == 'compact':
                d = _create_compact(f, name, data)
            else:
                d = f.create_dataset(name, data=data,
                                     chunks=chunks if layout == 'chunked' else None)
            d.attrs.update(attrs)
            if layout == 'compact':  # no address: the walk reads its creation properties
                check('direct: compact %s has no offset' % name, d.id.get_offset() is None)
            elif layout != 'chunked':  # the precondition of the direct path
                check('direct: %s %s is contiguous at a known offset' % (layout, name),
                      d.id.get_offset() is not None and d.chunks is None)


def test_direct_reads():
    """Contiguous datasets are read from the file by the workers; chunked and compact ones are
    read by HDF5. All must give the same report, tensor for tensor, with one side direct or both,
    for any -j."""
    tensors = _direct_tensors()
    files = {}
    for layout in ('contiguous', 'userblock', 'chunked', 'compact'):
        for side in 'ab':
            files[layout, side] = os.path.join(TMP, 'direct_%s_%s.h5' % (layout, side))
            _write_direct(files[layout, side], tensors, side, layout)
    pairs = (('chunked', 'chunked'), ('contiguous', 'contiguous'), ('userblock', 'userblock'),
             ('contiguous', 'chunked'), ('chunked', 'contiguous'), ('compact', 'compact'),
             ('compact', 'contiguous'), ('chunked', 'compact'))
    for block in ('7', '33'):
        want = None
        for la, lb in pairs:
            for j in ('1', '2'):
                label = 'direct: %s vs %s, --block-elems %s, -j %s' % (la, lb, block, j)
                out = os.path.join(TMP, 'direct_%s_%s_%s_%s.json' % (la, lb, block, j))
                p = run(['-t', STRICT, '--block-elems', block, '-j', j, '--json', out,
                         files[la, 'a'], files[lb, 'b']])
                check('%s: exit 1' % label, p.returncode == 1, short(p))
                try:
                    with open(out) as fh:
                        got = json.load(fh)['tensors']
                except (OSError, ValueError, KeyError) as e:
                    check('%s: JSON report' % label, False, e)
                    continue
                verdicts = {t['path']: t['verdict'] for t in got}
                check('%s: every tensor compared' % label,
                      sorted(verdicts) == sorted('/' + t[0] for t in tensors) and
                      set(verdicts.values()) <= {'pass', 'drift'}, repr(verdicts))
                if want is None:
                    want = got
                    continue
                diff = [t1['path'] for t1, t2 in zip(want, got) if t1 != t2]
                check('%s: tensors identical to chunked vs chunked, -j 1' % label,
                      want == got, 'differ: %r' % diff)


# ------------------------------------------------------------------------------------------
# Partly written datasets (docs/robustness.md, "Unwritten elements")
# ------------------------------------------------------------------------------------------


def _partly_written():
    """(name, shape, chunks, dtype, fill of A, fill of B, boxes A writes, boxes B writes; None:
    B written whole). The sides write different chunks, some overlapping, and their fill values
    differ, so unwritten elements drift too. Values are multiples of 1/8 of at most 8 (integers
    for i32), so that every double sum is exact and reports can be compared to the bit."""
    return [
        ('f32', (10000,), (100,), 'f4', 1.0, 1.25,
         [np.s_[200:300], np.s_[5000:5050]], [np.s_[250:350], np.s_[9900:10000]]),
        ('f64_2d', (300, 40), (16, 8), 'f8', 0.0, -0.5,
         [np.s_[20:40, 8:24]], [np.s_[100:101, :], np.s_[290:300, 32:40]]),
        ('i32_3d', (20, 10, 6), (4, 5, 3), 'i4', 3, 7,
         [np.s_[4:8, 0:5, 0:3]], [np.s_[16:20, 5:10, 3:6]]),
        ('b_never', (5000,), (64,), 'f4', 2.0, 2.0, [np.s_[0:100]], []),
        ('b_full', (3000,), (128,), 'f4', 0.0, 0.0, [np.s_[1000:1100]], None),
        ('f16_same', (4096,), (64,), 'f2', 0.5, 0.5, [np.s_[64:200]], [np.s_[64:200]]),
    ]


def _write_partly(path, dense_path, side, rng):
    """The partly written datasets of one side, and a dense twin: the same values (as h5py reads
    them, fill values included) written whole, contiguous."""
    with h5py.File(path, 'w') as f:
        for name, shape, chunks, dt, fa, fb, boxes_a, boxes_b in _partly_written():
            boxes = boxes_a if side == 'a' else boxes_b
            d = f.create_dataset(name, shape=shape, chunks=chunks, dtype=dt,
                                 fillvalue=fa if side == 'a' else fb)
            for box in (boxes if boxes is not None else [np.s_[...]]):
                shp = d[box].shape
                vals = rng.integers(-64, 65, shp)
                if name == 'f16_same':  # the same values on both sides
                    vals = np.arange(np.prod(shp)).reshape(shp) % 129 - 64
                d[box] = vals if dt == 'i4' else vals / 8
            if name == 'f32' and side == 'a':
                d[5001] = np.nan  # a nan mismatch inside a written chunk
    with h5py.File(path, 'r') as f, h5py.File(dense_path, 'w') as g:
        for name in f:
            g.create_dataset(name, data=f[name][()])


def _run_report(args, out):
    p = run(list(args) + ['--json', out])
    try:
        with open(out) as fh:
            return p, json.load(fh)
    except (OSError, ValueError) as e:
        return p, None


def test_partly_written():
    """Partly written chunked datasets: what neither side wrote is folded from the fill values
    without reading. Every figure must be numpy's on the full arrays (pc_reference check reads
    them through h5py, fill values included), the same as for dense twins of the same values,
    for any -j (to the bit) and any --block-elems (up to the rounding of double sums); the
    magnitude pass of --profile cpu-vs-cuda-fp32 (atol from A's RMS) too."""
    rng = np.random.default_rng(7)
    f = {}
    for kind in ('sparse', 'dense'):
        for side in 'ab':
            f[kind, side] = os.path.join(TMP, 'partly_%s_%s.h5' % (kind, side))
    for side in 'ab':
        _write_partly(f['sparse', side], f['dense', side], side, rng)
    reports = {}
    for tol in (['-t', STRICT], ['--profile', 'cpu-vs-cuda-fp32']):
        for block in ([], ['--block-elems', '7']):
            for j in ('1', '2'):
                for kind in ('sparse', 'dense'):
                    key = (tol[1] != STRICT, len(block) > 0, j, kind)
                    label = 'partly written: %s %s -j %s %s' % (tol[-1].split('/')[-1],
                                                                ' '.join(block), j, kind)
                    out = os.path.join(TMP, 'partly_%d_%d_%s_%s.json' % key)
                    p, rep = _run_report(tol + block + ['-j', j, f[kind, 'a'], f[kind, 'b']],
                                         out)
                    check('%s: exit 1' % label, p.returncode == 1, short(p))
                    reports[key] = rep
                    if kind == 'sparse' and j == '1':
                        rp = subprocess.run([sys.executable, REFERENCE, 'check', out,
                                             f[kind, 'a'], f[kind, 'b']], stdout=subprocess.PIPE,
                                            stderr=subprocess.STDOUT, text=True, timeout=300)
                        check('%s: numpy agrees' % label, rp.returncode == 0, rp.stdout[-3000:])
    for key, rep in reports.items():
        prof, small, j, kind = key
        name = 'partly written (profile %s, small blocks %s, -j %s, %s)' % key
        if rep is None:
            check(name + ': JSON report', False)
            continue
        # A failing comparison is drift or, where B keeps no digit of A, indeterminate.
        verdicts = {t['path']: 'drift' if t['verdict'] == 'indeterminate' else t['verdict']
                    for t in rep['tensors']}
        want = {'/' + t[0]: 'drift' for t in _partly_written()}
        want['/f16_same'] = 'pass'
        if prof:  # the profile's own verdicts: only that every tensor was compared
            want = {p: verdicts.get(p) if verdicts.get(p) in ('pass', 'drift') else 'compared'
                    for p in want}
        check(name + ': every tensor compared', verdicts == want, repr(verdicts))
        if j == '2':
            check(name + ': identical to -j 1', rep == reports[prof, small, '1', kind])
        if kind == 'sparse':
            check(name + ': same as the dense twins',
                  _same_up_to_sum_rounding(rep, _renamed(reports[key[:3] + ('dense',)], rep)))
        if small:
            check(name + ': same as default blocks',
                  _same_up_to_sum_rounding(rep, reports[prof, False, j, kind]))


def _renamed(rep, like):
    """rep with the file names of `like`, for comparing reports of different files."""
    if rep is None or like is None:
        return rep
    rep = dict(rep)
    rep['a'], rep['b'] = like['a'], like['b']
    return rep


def test_partly_written_giant():
    """2^36 float32 elements declared, in chunks of 2^16, one chunk written in A and two in B,
    both filled with 0.5: compared in seconds, not the hours that reading 2^36 elements takes.
    A writes 1 .. 10 at 2^35 .. 2^35 + 9; B writes 100 at 2^35 + 5 and -1 at the last element.
    By hand: 11 mismatches (the default float32 tolerance, atol 1e-5); the worst is 2^35 + 5
    (a = 6, b = 100, abs 94, rel 94/6); the largest rel is that one too (others: 0.5/1 ...
    9.5/10 and 1.5/0.5 = 3)."""
    import time
    n, at = 1 << 36, 1 << 35
    paths = [os.path.join(TMP, 'giant_%s.h5' % s) for s in 'ab']
    for path, writes in zip(paths, ([(slice(at, at + 10), np.arange(1, 11))],
                                    [(at + 5, 100), (n - 1, -1)])):
        with h5py.File(path, 'w') as f:
            d = f.create_dataset('x', shape=(n,), chunks=(1 << 16,), dtype='f4', fillvalue=0.5)
            for where, v in writes:
                d[where] = v
    for j in ('1', '2'):
        t0 = time.monotonic()
        p, rep = _run_report(['-j', j] + paths, os.path.join(TMP, 'giant_%s.json' % j))
        took = time.monotonic() - t0
        label = 'partly written giant -j %s' % j
        check('%s: exit 1' % label, p.returncode == 1, short(p))
        check('%s: in seconds' % label, took < 20, '%.1f s' % took)
        t = rep['tensors'][0] if rep else {}
        got = (t.get('count'), t.get('mismatches'), t.get('max_abs'), t.get('max_rel'),
               (t.get('worst') or {}).get('index'), (t.get('worst') or {}).get('b'))
        check('%s: figures by hand' % label, got == (n, 11, 94.0, 94 / 6, [at + 5], 100.0),
              repr(got))


def test_exact_integers():
    """The worst pair of an integer tensor is printed exactly, also beyond 2^53 where a double
    cannot tell the two values apart (docs/report-json.md, "worst"). Expected values are Python's
    own integers."""
    big, top, low = 2 ** 60, 2 ** 64 - 1, -2 ** 63
    data = {'i64': (np.int64, [5, big, -7], [5, big + 3, -7], 1),
            'i64min': (np.int64, [low, 0], [low + 1, 0], 0),
            'u64': (np.uint64, [top, 1], [top - 1, 1], 0)}
    paths = [os.path.join(TMP, 'ints_%s.h5' % side) for side in 'ab']
    for side, path in enumerate(paths):
        with h5py.File(path, 'w') as f:
            for name, (dt, a, b, _) in data.items():
                f[name] = np.array((a, b)[side], dtype=dt)
    md, xml = os.path.join(TMP, 'ints.md'), os.path.join(TMP, 'ints.xml')
    p, rep = _run_report(['--markdown', md, '--junit', xml] + paths, os.path.join(TMP, 'ints.json'))
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


def test_quantiles_on_demand():
    """Quantiles are computed only when a report shows them (-v, JSON, Markdown, HTML). Every
    other output is byte-identical with and without them: the text report, JUnit and the
    baseline file, each written once by a run that computes quantiles (it also writes JSON) and
    once by one that does not; and the JSON run does carry quantiles."""
    for pair in EXPECTED['pairs']:
        a, b = pair_paths(pair)
        outs = {}
        for label, extra in (('without', []), ('with', ['--json', os.path.join(TMP, 'q.json')])):
            junit, base = (os.path.join(TMP, 'q_%s.%s' % (label, e)) for e in ('xml', 'json'))
            p = run(['-t', STRICT, '--block-elems', '7', '--junit', junit, '--save-baseline',
                     base] + extra + [a, b])
            with open(junit) as fj, open(base) as fb:
                outs[label] = (p.returncode, p.stdout, fj.read(), fb.read())
        check('%s: exit, text, JUnit and baseline identical with and without quantiles' % pair,
              outs['with'] == outs['without'],
              [k for k, x, y in zip(('exit', 'text', 'junit', 'baseline'), outs['with'],
                                    outs['without']) if x != y])
        with open(os.path.join(TMP, 'q.json')) as fh:
            rep = json.load(fh)
        compared = [t for t in rep['tensors'] if t['verdict'] in ('pass', 'drift')]
        check('%s: the JSON run has quantiles for every compared tensor' % pair,
              all('quantiles' in t for t in compared), [t['path'] for t in compared])


TESTS = [
    test_tolerance_file_matches_expected,
    test_hdf5_faults_isolated,
    test_threads_identical,
    test_exit_codes_and_figures,
    test_reference_selftest,
    test_builtin_defaults,
    test_later_tolerance_file_wins,
    test_missing_names,
    test_shape_mismatch_text,
    test_bad_files,
    test_usage_errors,
    test_option_twice,
    test_profile_messages,
    test_help_version,
    test_help_defaults,
    test_github_annotations,
    test_lzf,
    test_text_order,
    test_quiet,
    test_quiet_no_provenance,
    test_color,
    test_json_stdout,
    test_block_elems,
    test_direct_reads,
    test_partly_written,
    test_partly_written_giant,
    test_exact_integers,
    test_quantiles_on_demand,
    test_reports_threads_identical,
]


def main(argv):
    global BIN, FIX, EXPECTED, TMP
    if len(argv) != 2:
        print('usage: test_cli.py PARITYCHECK_BINARY FIXTURES_DIR', file=sys.stderr)
        return 2
    BIN = os.path.abspath(argv[0])
    FIX = os.path.abspath(argv[1])
    with open(os.path.join(FIX, 'expected.json')) as fh:
        EXPECTED = json.load(fh)
    with tempfile.TemporaryDirectory(prefix='pc_cli_') as tmp:
        TMP = tmp
        return run_tests(TESTS)


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
