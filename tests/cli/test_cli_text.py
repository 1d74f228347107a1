#!/usr/bin/python3
"""End-to-end tests of the paritycheck binary (test_cli.py's part): what the text output shows.
GitHub annotations that no name can forge, the text report's order, -q (with and without a
provenance block), colour only on a terminal, and a JSON report on standard output.

    /usr/bin/python3 tests/cli/test_cli_text.py PATH/TO/paritycheck FIXTURES_DIR

Prints one line per failure and a last line "N passed, M failed"; the exit status is 1 when
anything failed.
"""

import json
import os
import pty
import re
import select
import subprocess
import sys

import h5py
import numpy as np

import cli_pairs as fixture  # first: it puts tests/ on the path
from checks import check  # noqa: E402
from cli_pairs import (ANSI, HERE, STRICT, env, pair_paths, run, run_json,  # noqa: E402
                       short)


# ------------------------------------------------------------------------------------------
# Text output
# ------------------------------------------------------------------------------------------


def test_github_annotations():
    """--github: one ::error per failing tensor (here the two built to drift, by numpy's count),
    none for the passing one; a name's '%' and newline cannot end or forge a command. The names
    carry call indices (NNN_), so that their inferred order raises no ::warning."""
    a, b = os.path.join(fixture.TMP, 'gh_a.h5'), os.path.join(fixture.TMP, 'gh_b.h5')
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


def _path_line(out, path):
    m = re.search(r'(^|\s)' + re.escape(path) + r'(\s|$|:)', out, re.M)
    return m.start() if m else None


def test_text_order():
    for pair in ('order', 'order_plain'):
        a, b = pair_paths(pair)
        p = run(['-t', STRICT, a, b])
        table = p.stdout[p.stdout.find('\nverdict '):]  # the headline names failures first
        pos = [_path_line(table, q) for q in fixture.EXPECTED['pairs'][pair]['order']]
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
    proc = subprocess.Popen([fixture.BIN] + args, stdout=slave, stderr=slave,
                            stdin=subprocess.DEVNULL, env=env())
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
    p = subprocess.run([fixture.BIN, '-t', STRICT, a, b], capture_output=True, text=True, env=e)
    check('NO_COLOR: no ANSI escapes', not ANSI.search(p.stdout), repr(p.stdout[:200]))


def test_json_stdout():
    for pair in ('dtypes', 'missing'):
        a, b = pair_paths(pair)
        p = run(['-t', STRICT, '--json', '-', a, b])
        check('--json - (%s): exit %d' % (pair, fixture.EXPECTED['pairs'][pair]['exit']),
              p.returncode == fixture.EXPECTED['pairs'][pair]['exit'], short(p))
        try:
            doc = json.loads(p.stdout)
        except ValueError as e:
            check('--json - (%s): stdout is valid JSON' % pair, False, '%s: %r' % (e, p.stdout[:300]))
            continue
        check('--json - (%s): stdout is valid JSON' % pair, True)
        _, rep = run_json(pair)
        check('--json - (%s): same report as --json FILE' % pair, doc == rep)


TESTS = [
    test_github_annotations,
    test_text_order,
    test_quiet,
    test_quiet_no_provenance,
    test_color,
    test_json_stdout,
]


if __name__ == '__main__':
    sys.exit(fixture.main(sys.argv[1:], TESTS, 'test_cli_text.py'))
