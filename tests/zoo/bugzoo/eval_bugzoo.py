#!/usr/bin/python3
"""Judge the bug zoo (make_bugzoo.py) with paritycheck and count every run (issue 36, item 7).

For every family, backend and mode, with and without --accept-indeterminate:
    honest   B's honest run against A: passed (exit 0) of all
    bugs     each bug's run against A: caught (exit 1), and first divergence right (the tool's
             first_divergence is the bug's first tensor, below)
    required the bugs whose effect at their first tensor is >= 3x the honest drift there:
             caught, and first divergence right
Modes: plain (--profile P, P the backend's profile), three-way (--profile P --reference R),
and envelope (--profile P with A's envelope for the backend's policy: FAM/env_POLICY/A, found
beside A, and --envelope for a file when the binary has that option; only where the zoo has
envelopes and the binary documents --envelope).

A bug's first tensor and its ratio come from the dumps alone (numpy), not from the tool:
    effect(t) = rel_rms(B_bug, B_honest) at tensor t   (||x - y|| / ||y|| over finite pairs; a
                non-finite mismatch or a tensor missing in one run counts as infinite)
    noise(t)  = rel_rms(B_honest_b, B_honest)          (the backend run again: 0 when
                deterministic)
    drift(t)  = rel_rms(B_honest, A)                   (honest cross-backend drift)
    first tensor: the first in A's execution order (files in numeric order, then A's
                  execution_index) with effect > noise: where the bug's effect first exists
    ratio = effect / drift at the first tensor (inf where drift is 0); "required" if >= 3.
Also reported: the first tensor where effect >= 3 drift ("first visible"), and the bug's
largest ratio over all tensors.

    /usr/bin/python3 tests/zoo/bugzoo/eval_bugzoo.py --zoo /work/bugzoo --binary build/paritycheck \\
        --out bugzoo_eval.json > bugzoo_eval.md
"""

import argparse
import concurrent.futures as cf
import json
import os
import re
import subprocess
import sys

import h5py
import numpy as np

MODES = ["plain", "threeway", "envelope"]
REQUIRED_RATIO = 3.0
PROFILES = {"fp32": "cpu-vs-cuda-fp32", "tf32": "tf32", "bf16-autocast": "bf16-autocast",
            "fp16-autocast": "fp16-autocast"}


# ============================================================================ the dumps
def _file_tensors(path, prefix, out, file_rank):
    with h5py.File(path, "r") as f:
        def visit(name, obj):
            if not isinstance(obj, h5py.Dataset) or obj.dtype.kind != "f":
                return
            if name.endswith(".envelope.h5"):
                return
            # the elements of a tuple output share their call's execution_index: then the
            # file's order (creation order, /0 before /1) decides, as in the judge
            ex = int(obj.attrs.get("execution_index", -1))
            out[prefix + "/" + name] = ((file_rank, ex, len(out)), np.asarray(obj[()], np.float64))
        f.visititems(visit)


def natural_key(name):
    """step_2 before step_10: digit runs compare as numbers."""
    return [(0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"(\d+)", name)]


def load_run(path):
    """{tensor path as the JSON report writes it: (order key, float64 array)} of a run: a
    file (paths /NAME) or a folder of step files (paths FILE:/NAME, ordered by file)."""
    out = {}
    if os.path.isdir(path):
        files = sorted((f for f in os.listdir(path)
                        if f.endswith(".h5") and not f.endswith(".envelope.h5")),
                       key=natural_key)
        for rank, fn in enumerate(files):
            _file_tensors(os.path.join(path, fn), fn + ":", out, rank)
    else:
        _file_tensors(path, "", out, 0)
    return out


def rel_rms(x, y):
    """||x - y|| / ||y|| over the pairs finite on both sides; inf where the two disagree on
    which elements are finite (or on a non-finite value), or where y is 0 and x is not."""
    if x is None or y is None or x.shape != y.shape:
        return float("inf")
    fx, fy = np.isfinite(x), np.isfinite(y)
    if (fx != fy).any() or (x[~fx] != y[~fy]).any():
        return float("inf")
    d = float(np.sum((x[fx] - y[fy]) ** 2))
    n = float(np.sum(y[fy] ** 2))
    if d == 0.0:
        return 0.0
    return float(np.sqrt(d / n)) if n > 0 else float("inf")


