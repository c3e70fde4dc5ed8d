/*
 * The daemon's side of berth-init's protocol (runtime/init/PROTOCOL.md):
 * asking a container's init to spawn, signal or close the stdin of a
 * process, and reading back its pid and exit records and its output.
 *
 * Everything below the state directory is writable from inside the
 * container, so it is treated as hostile: every file is opened component
 * by component with O_NOFOLLOW (a symlink planted by the container never
 * leads the daemon elsewhere on the host), records are size-limited and
 * parsed strictly.
 *
 * All functions block on the disk, and rt_proc_spawn / rt_proc_wait on
 * the init: call them from pool jobs.
 */
#ifndef BERTH_RUNTIME_OCI_PROC_H
#define BERTH_RUNTIME_OCI_PROC_H

#include "common/err.h"
#include "runtime/driver.h"

enum rt_proc_stream { RT_PROC_STDOUT, RT_PROC_STDERR };

/* Prepares a fresh state directory: procs/ and the ctl FIFO; removes a stale `ready`. */
int rt_proc_state_init(const char *state_dir, struct err *err);

/* Waits up to timeout_ms for the init's `ready` record (ETIMEDOUT otherwise). */
int rt_proc_wait_ready(const char *state_dir, int timeout_ms, struct err *err);

/*
 * Starts spec->id: writes procs/<id>/spec (and the stdin FIFO if wanted),
 * sends "spawn <id>", and waits up to timeout_ms until the process runs
 * (out->started) or could not be started: then it fails with ENOEXEC and
 * the init's reason ("exec /bin/x: No such file or directory"), and *out
 * holds the exit record (code 127). An id used before fails with
 * ERR_CONFLICT; a container whose init is gone with ERR_UNAVAILABLE.
 */
int rt_proc_spawn(const char *state_dir, const struct rt_proc_spec *spec, int timeout_ms,
                  struct rt_proc_status *out, struct err *err);

/* Reads the pid and exit records now. ENOENT when the process was never asked for. */
int rt_proc_status_read(const char *state_dir, const char *id, struct rt_proc_status *out,
                        struct err *err);

/*
 * Records a process that has a directory but was never started (neither
 * a pid nor an exit record: its spawn command was never sent, because the
 * daemon died between writing the spec and sending it, or the init never
 * took it) as the init records a failed spawn: why in its stderr, and an
 * exit record "code 127" with why as its error, so it is not shown as
 * running forever, and a late "spawn" is ignored by the init. Returns 1
 * when it wrote the record, 0 when the process had started or exited.
 * Only for a spawn that no thread is still carrying out.
 */
int rt_proc_settle(const char *state_dir, const char *id, const char *why, struct err *err);

/*
 * A process's small daemon-side notes (the OOM kill count at its start,
 * the OOM verdict at its end): written atomically into its directory,
 * read back as text. _read: 0, -ENOENT when there is none (err untouched),
 * or another -errno. Blocking (disk).
 */
int rt_proc_note_write(const char *state_dir, const char *id, const char *name, const char *text,
                       struct err *err);
int rt_proc_note_read(const char *state_dir, const char *id, const char *name, char *buf,
                      size_t len, struct err *err);

/* Waits up to timeout_ms (-1: forever) for the exit record. */
int rt_proc_wait(const char *state_dir, const char *id, int timeout_ms, struct rt_proc_status *out,
                 struct err *err);

/* Asks the init to send sig to the process (the init, its parent, never hits a reused PID). */
int rt_proc_signal(const char *state_dir, const char *id, int sig, struct err *err);

/*
 * Opens the process's stdin FIFO for writing: a new O_WRONLY|O_NONBLOCK
 * fd the caller owns. Writers can come and go; the process sees EOF only
 * after rt_proc_stdin_close and the last writer closing. Writes to it
 * after the process exited fail with EPIPE (and raise SIGPIPE, which the
 * daemon ignores). ERR_CONFLICT when the process has no stdin or exited.
 */
int rt_proc_stdin_open(const char *state_dir, const char *id, struct err *err);

/* Asks the init to drop its own end of the stdin FIFO (see above). */
int rt_proc_stdin_close(const char *state_dir, const char *id, struct err *err);

/* Opens procs/<id>/stdout or stderr for reading (the caller owns the fd). ENOENT: not yet. */
int rt_proc_output_open(const char *state_dir, const char *id, enum rt_proc_stream which,
                        struct err *err);

/*
 * Opens procs/<id>/chunks, the index of the output's chunks
 * (runtime/outrec.h), for reading (the caller owns the fd). ENOENT: a
 * process the init had not started, or whose records predate the index.
 */
int rt_proc_chunks_open(const char *state_dir, const char *id, struct err *err);

/* The state directory below a container's private dir ("<dir>/state"); caller frees. */
char *rt_proc_state_dir(const char *dir);

/* The directory of one process's records, "<state>/procs/<id>"; caller frees. */
char *rt_proc_dir(const char *state_dir, const char *id);

/* Every process id under procs/ (caller frees with strv_free). */
int rt_proc_list(const char *state_dir, char ***ids, struct err *err);

/* The spec's and exit record's times, and whether a stdin FIFO exists. */
int rt_proc_times(const char *state_dir, const char *id, struct rt_proc_times *out,
                  struct err *err);

/* Removes an exited process's directory, output included. ERR_CONFLICT while it runs. */
int rt_proc_remove(const char *state_dir, const char *id, struct err *err);

#endif
