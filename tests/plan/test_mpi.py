#!/usr/bin/python3
"""The CLI built with PC_MPI under mpirun (issue 18, docs/scale-out.md):

  - with 1, 2 and 4 ranks (and -j 1 or 2) every report is byte for byte the single-process run's,
    on a folder of 4 real shards, on a real pair and on one file with a tensor cut across ranks;
  - a dataset that a rank cannot read (a corrupt gzip chunk) is an error tensor naming the file
    and the dataset, exit 2, with the reports of the single-process run;
  - a rank that dies (kill -9 while it reads) ends the run with exit 2, not a hang;
  - a rank that stalls is stopped by its own --stall-timeout: exit 2, not a hang.

Rank 1 is made to hang with the read_fail library (PC_STALL_READ), given to that rank alone.

Usage: test_mpi.py PARITYCHECK MPIRUN READ_FAIL_LIBRARY"""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import h5py

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
import plan_cases  # noqa: E402
from checks import check, run_tests  # noqa: E402

CLI, MPIRUN, SHIM = sys.argv[1:4]
MPI = [MPIRUN, "-q", "--allow-run-as-root", "--oversubscribe"]
TMP = None
CASES = None


def mpi_cmd(n, args):
    return MPI + ["-n", str(n), CLI] + args


def test_identical_runs():
    for name, (a, b, args) in CASES.items():
        ref = os.path.join(TMP, name + "-ref")
        code, err = plan_cases.run_cli([CLI] + args + plan_cases.report_args(ref) + [a, b], ref)
        check("%s: single process exits 0 or 1" % name, code in (0, 1), err)
        for n, jobs in ((1, "2"), (2, "1"), (2, "2"), (4, "1")):
            out = os.path.join(TMP, "%s-%d-%s" % (name, n, jobs))
            cmd = mpi_cmd(n, ["-j", jobs] + args + plan_cases.report_args(out) + [a, b])
            got, err = plan_cases.run_cli(cmd, out)
            label = "%s -n %d -j %s" % (name, n, jobs)
            check(label + ": the single process's exit code", got == code,
                  "exit %d, single process %d: %s" % (got, code, err))
            for d in plan_cases.differences(ref, out):
                check("%s: %s as the single process's" % (label, d), False)


def corrupt_chunk(path, dataset, index):
    """Overwrites the middle of one stored (gzip) chunk with zeros: HDF5 then fails to inflate
    it when that chunk is read, while the file still opens and walks."""
    with h5py.File(path, "r") as f:
        info = f[dataset].id.get_chunk_info(index)
    with open(path, "r+b") as f:
        f.seek(info.byte_offset + info.size // 4)
        f.write(bytes(info.size // 2))


def test_unreadable_dataset():
    a, b, args = CASES["big"]
    bad = os.path.join(TMP, "bad_b.h5")
    shutil.copy(b, bad)
    corrupt_chunk(bad, "act/gz", 5)
    ref = os.path.join(TMP, "bad-ref")
    code, _ = plan_cases.run_cli([CLI] + args + plan_cases.report_args(ref) + [a, bad], ref)
    check("corrupt chunk, single process: exit 2", code == 2, code)
    text = open(os.path.join(ref, "report.txt")).read()
    check("corrupt chunk: the report names the file and the dataset",
          bad in text and "/act/gz" in text, text)
    for n in (2, 4):
        out = os.path.join(TMP, "bad-%d" % n)
        got, err = plan_cases.run_cli(mpi_cmd(n, args + plan_cases.report_args(out) + [a, bad]),
                                      out)
        check("corrupt chunk, -n %d: exit 2" % n, got == 2, err)
        for d in plan_cases.differences(ref, out):
            check("corrupt chunk, -n %d: %s as the single process's" % (n, d), False)


def rank1_hangs(a, b, extra):
    """An mpirun of 2 ranks in which rank 1 hangs at its first read of a file under B."""
    hang = ('if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then export LD_PRELOAD="%s" PC_STALL_READ=1 '
            'PC_FAIL_READ_MATCH="%s"; fi; exec "$@"' % (SHIM, b))
    return subprocess.Popen(MPI + ["-n", "2", "sh", "-c", hang, "sh", CLI] + extra + [a, b],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)


def rank_process(rank):
    """The pid of the process that holds MPI rank `rank`: the comparison's child, whose parent
    is paritycheck too (src/cli/isolate.c), or None."""
    pids = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            env = open("/proc/%s/environ" % pid, "rb").read().split(b"\0")
            stat = open("/proc/%s/stat" % pid).read()
        except OSError:
            continue
        if b"OMPI_COMM_WORLD_RANK=%d" % rank in env and "(paritycheck)" in stat:
            pids[int(pid)] = int(stat.rsplit(")", 1)[1].split()[1])
    children = [p for p, parent in pids.items() if parent in pids]
    return children[0] if children else None


def finish(p, what, timeout=120):
    try:
        _, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        check(what + ": mpirun ends within %d s (no hang)" % timeout, False)
        return None, ""
    return p.returncode, err.decode(errors="replace")


def test_killed_rank():
    a, b, args = CASES["shards"]
    p = rank1_hangs(a, b, args)
    pid, deadline = None, time.time() + 60
    while pid is None and time.time() < deadline and p.poll() is None:
        time.sleep(0.2)
        pid = rank_process(1)
    check("killed rank: rank 1's process is found", pid is not None)
    if pid is not None:
        time.sleep(1)  # it is then hanging in its read
        os.kill(pid, signal.SIGKILL)
    code, err = finish(p, "killed rank")
    check("killed rank: mpirun exits 2", code == 2, err)
    check("killed rank: stderr says so", "killed (signal 9" in err, err)


def test_stalled_rank():
    a, b, args = CASES["shards"]
    start = time.time()
    code, err = finish(rank1_hangs(a, b, ["--stall-timeout", "3"] + args), "stalled rank")
    check("stalled rank: mpirun exits 2", code == 2, err)
    check("stalled rank: stderr says so", "no progress for 3 s" in err, err)
    check("stalled rank: ends within a minute", time.time() - start < 60, time.time() - start)


def main():
    global TMP, CASES
    with tempfile.TemporaryDirectory() as tmp:
        TMP = tmp
        CASES = plan_cases.make_cases(tmp)
        return run_tests([test_identical_runs, test_unreadable_dataset, test_killed_rank,
                          test_stalled_rank])


if __name__ == "__main__":
    sys.exit(main())
