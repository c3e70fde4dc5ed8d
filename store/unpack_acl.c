/*
 * POSIX.1e ACLs of a tar entry (pax SCHILY.acl.access / .default, as GNU
 * tar and bsdtar write them) turned into the value of the
 * system.posix_acl_access / system.posix_acl_default xattr, so the
 * writer sets them with one fsetxattr on the open entry, as it does any
 * other xattr, without libacl. NFSv4 ACLs have no Linux xattr form and
 * are left out (the caller logs it).
 *
 * Pure computation; any thread.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store/unpack_int.h"

/* The kernel's format (include/uapi/linux/posix_acl_xattr.h), little endian. */
#define ACL_XATTR_VERSION 0x0002
#define ACL_TAG_USER_OBJ 0x01
#define ACL_TAG_USER 0x02
#define ACL_TAG_GROUP_OBJ 0x04
#define ACL_TAG_GROUP 0x08
#define ACL_TAG_MASK 0x10
#define ACL_TAG_OTHER 0x20
#define ACL_ID_NONE 0xffffffffu

struct acl_ent {
    uint16_t tag;
    uint16_t perm;
    uint32_t id;
};

static int
acl_ent_cmp(const void *a, const void *b)
{
    const struct acl_ent *x = a, *y = b;
    if (x->tag != y->tag)
        return x->tag < y->tag ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

static void
put16(unsigned char *p, uint16_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
}

static void
put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

/* Adds or replaces the entry of (tag, id). */
static void
acl_put(struct acl_ent *v, size_t *n, uint16_t tag, uint16_t perm, uint32_t id)
{
    for (size_t i = 0; i < *n; i++) {
        if (v[i].tag == tag && v[i].id == id) {
            v[i].perm = perm;
            return;
        }
    }
    v[(*n)++] = (struct acl_ent){tag, perm, id};
}

static bool
acl_has(const struct acl_ent *v, size_t n, uint16_t tag)
{
    for (size_t i = 0; i < n; i++)
        if (v[i].tag == tag)
            return true;
    return false;
}

int
unpack_acl_xattr(struct archive_entry *e, int type, void **out, size_t *out_len)
{
    *out = NULL;
    *out_len = 0;
    int count = archive_entry_acl_reset(e, type);
    if (count <= 0)
        return 0;
    struct acl_ent *v = calloc((size_t)count + 4, sizeof(*v));
    if (!v)
        return -ENOMEM;
    size_t n = 0;
    bool named = false;
    int etype, perm, tag, id;
    const char *name;
    while (n < (size_t)count &&
           archive_entry_acl_next(e, type, &etype, &perm, &tag, &id, &name) == ARCHIVE_OK) {
        uint16_t p = (uint16_t)(((perm & ARCHIVE_ENTRY_ACL_READ) ? 4 : 0) |
                                ((perm & ARCHIVE_ENTRY_ACL_WRITE) ? 2 : 0) |
                                ((perm & ARCHIVE_ENTRY_ACL_EXECUTE) ? 1 : 0));
        switch (tag) {
        case ARCHIVE_ENTRY_ACL_USER_OBJ:
            acl_put(v, &n, ACL_TAG_USER_OBJ, p, ACL_ID_NONE);
            break;
        case ARCHIVE_ENTRY_ACL_GROUP_OBJ:
            acl_put(v, &n, ACL_TAG_GROUP_OBJ, p, ACL_ID_NONE);
            break;
        case ARCHIVE_ENTRY_ACL_OTHER:
            acl_put(v, &n, ACL_TAG_OTHER, p, ACL_ID_NONE);
            break;
        case ARCHIVE_ENTRY_ACL_MASK:
            acl_put(v, &n, ACL_TAG_MASK, p, ACL_ID_NONE);
            break;
        case ARCHIVE_ENTRY_ACL_USER:
        case ARCHIVE_ENTRY_ACL_GROUP:
            /* Numeric ids only, as for owners: names mean nothing here. */
            if (id < 0)
                break;
            acl_put(v, &n, tag == ARCHIVE_ENTRY_ACL_USER ? ACL_TAG_USER : ACL_TAG_GROUP, p,
                    (uint32_t)id);
            named = true;
            break;
        default:
            break;
        }
    }
    if (!named && type == ARCHIVE_ENTRY_ACL_TYPE_ACCESS) {
        /* Only what the mode already says. */
        free(v);
        return 0;
    }
    /* The kernel wants all three base entries, and a mask with named ones. */
    mode_t mode = archive_entry_perm(e);
    if (!acl_has(v, n, ACL_TAG_USER_OBJ))
        acl_put(v, &n, ACL_TAG_USER_OBJ, (uint16_t)((mode >> 6) & 7), ACL_ID_NONE);
    if (!acl_has(v, n, ACL_TAG_GROUP_OBJ))
        acl_put(v, &n, ACL_TAG_GROUP_OBJ, (uint16_t)((mode >> 3) & 7), ACL_ID_NONE);
    if (!acl_has(v, n, ACL_TAG_OTHER))
        acl_put(v, &n, ACL_TAG_OTHER, (uint16_t)(mode & 7), ACL_ID_NONE);
    if (named && !acl_has(v, n, ACL_TAG_MASK)) {
        uint16_t m = 0;
        for (size_t i = 0; i < n; i++)
            if (v[i].tag == ACL_TAG_USER || v[i].tag == ACL_TAG_GROUP ||
                v[i].tag == ACL_TAG_GROUP_OBJ)
                m |= v[i].perm;
        acl_put(v, &n, ACL_TAG_MASK, m, ACL_ID_NONE);
    }
    qsort(v, n, sizeof(*v), acl_ent_cmp);
    size_t len = 4 + n * 8;
    unsigned char *buf = malloc(len);
    if (!buf) {
        free(v);
        return -ENOMEM;
    }
    put32(buf, ACL_XATTR_VERSION);
    for (size_t i = 0; i < n; i++) {
        put16(buf + 4 + i * 8, v[i].tag);
        put16(buf + 6 + i * 8, v[i].perm);
        put32(buf + 8 + i * 8, v[i].id);
    }
    free(v);
    *out = buf;
    *out_len = len;
    return 0;
}
