/* The envelope of a pair (comparator.h): found beside A, never beside B (B may not choose its
 * own allowance), or given by pc_options.envelope; read before anything in it is believed
 * (docs/envelope.md). */
#include "comparator.h"
#include "envelope.h"
#include "pc_internal.h"

#include <errno.h>    /* errno, ENOENT */
#include <limits.h>   /* PATH_MAX */
#include <stdlib.h>   /* free */
#include <sys/stat.h> /* lstat */

int pc_pair_envelope_open(const pc_options *o, const char *a_path, bool folder, pc_envelope **out,
                          pc_error *err) {
  char side[PATH_MAX];
  struct stat st;
  *out = NULL;
  if (o->no_envelope)
    return PC_OK;
  pc_open_limits lim = pc_options_limits(o);
  if (o->envelope && !folder)
    return pc_envelope_open(out, o->envelope, &lim, err);
  if (!pc_envelope_sidecar(a_path, side, sizeof side))
    return PC_OK; /* no sidecar name fits: A's path is near PATH_MAX */
  if (lstat(side, &st) != 0)
    return errno == ENOENT ? PC_OK
                           : pc_error_set(err, PC_EIO, "%s: cannot read the envelope", side);
  return pc_envelope_open(out, side, &lim, err);
}

int pc_pair_envelope_attach(pc_pair *p, pc_stream_sides *sd, pc_error *err) {
  pc_tensor *t = p->t;
  pc_error why = {PC_OK, ""};
  t->envelope = (pc_envelope_fig){0};
  if (!p->env || !pc_dtype_is_float(t->compare) || t->is_complex)
    return PC_OK;
  const pc_dataset *bound = NULL;
  int found = pc_envelope_find(p->env, p->a, &t->envelope, &bound, &why);
  if (found == PC_ENOMEM)
    return pc_error_set(err, found, "%s: out of memory", t->path);
  if (found < 0) {
    t->verdict = PC_VERDICT_ERROR;
    free(t->message);
    t->message = pc_strdup(why.message);
    return t->message ? PC_OK : pc_error_set(err, PC_ENOMEM, "%s: out of memory", t->path);
  }
  if (found == 0)
    return PC_OK;
  pc_envelope_set_floor(&t->envelope, pc_dtype_unit_roundoff(t->dtype_a));
  t->envelope.elements = true;
  sd->fe = pc_envelope_file(p->env);
  sd->e = bound;
  return PC_OK;
}
