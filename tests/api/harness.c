/*
 * The API test harness (see harness.h): berthd processes, libcurl
 * requests, raw sockets and reply checks. Runs in the forked Check test
 * process; the daemons it starts are its children.
 */
#include "tests/api/harness.h"

#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_DAEMONS 16

/* Daemons started by this process, for the atexit safety net. */
static struct berthd *started[MAX_DAEMONS];
static bool atexit_set;

double
now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}

void
sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

const char *
harness_berthd_path(void)
{
    const char *p = getenv("BERTH_TEST_BERTHD");
    return p && *p ? p : BERTHD_PATH;
}

const char *
harness_wine(void)
{
    const char *w = getenv("BERTH_TEST_WINE");
    return w && *w ? w : NULL;
}

void
harness_wine_path(const char *path, char *out, size_t len)
{
    snprintf(out, len, "Z:%s", path);
    for (char *c = out; *c; c++)
        if (*c == '/')
            *c = '\\';
}

/* The pid of the process running the suite: temporary directories carry
 * it, so the runner can remove what a failed test (whose process Check
 * ends with _exit, skipping atexit) left behind. */
static pid_t runner_pid;

void
harness_mkdtemp(char *out, size_t len)
{
    const char *tmpdir = getenv("TMPDIR");
    snprintf(out, len, "%s/berth-api-%ld-XXXXXX", tmpdir && *tmpdir ? tmpdir : "/tmp",
             (long)(runner_pid ? runner_pid : getpid()));
    if (!mkdtemp(out))
        ck_abort_msg("mkdtemp %s: %s", out, strerror(errno));
}

