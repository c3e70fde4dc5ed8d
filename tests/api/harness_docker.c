/* Docker API suite helpers; see harness_docker.h. */
#include "harness_docker.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness_containers.h"

static char images_dir[PATH_MAX];

/* The first line a shell command prints (static). */
static const char *
sh_line(const char *cmd)
{
    static char line[512];
    line[0] = '\0';
    FILE *p = popen(cmd, "r");
    if (!p)
        return line;
    if (!fgets(line, sizeof(line), p))
        line[0] = '\0';
    pclose(p);
    line[strcspn(line, "\n")] = '\0';
    return line;
}

static bool
add_client(struct dk_client *out, size_t *n, const char *path, const char *version)
{
    for (size_t i = 0; i < *n; i++)
        if (strcmp(out[i].path, path) == 0 || strcmp(out[i].version, version) == 0)
            return false;
    if (*n >= DK_MAX_CLIENTS || !*version)
        return false;
    snprintf(out[*n].path, sizeof(out[*n].path), "%s", path);
    snprintf(out[*n].version, sizeof(out[*n].version), "%s", version);
    (*n)++;
    return true;
}

size_t
dk_clis(struct dk_client out[DK_MAX_CLIENTS])
{
    size_t n = 0;
    const char *env = getenv("BERTH_DOCKER_CLIENTS");
    char list[4096];
    snprintf(list, sizeof(list), "%s", env ? env : "");
    /* Without the variable (a suite run by hand): what deps.sh would find. */
    if (!env || !*env)
        snprintf(list, sizeof(list), "%s:%s", sh_line("command -v docker"),
                 sh_line("ls /var/cache/berth-docker/*/docker 2>/dev/null | head -1"));
    char *save = NULL;
    for (char *p = strtok_r(list, ":", &save); p; p = strtok_r(NULL, ":", &save)) {
        if (access(p, X_OK) != 0)
            continue;
        char cmd[PATH_MAX + 64];
        snprintf(cmd, sizeof(cmd), "'%s' version --format '{{.Client.Version}}' 2>/dev/null", p);
        add_client(out, &n, p, sh_line(cmd));
    }
    if (n == 0) {
        fprintf(stderr, "skipped: no docker CLI (see berth_docker_clients in scripts/deps.sh)\n");
        exit(77);
    }
    return n;
}

size_t
dk_pythons(struct dk_client out[DK_MAX_CLIENTS])
{
    size_t n = 0;
    /* Debian's interpreter (python3-docker), and the one on PATH when it differs. */
    const char *cands[] = {"/usr/bin/python3", sh_line("command -v python3"), NULL};
    char paths[2][PATH_MAX];
    for (size_t i = 0; cands[i] && i < 2; i++)
        snprintf(paths[i], sizeof(paths[i]), "%s", cands[i]);
    for (size_t i = 0; i < 2; i++) {
        if (!paths[i][0] || access(paths[i], X_OK) != 0)
            continue;
        char cmd[PATH_MAX + 128];
        snprintf(cmd, sizeof(cmd), "'%s' -c 'import docker; print(docker.__version__)' 2>/dev/null",
                 paths[i]);
        add_client(out, &n, paths[i], sh_line(cmd));
    }
    if (n == 0) {
        fprintf(stderr, "skipped: no Python with docker-py (python3-docker)\n");
        exit(77);
    }
    return n;
}

void
dk_start(struct berthd *b, bool tcp, const char *const *extra)
{
    struct berthd_opts o = {0};
    char listen[PATH_MAX + 16];
    if (!b->tmp[0])
        harness_mkdtemp(b->tmp, sizeof(b->tmp));
    if (tcp)
        snprintf(listen, sizeof(listen), "tcp://127.0.0.1:0");
    else
        snprintf(listen, sizeof(listen), "unix://%s/docker.sock", b->tmp);
    size_t n = 0;
    o.args[n++] = "--docker-listen";
    o.args[n++] = listen;
    for (size_t i = 0; extra && extra[i] && n < HARNESS_MAX_ARGS - 1; i++)
        o.args[n++] = extra[i];
    berthd_start(b, &o);
    ck_assert_msg(tcp ? b->docker_port != 0 : b->docker_sock[0] != '\0',
                  "berthd did not log its Docker API endpoint");
}

const char *
dk_host(const struct berthd *b)
{
    static char host[PATH_MAX + 16];
    if (b->docker_sock[0])
        snprintf(host, sizeof(host), "unix://%s", b->docker_sock);
    else
        snprintf(host, sizeof(host), "tcp://127.0.0.1:%u", b->docker_port);
    return host;
}

