/* Byte strings for plans and their results (plan.c): a growing buffer to write and a bounded
 * cursor to read, in the machine's own byte order, since every process of a run is the same
 * build on the same architecture (plan.h). A read past the end, or an allocation that fails,
 * is remembered and reported once at the end, so that callers need not check each step.
 * Internal to the library. */
#ifndef PC_WIRE_H
#define PC_WIRE_H

#include <stdbool.h> /* bool */
#include <stddef.h>  /* size_t */
#include <stdint.h>  /* uint64_t */

typedef struct pc_wbuf {
  unsigned char *p;
  size_t n, cap;
  bool nomem; /* an append failed: p holds what came before it */
} pc_wbuf;

void pc_wbuf_put(pc_wbuf *w, const void *bytes, size_t n);
void pc_wbuf_u64(pc_wbuf *w, uint64_t v);
/** A string or NULL: a presence byte, then the length and the bytes. */
void pc_wbuf_str(pc_wbuf *w, const char *s);

typedef struct pc_rbuf {
  const unsigned char *p;
  size_t n, at;
  bool bad; /* a read went past the end, or a string was malformed */
} pc_rbuf;

/** Copy n bytes into out (zeros once the buffer is bad). */
void pc_rbuf_get(pc_rbuf *r, void *out, size_t n);
uint64_t pc_rbuf_u64(pc_rbuf *r);
/** A string written by pc_wbuf_str, malloc'd (*out NULL for a NULL string); false when out of
 * memory (r->bad when malformed). */
bool pc_rbuf_str(pc_rbuf *r, char **out);
/** Where the next n bytes start, skipping them; NULL (and r->bad) when fewer are left. */
const unsigned char *pc_rbuf_skip(pc_rbuf *r, size_t n);

#endif
