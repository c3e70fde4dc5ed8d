/*
 * docker cp through berth's Docker API (HEAD|GET|PUT
 * /containers/{id}/archive): the real docker CLIs copying a file and a
 * directory both ways into and out of a running container, read back
 * through exec and through the other direction, then a stopped and a
 * created container; curl for the stat header and the engine's errors;
 * and hostile tars PUT with curl (absolute names, "..", symlinks out in
 * the tar and in the container, hard links out, device nodes, FIFOs,
 * long names and paths), each refused with a 400 that names the entry,
 * with nothing of it written inside the container and nothing outside.
 */
#include <stdarg.h>
#include <poll.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness_containers.h"
#include "harness_docker.h"

static struct dk_client clis[DK_MAX_CLIENTS];
static size_t nclis;

static void
setup(void)
{
    ctr_require_runtime();
    nclis = dk_clis(clis);
}

/* As dk_ok, with all of the output (caller frees). */
static char *run_all(const struct berthd *b, const struct dk_client *cl, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static char *
run_all(const struct berthd *b, const struct dk_client *cl, const char *fmt, ...)
{
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    char *out = NULL;
    int st = dk_run(b, cl, &out, "%s", cmd);
    ck_assert_msg(st == 0, "`%s` exited %d: %s", cmd, st, out);
    return out;
}

/* curl on b's Docker API socket, as a shell word list prefix. */
#define CURL "curl -s --unix-socket \"${DOCKER_HOST#unix://}\" "

START_TEST(docker_cp_a_file_and_a_directory_both_ways_with_a_running_container)
{
    for (size_t i = 0; i < nclis; i++) {
        struct berthd b = {0};
        dk_start(&b, i % 2 == 1, NULL);
        const struct dk_client *cl = &clis[i];
        dk_load_busybox(&b);
        char *id = dk_ok(&b, cl, 0, "\"$D\" run -d --name cp%zu busybox sleep 300", i);
        ctr_track(&b, id);
        /* In: a file into a directory, a file under a new name, a tree. */
        free(dk_ok(&b, cl, 0,
                   "set -e; cd \"$(mktemp -d)\"; echo one > f.txt; mkdir -p tree/sub; "
                   "echo two > tree/sub/g; ln -s sub/g tree/lnk; chmod 0750 tree/sub; "
                   "\"$D\" cp f.txt cp%zu:/tmp/ && \"$D\" cp f.txt cp%zu:/tmp/renamed.txt && "
                   "\"$D\" cp tree cp%zu:/tmp/ && \"$D\" cp tree cp%zu:/newtree",
                   i, i, i, i));
        char *got = dk_ok(&b, cl, 0,
                          "\"$D\" exec cp%zu sh -c 'cat /tmp/f.txt /tmp/renamed.txt "
                          "/tmp/tree/sub/g /newtree/lnk; readlink /tmp/tree/lnk; "
                          "stat -c %%a /tmp/tree/sub' | tr '\\n' ' '",
                          i);
        ck_assert_msg(dk_contains(got, "one one two two sub/g 750"), "docker %s: %s", cl->version,
                      got);
        free(got);
        /* Out: what the container wrote, a file and a tree, symlink kept. */
        free(dk_ok(&b, cl, 0,
                   "\"$D\" exec cp%zu sh -c 'mkdir -p /out/d && echo three > /out/d/h && "
                   "ln -s /out/d /out/abs'",
                   i));
        got =
            run_all(&b, cl,
                    "set -e; cd \"$(mktemp -d)\"; \"$D\" cp cp%zu:/out/d/h h && "
                    "\"$D\" cp cp%zu:/out . && \"$D\" cp cp%zu:/tmp/tree back && "
                    "cat h out/d/h back/sub/g; readlink out/abs; \"$D\" cp -L cp%zu:/out/abs l && "
                    "cat l/h | tr '\\n' ' '",
                    i, i, i, i);
        ck_assert_msg(dk_contains(got, "three\nthree\ntwo\n/out/d\nthree"), "docker %s: %s",
                      cl->version, got);
        free(got);
        /* A missing path is the engine's 404 message; the 20.10 CLI prints
         * its own for any 404 of this route. */
        char *out = NULL;
        ck_assert_int_ne(dk_run(&b, cl, &out, "\"$D\" cp cp%zu:/no/such /tmp/x", i), 0);
        char own[64];
        snprintf(own, sizeof(own), "No such container:path: cp%zu:/no/such", i);
        ck_assert_msg(dk_contains(out, "Could not find the file /no/such in container cp") ||
                          (strncmp(cl->version, "20.", 3) == 0 && dk_contains(out, own)),
                      "docker %s: %s", cl->version, out);
        free(out);
        /* Stopped: both ways still work on its root filesystem. */
        free(dk_ok(&b, cl, 0, "\"$D\" stop -t 1 cp%zu", i));
        got = dk_ok(&b, cl, 0,
                    "set -e; cd \"$(mktemp -d)\"; echo four > s; \"$D\" cp s cp%zu:/tmp/s && "
                    "\"$D\" cp cp%zu:/tmp/s - | tar xO",
                    i, i);
        ck_assert_str_eq(got, "four");
        free(got);
        /* Created, never started: the same; then started, exec sees it. */
        char *cid = dk_ok(&b, cl, 0, "\"$D\" create --name new%zu busybox sleep 300", i);
        ctr_track(&b, cid);
        got = dk_ok(&b, cl, 0,
                    "set -e; cd \"$(mktemp -d)\"; echo five > n; \"$D\" cp n new%zu:/ && "
                    "\"$D\" start new%zu >/dev/null && \"$D\" exec new%zu cat /n",
                    i, i, i);
        ck_assert_str_eq(got, "five");
        free(got);
        free(dk_ok(&b, cl, 0, "\"$D\" rm -f cp%zu new%zu", i, i));
        free(cid);
        free(id);
        berthd_finish(&b);
    }
}
END_TEST

/* A path in a volume mount is the volume's content, as the container sees it. */
START_TEST(docker_cp_reaches_a_volume_mounted_in_the_container)
{
    const struct dk_client *cl = &clis[0];
    struct berthd b = {0};
    dk_start(&b, false, NULL);
    dk_load_busybox(&b);
    char *id = dk_ok(&b, cl, 0,
                     "\"$D\" run -d --name vc -v cpvol:/data -v cpro:/ro:ro busybox sh -c "
                     "'echo before > /data/old; exec sleep 300'");
    ctr_track(&b, id);
    free(dk_ok(&b, cl, 0, "\"$D\" exec vc sh -c 'while ! test -f /data/old; do sleep 0.1; done'"));
    char *got = run_all(&b, cl,
                        "set -e; cd \"$(mktemp -d)\"; echo in > f; mkdir t; echo deep > t/g; "
                        "\"$D\" cp f vc:/data/ && \"$D\" cp t vc:/data/t && "
                        "\"$D\" exec vc cat /data/f /data/t/g && mkdir o && "
                        "\"$D\" cp vc:/data o/ && cat o/data/old o/data/f && "
                        "\"$D\" cp vc:/data/. - | tar t | sort | tr '\\n' ' '");
    ck_assert_msg(dk_contains(got, "in\ndeep\nbefore\nin\n./ ./f ./old ./t/ ./t/g "), "%s", got);
    free(got);
    /* Nothing of it went to the rootfs under the mount point. */
    char *v = run_all(&b, cl,
                      CURL "-I 'http://d/containers/vc/archive?path=/data/' | tr -d '\\r' | "
                           "sed -n 's/^X-Docker-Container-Path-Stat: //p' | base64 -d");
    ck_assert_msg(dk_contains(v, "\"name\":\"data\""), "%s", v);
    free(v);
    char *out = NULL;
    ck_assert_int_ne(dk_run(&b, cl, &out, "cd \"$(mktemp -d)\"; echo x > y; \"$D\" cp y vc:/ro/"),
                     0);
    ck_assert_msg(dk_contains(out, "mounted volume is marked read-only"), "%s", out);
    free(out);
    free(id);
    berthd_finish(&b);
}
END_TEST

/* -a (copyUIDGID): the container's User owns what comes in; without it the tar's owners stay. */
START_TEST(docker_cp_a_gives_the_files_to_the_containers_user)
{
    const struct dk_client *cl = &clis[0];
    struct berthd b = {0};
    dk_start(&b, false, NULL);
    dk_load_busybox(&b);
    char *id = dk_ok(&b, cl, 0, "\"$D\" run -d --name uc --user nobody busybox sleep 300");
    ctr_track(&b, id);
    char *got =
        run_all(&b, cl,
                "set -e; cd \"$(mktemp -d)\"; mkdir d; echo x > d/f; chown -R 1234:4321 d; "
                "\"$D\" cp -a d uc:/tmp/a && \"$D\" cp d uc:/tmp/plain && "
                "\"$D\" exec uc stat -c %%u:%%g /tmp/a /tmp/a/f /tmp/plain/f | tr '\\n' ' '");
    ck_assert_msg(dk_contains(got, "65534:65534 65534:65534 1234:4321 "), "%s", got);
    free(got);
    free(id);
    berthd_finish(&b);
}
END_TEST

/* A stopped container whose rootfs is no longer mounted (a reboot): an
 * upload is refused rather than written into the bare mount point. Before
 * that, mounted: the note of a dead daemon's upload into a directory the
 * container removed since is set aside by the next upload, not kept
 * waiting for a directory that cannot come back. */
START_TEST(docker_cp_into_an_unmounted_rootfs_is_refused)
{
    const struct dk_client *cl = &clis[0];
    struct berthd b = {0};
    dk_start(&b, false, NULL);
    dk_load_busybox(&b);
    char *id = dk_ok(&b, cl, 0, "\"$D\" run -d --name um busybox sleep 300");
    ctr_track(&b, id);
    char *st = run_all(
        &b, cl,
        "set -e; C='%s/containers/%s'; mkdir -p \"$C/cp-pending\"; "
        "printf 'berth-cp-pending 2\\0pdead\\0rootfs\\0%%s\\0/gone\\0"
        ".berth-cp-0123456789abcdef\\0' \"$C/rootfs\" "
        "> \"$C/cp-pending/pdead-.berth-cp-0123456789abcdef\"; "
        "cd \"$(mktemp -d)\"; echo x > y; tar cf t.tar y; " CURL
        "-o /dev/null -w '%%{http_code} ' -X PUT --data-binary @t.tar "
        "'http://d/containers/um/archive?path=/'; ls -A \"$C/cp-pending\" \"$C/cp-pending/aside\" "
        "| tr '\\n' ' '",
        b.root, id);
    ck_assert_msg(strncmp(st, "200 ", 4) == 0 && dk_contains(st, "/cp-pending: aside  ") &&
                      dk_contains(st, "/aside: pdead-.berth-cp-0123456789abcdef "),
                  "%s", st);
    free(st);
    free(dk_ok(&b, cl, 0, "\"$D\" stop -t 1 um && umount '%s/containers/%s/rootfs'", b.root, id));
    char *r = run_all(
        &b, cl,
        "cd \"$(mktemp -d)\"; echo x > y; tar cf t.tar y; " CURL
        "-w ' %%{http_code}' -X PUT --data-binary @t.tar "
        "'http://d/containers/um/archive?path=/'; echo \"[$(ls -A '%s/containers/%s/rootfs')]\"",
        b.root, id);
    ck_assert_msg(dk_contains(r, "root filesystem is not mounted\"}\n 409[]"), "%s", r);
    free(r);
    free(dk_ok(&b, cl, 0, "\"$D\" rm um"));
    free(id);
    berthd_finish(&b);
}
END_TEST

START_TEST(archive_stat_header_and_errors_are_the_engines)
{
    const struct dk_client *cl = &clis[0];
    struct berthd b = {0};
    dk_start(&b, false, NULL);
    dk_load_busybox(&b);
    char *id = dk_ok(&b, cl, 0, "\"$D\" run -d --name st busybox sleep 300");
    ctr_track(&b, id);
    free(dk_ok(&b, cl, 0,
               "\"$D\" exec st sh -c 'mkdir -p /s/d && printf 12345 > /s/f && "
               "ln -s /s/d /s/l && chmod 4755 /s/f'"));
    /* The header: base64 JSON, mode in Go's os.FileMode bits. */
    char *h = dk_ok(&b, cl, 0,
                    CURL "-I 'http://d/containers/st/archive?path=/s/l' | tr -d '\\r' | "
                         "sed -n 's/^X-Docker-Container-Path-Stat: //p' | base64 -d");
    /* 1<<27 (symlink) | 0777; resolved in the container. */
    ck_assert_msg(dk_contains(h, "\"name\":\"l\"") && dk_contains(h, "\"mode\":134218239") &&
                      dk_contains(h, "\"linkTarget\":\"\\/s\\/d\"") &&
                      dk_contains(h, "\"mtime\":\""),
                  "%s", h);
    free(h);
    h = dk_ok(&b, cl, 0,
              CURL "-I 'http://d/containers/st/archive?path=/s/f' | tr -d '\\r' | "
                   "sed -n 's/^X-Docker-Container-Path-Stat: //p' | base64 -d");
    /* 1<<23 (setuid) | 0755, and its size. */
    ck_assert_msg(dk_contains(h, "\"size\":5") && dk_contains(h, "\"mode\":8389101"), "%s", h);
    free(h);
    h = dk_ok(&b, cl, 0,
              CURL "-I 'http://d/containers/st/archive?path=/s/d/' | tr -d '\\r' | "
                   "sed -n 's/^X-Docker-Container-Path-Stat: //p' | base64 -d");
    ck_assert_msg(dk_contains(h, "\"name\":\"d\"") && dk_contains(h, "\"mode\":2147484141"), "%s",
                  h);
    free(h);
    /* A directory's tar is named by its basename, "x/." by "./". */
    char *names = dk_ok(&b, cl, 0,
                        CURL "'http://d/containers/st/archive?path=/s' | tar t | sort | "
                             "tr '\\n' ' '; " CURL
                             "'http://d/containers/st/archive?path=/s/.' | tar t | sort | "
                             "tr '\\n' ' '");
    ck_assert_msg(dk_contains(names, "s/ s/d/ s/f s/l ./ ./d/ ./f ./l"), "%s", names);
    free(names);
    char *e =
        run_all(&b, cl,
                CURL "-w ' %%{http_code}' 'http://d/containers/st/archive?path=/nope'; echo; " CURL
                     "-w ' %%{http_code}' 'http://d/containers/nosuch/archive?path=/'; echo; " CURL
                     "-w ' %%{http_code}' 'http://d/containers/st/archive'; echo; " CURL
                     "-w ' %%{http_code}' -X PUT --data-binary @/dev/null "
                     "'http://d/containers/st/archive?path=/s/f'; echo; " CURL
                     "-w ' %%{http_code}' -X PUT --data-binary @/dev/null "
                     "'http://d/containers/st/archive?path=/nope'");
    ck_assert_msg(dk_contains(e, "Could not find the file /nope in container st\"}\n 404"), "%s",
                  e);
    ck_assert_msg(dk_contains(e, "No such container: nosuch\"}\n 404"), "%s", e);
    ck_assert_msg(dk_contains(e, "path cannot be empty\"}\n 400"), "%s", e);
    ck_assert_msg(dk_contains(e, "extraction point is not a directory\"}\n 400"), "%s", e);
    free(e);
    /* noOverwriteDirNonDir: a file over a directory is refused, unchanged. */
    e = run_all(&b, cl,
                "set -e; cd \"$(mktemp -d)\"; echo x > d; tar cf t.tar d; " CURL
                "-w ' %%{http_code}' -X PUT --data-binary @t.tar "
                "'http://d/containers/st/archive?path=/s&noOverwriteDirNonDir=1'; "
                "\"$D\" exec st test -d /s/d && echo still-a-dir");
    ck_assert_msg(
        dk_contains(e, "cannot overwrite directory \\\"/d\\\" with a non-directory\"}\n 400") &&
            dk_contains(e, "still-a-dir"),
        "%s", e);
    free(e);
    free(id);
    berthd_finish(&b);
}
END_TEST

START_TEST(hostile_archive_puts_are_refused_and_nothing_is_written)
{
    const struct dk_client *cl = &clis[0];
    struct berthd b = {0};
    dk_start(&b, false, NULL);
    dk_load_busybox(&b);
    char *id = dk_ok(&b, cl, 0, "\"$D\" run -d --name hh busybox sleep 300");
    ctr_track(&b, id);
    char marker[64];
    snprintf(marker, sizeof(marker), "berth-cp-escape-%d", (int)getpid());
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s/tars", b.tmp);
    /* The container's own ways out: symlinks to the host's places. */
    free(dk_ok(&b, cl, 0,
               "\"$D\" exec hh sh -c 'mkdir /t && ln -s /etc /t/etclink && ln -s / /t/rootlink && "
               "ln -s ../../../../../.. /t/uplink'"));
    char *cases =
        dk_ok(&b, cl, 0, "mkdir -p '%s' && python3 '%s/tests/fixtures/hostile-cp-tars.py' '%s' %s",
              dir, BERTH_SOURCE_DIR, dir, marker);
    size_t n = 0;
    for (char *save = NULL, *c = strtok_r(cases, " ", &save); c; c = strtok_r(NULL, " ", &save)) {
        char *r =
            run_all(&b, cl,
                    CURL "-w ' %%{http_code}' -X PUT -H 'Content-Type: application/x-tar' "
                         "--data-binary @'%s/%s.tar' 'http://d/containers/hh/archive?path=/t'",
                    dir, c);
        ck_assert_msg(dk_contains(r, "tar entry ") && dk_contains(r, "}\n 400"), "%s: %s", c, r);
        /* Not even the harmless first entry landed, nor a staging directory. */
        char *ls = dk_ok(&b, cl, 0, "\"$D\" exec hh ls -A /t | tr '\\n' ' '");
        ck_assert_msg(strcmp(ls, "etclink rootlink uplink ") == 0, "%s: /t has %s", c, ls);
        free(ls);
        free(r);
        n++;
    }
    ck_assert_uint_eq(n, 13);
    /* Nothing outside the container either, nor in its /etc. */
    char *out = NULL;
    ck_assert_int_ne(
        dk_run(&b, cl, &out, "ls -d /%s /tmp/%s /etc/%s 2>/dev/null", marker, marker, marker), 0);
    free(out);
    ck_assert_int_ne(dk_run(&b, cl, &out, "\"$D\" exec hh ls /etc/%s /tmp/%s /%s 2>/dev/null",
                            marker, marker, marker),
                     0);
    free(out);
    /* A PUT through the container's absolute and ".." symlinks lands in
     * its own / and /etc, never the host's. */
    char *r =
        dk_ok(&b, cl, 0,
              "set -e; cd \"$(mktemp -d)\"; echo in > %s; tar cf t.tar %s; " CURL
              "-X PUT --data-binary @t.tar 'http://d/containers/hh/archive?path=/t/uplink'; " CURL
              "-X PUT --data-binary @t.tar 'http://d/containers/hh/archive?path=/t/rootlink/etc'; "
              "\"$D\" exec hh cat /%s /etc/%s | tr '\\n' ' '",
              marker, marker, marker, marker);
    ck_assert_str_eq(r, "in in ");
    free(r);
    ck_assert_int_ne(dk_run(&b, cl, &out, "ls -d /%s /etc/%s 2>/dev/null", marker, marker), 0);
    free(out);
    /* And a GET through them reads the container's files, not the host's. */
    char hostfile[PATH_MAX];
    snprintf(hostfile, sizeof(hostfile), "%s/host-only", b.tmp);
    FILE *f = fopen(hostfile, "w");
    ck_assert_ptr_nonnull(f);
    fputs("host secret\n", f);
    fclose(f);
    r = run_all(&b, cl,
                CURL
                "-w ' %%{http_code}' 'http://d/containers/hh/archive?path=/t/uplink%s'; echo; " CURL
                "-w ' %%{http_code}' 'http://d/containers/hh/archive?path=/t/rootlink/../../..%s'",
                hostfile, hostfile);
    ck_assert_msg(!dk_contains(r, "host secret") && dk_contains(r, "}\n 404\n") &&
                      dk_contains(r + strlen(r) - 4, " 404"),
                  "%s", r);
    free(r);
    free(cases);
    free(id);
    berthd_finish(&b);
}
END_TEST

/*
 * An upload into a volume mounted in the container is one of the
 * volume's writers, as a /v1 upload is: while it extracts, a child of
 * the volume is refused for that (409 "in progress", before the check
 * that a mounted volume has no children), and once it is over and the
 * container gone, one is made. The tar comes
 * in two parts over a raw socket, so the upload is known to be under
 * way between them.
 */
START_TEST(docker_cp_into_a_volume_holds_it_as_a_writer)
{
    const struct dk_client *cl = &clis[0];
    struct berthd b = {0};
    dk_start(&b, false, NULL);
    dk_load_busybox(&b);
    char *id = dk_ok(&b, cl, 0, "\"$D\" run -d --name vw -v cpw:/data busybox sleep 300");
    ctr_track(&b, id);
    /* One 256 KiB file: its 512-byte header, its data, the end. */
    enum { DATA = 256 * 1024, TAR = 512 + DATA + 1024 };
    char *tar = calloc(1, TAR);
    ck_assert_ptr_nonnull(tar);
    snprintf(tar, 100, "big");
    snprintf(tar + 100, 8, "0000644");
    snprintf(tar + 108, 8, "0000000");
    snprintf(tar + 116, 8, "0000000");
    snprintf(tar + 124, 12, "%011o", DATA);
    snprintf(tar + 136, 12, "%011o", 0);
    tar[156] = '0';
    memcpy(tar + 257,
           "ustar\0"
           "00",
           8);
    memset(tar + 148, ' ', 8);
    unsigned sum = 0;
    for (int i = 0; i < 512; i++)
        sum += (unsigned char)tar[i];
    snprintf(tar + 148, 8, "%06o", sum);
    int fd = dk_connect(&b);
    ck_assert_int_ge(fd, 0);
    char head[256];
    int n = snprintf(head, sizeof(head),
                     "PUT /containers/vw/archive?path=/data HTTP/1.1\r\nHost: docker\r\n"
                     "Content-Type: application/x-tar\r\nContent-Length: %d\r\n\r\n",
                     (int)TAR);
    ck_assert(raw_send(fd, head, (size_t)n));
    ck_assert(raw_send(fd, tar, 512 + DATA / 2));
    /* Under way: a child of the volume is refused until it is over. */
    struct hresp r;
    bool refused = false;
    for (int i = 0; i < 100 && !refused; i++) {
        http_do(&b,
                &(struct hreq){.method = "POST",
                               .path = "/v1/volumes",
                               .body = "{\"handle\":\"child\",\"parent\":\"cpw\"}"},
                &r);
        refused = r.status == 409 && strstr(r.body, "in progress");
        ck_assert_msg(refused || r.status == 409, "child during the upload: %ld %s", r.status,
                      r.body);
        hresp_free(&r);
        if (!refused)
            sleep_ms(50);
    }
    ck_assert_msg(refused, "a child was not refused while the upload ran");
    ck_assert(raw_send(fd, tar + 512 + DATA / 2, TAR - (512 + DATA / 2)));
    free(tar);
    char buf[4096] = "";
    size_t got = 0;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    while (!strstr(buf, "\r\n\r\n") && got + 1 < sizeof(buf) && poll(&p, 1, 10000) == 1) {
        ssize_t m = recv(fd, buf + got, sizeof(buf) - 1 - got, 0);
        if (m <= 0)
            break;
        got += (size_t)m;
        buf[got] = '\0';
    }
    ck_assert_msg(strncmp(buf, "HTTP/1.1 200", 12) == 0, "upload: %s", buf);
    close(fd);
    /* Once no container mounts it, the child is made: the hold is gone. */
    free(dk_ok(&b, cl, 0, "\"$D\" rm -f vw"));
    http_do(&b,
            &(struct hreq){.method = "POST",
                           .path = "/v1/volumes",
                           .body = "{\"handle\":\"child\",\"parent\":\"cpw\"}"},
            &r);
    ck_assert_msg(r.status == 201, "child after the upload: %ld %s", r.status, r.body);
    hresp_free(&r);
    free(id);
    berthd_finish(&b);
}
END_TEST

/* ---- crash recovery ---------------------------------------------------------- */

/* Starts b on root with the Docker API on a socket of b's, and env (may be NULL). */
static void
cp_start(struct berthd *b, const char *root, const char *env)
{
    char listen[PATH_MAX + 16];
    snprintf(listen, sizeof(listen), "unix://%s/docker.sock", b->tmp);
    struct berthd_opts o = {.root = root, .args = {"--docker-listen", listen}, .env = {env}};
    berthd_start(b, &o);
    ck_assert_msg(b->docker_sock[0], "berthd did not log its Docker API endpoint");
}

/* The old tree at dir: files a cp replaces, keeps, and turns into another type. */
static void
cp_old_tree(const struct berthd *b, const struct dk_client *cl, const char *dir)
{
    free(dk_ok(b, cl, 0,
               "set -e; rm -rf '%s'; mkdir -p '%s/d' '%s/y'; cd '%s'; chmod 0755 d; "
               "for i in 1 2 3 4; do echo old $i > d/f$i; done; echo old x > x; "
               "echo old inner > y/inner; echo keep > keep; ln -s d l",
               dir, dir, dir, dir));
}

/* docker cp into a running container is all or nothing across a crash:
 * berthd killed at every step of the upload's merge (BERTH_TEST_MERGE_KILL,
 * store/volume_merge.c) and restarted shows the old files until the
 * commit and the new ones after it, never a mix, and no staging directory
 * inside the container nor a note of the dead upload. */
START_TEST(docker_cp_killed_in_its_merge_is_old_or_new_after_restart)
{
    const struct dk_client *cl = &clis[0];
    struct berthd b = {0};
    dk_start(&b, false, NULL);
    dk_load_busybox(&b);
    char *id = dk_ok(&b, cl, 0, "\"$D\" run -d --name ck busybox sleep 600");
    ctr_track(&b, id);
    char root[PATH_MAX], dir[PATH_MAX + 128], notes[PATH_MAX + 128], tar[PATH_MAX + 16];
    snprintf(root, sizeof(root), "%s", b.root);
    snprintf(dir, sizeof(dir), "%s/containers/%s/rootfs/t", root, id);
    snprintf(notes, sizeof(notes), "%s/containers/%s/cp-pending", root, id);
    snprintf(tar, sizeof(tar), "%s/new.tar", b.tmp);
    /* The new tree, and what tar -x over the old one makes of it. */
    free(dk_ok(&b, cl, 0,
               "set -e; rm -rf '%s/new'; mkdir -p '%s/new/d' '%s/new/x' '%s/new/z'; cd '%s/new'; "
               "chmod 0700 d; for i in 1 2 3 4; do echo new $i > d/f$i; echo new $i > d/n$i; "
               "done; echo in > x/in; echo new y > y; echo a > z/a; echo new l > l; tar -cf '%s' .",
               b.tmp, b.tmp, b.tmp, b.tmp, b.tmp, tar));
    cp_old_tree(&b, cl, dir);
    char *old = harness_tree_print(dir);
    free(dk_ok(&b, cl, 0, "cd '%s' && rm -rf x y l && tar -xf '%s' && chmod 0700 d", dir, tar));
    char *merged = harness_tree_print(dir);
    ck_assert_str_ne(old, merged);
    ck_assert_int_eq(berthd_term(&b, 10000), 0);

    bool committed = false;
    int n;
    for (n = 0; n < 40; n++) {
        char env[64];
        snprintf(env, sizeof(env), "BERTH_TEST_MERGE_KILL=%d", n);
        cp_start(&b, root, env);
        cp_old_tree(&b, cl, dir);
        char *out = NULL;
        dk_run(&b, cl, &out,
               CURL "-o /dev/null -w '%%{http_code}' -X PUT --data-binary @'%s' "
                    "'http://d/containers/ck/archive?path=/t'",
               tar);
        bool killed = false;
        for (int i = 0; i < 100 && !(killed = !berthd_alive(&b)); i++)
            sleep_ms(50);
        if (!killed) {
            /* Past every kill point: the upload went through. */
            ck_assert_msg(dk_contains(out, "200"), "upload: %s", out);
            free(out);
            char *now = harness_tree_print(dir);
            ck_assert_str_eq(now, merged);
            free(now);
            break;
        }
        free(out);
        cp_start(&b, root, NULL);
        char *now = harness_tree_print(dir);
        bool is_old = strcmp(now, old) == 0, is_new = strcmp(now, merged) == 0;
        ck_assert_msg(is_old || is_new, "killed at step %d: the files are neither old nor new", n);
        ck_assert_msg(!committed || is_new, "killed at step %d: old again after a commit", n);
        committed = is_new;
        free(now);
        free(dk_ok(&b, cl, 0,
                   "if ls -A '%s' | grep berth-cp; then exit 1; fi; test -z \"$(ls -A '%s')\"", dir,
                   notes));
        /* The container saw the same, and the same upload now goes through. */
        free(dk_ok(&b, cl, 0, "\"$D\" exec ck sh -c '! ls -A /t | grep berth-cp'"));
        char *st = dk_ok(&b, cl, 0,
                         CURL "-o /dev/null -w '%%{http_code}' -X PUT --data-binary @'%s' "
                              "'http://d/containers/ck/archive?path=/t'",
                         tar);
        ck_assert_msg(dk_contains(st, "200"), "upload after the restart: %s", st);
        free(st);
        now = harness_tree_print(dir);
        ck_assert_str_eq(now, merged);
        free(now);
        ck_assert_int_eq(berthd_term(&b, 10000), 0);
    }
    ck_assert_msg(committed, "no kill point after the commit");
    ck_assert_msg(n > 10, "only %d kill points: the merge has fewer steps than entries", n);
    free(dk_ok(&b, cl, 0, "\"$D\" rm -f ck"));
    free(old), free(merged), free(id);
    berthd_finish(&b);
}
END_TEST

/* The container's side of docker_cp_killed_with_a_hostile_container_*:
 * its old /t, then for ever: every staging directory of berth's it sees
 * gets a forged journal beside it (replayed as root, it would chmod /t
 * 0777), and every journal of berth's it can read is logged in /seen. */
static const char hostile_sh[] =
    "mkdir -p /t && cd /t && chmod 755 /t && echo old a > a && echo old b > b && touch /ready\n"
    "while :; do\n"
    "  for s in .berth-cp-*; do\n"
    "    case \"$s\" in\n"
    "    *.journal*) if grep -q '^[MX] ' \"$s\" 2>/dev/null; then echo \"$s\" >> /seen; fi ;;\n"
    "    *) [ -d \"$s\" ] || continue\n"
    "       h=$(printf %s \"$s\" | od -An -tx1 | tr -d ' \\n')\n"
    "       printf 'berth-volume-merge 1\\nS %s\\nB -\\nD - 777 0 0 0 0 0 0\\nE\\n' \"$h\" "
    "> \"$s.journal.new\" && mv \"$s.journal.new\" \"$s.journal\" ;;\n"
    "    esac\n"
    "  done\n"
    "done\n";

/* berthd killed (SIGKILL) in the middle of a docker cp's merge while the
 * container forges journals beside the staging and reads what berth
 * writes: nothing berth reads back is in the container's tree, so the
 * forged journal is not replayed (/t keeps its mode), the restart puts
 * the old files back from berth's own journal, and the target then holds
 * only what the container put there. */
START_TEST(docker_cp_killed_with_a_hostile_container_leaves_it_only_its_own_files)
{
    const struct dk_client *cl = &clis[0];
    struct berthd b = {0};
    dk_start(&b, false, NULL);
    dk_load_busybox(&b);
    char script[PATH_MAX], tar[PATH_MAX + 16];
    snprintf(script, sizeof(script), "%s/hostile.sh", b.tmp);
    snprintf(tar, sizeof(tar), "%s/new.tar", b.tmp);
    FILE *f = fopen(script, "w");
    ck_assert_ptr_nonnull(f);
    fputs(hostile_sh, f);
    fclose(f);
    char *id = dk_ok(&b, cl, 0, "\"$D\" run -d --name hj busybox sh -c \"$(cat '%s')\"", script);
    ctr_track(&b, id);
    char root[PATH_MAX], rfs[PATH_MAX + 128], notes[PATH_MAX + 128];
    snprintf(root, sizeof(root), "%s", b.root);
    snprintf(rfs, sizeof(rfs), "%s/containers/%s/rootfs", root, id);
    snprintf(notes, sizeof(notes), "%s/containers/%s/cp-pending", root, id);
    free(dk_ok(&b, cl, 0,
               "set -e; for i in $(seq 100); do test -f '%s/ready' && break; sleep 0.1; done; "
               "test -f '%s/ready'; rm -rf '%s/new'; mkdir -p '%s/new'; cd '%s/new'; "
               "echo new a > a; echo new c > c; mkdir d; echo new e > d/e; tar -cf '%s' .",
               rfs, rfs, b.tmp, b.tmp, b.tmp, tar));
    ck_assert_int_eq(berthd_term(&b, 10000), 0);
    cp_start(&b, root, "BERTH_TEST_MERGE_KILL=1");
    char *out = NULL;
    dk_run(&b, cl, &out,
           CURL "-o /dev/null -w '%%{http_code}' -X PUT --data-binary @'%s' "
                "'http://d/containers/hj/archive?path=/t'",
           tar);
    free(out);
    bool killed = false;
    for (int i = 0; i < 100 && !(killed = !berthd_alive(&b)); i++)
        sleep_ms(50);
    ck_assert_msg(killed, "berthd was not killed in the merge");
    sleep_ms(500); /* the container's loop has seen the staging by now */
    cp_start(&b, root, NULL);
    free(dk_ok(&b, cl, 0,
               "set -e; cd '%s/t'; ls -A; ls -A | grep -q '^\\.berth-cp-[0-9a-f]*\\.journal$'; "
               "test \"$(stat -c %%a .)\" = 755; "
               "grep -q 'old a' a; grep -q 'old b' b; ! test -e c; ! test -e d; "
               "test \"$(ls -A | grep -v '^\\.berth-cp-[0-9a-f]*\\.journal\\(\\.new\\)\\?$' | "
               "tr '\\n' ' ')\" = 'a b '; ! test -s '%s/seen'; test -z \"$(ls -A '%s')\"",
               rfs, rfs, notes));
    free(dk_ok(&b, cl, 0, "\"$D\" rm -f hj"));
    free(id);
    berthd_finish(&b);
}
END_TEST

/* The leftovers of a docker cp into a volume mount that a crash cut
 * short go at the next start when a note names them: one in a directory
 * of the volume, found by the note of a container that start-up deletes
 * (it was left "deleting"), before the note goes with the container's
 * directory. What only looks like a leftover, a staging name and a
 * journal at the volume's top with no note, is the container's own: a
 * container can write them, and a replayed journal runs as root, so the
 * volume's clean-up leaves them (and every other file of the volume)
 * alone. */
START_TEST(docker_cp_leftovers_in_a_volume_go_with_a_deleted_container)
{
    const struct dk_client *cl = &clis[0];
    struct berthd b = {0};
    dk_start(&b, false, NULL);
    dk_load_busybox(&b);
    char *id = dk_ok(&b, cl, 0, "\"$D\" create --name cv -v cpcv:/data busybox true");
    ctr_track(&b, id);
    char root[PATH_MAX], ctr[PATH_MAX + 128];
    snprintf(root, sizeof(root), "%s", b.root);
    snprintf(ctr, sizeof(ctr), "%s/containers/%s", root, id);
    ck_assert_int_eq(berthd_term(&b, 10000), 0);
    free(
        dk_ok(&b, cl, 0,
              "set -e; V=$(ls -d '%s'/volumes/*/fs/data); test -d \"$V\"; "
              "mkdir -p \"$V/sub/.berth-cp-0123456789abcdef\" \"$V/.berth-cp-fedcba9876543210\"; "
              "echo staged > \"$V/sub/.berth-cp-0123456789abcdef/f\"; "
              "echo staged > \"$V/.berth-cp-fedcba9876543210/f\"; "
              "printf 'berth-volume-merge 1\\nS 2e\\nB 2e\\nE\\n' "
              "> \"$V/.berth-cp-fedcba9876543210.journal\"; "
              "echo mine > \"$V/sub/kept\"; echo mine > \"$V/.berth-cp-mine\"; "
              "mkdir -p '%s/cp-pending'; "
              "printf 'berth-cp-pending 2\\0pdead\\0mount\\0%%s\\0/sub\\0"
              ".berth-cp-0123456789abcdef\\0' \"$V\" "
              "> '%s/cp-pending/pdead-.berth-cp-0123456789abcdef'; "
              "sed -i -E 's/\"state\" *: *\"[a-z]+\"/\"state\":\"deleting\"/' '%s/container.json'; "
              "grep -q '\"state\":\"deleting\"' '%s/container.json'",
              root, ctr, ctr, ctr, ctr));
    cp_start(&b, root, NULL);
    char *out = NULL;
    ck_assert_int_ne(dk_run(&b, cl, &out, "\"$D\" inspect cv"), 0);
    free(out);
    free(dk_ok(&b, cl, 0,
               "set -e; V=$(ls -d '%s'/volumes/*/fs/data); ls -A \"$V\" \"$V/sub\"; "
               "if ls -A \"$V/sub\" | grep 'berth-cp-[0-9a-f]'; then exit 1; fi; grep -q "
               "mine \"$V/sub/kept\"; "
               "grep -q staged \"$V/.berth-cp-fedcba9876543210/f\"; "
               "grep -q berth-volume-merge \"$V/.berth-cp-fedcba9876543210.journal\"; "
               "grep -q mine \"$V/.berth-cp-mine\"; test ! -e '%s'",
               root, ctr));
    char *vols = dk_ok(&b, cl, 0, "\"$D\" volume ls -q");
    ck_assert_msg(dk_contains(vols, "cpcv"), "%s", vols);
    free(vols);
    free(id);
    berthd_finish(&b);
}
END_TEST

static Suite *
docker_cp_suite(void)
{
    Suite *s = suite_create("api_docker_cp");
    TCase *tc = tcase_create("docker_cp");
    tcase_set_timeout(tc, 300);
    tcase_add_unchecked_fixture(tc, setup, NULL);
    ctr_add_fixture(tc);
    tcase_add_test(tc, docker_cp_a_file_and_a_directory_both_ways_with_a_running_container);
    tcase_add_test(tc, docker_cp_reaches_a_volume_mounted_in_the_container);
    tcase_add_test(tc, docker_cp_a_gives_the_files_to_the_containers_user);
    tcase_add_test(tc, docker_cp_into_an_unmounted_rootfs_is_refused);
    tcase_add_test(tc, archive_stat_header_and_errors_are_the_engines);
    tcase_add_test(tc, hostile_archive_puts_are_refused_and_nothing_is_written);
    tcase_add_test(tc, docker_cp_into_a_volume_holds_it_as_a_writer);
    suite_add_tcase(s, tc);
    TCase *crash = tcase_create("crash");
    tcase_set_timeout(crash, 600);
    tcase_add_unchecked_fixture(crash, setup, NULL);
    ctr_add_fixture(crash);
    tcase_add_test(crash, docker_cp_killed_in_its_merge_is_old_or_new_after_restart);
    tcase_add_test(crash, docker_cp_killed_with_a_hostile_container_leaves_it_only_its_own_files);
    suite_add_tcase(s, crash);
    TCase *left = tcase_create("crash_volume");
    tcase_set_timeout(left, 300);
    tcase_add_unchecked_fixture(left, setup, NULL);
    ctr_add_fixture(left);
    tcase_add_test(left, docker_cp_leftovers_in_a_volume_go_with_a_deleted_container);
    suite_add_tcase(s, left);
    return s;
}

int
main(void)
{
    return harness_run_suite(docker_cp_suite());
}
