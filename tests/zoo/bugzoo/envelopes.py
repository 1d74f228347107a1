"""The bug zoo's envelopes: for every family and every B policy, a copy of A in
FAM/env_POLICY/ and its envelope (paritycheck.ensemble.make_envelope: K reruns of A's run, CPU
fp32, with random rounding that emulates POLICY), side by side as docs/envelope.md lays out.
Families and policies run in parallel processes, each with A's thread count, so that a member's
unperturbed arithmetic is A's."""

import multiprocessing as mp
import os
import shutil
import time
import traceback

import torch


def _one(job):
    out, fam, policy, seed, K, threads, run_one, suffix = job
    torch.set_num_threads(threads)
    from paritycheck.ensemble import make_envelope
    src = os.path.join(out, fam, "A" + suffix)
    dst_dir = os.path.join(out, fam, "env_" + policy)
    dst = os.path.join(dst_dir, "A" + suffix)
    t0 = time.time()
    try:
        if os.path.exists(dst_dir):
            shutil.rmtree(dst_dir)
        os.makedirs(dst_dir)
        if os.path.isdir(src):
            shutil.copytree(src, dst)
        else:
            shutil.copy2(src, dst)
        paths = make_envelope(lambda p: run_one(fam, "cpu_fp32", None, p, seed), dst, policy,
                              members=K, seed=seed)
        return fam, policy, [os.path.relpath(p, out) for p in paths], None, time.time() - t0
    except Exception:  # noqa: BLE001 - reported by the caller
        return fam, policy, [], traceback.format_exc(), time.time() - t0


def make_all(out, families, seed, K, jobs, policies, run_one, run_suffix, threads=None):
    """Envelopes of every family for every policy; returns (made paths, failed names)."""
    threads = threads or torch.get_num_threads()
    todo = [(out, fam, pol, seed, K, threads, run_one, run_suffix(fam))
            for fam in families for pol in policies]
    todo.sort(key=lambda j: j[7] != "")  # trajectories (folders) first: the longest jobs
    made, failed = [], []
    if jobs > 1:
        with mp.get_context("fork").Pool(jobs) as pool:
            results = pool.map(_one, todo, chunksize=1)
    else:
        results = [_one(j) for j in todo]
    for fam, pol, paths, err, secs in results:
        if err:
            print("envelope %s/%s FAILED:\n%s" % (fam, pol, err), flush=True)
            failed.append("%s/env_%s" % (fam, pol))
        else:
            print("envelope %s/%s: %d file(s), K = %d, %.1f s" % (fam, pol, len(paths), K, secs),
                  flush=True)
            made += paths
    return made, failed
