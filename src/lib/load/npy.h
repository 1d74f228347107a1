/* The .npy header (numpy's format, versions 1.0, 2.0 and 3.0), shared by the npy format and
 * the members of npz archives: "\x93NUMPY", two version bytes, the dict's length (u16 in 1.0,
 * u32 after), then a Python dict literal with 'descr', 'fortran_order' and 'shape'.
 * Internal to src/lib/load. */
#ifndef PC_NPY_H
#define PC_NPY_H

#include "flat.h"

enum {
  PC_NPY_PREFIX = 12,         /* bytes that always hold the magic, version and dict length */
  PC_NPY_HEADER_MAX = 1 << 20 /* a longer header is refused before it is read */
};

typedef struct pc_npy_header {
  uint64_t data_at; /* bytes before the data: magic, version, length, dict */
  char descr[32];   /* e.g. "<f4"; "" for a structured (list) descr */
  bool fortran;
  int rank;
  uint64_t dims[PC_MAX_RANK];
} pc_npy_header;

/** True when b (n bytes) starts with the npy magic. */
bool pc_npy_magic(const unsigned char *b, size_t n);

/** From the first min(n, PC_NPY_PREFIX) bytes b: the bytes of the whole header (prefix and dict)
 * in *total, at least PC_NPY_PREFIX and at most PC_NPY_HEADER_MAX + PC_NPY_PREFIX. NULL when it is
 * one, else why not. */
const char *pc_npy_prefix(const unsigned char *b, size_t n, uint64_t *total);

/** Parses the whole header b (`total` bytes, as pc_npy_prefix gave). NULL when it is one, else
 * why not (in why, or a static string). */
const char *pc_npy_parse(const unsigned char *b, uint64_t total, pc_npy_header *h, char *why,
                         size_t size);

/** Sets d's kind, dtypes, byte order, shape and a's Fortran order from h, for data of
 * `available` bytes after the header: a dtype that is not numeric is skipped, data shorter
 * than dtype and shape need is an error. PC_ENOMEM only. */
int pc_npy_describe(pc_file *f, pc_dataset *d, pc_flat_array *a, const pc_npy_header *h,
                    uint64_t available);

#endif
