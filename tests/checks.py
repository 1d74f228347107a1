"""The tally of the Python end-to-end tests (tests/*/*.py): check() records one named check and
prints it when it fails; summary() prints the closing line "N passed, M failed" that CI reads
and returns the exit code; run_tests() runs a script's test functions."""

import os
import traceback

_passed = 0
_failed = []


def check(name, cond, detail=''):
    """Record one check; returns cond so that callers can go on conditionally."""
    global _passed
    if cond:
        _passed += 1
    else:
        _failed.append(name)
        print('FAIL %s%s' % (name, (': ' + str(detail)[:3000]) if detail else ''))
    return cond


def summary():
    """Print the closing line; 0 when every check passed, else 1."""
    print('%d passed, %d failed' % (_passed, len(_failed)))
    return 1 if _failed else 0


def run_tests(tests):
    """Run each test function, or only those named in PC_TEST_ONLY (comma-separated, e.g.
    PC_TEST_ONLY=test_quiet); an exception in one is one failure and the others still run.
    Returns summary()."""
    only = os.environ.get('PC_TEST_ONLY')
    for t in tests:
        if only and t.__name__ not in only.split(','):
            continue
        try:
            t()
        except Exception as e:
            traceback.print_exc()
            check('%s raised %s' % (t.__name__, type(e).__name__), False, str(e))
    return summary()
