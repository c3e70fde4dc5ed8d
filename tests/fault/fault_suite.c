/* The fault suites' engine: control client and walk; see fault_suite.h (checks: fault_checks.c). */
#include "tests/fault/fault_suite.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

const char *const fault_kind_names[FAULT_KINDS] = {
    "fsync", "rename",   "write",   "mount",   "umount",  "unlink",
    "mkdir", "sqlwrite", "sqlsync", "sqlread", "sqllock",
};

static unsigned failures; /* with BERTH_FAULT_KEEP_GOING */

void
fault_suite_init(void)
{
    const char *p = getenv("BERTH_TEST_BERTHD_FAULT");
    setenv("BERTH_TEST_BERTHD", p && *p ? p : BERTHD_FAULT_PATH, 1);
}

static void
ctl_path(const struct berthd *b, char *out, size_t len)
{
    snprintf(out, len, "%s/fault.sock", b->tmp);
}

void
fault_berthd_start(struct berthd *b, const struct berthd_opts *extra)
{
    static char env[PATH_MAX + 32];
    struct berthd_opts opts = {0};
    if (extra)
        opts = *extra;
    if (!b->tmp[0])
        harness_mkdtemp(b->tmp, sizeof(b->tmp));
    char path[PATH_MAX];
    ctl_path(b, path, sizeof(path));
    snprintf(env, sizeof(env), "BERTH_FAULT_CTL=%s", path);
    size_t n = 0;
    while (opts.env[n])
        n++;
    ck_assert_uint_lt(n, sizeof(opts.env) / sizeof(opts.env[0]) - 1);
    opts.env[n] = env;
    opts.env[n + 1] = NULL;
    berthd_start(b, &opts);
}

void
fault_cmd(const struct berthd *b, const char *cmd, char *out, size_t len)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    ctl_path(b, sa.sun_path, sizeof(sa.sun_path));
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(fd, 0);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        int e = errno;
        close(fd);
        ck_abort_msg("fault control %s: %s (is the daemon berthd-fault?)", sa.sun_path,
                     strerror(e));
    }
    char line[600];
    int n = snprintf(line, sizeof(line), "%s\n", cmd);
    ck_assert_int_eq(send(fd, line, (size_t)n, MSG_NOSIGNAL), n);
    size_t got = 0;
    ssize_t r;
    while (got + 1 < len && (r = recv(fd, out + got, len - 1 - got, 0)) > 0)
        got += (size_t)r;
    out[got] = '\0';
    close(fd);
}

void
fault_arm(const struct berthd *b, const char *spec)
{
    char cmd[256], out[512];
    snprintf(cmd, sizeof(cmd), "arm %s", spec);
    fault_cmd(b, cmd, out, sizeof(out));
    ck_assert_msg(strcmp(out, "ok\n") == 0, "arm %s: %s", spec, out);
}

void
fault_reset(const struct berthd *b)
{
    char out[64];
    fault_cmd(b, "reset", out, sizeof(out));
    ck_assert_msg(strcmp(out, "ok\n") == 0, "reset: %s", out);
}

void
fault_counts_get(const struct berthd *b, struct fault_counts *c)
{
    char out[2048];
    fault_cmd(b, "counts", out, sizeof(out));
    memset(c, 0, sizeof(*c));
    for (int k = 0; k < FAULT_KINDS; k++) {
        char key[32];
        snprintf(key, sizeof(key), "%s=", fault_kind_names[k]);
        const char *p = strstr(out, key);
        ck_assert_msg(p, "counts: no %s in %s", key, out);
        c->calls[k] = strtoul(p + strlen(key), NULL, 10);
    }
    const char *f = strstr(out, "fired=");
    ck_assert_msg(f, "counts: no fired= in %s", out);
    c->fired = strtoul(f + 6, NULL, 10);
    const char *l = strstr(out, "last: ");
    if (l)
        snprintf(c->last, sizeof(c->last), "%.*s", (int)strcspn(l + 6, "\n"), l + 6);
}

/* The last lines of the daemon's log (static). */
static const char *
log_tail(const struct berthd *b, int lines)
{
    static char tail[8192];
    char *log = berthd_log(b);
    size_t len = strlen(log);
    const char *p = log + len;
    while (p > log && lines >= 0) {
        p--;
        if (*p == '\n')
            lines--;
    }
    snprintf(tail, sizeof(tail), "%s", p);
    free(log);
    return tail;
}

