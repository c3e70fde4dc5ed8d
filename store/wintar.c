/*
 * The tar reader of wintar.h: 512-byte blocks, each header checked,
 * extended headers ('x' PAX, 'g' global PAX, 'L'/'K' GNU long names)
 * folded into the entry they precede. Runs on the caller's thread.
 */
#include "store/wintar.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define BLOCK 512

struct wtar_reader {
    wtar_read_fn read;
    void *ctx;
    uint64_t offset;    /* bytes consumed from the stream */
    uint64_t remaining; /* data bytes of the current entry not read yet */
    uint64_t pad;       /* then the padding to the block */
    bool done;
    struct wtar_entry e;
};

struct wtar_reader *
wtar_reader_new(wtar_read_fn read, void *ctx)
{
    struct wtar_reader *r = calloc(1, sizeof(*r));
    if (!r)
        return NULL;
    r->read = read;
    r->ctx = ctx;
    return r;
}

static void
records_clear(struct wtar_record **v, size_t *n)
{
    for (size_t i = 0; i < *n; i++) {
        free((*v)[i].key);
        free((*v)[i].value);
    }
    free(*v);
    *v = NULL;
    *n = 0;
}

static void
entry_clear(struct wtar_entry *e)
{
    free(e->name);
    free(e->linkname);
    records_clear(&e->records, &e->nrecords);
    memset(e, 0, sizeof(*e));
}

void
wtar_reader_free(struct wtar_reader *r)
{
    if (!r)
        return;
    entry_clear(&r->e);
    free(r);
}

/* Reads exactly len bytes: 0, 1 when the stream ended first (*got says how far), or -errno. */
static int
read_full(struct wtar_reader *r, void *buf, size_t len, size_t *got, struct err *err)
{
    size_t have = 0;
    while (have < len) {
        ssize_t n = r->read(r->ctx, (char *)buf + have, len - have);
        if (n < 0)
            return err_errno(err, (int)-n, "read tar at byte %llu",
                             (unsigned long long)(r->offset + have));
        if (n == 0)
            break;
        have += (size_t)n;
    }
    r->offset += have;
    if (got)
        *got = have;
    return have < len ? 1 : 0;
}

static int
truncated(struct wtar_reader *r, struct err *err)
{
    return err_set(err, ERR_INVALID_CONTENT, "read tar: the stream ends early, at byte %llu",
                   (unsigned long long)r->offset);
}

/* Skips n bytes of the stream. */
static int
skip(struct wtar_reader *r, uint64_t n, struct err *err)
{
    char buf[4096];
    while (n > 0) {
        size_t k = n < sizeof(buf) ? (size_t)n : sizeof(buf);
        int rc = read_full(r, buf, k, NULL, err);
        if (rc < 0)
            return rc;
        if (rc > 0)
            return truncated(r, err);
        n -= k;
    }
    return 0;
}

/* An octal field (spaces and NULs around it), or base-256 when its top bit is set. */
static int
parse_number(const unsigned char *f, size_t len, uint64_t *out)
{
    uint64_t v = 0;
    if (f[0] & 0x80) {
        if (f[0] != 0x80) /* negative, or more than 63 bits */
            return -1;
        for (size_t i = 1; i < len; i++) {
            if (v >> 55)
                return -1;
            v = (v << 8) | f[i];
        }
        *out = v;
        return 0;
    }
    size_t i = 0;
    while (i < len && f[i] == ' ')
        i++;
    bool any = false;
    for (; i < len && f[i] >= '0' && f[i] <= '7'; i++) {
        if (v >> 60)
            return -1;
        v = (v << 3) | (uint64_t)(f[i] - '0');
        any = true;
    }
    for (; i < len; i++) {
        if (f[i] != ' ' && f[i] != '\0')
            return -1;
    }
    *out = any ? v : 0;
    return 0;
}

static bool
block_is_zero(const unsigned char *b)
{
    for (size_t i = 0; i < BLOCK; i++) {
        if (b[i])
            return false;
    }
    return true;
}

