/*
 * Reparse point targets of Windows layer tars, checked and encoded
 * (wclayer_reparse.h has the rules). Pure; any thread.
 */
#include "store/wclayer_reparse.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#define TARGET_MAX 4096

enum form { F_RELATIVE, F_ABSOLUTE };

/* The target with '/' as '\' into out; its form and where its components start. */
static int
classify(const char *path, const char *target, char *out, size_t size, enum form *form,
         const char **rest, struct err *err)
{
    size_t n = strlen(target);
    if (n == 0 || n >= size)
        return err_set(err, ERR_INVALID_CONTENT,
                       "windows layer: reparse point %.300s has an empty or overlong target", path);
    for (size_t i = 0; i <= n; i++)
        out[i] = target[i] == '/' ? '\\' : target[i];
    const char *t = out;
    const char *why = NULL;
    if (strncmp(t, "\\\\?\\", 4) == 0 || strncmp(t, "\\??\\", 4) == 0) {
        t += 4; /* \\?\C:\x and \??\C:\x are C:\x; anything else there is a device or volume */
        if (!(isalpha((unsigned char)t[0]) && t[1] == ':' && t[2] == '\\'))
            why = "names a device or volume, not a path in the image";
    } else if (t[0] == '\\' && t[1] == '\\') {
        why = "names a network share or device (\\\\...), not a path in the image";
    }
    if (!why && isalpha((unsigned char)t[0]) && t[1] == ':') {
        if (toupper((unsigned char)t[0]) != 'C')
            why = "is on another drive than the container's C:";
        else if (t[2] != '\\')
            why = "is relative to C:'s current folder (C:x), which the image does not fix";
        t += 2;
    }
    if (why)
        return err_set(err, ERR_INVALID_CONTENT,
                       "windows layer: reparse point %.300s: target %.300s %s", path, target, why);
    *form = t[0] == '\\' ? F_ABSOLUTE : F_RELATIVE; /* C:\x, \\?\C:\x and \x are C:'s */
    *rest = t;
    return 0;
}

int
wcl_reparse_check(const char *path, enum wcl_root root, const char *target, bool mount_point,
                  struct err *err)
{
    char t[TARGET_MAX];
    enum form form = F_RELATIVE;
    const char *rest = NULL;
    int rc = classify(path, target, t, sizeof(t), &form, &rest, err);
    if (rc < 0)
        return rc;
    /* The folder the container sees as C:\, and the link's folder below it. */
    const char *top = root == WCL_ROOT_FILES ? "Files/" : "UtilityVM/Files/";
    size_t tl = strlen(top);
    if (root == WCL_ROOT_HIVES || strncmp(path, top, tl) != 0)
        return err_set(err, ERR_INVALID_CONTENT,
                       "windows layer: reparse point %.300s is outside %.*s (a layer's links "
                       "live in the container's or the utility vm's files)",
                       path, (int)tl - 1, top);
    if (mount_point && form != F_ABSOLUTE)
        return err_set(err, ERR_INVALID_CONTENT,
                       "windows layer: junction %.300s: target %.300s is relative; a junction "
                       "names an absolute path (C:\\...)",
                       path, target);
    /* Depth below C:\ as the components go; a relative target starts at the link's folder. */
    long depth = 0;
    if (form == F_RELATIVE)
        for (const char *p = path + tl; (p = strchr(p, '/')) != NULL; p++)
            depth++;
    for (const char *p = rest; *p;) {
        while (*p == '\\')
            p++;
        const char *end = strchr(p, '\\');
        size_t cl = end ? (size_t)(end - p) : strlen(p);
        if (cl == 0)
            break;
        if (memchr(p, ':', cl))
            return err_set(err, ERR_INVALID_CONTENT,
                           "windows layer: reparse point %.300s: target %.300s has a ':' in a "
                           "name (a stream or a device)",
                           path, target);
        if (cl == 2 && p[0] == '.' && p[1] == '.') {
            if (--depth < 0)
                return err_set(err, ERR_INVALID_CONTENT,
                               "windows layer: reparse point %.300s: target %.300s leads out of "
                               "the layer's %.*s",
                               path, target, (int)tl - 1, top);
        } else if (!(cl == 1 && p[0] == '.')) {
            depth++;
        }
        p += cl;
    }
    return 0;
}

