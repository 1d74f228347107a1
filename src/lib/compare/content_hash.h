/* Content hashes of datasets for approval provenance (docs/review.md, "Provenance"): 64-bit
 * FNV-1a over a dataset's stored bytes in row-major order (as the file stores each element, byte
 * order included), so that the same values stored the same way hash the same whatever the
 * chunking. Internal to the library. */
#ifndef PC_CONTENT_HASH_H
#define PC_CONTENT_HASH_H

#include <paritycheck/error.h>

#include <stdbool.h> /* bool */
#include <stddef.h>  /* size_t */
#include <stdint.h>  /* uint64_t */

/** For each of the n dataset paths, the hash of that numeric dataset of the HDF5 file at
 * file_path into out[i], found[i] true; found[i] false (out[i] 0) when the file has no numeric
 * dataset of that path. PC_EIO when the file cannot be opened, PC_EDATA when a dataset cannot be
 * read, PC_ENOMEM. */
int pc_content_hashes(const char *file_path, const char *const *paths, size_t n, uint64_t *out,
                      bool *found, pc_error *err);

/** pc_content_hashes for the side of a run at `root`: a file as above; a folder (folder mode),
 * whose paths read "FILE:DATASET", each hashed in root/FILE; a FILE that is not there, or a path
 * without ':', is not found. PC_EIO when a file there cannot be opened; with n = 0 nothing is
 * opened. */
int pc_content_hashes_at(const char *root, const char *const *paths, size_t n, uint64_t *out,
                         bool *found, pc_error *err);

#endif
