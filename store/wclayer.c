/*
 * The validation of Windows layer tars (wclayer.h): one pass over the
 * entries that wintar.c reads, each name checked and normalized, its PAX
 * records decoded and checked, the names of the layer kept case-folded
 * (ASCII, as NTFS's upcase table does for them) to find entries that
 * replace one another. Runs on the caller's thread (a pool thread).
 */
#include "store/wclayer.h"
#include "store/wclayer_reparse.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char *const hive_names[WCL_HIVES] = {"DefaultUser", "Sam", "Security", "Software",
                                                  "System"};

const char *
wcl_hive_name(enum wcl_hive h)
{
    return (unsigned)h < WCL_HIVES ? hive_names[h] : NULL;
}

/* --- base64 and security descriptors ----------------------------------- */

static int
b64_value(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

int
wcl_base64_decode(const char *s, size_t len, unsigned char **out, size_t *outlen)
{
    if (len % 4 != 0)
        return -EINVAL;
    unsigned char *buf = malloc(len / 4 * 3 + 1);
    if (!buf)
        return -ENOMEM;
    size_t o = 0;
    for (size_t i = 0; i < len; i += 4) {
        int v[4];
        int pad = 0;
        for (int k = 0; k < 4; k++) {
            unsigned char c = (unsigned char)s[i + k];
            if (c == '=' && i + 4 == len && k >= 2) {
                v[k] = 0;
                pad++;
                continue;
            }
            if (pad || (v[k] = b64_value(c)) < 0) {
                free(buf);
                return -EINVAL;
            }
        }
        uint32_t w =
            (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
        /* Canonical only: the bits that padding drops must be zero. */
        if ((pad == 1 && (w & 0xff)) || (pad == 2 && (w & 0xffff))) {
            free(buf);
            return -EINVAL;
        }
        buf[o++] = (unsigned char)(w >> 16);
        if (pad < 2)
            buf[o++] = (unsigned char)(w >> 8);
        if (pad < 1)
            buf[o++] = (unsigned char)w;
    }
    *out = buf;
    *outlen = o;
    return 0;
}

static uint16_t
le16(const unsigned char *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t
le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

#define SE_DACL_PRESENT 0x0004
#define SE_SACL_PRESENT 0x0010
#define SE_SELF_RELATIVE 0x8000
#define SD_HEADER 20

static int
sid_check(const unsigned char *sd, size_t len, uint32_t off, const char *what, const char **why)
{
    if (off < SD_HEADER || off > len || len - off < 8) {
        *why = what;
        return -EINVAL;
    }
    const unsigned char *s = sd + off;
    if (s[0] != 1 || s[1] > 15 || len - off < 8 + 4 * (size_t)s[1]) {
        *why = what;
        return -EINVAL;
    }
    return 0;
}

static int
acl_check(const unsigned char *sd, size_t len, uint32_t off, const char *what, const char **why)
{
    *why = what;
    if (off < SD_HEADER || off > len || len - off < 8)
        return -EINVAL;
    const unsigned char *a = sd + off;
    size_t size = le16(a + 2), count = le16(a + 4);
    if ((a[0] != 2 && a[0] != 4) || size < 8 || size > len - off)
        return -EINVAL;
    size_t o = 8;
    for (size_t i = 0; i < count; i++) {
        if (size - o < 4)
            return -EINVAL;
        size_t ace = le16(a + o + 2);
        if (ace < 8 || ace % 4 != 0 || ace > size - o)
            return -EINVAL;
        o += ace;
    }
    return 0;
}

int
wcl_sd_check(const unsigned char *sd, size_t len, const char **why)
{
    if (len < SD_HEADER) {
        *why = "shorter than its 20-byte header";
        return -EINVAL;
    }
    if (sd[0] != 1) {
        *why = "revision is not 1";
        return -EINVAL;
    }
    uint16_t control = le16(sd + 2);
    if (!(control & SE_SELF_RELATIVE)) {
        *why = "not self-relative";
        return -EINVAL;
    }
    uint32_t owner = le32(sd + 4), group = le32(sd + 8), sacl = le32(sd + 12), dacl = le32(sd + 16);
    if (owner && sid_check(sd, len, owner, "bad owner SID", why) < 0)
        return -EINVAL;
    if (group && sid_check(sd, len, group, "bad group SID", why) < 0)
        return -EINVAL;
    if ((control & SE_SACL_PRESENT) && sacl && acl_check(sd, len, sacl, "bad SACL", why) < 0)
        return -EINVAL;
    if ((control & SE_DACL_PRESENT) && dacl && acl_check(sd, len, dacl, "bad DACL", why) < 0)
        return -EINVAL;
    return 0;
}

/* --- names ---------------------------------------------------------------- */

static bool
utf8_valid(const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        unsigned c = s[i];
        size_t k = c < 0x80             ? 1
                   : (c & 0xe0) == 0xc0 ? 2
                   : (c & 0xf0) == 0xe0 ? 3
                   : (c & 0xf8) == 0xf0 ? 4
                                        : 0;
        if (!k || i + k > n || (k == 2 && c < 0xc2) || (k == 4 && c > 0xf4))
            return false;
        for (size_t j = 1; j < k; j++) {
            if ((s[i + j] & 0xc0) != 0x80)
                return false;
        }
        if (k == 3 && ((c == 0xe0 && s[i + 1] < 0xa0) || (c == 0xed && s[i + 1] >= 0xa0)))
            return false; /* overlong, or a UTF-16 surrogate */
        if (k == 4 && ((c == 0xf0 && s[i + 1] < 0x90) || (c == 0xf4 && s[i + 1] >= 0x90)))
            return false;
        i += k;
    }
    return true;
}

/* Do the first n bytes of a and b match, ASCII case folded? */
static bool
ascii_caseeq(const char *a, const char *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char x = (unsigned char)a[i], y = (unsigned char)b[i];
        if (x >= 'A' && x <= 'Z')
            x = (unsigned char)(x - 'A' + 'a');
        if (y >= 'A' && y <= 'Z')
            y = (unsigned char)(y - 'A' + 'a');
        if (x != y)
            return false;
    }
    return true;
}

static bool
is_device_name(const char *c, size_t n)
{
    static const char *const dev[] = {"CON", "PRN", "AUX", "NUL"};
    size_t base = 0;
    while (base < n && c[base] != '.')
        base++;
    for (size_t i = 0; i < 4; i++) {
        if (base == 3 && ascii_caseeq(c, dev[i], 3))
            return true;
    }
    if (base == 4 && (ascii_caseeq(c, "COM", 3) || ascii_caseeq(c, "LPT", 3)) && c[3] >= '1' &&
        c[3] <= '9')
        return true;
    return false;
}

/* Checks one component c[0..n) of name; 0 or ERR_INVALID_CONTENT naming both. */
static int
component_check(const char *name, const char *c, size_t n, struct err *err)
{
    if (n == 0)
        return err_set(err, ERR_INVALID_CONTENT, "windows layer: %.300s has an empty component",
                       name);
    if ((n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
        return err_set(err, ERR_INVALID_CONTENT,
                       "windows layer: %.300s has a '.' or '..' component", name);
    if (n > WCL_COMPONENT_MAX)
        return err_set(err, ERR_INVALID_CONTENT,
                       "windows layer: %.300s has a component of %zu bytes (at most %d)", name, n,
                       WCL_COMPONENT_MAX);
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)c[i];
        if (ch < 0x20 || ch == 0x7f || strchr("\\<>\"|?*:", ch))
            return err_set(err, ERR_INVALID_CONTENT,
                           "windows layer: %.300s has a character Windows refuses in a name "
                           "(0x%02x)",
                           name, ch);
    }
    if (c[n - 1] == '.' || c[n - 1] == ' ')
        return err_set(err, ERR_INVALID_CONTENT,
                       "windows layer: %.300s has a component ending in '.' or ' ', which Windows "
                       "strips",
                       name);
    if (is_device_name(c, n))
        return err_set(err, ERR_INVALID_CONTENT, "windows layer: %.300s names a device (%.*s)",
                       name, (int)n, c);
    return 0;
}

/*
 * Normalizes a tar name into out (WCL_PATH_MAX + 1 bytes): "./" prefixes,
 * repeated and trailing slashes folded. The last component may carry
 * ":stream" (*stream points at the ':' in out, else NULL). Checks every
 * component and the root.
 */
static int
name_normalize(const char *name, char *out, char **stream, enum wcl_root *root, struct err *err)
{
    size_t len = strlen(name);
    if (!utf8_valid((const unsigned char *)name, len))
        return err_set(err, ERR_INVALID_CONTENT, "windows layer: %.300s is not valid UTF-8", name);
    if (name[0] == '/' || name[0] == '\\' ||
        (((name[0] | 0x20) >= 'a' && (name[0] | 0x20) <= 'z') && name[1] == ':'))
        return err_set(err, ERR_INVALID_CONTENT, "windows layer: %.300s is an absolute name", name);
    const char *p = name;
    while (p[0] == '.' && p[1] == '/') {
        p += 2;
        while (*p == '/')
            p++;
    }
    size_t o = 0;
    *stream = NULL;
    while (*p) {
        const char *c = p;
        while (*p && *p != '/')
            p++;
        size_t n = (size_t)(p - c);
        while (*p == '/')
            p++;
        size_t cn = n;
        const char *colon = memchr(c, ':', n);
        if (colon && !*p) { /* the last component: "file:stream" */
            cn = (size_t)(colon - c);
            size_t sn = n - cn - 1;
            if (sn >= 6 && memcmp(colon + sn - 5, ":$DATA", 6) == 0)
                sn -= 6;
            int r = component_check(name, colon + 1, sn, err);
            if (r < 0)
                return r;
        }
        int r = component_check(name, c, cn, err);
        if (r < 0)
            return r;
        if (o + n + 2 > WCL_PATH_MAX)
            return err_set(err, ERR_INVALID_CONTENT,
                           "windows layer: %.300s is longer than %d bytes", name, WCL_PATH_MAX);
        if (o)
            out[o++] = '/';
        memcpy(out + o, c, n);
        if (colon && !*p)
            *stream = out + o + cn;
        o += n;
    }
    out[o] = '\0';
    if (o == 0)
        return err_set(err, ERR_INVALID_CONTENT,
                       "windows layer: an entry has an empty name (%.300s)", name);
    static const struct {
        const char *name;
        enum wcl_root root;
    } roots[] = {
        {"Files", WCL_ROOT_FILES}, {"Hives", WCL_ROOT_HIVES}, {"UtilityVM", WCL_ROOT_UTILITYVM}};
    for (size_t i = 0; i < 3; i++) {
        size_t rl = strlen(roots[i].name);
        if (strncmp(out, roots[i].name, rl) == 0 && (out[rl] == '\0' || out[rl] == '/')) {
            if (*stream && *stream < out + rl)
                break;
            *root = roots[i].root;
            return 0;
        }
    }
    return err_set(err, ERR_INVALID_CONTENT,
                   "windows layer: %.300s is not under Files/, Hives/ or UtilityVM/", name);
}

/* --- the layer's names, case folded ------------------------------------- */

struct name_slot {
    char *folded; /* NULL: empty */
    char *path;
    enum wcl_kind kind;
    uint32_t attributes;
};

struct name_table {
    struct name_slot *slots;
    size_t cap, used;
};

static void
fold(char *s)
{
    for (; *s; s++) {
        if (*s >= 'A' && *s <= 'Z')
            *s = (char)(*s - 'A' + 'a');
    }
}

static size_t
hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return (size_t)h;
}