static int
rm_cb(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

static void
remove_tree(const char *path)
{
    if (path[0])
        nftw(path, rm_cb, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

static void
forget(struct berthd *b)
{
    for (int i = 0; i < MAX_DAEMONS; i++)
        if (started[i] == b)
            started[i] = NULL;
}

static void
kill_all_at_exit(void)
{
    /* All first: a second daemon may run on the root of the first. */
    for (int i = 0; i < MAX_DAEMONS; i++)
        if (started[i])
            berthd_kill(started[i]);
    for (int i = 0; i < MAX_DAEMONS; i++)
        if (started[i])
            berthd_cleanup(started[i]);
}

static void
remember(struct berthd *b)
{
    if (!atexit_set) {
        atexit(kill_all_at_exit);
        atexit_set = true;
    }
    for (int i = 0; i < MAX_DAEMONS; i++) {
        if (!started[i]) {
            started[i] = b;
            return;
        }
    }
}

static bool
reap(struct berthd *b, int options)
{
    if (b->pid <= 0)
        return true;
    int status;
    pid_t r;
    while ((r = waitpid(b->pid, &status, options)) < 0 && errno == EINTR)
        ;
    if (r == b->pid || (r < 0 && errno == ECHILD)) {
        b->wait_status = r == b->pid ? status : -1;
        b->pid = 0;
        return true;
    }
    return false;
}

bool
berthd_alive(struct berthd *b)
{
    return !reap(b, WNOHANG);
}

char *
harness_tree_print(const char *dir)
{
    char cmd[PATH_MAX + 512];
    snprintf(cmd, sizeof(cmd),
             "cd '%s' && find . \\( -type d -printf '%%p %%y %%m\\n' \\) -o "
             "-printf '%%p %%y %%s %%m\\n' | sort | md5sum; "
             "find . -type f -exec md5sum {} + | sort | md5sum",
             dir);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    char *buf = calloc(1, 256);
    ck_assert_ptr_nonnull(buf);
    size_t n = fread(buf, 1, 255, p);
    buf[n] = '\0';
    pclose(p);
    return buf;
}

char *
berthd_log(const struct berthd *b)
{
    FILE *f = fopen(b->log_path, "r");
    if (!f)
        return strdup("");
    char *data = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&data, &len);
    char buf[8192];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
        fwrite(buf, 1, n, mem);
    fclose(f);
    fclose(mem);
    return data;
}

const char *
berthd_sanitizer_report(const struct berthd *b)
{
    static char line[512];
    static const char *const marks[] = {"ERROR: AddressSanitizer", "ERROR: LeakSanitizer",
                                        "runtime error:", "WARNING: AddressSanitizer", NULL};
    char *log = berthd_log(b);
    const char *found = NULL;
    for (const char *const *m = marks; *m && !found; m++) {
        const char *p = strstr(log, *m);
        if (p) {
            const char *start = p;
            while (start > log && start[-1] != '\n')
                start--;
            size_t n = strcspn(start, "\n");
            snprintf(line, sizeof(line), "%.*s", (int)n, start);
            found = line;
        }
    }
    free(log);
    return found;
}

static bool
is_sanitized(void)
{
    /* A sanitized binary carries the ASan runtime's symbols; the cheap
     * test is the library string in the file. */
    static int cached = -1;
    if (cached >= 0)
        return cached;
    cached = 0;
    FILE *f = fopen(harness_berthd_path(), "rb");
    if (!f)
        return false;
    static const char needle[] = "AddressSanitizer";
    char buf[65536 + sizeof(needle)];
    size_t keep = 0, n;
    while ((n = fread(buf + keep, 1, sizeof(buf) - keep, f)) > 0) {
        size_t total = keep + n;
        if (memmem(buf, total, needle, sizeof(needle) - 1)) {
            cached = 1;
            break;
        }
        keep = sizeof(needle) - 1 < total ? sizeof(needle) - 1 : total;
        memmove(buf, buf + total - keep, keep);
    }
    fclose(f);
    return cached;
}

bool
berthd_wait_log(struct berthd *b, const char *needle, int timeout_ms)
{
    double deadline = now_ms() + (is_sanitized() ? 3.0 : 1.0) * timeout_ms;
    for (;;) {
        /* Alive before the read: a line written just before an exit is seen. */
        bool alive = berthd_alive(b);
        char *log = berthd_log(b);
        bool found = strstr(log, needle) != NULL;
        free(log);
        if (found)
            return true;
        if (!alive || now_ms() >= deadline)
            return false;
        sleep_ms(20);
    }
}

/* The port from the "listening on http://HOST:PORT" line, or 0. */
static unsigned
port_from_log(const struct berthd *b)
{
    char *log = berthd_log(b);
    unsigned port = 0;
    const char *p = strstr(log, "listening on http://");
    if (p) {
        p += strlen("listening on http://");
        const char *colon = p[0] == '[' ? strstr(p, "]:") : strchr(p, ':');
        if (colon) {
            colon += colon[0] == ']' ? 2 : 1;
            port = (unsigned)strtoul(colon, NULL, 10);
        }
    }
    free(log);
    return port;
}

/* The Docker API's endpoint, from the line it logs before the listening line. */
static void
docker_from_log(struct berthd *b)
{
    char *log = berthd_log(b);
    b->docker_sock[0] = '\0';
    b->docker_port = 0;
    const char *p = strstr(log, "docker API: serving ");
    if (p) {
        p += strlen("docker API: serving ");
        if (strncmp(p, "unix://", 7) == 0) {
            size_t n = strcspn(p + 7, " \n");
            snprintf(b->docker_sock, sizeof(b->docker_sock), "%.*s", (int)n, p + 7);
        } else if (strncmp(p, "tcp://", 6) == 0) {
            const char *colon = strchr(p + 6, ':');
            if (colon)
                b->docker_port = (unsigned)strtoul(colon + 1, NULL, 10);
        }
    }
    free(log);
}

void
berthd_start(struct berthd *b, const struct berthd_opts *opts)
{
    static const struct berthd_opts none = {0};
    if (!opts)
        opts = &none;
    if (!b->tmp[0])
        harness_mkdtemp(b->tmp, sizeof(b->tmp));
    if (opts->root)
        snprintf(b->root, sizeof(b->root), "%s", opts->root);
    else
        snprintf(b->root, sizeof(b->root), "%s/root", b->tmp);
    snprintf(b->log_path, sizeof(b->log_path), "%s/berthd.log", b->tmp);

    const char *argv[HARNESS_MAX_ARGS + 10];
    int argc = 0;
    if (harness_wine())
        argv[argc++] = harness_wine();
    argv[argc++] = harness_berthd_path();
    if (!opts->no_listen_flag) {
        argv[argc++] = "--listen";
        argv[argc++] = "127.0.0.1:0";
    }
    if (!opts->no_root_flag) {
        argv[argc++] = "--root";
        argv[argc++] = b->root;
    }
    /* The Docker API's default socket is the host's: off unless the test asks for it. */
    bool docker_asked = false;
    for (int i = 0; opts->args[i] && i < HARNESS_MAX_ARGS; i++)
        docker_asked |= strncmp(opts->args[i], "--docker-listen", 15) == 0;
    for (int i = 0; opts->env[i]; i++)
        docker_asked |= strncmp(opts->env[i], "BERTH_DOCKER_LISTEN=", 20) == 0;
    if (!docker_asked) {
        argv[argc++] = "--docker-listen";
        argv[argc++] = "none";
    }
    /* No test makes the host's berth0: without a network flag of its own,
     * a daemon gets none (harness_net_opts gives a test a network of its
     * own). */
    bool net_flag = false;
    for (int i = 0; opts->args[i] && i < HARNESS_MAX_ARGS; i++) {
        argv[argc++] = opts->args[i];
        net_flag |= strncmp(opts->args[i], "--network", 9) == 0 ||
                    strncmp(opts->args[i], "--cni-config", 12) == 0;
    }
    for (int i = 0; opts->env[i]; i++)
        net_flag |= strncmp(opts->env[i], "BERTH_NETWORK", 13) == 0 ||
                    strncmp(opts->env[i], "BERTH_CNI_CONFIG", 16) == 0;
    if (!net_flag) {
        argv[argc++] = "--network";
        argv[argc++] = "none";
    }
    argv[argc] = NULL;

    int logfd = open(b->log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    ck_assert_msg(logfd >= 0, "open %s: %s", b->log_path, strerror(errno));
    pid_t pid = fork();
    ck_assert_msg(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        /* A test that fails ends its process at once: take the daemon
         * with it rather than leave it running. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dup2(logfd, STDERR_FILENO);
        int devnull = open("/dev/null", O_RDWR);
        dup2(devnull, STDIN_FILENO);
        dup2(devnull, STDOUT_FILENO);
        /* A clean environment for berthd's own settings. */
        static const char *const ours[] = {"BERTH_LISTEN",
                                           "BERTH_ROOT",
                                           "BERTH_RUNTIME",
                                           "BERTH_OCI_RUNTIME",
                                           "BERTH_LOG_LEVEL",
                                           "BERTH_LOG_FORMAT",
                                           "BERTH_MAX_CONNECTIONS",
                                           "BERTH_CONNECTION_TIMEOUT",
                                           "BERTH_POOL_THREADS",
                                           "BERTH_DOCKER_LISTEN",
                                           "BERTH_NETWORK",
                                           "BERTH_NETWORK_NAME",
                                           "BERTH_NETWORK_POOL",
                                           "BERTH_NETWORK_GATEWAY",
                                           "BERTH_DNS",
                                           "BERTH_CNI_CONFIG",
                                           NULL};
        for (const char *const *e = ours; *e; e++)
            unsetenv(*e);
        for (int i = 0; opts->env[i]; i++)
            putenv((char *)opts->env[i]);
        if (opts->cwd && chdir(opts->cwd) < 0) {
            dprintf(STDERR_FILENO, "chdir %s: %s\n", opts->cwd, strerror(errno));
            _exit(126);
        }
        execv(argv[0], (char *const *)argv);
        dprintf(STDERR_FILENO, "exec %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    close(logfd);
    b->pid = pid;
    b->port = 0;
    remember(b);
    if (opts->no_wait)
        return;

    double deadline = now_ms() + (harness_wine() ? 60000 : is_sanitized() ? 30000 : 10000);
    while (now_ms() < deadline) {
        b->port = port_from_log(b);
        if (b->port)
            break;
        if (!berthd_alive(b))
            break;
        sleep_ms(20);
    }
    if (!b->port) {
        char *log = berthd_log(b);
        ck_abort_msg("berthd did not log its port (%s); log:\n%s",
                     b->pid ? "still running" : "exited", log);
    }
    snprintf(b->base_url, sizeof(b->base_url), "http://127.0.0.1:%u", b->port);
    docker_from_log(b);
}

int
berthd_term(struct berthd *b, int timeout_ms)
{
    if (b->pid <= 0)
        return b->wait_status;
    kill(b->pid, harness_wine() ? SIGINT : SIGTERM);
    double deadline = now_ms() + timeout_ms;
    while (now_ms() < deadline) {
        if (reap(b, WNOHANG))
            return b->wait_status;
        sleep_ms(10);
    }
    berthd_kill(b);
    return -1;
}

void
berthd_kill(struct berthd *b)
{
    if (b->pid <= 0)
        return;
    kill(b->pid, SIGKILL);
    reap(b, 0);
}

int
harness_set_immutable(struct berthd *b, const char *path, bool on)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int flags = 0, rc = 0;
    if (ioctl(fd, FS_IOC_GETFLAGS, &flags) < 0)
        rc = -errno;
    if (rc == 0) {
        flags = on ? flags | FS_IMMUTABLE_FL : flags & ~FS_IMMUTABLE_FL;
        if (ioctl(fd, FS_IOC_SETFLAGS, &flags) < 0)
            rc = -errno;
    }
    close(fd);
    if (rc == 0) {
        if (on)
            snprintf(b->immutable, sizeof(b->immutable), "%s", path);
        else
            b->immutable[0] = '\0';
    }
    return rc;
}

void
berthd_cleanup(struct berthd *b)
{
    berthd_kill(b);
    if (b->immutable[0])
        harness_set_immutable(b, b->immutable, false);
    /* A root outside tmp is the test's, or another daemon's still at work. */
    size_t tl = strlen(b->tmp);
    if (tl && strncmp(b->root, b->tmp, tl) == 0 && b->root[tl] == '/')
        harness_remove_leftovers(b->root);
    if (b->mount[0]) {
        umount2(b->mount, MNT_DETACH);
        b->mount[0] = '\0';
    }
    remove_tree(b->tmp);
    forget(b);
}

void
berthd_stop(struct berthd *b)
{
    int status = berthd_term(b, is_sanitized() ? 30000 : 10000);
    char *log = berthd_log(b);
    const char *report = berthd_sanitizer_report(b);
    ck_assert_msg(!report, "sanitizer report in berthd's log: %s\nlog:\n%s", report, log);
    ck_assert_msg(status != -1, "berthd did not exit within 10 s of SIGTERM; log:\n%s", log);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "berthd ended with wait status 0x%x (exit %d, signal %d); log:\n%s", status,
                  WIFEXITED(status) ? WEXITSTATUS(status) : -1,
                  WIFSIGNALED(status) ? WTERMSIG(status) : 0, log);
    ck_assert_msg(strstr(log, "stopped"), "berthd's log does not say it stopped:\n%s", log);
    free(log);
}

void
berthd_finish(struct berthd *b)
{
    berthd_stop(b);
    berthd_cleanup(b);
}

/* ---- libcurl ---- */

struct growbuf {
    char *data;
    size_t len;
};

static size_t
grow_cb(char *ptr, size_t size, size_t nmemb, void *ud)
{
    struct growbuf *g = ud;
    size_t n = size * nmemb;
    char *d = realloc(g->data, g->len + n + 1);
    if (!d)
        return 0;
    memcpy(d + g->len, ptr, n);
    g->data = d;
    g->len += n;
    g->data[g->len] = '\0';
    return n;
}

static size_t
header_cb(char *ptr, size_t size, size_t nmemb, void *ud)
{
    struct growbuf *g = ud;
    size_t n = size * nmemb;
    /* A new status line (after a 100 Continue) starts a new block. */
    if (n >= 5 && strncmp(ptr, "HTTP/", 5) == 0 && g->data) {
        free(g->data);
        g->data = NULL;
        g->len = 0;
    }
    return grow_cb(ptr, size, nmemb, ud);
}

struct readsrc {
    const char *data;
    size_t len, off;
};

static size_t
read_cb(char *buf, size_t size, size_t nitems, void *ud)
{
    struct readsrc *s = ud;
    size_t n = size * nitems;
    if (n > s->len - s->off)
        n = s->len - s->off;
    if (n > 16384)
        n = 16384; /* several chunks */
    memcpy(buf, s->data + s->off, n);
    s->off += n;
    return n;
}

void
http_do(const struct berthd *b, const struct hreq *req, struct hresp *out)
{
    memset(out, 0, sizeof(*out));
    CURL *c = curl_easy_init();
    ck_assert_ptr_nonnull(c);
    char url[65536];
    if (req->docker && b->docker_sock[0]) {
        snprintf(url, sizeof(url), "http://localhost%s", req->path);
        curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, b->docker_sock);
    } else if (req->docker) {
        snprintf(url, sizeof(url), "http://127.0.0.1:%u%s", b->docker_port, req->path);
    } else {
        snprintf(url, sizeof(url), "%s%s", b->base_url, req->path);
    }
    struct growbuf body = {0}, hdrs = {0};
    struct curl_slist *list = NULL;
    struct readsrc src = {0};
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_PATH_AS_IS, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, req->timeout_ms ? req->timeout_ms : 10000L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, grow_cb);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &body);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, header_cb);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &hdrs);
    const char *method = req->method ? req->method : "GET";
    if (strcmp(method, "HEAD") == 0)
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    if (req->body) {
        size_t len = req->body_len ? req->body_len : strlen(req->body);
        curl_easy_setopt(c, CURLOPT_POST, 1L);
        if (req->chunked) {
            src.data = req->body;
            src.len = len;
            curl_easy_setopt(c, CURLOPT_READFUNCTION, read_cb);
            curl_easy_setopt(c, CURLOPT_READDATA, &src);
            list = curl_slist_append(list, "Transfer-Encoding: chunked");
        } else {
            curl_easy_setopt(c, CURLOPT_POSTFIELDS, req->body);
            curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
        }
        char ct[128];
        snprintf(ct, sizeof(ct), "Content-Type: %s",
                 req->content_type ? req->content_type : "application/json");
        list = curl_slist_append(list, ct);
        list = curl_slist_append(list, "Expect:");
    }
    if (strcmp(method, "GET") != 0 || req->body)
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    for (const char *const *h = req->headers; h && *h; h++)
        list = curl_slist_append(list, *h);
    if (list)
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, list);

    out->curl_code = (int)curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &out->status);
    curl_easy_getinfo(c, CURLINFO_TOTAL_TIME, &out->total_s);
    curl_slist_free_all(list);
    curl_easy_cleanup(c);
    out->body = body.data ? body.data : strdup("");
    out->body_len = body.len;
    out->headers = hdrs.data ? hdrs.data : strdup("");
    if (out->body_len) {
        json_tokener *tok = json_tokener_new();
        out->json = json_tokener_parse_ex(tok, out->body, (int)out->body_len);
        if (json_tokener_get_error(tok) != json_tokener_success) {
            json_object_put(out->json);
            out->json = NULL;
        }
        json_tokener_free(tok);
    }
}