def bug_effect(bug, honest, honest_b, a):
    """The bug's first tensor and ratios (module docstring), from loaded runs."""
    # A's execution order, as the judge's (a backend may produce gradients in another order)
    names = sorted(set(honest) | set(bug),
                   key=lambda n: (a.get(n) or honest.get(n) or bug.get(n))[0])
    first, visible, worst = None, None, 0.0
    for n in names:
        b = bug.get(n, (None, None))[1]
        h = honest.get(n, (None, None))[1]
        effect = rel_rms(b, h)
        noise = rel_rms(honest_b[n][1], h) if honest_b and n in honest_b and h is not None \
            else 0.0
        if not effect > noise:
            continue
        drift = rel_rms(h, a[n][1]) if n in a and h is not None else float("inf")
        ratio = effect / drift if drift > 0 else float("inf")
        if first is None:
            first = {"tensor": n, "effect": effect, "drift": drift, "ratio": ratio,
                     "noise": noise}
        if visible is None and ratio >= REQUIRED_RATIO:
            visible = n
        worst = max(worst, ratio)
    if first is None:
        return {"tensor": None, "effect": 0.0, "drift": 0.0, "ratio": 0.0, "noise": 0.0,
                "first_visible": None, "max_ratio": 0.0, "required": False}
    first.update(first_visible=visible, max_ratio=worst,
                 required=bool(first["ratio"] >= REQUIRED_RATIO))
    return first


# ============================================================================ the zoo
def zoo_runs(zoo):
    """The zoo's manifest and its runs: [{family, backend, bug (None: honest), path, a, r,
    honest, honest_b, policy, profile, envelope_a}] with paths that exist."""
    with open(os.path.join(zoo, "manifest.json")) as f:
        man = json.load(f)
    runs = []
    for fam, info in man["families"].items():
        sfx = info["suffix"]

        def p(rel):
            return os.path.join(zoo, fam, rel + sfx)
        if not os.path.exists(p("A")):
            continue
        for be, binfo in man["backends"].items():
            if binfo["profile"] is None or not os.path.exists(p(be + "/honest")):
                continue
            env_a = p("env_%s/A" % binfo["policy"])
            common = {"family": fam, "backend": be, "a": p("A"), "r": p("R"),
                      "honest": p(be + "/honest"), "honest_b": p(be + "/honest_b"),
                      "policy": binfo["policy"], "profile": binfo["profile"],
                      "envelope_a": env_a if os.path.exists(env_a) else None}
            runs.append(dict(common, bug=None, path=p(be + "/honest")))
            for bug in info["bugs"]:
                if os.path.exists(p(be + "/" + bug)):
                    runs.append(dict(common, bug=bug, path=p(be + "/" + bug)))
    return man, runs


def effects(runs):
    """{(family, backend, bug): bug_effect} for every bug run; each file is read once."""
    cache = {}

    def load(path):
        if path not in cache:
            cache[path] = load_run(path) if path and os.path.exists(path) else None
        return cache[path]
    out = {}
    for r in sorted(runs, key=lambda r: (r["family"], r["backend"])):
        if r["bug"] is None:
            continue
        out[(r["family"], r["backend"], r["bug"])] = bug_effect(
            load(r["path"]), load(r["honest"]), load(r["honest_b"]), load(r["a"]))
        if len(cache) > 64:  # keep A, honest runs; drop bug runs
            for k in [k for k in cache if k == r["path"]]:
                del cache[k]
    return out