static struct name_slot *
table_find(struct name_table *t, const char *folded)
{
    if (!t->cap)
        return NULL;
    for (size_t i = hash(folded) & (t->cap - 1);; i = (i + 1) & (t->cap - 1)) {
        if (!t->slots[i].folded)
            return &t->slots[i];
        if (strcmp(t->slots[i].folded, folded) == 0)
            return &t->slots[i];
    }
}

static int
table_grow(struct name_table *t)
{
    size_t ncap = t->cap ? t->cap * 2 : 1024;
    struct name_slot *ns = calloc(ncap, sizeof(*ns));
    if (!ns)
        return -ENOMEM;
    struct name_table nt = {ns, ncap, t->used};
    for (size_t i = 0; i < t->cap; i++) {
        if (t->slots[i].folded)
            *table_find(&nt, t->slots[i].folded) = t->slots[i];
    }
    free(t->slots);
    *t = nt;
    return 0;
}

static void
table_free(struct name_table *t)
{
    for (size_t i = 0; i < t->cap; i++) {
        free(t->slots[i].folded);
        free(t->slots[i].path);
    }
    free(t->slots);
}

/* The slot of path (folded), a new empty one when absent; NULL when out of memory. */
static struct name_slot *
table_slot(struct name_table *t, const char *path, char *folded_out)
{
    strcpy(folded_out, path);
    fold(folded_out);
    if ((t->used + 1) * 10 >= t->cap * 7 && table_grow(t) < 0)
        return NULL;
    return table_find(t, folded_out);
}

