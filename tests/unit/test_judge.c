/* The judge (src/lib/judge/judge.c) on runs built in memory: execution order from attributes and
 * from paths, the reasons of each criterion, the run's trend, the noise floor, and cascades. Every
 * expected value is worked out by hand in the comments. */
#include "judge.h"

#include <paritycheck/result.h>

#include <math.h>   /* sqrt, NAN */
#include <stdlib.h> /* calloc, free */
#include <string.h> /* strcmp */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <gsl/gsl_cdf.h> /* gsl_cdf_fdist_P */

enum { N = 100 }; /* elements of every tensor */

/* A float32 tensor of N elements with RMS(A) = rms_a, rel_rms = rel, no element mismatch and a
 * scale error of 0 (sum_a_diff = 0). */
static void set_tensor(pc_tensor *t, const char *path, double rms_a, double rel) {
  memset(t, 0, sizeof *t);
  t->path = (char *)path;
  t->verdict = PC_VERDICT_PASS;
  t->compare = t->dtype_a = t->dtype_b = PC_DTYPE_FLOAT32;
  t->context.exec_index = -1;
  t->stats.count = t->stats.finite_terms = t->stats.ulp_terms = N;
  t->stats.sum_sq_a = N * rms_a * rms_a;
  t->stats.sum_sq_diff = rel * rel * t->stats.sum_sq_a;
  t->stats.sum_sq_b = t->stats.sum_sq_a + t->stats.sum_sq_diff;
  t->stats.max_abs = 2 * rel * rms_a; /* a crest factor of 2 */
}

/* The tolerance of the trend tests: rel_rms <= 5e-3, G = 4, W = 2, P = 30. */
static pc_tol trend_tol(void) {
  pc_tol tol = {0};
  tol.set = PC_TOL_MAX_REL_RMS | PC_TOL_TREND;
  tol.max_rel_rms = 5e-3;
  tol.trend_growth = 4;
  tol.trend_window = 2;
  tol.trend_crest = 30;
  return tol;
}

static pc_run *new_run(size_t n) {
  pc_run *run = calloc(1, sizeof *run);
  run->tensors = calloc(n, sizeof *run->tensors);
  run->ntensors = n;
  return run;
}

static void free_run(pc_run *run) {
  free(run->order);
  free(run->tensors);
  free(run);
}

static void judge_all(pc_run *run) {
  for (size_t i = 0; i < run->ntensors; i++)
    pc_judge_tensor(&run->tensors[i]);
  assert_int_equal(pc_judge_run(run, NULL), 0);
}

/* Without attributes: inputs, forward tensors in file order, the loss, then gradients by their
 * module's forward position, last module first; a module's own parameters last stored first;
 * a parameter of no forward module ("pos") at the end. */
static void test_order_from_paths(void **state) {
  (void)state;
  static const char *const paths[] = {
      "/activations/000_conv1", "/activations/001_bn1",  "/activations/002_fc",
      "/gradients/bn1.bias",    "/gradients/bn1.weight", "/gradients/conv1.weight",
      "/gradients/fc.bias",     "/gradients/fc.weight",  "/inputs/x",
      "/outputs/loss",          "/gradients/module.pos"};
  static const size_t expected[] = {8, 0, 1, 2, 9, 7, 6, 4, 3, 5, 10};
  pc_run *run = new_run(11);
  for (size_t i = 0; i < 11; i++)
    set_tensor(&run->tensors[i], paths[i], 1, 0);
  judge_all(run);
  for (size_t k = 0; k < 11; k++) {
    assert_int_equal(run->order[k], expected[k]);
    assert_int_equal(run->tensors[expected[k]].context.exec_index, (int64_t)k);
  }
  assert_int_equal(run->verdict, PC_RUN_PASS);
  assert_int_equal(run->first_divergence, -1);
  free_run(run);
}

/* Nested gradient groups name the parameter with slashes, and the DDP prefix of the forward
 * modules is dropped: "/grads/layer1/conv/weight" belongs to "/act/001_module.layer1.conv". */
static void test_order_nested_gradients(void **state) {
  (void)state;
  static const char *const paths[] = {"/act/000_module.stem", "/act/001_module.layer1.conv",
                                      "/grads/stem/weight", "/grads/layer1/conv/weight"};
  pc_run *run = new_run(4);
  for (size_t i = 0; i < 4; i++)
    set_tensor(&run->tensors[i], paths[i], 1, 0);
  judge_all(run);
  assert_int_equal(run->order[2], 3);
  assert_int_equal(run->order[3], 2);
  free_run(run);
}