void
fault_failure(const struct berthd *b, const char *what, const char *fmt, ...)
{
    char msg[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    const char *keep = getenv("BERTH_FAULT_KEEP_GOING");
    if (keep && *keep && strcmp(keep, "0") != 0) {
        failures++;
        fprintf(stderr, "FAULT FINDING %s: %s\n", what, msg);
        return;
    }
    ck_abort_msg("%s: %s\nlog tail:\n%s", what, msg, log_tail(b, 40));
}

void
fault_checks_done(const char *name)
{
    if (failures)
        ck_abort_msg("%s: %u checks failed; see FAULT FINDING lines", name, failures);
}

void
fault_http(const struct berthd *b, const char *method, const char *path, const char *body,
           struct hresp *out)
{
    http_do(b,
            &(struct hreq){.method = method,
                           .path = path,
                           .body = body,
                           .headers = (const char *[]){"Content-Type: application/json", NULL},
                           .timeout_ms = 60000},
            out);
}

/* ---- the walk --------------------------------------------------------------------- */

static bool
walk_full(void)
{
    const char *w = getenv("BERTH_FAULT_WALK");
    return w && strcmp(w, "full") == 0;
}

/*
 * The Ns to walk for a kind counted count times; returns how many. The
 * first and last few always: an operation's set-up and its clean-up (a
 * lease dropped, a temporary removed) are where a failure is most often
 * mishandled.
 */
size_t
fault_walk_points(unsigned long count, bool full, unsigned quick, unsigned long *out, size_t max)
{
    size_t n = 0;
    if (full || walk_full() || count <= quick) {
        for (unsigned long i = 1; i <= count && n < max; i++)
            out[n++] = i;
        return n;
    }
    /* A third at each end, a third spread between them. */
    unsigned end = quick / 3, mid = quick - 2 * end;
    for (unsigned long i = 1; i <= end; i++)
        out[n++] = i;
    for (unsigned long i = 1; i <= mid; i++)
        out[n++] = end + (count - 2 * end) * i / (mid + 1);
    for (unsigned long i = count - end + 1; i <= count; i++)
        out[n++] = i;
    return n;
}

unsigned
fault_quick_points(int k, unsigned n)
{
    /* A refused lock is SQLite's busy handler's to retry: a few points
     * prove that it does. */
    return k == FAULT_SQLLOCK ? 3 : n;
}

static bool
status_ok(const struct fault_op *op, long status)
{
    return status == op->ok_status[0] || (op->ok_status[1] && status == op->ok_status[1]);
}

static bool
kind_wanted(const struct fault_op *op, int k)
{
    if (!op->kinds)
        return true;
    const char *name = fault_kind_names[k];
    size_t len = strlen(name);
    for (const char *p = op->kinds; *p;) {
        size_t n = strcspn(p, ",");
        if (n == len && strncmp(p, name, len) == 0)
            return true;
        p += n;
        if (*p == ',')
            p++;
    }
    return false;
}

bool
fault_point_wanted(const char *op, const char *kind, unsigned long n)
{
    const char *only = getenv("BERTH_FAULT_POINT");
    if (!only || !*only)
        return true;
    char have[128];
    if (!kind)
        snprintf(have, sizeof(have), "%s", op);
    else
        snprintf(have, sizeof(have), "%s:%s:%lu", op, kind, n);
    size_t len = strlen(only), hlen = strlen(have);
    if (!kind) /* the operation: a prefix of what was asked for */
        return strncmp(only, have, hlen) == 0 && (only[hlen] == ':' || only[hlen] == '\0');
    return strncmp(have, only, len) == 0 && (have[len] == ':' || have[len] == '\0');
}

static bool
point_wanted(const struct fault_op *op, int k, unsigned long n)
{
    return fault_point_wanted(op->name, k < 0 ? NULL : fault_kind_names[k], n);
}

/* Undoes a success, and checks that what is left is the starting state, leaking nothing. */
static void
teardown_checked(struct berthd *b, const struct fault_op *op, const char *what)
{
    if (!op->teardown)
        return;
    op->teardown(b, op->ctx);
    char after[1200];
    snprintf(after, sizeof(after), "%s, after the teardown", what);
    fault_check_store(b, after);
}

/*
 * Starts the daemon again on its root (its log renamed before), and waits
 * for the network's start-up reconciliation: it releases what the network
 * kept of containers that are gone (a namespace, /etc files a failed
 * removal left) after the daemon listens, so the store checks must not
 * look before it is done.
 */
static void
start_again(struct berthd *b, const char *what)
{
    fault_berthd_start(b, NULL);
    fault_check(b, what, berthd_wait_log(b, "net: reconciled:", 10000),
                "the network's start-up reconciliation did not end");
}

/* Stops the daemon cleanly and starts it again on the same root. */
void
fault_restart(struct berthd *b, const char *what)
{
    int st = berthd_term(b, 20000);
    fault_check(b, what, st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
                "berthd-fault did not stop cleanly: status 0x%x", st);
    char saved[PATH_MAX + 16];
    snprintf(saved, sizeof(saved), "%s.prev", b->log_path);
    rename(b->log_path, saved);
    start_again(b, what);
}

/* Runs a garbage collection and nothing else (a prune that keeps every image). */
static void
collect_garbage(struct berthd *b, const char *what)
{
    struct hresp r;
    fault_http(b, "POST", "/v1/images/prune", "{\"keep_bytes\":1000000000000000}", &r);
    fault_check(b, what, r.status == 200, "a garbage collection answered %ld: %.300s", r.status,
                r.body);
    hresp_free(&r);
}

/*
 * A failed removal leaves what it could not remove (a temporary, an
 * unreferenced blob, a container's directory): berth logs it, and the
 * next start (temporaries) or the next garbage collection (blobs,
 * snapshots) removes it. So right after an unlink fault the store checks
 * leave such files alone (not what is listed, mounted or running), and
 * after the retry or teardown settle() restarts the daemon and collects
 * the garbage before the full checks.
 */
static bool
tolerant(int k, const char *fired)
{
    /* A removal that sets its tree aside first (a snapshot the GC takes,
     * snapshot_dir_set_aside) fails at that rename: the snapshot stays
     * whole at its name, with its row, and the next GC takes it. */
    return k == FAULT_UNLINK || (k == FAULT_RENAME && strstr(fired, "/tmp-rm-") != NULL);
}

static void
settle(struct berthd *b, int k, const char *fired, const char *what)
{
    if (!tolerant(k, fired))
        return;
    fault_restart(b, what);
    collect_garbage(b, what);
}

/* A daemon that died under a fault: say so with its log, and start it again on the root. */
static void
restart_if_dead(struct berthd *b, const char *what)
{
    if (berthd_alive(b))
        return;
    int st = b->wait_status;
    char saved[PATH_MAX + 16];
    snprintf(saved, sizeof(saved), "%s.dead", b->log_path);
    rename(b->log_path, saved);
    fault_failure(b, what, "berthd-fault exited (wait status 0x%x) under the fault; log in %s", st,
                  saved);
    start_again(b, what);
}

/* A reply that is a clean error: 4xx or 5xx with {"error": {"code", "message"}}. */
static void
check_error_reply(struct berthd *b, const char *what, const struct hresp *r)
{
    fault_check(b, what, r->status >= 400 && r->status < 600,
                "the operation answered %ld (curl code %d) under the fault: %.500s", r->status,
                r->curl_code, r->body ? r->body : "");
    if (r->status < 400)
        return;
    json_object *code = json_at(r->json, "error.code");
    char why[1024];
    bool ok =
        code && error_body_ok(r, r->status, json_object_get_string(code), NULL, why, sizeof(why));
    fault_check(b, what, ok, "not a JSON error reply: %s", code ? why : r->body);
}

int
fault_walk_timeout(int quick_s)
{
    return walk_full() ? quick_s * 10 : quick_s;
}

bool
fault_walk_filtered(void)
{
    const char *only = getenv("BERTH_FAULT_POINT");
    return only && *only;
}

unsigned
fault_walk(struct berthd *b, const struct fault_op *op)
{
    char what[1024];
    struct hresp r;
    struct fault_counts before, after;
    unsigned walked = 0;

    if (!point_wanted(op, -1, 0))
        return 0;
    fault_reset(b);
    op->setup(b, op->ctx);
    fault_reset(b);
    op->run(b, op->ctx, &r);
    fault_counts_get(b, &before);
    snprintf(what, sizeof(what), "%s (counting run)", op->name);
    fault_check(b, what, status_ok(op, r.status), "answered %ld: %.500s", r.status, r.body);
    hresp_free(&r);
    op->check_done(b, op->ctx, what);
    fault_check_store(b, what);
    teardown_checked(b, op, what);
    fprintf(stderr, "fault walk %s: calls:", op->name);
    for (int k = 0; k < FAULT_KINDS; k++)
        fprintf(stderr, " %s=%lu", fault_kind_names[k], before.calls[k]);
    fprintf(stderr, "\n");

    for (int k = 0; k < FAULT_KINDS; k++) {
        if (!kind_wanted(op, k) || before.calls[k] == 0)
            continue;
        unsigned long points[512];
        size_t np =
            fault_walk_points(before.calls[k], op->full, fault_quick_points(k, 9), points, 512);
        unsigned clean = 0, absorbed = 0, unfired = 0, here = 0;
        double t0 = now_ms();
        for (size_t i = 0; i < np; i++) {
            if (!point_wanted(op, k, points[i]))
                continue;
            char spec[64];
            snprintf(spec, sizeof(spec), "%s:%lu", fault_kind_names[k], points[i]);
            snprintf(what, sizeof(what), "%s %s", op->name, spec);
            op->setup(b, op->ctx);
            fault_arm(b, spec);
            op->run(b, op->ctx, &r);
            bool alive = berthd_alive(b);
            if (alive) {
                fault_counts_get(b, &after);
                fault_reset(b);
            } else {
                /* Dead: what fired is in its log. */
                memset(&after, 0, sizeof(after));
                after.fired = 1;
                char *log = berthd_log(b);
                const char *line = NULL;
                for (const char *p = strstr(log, "berth-fault: failing"); p;
                     p = strstr(p + 1, "berth-fault: failing"))
                    line = p;
                snprintf(after.last, sizeof(after.last), "%.*s",
                         line ? (int)strcspn(line, "\n") : 0, line ? line : "");
                free(log);
            }
            snprintf(what, sizeof(what), "%s %s (%s)", op->name, spec,
                     after.last[0] ? after.last : "no fault fired");
            restart_if_dead(b, what);
            walked++;
            here++;
            if (after.fired == 0 || status_ok(op, r.status)) {
                /* The operation made fewer calls this time, or took the fault in its stride. */
                fault_check(b, what, status_ok(op, r.status),
                            "no fault fired, yet the operation answered %ld: %.500s", r.status,
                            r.body);
                if (after.fired) {
                    absorbed++;
                    /* A busy lock is retried by SQLite's busy handler: no news. */
                    if (k != FAULT_SQLLOCK)
                        fprintf(stderr, "fault walk %s: absorbed: %s\n", op->name, after.last);
                } else {
                    unfired++;
                }
                hresp_free(&r);
                op->check_done(b, op->ctx, what);
                fault_check_store_files(b, what, !tolerant(k, after.last));
                settle(b, k, after.last, what);
                if (tolerant(k, after.last))
                    fault_check_store(b, what);
                teardown_checked(b, op, what);
                continue;
            }
            clean++;
            check_error_reply(b, what, &r);
            hresp_free(&r);
            if (op->check_failed)
                op->check_failed(b, op->ctx, what);
            fault_check_store_files(b, what, !tolerant(k, after.last));
            /* The same operation again, with nothing armed, must work. */
            char retry[1100];
            snprintf(retry, sizeof(retry), "%s, retried", what);
            op->run(b, op->ctx, &r);
            fault_check(b, retry, status_ok(op, r.status), "the retry answered %ld: %.500s",
                        r.status, r.body);
            hresp_free(&r);
            op->check_done(b, op->ctx, retry);
            settle(b, k, after.last, retry);
            fault_check_store(b, retry);
            teardown_checked(b, op, retry);
        }
        if (here)
            fprintf(stderr,
                    "fault walk %s %s: %u of %lu calls (%u failed cleanly, %u absorbed, %u not "
                    "reached) in %.1f s\n",
                    op->name, fault_kind_names[k], here, before.calls[k], clean, absorbed, unfired,
                    (now_ms() - t0) / 1000);
    }
    fault_checks_done(op->name);
    return walked;
}
