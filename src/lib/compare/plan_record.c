/* The byte layout of plans and their results (plan_record.h). */
#include "plan_record.h"

#include <stdlib.h> /* free */
#include <string.h> /* memcmp, memcpy */

enum { PC_PLAN_LAYOUT = 1 }; /* the version of what follows the magic */

static void pc_layout(uint64_t sig[7]) {
  sig[0] = PC_PLAN_LAYOUT;
  sig[1] = sizeof(pc_tol) + sizeof(pc_envelope_fig) + sizeof(pc_diagnosis);
  sig[2] = sizeof(pc_stats);
  sig[3] = sizeof(pc_metric_result) * PC_METRIC_COUNT_;
  sig[4] = sizeof(pc_reason) * PC_CRIT_COUNT_;
  sig[5] = PC_QH_BUCKETS;
  sig[6] = sizeof(void *); /* the architecture's word */
}

void pc_record_put_header(pc_wbuf *w, const char *magic) {
  uint64_t sig[7];
  pc_layout(sig);
  pc_wbuf_put(w, magic, 8);
  pc_wbuf_put(w, sig, sizeof sig);
}

bool pc_record_check_header(pc_rbuf *r, const char *magic) {
  uint64_t sig[7], got[7];
  pc_layout(sig);
  const unsigned char *m = pc_rbuf_skip(r, 8);
  pc_rbuf_get(r, got, sizeof got);
  return m && !r->bad && memcmp(m, magic, 8) == 0 && memcmp(sig, got, sizeof sig) == 0;
}

void pc_record_put_tensor(pc_wbuf *w, const pc_tensor *t) {
  pc_wbuf_u64(w, (uint64_t)t->verdict);
  pc_wbuf_str(w, t->message);
  pc_wbuf_str(w, t->note);
  pc_wbuf_put(w, &t->tol, sizeof t->tol);
  pc_wbuf_put(w, &t->envelope, sizeof t->envelope);
  pc_wbuf_put(w, &t->stats, sizeof t->stats);
  pc_wbuf_put(w, t->metrics, sizeof t->metrics);
  pc_wbuf_u64(w, t->nreasons);
  pc_wbuf_put(w, t->reasons, t->nreasons * sizeof t->reasons[0]);
  pc_wbuf_put(w, &t->diagnosis, sizeof t->diagnosis);
}

/* A bool read as raw bytes holds whatever byte the record had: any nonzero byte reads as true, so
 * that a changed byte never makes an invalid _Bool (reading one is undefined). */
static void pc_fix_bool(bool *b) {
  unsigned char byte;
  memcpy(&byte, b, 1);
  *b = byte != 0;
}

void pc_record_get_stats(pc_rbuf *r, pc_stats *s) {
  pc_rbuf_get(r, s, sizeof *s);
  pc_fix_bool(&s->has_worst);
  pc_fix_bool(&s->worst_is_int);
  pc_fix_bool(&s->worst_int_neg[0]);
  pc_fix_bool(&s->worst_int_neg[1]);
  pc_fix_bool(&s->has_quantiles);
  pc_fix_bool(&s->ev.seen);
}

bool pc_record_get_tensor(pc_rbuf *r, pc_tensor *t) {
  uint64_t verdict = pc_rbuf_u64(r);
  char *message = NULL, *note = NULL;
  if (!pc_rbuf_str(r, &message) || !pc_rbuf_str(r, &note)) {
    free(message);
    return false;
  }
  free(t->message);
  free(t->note);
  t->message = message;
  t->note = note;
  t->verdict = verdict < PC_VERDICT_COUNT_ ? (pc_verdict)verdict : PC_VERDICT_ERROR;
  r->bad |= verdict >= PC_VERDICT_COUNT_;
  pc_rbuf_get(r, &t->tol, sizeof t->tol);
  pc_fix_bool(&t->tol.metrics.elementwise_off);
  pc_rbuf_get(r, &t->envelope, sizeof t->envelope);
  pc_fix_bool(&t->envelope.present);
  pc_fix_bool(&t->envelope.elements);
  pc_fix_bool(&t->envelope.has_scale);
  pc_fix_bool(&t->envelope.has_median);
  pc_record_get_stats(r, &t->stats);
  pc_rbuf_get(r, t->metrics, sizeof t->metrics);
  for (int m = 0; m < PC_METRIC_COUNT_; m++) {
    pc_fix_bool(&t->metrics[m].present);
    pc_fix_bool(&t->metrics[m].pass);
  }
  uint64_t n = pc_rbuf_u64(r);
  r->bad |= n > PC_CRIT_COUNT_;
  t->nreasons = r->bad ? 0 : (size_t)n;
  pc_rbuf_get(r, t->reasons, t->nreasons * sizeof t->reasons[0]);
  pc_rbuf_get(r, &t->diagnosis, sizeof t->diagnosis);
  pc_fix_bool(&t->diagnosis.structural);
  if ((unsigned)t->diagnosis.kind >= PC_DIAG_COUNT_) {
    r->bad = true;
    t->diagnosis.kind = PC_DIAG_NONE;
  }
  return true;
}

void pc_record_put_hist(pc_wbuf *w, const pc_qhist *h) {
  pc_wbuf_u64(w, h->lo);
  pc_wbuf_u64(w, h->hi);
  pc_wbuf_u64(w, h->count[0]);
  if (h->lo <= h->hi)
    pc_wbuf_put(w, &h->count[h->lo], (size_t)(h->hi - h->lo + 1) * sizeof h->count[0]);
}

void pc_record_merge_hist(pc_rbuf *r, pc_qhist *h) {
  uint64_t lo = pc_rbuf_u64(r), hi = pc_rbuf_u64(r), zeros = pc_rbuf_u64(r);
  if (h && !r->bad)
    h->count[0] += zeros;
  if (lo > hi)
    return;
  if (lo < 1 || hi >= PC_QH_BUCKETS) {
    r->bad = true;
    return;
  }
  const unsigned char *at = pc_rbuf_skip(r, (size_t)(hi - lo + 1) * sizeof h->count[0]);
  if (!at || !h)
    return;
  for (uint64_t i = lo; i <= hi; i++) {
    uint64_t c;
    memcpy(&c, at + (i - lo) * sizeof c, sizeof c);
    h->count[i] += c;
  }
  pc_qhist_touch(h, (uint32_t)lo, (uint32_t)hi);
}