/* Gradients named by a word of their path, not by a substring: "/up/upgrade" and "/gradual" are
 * forward tensors in file order; "/fc.weight.grad" and "/param_grads/fc/bias" are gradients
 * of module "fc" (forward position 0), last stored first. */
static void test_gradient_words(void **state) {
  (void)state;
  static const char *const paths[] = {"/act/000_fc", "/fc.weight.grad", "/up/upgrade",
                                      "/param_grads/fc/bias", "/gradual"};
  static const size_t expected[] = {0, 2, 4, 3, 1};
  pc_run *run = new_run(5);
  for (size_t i = 0; i < 5; i++)
    set_tensor(&run->tensors[i], paths[i], 1, 0);
  judge_all(run);
  for (size_t k = 0; k < 5; k++)
    assert_int_equal(run->order[k], expected[k]);
  free_run(run);
}

/* `execution_index` attributes decide the order whatever the paths say. */
static void test_order_from_attributes(void **state) {
  (void)state;
  static const int64_t index[] = {5, 1, 9, 0};
  pc_run *run = new_run(4);
  for (size_t i = 0; i < 4; i++) {
    set_tensor(&run->tensors[i], "/gradients/x", 1, 0);
    run->tensors[i].context.exec_index = index[i];
  }
  judge_all(run);
  static const size_t expected[] = {3, 1, 0, 2};
  for (size_t k = 0; k < 4; k++)
    assert_int_equal(run->order[k], expected[k]);
  free_run(run);
}

/* rel_rms 1e-3, 2e-3, 3e-3 pass the fixed 5e-3. The fourth, 1e-2, is over it but within
 * G x trend = 4 x max(2e-3, 3e-3) = 1.2e-2: pass, without feeding the trend (it needed the
 * trend's help). The fifth, 5e-2, is over the same 4 x max(2e-3, 3e-3) = 1.2e-2: drift, with
 * the reason rel_rms 5e-2 against the limit applied, 1.2e-2, diagnosed 5e-2 / 1.2e-2 = 4.17
 * times the honest bound. */
static void test_trend(void **state) {
  (void)state;
  static const double rel[] = {1e-3, 2e-3, 3e-3, 1e-2, 5e-2};
  static const char *const paths[] = {"/a/0", "/a/1", "/a/2", "/a/3", "/a/4"};
  pc_run *run = new_run(5);
  for (size_t i = 0; i < 5; i++) {
    set_tensor(&run->tensors[i], paths[i], 1, rel[i]);
    run->tensors[i].tol = trend_tol();
  }
  judge_all(run);
  assert_int_equal(run->tensors[3].verdict, PC_VERDICT_PASS);
  assert_true(fabs(run->tensors[3].context.trend - 3e-3) < 1e-15);
  pc_tensor *t = &run->tensors[4];
  assert_int_equal(t->verdict, PC_VERDICT_DRIFT);
  assert_true(fabs(t->context.trend - 3e-3) < 1e-15);
  assert_int_equal(t->nreasons, 1);
  assert_int_equal(t->reasons[0].criterion, PC_CRIT_REL_RMS);
  assert_true(fabs(t->reasons[0].value - 5e-2) < 1e-12);
  assert_true(fabs(t->reasons[0].limit - 1.2e-2) < 1e-15);
  assert_int_equal(t->diagnosis.kind, PC_DIAG_BEYOND);
  assert_true(fabs(t->diagnosis.value - 5e-2 / 1.2e-2) < 1e-12);
  assert_false(t->diagnosis.structural);
  assert_int_equal(run->first_divergence, 4);
  assert_int_equal(t->caused_by, -1);
  assert_int_equal(run->verdict, PC_RUN_DRIFT);
  assert_int_equal(run->by_verdict[PC_VERDICT_DRIFT], 1);
  free_run(run);
}

/* Element mismatches are forgiven by the trend only when G x trend is above the fixed rel_rms
 * limit and max_abs <= P x RMS(B - A): here 30 x (1e-2 x 1) = 0.3. */
