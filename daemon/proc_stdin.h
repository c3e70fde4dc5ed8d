/*
 * A process's stdin as a stream: the driver's FIFO is opened by a job,
 * then each piece is written through a uv_pipe_t, one write in flight;
 * closing drops our end and, when asked, the process's last other writer
 * (on oci, the init's), so the process reads EOF. Loop thread only.
 */
#ifndef BERTH_DAEMON_PROC_STDIN_H
#define BERTH_DAEMON_PROC_STDIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

struct daemon;
struct proc_stdin;

/* Each step's completion (err NULL when it worked); the same arg for all. */
typedef void (*proc_stdin_cb)(void *arg, const struct err *err);

/*
 * Opens the stdin of a running process that was started with one
 * (ERR_CONFLICT at once otherwise). opened runs when it can be written;
 * *out is the stream's handle at once, the caller's until
 * process_stdin_release.
 */
int process_stdin_open(struct daemon *d, const char *handle, const char *id, proc_stdin_cb opened,
                       void *arg, struct proc_stdin **out, struct err *err);

/* Writes a copy of data (after opened ran); written runs when the pipe
 * took it. One write at a time: EBUSY while one is in flight. */
int process_stdin_write(struct proc_stdin *s, const void *data, size_t len, proc_stdin_cb written,
                        struct err *err);

/* Closes our end and with eof the process's other end; closed runs after. */
int process_stdin_close(struct proc_stdin *s, bool eof, proc_stdin_cb closed, struct err *err);

/* Bytes the pipe took so far. */
uint64_t process_stdin_written(const struct proc_stdin *s);

/* The caller is done (or gone): no callback runs after this; the stream
 * closes and goes once nothing is in flight. */
void process_stdin_release(struct proc_stdin *s);

#endif