static int
table_set(struct name_table *t, struct name_slot *s, const char *folded, const char *path,
          enum wcl_kind kind, uint32_t attributes)
{
    if (!s->folded) {
        if (!(s->folded = strdup(folded)))
            return -ENOMEM;
        t->used++;
    }
    char *p = strdup(path);
    if (!p)
        return -ENOMEM;
    free(s->path);
    s->path = p;
    s->kind = kind;
    s->attributes = attributes;
    return 0;
}

/* --- PAX records ---------------------------------------------------------- */

/* "seconds[.fraction]", seconds possibly negative. */
static int
parse_creation_time(const char *s, int64_t *sec, uint32_t *nsec)
{
    bool neg = *s == '-';
    if (neg)
        s++;
    if (*s < '0' || *s > '9')
        return -EINVAL;
    int64_t v = 0;
    for (; *s >= '0' && *s <= '9'; s++) {
        if (v > (INT64_MAX - 9) / 10)
            return -EINVAL;
        v = v * 10 + (*s - '0');
    }
    uint32_t ns = 0;
    if (*s == '.') {
        s++;
        int digits = 0;
        if (*s < '0' || *s > '9')
            return -EINVAL;
        for (; *s >= '0' && *s <= '9'; s++, digits++) {
            if (digits < 9)
                ns = ns * 10 + (uint32_t)(*s - '0');
        }
        for (; digits < 9; digits++)
            ns *= 10;
    }
    if (*s)
        return -EINVAL;
    *sec = neg ? -v : v;
    *nsec = ns;
    return 0;
}

