/*
 * The mount journal (mount_journal.h): entries, their text form with its
 * checksum, and replay. The file operations are mount_journal_io.h's.
 * Blocking; pool threads or start-up.
 */
#include "store/mount_journal.h"

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/strv.h"
#include "store/mount_journal_io.h"

#define MJ_MAGIC "berth-mount 1"
#define MJ_SUFFIX ".mnt"
#define MJ_TMP_PREFIX ".tmp-"
#define MJ_CORRUPT_PREFIX ".corrupt-"
#define MJ_KEY_MAX 64

struct mjournal {
    char *dir;
};

/* ---- entries ----------------------------------------------------------------------------------
 */

bool
mj_name_valid(const char *name)
{
    size_t n = name ? strlen(name) : 0;
    if (n == 0 || n > MJ_NAME_MAX || name[0] == '.')
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)name[i]) && !strchr("_.-", name[i]))
            return false;
    return true;
}

static bool
word_valid(const char *w)
{
    size_t n = w ? strlen(w) : 0;
    if (n == 0 || n > MJ_WORD_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)w[i] <= ' ' || (unsigned char)w[i] >= 0x7f)
            return false;
    return true;
}

static bool
key_valid(const char *k)
{
    size_t n = k ? strlen(k) : 0;
    if (n == 0 || n > MJ_KEY_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!islower((unsigned char)k[i]) && !isdigit((unsigned char)k[i]) && k[i] != '_' &&
            k[i] != '-')
            return false;
    return true;
}

static bool
value_valid(const char *v)
{
    return v && strlen(v) <= MJ_VALUE_MAX && !strpbrk(v, "\r\n");
}

struct mj_entry *
mj_entry_new(const char *name, const char *owner, const char *kind)
{
    struct mj_entry *e = calloc(1, sizeof(*e));
    if (!e)
        return NULL;
    e->name = strdup(name ? name : "");
    e->owner = strdup(owner ? owner : "");
    e->kind = strdup(kind ? kind : "");
    if (!e->name || !e->owner || !e->kind) {
        mj_entry_free(e);
        return NULL;
    }
    return e;
}

void
mj_entry_free(struct mj_entry *e)
{
    if (!e)
        return;
    for (size_t i = 0; i < e->nfields; i++) {
        free(e->fields[i].key);
        free(e->fields[i].value);
    }
    free(e->fields);
    free(e->name);
    free(e->owner);
    free(e->kind);
    free(e);
}

struct mj_entry *
mj_entry_dup(const struct mj_entry *e)
{
    struct mj_entry *d = mj_entry_new(e->name, e->owner, e->kind);
    for (size_t i = 0; d && i < e->nfields; i++) {
        if (mj_entry_set(d, e->fields[i].key, e->fields[i].value, NULL) < 0) {
            mj_entry_free(d);
            d = NULL;
        }
    }
    return d;
}

int
mj_entry_set(struct mj_entry *e, const char *key, const char *value, struct err *err)
{
    if (!key_valid(key))
        return err_set(err, EINVAL, "mount journal: bad field name %.80s", key ? key : "(null)");
    if (!value_valid(value))
        return err_set(err, EINVAL, "mount journal: field %s: value too long or has a line break",
                       key);
    char *v = strdup(value);
    if (!v)
        return err_set(err, ENOMEM, "mount journal: out of memory");
    for (size_t i = 0; i < e->nfields; i++) {
        if (strcmp(e->fields[i].key, key) == 0) {
            free(e->fields[i].value);
            e->fields[i].value = v;
            return 0;
        }
    }
    if (e->nfields == MJ_FIELDS_MAX) {
        free(v);
        return err_set(err, E2BIG, "mount journal: more than %d fields", MJ_FIELDS_MAX);
    }
    char *k = strdup(key);
    struct mj_field *f = k ? realloc(e->fields, (e->nfields + 1) * sizeof(*f)) : NULL;
    if (!f) {
        free(k);
        free(v);
        return err_set(err, ENOMEM, "mount journal: out of memory");
    }
    e->fields = f;
    e->fields[e->nfields].key = k;
    e->fields[e->nfields].value = v;
    e->nfields++;
    return 0;
}

