/*
 * Windows command-line escaping (cmdline.h). Pure; any thread.
 */
#include "runtime/hcs/cmdline.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* A growable string; on overflow of HCS_CMDLINE_MAX it stops and says so. */
struct sbuf {
    char *p;
    size_t len, cap;
    bool too_long, oom;
};

static void
sb_putc(struct sbuf *b, char c)
{
    if (b->too_long || b->oom)
        return;
    if (b->len >= HCS_CMDLINE_MAX) {
        b->too_long = true;
        return;
    }
    if (b->len + 2 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 256;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    b->p[b->len++] = c;
    b->p[b->len] = '\0';
}

static void
sb_putn(struct sbuf *b, char c, size_t n)
{
    for (size_t i = 0; i < n; i++)
        sb_putc(b, c);
}

static void
append_program(struct sbuf *b, const char *a)
{
    bool quote = *a == '\0' || strpbrk(a, " \t") != NULL;
    if (quote)
        sb_putc(b, '"');
    for (const char *c = a; *c; c++)
        sb_putc(b, *c);
    if (quote)
        sb_putc(b, '"');
}

static void
append_arg(struct sbuf *b, const char *a)
{
    if (*a && !strpbrk(a, " \t\n\v\"")) {
        for (const char *c = a; *c; c++)
            sb_putc(b, *c);
        return;
    }
    sb_putc(b, '"');
    size_t slashes = 0;
    for (const char *c = a;; c++) {
        if (*c == '\\') {
            slashes++;
            continue;
        }
        if (*c == '\0') {
            /* Backslashes before the closing quote are doubled, so the
             * quote still closes. */
            sb_putn(b, '\\', slashes * 2);
            break;
        }
        if (*c == '"') {
            /* 2n backslashes and \" give n backslashes and a quote. */
            sb_putn(b, '\\', slashes * 2 + 1);
            sb_putc(b, '"');
        } else {
            sb_putn(b, '\\', slashes);
            sb_putc(b, *c);
        }
        slashes = 0;
    }
    sb_putc(b, '"');
}

int
hcs_cmdline_build(char *const *argv, char **out, struct err *err)
{
    if (!argv || !argv[0])
        return err_set(err, EINVAL, "command line: no program");
    if (strchr(argv[0], '"'))
        return err_set(err, EINVAL, "program %.200s: has a '\"', which no windows file name has",
                       argv[0]);
    struct sbuf b = {0};
    append_program(&b, argv[0]);
    for (size_t i = 1; argv[i]; i++) {
        sb_putc(&b, ' ');
        append_arg(&b, argv[i]);
    }
    if (b.oom || b.too_long || !b.p) {
        free(b.p);
        if (b.too_long)
            return err_set(err, EINVAL, "command line of %.200s: longer than %d characters",
                           argv[0], HCS_CMDLINE_MAX);
        return err_set(err, ENOMEM, "command line of %.200s: out of memory", argv[0]);
    }
    *out = b.p;
    return 0;
}
