/* HDF5's error stack as text for our messages (h5.h). A file of its own so that calls go one
 * way: h5_file.c calls the walk, and both call this. */
#include "h5.h"

#include <stdio.h> /* snprintf */

typedef struct pc_h5_err_walk {
  char *buf;
  size_t size;
} pc_h5_err_walk;

/* Keeps the deepest entry of the stack: it names the real cause ("file signature not found"),
 * where the top one only repeats the API call that failed. */
static herr_t pc_h5_walk_cb(unsigned n, const H5E_error2_t *e, void *data) {
  pc_h5_err_walk *w = data;
  (void)n;
  if (e->desc && e->desc[0])
    snprintf(w->buf, w->size, "%s", e->desc);
  return 0;
}

const char *pc_h5_error(char *buf, size_t size) {
  pc_h5_err_walk w = {buf, size};
  snprintf(buf, size, "HDF5 error");
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, pc_h5_walk_cb, &w);
  H5Eclear2(H5E_DEFAULT);
  return buf;
}