/* UTF-8 (valid, checked by the parser) as UTF-16LE into out; the bytes written, or -1. */
static long
utf16le(const char *s, unsigned char *out, size_t cap, bool slashes)
{
    size_t n = 0;
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        uint32_t c;
        if (*p < 0x80)
            c = *p++;
        else if ((*p & 0xe0) == 0xc0)
            c = (uint32_t)(*p & 0x1f) << 6 | (p[1] & 0x3f), p += 2;
        else if ((*p & 0xf0) == 0xe0)
            c = (uint32_t)(*p & 0x0f) << 12 | (uint32_t)(p[1] & 0x3f) << 6 | (p[2] & 0x3f), p += 3;
        else
            c = (uint32_t)(*p & 0x07) << 18 | (uint32_t)(p[1] & 0x3f) << 12 |
                (uint32_t)(p[2] & 0x3f) << 6 | (p[3] & 0x3f),
            p += 4;
        if (slashes && c == '/')
            c = '\\';
        uint16_t u[2];
        int k = 1;
        if (c >= 0x10000) {
            c -= 0x10000;
            u[0] = (uint16_t)(0xd800 | (c >> 10));
            u[1] = (uint16_t)(0xdc00 | (c & 0x3ff));
            k = 2;
        } else {
            u[0] = (uint16_t)c;
        }
        for (int i = 0; i < k; i++) {
            if (n + 2 > cap)
                return -1;
            out[n++] = (unsigned char)(u[i] & 0xff);
            out[n++] = (unsigned char)(u[i] >> 8);
        }
    }
    return (long)n;
}

static void
put16(unsigned char *b, unsigned v)
{
    b[0] = (unsigned char)(v & 0xff);
    b[1] = (unsigned char)(v >> 8);
}

static void
put32(unsigned char *b, uint32_t v)
{
    put16(b, v & 0xffff);
    put16(b + 2, v >> 16);
}

int
wcl_reparse_encode(const char *target, bool mount_point, unsigned char *buf, size_t cap,
                   size_t *len, struct err *err)
{
    char t[TARGET_MAX], nt[TARGET_MAX + 8];
    size_t n = strlen(target);
    if (n == 0 || n >= sizeof(t))
        return err_set(err, EINVAL, "reparse point: empty or overlong target");
    for (size_t i = 0; i <= n; i++)
        t[i] = target[i] == '/' ? '\\' : target[i];
    /* As go-winio: \\?\x and \??\x are \??\x, C:\x is \??\C:\x, rooted \x is C:'s, else relative.
     */
    bool relative = false;
    if (strncmp(t, "\\\\?\\", 4) == 0 || strncmp(t, "\\??\\", 4) == 0)
        snprintf(nt, sizeof(nt), "\\??\\%s", t + 4);
    else if (isalpha((unsigned char)t[0]) && t[1] == ':')
        snprintf(nt, sizeof(nt), "\\??\\%s", t);
    else if (t[0] == '\\')
        snprintf(nt, sizeof(nt), "\\??\\C:%s", t);
    else
        snprintf(nt, sizeof(nt), "%s", t), relative = true;
    size_t head = mount_point ? 16 : 20;
    if (cap > WCL_REPARSE_MAX)
        cap = WCL_REPARSE_MAX;
    if (cap < head)
        return err_set(err, ENOSPC, "reparse point %.300s: no room for its data", target);
    long sub = utf16le(nt, buf + head, cap - head, false);
    long print = sub < 0 ? -1 : utf16le(t, buf + head + sub, cap - head - (size_t)sub, false);
    if (sub < 0 || print < 0 || sub > 0xffff || print > 0xffff)
        return err_set(err, ERR_INVALID_CONTENT,
                       "reparse point target %.300s: longer than a reparse point holds", target);
    put32(buf, mount_point ? WCL_REPARSE_TAG_MOUNT_POINT : WCL_REPARSE_TAG_SYMLINK);
    put16(buf + 4, (unsigned)(head - 8 + (size_t)sub + (size_t)print));
    put16(buf + 6, 0);
    put16(buf + 8, 0);                /* SubstituteNameOffset */
    put16(buf + 10, (unsigned)sub);   /* SubstituteNameLength */
    put16(buf + 12, (unsigned)sub);   /* PrintNameOffset */
    put16(buf + 14, (unsigned)print); /* PrintNameLength */
    if (!mount_point)
        put32(buf + 16, relative ? WCL_SYMLINK_FLAG_RELATIVE : 0);
    *len = head + (size_t)sub + (size_t)print;
    return 0;
}
