/*
 * What the hcs driver asks Windows itself, beside HCS: the host's commit
 * (for admission), its version (for the platform check), and the named
 * pipes berth exposes for a process's stdio, created first-instance-only.
 *
 * No Windows types here (a pipe HANDLE is a void *); the implementation,
 * host_win.c, is built only for Windows. Any thread; each call is a quick
 * system call.
 */
#ifndef BERTH_RUNTIME_HCS_HOST_H
#define BERTH_RUNTIME_HCS_HOST_H

#include <stdbool.h>

#include "common/err.h"
#include "runtime/hcs/admit.h"
#include "runtime/hcs/pipename.h"

/*
 * GetPerformanceInfo's CommitLimit, CommitTotal and PageSize. The
 * signature of hcs_commit_read_fn, so it plugs into hcs_admit_new(); arg
 * is unused. EIO naming GetLastError on failure.
 */
int hcs_host_commit(void *arg, struct hcs_commit_info *out, struct err *err);

/*
 * The OS version as RtlGetNtVersionNumbers gives it (GetVersionEx lies
 * to programs without a manifest) and the revision (UBR) from the
 * registry, 0 when it cannot be read. ERR_UNAVAILABLE when ntdll has no
 * such function.
 */
int hcs_host_version(unsigned *major, unsigned *minor, unsigned *build, unsigned *revision,
                     struct err *err);

/*
 * Creates the server end of the named pipe `name` with
 * FILE_FLAG_FIRST_PIPE_INSTANCE and PIPE_REJECT_REMOTE_CLIENTS, inbound
 * (berth reads: stdout, stderr) or outbound (stdin). EEXIST when the name
 * is taken, by anyone. *pipe is the HANDLE (caller closes).
 */
int hcs_pipe_create_named(const char *name, bool inbound, void **pipe, struct err *err);

/*
 * The pipe for stream of process id in container handle: a fresh name
 * (pipename.h) created first-instance-only, with a new random part when
 * the name is taken (a few times, then EEXIST). name_out gets the name.
 */
int hcs_pipe_create(const char *handle, const char *id, enum hcs_stdio_stream stream, void **pipe,
                    char name_out[HCS_PIPE_NAME_SIZE], struct err *err);

#endif