const char *
mj_entry_get(const struct mj_entry *e, const char *key)
{
    for (size_t i = 0; e && i < e->nfields; i++)
        if (strcmp(e->fields[i].key, key) == 0)
            return e->fields[i].value;
    return NULL;
}

const char *
mj_owner_container(const char *owner)
{
    size_t n = strlen(MJ_OWNER_CONTAINER);
    if (!owner || strncmp(owner, MJ_OWNER_CONTAINER, n) != 0 || !owner[n])
        return NULL;
    return owner + n;
}

/* ---- text -------------------------------------------------------------------------------------
 */

/* CRC-32 (IEEE 802.3, reflected), bit by bit: entries are a few hundred bytes. */
static uint32_t
crc32_of(const char *p, size_t n)
{
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= (unsigned char)p[i];
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
    }
    return ~c;
}

static int
entry_check(const struct mj_entry *e, struct err *err)
{
    if (!mj_name_valid(e->name))
        return err_set(err, EINVAL, "mount journal: bad entry name %.80s", e->name);
    if (!word_valid(e->owner))
        return err_set(err, EINVAL, "mount journal: entry %s: bad owner %.80s", e->name, e->owner);
    if (!word_valid(e->kind))
        return err_set(err, EINVAL, "mount journal: entry %s: bad kind %.80s", e->name, e->kind);
    for (size_t i = 0; i < e->nfields; i++)
        if (!key_valid(e->fields[i].key) || !value_valid(e->fields[i].value))
            return err_set(err, EINVAL, "mount journal: entry %s: bad field %.80s", e->name,
                           e->fields[i].key);
    return 0;
}

int
mj_entry_format(const struct mj_entry *e, char **text, size_t *len, struct err *err)
{
    int r = entry_check(e, err);
    if (r < 0)
        return r;
    size_t cap = 64 + strlen(MJ_MAGIC) + strlen(e->owner) + strlen(e->kind);
    for (size_t i = 0; i < e->nfields; i++)
        cap += 8 + strlen(e->fields[i].key) + strlen(e->fields[i].value);
    char *t = malloc(cap);
    if (!t)
        return err_set(err, ENOMEM, "mount journal: out of memory");
    size_t o = (size_t)snprintf(t, cap, "%s\nowner %s\nkind %s\n", MJ_MAGIC, e->owner, e->kind);
    for (size_t i = 0; i < e->nfields; i++)
        o += (size_t)snprintf(t + o, cap - o, "f %s=%s\n", e->fields[i].key, e->fields[i].value);
    o += (size_t)snprintf(t + o, cap - o, "sum %08x\n", (unsigned)crc32_of(t, o));
    *text = t;
    *len = o;
    return 0;
}

static int
damaged(struct err *err, const char *name, const char *why)
{
    return err_set(err, ERR_INVALID_CONTENT, "mount journal entry %s: %s", name, why);
}

int
mj_entry_parse(const char *name, const char *text, size_t len, struct mj_entry **out,
               struct err *err)
{
    if (!mj_name_valid(name))
        return damaged(err, name ? name : "(null)", "bad name");
    if (memchr(text, '\0', len))
        return damaged(err, name, "a NUL byte");
    /* The checksum line is the last one and covers everything before it. */
    if (len < 14 || text[len - 1] != '\n')
        return damaged(err, name, "torn (no final line)");
    size_t last = len - 1;
    while (last > 0 && text[last - 1] != '\n')
        last--;
    uint32_t sum = 0;
    bool hex = len - last == 13 && strncmp(text + last, "sum ", 4) == 0;
    for (size_t i = last + 4; hex && i < last + 12; i++) {
        char c = text[i];
        hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
        sum = sum << 4 | (uint32_t)(c <= '9' ? c - '0' : c - 'a' + 10);
    }
    if (!hex)
        return damaged(err, name, "torn (no checksum line)");
    if (crc32_of(text, last) != sum)
        return damaged(err, name, "checksum mismatch");

