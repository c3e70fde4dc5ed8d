/*
 * A growing string, for text built piece by piece (journals, generated
 * files): what open_memstream(3) gives on Linux, written once for every
 * OS (mingw-w64 has no open_memstream). A failed allocation is sticky:
 * the appends after it do nothing and strbuf_steal returns NULL. Any
 * thread; a strbuf belongs to one at a time.
 */
#ifndef BERTH_COMMON_STRBUF_H
#define BERTH_COMMON_STRBUF_H

#include <stdbool.h>
#include <stddef.h>

#include "common/err.h"

struct strbuf {
    char *data; /* NUL-terminated once anything is in */
    size_t len, cap;
    bool failed;
};

void strbuf_put(struct strbuf *b, const char *s, size_t n);
void strbuf_puts(struct strbuf *b, const char *s);
void strbuf_printf(struct strbuf *b, const char *fmt, ...) BERTH_FORMAT(2, 3);
/* The text (caller frees) and its length, or NULL after a failed
 * allocation; b is empty again either way. */
char *strbuf_steal(struct strbuf *b, size_t *len);
void strbuf_clear(struct strbuf *b);

#endif
