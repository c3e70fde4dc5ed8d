/*
 * Random identifiers from the OS's CSPRNG (common/os.h): hex strings
 * for lease ids, temporary names and generated handles. Any thread.
 */
#ifndef BERTH_COMMON_RANDID_H
#define BERTH_COMMON_RANDID_H

#include <stddef.h>

#include "common/err.h"

/* Writes 2 * nbytes hex digits and a NUL into out (nbytes at most 32). */
int randid_hex(char *out, size_t nbytes, struct err *err);

/* prefix followed by 16 hex digits ("c-3f9a..."), into out of outlen
 * bytes. Never fails: without entropy it falls back to the clock. */
void randid_new(char *out, size_t outlen, const char *prefix);

#endif
