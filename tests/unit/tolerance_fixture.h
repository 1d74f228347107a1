/* The tolerance tests' shared helpers (tolerance_fixture.c), linked into each test_tolerance_*
 * executable. */
#ifndef PC_TEST_TOLERANCE_FIXTURE_H
#define PC_TEST_TOLERANCE_FIXTURE_H

#include "tol_resolve.h"

/* The name given to pc_tolset_load_string in these tests. */
#define NAME "t.yaml"

/* Loads yaml into set under NAME; PC_OK, or the error's code after printing its message. */
int load(pc_tolset *set, const char *yaml);

/* A new set holding yaml, which must load. */
pc_tolset *set_of(const char *yaml);

/* The tolerance that path and dt get from a set holding yaml alone. */
pc_tol resolve_one(const char *yaml, const char *path, pc_dtype dt);

/* Loads yaml into a set that holds a small base file, and expects PC_EPARSE with exactly
 * message, the base's resolution unchanged. */
void expect_error(const char *yaml, const char *message);

#endif
