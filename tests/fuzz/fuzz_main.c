/* A main() for the libFuzzer targets in builds without libFuzzer, so that their inputs run as
 * regression tests in every build (plain, ASan+UBSan, valgrind):
 *
 *   fuzz_TARGET [--random N:LEN] INPUT...
 *
 * Each INPUT is a file, or a directory whose regular files run in name order (the committed
 * seeds and crash reproducers of tests/fuzz/). --random also runs N inputs of up to LEN bytes
 * from a fixed-seed generator, the same on every machine. Exits 1 when nothing ran. */
#include <dirent.h>   /* scandir, alphasort */
#include <errno.h>    /* errno */
#include <stdio.h>    /* fopen, fread, fprintf */
#include <stdlib.h>   /* malloc, free, strtoull */
#include <string.h>   /* strcmp, strerror */
#include <sys/stat.h> /* stat */

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

static int run_file(const char *path) {
  FILE *f = fopen(path, "rb");
  struct stat st;
  if (!f || fstat(fileno(f), &st) != 0) {
    fprintf(stderr, "%s: %s\n", path, strerror(errno));
    exit(1);
  }
  size_t size = (size_t)st.st_size;
  unsigned char *data = malloc(size ? size : 1);
  if (!data || fread(data, 1, size, f) != size) {
    fprintf(stderr, "%s: cannot read\n", path);
    exit(1);
  }
  fclose(f);
  LLVMFuzzerTestOneInput(data, size);
  free(data);
  return 1;
}

static int select_any(const struct dirent *e) {
  return e->d_name[0] != '.';
}

static int run_path(const char *path) {
  struct stat st;
  if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
    return run_file(path);
  struct dirent **names = NULL;
  int n = scandir(path, &names, select_any, alphasort), ran = 0;
  for (int i = 0; i < n; i++) {
    char child[4096];
    snprintf(child, sizeof child, "%s/%s", path, names[i]->d_name);
    if (stat(child, &st) == 0 && S_ISREG(st.st_mode))
      ran += run_file(child);
    free(names[i]);
  }
  free(names);
  return ran;
}

/* xorshift64*: a fixed sequence, so that a failure repeats on every machine. */
static unsigned long long next_random(unsigned long long *state) {
  *state ^= *state >> 12;
  *state ^= *state << 25;
  *state ^= *state >> 27;
  return *state * 2685821657736338717ull;
}

static int run_random(unsigned long long n, size_t max_len) {
  unsigned long long state = 88172645463325252ull; /* Marsaglia's example seed */
  unsigned char *data = malloc(max_len ? max_len : 1);
  if (!data)
    exit(1);
  for (unsigned long long i = 0; i < n; i++) {
    size_t len = max_len ? (size_t)(next_random(&state) % (max_len + 1)) : 0;
    for (size_t j = 0; j < len; j++)
      data[j] = (unsigned char)(next_random(&state) >> 56);
    LLVMFuzzerTestOneInput(data, len);
  }
  free(data);
  return (int)n;
}

int main(int argc, char **argv) {
  long ran = 0;
  for (int i = 1; i < argc; i++) {
    unsigned long long n, len;
    if (strcmp(argv[i], "--random") == 0 && i + 1 < argc &&
        sscanf(argv[i + 1], "%llu:%llu", &n, &len) == 2) {
      ran += run_random(n, (size_t)len);
      i++;
    } else {
      ran += run_path(argv[i]);
    }
  }
  printf("%ld inputs, no failure\n", ran);
  return ran > 0 ? 0 : 1;
}