static void test_trend_elements(void **state) {
  (void)state;
  pc_run *run = new_run(3);
  set_tensor(&run->tensors[0], "/a/0", 1, 4e-3);
  set_tensor(&run->tensors[1], "/a/1", 1, 1e-2); /* passes by the trend: 1e-2 <= 1.6e-2 */
  set_tensor(&run->tensors[2], "/a/2", 1, 1e-2);
  for (size_t i = 0; i < 3; i++)
    run->tensors[i].tol = trend_tol();
  run->tensors[2].stats.mismatches = 3;
  run->tensors[2].stats.max_abs = 0.29; /* <= 0.3: forgiven */
  judge_all(run);
  assert_int_equal(run->tensors[2].verdict, PC_VERDICT_PASS);
  run->tensors[2].stats.max_abs = 0.31; /* > 0.3 */
  judge_all(run);
  assert_int_equal(run->tensors[2].verdict, PC_VERDICT_DRIFT);
  assert_int_equal(run->tensors[2].nreasons, 1);
  assert_int_equal(run->tensors[2].reasons[0].criterion, PC_CRIT_MISMATCH_FRACTION);
  assert_true(run->tensors[2].reasons[0].value == 3.0 / N);
  free_run(run);
}

/* A bias gradient of RMS(A) 1e-9 and RMS(B - A) 1.4e-9 between gradients of RMS 1e-3 and
 * 5e-4: the noise scale is the lower middle of the two, 5e-4. With nu = max(16, sqrt(4096)) =
 * 64 (sqrt of the terms a reduction upstream may sum) and u = 2^-24 the floor is
 * 64 x 2^-24 x 5e-4 = 1.91e-9 >= 1.4e-9, and >= RMS(A) too: noise, and its rel_rms of 1.4 is
 * waived. With RMS(B - A) 3e-9 > 1.91e-9 it is judged as it is: a rel_rms of 3 against an
 * allowance of 1e-5 (far below 1/2, so B was allowed its digits) is drift, not indeterminate.
 * With a NaN nothing is waived. */
static void test_noise_floor(void **state) {
  (void)state;
  for (int round = 0; round < 3; round++) {
    pc_run *run = new_run(3);
    set_tensor(&run->tensors[0], "/g/conv.weight", 1e-3, 1e-6);
    set_tensor(&run->tensors[1], "/g/conv.bias", 1e-9, round == 1 ? 3 : 1.4);
    set_tensor(&run->tensors[2], "/g/bn.weight", 5e-4, 1e-6);
    for (size_t i = 0; i < 3; i++) {
      run->tensors[i].tol.set = PC_TOL_MAX_REL_RMS | PC_TOL_NOISE;
      run->tensors[i].tol.max_rel_rms = 1e-5;
      run->tensors[i].tol.noise_floor_u = 16;
      run->tensors[i].tol.u = 0x1p-24;
    }
    if (round == 2)
      run->tensors[1].stats.nan_mismatches = 1;
    judge_all(run);
    const pc_tensor *t = &run->tensors[1];
    assert_true(fabs(t->context.noise_scale - 5e-4) < 1e-18);
    assert_int_equal(t->context.noise_level, round != 1 ? true : false);
    assert_int_equal(t->verdict, round == 0 ? PC_VERDICT_PASS : PC_VERDICT_DRIFT);
    assert_int_equal(t->nreasons, (size_t)round); /* round 2: nan_mismatch and rel_rms */
    if (round)
      assert_int_equal(t->reasons[0].criterion,
                       round == 2 ? PC_CRIT_NAN_MISMATCH : PC_CRIT_REL_RMS);
    free_run(run);
  }
}

/* The noise scale comes from the tensor's own file only (folder mode): the same bias gradient
 * as test_noise_floor (RMS(A) 1e-9, RMS(B - A) 1.4e-9), alone in file "b.h5" between files
 * whose gradients have RMS 1e-3 and 5e-4, has no judged neighbour in its file: scale 0, not
 * noise-level, and its rel_rms of 1.4 against 1e-5 is drift. With its neighbours in its own
 * file it is noise as before (scale 5e-4). */
static void test_noise_scale_own_file(void **state) {
  (void)state;
  for (int same = 0; same < 2; same++) {
    pc_run *run = new_run(3);
    static const char *const files[2][3] = {{"a.h5", "b.h5", "c.h5"}, {"a.h5", "a.h5", "a.h5"}};
    static const char *const paths[2][3] = {
        {"a.h5:/g/conv.weight", "b.h5:/g/conv.bias", "c.h5:/g/bn.weight"},
        {"a.h5:/g/conv.weight", "a.h5:/g/conv.bias", "a.h5:/g/bn.weight"}};
    static const double rms[3] = {1e-3, 1e-9, 5e-4}, rel[3] = {1e-6, 1.4, 1e-6};
    for (size_t i = 0; i < 3; i++) {
      set_tensor(&run->tensors[i], paths[same][i], rms[i], rel[i]);
      run->tensors[i].file = (char *)files[same][i];
      run->tensors[i].tol.set = PC_TOL_MAX_REL_RMS | PC_TOL_NOISE;
      run->tensors[i].tol.max_rel_rms = 1e-5;
      run->tensors[i].tol.noise_floor_u = 16;
      run->tensors[i].tol.u = 0x1p-24;
    }
    judge_all(run);
    const pc_tensor *t = &run->tensors[1];
    assert_true(same ? fabs(t->context.noise_scale - 5e-4) < 1e-18 : t->context.noise_scale == 0);
    assert_int_equal(t->context.noise_level, same ? true : false);
    assert_int_equal(t->verdict, same ? PC_VERDICT_PASS : PC_VERDICT_DRIFT);
    free_run(run);
  }
}

