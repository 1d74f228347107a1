/* Tolerance sets (include/paritycheck/tolerance.h): their lifetime, the files and strings that
 * join them (each parsed whole by tol_parse.c before it changes the set), and the reading of a
 * file's bytes under a size limit. */
#include "tol_parse.h"

#include "pc_internal.h" /* pc_error_set */

#include <errno.h>  /* errno, EFBIG */
#include <fcntl.h>  /* open, fcntl, O_NONBLOCK */
#include <stdio.h>  /* FILE, fdopen, fread, fclose */
#include <stdlib.h> /* calloc, realloc, free */
#include <string.h> /* memcpy, memmove, memset, strerror */
#include <unistd.h> /* close */

/* tolerances/default.yaml as it was at build time (cmake/embed.cmake). */
extern const char pc_builtin_profile[];
extern const size_t pc_builtin_profile_len;

/* Limits that keep a broken or hostile file from exhausting memory or time. */
static const size_t TOL_MAX_FILE_BYTES = (size_t)16 << 20; /* 16 MiB */
static const size_t TOL_READ_CHUNK = 4096; /* first buffer size when reading a file */

static const char TOL_BUILTIN_NAME[] = "<builtin>";
static const char TOL_STRING_NAME[] = "<string>";

/* ---- Sets -------------------------------------------------------------------------------- */

/* Puts k layers into dst (which has room), at the front or after its n layers. */
static void insert_layers(tol_layer *dst, size_t *n, const tol_layer *src, size_t k, bool front) {
  if (k == 0)
    return;
  if (front)
    memmove(dst + k, dst, *n * sizeof *dst);
  memcpy(front ? dst : dst + *n, src, k * sizeof *dst);
  *n += k;
}

/* Moves the parsed file into the set; on failure the set's contents are unchanged (only its
 * capacity may have grown). */
static int commit(pc_tolset *set, tol_file *file, bool front, pc_error *err) {
  tol_layer *defaults = realloc(set->defaults, (set->n_defaults + 1) * sizeof *defaults);
  if (!defaults)
    return pc_error_set(err, PC_ENOMEM, "out of memory");
  set->defaults = defaults;
  if (file->n_rules) {
    tol_layer *rules = realloc(set->rules, (set->n_rules + file->n_rules) * sizeof *rules);
    if (!rules)
      return pc_error_set(err, PC_ENOMEM, "out of memory");
    set->rules = rules;
  }
  insert_layers(set->defaults, &set->n_defaults, &file->defaults, 1, front);
  insert_layers(set->rules, &set->n_rules, file->rules, file->n_rules, front);
  free(file->rules);
  memset(file, 0, sizeof *file);
  return PC_OK;
}

/* Parses one file's text into the set, at its front (the builtin) or after what it holds. */
static int load_text(pc_tolset *set, const char *name, const char *text, size_t len, bool front,
                     pc_error *err) {
  if (!set || (!text && len))
    return pc_error_set(err, PC_EUSAGE, "pc_tolset_load: no set or no text");
  tol_file file = {0};
  int rc = pc_tol_parse(&file, name ? name : TOL_STRING_NAME, text ? text : "", len,
                        TOL_MAX_RULES - set->n_rules, err);
  if (rc == PC_OK)
    rc = commit(set, &file, front, err);
  pc_tol_file_clear(&file);
  return rc;
}

pc_tolset *pc_tolset_new(void) {
  return calloc(1, sizeof(pc_tolset));
}

void pc_tolset_free(pc_tolset *set) {
  if (!set)
    return;
  for (size_t i = 0; i < set->n_rules; i++)
    pc_tol_layer_clear(&set->rules[i]);
  free(set->rules);
  free(set->defaults);
  free(set);
}

/* The builtin always comes first, whenever it is loaded; loading it again changes nothing. */
int pc_tolset_load_builtin(pc_tolset *set, pc_error *err) {
  if (set && set->has_builtin)
    return PC_OK;
  int rc = load_text(set, TOL_BUILTIN_NAME, pc_builtin_profile, pc_builtin_profile_len, true, err);
  if (rc == PC_OK)
    set->has_builtin = true;
  return rc;
}

int pc_tolset_load_string(pc_tolset *set, const char *name, const char *text, size_t len,
                          pc_error *err) {
  return load_text(set, name, text, len, false, err);
}

/* ---- Files ------------------------------------------------------------------------------- */

/* Grows buf toward the size limit; refuses once the limit is passed. */
static int grow_buffer(char **buf, size_t *cap, const char *path, pc_error *err) {
  if (*cap > TOL_MAX_FILE_BYTES)
    return pc_error_set(err, PC_EIO, "%s: %s (at most %zu bytes)", path, strerror(EFBIG),
                        TOL_MAX_FILE_BYTES);
  size_t want = *cap ? 2 * *cap : TOL_READ_CHUNK;
  if (want > TOL_MAX_FILE_BYTES + 1)
    want = TOL_MAX_FILE_BYTES + 1; /* one byte past the limit tells a too-large file */
  char *grown = realloc(*buf, want);
  if (!grown)
    return pc_error_set(err, PC_ENOMEM, "%s: out of memory", path);
  *buf = grown;
  *cap = want;
  return PC_OK;
}

static int read_stream(FILE *f, const char *path, char **buf, size_t *len, pc_error *err) {
  size_t cap = 0;
  int rc = PC_OK;
  for (;;) {
    if (*len == cap && (rc = grow_buffer(buf, &cap, path, err)))
      return rc;
    size_t want = cap - *len;
    size_t got = fread(*buf + *len, 1, want, f);
    *len += got;
    if (got < want)
      break;
  }
  if (ferror(f))
    return pc_error_set(err, PC_EIO, "%s: %s", path, strerror(errno));
  return PC_OK;
}

/* Opens for reading without waiting for a writer: a FIFO that nobody writes to reads as empty
 * instead of blocking forever, while a pipe with a writer (a shell's <(...)) is read as usual. */
static FILE *open_no_wait(const char *path) {
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    return NULL;
  int flags = fcntl(fd, F_GETFL);
  FILE *f = flags >= 0 && fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) == 0 ? fdopen(fd, "rb") : NULL;
  if (!f) {
    int saved = errno;
    close(fd);
    errno = saved;
  }
  return f;
}

int pc_tolset_read_file(const char *path, char **text, size_t *len, pc_error *err) {
  *text = NULL;
  *len = 0;
  if (!path)
    return pc_error_set(err, PC_EUSAGE, "pc_tolset_read_file: no path");
  FILE *f = open_no_wait(path);
  if (!f)
    return pc_error_set(err, PC_EIO, "%s: %s", path, strerror(errno));
  int rc = read_stream(f, path, text, len, err);
  fclose(f);
  if (rc < 0) {
    free(*text);
    *text = NULL;
    *len = 0;
  }
  return rc;
}

int pc_tolset_load_file(pc_tolset *set, const char *path, pc_error *err) {
  if (!set || !path)
    return pc_error_set(err, PC_EUSAGE, "pc_tolset_load_file: no set or no path");
  char *buf = NULL;
  size_t len = 0;
  int rc = pc_tolset_read_file(path, &buf, &len, err);
  if (rc == PC_OK)
    rc = load_text(set, path, buf, len, false, err);
  free(buf);
  return rc;
}
