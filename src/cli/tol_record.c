/* The tolerance set's record (tol_record.h). */
#include "tol_record.h"

#include <errno.h>  /* errno */
#include <stdio.h>  /* fopen, fread, snprintf */
#include <string.h> /* strlen, strerror */

#define FNV_OFFSET 0xcbf29ce484222325ull
#define FNV_PRIME 0x100000001b3ull

static void fnv_bytes(uint64_t *h, const void *bytes, size_t n) {
  const unsigned char *p = bytes;
  for (size_t i = 0; i < n; i++)
    *h = (*h ^ p[i]) * FNV_PRIME;
}

/* A layer's bytes with their length after them, so that two layers never hash as one. */
static void fnv_layer_end(uint64_t *h, uint64_t len) {
  unsigned char le[8];
  for (int i = 0; i < 8; i++)
    le[i] = (unsigned char)(len >> (8 * i));
  fnv_bytes(h, le, sizeof le);
}

/* Adds a layer's name to the source, and the hash so far to the digest. */
static void append(pc_cli_tols *t, const char *sep, const char *name) {
  size_t used = strlen(t->source);
  snprintf(t->source + used, sizeof t->source - used, "%s%s", sep, name);
  snprintf(t->digest, sizeof t->digest, "fnv1a64:%016llx", (unsigned long long)t->hash);
}

void pc_cli_tols_init(pc_cli_tols *t) {
  static const char builtin[] = "built-in defaults of paritycheck " PARITYCHECK_VERSION;
  t->source[0] = '\0';
  t->hash = FNV_OFFSET;
  fnv_bytes(&t->hash, builtin, sizeof builtin - 1);
  fnv_layer_end(&t->hash, sizeof builtin - 1);
  append(t, "", builtin);
}

int pc_cli_tols_add(pc_cli_tols *t, const char *name, const char *path, pc_error *err) {
  unsigned char buf[65536];
  uint64_t len = 0;
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(err->message, sizeof err->message, "%s: %s", path, strerror(errno));
    err->code = PC_EIO;
    return PC_EIO;
  }
  for (size_t n; (n = fread(buf, 1, sizeof buf, f)) > 0; len += n)
    fnv_bytes(&t->hash, buf, n);
  int bad = ferror(f);
  fclose(f);
  if (bad) {
    snprintf(err->message, sizeof err->message, "%s: cannot read", path);
    err->code = PC_EIO;
    return PC_EIO;
  }
  fnv_layer_end(&t->hash, len);
  append(t, " + ", name);
  return PC_OK;
}

pc_tol_record pc_cli_tols_record(const pc_cli_tols *t) {
  return (pc_tol_record){t->source, t->digest};
}
