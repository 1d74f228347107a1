/* The HDF5 loader: files written here with the HDF5 C API (independently of the loader), then
 * walked, classified and read back in blocks. */
#include "loader.h"

#include <hdf5.h>

#include <math.h>   /* ldexp */
#include <stdio.h>  /* snprintf, fopen */
#include <stdlib.h> /* mkdtemp */
#include <string.h> /* strstr */
#include <unistd.h> /* pread, rmdir, unlink */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

static char dir[64];

static const char *tmp_path(const char *name) {
  static char buf[4][128];
  static int next;
  char *p = buf[next++ % 4];
  snprintf(p, sizeof buf[0], "%s/%s", dir, name);
  return p;
}

/* An IEEE-style float type of `bytes` bytes with the given fields, little endian. */
static hid_t custom_float(size_t bytes, size_t spos, size_t epos, size_t esize, size_t msize,
                          size_t bias) {
  hid_t t = H5Tcopy(H5T_IEEE_F32LE);
  H5Tset_fields(t, spos, epos, esize, 0, msize);
  H5Tset_precision(t, 8 * bytes);
  H5Tset_size(t, bytes);
  H5Tset_ebias(t, bias);
  return t;
}

static void write_1d(hid_t loc, const char *name, hid_t ftype, hid_t mtype, hsize_t n,
                     const void *data) {
  hid_t space = H5Screate_simple(1, &n, NULL);
  hid_t d = H5Dcreate2(loc, name, ftype, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  assert_true(d >= 0);
  if (data)
    assert_true(H5Dwrite(d, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0);
  H5Dclose(d);
  H5Sclose(space);
}

/* Two elements of a custom float type, written as raw bits; closes the type. */
static void write_custom(hid_t f, const char *name, hid_t type, const void *bits) {
  write_1d(f, name, type, type, 2, bits);
  H5Tclose(type);
}

static void set_string_attr(hid_t loc, const char *obj, const char *name, const char *value) {
  hid_t d = H5Dopen2(loc, obj, H5P_DEFAULT);
  hid_t t = H5Tcopy(H5T_C_S1);
  H5Tset_size(t, H5T_VARIABLE);
  hid_t s = H5Screate(H5S_SCALAR);
  hid_t a = H5Acreate2(d, name, t, s, H5P_DEFAULT, H5P_DEFAULT);
  H5Awrite(a, t, &value);
  H5Aclose(a);
  H5Sclose(s);
  H5Tclose(t);
  H5Dclose(d);
}

/* Every dtype kind the loader recognises, plus one it must skip. */
static void make_dtypes(const char *path) {
  hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  const uint16_t bf16[] = {0x3F80, 0xC000}; /* 1.0, -2.0 */
  const uint16_t f16[] = {0x3C00, 0x7BFF};  /* 1.0, 65504 */
  const uint8_t e4m3[] = {0x38, 0x7E};      /* 1.0, 448 */
  const uint8_t e5m2[] = {0x3C, 0x7B};      /* 1.0, 57344 */
  const float f32[] = {1.5f, -0.25f};
  const int16_t i16[] = {-32768, 32767};
  const uint8_t f24[6] = {0};
  write_custom(f, "bf16", custom_float(2, 15, 7, 8, 7, 127), bf16);
  write_custom(f, "f16", custom_float(2, 15, 10, 5, 10, 15), f16);
  write_custom(f, "e4m3", custom_float(1, 7, 3, 4, 3, 7), e4m3);
  write_custom(f, "e5m2", custom_float(1, 7, 2, 5, 2, 15), e5m2);
  write_custom(f, "f24", custom_float(3, 23, 16, 7, 16, 63), f24);
  write_1d(f, "f32be", H5T_IEEE_F32BE, H5T_NATIVE_FLOAT, 2, f32);
  write_1d(f, "i16be", H5T_STD_I16BE, H5T_NATIVE_INT16, 2, i16);
  write_1d(f, "tagged", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 2, f32);
  set_string_attr(f, "tagged", "dtype", "bfloat16");
  hid_t s = H5Tcopy(H5T_C_S1);
  H5Tset_size(s, 4);
  write_1d(f, "str", s, s, 2, "abcdefgh");
  H5Tclose(s);
  H5Fclose(f);
}

static const pc_dataset *find(const pc_file *f, const char *path) {
  const pc_dataset *d = pc_file_find(f, path);
  assert_non_null(d);
  return d;
}

/* Reads a whole float dataset through blocks of `block` elements into out. */
static size_t read_all(pc_file *f, const pc_dataset *d, size_t block, double *out) {
  pc_reader *r;
  pc_error err;
  assert_int_equal(pc_reader_open(&r, f, d, block, NULL, &err), PC_OK);
  size_t total = 0, n;
  do {
    assert_int_equal(pc_reader_next(r, &n, &err), PC_OK);
    assert_true(n <= block);
    memcpy(out + total, pc_reader_values(r), n * sizeof *out);
    total += n;
  } while (n);
  pc_reader_close(r);
  return total;
}

static void test_dtypes(void **state) {
  (void)state;
  const char *path = tmp_path("dtypes.h5");
  make_dtypes(path);
  pc_file *f;
  pc_error err;
  assert_int_equal(pc_file_open(&f, path, &err), PC_OK);
  assert_int_equal(find(f, "/bf16")->stored, PC_DTYPE_BFLOAT16);
  assert_int_equal(find(f, "/f16")->stored, PC_DTYPE_FLOAT16);
  assert_int_equal(find(f, "/e4m3")->stored, PC_DTYPE_FLOAT8_E4M3FN);
  assert_int_equal(find(f, "/e5m2")->stored, PC_DTYPE_FLOAT8_E5M2);
  assert_int_equal(find(f, "/f24")->kind, PC_KIND_SKIPPED);
  assert_int_equal(find(f, "/str")->kind, PC_KIND_SKIPPED);
  assert_non_null(strstr(find(f, "/str")->reason, "string"));
  const pc_dataset *be = find(f, "/f32be");
  assert_int_equal(be->stored, PC_DTYPE_FLOAT32);
  assert_true(be->swap);
  const pc_dataset *tagged = find(f, "/tagged");
  assert_int_equal(tagged->stored, PC_DTYPE_FLOAT32);
  assert_int_equal(tagged->logical, PC_DTYPE_BFLOAT16);

  double v[2];
  assert_int_equal(read_all(f, find(f, "/bf16"), 1, v), 2);
  assert_true(v[0] == 1.0 && v[1] == -2.0);
  read_all(f, find(f, "/f16"), 8, v);
  assert_true(v[0] == 1.0 && v[1] == 65504.0);
  read_all(f, find(f, "/e4m3"), 8, v);
  assert_true(v[0] == 1.0 && v[1] == 448.0);
  read_all(f, find(f, "/e5m2"), 8, v);
  assert_true(v[0] == 1.0 && v[1] == 57344.0);
  read_all(f, be, 8, v);
  assert_true(v[0] == 1.5 && v[1] == -0.25);

  pc_reader *r;
  size_t n;
  assert_int_equal(pc_reader_open(&r, f, find(f, "/i16be"), 8, NULL, &err), PC_OK);
  assert_int_equal(pc_reader_next(r, &n, &err), PC_OK);
  assert_int_equal(n, 2);
  assert_true(pc_reader_ints(r)[0] == -32768 && pc_reader_ints(r)[1] == 32767);
  pc_reader_close(r);
  pc_file_close(f);
  unlink(path);
}

/* A (5, 4, 3) tensor of 0..59 read in blocks of every size from 1 to 61 comes back in order. */
static void test_blocks(void **state) {
  (void)state;
  const char *path = tmp_path("blocks.h5");
  hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  hsize_t dims[3] = {5, 4, 3};
  double data[60];
  for (int i = 0; i < 60; i++)
    data[i] = i;
  hid_t s = H5Screate_simple(3, dims, NULL);
  hid_t d = H5Dcreate2(f, "t", H5T_IEEE_F64LE, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, data);
  H5Dclose(d);
  H5Sclose(s);
  s = H5Screate(H5S_SCALAR);
  d = H5Dcreate2(f, "scalar", H5T_IEEE_F64LE, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, &data[7]);
  H5Dclose(d);
  H5Sclose(s);
  write_1d(f, "empty", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 0, NULL);
  H5Fclose(f);

  pc_file *pf;
  pc_error err;
  assert_int_equal(pc_file_open(&pf, path, &err), PC_OK);
  const pc_dataset *t = find(pf, "/t");
  assert_int_equal(t->rank, 3);
  assert_int_equal(t->count, 60);
  for (size_t block = 1; block <= 61; block++) {
    double out[60] = {0};
    assert_int_equal(read_all(pf, t, block, out), 60);
    assert_memory_equal(out, data, sizeof data);
  }
  double one[1];
  assert_int_equal(find(pf, "/scalar")->rank, 0);
  assert_int_equal(read_all(pf, find(pf, "/scalar"), 4, one), 1);
  assert_true(one[0] == 7.0);
  assert_int_equal(find(pf, "/empty")->count, 0);
  assert_int_equal(read_all(pf, find(pf, "/empty"), 4, one), 0);
  pc_file_close(pf);
  unlink(path);
}

/* A (10, 1000) dataset in (4, 1000) chunks, read in blocks of about 1500 elements: blocks follow
 * the chunks (4 rows, 4000 elements), and a contiguous twin read `like` it is cut the same. */
static void test_chunk_aligned_blocks(void **state) {
  (void)state;
  const char *path = tmp_path("chunked.h5");
  hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  hsize_t dims[2] = {10, 1000}, chunk[2] = {4, 1000};
  static float data[10000];
  for (int i = 0; i < 10000; i++)
    data[i] = (float)i;
  hid_t s = H5Screate_simple(2, dims, NULL), dcpl = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_chunk(dcpl, 2, chunk);
  const char *names[2] = {"chunked", "plain"};
  hid_t plists[2] = {dcpl, H5P_DEFAULT};
  for (int i = 0; i < 2; i++) {
    hid_t d = H5Dcreate2(f, names[i], H5T_IEEE_F32LE, s, H5P_DEFAULT, plists[i], H5P_DEFAULT);
    H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data);
    H5Dclose(d);
  }
  H5Pclose(dcpl);
  H5Sclose(s);
  H5Fclose(f);

  pc_file *pf;
  pc_error err;
  pc_reader *rc, *rp;
  assert_int_equal(pc_file_open(&pf, path, &err), PC_OK);
  assert_int_equal(pc_reader_open(&rc, pf, find(pf, "/chunked"), 1500, NULL, &err), PC_OK);
  assert_int_equal(pc_reader_open(&rp, pf, find(pf, "/plain"), 1500, rc, &err), PC_OK);
  assert_int_equal(pc_reader_max_block(rc), 4000);
  assert_int_equal(pc_reader_max_block(rp), 4000);
  static float raw_c[4000], raw_p[4000];
  const size_t want[] = {4000, 4000, 2000, 0};
  size_t done = 0;
  for (int b = 0; b < 4; b++) {
    size_t nc, np;
    assert_int_equal(pc_reader_next_raw(rc, raw_c, &nc, &err), PC_OK);
    assert_int_equal(pc_reader_next_raw(rp, raw_p, &np, &err), PC_OK);
    assert_int_equal(nc, want[b]);
    assert_int_equal(np, want[b]);
    assert_memory_equal(raw_c, data + done, nc * sizeof(float));
    assert_memory_equal(raw_p, data + done, np * sizeof(float));
    done += nc;
  }
  pc_reader_close(rc);
  pc_reader_close(rp);
  pc_file_close(pf);
  unlink(path);
}

/* Reads the next span of a direct reader back with pread; returns its element count. */
static size_t read_span(pc_file *f, pc_reader *r, float *out) {
  uint64_t at = 0;
  size_t n = 0;
  assert_int_equal(pc_reader_next_span(r, &at, &n), PC_OK);
  if (n)
    assert_int_equal(pread(pc_file_fd(f), out, n * sizeof *out, (off_t)at),
                     (ssize_t)(n * sizeof *out));
  return n;
}

/* Contiguous, unfiltered, written data is direct, and its spans hold the bytes a block read
 * gives, for any block size, cut `like` a chunked twin too; chunked and never-written data are
 * read through HDF5. */
static void test_direct_spans(void **state) {
  (void)state;
  const char *path = tmp_path("direct.h5");
  hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  hsize_t dims[3] = {3, 4, 5}, chunk[3] = {2, 4, 5};
  static float data[60], got[60];
  for (int i = 0; i < 60; i++)
    data[i] = (float)i - 0.5f;
  hid_t s = H5Screate_simple(3, dims, NULL), dcpl = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_chunk(dcpl, 3, chunk);
  hid_t plain = H5Dcreate2(f, "plain", H5T_IEEE_F32LE, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  hid_t chunked = H5Dcreate2(f, "chunked", H5T_IEEE_F32LE, s, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  H5Dwrite(plain, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data);
  H5Dwrite(chunked, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data);
  H5Dclose(plain);
  H5Dclose(chunked);
  H5Pclose(dcpl);
  H5Sclose(s);
  write_1d(f, "unwritten", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 100, NULL);
  H5Fclose(f);

  pc_file *pf;
  pc_error err;
  pc_reader *r, *rc;
  assert_int_equal(pc_file_open(&pf, path, &err), PC_OK);
  assert_true(pc_file_fd(pf) >= 0);
  for (size_t block = 1; block <= 61; block++) {
    assert_int_equal(pc_reader_open(&rc, pf, find(pf, "/chunked"), block, NULL, &err), PC_OK);
    assert_false(pc_reader_direct(rc));
    assert_int_equal(pc_reader_open(&r, pf, find(pf, "/plain"), block, rc, &err), PC_OK);
    assert_true(pc_reader_direct(r));
    size_t total = 0, n, nc;
    static float raw_c[60];
    do {
      n = read_span(pf, r, got + total);
      assert_int_equal(pc_reader_next_raw(rc, raw_c, &nc, &err), PC_OK);
      assert_int_equal(n, nc);
      total += n;
    } while (n);
    assert_int_equal(total, 60);
    assert_memory_equal(got, data, sizeof data);
    pc_reader_close(r);
    pc_reader_close(rc);
  }
  assert_int_equal(pc_reader_open(&r, pf, find(pf, "/unwritten"), 8, NULL, &err), PC_OK);
  assert_false(pc_reader_direct(r));
  pc_reader_close(r);
  pc_file_close(pf);
  unlink(path);
}

/* A chunked float32 dataset of `rank` dims with fill value `fill`, where only the boxes listed
 * (start and extent, rank numbers each, nbox of them) are written, with value 7. */
static void write_partly(hid_t f, const char *name, int rank, const hsize_t *dims,
                         const hsize_t *chunk, const hsize_t *boxes, int nbox) {
  const float fill = 2.5f;
  static float sevens[4096];
  for (size_t i = 0; i < sizeof sevens / sizeof *sevens; i++)
    sevens[i] = 7;
  hid_t s = H5Screate_simple(rank, dims, NULL), dcpl = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_chunk(dcpl, rank, chunk);
  H5Pset_fill_value(dcpl, H5T_NATIVE_FLOAT, &fill);
  hid_t d = H5Dcreate2(f, name, H5T_IEEE_F32LE, s, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  for (int b = 0; b < nbox; b++) {
    const hsize_t *start = boxes + 2 * b * rank, *count = start + rank;
    hsize_t n = 1;
    for (int i = 0; i < rank; i++)
      n *= count[i];
    hid_t m = H5Screate_simple(1, &n, NULL);
    H5Sselect_hyperslab(s, H5S_SELECT_SET, start, NULL, count, NULL);
    assert_true(H5Dwrite(d, H5T_NATIVE_FLOAT, m, s, H5P_DEFAULT, sevens) >= 0);
    H5Sclose(m);
  }
  H5Dclose(d);
  H5Pclose(dcpl);
  H5Sclose(s);
}

static void assert_ranges(const pc_dataset *d, const uint64_t *want, size_t n) {
  assert_true(d->sparse);
  assert_int_equal(d->nwritten, n);
  for (size_t i = 0; i < n; i++) {
    assert_int_equal(d->written[i].begin, want[2 * i]);
    assert_int_equal(d->written[i].end, want[2 * i + 1]);
  }
}

/* Partly written chunked datasets list their written chunks as row-major element ranges, worked
 * out here from where the chunks lie:
 * - 1-d, 100 elements in chunks of 10, chunks 2, 3 and 9 written: [20, 40) (adjacent chunks
 *   merged) and [90, 100);
 * - (6, 8) in (2, 3) chunks, the chunk at (2, 3) and the clipped edge chunk at (4, 6): rows 2
 *   and 3 from column 3 to 6, rows 4 and 5 from column 6 to 8;
 * - (200, 10) in (100, 5) chunks, the chunk at (100, 5): its 100 rows are more than
 *   PC_CHUNK_RUNS_MAX, so the run covers rows 100 .. 199 whole, [1000, 2000);
 * - (4, 3, 2) in (1, 3, 2) chunks, the chunk at (2, 0, 0) spans the trailing dimensions: [12, 18);
 * and a dataset written whole, or never, is not listed. */
static void test_written_ranges(void **state) {
  (void)state;
  const char *path = tmp_path("partly.h5");
  hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  const hsize_t d1[] = {100}, c1[] = {10}, b1[] = {25, 10, 90, 5};
  const hsize_t d2[] = {6, 8}, c2[] = {2, 3}, b2[] = {2, 3, 1, 1, 5, 6, 1, 2};
  const hsize_t d3[] = {200, 10}, c3[] = {100, 5}, b3[] = {150, 5, 1, 1};
  const hsize_t d4[] = {4, 3, 2}, c4[] = {1, 3, 2}, b4[] = {2, 1, 1, 1, 1, 1};
  const hsize_t whole[] = {0, 100};
  write_partly(f, "one", 1, d1, c1, b1, 2);
  write_partly(f, "two", 2, d2, c2, b2, 2);
  write_partly(f, "wide", 2, d3, c3, b3, 1);
  write_partly(f, "three", 3, d4, c4, b4, 1);
  write_partly(f, "whole", 1, d1, c1, whole, 1);
  write_partly(f, "never", 1, d1, c1, NULL, 0);
  H5Fclose(f);

  pc_file *pf;
  pc_error err;
  assert_int_equal(pc_file_open(&pf, path, &err), PC_OK);
  const uint64_t r1[] = {20, 40, 90, 100}, r2[] = {19, 22, 27, 30, 38, 40, 46, 48};
  const uint64_t r3[] = {1000, 2000}, r4[] = {12, 18};
  assert_ranges(find(pf, "/one"), r1, 2);
  assert_ranges(find(pf, "/two"), r2, 4);
  assert_ranges(find(pf, "/wide"), r3, 1);
  assert_ranges(find(pf, "/three"), r4, 1);
  assert_false(find(pf, "/one")->all_fill);
  assert_false(find(pf, "/whole")->sparse);
  assert_true(find(pf, "/never")->sparse && find(pf, "/never")->all_fill);
  assert_int_equal(find(pf, "/never")->nwritten, 0);
  pc_file_close(pf);
  unlink(path);
}

/* The next written element, and seeking a reader to it: blocks of 8 over chunks of 10 are cut
 * at multiples of 10 (a chunk per block), so seeking to 25 lands on 20, and the block read there
 * holds elements 20 .. 29 of chunk 2, whose 25 .. 29 were written (7), the rest filled (2.5). */
static void test_next_written_and_seek(void **state) {
  (void)state;
  const char *path = tmp_path("seek.h5");
  hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  const hsize_t d1[] = {100}, c1[] = {10}, b1[] = {25, 10, 90, 5};
  write_partly(f, "one", 1, d1, c1, b1, 2);
  H5Fclose(f);
  pc_file *pf;
  pc_error err;
  pc_reader *r;
  size_t cursor = 0, n;
  assert_int_equal(pc_file_open(&pf, path, &err), PC_OK);
  const pc_dataset *d = find(pf, "/one");
  assert_int_equal(pc_dataset_next_written(d, &cursor, 0), 20);
  assert_int_equal(pc_dataset_next_written(d, &cursor, 35), 35);
  assert_int_equal(pc_dataset_next_written(d, &cursor, 40), 90);
  assert_int_equal(pc_dataset_next_written(d, &cursor, 100), 100);
  assert_int_equal(pc_reader_open(&r, pf, d, 8, NULL, &err), PC_OK);
  assert_int_equal(pc_reader_seek(r, 25), 20);
  assert_int_equal(pc_reader_seek(r, 3), 20); /* never backwards */
  assert_int_equal(pc_reader_next(r, &n, &err), PC_OK);
  assert_int_equal(n, 10);
  assert_true(pc_reader_values(r)[4] == 2.5 && pc_reader_values(r)[5] == 7);
  assert_int_equal(pc_reader_seek(r, 99), 90);
  assert_int_equal(pc_reader_next(r, &n, &err), PC_OK);
  assert_true(n == 10 && pc_reader_values(r)[0] == 7);
  assert_int_equal(pc_reader_seek(r, 1000), 100);
  assert_int_equal(pc_reader_next(r, &n, &err), PC_OK);
  assert_int_equal(n, 0);
  pc_reader_close(r);
  pc_file_close(pf);
  unlink(path);
}

/* Listing n chunks costs n(n + 1)/2 chunk index visits, 2^22 at most per file: 2896 written
 * chunks (4 194 856 visits) are too many, so that dataset is read whole, not sparse; a
 * 3-chunk dataset of the same file still is. */
static void test_chunk_budget(void **state) {
  (void)state;
  const char *path = tmp_path("budget.h5");
  hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  const hsize_t dims[] = {6000}, chunk[] = {1}, few[] = {0, 3};
  write_partly(f, "few", 1, dims, chunk, few, 1);
  hsize_t many[2 * 2896];
  for (int i = 0; i < 2896; i++)
    many[2 * i] = 2 * (hsize_t)i, many[2 * i + 1] = 1;
  write_partly(f, "many", 1, dims, chunk, many, 2896);
  H5Fclose(f);
  pc_file *pf;
  pc_error err;
  assert_int_equal(pc_file_open(&pf, path, &err), PC_OK);
  assert_false(find(pf, "/many")->sparse);
  const uint64_t r[] = {0, 3};
  assert_ranges(find(pf, "/few"), r, 1);
  pc_file_close(pf);
  unlink(path);
}

/* Creation order is followed where the group tracks it, name order elsewhere; soft links are
 * followed, dangling and external ones are listed as skipped. */
static void test_walk_order_and_links(void **state) {
  (void)state;
  const char *path = tmp_path("walk.h5");
  hid_t fcpl = H5Pcreate(H5P_FILE_CREATE);
  H5Pset_link_creation_order(fcpl, H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED);
  hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, fcpl, H5P_DEFAULT);
  const float x[1] = {1};
  write_1d(f, "zeta", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 1, x);
  hid_t g = H5Gcreate2(f, "g", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT); /* untracked: by name */
  write_1d(g, "b", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 1, x);
  write_1d(g, "a", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 1, x);
  H5Gclose(g);
  write_1d(f, "alpha", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 1, x);
  H5Lcreate_soft("/g/a", f, "link", H5P_DEFAULT, H5P_DEFAULT);
  H5Lcreate_soft("/nowhere", f, "dangling", H5P_DEFAULT, H5P_DEFAULT);
  H5Lcreate_external("other.h5", "/x", f, "ext", H5P_DEFAULT, H5P_DEFAULT);
  H5Lcreate_soft("/g", f, "loop", H5P_DEFAULT, H5P_DEFAULT); /* a group met twice: walked once */
  H5Fclose(f);
  H5Pclose(fcpl);

  pc_file *pf;
  pc_error err;
  assert_int_equal(pc_file_open(&pf, path, &err), PC_OK);
  const char *want[] = {"/zeta", "/g/a", "/g/b", "/alpha", "/link", "/dangling", "/ext"};
  assert_int_equal(pc_file_count(pf), 7);
  for (size_t i = 0; i < 7; i++)
    assert_string_equal(pc_file_dataset(pf, i)->path, want[i]);
  assert_int_equal(find(pf, "/link")->kind, PC_KIND_FLOAT);
  assert_int_equal(find(pf, "/dangling")->kind, PC_KIND_SKIPPED);
  assert_non_null(strstr(find(pf, "/ext")->reason, "external"));
  pc_file_close(pf);
  unlink(path);
}

/* Unreadable inputs: PC_EIO with the file named and the cause. */
static void test_bad_files(void **state) {
  (void)state;
  pc_file *f;
  pc_error err;
  const char *text = tmp_path("text.h5");
  FILE *fp = fopen(text, "w");
  fputs("not hdf5 at all\n", fp);
  fclose(fp);
  assert_int_equal(pc_file_open(&f, text, &err), PC_EIO);
  assert_null(f);
  assert_non_null(strstr(err.message, text));
  assert_non_null(strstr(err.message, "not a tensor dump (HDF5, safetensors, npy or npz)"));
  const char *missing = tmp_path("missing.h5");
  assert_int_equal(pc_file_open(&f, missing, &err), PC_EIO);
  assert_non_null(strstr(err.message, "No such file"));
  assert_int_equal(pc_file_open(&f, dir, &err), PC_EIO);
  assert_non_null(strstr(err.message, "directory"));
  unlink(text);

  /* A real file cut in half. */
  const char *whole = tmp_path("whole.h5"), *cut = tmp_path("cut.h5");
  make_dtypes(whole);
  fp = fopen(whole, "rb");
  char buf[1 << 16];
  size_t n = fread(buf, 1, sizeof buf, fp);
  fclose(fp);
  fp = fopen(cut, "wb");
  fwrite(buf, 1, n / 2, fp);
  fclose(fp);
  assert_int_equal(pc_file_open(&f, cut, &err), PC_EIO);
  assert_non_null(strstr(err.message, cut));
  unlink(whole);
  unlink(cut);
}

static int setup(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "/tmp/pc_loader_XXXXXX");
  return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  return rmdir(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_dtypes),
      cmocka_unit_test(test_blocks),
      cmocka_unit_test(test_chunk_aligned_blocks),
      cmocka_unit_test(test_direct_spans),
      cmocka_unit_test(test_written_ranges),
      cmocka_unit_test(test_next_written_and_seek),
      cmocka_unit_test(test_chunk_budget),
      cmocka_unit_test(test_walk_order_and_links),
      cmocka_unit_test(test_bad_files),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