static bool
checksum_ok(const unsigned char *b)
{
    uint64_t want;
    if (parse_number(b + 148, 8, &want) < 0)
        return false;
    uint64_t sum = 0;
    for (size_t i = 0; i < BLOCK; i++)
        sum += (i >= 148 && i < 156) ? ' ' : b[i];
    return sum == want;
}

/* A copy of a NUL-padded header field. */
static char *
field_dup(const unsigned char *f, size_t len)
{
    size_t n = 0;
    while (n < len && f[n])
        n++;
    char *s = malloc(n + 1);
    if (s) {
        memcpy(s, f, n);
        s[n] = '\0';
    }
    return s;
}

static int
record_set(struct wtar_record **v, size_t *n, const char *key, size_t klen, const char *val,
           size_t vlen, struct err *err)
{
    for (size_t i = 0; i < *n; i++) {
        if (strlen((*v)[i].key) == klen && memcmp((*v)[i].key, key, klen) == 0) {
            char *nv = malloc(vlen + 1);
            if (!nv)
                return err_set(err, ENOMEM, "read tar: out of memory");
            memcpy(nv, val, vlen);
            nv[vlen] = '\0';
            free((*v)[i].value);
            (*v)[i].value = nv;
            (*v)[i].vlen = vlen;
            return 0;
        }
    }
    if (*n >= WTAR_RECORDS_MAX)
        return err_set(err, ERR_INVALID_CONTENT, "read tar: more than %d PAX records for one entry",
                       WTAR_RECORDS_MAX);
    struct wtar_record *nv = realloc(*v, (*n + 1) * sizeof(**v));
    if (!nv)
        return err_set(err, ENOMEM, "read tar: out of memory");
    *v = nv;
    struct wtar_record *rec = &nv[*n];
    rec->key = malloc(klen + 1);
    rec->value = malloc(vlen + 1);
    if (!rec->key || !rec->value) {
        free(rec->key);
        free(rec->value);
        return err_set(err, ENOMEM, "read tar: out of memory");
    }
    memcpy(rec->key, key, klen);
    rec->key[klen] = '\0';
    memcpy(rec->value, val, vlen);
    rec->value[vlen] = '\0';
    rec->vlen = vlen;
    (*n)++;
    return 0;
}

/* Parses the records of an extended header: "<len> <key>=<value>\n", len counting it all. */
static int
pax_parse(const char *p, size_t len, uint64_t at, struct wtar_record **v, size_t *n,
          struct err *err)
{
    size_t o = 0;
    while (o < len) {
        size_t rl = 0, d = o;
        while (d < len && p[d] >= '0' && p[d] <= '9' && d - o < 8)
            rl = rl * 10 + (size_t)(p[d++] - '0');
        if (d == o || d >= len || p[d] != ' ' || rl < (d - o) + 4 || rl > len - o)
            return err_set(err, ERR_INVALID_CONTENT,
                           "read tar: bad PAX record at byte %zu of the extended header at %llu", o,
                           (unsigned long long)at);
        const char *key = p + d + 1, *end = p + o + rl - 1;
        if (*end != '\n')
            return err_set(err, ERR_INVALID_CONTENT,
                           "read tar: PAX record at byte %zu of the extended header at %llu does "
                           "not end its line",
                           o, (unsigned long long)at);
        const char *eq = memchr(key, '=', (size_t)(end - key));
        if (!eq || eq == key)
            return err_set(err, ERR_INVALID_CONTENT,
                           "read tar: PAX record at byte %zu of the extended header at %llu has "
                           "no key",
                           o, (unsigned long long)at);
        if (memchr(key, '\0', (size_t)(eq - key)))
            return err_set(err, ERR_INVALID_CONTENT,
                           "read tar: PAX key with a NUL byte in the extended header at %llu",
                           (unsigned long long)at);
        int rc = record_set(v, n, key, (size_t)(eq - key), eq + 1, (size_t)(end - eq - 1), err);
        if (rc < 0)
            return rc;
        o += rl;
    }
    return 0;
}

