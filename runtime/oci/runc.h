/*
 * Running an OCI runtime binary (runc, or one with its command line):
 * create, start, kill, delete, state. Each call runs the binary to
 * completion and blocks the calling thread (a few ms to a second): call
 * from pool jobs only. A failure carries the runtime's own error text:
 * "runc create: <what runc said>".
 *
 * Every call passes `--root <root>`, a directory under the daemon's state,
 * so berth's containers never mix with other users of the same runtime.
 */
#ifndef BERTH_RUNTIME_OCI_RUNC_H
#define BERTH_RUNTIME_OCI_RUNC_H

#include <stdbool.h>

#include "common/err.h"
#include "runtime/driver.h"

struct rt_runc {
    char *bin;  /* absolute path of the runtime binary */
    char *name; /* its base name, for messages */
    char *root; /* --root */
};

/*
 * Resolves bin (a path, or a name searched on PATH) and creates root.
 * ENOENT/ERR_UNAVAILABLE when the binary is not there. Release with
 * rt_runc_close.
 */
int rt_runc_init(struct rt_runc *rc, const char *bin, const char *root, struct err *err);
void rt_runc_close(struct rt_runc *rc);

/*
 * Waits until no process, other than this one, runs with `--root <root>`
 * on its command line: runtime calls that a daemon killed on this state
 * root left running (a `run --detach` half-way, say). Clean-up at start-up
 * must come after them, or a container they finish creating outlives its
 * undo. Calls still running after timeout_ms are killed (SIGKILL, through
 * a pidfd). Returns how many were killed, or ETIMEDOUT when some are still
 * there 2 s after that. Blocks: for the driver's open, before any other
 * call.
 */
int rt_runc_wait_strays(const struct rt_runc *rc, int timeout_ms, struct err *err);

/* The first line of `<bin> --version`; caller frees *out. */
int rt_runc_version(const struct rt_runc *rc, char **out, struct err *err);

/*
 * `create --bundle bundle id`. The container's init inherits the runtime's
 * stdout and stderr (detached, no terminal), so both go to log_path
 * (appended), and a failure's message is read back from there. With
 * pass_fd >= 0, the init also gets that fd as its fd 3 (--preserve-fds 1).
 */
int rt_runc_create(const struct rt_runc *rc, const char *id, const char *bundle,
                   const char *log_path, int pass_fd, struct err *err);
int rt_runc_start(const struct rt_runc *rc, const char *id, struct err *err);
/* `run --detach --bundle bundle id`: create and start in one invocation, stdio as create's. */
int rt_runc_run_detached(const struct rt_runc *rc, const char *id, const char *bundle,
                         const char *log_path, int pass_fd, struct err *err);
/*
 * The container's init as the runtime recorded it (its state.json:
 * init_process_pid and init_process_start, the start time in clock ticks
 * as in /proc/PID/stat), read without running the runtime. ENOENT when
 * there is no such container; EIO when the record is not readable.
 */
int rt_runc_init_process(const struct rt_runc *rc, const char *id, pid_t *pid,
                         unsigned long long *start, struct err *err);
/* `kill [--all] id sig`. */
int rt_runc_kill(const struct rt_runc *rc, const char *id, int sig, bool all, struct err *err);
/* `delete [--force] id`. A container that does not exist fails with ENOENT. */
int rt_runc_delete(const struct rt_runc *rc, const char *id, bool force, struct err *err);
/* `state id`. A container that does not exist fails with ENOENT. */
int rt_runc_state(const struct rt_runc *rc, const char *id, struct rt_container_state *out,
                  struct err *err);

#endif