    struct mj_entry *e = mj_entry_new(name, NULL, NULL);
    if (!e)
        return err_set(err, ENOMEM, "mount journal: out of memory");
    char *copy = malloc(last + 1);
    if (!copy) {
        mj_entry_free(e);
        return err_set(err, ENOMEM, "mount journal: out of memory");
    }
    memcpy(copy, text, last);
    copy[last] = '\0';
    int r = 0;
    bool magic = false;
    char *save = NULL;
    for (char *line = strtok_r(copy, "\n", &save); line && r == 0;
         line = strtok_r(NULL, "\n", &save)) {
        if (!magic) {
            magic = strcmp(line, MJ_MAGIC) == 0;
            if (!magic)
                r = damaged(err, name, "not a berth mount journal entry");
        } else if (strncmp(line, "owner ", 6) == 0) {
            free(e->owner);
            if (!(e->owner = strdup(line + 6)))
                r = err_set(err, ENOMEM, "mount journal: out of memory");
        } else if (strncmp(line, "kind ", 5) == 0) {
            free(e->kind);
            if (!(e->kind = strdup(line + 5)))
                r = err_set(err, ENOMEM, "mount journal: out of memory");
        } else if (strncmp(line, "f ", 2) == 0) {
            char *eq = strchr(line + 2, '=');
            if (!eq) {
                r = damaged(err, name, "a field without '='");
            } else {
                *eq = '\0';
                struct err ferr = {0};
                if (mj_entry_get(e, line + 2))
                    r = damaged(err, name, "a field given twice");
                else if (mj_entry_set(e, line + 2, eq + 1, &ferr) < 0)
                    r = ferr.code == ENOMEM ? err_set(err, ENOMEM, "%s", ferr.msg)
                                            : damaged(err, name, "a bad field");
            }
        } else {
            r = damaged(err, name, "an unknown line");
        }
    }
    free(copy);
    if (r == 0 && !magic)
        r = damaged(err, name, "empty");
    if (r == 0 && (!word_valid(e->owner) || !word_valid(e->kind)))
        r = damaged(err, name, "no owner or kind");
    if (r < 0) {
        mj_entry_free(e);
        return r;
    }
    *out = e;
    return 0;
}

/* ---- the journal ------------------------------------------------------------------------------
 */

int
mjournal_open(const char *dir, struct mjournal **out, struct err *err)
{
    int r = mj_io_mkdir(dir);
    if (r < 0)
        return err_errno(err, -r, "open mount journal %s", dir);
    struct mjournal *j = calloc(1, sizeof(*j));
    if (!j || !(j->dir = strdup(dir))) {
        free(j);
        return err_set(err, ENOMEM, "open mount journal: out of memory");
    }
    *out = j;
    return 0;
}

void
mjournal_free(struct mjournal *j)
{
    if (!j)
        return;
    free(j->dir);
    free(j);
}

const char *
mjournal_dir(const struct mjournal *j)
{
    return j->dir;
}

static void
file_name(char *buf, size_t size, const char *name)
{
    snprintf(buf, size, "%s%s", name, MJ_SUFFIX);
}

int
mjournal_put(struct mjournal *j, const struct mj_entry *e, struct err *err)
{
    char *text = NULL;
    size_t len = 0;
    int r = mj_entry_format(e, &text, &len, err);
    if (r < 0)
        return r;
    char file[MJ_NAME_MAX + 8], tmp[MJ_NAME_MAX + 48];
    file_name(file, sizeof(file), e->name);
    snprintf(tmp, sizeof(tmp), "%s%s-%lx", MJ_TMP_PREFIX, e->name, mj_io_unique());
    r = mj_io_write_atomic(j->dir, tmp, file, text, len);
    free(text);
    if (r < 0)
        return err_errno(err, -r, "mount journal %s: write entry %s", j->dir, e->name);
    return 0;
}

