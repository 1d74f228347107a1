/* Byte strings for plans and their results (wire.h). */
#include "wire.h"

#include <stdlib.h> /* malloc, realloc */
#include <string.h> /* memcpy, memset, strlen, memchr */

void pc_wbuf_put(pc_wbuf *w, const void *bytes, size_t n) {
  if (w->nomem || n == 0)
    return;
  if (n > w->cap - w->n) {
    size_t cap = w->cap ? w->cap : 4096;
    while (cap - w->n < n && cap <= SIZE_MAX / 2)
      cap *= 2;
    unsigned char *p = cap - w->n >= n ? realloc(w->p, cap) : NULL;
    if (!p) {
      w->nomem = true;
      return;
    }
    w->p = p;
    w->cap = cap;
  }
  memcpy(w->p + w->n, bytes, n);
  w->n += n;
}

void pc_wbuf_u64(pc_wbuf *w, uint64_t v) {
  pc_wbuf_put(w, &v, sizeof v);
}

void pc_wbuf_str(pc_wbuf *w, const char *s) {
  unsigned char present = s != NULL;
  pc_wbuf_put(w, &present, 1);
  if (!s)
    return;
  size_t n = strlen(s);
  pc_wbuf_u64(w, n);
  pc_wbuf_put(w, s, n);
}

const unsigned char *pc_rbuf_skip(pc_rbuf *r, size_t n) {
  if (r->bad || n > r->n - r->at) {
    r->bad = true;
    return NULL;
  }
  const unsigned char *at = r->p + r->at;
  r->at += n;
  return at;
}

void pc_rbuf_get(pc_rbuf *r, void *out, size_t n) {
  const unsigned char *at = pc_rbuf_skip(r, n);
  if (at)
    memcpy(out, at, n);
  else
    memset(out, 0, n);
}

uint64_t pc_rbuf_u64(pc_rbuf *r) {
  uint64_t v;
  pc_rbuf_get(r, &v, sizeof v);
  return v;
}

bool pc_rbuf_str(pc_rbuf *r, char **out) {
  unsigned char present = 0;
  *out = NULL;
  pc_rbuf_get(r, &present, 1);
  if (!present)
    return true;
  uint64_t n = pc_rbuf_u64(r);
  const unsigned char *at = n < SIZE_MAX ? pc_rbuf_skip(r, (size_t)n) : NULL;
  if (!at || memchr(at, '\0', (size_t)n)) {
    r->bad = true;
    return true;
  }
  if (!(*out = malloc((size_t)n + 1)))
    return false;
  memcpy(*out, at, (size_t)n);
  (*out)[n] = '\0';
  return true;
}