struct decoded {
    unsigned char *sd;
    size_t sd_len;
};

/* Decodes and checks the records of e into w (and d, which owns the descriptor). */
static int
records_decode(const struct wtar_entry *e, const char *path, struct wcl_entry *w, struct decoded *d,
               struct err *err)
{
    for (size_t i = 0; i < e->nrecords; i++) {
        const struct wtar_record *r = &e->records[i];
        if (strcmp(r->key, "MSWINDOWS.rawsd") == 0) {
            free(d->sd);
            d->sd = NULL;
            if (r->vlen > WCL_BLOB_MAX * 4 / 3 + 4 ||
                wcl_base64_decode(r->value, r->vlen, &d->sd, &d->sd_len) < 0)
                return err_set(err, ERR_INVALID_CONTENT,
                               "windows layer: %.300s: MSWINDOWS.rawsd is not base64 of at most %d "
                               "bytes",
                               path, WCL_BLOB_MAX);
            const char *why = NULL;
            if (wcl_sd_check(d->sd, d->sd_len, &why) < 0)
                return err_set(err, ERR_INVALID_CONTENT,
                               "windows layer: %.300s: bad security descriptor: %s", path, why);
            w->sd = d->sd;
            w->sd_len = d->sd_len;
        } else if (strcmp(r->key, "MSWINDOWS.sd") == 0) {
            for (size_t k = 0; k < r->vlen; k++) {
                if (r->value[k] < 0x20 || r->value[k] > 0x7e)
                    return err_set(err, ERR_INVALID_CONTENT,
                                   "windows layer: %.300s: MSWINDOWS.sd is not printable SDDL",
                                   path);
            }
            if (r->vlen == 0 || r->vlen > WCL_BLOB_MAX)
                return err_set(err, ERR_INVALID_CONTENT,
                               "windows layer: %.300s: MSWINDOWS.sd of %zu bytes", path, r->vlen);
            w->sddl = r->value;
        } else if (strcmp(r->key, "MSWINDOWS.fileattr") == 0) {
            char *end = NULL;
            errno = 0;
            unsigned long long v = strtoull(r->value, &end, 10);
            if (r->value[0] < '0' || r->value[0] > '9' || *end || errno || v > UINT32_MAX)
                return err_set(err, ERR_INVALID_CONTENT,
                               "windows layer: %.300s: MSWINDOWS.fileattr %.40s is not a 32-bit "
                               "decimal",
                               path, r->value);
            w->has_attributes = true;
            w->attributes = (uint32_t)v;
        } else if (strcmp(r->key, "LIBARCHIVE.creationtime") == 0) {
            if (parse_creation_time(r->value, &w->creation_sec, &w->creation_nsec) < 0)
                return err_set(err, ERR_INVALID_CONTENT,
                               "windows layer: %.300s: LIBARCHIVE.creationtime %.40s is not "
                               "seconds[.fraction]",
                               path, r->value);
            w->has_creation_time = true;
        } else if (strcmp(r->key, "MSWINDOWS.mountpoint") == 0) {
            w->mount_point = true;
        } else if (strncmp(r->key, "MSWINDOWS.xattr.", 16) == 0) {
            size_t nl = strlen(r->key + 16);
            unsigned char *v = NULL;
            size_t vl = 0;
            if (nl == 0 || nl > 255 || r->vlen > WCL_BLOB_MAX * 4 / 3 + 4 ||
                wcl_base64_decode(r->value, r->vlen, &v, &vl) < 0)
                return err_set(err, ERR_INVALID_CONTENT,
                               "windows layer: %.300s: extended attribute %.80s is not a named "
                               "base64 value",
                               path, r->key);
            free(v);
            w->neas++;
        }
    }
    return 0;
}