# ============================================================================ the binary
def binary_has_envelope(binary):
    p = subprocess.run([binary, "--help"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       check=False)
    return b"--envelope" in p.stdout


def command(binary, run, mode, accept, envelope_option):
    """The paritycheck command line of one run, or None where the mode does not apply."""
    cmd = [binary, "--json", "-", "-q", "-j", "1", "--profile", run["profile"]]
    a = run["a"]
    if mode == "threeway":
        cmd += ["--reference", run["r"]]
    elif mode == "envelope":
        if not run["envelope_a"] or not envelope_option:
            return None
        a = run["envelope_a"]
        if os.path.isfile(a):
            cmd += ["--envelope", a[:-3] + ".envelope.h5"]
    if accept:
        cmd.append("--accept-indeterminate")
    return cmd + [a, run["path"]]


def run_binary(cmd):
    """(exit code, first_divergence or None, verdict counts) of one paritycheck run."""
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)
    if p.returncode not in (0, 1):
        return p.returncode, None, {"error": p.stderr.decode(errors="replace")[-300:]}
    rep = json.loads(p.stdout)
    counts, env = {}, {}
    for t in rep["tensors"]:
        counts[t["verdict"]] = counts.get(t["verdict"], 0) + 1
        if "envelope" in t:  # B's RMS error over the envelope's floor, and the pass factor
            env[t["path"]] = (t["envelope"]["ratio"], t["envelope"]["factor"])
    if env:
        counts["envelope"] = env
    return p.returncode, rep.get("first_divergence"), counts


# ============================================================================ counting
def tally(runs, eff, results):
    """Counts per (family, backend, mode, accept): results maps (run index, mode, accept) to
    (exit code, first divergence, verdict counts).  Pure: the ctest checks it on canned
    results."""
    rows = {}
    for (i, mode, accept), (rc, fd, _) in sorted(results.items(),
                                                 key=lambda kv: (kv[0][0], kv[0][1], kv[0][2])):
        run = runs[i]
        key = (run["family"], run["backend"], mode, accept)
        row = rows.setdefault(key, {"honest": 0, "honest_pass": 0, "errors": 0, "bugs": 0,
                                    "caught": 0, "right": 0, "required": 0, "req_caught": 0,
                                    "req_right": 0, "missed": [], "wrong_fd": []})
        if rc not in (0, 1):
            row["errors"] += 1
            continue
        if run["bug"] is None:
            row["honest"] += 1
            row["honest_pass"] += rc == 0
            continue
        e = eff[(run["family"], run["backend"], run["bug"])]
        right = rc == 1 and e["tensor"] is not None and fd == e["tensor"]
        row["bugs"] += 1
        row["caught"] += rc == 1
        row["right"] += right
        if e["required"]:
            row["required"] += 1
            row["req_caught"] += rc == 1
            row["req_right"] += right
            if rc != 1:
                row["missed"].append(run["bug"])
            elif not right:
                row["wrong_fd"].append(run["bug"])
    return rows


def threeway_lapses(runs, results):
    """The bug runs that plain mode catches and three-way mode passes (exit 0), with the same
    --accept-indeterminate: issue 36 asks for none. Plain mode catches a bug when it fails it
    (exit 1) and passes every honest run of its family and backend: where it fails those too,
    failing the bug tells it from nothing. Sorted (family, backend, bug, accept) tuples."""
    honest_fail = {(runs[i]["family"], runs[i]["backend"], accept)
                   for (i, mode, accept), (rc, _, _) in results.items()
                   if mode == "plain" and runs[i]["bug"] is None and rc != 0}
    out = []
    for (i, mode, accept), (rc, _, _) in results.items():
        run = runs[i]
        if mode != "plain" or rc != 1 or run["bug"] is None or \
                (run["family"], run["backend"], accept) in honest_fail:
            continue
        tw = results.get((i, "threeway", accept))
        if tw is not None and tw[0] == 0:
            out.append((run["family"], run["backend"], run["bug"], accept))
    return sorted(out)


def evaluate(zoo, binary, modes=MODES, jobs=2, runner=run_binary):
    man, runs = zoo_runs(zoo)
    env_opt = binary_has_envelope(binary) if "envelope" in modes else False
    eff = effects(runs)
    todo = {}
    for i, run in enumerate(runs):
        for mode in modes:
            for accept in (False, True):
                cmd = command(binary, run, mode, accept, env_opt)
                if cmd is not None:
                    todo[(i, mode, accept)] = cmd
    with cf.ThreadPoolExecutor(max_workers=jobs) as ex:
        futs = {k: ex.submit(runner, cmd) for k, cmd in todo.items()}
        results = {k: f.result() for k, f in futs.items()}
    return man, runs, eff, results, tally(runs, eff, results), env_opt


