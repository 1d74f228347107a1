"""paritycheck.calibrate's report: what a calibration tells its user, on the terminal, in the
written profile's header comments and in the JSON report (--report), and the writing of both
files."""
import json
import os

from .calib_profile import fmt

PROG = "python3 -m paritycheck.calibrate"

# Fewer honest runs than this are reported as too few to trust (the leave-one-out estimate rests
# on a handful of held-out runs).
TRUST_MODELS, TRUST_RUNS = 3, 5


def too_few(n_runs, n_models):
    """What to add before the result can be trusted: [] or e.g. ["2 more honest runs"]."""
    short = []
    if n_runs < TRUST_RUNS:
        n = TRUST_RUNS - n_runs
        short.append("%d more honest run%s" % (n, "s" if n > 1 else ""))
    if n_models < TRUST_MODELS:
        n = TRUST_MODELS - n_models
        short.append("%d more model%s" % (n, "s" if n > 1 else ""))
    return short


def log_fit(log, c, need, n_pairs):
    """The fitted coefficients, each with what it needed and where."""
    log("fitted on %d honest pairs:" % n_pairs)
    for k in ("atol_rms", "max_rel_rms_u", "max_scale_u", "trend_growth_backward",
              "noise_floor_u"):
        log("  %-22s %-8s needed %.4g by %s" % (k, fmt(c[k]), need[k][0],
                                                need[k][1] or "(none)"))


def log_cv(log, summ, short, n_runs, n_models):
    """The cross-validation's totals per mode, and a warning when the runs are too few."""
    for mode, s in summ.items():
        log("  %-9s honest %d/%d pass; bug runs caught at the right tensor %d/%d (flagged "
            "%d, required %d/%d)" % (mode, s["honest_pass"], s["honest_runs"],
                                     s["bugs_caught"], s["bug_runs"], s["bugs_flagged"],
                                     s["required_caught"], s["required_runs"]))
        if s["honest_runs"] and s["honest_pass"] == s["honest_runs"]:
            log("  %-9s all %d held-out honest runs pass: a new model's failure rate is "
                "below %.0f %% at 95 %% confidence (rule of three)"
                % (mode, s["honest_runs"], min(100.0, 300.0 / s["honest_runs"])))
    if short:
        log("too few to trust: %d honest runs of %d models; add %s (at least %d runs of %d "
            "models) before relying on this profile" % (n_runs, n_models, " and ".join(short),
                                                       TRUST_RUNS, TRUST_MODELS))


def profile_header(base, n_runs, n_pairs, fams, mutated, summ, short):
    """The written profile's header comment lines: where it came from and how it scored."""
    header = [
        "Tolerance profile calibrated by `%s` (docs/calibrate.md)" % PROG,
        "from the base profile %s (its header comments dropped)," % base,
        "on %d honest runs (%d pairs) of %d models: %s." % (n_runs, n_pairs, len(fams),
                                                          ", ".join(fams)),
        "Each fitted value: 3 x what the most demanding honest tensor needs beyond the",
        "run's trend and noise floor, or the model's floor (comment beside it).",
        "Structural sweep: %d mutated tensors, none passes." % mutated]
    for mode, s in summ.items():
        header.append("Leave-one-out, %s: honest %d/%d pass; bugs caught at the right "
                      "tensor %d/%d." % (mode, s["honest_pass"], s["honest_runs"],
                                         s["bugs_caught"], s["bug_runs"]))
    if short:
        header.append("TOO FEW TO TRUST: add %s." % " and ".join(short))
    return header


def report_json(a, precision, runs, fams, short, c, need, res, clusters, summ, folds, binary):
    """The --report document: inputs, fitted values and their needs, sweep and CV."""
    return {"base": a.base, "precision": precision,
            "runs": [r._asdict() for r in runs], "models": fams,
            "too_few_to_trust": short, "coefficients": c,
            "needs": {k: {"value": v, "where": w} for k, (v, w) in need.items()},
            "sweep": {"mutated": res["mutated"], "passed": res.get("passed", []),
                      "diagnoses": res.get("diagnoses", {})},
            "clusters": {n: sorted(f) for n, f in clusters},
            "cross_validation": {"summary": summ, "folds": folds},
            "binary_runs": binary.runs}


def write_outputs(out, text, report_path, report, log):
    """The profile to `out` (atomically, through out.tmp), the report to report_path if given."""
    tmp = out + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, out)
    log("wrote %s" % out)
    if report_path:
        with open(report_path, "w") as f:
            json.dump(report, f, indent=1, default=str)
        log("wrote %s" % report_path)