/* --- the import ------------------------------------------------------------ */

struct import {
    const struct wcl_sink *sink;
    struct wcl_layer_info *info;
    struct name_table names;
    char path[WCL_PATH_MAX + 1];
    char folded[WCL_PATH_MAX + 1];
    char target[WCL_PATH_MAX + 1];
    char last[WCL_PATH_MAX + 1]; /* the entry a stream belongs to */
    enum wcl_kind last_kind;
    char buf[65536];
};

static int
hive_of(const char *path, enum wcl_hive *out)
{
    const char *n = path + strlen("Hives/");
    for (int h = 0; h < WCL_HIVES; h++) {
        size_t hl = strlen(hive_names[h]);
        if (strncmp(n, hive_names[h], hl) == 0 && strcmp(n + hl, "_Delta") == 0) {
            *out = (enum wcl_hive)h;
            return 0;
        }
    }
    return -1;
}

/* Classifies e into w (paths in im's buffers). */
static int
entry_classify(struct import *im, const struct wtar_entry *e, struct wcl_entry *w, struct err *err)
{
    char *stream = NULL;
    int r = name_normalize(e->name, im->path, &stream, &w->root, err);
    if (r < 0)
        return r;
    w->path = im->path;
    w->size = e->size;
    w->mtime = e->mtime;
    char *base = strrchr(im->path, '/');
    base = base ? base + 1 : im->path;
    switch (e->type) {
    case '0':
        w->kind = stream ? WCL_STREAM : WCL_FILE;
        break;
    case '5':
        w->kind = WCL_DIR;
        break;
    case '2':
        w->kind = WCL_SYMLINK;
        break;
    case '1':
        w->kind = WCL_HARDLINK;
        break;
    default:
        return err_set(err, ERR_INVALID_CONTENT,
                       "windows layer: %.300s is of tar type '%c', which Windows layers do not "
                       "hold",
                       e->name, e->type >= 0x20 && e->type < 0x7f ? e->type : '?');
    }
    if (stream && w->kind != WCL_STREAM)
        return err_set(err, ERR_INVALID_CONTENT,
                       "windows layer: %.300s: only a regular entry may name a stream (':')",
                       e->name);
    if (w->kind == WCL_STREAM) {
        size_t pl = (size_t)(stream - im->path);
        if (!im->last[0] || strlen(im->last) != pl || memcmp(im->last, im->path, pl) != 0 ||
            (im->last_kind != WCL_FILE && im->last_kind != WCL_DIR))
            return err_set(err, ERR_INVALID_CONTENT,
                           "windows layer: stream %.300s does not follow its file", e->name);
    }
    if (strncmp(base, ".wh.", 4) == 0) {
        if (w->root != WCL_ROOT_FILES && w->root != WCL_ROOT_UTILITYVM)
            return err_set(err, ERR_INVALID_CONTENT,
                           "windows layer: whiteout %.300s outside Files/ and UtilityVM/", e->name);
        if (strcmp(base, ".wh..wh..opq") == 0)
            return err_set(err, ERR_INVALID_CONTENT,
                           "windows layer: %.300s: Windows layers have no opaque directories",
                           e->name);
        if (w->kind != WCL_FILE)
            return err_set(err, ERR_INVALID_CONTENT,
                           "windows layer: whiteout %.300s is not a regular entry", e->name);
        int cr = component_check(e->name, base + 4, strlen(base + 4), err);
        if (cr < 0)
            return cr;
        memmove(base, base + 4, strlen(base + 4) + 1);
        w->kind = WCL_WHITEOUT;
        w->size = 0;
    }
    if (w->root == WCL_ROOT_HIVES && strcmp(im->path, "Hives") != 0) {
        enum wcl_hive h;
        if (w->kind != WCL_FILE || strchr(im->path + 6, '/') || hive_of(im->path, &h) < 0)
            return err_set(err, ERR_INVALID_CONTENT,
                           "windows layer: %.300s is not a hive delta (Hives/<DefaultUser, Sam, "
                           "Security, Software or System>_Delta, a file)",
                           e->name);
        im->info->hives |= 1u << h;
    } else if (w->root == WCL_ROOT_HIVES && w->kind != WCL_DIR) {
        return err_set(err, ERR_INVALID_CONTENT, "windows layer: Hives is not a directory");
    }
    if (w->root == WCL_ROOT_UTILITYVM)
        im->info->utility_vm = true;
    return 0;
}