/* The backward growth goes by the dumper's groups, not by a word in the name: after two forward
 * tensors of rel_rms 4e-3 (trend 4e-3, forward G = 4, backward G = 10), a tensor of rel_rms
 * 2e-2 > 4 x 4e-3 = 1.6e-2 drifts as "/activations/002_grad_norm" or "/activations/003_w.grad"
 * (forward tensors whatever their names), and passes as "/gradients/fc.weight" after a gradient
 * of 4e-3 (its own trend, 2e-2 <= 10 x 4e-3 = 4e-2). */
static void test_backward_growth_by_group(void **state) {
  (void)state;
  static const char *const last[] = {"/activations/002_grad_norm", "/activations/003_w.grad",
                                     "/gradients/fc.weight"};
  for (size_t c = 0; c < 3; c++) {
    pc_run *run = new_run(3);
    bool grad = c == 2;
    set_tensor(&run->tensors[0], "/activations/000_fc", 1, 4e-3);
    set_tensor(&run->tensors[1], grad ? "/gradients/fc.bias" : "/activations/001_out", 1, 4e-3);
    set_tensor(&run->tensors[2], last[c], 1, 2e-2);
    for (size_t i = 0; i < 3; i++) { /* in this order, as an execution_index attribute says */
      run->tensors[i].tol = trend_tol();
      run->tensors[i].tol.trend_growth_backward = 10;
      run->tensors[i].context.exec_index = (int64_t)i;
    }
    judge_all(run);
    assert_true(run->tensors[2].context.trend == 4e-3);
    assert_int_equal(run->tensors[2].verdict, grad ? PC_VERDICT_PASS : PC_VERDICT_DRIFT);
    free_run(run);
  }
}

/* Without a trend (G = 1), every failure within W = 8 tensors of the ones before: t0 fails with
 * rel_rms 0.5 (root; drift: its allowance 1e-3 left it its digits); t1, 0.3 <= 0.5, is caused by
 * t0; t2 has a NaN (no earlier NaN: a root); t3, 2.0, is not explained (a NaN does not explain a
 * finite error, and 0.3, 0.5 < 2.0): a root, drift; t4, 0.4 <= 2.0, is caused by t3, the
 * nearest that explains it; t5 has a NaN: caused by t2; t6 passes and links to nothing; a
 * missing tensor and an integer tensor are roots of their own. */
static void test_cascades(void **state) {
  (void)state;
  static const double rel[] = {0.5, 0.3, 0.1, 2.0, 0.4, 0.1, 0, 0.9};
  static const char *const paths[] = {"/a/0", "/a/1", "/a/2", "/a/3", "/a/4",
                                      "/a/5", "/a/6", "/a/7", "/a/8"};
  pc_run *run = new_run(9);
  for (size_t i = 0; i < 8; i++) {
    set_tensor(&run->tensors[i], paths[i], 1, rel[i]);
    run->tensors[i].tol.set = PC_TOL_MAX_REL_RMS;
    run->tensors[i].tol.max_rel_rms = 1e-3;
  }
  run->tensors[2].stats.nan_mismatches = 1;
  run->tensors[5].stats.nan_mismatches = 1;
  run->tensors[7].compare = PC_DTYPE_INT32;
  set_tensor(&run->tensors[8], paths[8], 1, 0);
  run->tensors[8].verdict = PC_VERDICT_MISSING_IN_B;
  run->tensors[8].compare = PC_DTYPE_NONE;
  for (size_t i = 0; i < 8; i++)
    pc_judge_tensor(&run->tensors[i]);
  assert_int_equal(pc_judge_run(run, NULL), 0);
  static const long caused[] = {-1, 0, -1, -1, 3, 2, -1, -1, -1};
  for (size_t i = 0; i < 9; i++)
    assert_int_equal(run->tensors[i].caused_by, caused[i]);
  assert_int_equal(run->first_divergence, 0);
  assert_int_equal(run->by_verdict[PC_VERDICT_DRIFT], 7);
  assert_int_equal(run->by_verdict[PC_VERDICT_INDETERMINATE], 0);
  assert_int_equal(run->tensors[0].verdict, PC_VERDICT_DRIFT);
  assert_int_equal(run->tensors[3].verdict, PC_VERDICT_DRIFT);
  assert_int_equal(run->by_verdict[PC_VERDICT_MISSING_IN_B], 1);
  assert_string_equal(pc_criterion_name(run->tensors[2].reasons[0].criterion), "nan_mismatch");
  free_run(run);
}