int
mjournal_remove(struct mjournal *j, const char *name, struct err *err)
{
    if (!mj_name_valid(name))
        return err_set(err, EINVAL, "mount journal: bad entry name %.80s", name ? name : "(null)");
    char file[MJ_NAME_MAX + 8];
    file_name(file, sizeof(file), name);
    int r = mj_io_remove(j->dir, file);
    if (r < 0)
        return err_errno(err, -r, "mount journal %s: remove entry %s", j->dir, name);
    return 0;
}

int
mjournal_get(struct mjournal *j, const char *name, struct mj_entry **out, struct err *err)
{
    if (!mj_name_valid(name))
        return err_set(err, EINVAL, "mount journal: bad entry name %.80s", name ? name : "(null)");
    char file[MJ_NAME_MAX + 8];
    file_name(file, sizeof(file), name);
    char *text = NULL;
    size_t len = 0;
    int r = mj_io_read(j->dir, file, MJ_FILE_MAX, &text, &len);
    if (r == -ENOENT)
        return err_set(err, ENOENT, "mount journal: no entry %s", name);
    if (r == -EFBIG)
        return damaged(err, name, "larger than any entry berth writes");
    if (r < 0)
        return err_errno(err, -r, "mount journal %s: read entry %s", j->dir, name);
    r = mj_entry_parse(name, text, len, out, err);
    free(text);
    return r;
}

/* The entry name of a journal file name, in buf, or NULL when it is not one. */
static const char *
entry_name_of(const char *file, char *buf, size_t size)
{
    size_t n = strlen(file), s = strlen(MJ_SUFFIX);
    if (n <= s || strcmp(file + n - s, MJ_SUFFIX) != 0 || n - s >= size)
        return NULL;
    memcpy(buf, file, n - s);
    buf[n - s] = '\0';
    return mj_name_valid(buf) ? buf : NULL;
}

static int
by_name(const void *a, const void *b)
{
    const struct mj_entry *x = *(const struct mj_entry *const *)a;
    const struct mj_entry *y = *(const struct mj_entry *const *)b;
    return strcmp(x->name, y->name);
}

void
mj_entry_list_free(struct mj_entry **v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        mj_entry_free(v[i]);
    free(v);
}

int
mjournal_list(struct mjournal *j, const char *owner, struct mj_entry ***out, size_t *n,
              size_t *ndamaged, struct err *err)
{
    char **names = NULL;
    int r = mj_io_list(j->dir, &names);
    if (r < 0)
        return err_errno(err, -r, "mount journal %s: list", j->dir);
    size_t cap = strv_len(names), k = 0, bad = 0;
    struct mj_entry **v = calloc(cap ? cap : 1, sizeof(*v));
    if (!v) {
        strv_free(names);
        return err_set(err, ENOMEM, "mount journal: out of memory");
    }
    for (size_t i = 0; i < cap; i++) {
        char buf[MJ_NAME_MAX + 1];
        const char *name = entry_name_of(names[i], buf, sizeof(buf));
        if (!name)
            continue;
        struct mj_entry *e = NULL;
        struct err gerr = {0};
        int gr = mjournal_get(j, name, &e, &gerr);
        if (gr == -ENOENT)
            continue; /* removed meanwhile */
        if (gr == -ENOMEM) {
            mj_entry_list_free(v, k);
            strv_free(names);
            return err_set(err, ENOMEM, "mount journal: out of memory");
        }
        if (gr < 0) {
            bad++;
            continue;
        }
        if (owner && strcmp(e->owner, owner) != 0) {
            mj_entry_free(e);
            continue;
        }
        v[k++] = e;
    }
    strv_free(names);
    qsort(v, k, sizeof(*v), by_name);
    *out = v;
    *n = k;
    if (ndamaged)
        *ndamaged = bad;
    return 0;
}

