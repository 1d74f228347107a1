/* Allocation-failure injection for the test build paritycheck_allocfail (tests/faults/
 * CMakeLists.txt; docs/robustness.md, "Faults"). That binary is the CLI and the library linked
 * with -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=strdup,--wrap=strndup, so that every
 * allocation paritycheck's own code makes comes here; jansson's allocations come here too, through
 * json_set_alloc_funcs. HDF5, libyaml, GSL and libc's internal allocations (fopen, realpath) are
 * not counted: they are linked from shared libraries that --wrap does not reach. Nor are
 * jansson's allocations inside json_loadf and json_loadb (--wrap=json_loadf,json_loadb): its
 * parser turns a failed allocation into a syntax error ("invalid token"), which no caller can
 * tell from a bad file.
 *
 *   PC_FAIL_ALLOC=N       the Nth counted allocation (1-based) returns NULL; later ones succeed
 *   PC_FAIL_ALLOC_STACK=1 also print the failed allocation's stack on stderr (ASan builds only)
 *   PC_ALLOC_COUNT=FILE   at exit, append "PID COUNT FAILED" to FILE: how many allocations this
 *                         process counted, and 1 if it failed one
 *
 * The count is inherited across fork(), so the comparison's child (src/cli/isolate.c) goes on
 * counting from the parent's allocations; the parent makes none while it supervises, so one N
 * names one allocation of the whole run. With -j 1 the order is the same on every run. */
#define _POSIX_C_SOURCE 200809L /* strnlen */
#include <jansson.h>

#include <errno.h>     /* errno, ENOMEM */
#include <stdatomic.h> /* atomic_fetch_add */
#include <stdio.h>     /* fopen, fprintf */
#include <stdlib.h>    /* getenv, strtoull */
#include <string.h>    /* strlen, memcpy */
#include <unistd.h>    /* getpid */

void *__real_malloc(size_t size);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t size);
void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t size);
char *__wrap_strdup(const char *s);
char *__wrap_strndup(const char *s, size_t n);
json_t *__real_json_loadf(FILE *f, size_t flags, json_error_t *error);
json_t *__wrap_json_loadf(FILE *f, size_t flags, json_error_t *error);
json_t *__real_json_loadb(const char *buffer, size_t len, size_t flags, json_error_t *error);
json_t *__wrap_json_loadb(const char *buffer, size_t len, size_t flags, json_error_t *error);

/* The sanitizer runtime's, where there is one (a debugging aid). */
void __sanitizer_print_stack_trace(void) __attribute__((weak));

static atomic_ullong count;
static atomic_int failed;
static unsigned long long fail_at; /* 0: never */
static _Thread_local int paused;   /* inside json_loadf: neither counted nor failed */

/* True when this allocation is the one to fail; it then sets errno as malloc does. */
static int should_fail(void) {
  if (paused)
    return 0;
  unsigned long long n = atomic_fetch_add(&count, 1) + 1;
  if (fail_at == 0 || n != fail_at)
    return 0;
  atomic_store(&failed, 1);
  if (__sanitizer_print_stack_trace && getenv("PC_FAIL_ALLOC_STACK"))
    __sanitizer_print_stack_trace();
  errno = ENOMEM;
  return 1;
}

void *__wrap_malloc(size_t size) {
  return should_fail() ? NULL : __real_malloc(size);
}

void *__wrap_calloc(size_t n, size_t size) {
  return should_fail() ? NULL : __real_calloc(n, size);
}

void *__wrap_realloc(void *p, size_t size) {
  return should_fail() ? NULL : __real_realloc(p, size);
}

char *__wrap_strdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *copy = __wrap_malloc(n);
  return copy ? memcpy(copy, s, n) : NULL;
}

char *__wrap_strndup(const char *s, size_t max) {
  size_t n = strnlen(s, max);
  char *copy = __wrap_malloc(n + 1);
  if (!copy)
    return NULL;
  memcpy(copy, s, n);
  copy[n] = '\0';
  return copy;
}

json_t *__wrap_json_loadf(FILE *f, size_t flags, json_error_t *error) {
  paused++;
  json_t *root = __real_json_loadf(f, flags, error);
  paused--;
  return root;
}

/* The safetensors header's parser, paused for the same reason as json_loadf's. */
json_t *__wrap_json_loadb(const char *buffer, size_t len, size_t flags, json_error_t *error) {
  paused++;
  json_t *root = __real_json_loadb(buffer, len, flags, error);
  paused--;
  return root;
}

static void json_free(void *p) {
  free(p);
}

static void report_count(void) {
  const char *path = getenv("PC_ALLOC_COUNT");
  FILE *f = path && *path ? fopen(path, "a") : NULL;
  if (!f)
    return;
  fprintf(f, "%ld %llu %d\n", (long)getpid(), (unsigned long long)atomic_load(&count),
          atomic_load(&failed));
  fclose(f);
}

__attribute__((constructor)) static void alloc_fail_init(void) {
  const char *at = getenv("PC_FAIL_ALLOC");
  fail_at = at ? strtoull(at, NULL, 10) : 0;
  json_set_alloc_funcs(__wrap_malloc, json_free);
  atexit(report_count);
}