/* Every reason of one tensor, in criterion order, with the fixed limits: scale_error 0.02 over
 * (1e-3 + 0.1 / sqrt(100)) = 0.011, mismatch fraction 7/100 over 0.05, inf mismatch 1 over 0. */
static void test_reasons(void **state) {
  (void)state;
  pc_tensor t;
  set_tensor(&t, "/x", 1, 0.03);
  t.tol.set = PC_TOL_MAX_REL_RMS | PC_TOL_MAX_SCALE | PC_TOL_MAX_MISMATCH_FRACTION;
  t.tol.max_rel_rms = 0.05;
  t.tol.max_scale = 1e-3;
  t.tol.max_scale_sqrt_n = 0.1;
  t.tol.max_mismatch_fraction = 0.05;
  t.stats.sum_a_diff = 0.02 * t.stats.sum_sq_a;
  t.stats.mismatches = 7;
  t.stats.inf_mismatches = 1;
  pc_judge_tensor(&t);
  assert_int_equal(t.verdict, PC_VERDICT_DRIFT);
  assert_int_equal(t.nreasons, 3);
  assert_int_equal(t.reasons[0].criterion, PC_CRIT_INF_MISMATCH);
  assert_true(t.reasons[0].value == 1 && t.reasons[0].limit == 0);
  assert_int_equal(t.reasons[1].criterion, PC_CRIT_MISMATCH_FRACTION);
  assert_true(t.reasons[1].value == 0.07 && t.reasons[1].limit == 0.05);
  assert_int_equal(t.reasons[2].criterion, PC_CRIT_SCALE_ERROR);
  assert_true(fabs(t.reasons[2].value - 0.02) < 1e-15);
  assert_true(fabs(t.reasons[2].limit - 0.011) < 1e-15);
  assert_string_equal(pc_criterion_name(PC_CRIT_COUNT_), "unknown");
}

/* Three-way mode: A is 1e-9 from R in float32, so kappa = 1e-9 / 2^-24 = 0.016777216; with
 * u = 2^-11 and G = 4, B's precision explains a distance to R of 4 x 0.016777216 x 2^-11, times
 * the bound on two RMS of N = 2 terms: F(2, 2) has P(F > f) = 1 / (1 + f) (X = F / (1 + F) is
 * uniform), so its 1 - 1e-6 quantile is 999999 and the allowance 3.2768e-5 x sqrt(999999) =
 * 0.0327680: B at 0.03 passes, B at 0.04 still fails; a NaN mismatch is never explained. */
static void test_reference(void **state) {
  (void)state;
  static const double b_rel[] = {0.03, 0.04, 0.03};
  for (int round = 0; round < 3; round++) {
    pc_run *run = new_run(1);
    pc_tensor *t = &run->tensors[0];
    set_tensor(t, "/a/0", 1, 0.02);
    t->tol = trend_tol();
    t->tol.u = 0x1p-11;
    t->stats.nan_mismatches = round == 2;
    judge_all(run);
    assert_int_equal(t->verdict, PC_VERDICT_DRIFT);
    t->vs_reference.present = true;
    t->vs_reference.a.rel_rms = 1e-9;
    t->vs_reference.b.rel_rms = b_rel[round];
    t->stats.ev.pairs = 2;
    assert_int_equal(pc_judge_reference(run), 0);
    assert_int_equal(t->verdict, round == 0 ? PC_VERDICT_PASS : PC_VERDICT_DRIFT);
    assert_int_equal(run->verdict, round == 0 ? PC_RUN_PASS : PC_RUN_DRIFT);
    double want = 4 * 0.016777216 * 0x1p-11 * sqrt(999999);
    if (round < 2)
      assert_true(fabs(t->context.reference_limit - want) < 1e-9 * want);
    assert_int_equal(run->first_divergence, round == 0 ? -1 : 0);
    free_run(run);
  }
}