void
http_get(const struct berthd *b, const char *path, struct hresp *out)
{
    http_do(b, &(struct hreq){.method = "GET", .path = path}, out);
}

void
http_post_json(const struct berthd *b, const char *path, const char *body, struct hresp *out)
{
    http_do(b, &(struct hreq){.method = "POST", .path = path, .body = body}, out);
}

void
hresp_free(struct hresp *r)
{
    free(r->body);
    free(r->headers);
    json_object_put(r->json);
    memset(r, 0, sizeof(*r));
}

const char *
hresp_header(const struct hresp *r, const char *name, char *buf, size_t len)
{
    size_t nlen = strlen(name);
    for (const char *line = r->headers; line && *line;) {
        const char *eol = strstr(line, "\r\n");
        size_t llen = eol ? (size_t)(eol - line) : strlen(line);
        if (llen > nlen && strncasecmp(line, name, nlen) == 0 && line[nlen] == ':') {
            const char *v = line + nlen + 1;
            while (*v == ' ')
                v++;
            snprintf(buf, len, "%.*s", (int)(llen - (size_t)(v - line)), v);
            return buf;
        }
        line = eol ? eol + 2 : line + llen;
    }
    return NULL;
}

json_object *
json_at(json_object *o, const char *dotted)
{
    char key[256];
    const char *p = dotted;
    while (o && *p) {
        size_t n = strcspn(p, ".");
        snprintf(key, sizeof(key), "%.*s", (int)n, p);
        json_object *next = NULL;
        if (!json_object_is_type(o, json_type_object) || !json_object_object_get_ex(o, key, &next))
            return NULL;
        o = next;
        p += n;
        if (*p == '.')
            p++;
    }
    return o;
}

