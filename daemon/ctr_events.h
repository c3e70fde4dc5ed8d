/*
 * What happens to containers, as events: created, started, killed (a
 * signal sent), died (the main process exited), stopped, restarted,
 * destroyed. Front ends subscribe (the Docker API's /events and its
 * waits) and the service keeps the latest CTR_EVENTS_HISTORY of them for
 * subscribers that ask for what came since a time. Each event carries
 * copies of what a subscriber shows (handle, name, image, labels), so
 * history outlives its containers. Loop thread only.
 */
#ifndef BERTH_DAEMON_CTR_EVENTS_H
#define BERTH_DAEMON_CTR_EVENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/containers.h"

#define CTR_EVENTS_HISTORY 256

enum ctr_change_kind {
    CTR_CHANGE_CREATE,
    CTR_CHANGE_START,
    CTR_CHANGE_KILL,
    CTR_CHANGE_DIE,
    CTR_CHANGE_STOP,
    CTR_CHANGE_RESTART,
    CTR_CHANGE_DESTROY,
};

const char *ctr_change_name(enum ctr_change_kind k);

struct ctr_change {
    enum ctr_change_kind kind;
    int64_t time_ns; /* unix nanoseconds */
    char handle[CTR_HANDLE_MAX + 1];
    char *name;                        /* ctr_params.name, or NULL */
    char *image;                       /* ctr_params.image_ref, or NULL */
    char **label_keys, **label_values; /* the container's properties */
    size_t nlabels;
    bool has_main; /* the container has a main process (a Docker one) */
    int exit_code; /* DIE, DESTROY: the main process's latest exit code, or -1 */
    int signal;    /* KILL: the signal */
};

struct ctr_sub {
    struct ctr_sub *prev, *next;
    /* c is the container, still in the registry (for DESTROY, about to
     * leave it), or NULL when replayed from history. A subscriber may
     * unsubscribe itself (only itself) from fn. */
    void (*fn)(struct ctr_sub *s, const struct ctr_change *ev, struct container *c);
    void *ctx;
};

void ctr_events_subscribe(struct containers *reg, struct ctr_sub *s);
void ctr_events_unsubscribe(struct containers *reg, struct ctr_sub *s);

/* Calls fn for each kept event with since_ns <= time_ns <= until_ns, oldest first. */
void ctr_events_replay(struct containers *reg, int64_t since_ns, int64_t until_ns,
                       void (*fn)(void *arg, const struct ctr_change *ev), void *arg);

/* Tells every subscriber, and keeps it in the history. */
void ctr_events_emit(struct container *c, enum ctr_change_kind kind, int exit_code, int signal);

/* Frees the history (the registry closes; no subscriber is left). */
void ctr_events_free(struct containers *reg);

#endif