# ============================================================================ the report
def _fmt(x):
    return "inf" if x == float("inf") else "%.3g" % x


def markdown(runs, eff, rows, results):
    out = ["## Counts", "",
           "| family | backend | mode | accept-indet. | honest passed | bugs caught | "
           "first div. right | required caught | required first div. right | errors |",
           "|---|---|---|---|---:|---:|---:|---:|---:|---:|"]
    tot = {}
    for key in sorted(rows):
        r = rows[key]
        fam, be, mode, acc = key
        out.append("| %s | %s | %s | %s | %d/%d | %d/%d | %d/%d | %d/%d | %d/%d | %d |" % (
            fam, be, mode, "yes" if acc else "no", r["honest_pass"], r["honest"], r["caught"],
            r["bugs"], r["right"], r["bugs"], r["req_caught"], r["required"], r["req_right"],
            r["required"], r["errors"]))
        t = tot.setdefault((mode, acc), dict.fromkeys(
            ["honest_pass", "honest", "caught", "bugs", "right", "req_caught", "required",
             "req_right", "errors"], 0))
        for k in t:
            t[k] += r[k]
    out += ["", "## Totals", "",
            "| mode | accept-indet. | honest passed | bugs caught | first div. right | "
            "required caught | required first div. right | errors |",
            "|---|---|---:|---:|---:|---:|---:|---:|"]
    for (mode, acc), t in sorted(tot.items()):
        out.append("| %s | %s | %d/%d | %d/%d | %d/%d | %d/%d | %d/%d | %d |" % (
            mode, "yes" if acc else "no", t["honest_pass"], t["honest"], t["caught"], t["bugs"],
            t["right"], t["bugs"], t["req_caught"], t["required"], t["req_right"],
            t["required"], t["errors"]))
    if any(m == "threeway" for _, m, _ in results) and any(m == "plain" for _, m, _ in results):
        lapses = threeway_lapses(runs, results)
        out += ["", "## Three-way against plain", "",
                "Bug runs plain mode catches (where it passes the honest runs) and three-way mode "
                "passes: %d" % len(lapses)]
        out += ["- %s %s %s (accept-indeterminate %s)" % (f, b, g, "yes" if a else "no")
                for f, b, g, a in lapses]
    out += ["", "## Each bug: its first tensor and effect-to-honest-drift ratio", "",
            "| family | backend | bug | first tensor | effect | honest drift | ratio | "
            "required | first visible (>= 3x) | max ratio |",
            "|---|---|---|---|---:|---:|---:|---|---|---:|"]
    for (fam, be, bug), e in sorted(eff.items()):
        out.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            fam, be, bug, e["tensor"], _fmt(e["effect"]), _fmt(e["drift"]), _fmt(e["ratio"]),
            "yes" if e["required"] else "no", e["first_visible"], _fmt(e["max_ratio"])))
    return "\n".join(out) + "\n"


def _num(x):
    return float("inf") if x in ("inf", "nan") else float(x)