static int
link_check(struct import *im, const struct wtar_entry *e, struct wcl_entry *w, struct err *err)
{
    if (w->kind == WCL_SYMLINK) {
        size_t n = strlen(e->linkname);
        if (n == 0 || n > WCL_PATH_MAX)
            return err_set(err, ERR_INVALID_CONTENT,
                           "windows layer: symlink %.300s has an empty or overlong target",
                           e->name);
        for (size_t i = 0; i < n; i++) {
            if ((unsigned char)e->linkname[i] < 0x20)
                return err_set(err, ERR_INVALID_CONTENT,
                               "windows layer: symlink %.300s has a control character in its "
                               "target",
                               e->name);
        }
        if (!utf8_valid((const unsigned char *)e->linkname, n))
            return err_set(err, ERR_INVALID_CONTENT,
                           "windows layer: symlink %.300s has a target that is not UTF-8", e->name);
        int rc = wcl_reparse_check(w->path, w->root, e->linkname, w->mount_point, err);
        if (rc < 0)
            return rc;
        w->target = e->linkname;
        return 0;
    }
    if (w->mount_point)
        return err_set(err, ERR_INVALID_CONTENT,
                       "windows layer: %.300s: MSWINDOWS.mountpoint on an entry that is not a "
                       "reparse point",
                       e->name);
    if (w->kind != WCL_HARDLINK)
        return 0;
    char *stream = NULL;
    enum wcl_root root;
    int r = name_normalize(e->linkname, im->target, &stream, &root, err);
    if (r < 0)
        return err_wrap(err, "hard link %.300s", e->name);
    if (stream || root != w->root)
        return err_set(err, ERR_INVALID_CONTENT,
                       "windows layer: hard link %.300s leads to %.300s, in another root or a "
                       "stream",
                       e->name, e->linkname);
    char folded[WCL_PATH_MAX + 1];
    strcpy(folded, im->target);
    fold(folded);
    struct name_slot *s = table_find(&im->names, folded);
    if (!s || !s->folded || s->kind != WCL_FILE)
        return err_set(err, ERR_INVALID_CONTENT,
                       "windows layer: hard link %.300s leads to %.300s, which is not a file "
                       "earlier in the layer",
                       e->name, e->linkname);
    w->target = im->target;
    return 0;
}

