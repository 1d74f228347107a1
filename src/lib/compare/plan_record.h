/* The byte layout of plans and their results (plan.h), shared by the side that makes and merges
 * them (plan.c) and the side that runs a share (plan_run.c). Internal to the library.
 *
 * A plan: "PCPLAN01", the layout signature, nprocs, block, quantiles, the number of works, then
 * each work: tensor, proc, piece, npieces, and the strings path, file, a_path, b_path.
 *
 * Results: "PCRSLT01", the layout signature, proc, then records to the end: tensor, piece,
 * npieces, the tensor's figures (pc_record_put_tensor) and, for a part of a tensor cut into
 * several (npieces > 1), its blocks' figures in block order and its quantile histograms. */
#ifndef PC_PLAN_RECORD_H
#define PC_PLAN_RECORD_H

#include "qhist.h"
#include "wire.h"

#include <paritycheck/result.h>

#include <stdbool.h> /* bool */

#define PC_PLAN_MAGIC "PCPLAN01"
#define PC_RESULTS_MAGIC "PCRSLT01"

/** The 8-byte magic, then the sizes of the structures copied as bytes: a process of another
 * build or architecture is refused rather than misread. */
void pc_record_put_header(pc_wbuf *w, const char *magic);

/** Reads and checks what pc_record_put_header wrote; false when it differs. */
bool pc_record_check_header(pc_rbuf *r, const char *magic);

/** What the data step sets (comparator.h): the verdict, message, note, tolerance, figures,
 * metrics and reasons. */
void pc_record_put_tensor(pc_wbuf *w, const pc_tensor *t);

/** Reads what pc_record_put_tensor wrote into t, replacing t's message and note; false when out
 * of memory (r->bad when malformed). */
bool pc_record_get_tensor(pc_rbuf *r, pc_tensor *t);

/** One pc_stats as pc_record_put_tensor's bytes hold it, its bools read as 0 or 1 whatever
 * byte a damaged record holds. */
void pc_record_get_stats(pc_rbuf *r, pc_stats *s);

/** The histogram's buckets in use. */
void pc_record_put_hist(pc_wbuf *w, const pc_qhist *h);

/** Adds a histogram that pc_record_put_hist wrote to h (NULL: skips it); r->bad when malformed. */
void pc_record_merge_hist(pc_rbuf *r, pc_qhist *h);

#endif
