/* Tests of the output helpers that the report writers, the baseline and the approval files
 * share (src/lib/report/escape.c, json_util.c): untrusted names escaped in every context and at
 * every buffer size, a nested JSON object laid out as the JSON report writes a tensor. Inputs
 * and renderings written by hand. */
#include <paritycheck/report.h>

#include "json_util.h" /* pc_json_put_nested */

#include <jansson.h>

#include <stdio.h>  /* open_memstream */
#include <stdlib.h> /* free */
#include <string.h> /* memset, strcat, strcmp, strlen */

#include <setjmp.h> /* cmocka needs these three first */
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

/* ---- Untrusted names (docs/reports.md, "Untrusted names"): inputs and renderings by hand ---- */

static void assert_escaped(const char *in, pc_escape_context ctx, const char *want) {
  char got[256];
  size_t n = pc_escape(got, sizeof got, in, ctx);
  if (strcmp(got, want) != 0)
    fail_msg("pc_escape(\"%s\") gave \"%s\", want \"%s\"", in, got, want);
  assert_int_equal(n, strlen(want));
}

static void test_escape_terminal(void **state) {
  (void)state;
  static const struct {
    const char *in, *want;
  } cases[] = {
      {"plain/name_0.weight", "plain/name_0.weight"},
      {"esc\x1b[31mRED\x1b[0m", "esc\\x1b[31mRED\\x1b[0m"},
      {"x\nPASS: 24 tensors within tolerance", "x\\nPASS: 24 tensors within tolerance"},
      {"a\tb\rc\x01\x1f", "a\\tb\\rc\\x01\\x1f"},
      {"del\x7f", "del\\x7f"},
      {"back\\slash", "back\\\\slash"},
      {"\\x1b", "\\\\x1b"}, /* the text of an escape is not an escape */
      /* C1 controls: U+0080, U+0085 (NEL), U+009B (CSI), U+009F; U+00A0 is printable */
      {"\xc2\x80\xc2\x85\xc2\x9b\xc2\x9f\xc2\xa0", "\\u0080\\u0085\\u009b\\u009f\xc2\xa0"},
      /* bidi controls: ALM, LRM, RLM, LRE, RLE, PDF, LRO, RLO, LRI, RLI, FSI, PDI */
      {"\xd8\x9c\xe2\x80\x8e\xe2\x80\x8f", "\\u061c\\u200e\\u200f"},
      {"\xe2\x80\xaa\xe2\x80\xab\xe2\x80\xac\xe2\x80\xad\xe2\x80\xae",
       "\\u202a\\u202b\\u202c\\u202d\\u202e"},
      {"\xe2\x81\xa6\xe2\x81\xa7\xe2\x81\xa8\xe2\x81\xa9", "\\u2066\\u2067\\u2068\\u2069"},
      /* line and paragraph separators, the noncharacters XML cannot hold */
      {"\xe2\x80\xa8\xe2\x80\xa9\xef\xbf\xbe\xef\xbf\xbf", "\\u2028\\u2029\\ufffe\\uffff"},
      /* neighbours that stay: U+200D (ZWJ), U+202F, U+2065, U+FFFD, an emoji, CJK, Latin */
      {"\xe2\x80\x8d\xe2\x80\xaf\xe2\x81\xa5\xef\xbf\xbd\xf0\x9f\x98\x80\xe6\x97\xa5 caf\xc3\xa9",
       "\xe2\x80\x8d\xe2\x80\xaf\xe2\x81\xa5\xef\xbf\xbd\xf0\x9f\x98\x80\xe6\x97\xa5 caf\xc3\xa9"},
      /* not UTF-8: stray bytes, a cut sequence, an overlong '/', a surrogate, past U+10FFFF */
      {"bad\xff\xfe", "bad\\xff\\xfe"},
      {"e\xc3", "e\\xc3"},
      {"\xe2\x80x", "\\xe2\\x80x"},
      {"\xc0\xaf", "\\xc0\\xaf"},
      {"\xed\xa0\x80", "\\xed\\xa0\\x80"},
      {"\xf4\x90\x80\x80", "\\xf4\\x90\\x80\\x80"},
      {"|&<>\"'`*_", "|&<>\"'`*_"}, /* no specials on a terminal */
      {"", ""},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
    assert_escaped(cases[k].in, PC_ESCAPE_TERMINAL, cases[k].want);
}

static void test_escape_contexts(void **state) {
  (void)state;
  assert_escaped("a|b\\c\n\xe2\x80\xae<&", PC_ESCAPE_MARKDOWN, "a\\|b\\\\c\\n\\u202e<&");
  assert_escaped("<a&b>\"'\t\n\x1b\xe2\x80\xae\xff", PC_ESCAPE_XML,
                 "&lt;a&amp;b&gt;&quot;&apos;\\t\\n\\x1b\\u202e\\xff");
  assert_escaped("x<\xe2\x80\xae|", PC_ESCAPE_HTML, "<bdi>x&lt;\\u202e|</bdi>");
  assert_escaped("", PC_ESCAPE_HTML, "<bdi></bdi>");
}

/* Like snprintf: the whole length back, and a cut only between two characters' renderings. */
static void test_escape_truncation(void **state) {
  (void)state;
  char buf[16];
  assert_int_equal(pc_escape(NULL, 0, "a\x1b", PC_ESCAPE_TERMINAL), 5);
  memset(buf, 'z', sizeof buf);
  assert_int_equal(pc_escape(buf, 4, "a\x1b", PC_ESCAPE_TERMINAL), 5);
  assert_string_equal(buf, "a"); /* "\x1" would fit, but is no escape */
  assert_int_equal(pc_escape(buf, 6, "a\x1b", PC_ESCAPE_TERMINAL), 5);
  assert_string_equal(buf, "a\\x1b");
  assert_int_equal(pc_escape(buf, 3, "\xc3\xa9\xc3\xa9", PC_ESCAPE_TERMINAL), 4);
  assert_string_equal(buf, "\xc3\xa9"); /* never half a character */
  assert_int_equal(pc_escape(buf, 13, "xy", PC_ESCAPE_HTML), 13);
  assert_string_equal(buf, "<bdi>x</bdi>"); /* the closing tag kept */
  assert_int_equal(pc_escape(buf, 5, "xy", PC_ESCAPE_HTML), 13);
  assert_string_equal(buf, "");
  /* pc_escape_put takes a length, so a NUL byte is data too */
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  assert_non_null(f);
  pc_escape_put(f, "a\0b\xe2\x80", 5, PC_ESCAPE_TERMINAL);
  fclose(f);
  assert_string_equal(text, "a\\x00b\\xe2\\x80");
  free(text);
}

/* Every buffer size over a name that mixes runs of plain characters with escapes: the buffer
 * holds the longest run of whole renderings, listed here by hand, that fits with the NUL. */
static void test_escape_every_size(void **state) {
  (void)state;
  static const char *const units[] = {"g", "0", "/", "a", "\\x1b", "b", "c", "\\\\", "d"};
  enum { NU = sizeof units / sizeof units[0] };
  char all[64] = "", want[64], buf[64];
  for (size_t u = 0; u < NU; u++)
    strcat(all, units[u]);
  for (size_t size = 0; size < strlen(all) + 3; size++) {
    want[0] = '\0';
    for (size_t u = 0; u < NU && strlen(want) + strlen(units[u]) + 1 <= size; u++)
      strcat(want, units[u]);
    memset(buf, 'z', sizeof buf);
    assert_int_equal(pc_escape(size ? buf : NULL, size,
                               "g0/a\x1b"
                               "bc\\d",
                               PC_ESCAPE_TERMINAL),
                     strlen(all));
    if (size)
      assert_string_equal(buf, want);
  }
}

/* A nested object as the JSON report writes a tensor: jansson's two-space indentation, every
 * line after the first moved 4 further in, a newline inside a string left escaped; the text
 * written out by hand. */
static void test_json_put_nested(void **state) {
  (void)state;
  json_t *o = json_object(), *q = json_object();
  assert_non_null(o);
  assert_non_null(q);
  json_object_set_new(o, "path", json_string("/a\nb"));
  json_object_set_new(q, "p50", json_real(0.5));
  json_object_set_new(o, "quantiles", q);
  json_object_set_new(o, "shape", json_pack("[ii]", 2, 3));
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  assert_non_null(f);
  assert_int_equal(pc_json_put_nested(f, o, 4), PC_OK);
  fclose(f);
  assert_string_equal(text, "{\n"
                            "      \"path\": \"/a\\nb\",\n"
                            "      \"quantiles\": {\n"
                            "        \"p50\": 0.5\n"
                            "      },\n"
                            "      \"shape\": [\n"
                            "        2,\n"
                            "        3\n"
                            "      ]\n"
                            "    }");
  free(text);
  json_decref(o);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_escape_terminal),   cmocka_unit_test(test_escape_contexts),
      cmocka_unit_test(test_escape_truncation), cmocka_unit_test(test_escape_every_size),
      cmocka_unit_test(test_json_put_nested),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