def envelope_coverage(runs, eff, results):
    """Per family and backend, the honest run's per-tensor ratio (B's RMS error over the
    envelope's floor: how far the real backend landed, in units of the emulated spread) and
    the pass factor; and each bug's ratio at its first tensor against the factor there."""
    honest, bugs = {}, {}
    for (i, mode, accept), (rc, fd, counts) in results.items():
        env = counts.get("envelope") if isinstance(counts, dict) else None
        if mode != "envelope" or accept or not env:
            continue
        run = runs[i]
        if run["bug"] is None:
            r = sorted(_num(v[0]) for v in env.values())
            f = sorted(_num(v[1]) for v in env.values())
            worst = max(env, key=lambda p: _num(env[p][0]))
            honest[(run["family"], run["backend"])] = {
                "tensors": len(r), "median": r[len(r) // 2], "p90": r[int(0.9 * (len(r) - 1))],
                "max": r[-1], "worst": worst, "factor_median": f[len(f) // 2],
                "beyond_factor": sum(_num(v[0]) > _num(v[1]) for v in env.values())}
        else:
            e = eff[(run["family"], run["backend"], run["bug"])]
            v = env.get(e["tensor"])
            bugs[(run["family"], run["backend"], run["bug"])] = {
                "tensor": e["tensor"], "ratio": _num(v[0]) if v else None,
                "factor": _num(v[1]) if v else None, "caught": rc == 1}
    return honest, bugs


def coverage_markdown(honest, bugs, eff):
    out = ["", "## Envelope: honest runs against the emulated spread", "",
           "Per tensor, ratio = B's RMS error / the envelope's floor (the members' RMS distance "
           "with one rounding of A added); a tensor passes while ratio <= its factor.", "",
           "| family | backend | tensors | median ratio | p90 | max | worst tensor | "
           "median factor | beyond factor |", "|---|---|---:|---:|---:|---:|---|---:|---:|"]
    for (fam, be), h in sorted(honest.items()):
        out.append("| %s | %s | %d | %s | %s | %s | %s | %s | %d |" % (
            fam, be, h["tensors"], _fmt(h["median"]), _fmt(h["p90"]), _fmt(h["max"]),
            h["worst"], _fmt(h["factor_median"]), h["beyond_factor"]))
    missed = [(k, b) for k, b in sorted(bugs.items()) if eff[k]["required"] and
              (not b["caught"] or b["ratio"] is None or b["ratio"] <= b["factor"])]
    out += ["", "## Envelope: required bugs within the envelope at their first tensor", "",
            "| family | backend | bug | first tensor | effect / honest drift | ratio to "
            "envelope | factor | run caught |", "|---|---|---|---|---:|---:|---:|---|"]
    for (fam, be, bug), b in missed:
        out.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
            fam, be, bug, b["tensor"], _fmt(eff[(fam, be, bug)]["ratio"]),
            _fmt(b["ratio"]) if b["ratio"] is not None else "-",
            _fmt(b["factor"]) if b["factor"] is not None else "-",
            "yes" if b["caught"] else "no"))
    return "\n".join(out) + "\n"


def json_report(man, runs, eff, rows, results, env_opt):
    per_run = []
    for (i, mode, accept), (rc, fd, counts) in sorted(results.items()):
        run = runs[i]
        per_run.append({"family": run["family"], "backend": run["backend"], "bug": run["bug"],
                        "mode": mode, "accept_indeterminate": accept, "exit": rc,
                        "first_divergence": fd,
                        "verdicts": {k: v for k, v in counts.items() if k != "envelope"}})
    honest, bugs = envelope_coverage(runs, eff, results)
    return {"zoo_versions": man.get("versions"), "envelope_option": env_opt,
            "required_ratio": REQUIRED_RATIO,
            "rows": [dict(zip(("family", "backend", "mode", "accept_indeterminate"), k), **v)
                     for k, v in sorted(rows.items())],
            "effects": [dict(zip(("family", "backend", "bug"), k), **v)
                        for k, v in sorted(eff.items())],
            "runs": per_run,
            "threeway_lapses": [dict(zip(("family", "backend", "bug", "accept_indeterminate"), x))
                                for x in threeway_lapses(runs, results)],
            "envelope_honest": [dict(zip(("family", "backend"), k), **v)
                                for k, v in sorted(honest.items())],
            "envelope_bugs": [dict(zip(("family", "backend", "bug"), k), **v)
                              for k, v in sorted(bugs.items())]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--zoo", required=True)
    ap.add_argument("--binary", required=True)
    ap.add_argument("--out", help="JSON file")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--jobs", type=int, default=2)
    a = ap.parse_args()
    man, runs, eff, results, rows, env_opt = evaluate(
        a.zoo, a.binary, [m for m in a.modes.split(",") if m], a.jobs)
    sys.stdout.write(markdown(runs, eff, rows, results))
    if env_opt:
        sys.stdout.write(coverage_markdown(*envelope_coverage(runs, eff, results), eff))
    if not env_opt and "envelope" in a.modes:
        print("\n(envelope mode not run: the binary has no --envelope option)")
    if a.out:
        with open(a.out, "w") as f:
            json.dump(json_report(man, runs, eff, rows, results, env_opt), f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
