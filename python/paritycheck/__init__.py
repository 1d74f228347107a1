"""paritycheck from Python: compare two tensor dumps, or tensors in memory, with the paritycheck
binary, and assert parity in pytest.

    import paritycheck
    report = paritycheck.compare("cpu.h5", "cuda.h5", profile="tf32")   # the JSON report
    paritycheck.assert_parity({"logits": a}, {"logits": b}, profile="cpu-vs-cuda-fp32")

a and b are paths (HDF5, safetensors, npy, npz, or folders of them) or dicts name -> numpy array
or torch tensor, written to a temporary HDF5 dump first (torch bfloat16 as float32 tagged
dtype="bfloat16", as the dumper writes it). The binary is $PARITYCHECK_BIN, else the one
installed with this package (PREFIX/bin), else the source tree's build/paritycheck, else
`paritycheck` on PATH (binary()).
"""
import json
import os
import shutil
import subprocess
import tempfile

__all__ = ["ParityError", "compare", "assert_parity", "binary"]

# Exit codes of the binary (docs: README, "Exit status").
EXIT_PASS, EXIT_DRIFT, EXIT_ERROR = 0, 1, 2


class ParityError(RuntimeError):
    """paritycheck could not compare (exit 2): bad input, unreadable file, bad tolerances."""


def _source_tree():
    """The source tree whose build/ may hold the binary: the one `pip install ./python`
    recorded (setup.py writes _install.py), else the tree this package is imported from
    (PYTHONPATH=python in a checkout: python/paritycheck -> the checkout), else None."""
    try:
        from ._install import SOURCE_TREE
        return SOURCE_TREE
    except ImportError:
        here = os.path.dirname(os.path.abspath(__file__))
        tree = os.path.dirname(os.path.dirname(here))
        if os.path.isfile(os.path.join(tree, "python", "pyproject.toml")):
            return tree
        return None


def binary():
    """The paritycheck executable this package runs, the first of (docs/python.md,
    "Which binary"): $PARITYCHECK_BIN; PREFIX/bin/paritycheck when the package was installed
    by `cmake --install` (PREFIX/lib/python3/dist-packages/paritycheck); build/paritycheck in
    the source tree (README command 1's build, found from the tree `pip install ./python` ran
    in, or the checkout the package is imported from); `paritycheck` on PATH."""
    env = os.environ.get("PARITYCHECK_BIN")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    prefix = os.path.normpath(os.path.join(here, "..", "..", "..", ".."))
    tree = _source_tree()
    for candidate in (os.path.join(prefix, "bin", "paritycheck"),
                      tree and os.path.join(tree, "build", "paritycheck")):
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which("paritycheck")
    if not found:
        raise ParityError("no paritycheck binary: build it (README command 1), set "
                          "PARITYCHECK_BIN, or put it on PATH")
    return found


def _materialise(x, tmp, name):
    """A path for x: x itself when it is one, else a dump of the dict written into tmp."""
    if isinstance(x, (str, os.PathLike)):
        return os.fspath(x)
    if not isinstance(x, dict):
        raise TypeError("expected a path or a dict of name -> array/tensor, got %r" % type(x))
    from . import dump  # torch and h5py only when tensors in memory are given
    path = os.path.join(tmp, name + ".h5")
    dump.write_tensors(((k if k.startswith("/") else "/" + k, v) for k, v in x.items()), path)
    return path


def compare(a, b, profile=None, tolerances=None, extra_args=()):
    """Compare a (the reference) with b (the candidate); returns the JSON report as a dict
    (docs/report-json.md), whose "verdict" is "pass", "drift" or "error". tolerances: a
    path or a list of paths of tolerance files, loaded after the profile. Raises ParityError
    when paritycheck cannot compare (exit 2)."""
    if isinstance(tolerances, (str, os.PathLike)):
        tolerances = [tolerances]
    with tempfile.TemporaryDirectory(prefix="paritycheck_") as tmp:
        args = [binary(), "--json", os.path.join(tmp, "report.json"), "--no-color"]
        if profile:
            args += ["--profile", profile]
        for t in tolerances or ():
            args += ["-t", os.fspath(t)]
        args += list(extra_args)
        args += [_materialise(a, tmp, "a"), _materialise(b, tmp, "b")]
        p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if p.returncode not in (EXIT_PASS, EXIT_DRIFT):
            raise ParityError(p.stderr.strip() or "paritycheck exited %d" % p.returncode)
        with open(os.path.join(tmp, "report.json")) as fh:
            return json.load(fh)


