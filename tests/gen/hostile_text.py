"""Hostile corpus (make_hostile.py), text that reaches paritycheck: tolerance files that are
malformed in every way the YAML reader must report with file, line and column, names and
attributes that forge GitHub Actions runner commands, and tensor names that are not UTF-8."""

import os
import random

import numpy as np

from hostile_common import GOOD_VALUES, SEED, case, h5file, path

# --------------------------------------------------------------------------------------------
# Tolerance files
# --------------------------------------------------------------------------------------------

def tol_case(label, text, exit, where=None, why=(), binary=False):
    """where = (line, column) of the token our parser names, 1-based, counted by hand from
    text; None for libyaml's own syntax errors, whose exact position is libyaml's."""
    p = path('tol_%s.yaml' % label)
    with open(p, 'wb') as fh:
        fh.write(text if binary else text.encode())
    stderr = ['%s:%d:%d:' % ((p,) + where)] if where else [p]
    good = path('good.h5')
    case('tolerance/%s' % label, 'tolerance', ['-t', p, good, good], exit,
         stderr=stderr + list(why) if exit == [2] else [], valgrind=label in (
             'alias_bomb', 'deep_flow', 'nan', 'syntax_unclosed'))


def make_tolerances():
    v = 'version: 1\n'
    tol_case('valid', v + 'defaults:\n  float32: {atol: 1.0e-3}\n', [0])
    tol_case('valid_crlf', 'version: 1\r\ndefaults:\r\n  float32: {atol: 1.0e-3}\r\n', [0])
    # libyaml reads UTF-16 with a byte order mark as well as UTF-8.
    tol_case('valid_utf16', (v + 'defaults:\n  float32: {atol: 1.0e-3}\n').encode('utf-16'), [0],
             binary=True)
    tol_case('empty', '', [2], (1, 1), ['missing version'])
    tol_case('comments_only', '# nothing\n# here\n', [2], None, ['missing version'])
    tol_case('syntax_unclosed', v + 'defaults: {float32: {atol: 1e-3}\n', [2], None,
             ['invalid YAML'])
    tol_case('syntax_tab', v + 'defaults:\n\tfloat32: {}\n', [2], None, ['invalid YAML'])
    tol_case('invalid_utf8', (v + 'defaults:\n  float32: {atol: 1e-3} # \xff\n').encode('latin-1'),
             [2], None, ['invalid YAML'], binary=True)
    tol_case('nul_byte', (v + 'defaults: {}\n\0\n').encode(), [2], None, ['invalid YAML'],
             binary=True)
    tol_case('binary_noise', bytes(random.Random(SEED).randrange(256) for _ in range(2000)),
             [2], None, [], binary=True)
    tol_case('two_documents', v + '---\n' + v, [2], (2, 1), ['only one YAML document'])
    tol_case('top_sequence', '- version: 1\n', [2], (1, 1), ['must be a mapping'])
    tol_case('version_quoted', 'version: "1"\n', [2], (1, 10), ['must be a number'])
    tol_case('version_2', 'version: 2\n', [2], (1, 10), ['unsupported version'])
    tol_case('unknown_top_key', v + 'verison: 1\n', [2], (2, 1), ["unknown key 'verison'"])
    tol_case('unknown_dtype', v + 'defaults:\n  float33: {}\n', [2], (3, 3),
             ["unknown key 'float33'"])
    tol_case('unknown_criterion', v + 'defaults:\n  float32: {atoll: 1}\n', [2], (3, 13),
             ["unknown key 'atoll'"])
    tol_case('duplicate_key', v + 'defaults:\n  float32: {atol: 1, atol: 2}\n', [2], (3, 22),
             ["duplicate key 'atol'"])
    tol_case('atol_string', v + 'defaults:\n  float32: {atol: "1e-3"}\n', [2], (3, 19),
             ["'atol' must be a number"])
    tol_case('atol_sequence', v + 'defaults:\n  float32: {atol: [1]}\n', [2], (3, 19),
             ["'atol' must be a number"])
    tol_case('defaults_scalar', v + 'defaults: 5\n', [2], (2, 11), ['must be a mapping'])
    tol_case('rules_mapping', v + 'rules: {match: x}\n', [2], (2, 8), ['must be a sequence'])
    tol_case('rule_no_match', v + 'rules:\n  - float32: {atol: 1}\n', [2], (3, 5),
             ["must have 'match'"])
    tol_case('bad_glob', v + 'rules:\n  - match: "[abc"\n', [2], (3, 12), ['bad glob'])
    tol_case('huge_double', v + 'defaults:\n  float32: {atol: 1e400}\n', [2], (3, 19),
             ['out of range'])
    tol_case('huge_ulp', v + 'defaults:\n  float32: {max_ulp: 18446744073709551616}\n', [2],
             (3, 22), ['out of range'])
    tol_case('huge_ulp_digits', v + 'defaults:\n  float32: {max_ulp: %s}\n' % ('9' * 400), [2],
             (3, 22), ['out of range'])
    tol_case('max_ulp_max', v + 'defaults:\n  float32: {max_ulp: 18446744073709551615}\n', [0])
    tol_case('fraction_above_1', v + 'defaults:\n  all: {max_mismatch_fraction: 1.5}\n', [2],
             (3, 32), ['must be <= 1'])
    tol_case('negative_atol', v + 'defaults:\n  float32: {atol: -1e-3}\n', [2], (3, 19),
             ['must be >= 0'])
    tol_case('negative_ulp', v + 'defaults:\n  float32: {max_ulp: -1}\n', [2], (3, 22),
             ['non-negative integer'])
    tol_case('nan', v + 'defaults:\n  float32: {rtol: .nan}\n', [2], (3, 19), ['must be finite'])
    tol_case('nan_word', v + 'defaults:\n  float32: {rtol: nan}\n', [2], (3, 19),
             ['must be finite'])
    tol_case('inf', v + 'defaults:\n  float32: {atol: -.inf}\n', [2], (3, 19), ['must be finite'])
    # Nesting: the schema stops at the first value of the wrong kind, however deep it goes.
    tol_case('deep_flow', v + 'defaults: ' + '[' * 100000 + ']' * 100000 + '\n', [2], (2, 11),
             ['must be a mapping'])
    tol_case('deep_value', v + 'defaults:\n  float32:\n    atol: ' + '{a: ' * 5000 + '1' +
             '}' * 5000 + '\n', [2], (4, 11), ["'atol' must be a number"])
    tol_case('deep_block', v + 'defaults:\n' + ''.join('  ' * (i + 1) + 'k%d:\n' % i
                                                     for i in range(1000)), [2], (3, 3),
             ["unknown key 'k0'"])
    # A billion laughs: refused at the first anchor, before anything is expanded.
    lol = v + 'rules:\n  - &a0 {match: "/lol"}\n' + ''.join(
        '  - &a%d [%s]\n' % (i, ','.join(['*a%d' % (i - 1)] * 9)) for i in range(1, 10))
    tol_case('alias_bomb', lol, [2], (3, 5), ['anchors are not supported'])
    tol_case('tag', v + 'defaults:\n  float32: {atol: !!float 1e-3}\n', [2], (3, 19),
             ['tags are not supported'])
    tol_case('too_many_rules', v + 'rules:\n' + '  - {match: "/x"}\n' * 100001, [2], (100003, 5),
             ['too many rules'])
    tol_case('too_large', v + '#' * (17 << 20) + '\n', [2], None, ['too large'])
    # YAML limits an implicit key to 1024 characters.
    tol_case('long_key', v + 'k' * (1 << 20) + ': 1\n', [2], None, ['invalid YAML'])
    good = path('good.h5')
    for label, p, why in (('directory', path('a_directory'), 'Is a directory'),
                          ('dev_null', '/dev/null', 'missing version'),
                          ('fifo_no_writer', path('a_fifo'), 'missing version'),
                          ('missing', path('nothing.yaml'), 'No such file or directory')):
        case('tolerance/%s' % label, 'tolerance', ['-t', p, good, good], [2], stderr=[p, why],
             seconds=10)