static int
vrun(const struct berthd *b, const struct dk_client *cl, char **out, const char *fmt, va_list ap)
{
    char body[8192], cmd[PATH_MAX * 3];
    vsnprintf(body, sizeof(body), fmt, ap);
    /* The command goes through the environment: any quotes in it stay its own. */
    setenv("DK_CMD", body, 1);
    /* A config directory of the test's own: no credentials or contexts of the host's. */
    snprintf(cmd, sizeof(cmd),
             "export DOCKER_HOST='%s' DOCKER_CONFIG='%s/docker-config' D='%s' "
             "DOCKER_CLI_HINTS=false; timeout 60 sh -c \"$DK_CMD\" 2>&1",
             dk_host(b), b->tmp, cl->path);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + len, 1, cap - len - 1, p)) > 0) {
        len += got;
        if (len + 1 == cap)
            buf = realloc(buf, cap *= 2);
    }
    ck_assert_ptr_nonnull(buf);
    buf[len] = '\0';
    int st = pclose(p);
    *out = buf;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

int
dk_run(const struct berthd *b, const struct dk_client *cl, char **out, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int st = vrun(b, cl, out, fmt, ap);
    va_end(ap);
    return st;
}

char *
dk_ok(const struct berthd *b, const struct dk_client *cl, int want, const char *fmt, ...)
{
    char *out = NULL;
    va_list ap;
    va_start(ap, fmt);
    int st = vrun(b, cl, &out, fmt, ap);
    va_end(ap);
    char shown[512];
    va_start(ap, fmt);
    vsnprintf(shown, sizeof(shown), fmt, ap);
    va_end(ap);
    ck_assert_msg(st == want, "docker %s: `%s` exited %d, expected %d; output:\n%s", cl->version,
                  shown, st, want, out);
    out[strcspn(out, "\n")] = '\0';
    return out;
}

static void
build_images(void)
{
    if (images_dir[0])
        return;
    ctr_require_runtime();
    if (system("command -v skopeo >/dev/null && command -v umoci >/dev/null") != 0) {
        fprintf(stderr, "skipped: needs skopeo and umoci\n");
        exit(77);
    }
    harness_mkdtemp(images_dir, sizeof(images_dir));
    char cmd[PATH_MAX * 2];
    snprintf(cmd, sizeof(cmd), "'%s/tests/fixtures/make-docker-images.sh' '%s' >/dev/null 2>&1",
             BERTH_SOURCE_DIR, images_dir);
    ck_assert_msg(system(cmd) == 0, "make-docker-images.sh failed");
}

const char *
dk_busybox_archive(void)
{
    static char path[PATH_MAX];
    build_images();
    snprintf(path, sizeof(path), "%s/busybox.tar", images_dir);
    return path;
}

const char *
dk_oci_archive(void)
{
    static char path[PATH_MAX];
    build_images();
    snprintf(path, sizeof(path), "%s/ocibox.tar", images_dir);
    return path;
}

void
dk_load_busybox(const struct berthd *b)
{
    FILE *f = fopen(dk_busybox_archive(), "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *data = malloc((size_t)len);
    ck_assert_ptr_nonnull(data);
    ck_assert_uint_eq(fread(data, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    struct hresp r;
    struct hreq q = {.method = "POST",
                     .path = "/images/load?quiet=1",
                     .body = data,
                     .body_len = (size_t)len,
                     .docker = true,
                     .content_type = "application/x-tar",
                     .timeout_ms = 60000};
    http_do(b, &q, &r);
    ck_assert_msg(r.status == 200 && strstr(r.body, "Loaded image: busybox:latest"), "load: %ld %s",
                  r.status, r.body);
    hresp_free(&r);
    free(data);
}

void
dk_track_all(const struct berthd *b)
{
    struct hresp r;
    http_get(b, "/v1/containers", &r);
    json_object *arr = json_at(r.json, "containers");
    for (size_t i = 0; arr && i < json_object_array_length(arr); i++)
        ctr_track(b, json_object_get_string(json_at(json_object_array_get_idx(arr, i), "handle")));
    hresp_free(&r);
}

int
dk_connect(const struct berthd *b)
{
    if (!b->docker_sock[0])
        return raw_connect(b->docker_port);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", b->docker_sock);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

bool
dk_contains(const char *s, const char *sub)
{
    return s && strstr(s, sub) != NULL;
}
