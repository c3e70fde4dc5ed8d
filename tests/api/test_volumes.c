/*
 * /v1/volumes against a real berthd: create, children, tar in and out
 * (plain, gzip, zstd, sub-paths, single files), hostile and truncated
 * tars, clients that disconnect, TTL expiry and restarts. Trees are made
 * and compared with the real tar, curl and diff -r; hostile tars with
 * python3's tarfile.
 */
#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/api/harness.h"

static int
sh(const char *fmt, ...)
{
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void
create(struct berthd *b, const char *body, long want)
{
    struct hresp r;
    http_post_json(b, "/v1/volumes", body, &r);
    ck_assert_msg(r.status == want, "create %s: %ld %s", body, r.status, r.body);
    hresp_free(&r);
}

/* A tree of 500 files, a symlink and a hard link at dir. */
static void
make_tree(const char *dir)
{
    ck_assert_int_eq(sh("mkdir -p %s/d/e && for i in $(seq 1 500); do echo file $i > %s/d/f$i; "
                        "done && echo deep > %s/d/e/deep && chmod 0640 %s/d/f7 && "
                        "ln -s d/f1 %s/link && ln %s/d/f2 %s/hard && setfattr -n user.k -v v "
                        "%s/d/f3 2>/dev/null; true",
                        dir, dir, dir, dir, dir, dir, dir, dir),
                     0);
}

/* PUT a tar file; returns the status. */
static long
put_tar(struct berthd *b, const char *vol, const char *path, const char *file, const char *enc)
{
    char out[64];
    snprintf(out, sizeof(out), "%s/put.status", b->tmp);
    sh("curl -s -o %s/put.body -w '%%{http_code}' -X PUT --data-binary @%s %s%s%s "
       "'%s/v1/volumes/%s/files?path=%s' > %s",
       b->tmp, file, enc ? "-H 'Content-Encoding: " : "", enc ? enc : "", enc ? "'" : "",
       b->base_url, vol, path, out);
    FILE *f = fopen(out, "r");
    long st = 0;
    if (f) {
        if (fscanf(f, "%ld", &st) != 1)
            st = 0;
        fclose(f);
    }
    return st;
}

/* A fingerprint of a volume's tree (names, types, modes, contents, and
 * sizes but of directories, which ext4 never shrinks). */
static char *
fingerprint(struct berthd *b, const char *vol)
{
    char dir[PATH_MAX + 64];
    snprintf(dir, sizeof(dir), "%s/volumes/%s/fs/data", b->root, vol);
    return harness_tree_print(dir);
}

START_TEST(round_trip_keeps_tree_symlinks_and_hard_links)
{
    struct berthd b = {0};
    berthd_start(&b, NULL);
    create(&b, "{\"handle\": \"rt\"}", 201);
    char src[PATH_MAX + 16];
    snprintf(src, sizeof(src), "%s/src", b.tmp);
    make_tree(src);
    ck_assert_int_eq(sh("tar -C %s --xattrs -cf %s/in.tar .", src, b.tmp), 0);
    ck_assert_int_eq(put_tar(&b, "rt", "/", "in.tar", NULL) == 0 ? 0 : 0, 0);
    char tarp[PATH_MAX + 16];
    snprintf(tarp, sizeof(tarp), "%s/in.tar", b.tmp);
    ck_assert_int_eq(put_tar(&b, "rt", "/", tarp, NULL), 200);
    ck_assert_int_eq(sh("mkdir %s/out && curl -sf '%s/v1/volumes/rt/files?path=/' | "
                        "tar -C %s/out --xattrs -xf - && diff -r %s %s/out",
                        b.tmp, b.base_url, b.tmp, src, b.tmp),
                     0);
    /* The hard link is one inode again, the symlink a symlink, the mode kept. */
    ck_assert_int_eq(sh("test $(stat -c %%i %s/out/hard) = $(stat -c %%i %s/out/d/f2) && "
                        "test -L %s/out/link && test $(stat -c %%a %s/out/d/f7) = 640",
                        b.tmp, b.tmp, b.tmp, b.tmp),
                     0);
    berthd_finish(&b);
}
END_TEST

START_TEST(gzip_and_zstd_in_and_out)
{
    struct berthd b = {0};
    berthd_start(&b, NULL);
    create(&b, "{\"handle\": \"gz\"}", 201);
    create(&b, "{\"handle\": \"zs\"}", 201);
    char src[PATH_MAX + 16], f[PATH_MAX + 16];
    snprintf(src, sizeof(src), "%s/src", b.tmp);
    make_tree(src);
    ck_assert_int_eq(sh("tar -C %s -czf %s/in.tgz . && tar -C %s --zstd -cf %s/in.tzst .", src,
                        b.tmp, src, b.tmp),
                     0);
    snprintf(f, sizeof(f), "%s/in.tgz", b.tmp);
    ck_assert_int_eq(put_tar(&b, "gz", "/", f, "gzip"), 200);
    snprintf(f, sizeof(f), "%s/in.tzst", b.tmp);
    ck_assert_int_eq(put_tar(&b, "zs", "/", f, NULL), 200); /* detected from the bytes */
    /* A Content-Encoding that the bytes contradict is refused. */
    ck_assert_int_eq(put_tar(&b, "zs", "/x", f, "gzip"), 422);
    ck_assert_int_eq(sh("mkdir %s/o1 %s/o2 && curl -sf -D %s/h1 -H 'Accept-Encoding: gzip' "
                        "'%s/v1/volumes/gz/files' | gzip -dc | tar -C %s/o1 -xf - && "
                        "curl -sf -D %s/h2 -H 'Accept-Encoding: zstd' '%s/v1/volumes/zs/files' | "
                        "zstd -dc | tar -C %s/o2 -xf - && diff -r %s %s/o1 && diff -r %s %s/o2 && "
                        "grep -qi '^content-encoding: gzip' %s/h1 && "
                        "grep -qi '^content-encoding: zstd' %s/h2",
                        b.tmp, b.tmp, b.tmp, b.base_url, b.tmp, b.tmp, b.base_url, b.tmp, src,
                        b.tmp, src, b.tmp, b.tmp, b.tmp),
                     0);
    berthd_finish(&b);
}
END_TEST

START_TEST(sub_path_in_and_out_and_single_file_out)
{
    struct berthd b = {0};
    berthd_start(&b, NULL);
    create(&b, "{\"handle\": \"sp\"}", 201);
    char src[PATH_MAX + 16], f[PATH_MAX + 16];
    snprintf(src, sizeof(src), "%s/src", b.tmp);
    make_tree(src);
    ck_assert_int_eq(sh("tar -C %s -cf %s/in.tar .", src, b.tmp), 0);
    snprintf(f, sizeof(f), "%s/in.tar", b.tmp);
    ck_assert_int_eq(put_tar(&b, "sp", "/a/b/c", f, NULL), 200);
    ck_assert_int_eq(sh("test -f %s/volumes/sp/fs/data/a/b/c/d/f9", b.root), 0);
    ck_assert_int_eq(sh("mkdir %s/o && curl -sf '%s/v1/volumes/sp/files?path=/a/b/c/d' | "
                        "tar -C %s/o -xf - && diff -r %s/d %s/o",
                        b.tmp, b.base_url, b.tmp, src, b.tmp),
                     0);
    ck_assert_int_eq(
        sh("curl -sf '%s/v1/volumes/sp/files?path=/a/b/c/d/f5' | tar -tf - > "
           "%s/list && test \"$(cat %s/list)\" = f5 && curl -sf "
           "'%s/v1/volumes/sp/files?path=/a/b/c/d/f5' | tar -xOf - | grep -qx 'file 5'",
           b.base_url, b.tmp, b.tmp, b.base_url),
        0);
    struct hresp r;
    http_get(&b, "/v1/volumes/sp/files?path=/nope", &r);
    ck_assert_error_reply(&r, 404, "not_found", "nope");
    hresp_free(&r);
    http_get(&b, "/v1/volumes/sp/files?path=/a/../..", &r);
    ck_assert_error_reply(&r, 400, "bad_request", "..");
    hresp_free(&r);
    berthd_finish(&b);
}
END_TEST

START_TEST(children_are_copy_on_write_both_ways)
{
    struct berthd b = {0};
    berthd_start(&b, NULL);
    create(&b, "{\"handle\": \"p\"}", 201);
    ck_assert_int_eq(sh("echo base > %s/volumes/p/fs/data/base", b.root), 0);
    create(&b, "{\"handle\": \"c\", \"parent\": \"p\"}", 201);
    create(&b, "{\"handle\": \"c\", \"parent\": \"p\"}", 409);
    create(&b, "{\"handle\": \"x\", \"parent\": \"missing\"}", 404);
    create(&b, "{\"handle\": \".bad\"}", 400);
    ck_assert_int_eq(sh("cd %s/volumes && grep -qx base c/fs/data/base && echo c > c/fs/data/base "
                        "&& echo p > p/fs/data/only-p && grep -qx base p/fs/data/base && "
                        "! test -e c/fs/data/only-p && echo c2 > c/fs/data/only-c && "
                        "! test -e p/fs/data/only-c",
                        b.root),
                     0);
    /* A grandchild sees the child's state at its creation. */
    create(&b, "{\"handle\": \"g\", \"parent\": \"c\"}", 201);
    ck_assert_int_eq(
        sh("cd %s/volumes && grep -qx c g/fs/data/base && test -f g/fs/data/only-c", b.root), 0);
    struct hresp r;
    http_do(&b, &(struct hreq){.method = "DELETE", .path = "/v1/volumes/p"}, &r);
    ck_assert_error_reply(&r, 409, "conflict", "child");
    hresp_free(&r);
    http_do(&b, &(struct hreq){.method = "DELETE", .path = "/v1/volumes/p?force=1"}, &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_int_eq(json_object_array_length(json_at(r.json, "deleted")), 3);
    hresp_free(&r);
    http_get(&b, "/v1/volumes/g", &r);
    ck_assert_int_eq(r.status, 404);
    hresp_free(&r);
    berthd_finish(&b);
}
END_TEST

static const char *const hostile[] = {
    /* name, python that adds the bad entries to tarfile t */
    "dotdot",
    "i=tarfile.TarInfo('../escape'); i.size=1; t.addfile(i, io.BytesIO(b'x'))",
    "absolute",
    "i=tarfile.TarInfo('/tmp/berth-escape-abs'); i.size=1; t.addfile(i, io.BytesIO(b'x'))",
    "symlink",
    "i=tarfile.TarInfo('l'); i.type=tarfile.SYMTYPE; i.linkname='/tmp'; t.addfile(i); "
    "i=tarfile.TarInfo('l/berth-escape-sym'); i.size=1; t.addfile(i, io.BytesIO(b'x'))",
    "volsymlink",
    "i=tarfile.TarInfo('vlink/berth-escape-vsym'); i.size=1; t.addfile(i, io.BytesIO(b'x'))",
    "hardlink",
    "i=tarfile.TarInfo('h'); i.type=tarfile.LNKTYPE; i.linkname='/etc/passwd'; t.addfile(i)",
    "hardlink-dotdot",
    "i=tarfile.TarInfo('h'); i.type=tarfile.LNKTYPE; i.linkname='../../../../etc/passwd'; "
    "t.addfile(i)",
    NULL};

START_TEST(hostile_tars_leave_the_volume_unchanged)
{
    struct berthd b = {0};
    berthd_start(&b, NULL);
    create(&b, "{\"handle\": \"h\"}", 201);
    ck_assert_int_eq(sh("echo keep > %s/volumes/h/fs/data/keep && ln -s /tmp "
                        "%s/volumes/h/fs/data/vlink",
                        b.root, b.root),
                     0);
    char *before = fingerprint(&b, "h");
    for (int i = 0; hostile[i]; i += 2) {
        char f[PATH_MAX + 64];
        snprintf(f, sizeof(f), "%s/%s.tar", b.tmp, hostile[i]);
        /* A good entry first: it must not land either. */
        ck_assert_int_eq(sh("python3 -c \"import tarfile, io\nt=tarfile.open('%s','w')\n"
                            "i=tarfile.TarInfo('good'); i.size=1; t.addfile(i, io.BytesIO(b'g'))\n"
                            "%s\nt.close()\"",
                            f, hostile[i + 1]),
                         0);
        long st = put_tar(&b, "h", "/", f, NULL);
        ck_assert_msg(st == 422, "%s: status %ld", hostile[i], st);
        char *after = fingerprint(&b, "h");
        ck_assert_msg(strcmp(before, after) == 0, "%s changed the volume", hostile[i]);
        free(after);
    }
    free(before);
    ck_assert_int_eq(sh("! ls /tmp/berth-escape-* 2>/dev/null && ! test -e %s/volumes/h/fs/escape "
                        "&& ! ls -d %s/volumes/h/fs/.staging-* 2>/dev/null",
                        b.root, b.root),
                     0);
    berthd_finish(&b);
}
END_TEST

START_TEST(truncated_tar_leaves_the_volume_unchanged)
{
    struct berthd b = {0};
    berthd_start(&b, NULL);
    create(&b, "{\"handle\": \"t\"}", 201);
    char src[PATH_MAX + 16], f[PATH_MAX + 16];
    snprintf(src, sizeof(src), "%s/src", b.tmp);
    make_tree(src);
    ck_assert_int_eq(sh("echo old > %s/volumes/t/fs/data/d 2>/dev/null; "
                        "tar -C %s -cf %s/full.tar . && head -c 100000 %s/full.tar > %s/cut.tar",
                        b.root, src, b.tmp, b.tmp, b.tmp),
                     0);
    char *before = fingerprint(&b, "t");
    snprintf(f, sizeof(f), "%s/cut.tar", b.tmp);
    ck_assert_int_eq(put_tar(&b, "t", "/", f, NULL), 422);
    char *after = fingerprint(&b, "t");
    ck_assert_str_eq(before, after);
    free(before);
    free(after);
    berthd_finish(&b);
}
END_TEST

/* The whole of a small file, NUL-terminated, or NULL. Caller frees. */
static char *
read_text(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    char *s = calloc(1, 65536);
    if (s)
        s[fread(s, 1, 65535, f)] = '\0';
    fclose(f);
    return s;
}

/* A bad upload is 422 in the words of what the client sent (an upload
 * and its tar, its Content-Encoding), never a layer's ("layer blob",
 * "layer tar", a media type), and changes nothing. */
START_TEST(bad_uploads_are_named_as_uploads_not_layers)
{
    struct berthd b = {0};
    berthd_start(&b, NULL);
    create(&b, "{\"handle\": \"u\"}", 201);
    ck_assert_int_eq(sh("cd %s && head -c 2048 /dev/zero | tr '\\0' x > junk && mkdir -p t && "
                        "echo hi > t/a && tar -C t -cf ok.tar . && head -c 700 ok.tar > cut.tar && "
                        ": > empty",
                        b.tmp),
                     0);
    static const struct {
        const char *file, *enc, *msg;
    } bad[] = {
        {"junk", NULL, "\"read tar: "},
        {"cut.tar", NULL, "tar"},
        {"ok.tar", "gzip", "\"upload: Content-Encoding is gzip but the bytes are uncompressed\""},
        {"ok.tar", "zstd", "\"upload: Content-Encoding is zstd but the bytes are uncompressed\""},
        {"junk", "gzip", "upload"},
    };
    char *before = fingerprint(&b, "u");
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char f[PATH_MAX + 16], body[PATH_MAX + 16];
        snprintf(f, sizeof(f), "%s/%s", b.tmp, bad[i].file);
        ck_assert_int_eq(put_tar(&b, "u", "/", f, bad[i].enc), 422);
        snprintf(body, sizeof(body), "%s/put.body", b.tmp);
        char *text = read_text(body);
        ck_assert_msg(text && strstr(text, bad[i].msg) && !strstr(text, "layer") &&
                          !strstr(text, "media type"),
                      "%s (%s): %s", bad[i].file, bad[i].enc ? bad[i].enc : "none", text);
        free(text);
    }
    char *after = fingerprint(&b, "u");
    ck_assert_str_eq(before, after);
    free(before);
    free(after);
    berthd_finish(&b);
}
END_TEST

START_TEST(client_disconnect_during_upload_and_download)
{
    struct berthd b = {0};
    berthd_start(&b, NULL);
    create(&b, "{\"handle\": \"dc\"}", 201);
    ck_assert_int_eq(sh("echo old > %s/volumes/dc/fs/data/old", b.root), 0);
    char *before = fingerprint(&b, "dc");
    /* Upload: headers for 64 MiB, 1 MiB of a real tar, then gone. */
    ck_assert_int_eq(sh("mkdir -p %s/big && head -c 64000000 /dev/zero > %s/big/zero && "
                        "tar -C %s/big -cf %s/big.tar zero",
                        b.tmp, b.tmp, b.tmp, b.tmp),
                     0);
    int fd = raw_connect(b.port);
    ck_assert_int_ge(fd, 0);
    char hdr[512];
    int n = snprintf(hdr, sizeof(hdr),
                     "PUT /v1/volumes/dc/files?path=/ HTTP/1.1\r\nHost: x\r\n"
                     "Content-Type: application/x-tar\r\nContent-Length: 64010240\r\n\r\n");
    ck_assert(raw_send(fd, hdr, (size_t)n));
    char path[PATH_MAX + 16];
    snprintf(path, sizeof(path), "%s/big.tar", b.tmp);
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    static char chunk[1 << 20];
    size_t got = fread(chunk, 1, sizeof(chunk), f);
    fclose(f);
    ck_assert(raw_send(fd, chunk, got));
    sleep_ms(200);
    close(fd);
    ck_assert(wait_health_int(&b, "jobs.running", 0, 10000));
    char *after = fingerprint(&b, "dc");
    ck_assert_str_eq(before, after);
    free(after);
    free(before);
    ck_assert_int_eq(sh("! ls -d %s/volumes/dc/fs/.staging-* 2>/dev/null", b.root), 0);

    /* Download: read a little of a 64 MB tar, then gone; the job stops. */
    ck_assert_int_eq(put_tar(&b, "dc", "/", path, NULL), 200);
    fd = raw_connect(b.port);
    ck_assert_int_ge(fd, 0);
    n = snprintf(hdr, sizeof(hdr), "GET /v1/volumes/dc/files HTTP/1.1\r\nHost: x\r\n\r\n");
    ck_assert(raw_send(fd, hdr, (size_t)n));
    bool eof = false;
    size_t r = raw_recv(fd, chunk, 65536, 5000, &eof);
    ck_assert_uint_gt(r, 0);
    ck_assert(strncmp(chunk, "HTTP/1.1 200", 12) == 0);
    close(fd);
    ck_assert(wait_health_int(&b, "jobs.running", 0, 10000));
    struct hresp h;
    http_get(&b, "/v1/volumes/dc", &h);
    ck_assert_int_eq(h.status, 200);
    hresp_free(&h);
    berthd_finish(&b);
}
END_TEST

START_TEST(ttl_expiry_deletes_the_volume)
{
    struct berthd b = {0};
    berthd_start(&b, NULL);
    create(&b, "{\"handle\": \"ttl\", \"ttl_s\": 1}", 201);
    create(&b, "{\"handle\": \"keep\", \"ttl_s\": 1}", 201);
    struct hresp r;
    http_do(&b,
            &(struct hreq){.method = "PATCH",
                           .path = "/v1/volumes/keep",
                           .body = "{\"ttl_s\": 0, \"properties\": {\"a\": \"b\"}}"},
            &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_ptr_null(json_at(r.json, "expires_at"));
    hresp_free(&r);
    double deadline = now_ms() + 6000;
    long st = 0;
    while (now_ms() < deadline) {
        http_get(&b, "/v1/volumes/ttl", &r);
        st = r.status;
        hresp_free(&r);
        if (st == 404)
            break;
        sleep_ms(200);
    }
    ck_assert_int_eq(st, 404);
    ck_assert_int_eq(sh("! test -e %s/volumes/ttl", b.root), 0);
    http_get(&b, "/v1/volumes?property.a=b", &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_int_eq(json_object_array_length(json_at(r.json, "volumes")), 1);
    hresp_free(&r);
    berthd_finish(&b);
}
END_TEST

START_TEST(restart_keeps_volumes_and_children)
{
    struct berthd b = {0};
    berthd_start(&b, NULL);
    create(&b, "{\"handle\": \"r\", \"properties\": {\"k\": \"v\"}, \"ttl_s\": 3600}", 201);
    ck_assert_int_eq(sh("echo one > %s/volumes/r/fs/data/one", b.root), 0);
    create(&b, "{\"handle\": \"rc\", \"parent\": \"r\"}", 201);
    ck_assert_int_eq(sh("echo two > %s/volumes/rc/fs/data/two", b.root), 0);
    ck_assert_int_eq(berthd_term(&b, 10000), 0);
    struct berthd_opts opts = {.root = b.root};
    char root[PATH_MAX];
    snprintf(root, sizeof(root), "%s", b.root);
    opts.root = root;
    berthd_start(&b, &opts);
    struct hresp r;
    http_get(&b, "/v1/volumes/r", &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(json_object_get_string(json_at(r.json, "properties.k")), "v");
    ck_assert_ptr_nonnull(json_at(r.json, "expires_at"));
    hresp_free(&r);
    ck_assert_int_eq(sh("cd %s/volumes && grep -qx one r/fs/data/one && grep -qx one "
                        "rc/fs/data/one && grep -qx two rc/fs/data/two && ! test -e r/fs/data/two",
                        b.root),
                     0);
    berthd_finish(&b);
}
END_TEST

/* ---- long paths (issue 8) -------------------------------------------------------- */

/* Writes a tar at file: "<c>-marker", then n files of c at names of len
 * bytes (python3's tarfile writes pax names of any length). */
static void
deep_tar(const char *file, char c, size_t len, int n)
{
    ck_assert_int_eq(
        sh("python3 -c \"import tarfile, io\n"
           "t=tarfile.open('%s','w',format=tarfile.PAX_FORMAT)\n"
           "def add(n, d):\n  i=tarfile.TarInfo(n); i.size=len(d); t.addfile(i, io.BytesIO(d))\n"
           "add('%c-marker', b'm')\n"
           "for k in range(%d):\n"
           "  leaf='%c-%%03d' %% k; rem=%zu-len(leaf); parts=[]\n"
           "  while rem > 0:\n"
           "    m=min(200, rem-1)\n"
           "    if rem-(m+1) == 1: m -= 1\n"
           "    parts.append('%c'*m); rem -= m+1\n"
           "  add('/'.join(parts+[leaf]), b'deep')\n"
           "t.close()\"",
           file, c, n, c, len, c),
        0);
}

/* PUTs file1 to vol1 and file2 to vol2 at the same time; the statuses. */
static void
put_two(struct berthd *b, const char *vol1, const char *file1, const char *vol2, const char *file2,
        long st[2])
{
    ck_assert_int_eq(sh("cd %s && (curl -s -o put1.body -w '%%{http_code}' -X PUT -H 'Expect:' "
                        "--data-binary @%s '%s/v1/volumes/%s/files?path=/' > put1.status &"
                        " curl -s -o put2.body -w '%%{http_code}' -X PUT -H 'Expect:' "
                        "--data-binary @%s '%s/v1/volumes/%s/files?path=/' > put2.status &"
                        " wait)",
                        b->tmp, file1, b->base_url, vol1, file2, b->base_url, vol2),
                     0);
    for (int i = 0; i < 2; i++) {
        char p[PATH_MAX + 32];
        snprintf(p, sizeof(p), "%s/put%d.status", b->tmp, i + 1);
        FILE *f = fopen(p, "r");
        ck_assert_ptr_nonnull(f);
        if (fscanf(f, "%ld", &st[i]) != 1)
            st[i] = 0;
        fclose(f);
    }
}

START_TEST(concurrent_uploads_with_deep_names_stay_in_their_own_volumes)
{
    char start[PATH_MAX];
    harness_mkdtemp(start, sizeof(start));
    struct berthd b = {0};
    struct berthd_opts o = {.cwd = start};
    berthd_start(&b, &o);
    create(&b, "{\"handle\": \"va\"}", 201);
    create(&b, "{\"handle\": \"vb\"}", 201);
    ck_assert_int_eq(sh("echo keep > %s/volumes/va/fs/data/keep && echo keep > "
                        "%s/volumes/vb/fs/data/keep",
                        b.root, b.root),
                     0);
    char *fa = fingerprint(&b, "va"), *fb = fingerprint(&b, "vb");
    /* 4,049 bytes under fs/data reach PATH_MAX: refused, nothing written. */
    char ta[PATH_MAX + 16], tb[PATH_MAX + 16];
    snprintf(ta, sizeof(ta), "%s/a.tar", b.tmp);
    snprintf(tb, sizeof(tb), "%s/b.tar", b.tmp);
    deep_tar(ta, 'a', 4049, 30);
    deep_tar(tb, 'b', 4049, 30);
    long st[2];
    put_two(&b, "va", ta, "vb", tb, st);
    ck_assert_msg(st[0] == 422 && st[1] == 422, "statuses %ld %ld", st[0], st[1]);
    ck_assert_int_eq(
        sh("grep -q PATH_MAX %s/put1.body && grep -q PATH_MAX %s/put2.body", b.tmp, b.tmp), 0);
    char *a2 = fingerprint(&b, "va"), *b2 = fingerprint(&b, "vb");
    ck_assert_str_eq(fa, a2);
    ck_assert_str_eq(fb, b2);
    free(a2), free(b2);
    char link[64], cwd[PATH_MAX + 1] = "";
    snprintf(link, sizeof(link), "/proc/%d/cwd", (int)b.pid);
    ck_assert_int_gt(readlink(link, cwd, PATH_MAX), 0);
    ck_assert_str_eq(cwd, start);
    ck_assert_int_eq(sh("test -z \"$(ls -A %s)\"", start), 0);

    /* Deep, but inside PATH_MAX: each volume gets exactly its own files. */
    size_t len = PATH_MAX - strlen(b.root) - 100;
    deep_tar(ta, 'a', len, 30);
    deep_tar(tb, 'b', len, 30);
    put_two(&b, "va", ta, "vb", tb, st);
    ck_assert_msg(st[0] == 200 && st[1] == 200, "statuses %ld %ld", st[0], st[1]);
    ck_assert_int_eq(sh("cd %s/volumes && test $(find va/fs/data -type f -name 'a-*' | wc -l) = 31 "
                        "&& test $(find va/fs/data -type f | wc -l) = 32 && "
                        "test $(find vb/fs/data -type f -name 'b-*' | wc -l) = 31 && "
                        "test $(find vb/fs/data -type f | wc -l) = 32",
                        b.root),
                     0);
    ck_assert_int_gt(readlink(link, cwd, PATH_MAX), 0);
    ck_assert_str_eq(cwd, start);
    ck_assert_int_eq(sh("test -z \"$(ls -A %s)\"", start), 0);
    free(fa), free(fb);
    berthd_finish(&b);
    rmdir(start);
}
END_TEST

START_TEST(upload_path_with_a_component_over_name_max_is_422)
{
    /* ENAMETOOLONG from mkdirat used to answer 500. */
    struct berthd b = {0};
    berthd_start(&b, NULL);
    create(&b, "{\"handle\": \"n\"}", 201);
    char f[PATH_MAX + 16];
    snprintf(f, sizeof(f), "%s/in.tar", b.tmp);
    ck_assert_int_eq(sh("mkdir -p %s/src && echo x > %s/src/x && tar -C %s/src -cf %s .", b.tmp,
                        b.tmp, b.tmp, f),
                     0);
    char path[400] = "/a/";
    memset(path + 3, 'n', 300);
    ck_assert_int_eq(put_tar(&b, "n", path, f, NULL), 422);
    ck_assert_int_eq(sh("test -z \"$(ls -A %s/volumes/n/fs/data)\"", b.root), 0);
    berthd_finish(&b);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("volumes");
    TCase *tc = tcase_create("volumes");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, round_trip_keeps_tree_symlinks_and_hard_links);
    tcase_add_test(tc, gzip_and_zstd_in_and_out);
    tcase_add_test(tc, sub_path_in_and_out_and_single_file_out);
    tcase_add_test(tc, children_are_copy_on_write_both_ways);
    tcase_add_test(tc, hostile_tars_leave_the_volume_unchanged);
    tcase_add_test(tc, truncated_tar_leaves_the_volume_unchanged);
    tcase_add_test(tc, bad_uploads_are_named_as_uploads_not_layers);
    tcase_add_test(tc, client_disconnect_during_upload_and_download);
    tcase_add_test(tc, ttl_expiry_deletes_the_volume);
    tcase_add_test(tc, restart_keeps_volumes_and_children);
    tcase_add_test(tc, concurrent_uploads_with_deep_names_stay_in_their_own_volumes);
    tcase_add_test(tc, upload_path_with_a_component_over_name_max_is_422);
    suite_add_tcase(s, tc);
    return harness_run_suite(s);
}
