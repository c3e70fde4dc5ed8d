/*
 * A process's output as a stream: replay from an offset, and with follow,
 * the output still to come until the process exits. One reader per
 * client: it reads the driver's output file with uv_fs_read, one chunk at
 * a time and the next only when its caller asks (so a slow client holds
 * one chunk, not the file); at the end of what is written it ends, or
 * with follow waits, without a pool thread, for the file's change event
 * or the exit, and then reads to the end once more, so nothing written
 * before the exit is missed. Loop thread only.
 */
#ifndef BERTH_DAEMON_PROC_OUTPUT_H
#define BERTH_DAEMON_PROC_OUTPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "daemon/svc.h"

struct daemon;
struct proc_output;

enum proc_stream { PROC_STDOUT = 0, PROC_STDERR = 1 };

/* Opened, or why not (the reader is NULL then). */
typedef void (*proc_output_open_cb)(void *arg, const struct err *err, struct proc_output *o);
/* One chunk (len > 0, valid during the call), or the end (len 0). */
typedef void (*proc_output_data_cb)(void *arg, const char *data, size_t len);

/*
 * Opens the stdout or stderr of a process, to read from offset. The open
 * runs as a job; the callback gets the reader, which belongs to the
 * caller until process_output_close.
 */
int process_output_open(struct daemon *d, const char *handle, const char *id,
                        enum proc_stream which, int64_t offset, bool follow,
                        proc_output_open_cb opened, proc_output_data_cb data, void *arg,
                        struct svc_call **call, struct err *err);

/* Asks for the next chunk: data runs once, later, with it or with the end. */
void process_output_next(struct proc_output *o);

/* The caller is done (or gone): no callback runs after this. */
void process_output_close(struct proc_output *o);

#endif