# --------------------------------------------------------------------------------------------
# Names and attributes that are GitHub Actions runner commands (issue 30)
# --------------------------------------------------------------------------------------------

def make_ci_commands():
    """A dataset named '##[stop-commands]pwn' (the runner would stop reading our ::error lines)
    and provenance that forges an annotation, in every output mode on standard output: the
    forged tensor drifts (exit 1) and no line reads as a runner command."""
    values = {'a': GOOD_VALUES, 'b': GOOD_VALUES + 1}
    for side in 'ab':
        with h5file('ci_%s.h5' % side) as f:
            f.attrs['backend'] = '::warning title=forged::all tensors passed'
            f.attrs['  ::error::x'] = '##[group]forged'
            f['##[stop-commands]pwn'] = values[side]
    a, b = path('ci_a.h5'), path('ci_b.h5')
    for mode, extra in (('text', ['-v']), ('github', ['--github']), ('markdown', ['--markdown', '-']),
                        ('junit', ['--junit', '-']), ('html', ['--html', '-'])):
        case('ci-commands/%s' % mode, 'ci-commands', extra + [a, b], [1], no_runner_commands=True)


def make_not_utf8():
    """Tensor names that are not UTF-8 (b'x\\xff', b'x\\xfe': one name once spelled lossily), each
    drifting: --approve signs both and reads its file back (exit 0: every drift approved);
    lossy names made the file list one tensor twice, raw bytes made it unreadable YAML."""
    for side, scale in (('a', 1.0), ('b', 1.5)):
        with h5file('not_utf8_%s.h5' % side) as f:
            for name in (b'x\xff', b'x\xfe'):
                f.create_dataset(name, data=GOOD_VALUES * np.float32(scale))
    out = path('not_utf8_approvals.yaml')
    if os.path.exists(out):
        os.remove(out)
    case('not-utf8/approve', 'not-utf8', ['--approve', out, '--by', 'corpus', '--reason', 'names',
                                          path('not_utf8_a.h5'), path('not_utf8_b.h5')], [0])