/* The trend does not feed itself: eight tensors, each 3.9 times the one before from 1e-3, under
 * rel_rms <= 5e-3, G = 4, W = 2. 1e-3 and 3.9e-3 pass on their own; 1.521e-2 passes within
 * 4 x 3.9e-3 = 1.56e-2, by the trend's help, so it does not feed it; 5.93e-2 is beyond the same
 * 1.56e-2 and fails, and so does every later one: drift, also from 3.9^5 x 1e-3 = 0.90 on,
 * where B keeps no digit but was allowed its digits (allowance 4 x 3.9^2 x 1e-3 < 1/2). */
static void test_trend_does_not_feed_itself(void **state) {
  (void)state;
  static const char *const paths[] = {"/a/0", "/a/1", "/a/2", "/a/3",
                                      "/a/4", "/a/5", "/a/6", "/a/7"};
  pc_run *run = new_run(8);
  double rel = 1e-3;
  for (size_t i = 0; i < 8; i++, rel *= 3.9) {
    set_tensor(&run->tensors[i], paths[i], 1, rel);
    run->tensors[i].tol = trend_tol();
  }
  judge_all(run);
  for (size_t i = 0; i < 8; i++)
    assert_int_equal(run->tensors[i].verdict, i < 3 ? PC_VERDICT_PASS : PC_VERDICT_DRIFT);
  assert_true(fabs(run->tensors[7].context.trend - 3.9e-3) < 1e-15);
  assert_true(fabs(run->tensors[3].reasons[0].limit - 1.56e-2) < 1e-15);
  free_run(run);
}

/* The trend restarts where the gradients begin: a gradient after forward tensors of rel_rms
 * 4e-3 has no trend (0), so its 1e-2 is judged against the fixed 5e-3 alone. */
static void test_trend_restarts_at_backward(void **state) {
  (void)state;
  pc_run *run = new_run(3);
  set_tensor(&run->tensors[0], "/activations/000_fc", 1, 4e-3);
  set_tensor(&run->tensors[1], "/activations/001_out", 1, 4e-3);
  set_tensor(&run->tensors[2], "/gradients/fc.weight", 1, 1e-2);
  for (size_t i = 0; i < 3; i++)
    run->tensors[i].tol = trend_tol();
  judge_all(run);
  assert_true(run->tensors[1].context.trend == 4e-3);
  assert_true(run->tensors[2].context.trend == 0);
  assert_int_equal(run->tensors[2].verdict, PC_VERDICT_DRIFT);
  free_run(run);
}

/* B zero where A is not fails under every allowance: here the tensor sits at noise level
 * (RMS(A) 1e-9 between neighbours of RMS 1e-3, nu = 64) and within a trend, yet B == 0 with
 * an element of A above 2^-14 is "zeroed", a structure rounding cannot produce. */
static void test_structure_never_waived(void **state) {
  (void)state;
  pc_run *run = new_run(3);
  set_tensor(&run->tensors[0], "/g/conv.weight", 1e-3, 1e-6);
  set_tensor(&run->tensors[1], "/g/conv.bias", 1e-9, 1);
  set_tensor(&run->tensors[2], "/g/bn.weight", 1e-3, 1e-6);
  for (size_t i = 0; i < 3; i++) {
    run->tensors[i].tol = trend_tol();
    run->tensors[i].tol.set |= PC_TOL_NOISE;
    run->tensors[i].tol.noise_floor_u = 64;
    run->tensors[i].tol.u = 0x1p-24;
  }
  pc_stats *s = &run->tensors[1].stats;
  s->sum_sq_b = 0;
  s->ev.pairs = N;
  s->ev.zeroed = 1;
  s->ev.zeroed_sq = 0x1p-28;
  judge_all(run);
  const pc_tensor *t = &run->tensors[1];
  assert_true(t->context.noise_level);
  assert_int_equal(t->verdict, PC_VERDICT_DRIFT);
  assert_int_equal(t->diagnosis.kind, PC_DIAG_ZEROED);
  assert_true(t->diagnosis.structural);
  assert_int_equal(t->nreasons, 1);
  assert_int_equal(t->reasons[0].criterion, PC_CRIT_STRUCTURE);
  char buf[64];
  assert_string_equal(pc_diagnosis_text(&t->diagnosis, buf, sizeof buf), "zeroed");
  free_run(run);
}

/* An indeterminate tensor (its allowance 0.6 >= 1/2: honest drift may take every digit; rel_rms
 * 0.8 beyond it) fails the run unless the run accepts it; accepted, the run passes and the
 * tensor is still tallied as indeterminate. With an allowance of 1e-3 the same error is drift,
 * which no acceptance passes. */
