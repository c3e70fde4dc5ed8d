/*
 * Attaching to a container's main process, as Docker's attach does: its
 * output as it comes (the log service, daemon/proc_logs.h, following the
 * run), and its stdin (daemon/proc_stdin.h). A client may attach before
 * the start (docker run does: create, attach, start): the attach then
 * waits for the next run to start (the container events) and gives that
 * run's output from its first byte, so nothing it writes is missed
 * however quickly it exits. Attached to a running one, it gives what
 * comes from then on (or, with logs, everything the run wrote). The
 * output ends when the run exited and all of it was given, or when the
 * container is removed.
 *
 * Back-pressure both ways: the next output comes when the caller asks;
 * stdin takes one write at a time. Loop thread only.
 */
#ifndef BERTH_DAEMON_CTR_ATTACH_H
#define BERTH_DAEMON_CTR_ATTACH_H

#include <stdbool.h>
#include <stddef.h>

#include "common/err.h"
#include "daemon/proc_logs.h"

struct daemon;
struct ctr_attach;

struct ctr_attach_opts {
    bool out, err; /* the output streams to give */
    bool in;       /* the stdin too (the container must have been made with one) */
    bool logs;     /* attached to a running run: also what it wrote before */
};

struct ctr_attach_cbs {
    /* Output (n > 0, valid during the call; the next after container_attach_next),
     * or its end (n 0): nothing more comes. */
    void (*data)(void *arg, const struct proc_log_piece *p, size_t n);
    /* The run's stdin can be written (container_attach_write); at most once. */
    void (*stdin_ready)(void *arg);
    /* A write was taken (err NULL), or failed. */
    void (*stdin_written)(void *arg, const struct err *err);
};

/*
 * Attaches to the container handle. EINVAL for a container without a
 * main process, or a stdin asked of one made without; ERR_CONFLICT when
 * it is being removed. *out is the attach's, the caller's until
 * container_attach_release; no callback runs inside this call.
 */
int container_attach(struct daemon *d, const char *handle, const struct ctr_attach_opts *o,
                     const struct ctr_attach_cbs *cbs, void *arg, struct ctr_attach **out,
                     struct err *err);

/* As container_attach, to the process id of handle, from its first byte
 * (an exec: daemon/svc_exec.h). */
int process_attach(struct daemon *d, const char *handle, const char *id,
                   const struct ctr_attach_opts *o, const struct ctr_attach_cbs *cbs, void *arg,
                   struct ctr_attach **out, struct err *err);

/* Asks for the next output: data runs once, later. */
void container_attach_next(struct ctr_attach *a);

/* Writes a copy of data to the run's stdin (after stdin_ready); EBUSY while a write is out. */
int container_attach_write(struct ctr_attach *a, const void *data, size_t len, struct err *err);

/* The client closed its stdin: the run reads EOF. */
void container_attach_close_stdin(struct ctr_attach *a);

/* The caller is done (or gone): no callback runs after this. */
void container_attach_release(struct ctr_attach *a);

#endif
