/* The tolerance set's record (tol_record.h). */
#include "tol_record.h"

#include "sha256.h"

#include <stdio.h>  /* snprintf */
#include <stdlib.h> /* malloc, realloc, free */
#include <string.h> /* strlen */

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
  t->files = NULL;
  t->nfiles = 0;
  t->source[0] = '\0';
  t->hash = FNV_OFFSET;
  fnv_bytes(&t->hash, builtin, sizeof builtin - 1);
  fnv_layer_end(&t->hash, sizeof builtin - 1);
  append(t, "", builtin);
}

void pc_cli_tols_free(pc_cli_tols *t) {
  for (size_t i = 0; i < t->nfiles; i++)
    free(t->files[i]);
  free(t->files);
  t->files = NULL;
  t->nfiles = 0;
}

/* "PATH sha256:HEX" of the bytes loaded from path, into the files. PC_ENOMEM. */
static int add_file(pc_cli_tols *t, const char *path, const char *text, size_t len) {
  char hex[65];
  size_t n = strlen(path) + sizeof " sha256:" + 64;
  char **files = realloc(t->files, (t->nfiles + 1) * sizeof *files);
  if (!files)
    return PC_ENOMEM;
  t->files = files;
  if (!(files[t->nfiles] = malloc(n)))
    return PC_ENOMEM;
  pc_cli_sha256_hex(text, len, hex);
  snprintf(files[t->nfiles++], n, "%s sha256:%s", path, hex);
  return PC_OK;
}

int pc_cli_tols_load(pc_cli_tols *t, pc_tolset *tols, const char *name, const char *path,
                     pc_error *err) {
  char *text = NULL;
  size_t len = 0;
  int rc = pc_tolset_read_file(path, &text, &len, err);
  if (rc == PC_OK)
    rc = pc_tolset_load_string(tols, path, text, len, err);
  if (rc == PC_OK && add_file(t, path, text, len) < 0) {
    snprintf(err->message, sizeof err->message, "out of memory");
    rc = err->code = PC_ENOMEM;
  }
  if (rc == PC_OK) {
    fnv_bytes(&t->hash, text, len);
    fnv_layer_end(&t->hash, len);
    append(t, " + ", name);
  }
  free(text);
  return rc;
}

pc_tol_record pc_cli_tols_record(const pc_cli_tols *t) {
  return (pc_tol_record){t->source, t->digest};
}