static void test_indeterminate_accepted(void **state) {
  (void)state;
  pc_run *run = new_run(2);
  set_tensor(&run->tensors[0], "/a/0", 1, 1e-4);
  set_tensor(&run->tensors[1], "/a/1", 1, 0.8);
  for (size_t i = 0; i < 2; i++) {
    run->tensors[i].tol.set = PC_TOL_MAX_REL_RMS;
    run->tensors[i].tol.max_rel_rms = i ? 0.6 : 1e-3;
  }
  judge_all(run);
  assert_int_equal(run->tensors[1].verdict, PC_VERDICT_INDETERMINATE);
  assert_int_equal(run->tensors[1].diagnosis.kind, PC_DIAG_NO_DIGITS);
  assert_int_equal(run->verdict, PC_RUN_DRIFT);
  pc_run_accept_indeterminate(run, true);
  assert_int_equal(run->verdict, PC_RUN_PASS);
  assert_int_equal(run->by_verdict[PC_VERDICT_INDETERMINATE], 1);
  pc_run_accept_indeterminate(run, false);
  assert_int_equal(run->verdict, PC_RUN_DRIFT);
  run->tensors[1].tol.max_rel_rms = 1e-3;
  judge_all(run);
  assert_int_equal(run->tensors[1].verdict, PC_VERDICT_DRIFT);
  pc_run_accept_indeterminate(run, true);
  assert_int_equal(run->verdict, PC_RUN_DRIFT);
  free_run(run);
}

/* A cascade needs a link: two failures of other modules 10 tensors apart (W = 8) are two roots,
 * whatever their sizes; the second links to the first when it is within 8 tensors. */
static void test_cascade_needs_link(void **state) {
  (void)state;
  for (int round = 0; round < 2; round++) {
    size_t n = 12, second = round ? 8 : 11;
    static const char *const paths[] = {"/a/000_m0", "/a/001_m1", "/a/002_m2",  "/a/003_m3",
                                        "/a/004_m4", "/a/005_m5", "/a/006_m6",  "/a/007_m7",
                                        "/a/008_m8", "/a/009_m9", "/a/010_m10", "/a/011_m11"};
    pc_run *run = new_run(n);
    for (size_t i = 0; i < n; i++) {
      set_tensor(&run->tensors[i], paths[i], 1, i == 1 ? 0.3 : i == second ? 0.2 : 1e-6);
      run->tensors[i].tol.set = PC_TOL_MAX_REL_RMS;
      run->tensors[i].tol.max_rel_rms = 1e-3;
    }
    judge_all(run);
    assert_int_equal(run->tensors[second].caused_by, round ? 1 : -1);
    free_run(run);
  }
}

/* The doubt on an order inferred from the paths (n of them; "file:dataset" in folder mode,
 * files given by `files`, NULL outside it), all without execution_index unless `indexed`. */
static pc_order_doubt doubt_of(const char *const *paths, const char *const *files, size_t n,
                               bool indexed) {
  pc_run *run = new_run(n);
  for (size_t i = 0; i < n; i++) {
    set_tensor(&run->tensors[i], paths[i], 1, 0);
    run->tensors[i].file = files ? (char *)files[i] : NULL;
    run->tensors[i].context.exec_index = indexed ? (int64_t)i : -1;
    pc_judge_tensor(&run->tensors[i]);
  }
  pc_order_doubt d;
  assert_int_equal(pc_judge_run(run, &d), 0);
  free_run(run);
  return d;
}

static void assert_doubt(pc_order_doubt d, pc_order_doubt_kind kind, long example, long before) {
  assert_int_equal(d.kind, kind);
  assert_int_equal(d.example, example);
  assert_int_equal(d.before, before);
}

/* Forward tensors ordered by their names (a file that does not track creation order) are in call
 * order only when the names carry call indices that increase: "layer10" has none, "10_relu"
 * sorts before "9_fc". Zero-padded indices, execution_index attributes, the elements of one
 * call's tuple output, gradients alone, a single forward tensor or one per file, and names in
 * an order other than their own (creation order) raise no doubt. */