/* Whether the entry file is there and empty. */
static bool
entry_empty(const struct mjournal *j, const char *file)
{
    char *text = NULL;
    size_t len = 1;
    int r = mj_io_read(j->dir, file, MJ_FILE_MAX, &text, &len);
    free(text);
    return r == 0 && len == 0;
}

int
mjournal_replay(struct mjournal *j, mj_keep_fn keep, mj_undo_fn undo, void *arg,
                struct mj_replay_stats *st, struct err *err)
{
    struct mj_replay_stats s = {0};
    char **names = NULL;
    int r = mj_io_list(j->dir, &names);
    if (r < 0)
        return err_errno(err, -r, "mount journal %s: list", j->dir);
    /* Temporaries first (no mount was made after them), then damaged entries aside. */
    for (size_t i = 0; names[i]; i++) {
        if (strncmp(names[i], MJ_TMP_PREFIX, strlen(MJ_TMP_PREFIX)) == 0) {
            int rr = mj_io_remove(j->dir, names[i]);
            if (rr < 0)
                log_warn("mount journal %s: remove %s: %s", j->dir, names[i], strerror(-rr));
            else
                s.temporary++;
            continue;
        }
        char buf[MJ_NAME_MAX + 1];
        const char *name = entry_name_of(names[i], buf, sizeof(buf));
        if (!name)
            continue;
        struct mj_entry *e = NULL;
        struct err gerr = {0};
        int gr = mjournal_get(j, name, &e, &gerr);
        if (gr == -ERR_INVALID_CONTENT && entry_empty(j, names[i])) {
            /* Linux writes entries unsynced (mount_journal_io_linux.c): an
             * empty one is a write a power loss cut short, and no mount it
             * could have named outlived that boot. */
            int rr = mj_io_remove(j->dir, names[i]);
            if (rr < 0)
                log_warn("mount journal %s: remove %s: %s", j->dir, names[i], strerror(-rr));
            else
                s.temporary++;
        } else if (gr == -ERR_INVALID_CONTENT) {
            char aside[MJ_NAME_MAX + 32];
            snprintf(aside, sizeof(aside), "%s%s", MJ_CORRUPT_PREFIX, names[i]);
            int rr = mj_io_rename(j->dir, names[i], aside);
            log_error("mount journal %s: %s; set aside as %s%s%s: what it mounted, if anything, "
                      "must be undone by hand",
                      j->dir, gerr.msg, aside, rr < 0 ? " failed: " : "",
                      rr < 0 ? strerror(-rr) : "");
            s.damaged++;
        }
        mj_entry_free(e);
    }
    strv_free(names);

    struct mj_entry **v = NULL;
    size_t n = 0;
    if ((r = mjournal_list(j, NULL, &v, &n, NULL, err)) < 0)
        return r;
    for (size_t i = 0; i < n; i++) {
        struct mj_entry *e = v[i];
        if (keep && keep(arg, e)) {
            s.kept++;
            continue;
        }
        struct err uerr = {0};
        int ur = undo ? undo(arg, e, &uerr) : err_set(&uerr, ENOTSUP, "no undo");
        if (ur == 0)
            ur = mjournal_remove(j, e->name, &uerr);
        if (ur < 0) {
            log_error("mount journal: %s (%s, owner %s): cannot undo it: %s; kept for the next "
                      "start",
                      e->name, e->kind, e->owner, uerr.msg);
            s.failed++;
        } else {
            log_info("mount journal: undid %s (%s) left by %s", e->name, e->kind, e->owner);
            s.undone++;
        }
    }
    mj_entry_list_free(v, n);
    if (st)
        *st = s;
    return 0;
}