def _short(x):
    """A figure of the JSON report (a number, or "inf"/"nan" as a string) at 3 digits."""
    return "%.3g" % x if isinstance(x, (int, float)) else str(x)


# Verdicts of the JSON summary that fail a run, in the report's order.
_FAILING = ("drift", "missing_in_a", "missing_in_b", "shape_mismatch", "dtype_mismatch",
            "indeterminate")
_ROOTS_SHOWN, _FOLLOW_ON_SHOWN = 10, 5


def _why(t):
    """"scaled by 0.900 (rel_rms 0.1 > limit 0.001)": the diagnosis (what a reader acts on),
    then the criteria it broke with their limits; for a tensor not compared, its message."""
    figures = "; ".join("%s %s > limit %s" % (r["criterion"], _short(r["value"]),
                                              _short(r["limit"])) for r in t.get("reasons", ()))
    diag = (t.get("diagnosis") or {}).get("text")
    if diag and figures:
        return "%s (%s)" % (diag, figures)
    return diag or figures or t.get("message") or ""


def _root_line(t):
    why = _why(t)
    return "%s (%s)%s" % (t["path"], t["verdict"], ": " + why if why else "")


def _failure_message(report):
    """The first root cause with its diagnosis and figures, then the counts, then every root
    with the follow-on tensors it explains folded under it (docs/python.md, "The pytest
    helper's message")."""
    s = report["summary"]
    failing = [t for t in report["tensors"] if t["verdict"] in _FAILING and
               not (t["verdict"] == "indeterminate" and s.get("accept_indeterminate"))]
    roots = [t for t in failing if not t.get("caused_by")]
    follow = {}
    for t in failing:
        if t.get("caused_by"):
            follow.setdefault(t["caused_by"], []).append(t["path"])
    first = next((t for t in roots if t["path"] == report.get("first_divergence")),
                 roots[0] if roots else None)
    lines = ["paritycheck: first divergence " + _root_line(first) if first else
             "paritycheck: the run fails"]
    kinds = ", ".join("%d %s" % (s[v], v) for v in _FAILING if s.get(v))
    lines.append("%d of %d tensors fail (%s): %d root cause%s, %d follow-on tensor%s"
                 % (s["failures"], s["tensors"], kinds, len(roots), "" if len(roots) == 1 else
                    "s", len(failing) - len(roots), "" if len(failing) - len(roots) == 1 else "s"))
    for t in roots[:_ROOTS_SHOWN]:
        lines.append("  " + _root_line(t))
        names = follow.get(t["path"], [])
        if names:
            more = len(names) - _FOLLOW_ON_SHOWN
            lines.append("    follow-on (%d): %s%s" % (len(names), ", ".join(
                names[:_FOLLOW_ON_SHOWN]), " and %d more" % more if more > 0 else ""))
    if len(roots) > _ROOTS_SHOWN:
        lines.append("  and %d more root causes (paritycheck.compare() gives the whole report)"
                     % (len(roots) - _ROOTS_SHOWN))
    return "\n".join(lines)


def assert_parity(a, b, profile=None, tolerances=None, extra_args=()):
    """For pytest: raises AssertionError when b drifts from a beyond the tolerances, naming
    the first root cause with its diagnosis and figures, then the counts and every root cause
    with the follow-on tensors it explains folded under it; returns the report otherwise."""
    report = compare(a, b, profile=profile, tolerances=tolerances, extra_args=extra_args)
    if report["verdict"] != "pass":
        raise AssertionError(_failure_message(report))
    return report