static void test_order_doubt(void **state) {
  (void)state;
  static const char *const unindexed[] = {"/act/layer10", "/act/layer2", "/gradients/x"};
  static const char *const widths[] = {"/act/10_relu", "/act/9_fc"};
  static const char *const padded[] = {"/act/009_fc", "/act/010_relu", "/act/100_out"};
  static const char *const tuple[] = {"/act/003_x/0", "/act/003_x/1", "/act/004_y"};
  static const char *const two_numberings[] = {"/a/001_x", "/b/001_y"};
  static const char *const created[] = {"/act/conv1", "/act/bn1", "/act/relu"};
  static const char *const grads[] = {"/gradients/fc.bias", "/gradients/fc.weight"};
  static const char *const single[] = {"/inputs/x", "/act/conv1", "/outputs/loss", "/grads/w"};
  static const char *const walked[] = {"/a/x", "/a.b/y"}; /* name order: '/' ends "a" first */
  assert_doubt(doubt_of(unindexed, NULL, 3, false), PC_ORDER_NO_CALL_INDEX, 0, -1);
  assert_doubt(doubt_of(unindexed, NULL, 3, true), PC_ORDER_SURE, -1, -1);
  assert_doubt(doubt_of(widths, NULL, 2, false), PC_ORDER_CALL_INDEX, 1, 0);
  assert_doubt(doubt_of(padded, NULL, 3, false), PC_ORDER_SURE, -1, -1);
  assert_doubt(doubt_of(tuple, NULL, 3, false), PC_ORDER_SURE, -1, -1);
  assert_doubt(doubt_of(two_numberings, NULL, 2, false), PC_ORDER_CALL_INDEX, 1, 0);
  assert_doubt(doubt_of(created, NULL, 3, false), PC_ORDER_SURE, -1, -1);
  assert_doubt(doubt_of(grads, NULL, 2, false), PC_ORDER_SURE, -1, -1);
  assert_doubt(doubt_of(single, NULL, 4, false), PC_ORDER_SURE, -1, -1);
  assert_doubt(doubt_of(walked, NULL, 2, false), PC_ORDER_NO_CALL_INDEX, 0, -1);

  /* Folder mode: each file on its own; the first file in doubt names its tensor. */
  static const char *const folder[] = {"f1.h5:/act/conv1", "f2.h5:/act/conv1", "f3.h5:/act/b",
                                       "f3.h5:/act/c",     "f4.h5:/act/x",     "f4.h5:/act/y"};
  static const char *const files[] = {"f1.h5", "f2.h5", "f3.h5", "f3.h5", "f4.h5", "f4.h5"};
  assert_doubt(doubt_of(folder, files, 2, false), PC_ORDER_SURE, -1, -1);
  assert_doubt(doubt_of(folder, files, 6, false), PC_ORDER_NO_CALL_INDEX, 2, -1);
}

/* The shift test's limit is a quarter (structure.c, PC_SHIFT_LIMIT) because the F law never
 * binds where the test runs: an F(p, p) variable lies below 1/4 with probability at most 1e-6
 * (the structure tests' false-alarm rate) for every p of 64 pairs (PC_SHIFT_MIN_PAIRS) or more,
 * here for every p up to 10^5 (the probability falls as p grows: the law narrows around 1);
 * and the bound is near the edge: at 51 pairs it is above 1e-6. */
static void test_shift_limit(void **state) {
  (void)state;
  for (double p = 64; p <= 1e5; p++)
    if (!(gsl_cdf_fdist_P(0.25, p, p) <= 1e-6))
      fail_msg("F(%g, %g) below 1/4 with probability %g", p, p, gsl_cdf_fdist_P(0.25, p, p));
  assert_true(gsl_cdf_fdist_P(0.25, 51, 51) > 1e-6);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_order_from_paths),
                                     cmocka_unit_test(test_order_nested_gradients),
                                     cmocka_unit_test(test_order_from_attributes),
                                     cmocka_unit_test(test_gradient_words),
                                     cmocka_unit_test(test_trend),
                                     cmocka_unit_test(test_trend_elements),
                                     cmocka_unit_test(test_noise_floor),
                                     cmocka_unit_test(test_noise_scale_own_file),
                                     cmocka_unit_test(test_backward_growth_by_group),
                                     cmocka_unit_test(test_shift_limit),
                                     cmocka_unit_test(test_cascades),
                                     cmocka_unit_test(test_reasons),
                                     cmocka_unit_test(test_reference),
                                     cmocka_unit_test(test_trend_does_not_feed_itself),
                                     cmocka_unit_test(test_trend_restarts_at_backward),
                                     cmocka_unit_test(test_structure_never_waived),
                                     cmocka_unit_test(test_indeterminate_accepted),
                                     cmocka_unit_test(test_cascade_needs_link),
                                     cmocka_unit_test(test_order_doubt)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
