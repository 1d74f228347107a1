#!/usr/bin/python3
"""End-to-end tests of the warning on an execution order inferred from names that may not sort
into call order (issue 29, docs/tolerance-model.md "Execution order"): forward tensors without
an `execution_index` attribute, in a file that lists them by name (a plain h5py dump), whose
names carry no call index or call indices of unequal width. The warning comes once per run, on
stderr and in JSON `warnings`, and fails nothing.

    /usr/bin/python3 tests/cli/test_exec_order.py PATH/TO/paritycheck WORK_DIR

Every input is made here with h5py. Prints one line per failure and a last line
"N passed, M failed"; the exit status is 1 when anything failed.
"""

import os
import sys

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..'))
from checks import check, run_tests  # noqa: E402
import cli_common  # noqa: E402
from cli_common import fresh, run_json, write_h5  # noqa: E402

PREFIX = 'execution order inferred from tensor names'
CONSEQUENCE = ('the trend, caused_by and the first divergence follow file (alphabetical) order, '
               'which may not be call order; dump an execution_index attribute or')
NO_INDEX = (PREFIX + ', which carry no call index (e.g. %s): ' + CONSEQUENCE +
            ' NNN_ name prefixes (python/paritycheck/dump.py does)')
UNSORTED = (PREFIX + ', whose call indices do not increase in file order (%s comes before %s): ' +
            CONSEQUENCE + ' zero-padded NNN_ name prefixes of one width '
            '(python/paritycheck/dump.py does)')


def write_pair(name, paths, indexed=False, track_order=False, files=('',)):
    """A and B of identical float32 tensors (B equal to A: every tensor passes), at `paths`,
    created in that order; each with execution_index = its position when `indexed`. With
    several `files`, A and B are folders holding each file. Returns (A, B)."""
    d = fresh(name)
    for side in ('a', 'b'):
        for f in files:
            datasets = {p: np.arange(1, 9, dtype=np.float32) * (k + 1)
                        for k, p in enumerate(paths)}
            path = os.path.join(d, side, f) if f else os.path.join(d, side + '.h5')
            write_h5(path, datasets, track_order=track_order)
            if indexed:
                with h5py.File(path, 'a') as h:
                    for k, p in enumerate(paths):
                        h[p].attrs['execution_index'] = k
    if files != ('',):
        return os.path.join(d, 'a'), os.path.join(d, 'b')
    return os.path.join(d, 'a.h5'), os.path.join(d, 'b.h5')


def order_warnings(label, a, b):
    """The run's warnings on the execution order, from JSON and from stderr; checks that the
    run passes (the warning fails nothing) and that both list the same ones."""
    p, r = run_json([a, b])
    check('%s: exit 0' % label, p.returncode == 0 and r is not None, (p.returncode, p.stderr))
    from_json = [w for w in (r or {}).get('warnings', []) if w.startswith(PREFIX)]
    from_stderr = [ln[len('paritycheck: warning: '):] for ln in p.stderr.splitlines()
                   if ln.startswith('paritycheck: warning: ' + PREFIX)]
    check('%s: the same warnings on stderr and in JSON' % label, from_json == from_stderr,
          (from_json, p.stderr))
    return from_json


def test_names_without_call_index():
    """(1) "/act/layer10", "/act/layer2": layer10 sorts first though it is called last."""
    a, b = write_pair('no_index', ['/act/layer2', '/act/layer10'])
    w = order_warnings('no call index', a, b)
    check('no call index: exactly one warning, naming the first such tensor',
          w == [NO_INDEX % '/act/layer10'], w)


def test_call_indices_of_unequal_width():
    """(2) "/act/9_fc", "/act/10_relu": 10_relu sorts before 9_fc."""
    a, b = write_pair('widths', ['/act/9_fc', '/act/10_relu'])
    w = order_warnings('unequal widths', a, b)
    check('unequal widths: exactly one warning, naming both tensors',
          w == [UNSORTED % ('/act/10_relu', '/act/9_fc')], w)


def test_zero_padded_call_indices():
    """(3) "/act/009_fc", "/act/010_relu" sort into call order, as do the elements of one call's
    tuple output."""
    a, b = write_pair('padded', ['/act/009_fc', '/act/010_relu/0', '/act/010_relu/1'])
    check('zero-padded: no warning', order_warnings('zero-padded', a, b) == [])


def test_execution_index_attributes():
    """(4) The names of (1), each with an execution_index: the order is the attribute's."""
    a, b = write_pair('indexed', ['/act/layer2', '/act/layer10'], indexed=True)
    check('execution_index: no warning', order_warnings('execution_index', a, b) == [])


def test_gradients_only():
    """(5) Gradients alone, and a single forward tensor beside them: nothing to misorder."""
    a, b = write_pair('grads', ['/gradients/fc.bias', '/gradients/fc.weight',
                                '/gradients/conv1.weight'])
    check('gradients only: no warning', order_warnings('gradients only', a, b) == [])
    a, b = write_pair('one_forward', ['/inputs/x', '/act/conv1', '/gradients/conv1.weight',
                                      '/outputs/loss'])
    check('one forward tensor: no warning', order_warnings('one forward tensor', a, b) == [])


def test_creation_order():
    """Names without call index in a file that tracks creation order (its root group lists
    conv1, bn1, relu: not by name) are in the order the dumper wrote them: no warning. The same
    file listed by name (a plain h5py dump) warns. (h5py's intermediate groups, "/act" of
    "/act/conv1", do not track creation order, hence names in the root here.)"""
    names = ['/conv1', '/bn1', '/relu']
    a, b = write_pair('created', names, track_order=True)
    check('creation order: no warning', order_warnings('creation order', a, b) == [])
    a, b = write_pair('by_name', names)
    w = order_warnings('by name', a, b)
    check('by name: one warning', w == [NO_INDEX % '/bn1'], w)


def test_folder_mode_warns_once():
    """Folder mode: each file's order is inferred on its own, but two files in doubt give one
    warning, naming the first file's tensor; files of one forward tensor each give none."""
    a, b = write_pair('folders', ['/act/layer2', '/act/layer10'],
                      files=('step1/rank0.h5', 'step1/rank1.h5'))
    w = order_warnings('folders', a, b)
    check('folders: exactly one warning, naming a file',
          w == [NO_INDEX % 'step1/rank0.h5:/act/layer10'], w)
    a, b = write_pair('folders_single', ['/act/layer2'], files=('r0.h5', 'r1.h5'))
    check('folders, one forward tensor a file: no warning',
          order_warnings('folders single', a, b) == [])


def main():
    cli_common.setup(os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2]))
    os.makedirs(os.path.abspath(sys.argv[2]), exist_ok=True)
    return run_tests([test_names_without_call_index, test_call_indices_of_unequal_width,
                      test_zero_padded_call_indices, test_execution_index_attributes,
                      test_gradients_only, test_creation_order, test_folder_mode_warns_once])


if __name__ == '__main__':
    sys.exit(main())
