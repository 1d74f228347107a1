/* Streaming quantiles (qhist.h), with GSL's histogram PDF for the inverse CDF. */
#include "qhist.h"

#include <paritycheck/error.h>

#include <gsl/gsl_errno.h>     /* gsl_set_error_handler_off */
#include <gsl/gsl_histogram.h> /* gsl_histogram, gsl_histogram_pdf */

#include <float.h>  /* DBL_MAX */
#include <math.h>   /* ceil, INFINITY */
#include <stdlib.h> /* malloc */

void pc_qhist_reset(pc_qhist *h) {
  h->count[0] = 0;
  if (h->lo <= h->hi)
    memset(&h->count[h->lo], 0, (size_t)(h->hi - h->lo + 1) * sizeof h->count[0]);
  h->lo = PC_QH_BUCKETS;
  h->hi = 0;
}

void pc_qhist_add_zeros(pc_qhist *h, uint64_t n) {
  h->count[0] += n;
}

void pc_qhist_merge(pc_qhist *dst, const pc_qhist *src) {
  dst->count[0] += src->count[0];
  if (src->lo > src->hi)
    return;
  for (uint32_t i = src->lo; i <= src->hi; i++)
    dst->count[i] += src->count[i];
  dst->lo = src->lo < dst->lo ? src->lo : dst->lo;
  dst->hi = src->hi > dst->hi ? src->hi : dst->hi;
}

/* The smallest value of bucket i: its top 16 bits followed by zeros. */
static double pc_qhist_edge(uint32_t i) {
  uint64_t bits = (uint64_t)i << PC_QH_SHIFT;
  double x;
  memcpy(&x, &bits, sizeof x);
  return x;
}

/* A GSL PDF whose bins are the finite nonzero buckets lo..hi (lo >= 1, hi < PC_QH_INF) that
 * hold values, each bin reaching from its bucket's lower edge to the next such bucket's: the
 * empty buckets between are left out, since no rank falls in them, and a bin's lower edge is
 * still its bucket's. A histogram of a few thousand values spans hundreds of buckets but holds
 * few of them, and the PDF's set-up walks every bin. NULL when GSL cannot allocate. */
static gsl_histogram_pdf *pc_qhist_pdf(const pc_qhist *h, uint32_t lo, uint32_t hi) {
  size_t nb = 0;
  for (uint32_t i = lo; i <= hi; i++)
    nb += h->count[i] != 0;
  gsl_histogram *g = gsl_histogram_alloc(nb);
  gsl_histogram_pdf *pdf = g ? gsl_histogram_pdf_alloc(nb) : NULL;
  double *range = malloc((nb + 1) * sizeof *range);
  int st = !g || !pdf || !range;
  size_t k = 0;
  for (uint32_t i = lo; !st && i <= hi; i++)
    if (h->count[i])
      range[k++] = pc_qhist_edge(i);
  /* The top finite bucket's upper edge would be inf: close it at the largest double. */
  if (!st)
    range[nb] = hi + 1 == PC_QH_INF ? DBL_MAX : pc_qhist_edge(hi + 1);
  st = st || gsl_histogram_set_ranges(g, range, nb + 1); /* which zeroes the bins */
  k = 0;
  for (uint32_t i = lo; !st && i <= hi; i++)
    if (h->count[i])
      g->bin[k++] = (double)h->count[i];
  st = st || gsl_histogram_pdf_init(pdf, g);
  free(range);
  gsl_histogram_free(g);
  if (st) {
    gsl_histogram_pdf_free(pdf);
    return NULL;
  }
  return pdf;
}

/* The lower edge of the bucket that holds the finite value of rank t (1-based, among the finite
 * nonzero values): GSL inverts the histogram's CDF at the middle of that rank's share, which
 * falls strictly inside the bin of that bucket, and finds the bin of the value it returns. */
static double pc_qhist_rank_edge(const gsl_histogram_pdf *pdf, uint64_t t, uint64_t finite) {
  double v = gsl_histogram_pdf_sample(pdf, ((double)t - 0.5) / (double)finite);
  size_t i = pdf->n - 1;
  while (i > 0 && pdf->range[i] > v)
    i--;
  return pdf->range[i];
}

int pc_qhist_quantiles(const pc_qhist *h, const double *levels, size_t n, double *out) {
  uint64_t zeros = h->count[0], infs = h->count[PC_QH_INF], finite = 0;
  uint32_t lo = h->lo > 1 ? h->lo : 1, hi = h->hi < PC_QH_INF ? h->hi : PC_QH_INF - 1;
  for (uint32_t i = lo; i <= hi && h->lo <= h->hi; i++)
    finite += h->count[i];
  uint64_t total = zeros + finite + infs;
  gsl_histogram_pdf *pdf = NULL;
  gsl_set_error_handler_off(); /* GSL's default handler aborts */
  if (finite && !(pdf = pc_qhist_pdf(h, lo, hi)))
    return PC_ENOMEM;
  for (size_t k = 0; k < n; k++) {
    /* The smallest x with at least a fraction p of the values <= x is the value of rank
     * t = ceil(p * total); then which of the three parts holds that rank. */
    uint64_t t = (uint64_t)ceil(levels[k] * (double)total);
    t = t ? t : 1;
    if (total == 0 || t <= zeros)
      out[k] = 0;
    else if (t > zeros + finite)
      out[k] = INFINITY;
    else
      out[k] = pc_qhist_rank_edge(pdf, t - zeros, finite);
  }
  gsl_histogram_pdf_free(pdf);
  return PC_OK;
}