static int
attributes_check(const struct wtar_entry *e, const struct wcl_entry *w, struct err *err)
{
    if (!w->has_attributes)
        return 0;
    bool dirbit = w->attributes & WCL_ATTR_DIRECTORY;
    if ((w->kind == WCL_DIR && !dirbit) ||
        ((w->kind == WCL_FILE || w->kind == WCL_STREAM || w->kind == WCL_HARDLINK) && dirbit))
        return err_set(err, ERR_INVALID_CONTENT,
                       "windows layer: %.300s: MSWINDOWS.fileattr 0x%x %s the directory bit of a "
                       "%s",
                       e->name, w->attributes, dirbit ? "has" : "lacks",
                       w->kind == WCL_DIR ? "directory" : "file");
    return 0;
}

/*
 * No entry may lie below a reparse point earlier in the layer: the
 * writers build host paths by joining names, and the host follows a
 * junction or directory symlink in them, so "Files/x" to C:\Windows then
 * "Files/x/System32/evil.dll" would be written (and its descriptor set)
 * in the host's own C:\Windows. A target is "inside the layer" only as the
 * container sees it.
 */
static int
parents_check(struct import *im, const struct wcl_entry *w, struct err *err)
{
    char folded[WCL_PATH_MAX + 1];
    strcpy(folded, w->path);
    fold(folded);
    for (char *slash = strchr(folded, '/'); slash; slash = strchr(slash + 1, '/')) {
        *slash = '\0';
        struct name_slot *s = table_find(&im->names, folded);
        *slash = '/';
        if (s && s->folded && s->kind == WCL_SYMLINK)
            return err_set(err, ERR_INVALID_CONTENT,
                           "windows layer: %.300s lies below %.300s, a symlink or junction "
                           "earlier in the layer",
                           w->path, s->path);
    }
    return 0;
}

/* Gives the entry to the sink, making a read-only namesake writable once if it must. */
static int
entry_emit(struct import *im, const struct wcl_entry *w, struct err *err)
{
    struct err serr = {0};
    int r = im->sink->entry(im->sink->ctx, w, &serr);
    if (r == -EACCES && w->replaces_readonly && im->sink->make_writable) {
        r = im->sink->make_writable(im->sink->ctx, w->replaced, &serr);
        if (r == 0) {
            im->info->readonly_retries++;
            r = im->sink->entry(im->sink->ctx, w, &serr);
        }
    }
    if (r < 0) {
        *err = serr;
        if (!err->code)
            err->code = -r;
        return err_wrap(err, "windows layer: %.300s", w->path);
    }
    return 0;
}

static int
entry_data(struct import *im, struct wtar_reader *rd, const struct wcl_entry *w, struct err *err)
{
    if (w->kind != WCL_FILE && w->kind != WCL_STREAM)
        return 0;
    for (;;) {
        ssize_t n = wtar_read_data(rd, im->buf, sizeof(im->buf), err);
        if (n < 0)
            return (int)n;
        int r = im->sink->data(im->sink->ctx, im->buf, (size_t)n, err);
        if (r < 0)
            return err_wrap(err, "windows layer: %.300s", w->path);
        if (n == 0)
            return 0;
        im->info->bytes += (uint64_t)n;
    }
}

