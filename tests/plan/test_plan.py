#!/usr/bin/python3
"""Plans (paritycheck/plan.h, issue 18): a comparison shared among N processes, run by plan_sim in
one process, writes every report byte for byte as the single-process CLI does, for N = 1, 2, 3, 4
and 7, with 1 and 2 threads, on the cases of plan_cases.py; and a large tensor is indeed cut into
parts once its bytes exceed a process's share.

Usage: test_plan.py PARITYCHECK PLAN_SIM FIXTURES"""
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
import plan_cases  # noqa: E402
from checks import check, summary  # noqa: E402


def sim_args(case_args):
    """plan_sim's BLOCK_ELEMS and tolerance files from the CLI options of a case."""
    block, tols = "0", []
    for i in range(0, len(case_args), 2):
        if case_args[i] == "--block-elems":
            block = case_args[i + 1]
        else:
            tols.append(case_args[i + 1])
    return block, tols


def main():
    cli, sim = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as tmp:
        for name, (a, b, args) in plan_cases.make_cases(tmp).items():
            ref = os.path.join(tmp, name + "-ref")
            code, err = plan_cases.run_cli([cli] + args + plan_cases.report_args(ref) + [a, b], ref)
            if not check("%s: the CLI exits 0 or 1" % name, code in (0, 1), err):
                continue
            block, tols = sim_args(args)
            for n in (1, 2, 3, 4, 7):
                for threads in ("1", "2"):
                    out = os.path.join(tmp, "%s-%d-%s" % (name, n, threads))
                    os.makedirs(out)
                    p = subprocess.run([sim, str(n), a, b, out, block, threads, "0"] + tols,
                                       capture_output=True, text=True, timeout=300)
                    label = "%s n=%d -j%s" % (name, n, threads)
                    if not check(label + ": plan_sim exits 0", p.returncode == 0, p.stderr):
                        continue
                    split = int(re.search(r"split (\d+)", p.stdout).group(1))
                    # /act/big holds 1064960 float32 elements a side, more than a third of the
                    # pair's bytes: from 3 processes on it exceeds one share and is cut.
                    if name == "big":
                        check(label + ": a tensor is cut from 3 processes on",
                              (split > 0) == (n >= 3), split)
                    for d in plan_cases.differences(ref, out):
                        check("%s: %s as the CLI's" % (label, d), False)
        # Without quantiles (a gate run writes only the text report): the same text.
        a, b, args = plan_cases.make_cases(tmp)["big"]
        gate = os.path.join(tmp, "gate-ref")
        plan_cases.run_cli([cli] + args + [a, b], gate)
        out = os.path.join(tmp, "gate-sim")
        os.makedirs(out)
        block, tols = sim_args(args)
        subprocess.run([sim, "4", a, b, out, block, "2", "1"] + tols, check=True,
                       capture_output=True)
        check("gate run without quantiles: the CLI's text report",
              open(os.path.join(gate, "report.txt"), "rb").read() ==
              open(os.path.join(out, "report.txt"), "rb").read())
    return summary()


if __name__ == "__main__":
    sys.exit(main())
