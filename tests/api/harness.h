/*
 * The API test harness: starts a real berthd on a loopback port with a
 * fresh temporary store root, drives it with libcurl (or raw sockets for
 * the connection-level tests), and stops it again.
 *
 * Every daemon started here is recorded, and an atexit handler kills the
 * ones still running and removes their temporary directories, so a test
 * that fails half-way (Check exits the forked test process) leaves
 * nothing behind. Only the PIDs the harness started are ever signalled.
 *
 * The binary is BERTHD_PATH, or $BERTH_TEST_BERTHD when set (to run the
 * same suites against a build with -DBERTH_BENCH_ROUTES=ON). A sanitized
 * berthd's reports go to its log; berthd_finish() fails the test when
 * there is one, or when the daemon does not exit 0 on SIGTERM.
 *
 * With $BERTH_TEST_WINE set (the path of Wine's loader, wine64), the
 * binary is berthd.exe and runs under it: the stop is SIGINT, which Wine
 * turns into the Ctrl-C that Windows programs stop on (SIGTERM would end
 * Wine's process without it), and start-ups get 60 s (Wine's first start
 * in a prefix boots its services). Linux paths stay as they are: Wine's
 * drive Z: is the Linux root, and berthd.exe makes "/tmp/x" "Z:/tmp/x".
 */
#ifndef BERTH_TESTS_API_HARNESS_H
#define BERTH_TESTS_API_HARNESS_H

#include <check.h>
#include <json-c/json.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define HARNESS_MAX_ARGS 32

struct berthd {
    pid_t pid; /* 0 once reaped */
    int wait_status;
    char tmp[PATH_MAX];  /* the temporary directory, removed at the end */
    char root[PATH_MAX]; /* --root, tmp/root unless the test gave one */
    char log_path[PATH_MAX];
    unsigned port;
    char base_url[64];
    /* The Docker API's endpoint, when the test started it (--docker-listen):
     * a unix socket, or a TCP port on 127.0.0.1. */
    char docker_sock[PATH_MAX];
    unsigned docker_port;
    char mount[PATH_MAX];     /* a mount the test made for the root; unmounted at cleanup */
    char immutable[PATH_MAX]; /* a directory the test made immutable; restored at cleanup */
};

/* What to start berthd with; every field may be left zero. */
struct berthd_opts {
    const char *args[HARNESS_MAX_ARGS]; /* extra flags, NULL-terminated */
    const char *env[16];                /* "NAME=VALUE" to set, NULL-terminated */
    const char *root;                   /* --root; default tmp/root */
    bool no_listen_flag;                /* leave --listen out (BERTH_LISTEN tests) */
    bool no_root_flag;                  /* leave --root out */
    const char *cwd;                    /* the daemon's start-up directory; default the test's */
    bool no_wait;                       /* return once forked, without waiting for the port
                                           (to kill it while it starts up) */
};

/* The berthd binary the suites run. */
const char *harness_berthd_path(void);

/* Wine's loader when the suites run berthd.exe under Wine, else NULL. */
const char *harness_wine(void);

/* A Linux path as Windows programs under Wine name it: Z: and backslashes. */
void harness_wine_path(const char *path, char *out, size_t len);

/* A fresh temporary directory (mkdtemp under $TMPDIR or /tmp); aborts on failure. */
void harness_mkdtemp(char *out, size_t len);

/*
 * Starts berthd and waits (up to 10 s, 30 s for a sanitized binary) for
 * its "listening on http://127.0.0.1:PORT" log line. Fails the test if it
 * does not come. b->tmp is created here unless the caller filled it.
 * With opts->no_wait it returns at once (b->port 0).
 */
void berthd_start(struct berthd *b, const struct berthd_opts *opts);

/* Sets or clears the immutable attribute (chattr +i) of a directory;
 * 0 or a negative errno. Setting it records path for cleanup. */
int harness_set_immutable(struct berthd *b, const char *path, bool on);

/* Sends SIGTERM and waits up to timeout_ms; returns the wait status, or
 * -1 on timeout (the daemon is then killed with SIGKILL). */
int berthd_term(struct berthd *b, int timeout_ms);
/* SIGKILL and reap. */
void berthd_kill(struct berthd *b);
/* True while the daemon has not exited (reaps it if it has). */
bool berthd_alive(struct berthd *b);

/* The daemon's log so far (caller frees). */
char *berthd_log(const struct berthd *b);

/* A fingerprint of the tree under dir: names, types, modes, sizes of all
 * but directories (which ext4 never shrinks), contents (caller frees). */
char *harness_tree_print(const char *dir);
/* A sanitizer report in the log, or NULL: the first line of it (static). */
const char *berthd_sanitizer_report(const struct berthd *b);
/* Polls the daemon's log until it holds needle, the daemon exits or
 * timeout_ms passes (three times that under a sanitizer); returns whether
 * it does. For what the daemon does after it listens, such as the
 * network's start-up reconciliation ("net: reconciled:"). */
bool berthd_wait_log(struct berthd *b, const char *needle, int timeout_ms);

/*
 * SIGTERM, then asserts that the daemon exited 0 within 10 s, logged
 * "stopped", and that the log holds no sanitizer report. Leaves the
 * temporary directory, to look at what the daemon left on the host.
 */
void berthd_stop(struct berthd *b);
/* The normal end of a test: berthd_stop, then berthd_cleanup. */
void berthd_finish(struct berthd *b);
/*
 * Kills the daemon if still running and removes its temporary directory.
 * When the store root lies in it, first what the daemon leaves on the host
 * by design or after a kill (harness_remove_leftovers).
 */
void berthd_cleanup(struct berthd *b);