/* The data of an extended header entry (size bytes, bounded), NUL-terminated. */
static int
read_ext(struct wtar_reader *r, uint64_t size, char **out, struct err *err)
{
    if (size > WTAR_PAX_MAX)
        return err_set(err, ERR_INVALID_CONTENT,
                       "read tar: extended header at byte %llu of %llu bytes (at most %d)",
                       (unsigned long long)r->offset, (unsigned long long)size, WTAR_PAX_MAX);
    char *buf = malloc((size_t)size + 1);
    if (!buf)
        return err_set(err, ENOMEM, "read tar: out of memory");
    int rc = read_full(r, buf, (size_t)size, NULL, err);
    if (rc == 0)
        rc = skip(r, (BLOCK - size % BLOCK) % BLOCK, err);
    else if (rc > 0)
        rc = truncated(r, err);
    if (rc < 0) {
        free(buf);
        return rc;
    }
    buf[size] = '\0';
    *out = buf;
    return 0;
}

static const struct wtar_record *
records_find(const struct wtar_record *v, size_t n, const char *key)
{
    for (size_t i = 0; i < n; i++) {
        if (strcmp(v[i].key, key) == 0)
            return &v[i];
    }
    return NULL;
}

const struct wtar_record *
wtar_entry_record(const struct wtar_entry *e, const char *key)
{
    return records_find(e->records, e->nrecords, key);
}

/* A name from PAX or GNU: no NUL inside, bounded. */
static int
take_name(char **dst, const char *src, size_t len, const char *what, uint64_t at, struct err *err)
{
    if (len > WTAR_NAME_MAX || memchr(src, '\0', len))
        return err_set(err, ERR_INVALID_CONTENT,
                       "read tar: %s of the entry at byte %llu is longer than %d bytes or holds a "
                       "NUL",
                       what, (unsigned long long)at, WTAR_NAME_MAX);
    char *s = malloc(len + 1);
    if (!s)
        return err_set(err, ENOMEM, "read tar: out of memory");
    memcpy(s, src, len);
    s[len] = '\0';
    free(*dst);
    *dst = s;
    return 0;
}

