/*
 * Lexical normalisation of absolute paths given by clients (mount
 * targets, working directories): repeated slashes and "." segments
 * collapse, a trailing slash goes, and ".." is refused rather than
 * resolved, so "//.berth" and "/./.berth/" both read "/.berth" before
 * any comparison. Nothing is looked up on disk. Pure; any thread.
 */
#ifndef BERTH_COMMON_PATH_H
#define BERTH_COMMON_PATH_H

#include <stddef.h>

/*
 * Normalises in (which must start with '/') into a new string (caller
 * frees). 0, -EINVAL for a relative path, a ".." segment, a NUL-free
 * path longer than PATH_MAX or a newline in it, -ENOMEM.
 */
int path_normalize(const char *in, char **out);

#endif
