/* The gates of a command (cli_gates.h). */
#include "cli_gates.h"
#include "cli_diag.h"
#include "isolate.h"

#include <stdio.h>  /* fputs */
#include <unistd.h> /* access */

int pc_cli_load_baseline(const pc_cli *c, pc_baseline **base) {
  pc_error err;
  *base = NULL;
  return c->out.baseline && pc_baseline_load(base, c->out.baseline, &err) < 0 ? pc_cli_fail(&err)
                                                                              : PC_OK;
}

int pc_cli_load_approvals(const pc_cli *c, pc_approvals **ap) {
  pc_error err;
  const char *path = c->out.approved ? c->out.approved : c->out.approve;
  *ap = NULL;
  if (!path || (!c->out.approved && access(path, F_OK) != 0))
    return PC_OK;
  return pc_approvals_load(ap, path, &err) < 0 ? pc_cli_fail(&err) : PC_OK;
}

/* A gate's file made under other tolerances than this run's (pc_gate_tolerance_mismatch). */
static int tolerance_mismatch(const char *why) {
  fputs("paritycheck: ", stderr);
  pc_cli_put_untrusted(why);
  fputs("\nparitycheck: hint: gate with the tolerances (--profile, -t) the file was made with, or "
        "make it again under these\n",
        stderr);
  return PC_EUSAGE;
}

/* --approve: signs the run's drifting tensors into the file, then judges the run against what
 * it wrote, so that the exit code says whether everything that drifts is now approved. */
static int approve(const pc_cli *c, const pc_approvals *prev, const pc_run *run, pc_gate **gate) {
  pc_error err;
  pc_approvals *ap = NULL;
  pc_tol_record now = pc_cli_tols_record(&c->tols);
  pc_approve_options sign = c->out.sign;
  sign.tolerances = &now;
  if (prev &&
      pc_approvals_tolerance_mismatch(prev, c->out.approve, &now, err.message, sizeof err.message))
    return tolerance_mismatch(err.message);
  pc_cli_hold_stop_signals(true);
  int rc = pc_approvals_save(c->out.approve, run, prev, &sign, &err);
  pc_cli_hold_stop_signals(false);
  if (rc == PC_OK && (rc = pc_approvals_load(&ap, c->out.approve, &err)) == PC_OK)
    rc = pc_gate_approvals(gate, ap, c->out.approve, run, &err);
  pc_approvals_free(ap);
  return rc < 0 ? pc_cli_fail(&err) : PC_OK;
}

int pc_cli_gate(const pc_cli *c, const pc_baseline *base, const pc_approvals *ap, const pc_run *run,
                pc_gate **gate) {
  pc_error err;
  double factor = c->out.baseline_factor ? c->out.baseline_factor : PC_BASELINE_FACTOR_DEFAULT;
  char text[1024];
  *gate = NULL;
  if (c->out.approve)
    return approve(c, ap, run, gate);
  if (base && pc_gate_new(gate, base, c->out.baseline, run, factor, &err) < 0)
    return pc_cli_fail(&err);
  if (ap && pc_gate_approvals(gate, ap, c->out.approved, run, &err) < 0)
    return pc_cli_fail(&err);
  pc_tol_record now = pc_cli_tols_record(&c->tols);
  if (pc_gate_tolerance_mismatch(*gate, &now, err.message, sizeof err.message))
    return tolerance_mismatch(err.message);
  const char *warning = base ? pc_gate_profile_warning(*gate, c->profile, text, sizeof text) : NULL;
  if (warning)
    pc_cli_warn(warning);
  return PC_OK;
}
