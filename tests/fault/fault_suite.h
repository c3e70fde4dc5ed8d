/*
 * The fault-injection suites' engine (tests/api/test_fault_*.c): a
 * client for berthd-fault's control socket (tests/fault/fault_wrap.c),
 * the walk that fails an operation's Nth call of each kind in turn, and
 * the checks that the store is consistent after every failure.
 *
 * A walk, for one operation: set it up and run it once with counting
 * only, to learn how many calls of each kind it makes; then for each kind
 * and each N chosen (every N with BERTH_FAULT_WALK=full, else the first
 * and last four and four between), set it up again, arm "KIND:N", run it,
 * and expect either a clean error (a 4xx/5xx JSON error, never a hang or a
 * crash) after which nothing is half-made, or a success (the fault was
 * absorbed: a busy lock retried, a short write completed) after which the
 * result is whole; then the store checks, /v1/health, and the operation
 * run again without a fault, which must succeed; then the teardown takes
 * the daemon back to where the operation started. One daemon serves the
 * whole walk, so what one failure leaks shows in the next.
 *
 * BERTH_FAULT_POINT=OP:KIND:N runs only that point (to reproduce one);
 * BERTH_FAULT_KEEP_GOING=1 reports every failed check and walks on
 * instead of stopping at the first (later points may then fail because of
 * an earlier one).
 */
#ifndef BERTH_TESTS_FAULT_FAULT_SUITE_H
#define BERTH_TESTS_FAULT_FAULT_SUITE_H

#include "tests/api/harness.h"
#include "tests/api/harness_containers.h"

/* The kinds berthd-fault counts, in the order of its "counts" reply. */
enum fault_kind {
    FAULT_FSYNC,
    FAULT_RENAME,
    FAULT_WRITE,
    FAULT_MOUNT,
    FAULT_UMOUNT,
    FAULT_UNLINK,
    FAULT_MKDIR,
    FAULT_SQLWRITE,
    FAULT_SQLSYNC,
    FAULT_SQLREAD,
    FAULT_SQLLOCK,
    FAULT_KINDS
};
extern const char *const fault_kind_names[FAULT_KINDS];

struct fault_counts {
    unsigned long calls[FAULT_KINDS];
    unsigned long fired;
    char last[768]; /* the last fault that fired, as berthd-fault logged it */
};

/* Makes the suite run berthd-fault (call first in main). */
void fault_suite_init(void);

/* Starts berthd-fault with its control socket in b->tmp; extra may be NULL. */
void fault_berthd_start(struct berthd *b, const struct berthd_opts *extra);
/* Sends one control command; the reply into out. Aborts the test if the socket does not answer. */
void fault_cmd(const struct berthd *b, const char *cmd, char *out, size_t len);
void fault_arm(const struct berthd *b, const char *spec);
void fault_reset(const struct berthd *b);
void fault_counts_get(const struct berthd *b, struct fault_counts *c);

/* Stops the daemon cleanly (asserting exit 0) and starts it again on the same root. */
void fault_restart(struct berthd *b, const char *what);

/* Reports a failed check: aborts the test, or with BERTH_FAULT_KEEP_GOING prints it and counts. */
void fault_failure(const struct berthd *b, const char *what, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Fails the test if BERTH_FAULT_KEEP_GOING let failed checks pass by (the end of a walk). */
void fault_checks_done(const char *name);
#define fault_check(b, what, cond, ...)                                                            \
    do {                                                                                           \
        if (!(cond))                                                                               \
            fault_failure((b), (what), __VA_ARGS__);                                               \
    } while (0)

/* An HTTP request with a JSON body (or none), a 60 s timeout. */
void fault_http(const struct berthd *b, const char *method, const char *path, const char *body,
                struct hresp *out);

/*
 * Everything the store must hold after any operation, failed or not:
 * /v1/health 200; every listed image whole (GET by digest, its blobs in
 * content/, its layers' snapshots in snapshots/) and nothing else in
 * content/ or snapshots/ (no orphan blob or snapshot, no snapshots/tmp-*),
 * <root>/tmp empty; every listed volume's directory and no other, no
 * upload staging or journal left in one; every listed container's
 * directory and runtime state and no other, no mount under the root but a
 * listed container's or volume's, no cgroup of this root's but a listed
 * container's, no loop device on a file under the root but a listed
 * container's.
 */
void fault_check_store(struct berthd *b, const char *what);
/* The same, but with files false it leaves alone files nothing owns (after a failed removal). */
void fault_check_store_files(struct berthd *b, const char *what, bool files);

/* The handles or digests GET path lists under key (array of objects with member field). */
size_t fault_list(const struct berthd *b, const char *path, const char *key, const char *field,
                  char out[][160], size_t max);

/*
 * A listing of the tree under dir, one sorted line per entry: path, mode,
 * owner, and for a file its size, a hash of its bytes and its mtime, for
 * a symlink its target (caller frees). Directory times are left out.
 */
char *fault_tree(const char *dir);

struct fault_op {
    const char *name;
    /* Brings the daemon to the operation's starting state; nothing is armed. */
    void (*setup)(struct berthd *b, void *ctx);
    /* The operation; fills r. */
    void (*run)(struct berthd *b, void *ctx, struct hresp *r);
    long ok_status[2]; /* statuses that mean it worked */
    /* After a clean failure: what the operation must not have left (may be NULL). */
    void (*check_failed)(struct berthd *b, void *ctx, const char *what);
    /* After a success: that its result is whole. */
    void (*check_done)(struct berthd *b, void *ctx, const char *what);
    /* Undoes a success (nothing armed), back to the starting state; may be NULL. */
    void (*teardown)(struct berthd *b, void *ctx);
    /* Kinds to walk, comma-separated; NULL: every kind the operation makes calls of. */
    const char *kinds;
    bool full; /* every N of every kind, whatever BERTH_FAULT_WALK says */
    void *ctx;
};

/* Walks op over b (see the top of this file); returns the points walked. */
unsigned fault_walk(struct berthd *b, const struct fault_op *op);
/* A test case's timeout for a walk that takes quick_s in the quick walk (longer for the full). */
int fault_walk_timeout(int quick_s);
/* Whether BERTH_FAULT_POINT restricts the walks (so a walk may cover no point). */
bool fault_walk_filtered(void);
/* Whether BERTH_FAULT_POINT=OP[:KIND[:N]] asks for op's point kind:n (kind NULL: for op at all). */
bool fault_point_wanted(const char *op, const char *kind, unsigned long n);
/*
 * The Ns a walk takes for a kind counted count times: every one when full
 * (or BERTH_FAULT_WALK=full) or when there are at most quick, else quick
 * of them, a third from each end and a third spread between; how many.
 */
size_t fault_walk_points(unsigned long count, bool full, unsigned quick, unsigned long *out,
                         size_t max);
/* The quick walk's points for kind k: n, fewer for sqllock. */
unsigned fault_quick_points(int k, unsigned n);

#endif