bool
error_body_ok(const struct hresp *r, long status, const char *code, const char *substr, char *why,
              size_t why_len)
{
    if (r->status != status) {
        snprintf(why, why_len, "status %ld, expected %ld (curl code %d); body: %s", r->status,
                 status, r->curl_code, r->body);
        return false;
    }
    json_object *err = json_at(r->json, "error");
    if (!r->json || !json_object_is_type(r->json, json_type_object) ||
        json_object_object_length(r->json) != 1 || !err ||
        !json_object_is_type(err, json_type_object) || json_object_object_length(err) != 2) {
        snprintf(why, why_len, "body is not {\"error\": {\"code\", \"message\"}}: %s", r->body);
        return false;
    }
    json_object *c = json_at(err, "code"), *m = json_at(err, "message");
    if (!c || !json_object_is_type(c, json_type_string) || !m ||
        !json_object_is_type(m, json_type_string)) {
        snprintf(why, why_len, "error.code and error.message must be strings: %s", r->body);
        return false;
    }
    if (strcmp(json_object_get_string(c), code) != 0) {
        snprintf(why, why_len, "error.code \"%s\", expected \"%s\"; body: %s",
                 json_object_get_string(c), code, r->body);
        return false;
    }
    const char *msg = json_object_get_string(m);
    if (!*msg || (substr && !strstr(msg, substr))) {
        snprintf(why, why_len, "error.message \"%s\" does not contain \"%s\"", msg,
                 substr ? substr : "anything");
        return false;
    }
    char ct[128];
    if (!hresp_header(r, "Content-Type", ct, sizeof(ct)) ||
        strncmp(ct, "application/json", 16) != 0) {
        snprintf(why, why_len, "Content-Type is %s, expected application/json",
                 hresp_header(r, "Content-Type", ct, sizeof(ct)) ? ct : "absent");
        return false;
    }
    return true;
}