/*
 * What a dead daemon on root leaves that removing root would not
 * (harness_leftovers.c): containers still known to runc under
 * root/runtime/runc (runc delete --force), mounts below root, and the
 * empty cgroups of root's cgroup parent in every hierarchy. Only what lies
 * under root or is named after it is touched. The caller makes sure no
 * daemon runs on root.
 */
void harness_remove_leftovers(const char *root);
/* The runtime's cgroup parent for root: berth-<12 hex of sha256(root)>. */
void harness_cgroup_parent_name(const char *root, char *out, size_t len);
/* Every directory named after root's cgroup parent, in each hierarchy below
 * this process's cgroup (where runc makes it: berthd's is this one's);
 * at most max in out, *n of them. */
void harness_cgroup_parent_dirs(const char *root, char (*out)[PATH_MAX], int max, int *n);

/* A reply as libcurl saw it. */
struct hresp {
    long status;   /* 0 when the transfer failed */
    int curl_code; /* CURLcode */
    char *headers; /* raw header block of the final response */
    char *body;    /* NUL-terminated */
    size_t body_len;
    json_object *json; /* parsed body, or NULL when it is not JSON */
    double total_s;    /* time for the whole transfer */
};

/* A request: headers is NULL-terminated "Name: value" lines or NULL;
 * body NULL means none; chunked sends the body without Content-Length. */
struct hreq {
    const char *method;
    const char *path;
    const char *body;
    size_t body_len; /* 0 with a body: strlen(body) */
    const char *const *headers;
    bool chunked;
    long timeout_ms;          /* default 10000 */
    bool docker;              /* to the Docker API's endpoint rather than /v1's */
    const char *content_type; /* with a body: default application/json */
};

/* Performs req against b; fills out (free with hresp_free). */
void http_do(const struct berthd *b, const struct hreq *req, struct hresp *out);
/* Shorthands. */
void http_get(const struct berthd *b, const char *path, struct hresp *out);
void http_post_json(const struct berthd *b, const char *path, const char *body, struct hresp *out);
void hresp_free(struct hresp *r);

/* A response header's value (case-insensitive name), copied into buf; NULL if absent. */
const char *hresp_header(const struct hresp *r, const char *name, char *buf, size_t len);

/* JSON helpers: the member at a dotted path ("store.root"), or NULL. */
json_object *json_at(json_object *o, const char *dotted);

/*
 * Checks an error reply: the status, a JSON body {"error": {"code":
 * code, "message": "..."}} with exactly those two members, and a message
 * containing substr (NULL: any non-empty message). Returns true, or
 * false with the reason in why.
 */
bool error_body_ok(const struct hresp *r, long status, const char *code, const char *substr,
                   char *why, size_t why_len);

#define ck_assert_error_reply(r, status, code, substr)                                             \
    do {                                                                                           \
        char why_[1024];                                                                           \
        ck_assert_msg(error_body_ok((r), (status), (code), (substr), why_, sizeof(why_)), "%s",    \
                      why_);                                                                       \
    } while (0)

/* Raw sockets, for what libcurl cannot do (half requests, idle clients). */
int raw_connect(unsigned port); /* a connected TCP socket or -1 */
bool raw_send(int fd, const char *data, size_t len);
/* Reads until EOF, len bytes or timeout; returns bytes read, sets *eof. */
size_t raw_recv(int fd, char *buf, size_t len, int timeout_ms, bool *eof);
/* Waits until the peer closes (recv returns 0 or an error); returns the
 * milliseconds it took, or -1 if it is still open after timeout_ms. */
long raw_wait_closed(int fd, int timeout_ms);

/*
 * One exchange as a hostile client has it: sends len raw bytes on a fresh
 * connection to port, reads the reply (until a complete reply with a
 * Content-Length, the peer's close, or timeout_ms) and fills out as
 * http_do does (status 0 when no status line came). With closed non-NULL,
 * then waits up to 2 s more and tells whether the server closed the
 * connection without sending anything more.
 */
void raw_http(unsigned port, const char *req, size_t len, int timeout_ms, struct hresp *out,
              bool *closed);

/* Monotonic milliseconds. */
double now_ms(void);
/* Sleeps ms milliseconds. */
void sleep_ms(long ms);

/*
 * Runs berthd to completion with args (NULL-terminated, argv[0] added) and
 * env ("NAME=VALUE", NULL-terminated, may be NULL); captures stdout and
 * stderr (caller frees) and returns the wait status, or -1 if it did not
 * exit within timeout_ms (then it is killed).
 */
int berthd_run(const char *const *args, const char *const *env, int timeout_ms, char **out,
               char **errout);

/*
 * The first JSON route among the candidates that exists on this build,
 * probed with a malformed body (so nothing runs): "/v1/images/prune"
 * once it lands, "/v1/debug/hash" in bench builds. NULL if none.
 */
const char *harness_json_route(const struct berthd *b);

/* A request run on its own thread, for requests that wait on a job. */
struct bg_req {
    pthread_t thread;
    const struct berthd *b;
    struct hreq req;
    struct hresp resp;
};
void bg_start(struct bg_req *bg, const struct berthd *b, const struct hreq *req);
void bg_join(struct bg_req *bg);

/* Polls GET /v1/health until the JSON member at dotted equals want (an
 * integer) or timeout_ms passes; returns whether it did. */
bool wait_health_int(const struct berthd *b, const char *dotted, int64_t want, int timeout_ms);

/*
 * Polls until b's store has no container directory a delete renamed out
 * of the way (containers/.removing-*: removed by a job after the delete
 * was answered) or timeout_ms passes; returns whether none was left.
 */
bool wait_container_trash_gone(const struct berthd *b, int timeout_ms);

/* Builds a Check suite runner for one suite and runs it; the main of
 * every test_*.c. */
int harness_run_suite(Suite *s);

#endif
