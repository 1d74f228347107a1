"""The tally of the Python end-to-end tests (tests/*/*.py): check() records one named check and
prints it when it fails; summary() prints the closing line "N passed, M failed" that CI reads
and returns the exit code."""

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