int
wtar_next(struct wtar_reader *r, const struct wtar_entry **out, struct err *err)
{
    if (r->done)
        return 0;
    int rc = skip(r, r->remaining + r->pad, err);
    if (rc < 0)
        return rc;
    r->remaining = r->pad = 0;
    entry_clear(&r->e);
    char *gnu_name = NULL, *gnu_link = NULL;
    struct wtar_record *pax = NULL;
    size_t npax = 0;
    for (;;) {
        unsigned char b[BLOCK];
        uint64_t at = r->offset;
        size_t got = 0;
        rc = read_full(r, b, BLOCK, &got, err);
        if (rc < 0)
            goto fail;
        if (rc > 0) {
            rc = truncated(r, err);
            goto fail;
        }
        if (block_is_zero(b)) {
            if (gnu_name || gnu_link || npax) {
                rc = err_set(err, ERR_INVALID_CONTENT,
                             "read tar: an extended header at byte %llu is followed by the end",
                             (unsigned long long)at);
                goto fail;
            }
            /* The end marker: a second zero block, or (leniently) the end of the stream. */
            rc = read_full(r, b, BLOCK, &got, err);
            if (rc < 0)
                goto fail;
            if ((rc == 0 && !block_is_zero(b)) || (rc > 0 && got != 0)) {
                rc = err_set(err, ERR_INVALID_CONTENT,
                             "read tar: a zero block at byte %llu is not followed by another",
                             (unsigned long long)at);
                goto fail;
            }
            r->done = true;
            rc = 0;
            goto fail; /* nothing to return; frees the pending parts */
        }
        if (!checksum_ok(b)) {
            rc = err_set(err, ERR_INVALID_CONTENT, "read tar: bad header checksum at byte %llu",
                         (unsigned long long)at);
            goto fail;
        }
        uint64_t size, mode, mtime;
        if (parse_number(b + 124, 12, &size) < 0 || parse_number(b + 100, 8, &mode) < 0 ||
            parse_number(b + 136, 12, &mtime) < 0) {
            rc = err_set(err, ERR_INVALID_CONTENT,
                         "read tar: bad number in the header at byte %llu", (unsigned long long)at);
            goto fail;
        }
        char type = (char)b[156];
        if (type == 'x' || type == 'g' || type == 'L' || type == 'K') {
            char *data = NULL;
            if ((rc = read_ext(r, size, &data, err)) < 0)
                goto fail;
            if (type == 'x') {
                rc = pax_parse(data, (size_t)size, at, &pax, &npax, err);
            } else if (type == 'g') {
                /* Global records: checked, then ignored (no writer of Windows layers uses them,
                 * and a path= there must not rename every later entry). */
                struct wtar_record *g = NULL;
                size_t ng = 0;
                rc = pax_parse(data, (size_t)size, at, &g, &ng, err);
                records_clear(&g, &ng);
            } else {
                size_t n = strnlen(data, (size_t)size);
                rc = take_name(type == 'L' ? &gnu_name : &gnu_link, data, n,
                               type == 'L' ? "the GNU long name" : "the GNU long link", at, err);
            }
            free(data);
            if (rc < 0)
                goto fail;
            continue;
        }

        struct wtar_entry *e = &r->e;
        e->type = (type == '\0' || type == '7') ? '0' : type;
        e->mode = (uint32_t)(mode & 07777777);
        e->mtime = (int64_t)mtime;
        e->size = size;
        bool ustar = memcmp(b + 257, "ustar\0", 6) == 0;
        const struct wtar_record *p;
        if ((p = records_find(pax, npax, "path")))
            rc = take_name(&e->name, p->value, p->vlen, "the PAX path", at, err);
        else if (gnu_name)
            e->name = gnu_name, gnu_name = NULL;
        else {
            char *nm = field_dup(b, 100), *pre = ustar ? field_dup(b + 345, 155) : strdup("");
            if (nm && pre) {
                size_t ln = strlen(pre) + strlen(nm) + 2;
                if ((e->name = malloc(ln)))
                    snprintf(e->name, ln, "%s%s%s", pre, pre[0] ? "/" : "", nm);
            }
            free(nm);
            free(pre);
            if (!e->name)
                rc = err_set(err, ENOMEM, "read tar: out of memory");
        }
        if (rc == 0) {
            if ((p = records_find(pax, npax, "linkpath")))
                rc = take_name(&e->linkname, p->value, p->vlen, "the PAX linkpath", at, err);
            else if (gnu_link)
                e->linkname = gnu_link, gnu_link = NULL;
            else if (!(e->linkname = field_dup(b + 157, 100)))
                rc = err_set(err, ENOMEM, "read tar: out of memory");
        }
        if (rc == 0 && (p = records_find(pax, npax, "size"))) {
            char *end = NULL;
            errno = 0;
            unsigned long long v = strtoull(p->value, &end, 10);
            if (!p->value[0] || *end || errno || p->value[0] == '-')
                rc = err_set(err, ERR_INVALID_CONTENT,
                             "read tar: bad PAX size %.40s in the entry at byte %llu", p->value,
                             (unsigned long long)at);
            e->size = v;
        }
        if (rc < 0)
            goto fail;
        e->records = pax, e->nrecords = npax;
        pax = NULL, npax = 0;
        free(gnu_name);
        free(gnu_link);
        uint64_t stored = e->size;
        /* Links and directories carry no data: whatever a header says is skipped, unread. */
        if (e->type == '1' || e->type == '2' || e->type == '5')
            e->size = 0;
        r->remaining = e->size;
        r->pad = (stored - e->size) + (BLOCK - stored % BLOCK) % BLOCK;
        *out = e;
        return 1;
    }
fail:
    free(gnu_name);
    free(gnu_link);
    records_clear(&pax, &npax);
    return rc;
}

ssize_t
wtar_read_data(struct wtar_reader *r, void *buf, size_t len, struct err *err)
{
    if (r->remaining == 0)
        return 0;
    if (len > r->remaining)
        len = (size_t)r->remaining;
    size_t got = 0;
    int rc = read_full(r, buf, len, &got, err);
    if (rc < 0)
        return rc;
    if (rc > 0)
        return truncated(r, err);
    r->remaining -= got;
    return (ssize_t)got;
}