static int
import_one(struct import *im, struct wtar_reader *rd, const struct wtar_entry *e, struct err *err)
{
    struct wcl_entry w = {0};
    struct decoded d = {0};
    int r = entry_classify(im, e, &w, err);
    if (r == 0)
        r = records_decode(e, e->name, &w, &d, err);
    if (r == 0)
        r = link_check(im, e, &w, err);
    if (r == 0)
        r = attributes_check(e, &w, err);
    if (r == 0)
        r = parents_check(im, &w, err);
    struct name_slot *s = NULL;
    if (r == 0 && w.kind != WCL_STREAM && w.kind != WCL_WHITEOUT) {
        if (!(s = table_slot(&im->names, w.path, im->folded)))
            r = err_set(err, ENOMEM, "windows layer: out of memory");
    }
    char replaced[WCL_PATH_MAX + 1];
    if (r == 0 && s && s->folded) {
        bool was_dir = s->kind == WCL_DIR, is_dir = w.kind == WCL_DIR;
        if (s->kind == WCL_SYMLINK)
            /* Created over it, the host would follow it: a file written
             * through a link to C:\Windows\x.dll is the host's x.dll. */
            r = err_set(err, ERR_INVALID_CONTENT,
                        "windows layer: %.300s would replace %.300s, a symlink or junction "
                        "earlier in the layer",
                        w.path, s->path);
        else if (was_dir != is_dir)
            r = err_set(err, ERR_INVALID_CONTENT,
                        "windows layer: %.300s would replace %.300s, a %s, with a %s", w.path,
                        s->path, was_dir ? "directory" : "file", is_dir ? "directory" : "file");
        else if (!is_dir) {
            w.replaces = true;
            w.replaces_readonly = (s->attributes & WCL_ATTR_READONLY) != 0;
            strcpy(replaced, s->path);
            w.replaced = replaced;
            if (strcmp(s->path, w.path) != 0)
                im->info->case_collisions++;
        }
    }
    if (r == 0)
        r = entry_emit(im, &w, err);
    if (r == 0 && s)
        r = table_set(&im->names, s, im->folded, w.path, w.kind,
                      w.has_attributes ? w.attributes : 0) < 0
                ? err_set(err, ENOMEM, "windows layer: out of memory")
                : 0;
    if (r == 0)
        r = entry_data(im, rd, &w, err);
    if (r == 0 && w.kind != WCL_STREAM) {
        strcpy(im->last, w.kind == WCL_WHITEOUT ? "" : w.path);
        im->last_kind = w.kind;
    }
    free(d.sd);
    return r;
}

int
wclayer_import(wtar_read_fn read, void *ctx, const struct wcl_sink *sink,
               struct wcl_layer_info *info, struct err *err)
{
    struct import *im = calloc(1, sizeof(*im));
    struct wtar_reader *rd = wtar_reader_new(read, ctx);
    if (!im || !rd) {
        free(im);
        wtar_reader_free(rd);
        return err_set(err, ENOMEM, "windows layer: out of memory");
    }
    memset(info, 0, sizeof(*info));
    im->sink = sink;
    im->info = info;
    int r;
    const struct wtar_entry *e;
    while ((r = wtar_next(rd, &e, err)) > 0) {
        info->entries++;
        if ((r = import_one(im, rd, e, err)) < 0)
            break;
    }
    table_free(&im->names);
    free(im);
    wtar_reader_free(rd);
    if (r < 0) {
        /* Messages quote hostile names: no control character reaches a log. */
        for (char *c = err->msg; *c; c++) {
            if ((unsigned char)*c < 0x20 || *c == 0x7f)
                *c = '?';
        }
        return r;
    }
    return 0;
}

/* --- hive deltas across layers ---------------------------------------------- */

void
wcl_hive_plan_close(struct wcl_hive_plan *p)
{
    for (int h = 0; h < WCL_HIVES; h++) {
        free(p->layers[h]);
        p->layers[h] = NULL;
        p->count[h] = 0;
    }
}

int
wcl_hive_plan_build(const struct wcl_layer_info *layers, size_t n, struct wcl_hive_plan *out,
                    struct err *err)
{
    memset(out, 0, sizeof(*out));
    for (int h = 0; h < WCL_HIVES; h++) {
        if (!(out->layers[h] = calloc(n ? n : 1, sizeof(size_t)))) {
            wcl_hive_plan_close(out);
            return err_set(err, ENOMEM, "hive plan: out of memory");
        }
        for (size_t i = 0; i < n; i++) {
            if (layers[i].hives & (1u << h))
                out->layers[h][out->count[h]++] = i;
        }
    }
    return 0;
}