/* ---- raw sockets ---- */

int
raw_connect(unsigned port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0) {
        close(fd);
        return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
}

bool
raw_send(int fd, const char *data, size_t len)
{
    while (len > 0) {
        ssize_t n = send(fd, data, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        data += n;
        len -= (size_t)n;
    }
    return true;
}

size_t
raw_recv(int fd, char *buf, size_t len, int timeout_ms, bool *eof)
{
    size_t got = 0;
    double deadline = now_ms() + timeout_ms;
    *eof = false;
    while (got < len) {
        int left = (int)(deadline - now_ms());
        if (left <= 0)
            break;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int r = poll(&p, 1, left);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        ssize_t n = recv(fd, buf + got, len - got, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            *eof = true;
            break;
        }
        got += (size_t)n;
        /* A complete reply with Content-Length: stop there. */
        buf[got < len ? got : len - 1] = '\0';
        const char *hend = strstr(buf, "\r\n\r\n");
        const char *cl = strcasestr(buf, "\r\nContent-Length:");
        if (hend && cl && cl < hend && got >= (size_t)(hend + 4 - buf) + strtoul(cl + 17, NULL, 10))
            break;
    }
    if (got < len)
        buf[got] = '\0';
    return got;
}

long
raw_wait_closed(int fd, int timeout_ms)
{
    double start = now_ms();
    double deadline = start + timeout_ms;
    char buf[4096];
    for (;;) {
        int left = (int)(deadline - now_ms());
        if (left <= 0)
            return -1;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int r = poll(&p, 1, left);
        if (r < 0 && errno == EINTR)
            continue;
        if (r == 0)
            return -1;
        ssize_t n = recv(fd, buf, sizeof(buf), 0);
        if (n <= 0)
            return (long)(now_ms() - start);
    }
}

void
raw_http(unsigned port, const char *req, size_t len, int timeout_ms, struct hresp *out,
         bool *closed)
{
    memset(out, 0, sizeof(*out));
    int fd = raw_connect(port);
    ck_assert_msg(fd >= 0, "raw_http: cannot connect to port %u", port);
    raw_send(fd, req, len); /* a server that answers early may close first */
    size_t cap = 1 << 20;
    char *buf = calloc(1, cap + 1);
    ck_assert_ptr_nonnull(buf);
    bool eof = false;
    size_t got = raw_recv(fd, buf, cap, timeout_ms, &eof);
    buf[got] = '\0';
    if (closed && !eof) {
        /* Closed, and with nothing more: a second reply would mean the
         * server read the rest of the bytes as another request. */
        char extra[256];
        struct pollfd p = {.fd = fd, .events = POLLIN};
        *closed = poll(&p, 1, 2000) == 1 && recv(fd, extra, sizeof(extra), 0) <= 0;
    } else if (closed) {
        *closed = true;
    }
    close(fd);
    const char *hend = strstr(buf, "\r\n\r\n");
    if (strncmp(buf, "HTTP/1.", 7) == 0 && strlen(buf) > 12)
        out->status = strtol(buf + 9, NULL, 10);
    size_t hlen = hend ? (size_t)(hend - buf) + 4 : got;
    out->headers = strndup(buf, hlen);
    out->body = strdup(buf + hlen);
    out->body_len = got - hlen;
    free(buf);
    if (out->body_len) {
        json_tokener *tok = json_tokener_new();
        out->json = json_tokener_parse_ex(tok, out->body, (int)out->body_len);
        if (json_tokener_get_error(tok) != json_tokener_success) {
            json_object_put(out->json);
            out->json = NULL;
        }
        json_tokener_free(tok);
    }
}

/* ---- running berthd to completion ---- */

static char *
slurp_fd(int fd)
{
    struct growbuf g = {0};
    char buf[4096];
    ssize_t n;
    while ((n = read(fd, buf, sizeof(buf))) > 0)
        grow_cb(buf, 1, (size_t)n, &g);
    return g.data ? g.data : strdup("");
}

int
berthd_run(const char *const *args, const char *const *env, int timeout_ms, char **out,
           char **errout)
{
    char tmp[PATH_MAX], opath[PATH_MAX + 16], epath[PATH_MAX + 16];
    harness_mkdtemp(tmp, sizeof(tmp));
    snprintf(opath, sizeof(opath), "%s/stdout", tmp);
    snprintf(epath, sizeof(epath), "%s/stderr", tmp);
    int ofd = open(opath, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    int efd = open(epath, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    ck_assert(ofd >= 0 && efd >= 0);
    const char *argv[HARNESS_MAX_ARGS + 5];
    int argc = 0;
    if (harness_wine())
        argv[argc++] = harness_wine();
    argv[argc++] = harness_berthd_path();
    bool net_flag = false;
    for (int i = 0; args && args[i] && argc < HARNESS_MAX_ARGS; i++) {
        argv[argc++] = args[i];
        net_flag |=
            strncmp(args[i], "--network", 9) == 0 || strncmp(args[i], "--cni-config", 12) == 0;
    }
    for (int i = 0; env && env[i]; i++)
        net_flag |= strncmp(env[i], "BERTH_NETWORK", 13) == 0 ||
                    strncmp(env[i], "BERTH_CNI_CONFIG", 16) == 0;
    /* As berthd_start: never the host's berth0, should one start. */
    if (!net_flag) {
        argv[argc++] = "--network";
        argv[argc++] = "none";
    }
    argv[argc] = NULL;
    pid_t pid = fork();
    ck_assert(pid >= 0);
    if (pid == 0) {
        dup2(ofd, STDOUT_FILENO);
        dup2(efd, STDERR_FILENO);
        unsetenv("BERTH_LISTEN");
        unsetenv("BERTH_LOG_LEVEL");
        unsetenv("BERTH_RUNTIME");
        unsetenv("BERTH_NETWORK");
        unsetenv("BERTH_NETWORK_NAME");
        unsetenv("BERTH_NETWORK_POOL");
        unsetenv("BERTH_NETWORK_GATEWAY");
        unsetenv("BERTH_DNS");
        unsetenv("BERTH_CNI_CONFIG");
        for (int i = 0; env && env[i]; i++)
            putenv((char *)env[i]);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    /* Not a long-running daemon, but a bad flag could still start one:
     * make sure it is stopped, by its PID. */
    int status = -1;
    double deadline = now_ms() + timeout_ms;
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            break;
        if (now_ms() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
            status = -1;
            break;
        }
        sleep_ms(10);
    }
    lseek(ofd, 0, SEEK_SET);
    lseek(efd, 0, SEEK_SET);
    *out = slurp_fd(ofd);
    *errout = slurp_fd(efd);
    close(ofd);
    close(efd);
    remove_tree(tmp);
    return status;
}

const char *
harness_json_route(const struct berthd *b)
{
    static const char *const candidates[] = {"/v1/images/prune", "/v1/debug/hash", NULL};
    for (const char *const *c = candidates; *c; c++) {
        struct hresp r;
        http_post_json(b, *c, "{", &r);
        long st = r.status;
        hresp_free(&r);
        if (st == 400)
            return *c;
    }
    return NULL;
}

static void *
bg_main(void *arg)
{
    struct bg_req *bg = arg;
    http_do(bg->b, &bg->req, &bg->resp);
    return NULL;
}

void
bg_start(struct bg_req *bg, const struct berthd *b, const struct hreq *req)
{
    memset(&bg->resp, 0, sizeof(bg->resp));
    bg->b = b;
    bg->req = *req;
    ck_assert_int_eq(pthread_create(&bg->thread, NULL, bg_main, bg), 0);
}

void
bg_join(struct bg_req *bg)
{
    pthread_join(bg->thread, NULL);
}

bool
wait_health_int(const struct berthd *b, const char *dotted, int64_t want, int timeout_ms)
{
    double deadline = now_ms() + timeout_ms;
    do {
        struct hresp r;
        http_get(b, "/v1/health", &r);
        json_object *v = json_at(r.json, dotted);
        bool ok = v && json_object_is_type(v, json_type_int) && json_object_get_int64(v) == want;
        hresp_free(&r);
        if (ok)
            return true;
        sleep_ms(20);
    } while (now_ms() < deadline);
    return false;
}

static bool
container_trash_left(const char *root)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s/containers", root);
    DIR *d = opendir(dir);
    if (!d)
        return false;
    bool left = false;
    struct dirent *e;
    while (!left && (e = readdir(d)))
        left = strncmp(e->d_name, ".removing-", strlen(".removing-")) == 0;
    closedir(d);
    return left;
}

bool
wait_container_trash_gone(const struct berthd *b, int timeout_ms)
{
    double deadline = now_ms() + timeout_ms;
    while (container_trash_left(b->root)) {
        if (now_ms() >= deadline)
            return false;
        sleep_ms(20);
    }
    return true;
}

int
harness_run_suite(Suite *s)
{
    runner_pid = getpid();
    curl_global_init(CURL_GLOBAL_DEFAULT);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    curl_global_cleanup();
    /* What failed tests left: their daemons died with them; remove their
     * directories (never through a mount a container may have left). */
    const char *tmpdir = getenv("TMPDIR");
    if (!tmpdir || !*tmpdir)
        tmpdir = "/tmp";
    char prefix[64];
    snprintf(prefix, sizeof(prefix), "berth-api-%ld-", (long)runner_pid);
    /* BERTH_TEST_KEEP=1 keeps them, with the daemons' logs, for a look. */
    const char *keep = getenv("BERTH_TEST_KEEP");
    DIR *d = keep && *keep == '1' ? NULL : opendir(tmpdir);
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL) {
        if (strncmp(de->d_name, prefix, strlen(prefix)) != 0)
            continue;
        char path[PATH_MAX], root[PATH_MAX + 8];
        snprintf(path, sizeof(path), "%s/%s", tmpdir, de->d_name);
        /* Its daemon got SIGKILL with the test (PR_SET_PDEATHSIG): what
         * it left running or mounted there, and its cgroups, go too. */
        snprintf(root, sizeof(root), "%s/root", path);
        harness_remove_leftovers(root);
        nftw(path, rm_cb, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
    }
    if (d)
        closedir(d);
    return failed == 0 ? 0 : 1;
}
