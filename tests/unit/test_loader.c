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
  assert_non_null(strstr(err.message, "not an HDF5 file"));
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
      cmocka_unit_test(test_walk_order_and_links),
      cmocka_unit_test(test_bad_files),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
