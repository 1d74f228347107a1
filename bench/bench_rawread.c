/* The benchmark's baseline: read every dataset of the given HDF5 files with hyperslabs into one
 * reused 4 MiB buffer, in the dataset's own file type (no conversion), and do nothing else.
 * Usage: pc_rawread FILE... ; prints the bytes read. Not part of the library. */
#include <hdf5.h>

#include <stdio.h>  /* printf */
#include <stdlib.h> /* malloc */

enum { BUF_BYTES = 4 << 20 };

static unsigned char *buf;
static unsigned long long total;

/* Reads dataset `name` of `loc` in row blocks that fit the buffer (1-D or row-major N-D). */
static int read_dataset(hid_t loc, const char *name) {
  hid_t d = H5Dopen2(loc, name, H5P_DEFAULT), type = H5Dget_type(d), space = H5Dget_space(d);
  int rank = H5Sget_simple_extent_ndims(space);
  hsize_t dims[H5S_MAX_RANK], start[H5S_MAX_RANK] = {0}, count[H5S_MAX_RANK];
  H5Sget_simple_extent_dims(space, dims, NULL);
  size_t esize = H5Tget_size(type), row = esize;
  for (int i = 1; i < rank; i++)
    row *= dims[i];
  hsize_t rows_per = rank > 0 && row <= BUF_BYTES ? BUF_BYTES / row : 1;
  int rc = 0;
  for (hsize_t r = 0; rank > 0 && r < dims[0] && rc == 0; r += rows_per) {
    for (int i = 0; i < rank; i++)
      count[i] = i ? dims[i] : (dims[0] - r < rows_per ? dims[0] - r : rows_per);
    start[0] = r;
    hsize_t n = count[0] * row / esize;
    hid_t mem = H5Screate_simple(1, &n, NULL);
    H5Sselect_hyperslab(space, H5S_SELECT_SET, start, NULL, count, NULL);
    rc = H5Dread(d, type, mem, space, H5P_DEFAULT, buf) < 0;
    total += n * esize;
    H5Sclose(mem);
  }
  H5Sclose(space);
  H5Tclose(type);
  H5Dclose(d);
  return rc;
}

static herr_t visit(hid_t obj, const char *name, const H5O_info_t *info, void *data) {
  (void)data;
  return info->type == H5O_TYPE_DATASET ? read_dataset(obj, name) : 0;
}

int main(int argc, char **argv) {
  buf = malloc(BUF_BYTES);
  for (int i = 1; buf && i < argc; i++) {
    hid_t f = H5Fopen(argv[i], H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0 || H5Ovisit2(f, H5_INDEX_NAME, H5_ITER_INC, visit, NULL, H5O_INFO_BASIC) < 0)
      return 2;
    H5Fclose(f);
  }
  printf("%llu bytes read\n", total);
  free(buf);
  return 0;
}
