/*
 * Fuzzes the Windows layer tar reader and its validation
 * (store/wintar.c, store/wclayer.c).
 *
 * Input: a tar stream, as a Windows image's layer would carry it.
 * Checked:
 * - a refusal has an error code and a printable message;
 * - every entry the sink is given is under Files/, Hives/ or UtilityVM/,
 *   with no empty, "." or ".." component, no backslash, no control
 *   character, and a ':' only in a stream's last component;
 * - a hard link's target is an earlier file of the layer, a stream
 *   follows its file, a hive delta is Hives/<known>_Delta;
 * - a security descriptor given to the sink passes wcl_sd_check, and the
 *   data a file's entry gets is exactly its size.
 */
#include "fuzz/fuzz.h"

#include <stdbool.h>

#include "store/wclayer.h"

struct input {
    const uint8_t *p;
    size_t len, off;
};

static ssize_t
in_read(void *ctx, void *buf, size_t len)
{
    struct input *in = ctx;
    size_t n = in->len - in->off < len ? in->len - in->off : len;
    memcpy(buf, in->p + in->off, n);
    in->off += n;
    return (ssize_t)n;
}

struct state {
    uint64_t want, got;
    bool in_data;
};

static void
path_check(const char *p, bool stream)
{
    FUZZ_CHECK(strncmp(p, "Files", 5) == 0 || strncmp(p, "Hives", 5) == 0 ||
                   strncmp(p, "UtilityVM", 9) == 0,
               "%s is outside the roots", p);
    const char *last = strrchr(p, '/');
    for (const char *c = p;;) {
        const char *e = strchr(c, '/');
        size_t n = e ? (size_t)(e - c) : strlen(c);
        FUZZ_CHECK(n > 0, "%s has an empty component", p);
        FUZZ_CHECK(!(n == 1 && c[0] == '.') && !(n == 2 && c[0] == '.' && c[1] == '.'),
                   "%s has a dot component", p);
        if (!e)
            break;
        c = e + 1;
    }
    for (const char *c = p; *c; c++) {
        FUZZ_CHECK((unsigned char)*c >= 0x20 && *c != '\\', "%s has a bad character", p);
        if (*c == ':')
            FUZZ_CHECK(stream && (!last || c > last), "%s has a ':' outside a stream", p);
    }
}

static int
s_entry(void *ctx, const struct wcl_entry *e, struct err *err)
{
    (void)err;
    struct state *s = ctx;
    FUZZ_CHECK(!s->in_data || s->got == s->want, "the previous file got %llu of %llu bytes",
               (unsigned long long)s->got, (unsigned long long)s->want);
    path_check(e->path, e->kind == WCL_STREAM);
    if (e->kind == WCL_HARDLINK)
        path_check(e->target, false);
    if (e->sd) {
        const char *why = NULL;
        FUZZ_CHECK(wcl_sd_check(e->sd, e->sd_len, &why) == 0, "a bad descriptor passed");
    }
    s->in_data = e->kind == WCL_FILE || e->kind == WCL_STREAM;
    s->want = e->size;
    s->got = 0;
    return 0;
}

static int
s_data(void *ctx, const void *buf, size_t len, struct err *err)
{
    (void)buf, (void)err;
    struct state *s = ctx;
    FUZZ_CHECK(s->in_data, "data for an entry that has none");
    s->got += len;
    FUZZ_CHECK(s->got <= s->want, "more data than the entry's size");
    return 0;
}

static int
s_writable(void *ctx, const char *path, struct err *err)
{
    (void)ctx, (void)err;
    path_check(path, false);
    return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct input in = {data, size, 0};
    struct state s = {0};
    struct wcl_sink sink = {s_entry, s_data, s_writable, &s};
    struct wcl_layer_info info;
    struct err err = {0};
    int r = wclayer_import(in_read, &in, &sink, &info, &err);
    if (r < 0) {
        FUZZ_CHECK(err.code != 0 && err.msg[0], "a refusal without a message");
        for (const char *c = err.msg; *c; c++)
            FUZZ_CHECK((unsigned char)*c >= 0x20 || *c == '\t', "an unprintable message");
    } else {
        FUZZ_CHECK(!s.in_data || s.got == s.want, "the last file got %llu of %llu bytes",
                   (unsigned long long)s.got, (unsigned long long)s.want);
    }
    return 0;
}
