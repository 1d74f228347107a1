/* SHA-256 (FIPS 180-4), for the reports' record of the tolerance files they were judged by:
 * a digest that a reader can check with sha256sum, and that no edit of a file can keep. */
#ifndef PC_CLI_SHA256_H
#define PC_CLI_SHA256_H

#include <stddef.h> /* size_t */

/** The SHA-256 of n bytes at data as 64 lowercase hex digits and a NUL into hex. */
void pc_cli_sha256_hex(const void *data, size_t n, char hex[65]);

#endif
