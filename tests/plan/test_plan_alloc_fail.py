#!/usr/bin/python3
"""Allocation failures in plans (issue 18; docs/robustness.md, "Faults"): plan_sim for 4
processes, linked with tests/faults/alloc_fail.c, on a pair whose largest tensor is cut into
parts, is run once to count its allocations and then once for each N with the Nth failing. Every
run must exit 2 saying "out of memory", or recover and write exactly the clean run's reports;
never crash, and in the ASan build never leak.

Usage: test_plan_alloc_fail.py PLAN_SIM_ALLOCFAIL"""
import concurrent.futures
import os
import subprocess
import sys
import tempfile

import h5py
import numpy as np

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, TESTS)
sys.path.insert(0, os.path.join(TESTS, "faults"))
from checks import check, summary  # noqa: E402
from fault_run import SANITIZER_WORDS, sanitizer_env  # noqa: E402

EVERY_UP_TO = 3000
STRIDED = 1000
REPORTS = ["report.txt", "report.json", "report.md", "report.xml", "report.html",
           "baseline.json"]


def make_inputs(tmp):
    """x: 100,000 float32 a side, drifted in every 7th element (cut into parts for 4
    processes); y: gzip-chunked; a never-written dataset; one dataset only in A; integers."""
    rng = np.random.default_rng(18)
    x = rng.standard_normal(100000).astype(np.float32)
    for side in "ab":
        with h5py.File(os.path.join(tmp, side + ".h5"), "w") as f:
            xx = x.copy()
            if side == "b":
                xx[::7] *= np.float32(1.0001)
            f["x"] = xx
            f.create_dataset("g/y", data=x[:5000], chunks=(500,), compression="gzip")
            f.create_dataset("fill", (100,), "f4", fillvalue=0.5)
            f["i"] = np.arange(50, dtype=np.int32)
            if side == "a":
                f["only_a"] = x[:10]


def run(binary, tmp, n):
    """Runs plan_sim with the Nth allocation failing (0: none): (exit code, stderr, reports,
    allocations counted)."""
    out = os.path.join(tmp, "n%d" % n)
    os.makedirs(out)
    env = sanitizer_env(dict(os.environ))
    env["PC_ALLOC_COUNT"] = os.path.join(out, "count")
    if n:
        env["PC_FAIL_ALLOC"] = str(n)
    p = subprocess.run([binary, "4", os.path.join(tmp, "a.h5"), os.path.join(tmp, "b.h5"), out,
                        "4096", "1", "0"], env=env, capture_output=True, text=True, timeout=120)
    reports = {}
    for name in REPORTS:
        path = os.path.join(out, name)
        if os.path.exists(path):
            reports[name] = open(path, "rb").read()
    with open(env["PC_ALLOC_COUNT"]) as fh:
        total = max(int(line.split()[1]) for line in fh if line.strip())
    return p.returncode, p.stderr, reports, total


def main():
    binary = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        make_inputs(tmp)
        rc0, err0, reports0, total = run(binary, tmp, 0)
        if rc0 != 0 or sorted(reports0) != sorted(REPORTS) or "split 1" not in \
                subprocess.run([binary, "4", os.path.join(tmp, "a.h5"), os.path.join(tmp, "b.h5"),
                                tmp, "4096", "1", "0"], capture_output=True, text=True).stdout:
            check("the clean run: exit 0, every report, a tensor cut", False,
                  "exit %d, %s: %s" % (rc0, sorted(reports0), err0))
            return summary()
        ns = list(range(1, min(total, EVERY_UP_TO) + 1))
        if total > EVERY_UP_TO:
            ns += list(range(EVERY_UP_TO + 1, total + 1,
                             max(1, (total - EVERY_UP_TO) // STRIDED)))
        recovered = 0
        with concurrent.futures.ThreadPoolExecutor(max(1, min(4, os.cpu_count() or 1))) as pool:
            for n, (rc, err, reports, _) in zip(ns, pool.map(lambda k: run(binary, tmp, k), ns)):
                what = "exit %d: %s" % (rc, err[-800:])
                check("allocation %d: no crash, no sanitizer report" % n,
                      rc in (0, 2) and not any(w in err for w in SANITIZER_WORDS), what)
                if rc == 2:
                    check("allocation %d: exit 2 says out of memory" % n,
                          "out of memory" in err, what)
                else:
                    check("allocation %d: recovered: the clean reports" % n,
                          reports == reports0, what)
                recovered += rc == 0
        print("%d allocations, %d runs, %d recovered" % (total, len(ns), recovered))
    return summary()


if __name__ == "__main__":
    sys.exit(main())
