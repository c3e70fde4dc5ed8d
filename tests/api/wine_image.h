/*
 * Windows images for the suites that drive berthd.exe under Wine
 * (test_wine.c, test_wine_cimfs.c): a layer tar of Files\ and Hives\, a
 * layout of a base layer and a child for a platform, its upload, and the
 * host's build as a platform refusal names it (the os_version an image
 * must have to be imported there). Header-only (static functions): each
 * suite is one executable. Test code only.
 */
#ifndef BERTH_TESTS_API_WINE_IMAGE_H
#define BERTH_TESTS_API_WINE_IMAGE_H

#include <check.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/api/harness.h"
#include "tests/fixtures/imgfix.h"

/* Uploads the layout in dir as a tar stream. */
static inline void
upload_layout(struct berthd *b, const char *dir, const char *query, struct hresp *out)
{
    struct fx_buf t = {0};
    fx_tar_dir(&t, dir);
    struct fx_src src = {.data = t.data, .len = t.len};
    char path[256];
    snprintf(path, sizeof(path), "/v1/images%s", query ? query : "");
    fx_post(b, path, "application/x-tar", NULL, &src, false, 60000, out);
    free(t.data);
}

/* A Windows layer tar: Files/ with a file whose content is tag, Hives/,
 * and, when hostile, a name that climbs out of Files/. */
static inline void
windows_layer(struct fx_buf *t, const char *tag, bool hostile)
{
    fx_tar_add(t, "Files/", '5', NULL, NULL, 0, 0755);
    fx_tar_file(t, "Files/motd.txt", tag);
    if (hostile)
        fx_tar_file(t, "Files/../escape.txt", "out");
    fx_tar_add(t, "Hives/", '5', NULL, NULL, 0, 0755);
    fx_tar_end(t);
}

/* A layout for os/arch (os_version may be NULL) of a base Windows layer
 * and, with child, a second one on it. */
static inline void
make_layout(const char *dir, const char *os, const char *os_version, const char *ref, bool corrupt,
            bool child, bool hostile)
{
    struct fx_buf base = {0}, top = {0};
    windows_layer(&base, ref, false);
    windows_layer(&top, "top", hostile);
    struct fx_layout l = {.layers = {&base, child ? &top : NULL},
                          .os = os,
                          .arch = "amd64",
                          .os_version = os_version,
                          .ref_name = ref,
                          .corrupt_layer = corrupt};
    fx_write_layout(dir, &l);
    free(base.data);
    free(top.data);
}

/* The host's "major.minor.build" from a platform refusal's message (Wine
 * 8's prefixes say Windows 7, 6.1.7601, unless winecfg changed it). */
static inline void
host_build_from(const struct hresp *r, char *out, size_t len)
{
    const char *msg = json_object_get_string(json_at(r->json, "error.message"));
    const char *p = msg ? strstr(msg, "this host runs windows/amd64 ") : NULL;
    ck_assert_msg(p, "no host platform in: %s", r->body);
    p += strlen("this host runs windows/amd64 ");
    size_t n = 0;
    for (int dots = 0; (p[n] >= '0' && p[n] <= '9') || (p[n] == '.' && ++dots < 3); n++)
        ;
    ck_assert_msg(n > 4 && n < len, "no host version in: %s", msg);
    memcpy(out, p, n);
    out[n] = '\0';
}

#endif
