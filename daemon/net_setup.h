/*
 * The outline of the network service's setup, the same on Linux
 * (daemon/net.c: the bridge, forwarding, the rules) and on Windows
 * (daemon/net_hcn_windows.c: the HCN network found or made): the state
 * (none, running, done, failed), the last failure's error, the callers
 * that wait for the setup in progress, and how its job is queued and
 * undone. Each platform embeds a struct net_setup in its struct net and
 * passes in its own job (work on a pool thread, done on the loop); the
 * attaches that wait for a setup stay the platform's, and the error they
 * get is net_setup_waiter_err's; a teardown's end and its refusal while a
 * setup runs are shared too. Also the health probe's answer for
 * --network none, which both platforms give alike.
 *
 * Loop thread, except net_probe_disabled (any thread).
 */
#ifndef BERTH_DAEMON_NET_SETUP_H
#define BERTH_DAEMON_NET_SETUP_H

#include <stdbool.h>

#include "common/err.h"
#include "daemon/job.h"
#include "daemon/net.h"

enum net_setup_state { NET_SETUP_NONE, NET_SETUP_RUNNING, NET_SETUP_DONE, NET_SETUP_FAILED };

struct net_setup_cb;

struct net_setup {
    enum net_setup_state state;
    struct err err;           /* the last setup's, when it failed */
    struct net_setup_cb *cbs; /* callers of the setup in progress, newest first */
    struct job_queue *jobs;
    unsigned *inflight;        /* the service's count of work not finished */
    const bool *shutting_down; /* the service's: no new setup once set */
};

/* The service's jobs, counter and shutdown flag, which outlive s. */
void net_setup_init(struct net_setup *s, struct job_queue *jobs, unsigned *inflight,
                    const bool *shutting_down);
/* Frees callbacks still queued (none, when nothing is in flight). */
void net_setup_close(struct net_setup *s);

/* A platform's setup job: what runs it, and how to free one that never ran. */
struct net_setup_job {
    const char *name; /* in logs and metrics: "net.setup" */
    job_work_fn work; /* pool thread */
    job_done_fn done; /* loop: net_setup_end first, net_setup_notify when it is time */
    void (*free)(void *job);
};

/*
 * Queues cb (NULL: none) for the end of the setup, and submits job with
 * ops unless a setup is running already (that one's end is cb's too).
 * job is s's from the call on: submitted, or freed with ops->free when a
 * setup runs already or when anything fails (NULL: it could not be made,
 * ENOMEM). On failure nothing stays queued and cb is never called:
 * ECANCELED while shutting down, ENOMEM, or job_submit's error.
 */
int net_setup_begin(struct net_setup *s, const struct net_setup_job *ops, void *job, net_done_cb cb,
                    void *arg, struct err *err);

/*
 * The job's done, first: the count, the error of a job cancelled before
 * it ran (*rc and *err set, naming the network), then the state, and the
 * error kept (and logged) or cleared.
 */
void net_setup_end(struct net_setup *s, bool cancelled, const char *network, int *rc,
                   struct err *err);

/* Calls (and forgets) the callbacks queued for the setup that ended with rc and err. */
void net_setup_notify(struct net_setup *s, int rc, const struct err *err);

/* EBUSY naming network when a setup runs (a teardown or a second setup must wait), else 0. */
int net_setup_busy(const struct net_setup *s, const char *network, struct err *err);

/*
 * A teardown job's done, first: the count, and the error of one
 * cancelled before it ran. Which state a teardown that worked leaves is
 * the platform's (none: the next attach sets up again).
 */
void net_teardown_end(struct net_setup *s, bool cancelled, int *rc, struct err *err);

/* The last setup's error, or NULL when it succeeded (or has not run). */
const struct err *net_setup_failure(const struct net_setup *s);

/* The error of an attach that waited for a setup that failed: ERR_UNAVAILABLE, its message. */
void net_setup_waiter_err(const struct net_setup *s, struct err *out);

/* Clears out; with --network none says so in it and returns true. Any thread. */
bool net_probe_disabled(bool disabled, struct net_health *out);

#endif
