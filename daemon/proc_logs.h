/*
 * A process's output as a log: stdout and stderr in the order they were
 * written, cut into lines that each carry the time they began, with the
 * filters a log reader asks for (which streams, since, until, the last N
 * lines) and, with follow, the lines still to come until the process
 * exits. It reads the chunk index the driver keeps beside the output
 * files (runtime/outrec.h), the same records the stdout and stderr
 * readers (proc_output.h) give byte by byte.
 *
 * One reader per client. Each read is a pool job that takes up to 64 KiB,
 * and the next runs only when the caller asks (a slow client holds one
 * batch, not the file); at the end of what is written a follower waits,
 * without a pool thread, for the index's change event or the exit, then
 * reads once more, so nothing written before the exit is missed. Loop
 * thread only.
 */
#ifndef BERTH_DAEMON_PROC_LOGS_H
#define BERTH_DAEMON_PROC_LOGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "daemon/proc_output.h"
#include "daemon/svc.h"

struct daemon;
struct proc_logs;

struct proc_logs_opts {
    bool out, err;    /* the streams to give (at least one) */
    int64_t since_ns; /* unix ns: lines begun before it are left out; 0: none */
    int64_t until_ns; /* unix ns: lines begun after it end the log; 0: none */
    int64_t tail;     /* only the last N lines written so far; -1: all */
    bool follow;      /* then the lines still to come, until the process exits */
};

/* A line, or a part of one (a line ends after its '\n'; a long one comes in parts). */
struct proc_log_piece {
    enum proc_stream stream;
    bool line_start; /* the first part of its line */
    int64_t time_ns; /* when its line began, unix ns */
    const char *data;
    size_t len;
};

/* Opened, or why not (the reader is NULL then). */
typedef void (*proc_logs_open_cb)(void *arg, const struct err *err, struct proc_logs *l);
/* Pieces (n > 0, valid during the call), or the end (n 0). */
typedef void (*proc_logs_data_cb)(void *arg, const struct proc_log_piece *p, size_t n);

/*
 * Opens the log of a process. The open (and the tail's search) runs as a
 * job; the callback gets the reader, which belongs to the caller until
 * process_logs_close. EINVAL for options that make no sense.
 */
int process_logs_open(struct daemon *d, const char *handle, const char *id,
                      const struct proc_logs_opts *o, proc_logs_open_cb opened,
                      proc_logs_data_cb data, void *arg, struct svc_call **call, struct err *err);

/* Asks for the next pieces: data runs once, later, with them or with the end. */
void process_logs_next(struct proc_logs *l);

/* The caller is done (or gone): no callback runs after this. */
void process_logs_close(struct proc_logs *l);

#endif
