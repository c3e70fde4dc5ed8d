/*
 * POSIX to Windows path conversion and raw:// rootfs URIs (winpath.h).
 * Pure string work; any thread.
 */
#include "runtime/hcs/winpath.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/pctdecode.h"

static bool
is_sep(char c)
{
    return c == '/' || c == '\\';
}

static bool
is_drive_letter(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}

/* CON, PRN, AUX, NUL, COM1-9, LPT1-9, compared up to the first dot. */
static bool
reserved_name(const char *c, size_t len)
{
    static const char *const names[] = {"CON", "PRN", "AUX", "NUL"};
    const char *dot = memchr(c, '.', len);
    size_t base = dot ? (size_t)(dot - c) : len;
    /* Win32 also ignores trailing spaces before the extension ("NUL .txt"). */
    while (base && c[base - 1] == ' ')
        base--;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (base == 3 && strncasecmp(c, names[i], 3) == 0)
            return true;
    if (base == 4 && (strncasecmp(c, "COM", 3) == 0 || strncasecmp(c, "LPT", 3) == 0) &&
        c[3] >= '1' && c[3] <= '9')
        return true;
    return false;
}

/* Why the component c (len bytes) cannot be one, or NULL when it can. */
static const char *
component_problem(const char *c, size_t len, char *why, size_t size)
{
    if (len == 2 && c[0] == '.' && c[1] == '.')
        return "has a \"..\" component";
    if (len > 255)
        return "has a component longer than 255 bytes";
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)c[i];
        if (ch < 0x20) {
            snprintf(why, size, "has a control character (0x%02x)", ch);
            return why;
        }
        if (strchr("<>:\"|?*", ch)) {
            snprintf(why, size, "has a '%c', which Windows does not allow in a name", ch);
            return why;
        }
    }
    if (c[len - 1] == '.' || c[len - 1] == ' ')
        return "has a component ending in a dot or a space, which Windows strips";
    if (reserved_name(c, len)) {
        snprintf(why, size, "has the reserved device name \"%.*s\"", (int)len, c);
        return why;
    }
    return NULL;
}

int
hcs_path_to_windows(const char *path, char *out, size_t size, struct err *err)
{
    if (!path || !*path)
        return err_set(err, EINVAL, "path is empty");
    if (strlen(path) > HCS_PATH_MAX)
        return err_set(err, EINVAL, "path %.64s...: longer than %d bytes", path, HCS_PATH_MAX);

    char drive;
    const char *rest;
    if (path[0] == '/' && path[1] != '/') {
        drive = 'C';
        rest = path + 1;
    } else if (is_sep(path[0]) && is_sep(path[1])) {
        return err_set(err, EINVAL,
                       "path %.200s: a UNC or device path (\\\\server\\share, \\\\?\\...), not "
                       "a path in the container",
                       path);
    } else if (path[0] == '\\') {
        return err_set(err, EINVAL, "path %.200s: rooted without a drive, want /x or C:\\x", path);
    } else if (is_drive_letter(path[0]) && path[1] == ':') {
        if (!is_sep(path[2]))
            return err_set(err, EINVAL,
                           "path %.200s: drive-relative (relative to drive %c's current "
                           "directory), want %c:\\...",
                           path, toupper((unsigned char)path[0]), toupper((unsigned char)path[0]));
        drive = (char)toupper((unsigned char)path[0]);
        rest = path + 3;
    } else {
        return err_set(err, EINVAL, "path %.200s: not absolute, want /x or C:\\x", path);
    }

    if (size < 4)
        return err_set(err, EINVAL, "path %.200s: does not fit in %zu bytes", path, size);
    size_t o = 0;
    out[o++] = drive;
    out[o++] = ':';
    out[o++] = '\\';
    for (const char *c = rest; *c;) {
        while (is_sep(*c))
            c++;
        const char *end = c;
        while (*end && !is_sep(*end))
            end++;
        size_t len = (size_t)(end - c);
        if (len == 0)
            break;
        if (!(len == 1 && c[0] == '.')) {
            char why[96];
            const char *problem = component_problem(c, len, why, sizeof(why));
            if (problem)
                return err_set(err, EINVAL, "path %.200s: %s", path, problem);
            bool first = o == 3;
            if (o + !first + len + 1 > size)
                return err_set(err, EINVAL, "path %.200s: does not fit in %zu bytes", path, size);
            if (!first)
                out[o++] = '\\';
            memcpy(out + o, c, len);
            o += len;
        }
        c = end;
    }
    out[o] = '\0';
    return 0;
}

bool
hcs_path_is_windows(const char *s)
{
    if (!s || !is_drive_letter(s[0]) || s[0] != toupper((unsigned char)s[0]) || s[1] != ':' ||
        s[2] != '\\')
        return false;
    size_t len = strlen(s);
    char *norm = malloc(len + 1);
    if (!norm)
        return false;
    bool ok = hcs_path_to_windows(s, norm, len + 1, NULL) == 0 && strcmp(norm, s) == 0;
    free(norm);
    return ok;
}

/* A raw rootfs's decoded path (what names it in messages) to the normal form. */
static int
from_decoded(const char *what, const char *decoded, char *out, size_t size, struct err *err)
{
    if (!(is_drive_letter(decoded[0]) && decoded[1] == ':'))
        return err_set(err, EINVAL,
                       "rootfs %.200s: the path %.200s is not a windows path (want a drive, "
                       "e.g. raw:///C%%3A%%5Cdir)",
                       what, decoded);
    int r = hcs_path_to_windows(decoded, out, size, err);
    if (r < 0)
        return err_wrap(err, "rootfs %.200s", what);
    return 0;
}

int
hcs_path_from_raw_uri(const char *uri, char *out, size_t size, struct err *err)
{
    static const char prefix[] = "raw://";
    if (!uri || strncmp(uri, prefix, sizeof(prefix) - 1) != 0)
        return err_set(err, EINVAL, "rootfs %.200s: not a raw:// uri", uri ? uri : "(null)");
    const char *s = uri + sizeof(prefix) - 1;
    if (s[0] != '/')
        return err_set(err, EINVAL,
                       "rootfs %.200s: want raw:///<percent-encoded windows path>, "
                       "e.g. raw:///C%%3A%%5Cdir",
                       uri);
    s++;
    size_t len = strlen(s);
    if (len > HCS_PATH_MAX)
        return err_set(err, EINVAL, "rootfs %.64s...: longer than %d bytes", uri, HCS_PATH_MAX);
    char decoded[HCS_PATH_MAX + 1];
    if (pct_decode(s, len, decoded, sizeof(decoded)) < 0)
        return err_set(err, EINVAL,
                       "rootfs %.200s: a %% escape is not two hex digits, or is an escaped NUL "
                       "(%%00)",
                       uri);
    return from_decoded(uri, decoded, out, size, err);
}

int
hcs_path_from_raw_path(const char *path, char *out, size_t size, struct err *err)
{
    if (!path)
        return err_set(err, EINVAL, "rootfs: no path");
    return from_decoded(path, path[0] == '/' ? path + 1 : path, out, size, err);
}
