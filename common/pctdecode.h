/*
 * Percent-decoding (RFC 3986) of URL path segments, query values and
 * raw:// URIs: the one decoder, strict about malformed escapes and NUL
 * bytes. Pure; any thread.
 */
#ifndef BERTH_COMMON_PCTDECODE_H
#define BERTH_COMMON_PCTDECODE_H

#include <stddef.h>

/*
 * Decodes len bytes of in into out (cap bytes, NUL-terminated). Returns
 * the decoded length, or -1 for a truncated or non-hex escape, an
 * escaped NUL (%00), or output that does not fit.
 */
long pct_decode(const char *in, size_t len, char *out, size_t cap);

/* As pct_decode into a new string (caller frees); NULL on bad input or OOM. */
char *pct_decode_dup(const char *in);

#endif
