/*
 * Names of the named pipes berth exposes for a process's stdio. Pipe
 * names are one namespace for the whole Windows host (unlike FIFOs in a
 * per-task directory), and Concourse runs every task step's process with
 * the id "task": containerd's \\.\pipe\ctr-task-stdin made the second
 * concurrent task fail with "Access is denied" (the seed PR). So a name
 * carries the container handle, the process id and 128 random bits:
 *
 *   \\.\pipe\berth-<handle>-<process id>-<32 hex digits>-<stdin|stdout|stderr>
 *
 * The handle ([A-Za-z0-9_.-]{1,128}) and the id ([A-Za-z0-9_.-]{1,64})
 * keep the longest name at 248 characters, under the 256 Windows allows.
 * The random part covers what the handle and id cannot: two handles that
 * differ only in case (pipe names are case-insensitive) and a process id
 * reused after a restart. The pipe itself is created first-instance-only
 * (FILE_FLAG_FIRST_PIPE_INSTANCE) by the Windows file, which draws a new
 * random part when the name is taken after all.
 *
 * HCS's own stdio handles (CreateStd*Pipe) are anonymous and need no
 * name; these are for pipes berth hands to other processes.
 *
 * Pure apart from the random source; any thread.
 */
#ifndef BERTH_RUNTIME_HCS_PIPENAME_H
#define BERTH_RUNTIME_HCS_PIPENAME_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

enum hcs_stdio_stream {
    HCS_STDIN = 0,
    HCS_STDOUT = 1,
    HCS_STDERR = 2,
};

#define HCS_PIPE_PREFIX "\\\\.\\pipe\\berth-"
/* Longest name plus its NUL: prefix 15 + 128 + 1 + 64 + 1 + 32 + 7 ("-stdout") + 1. */
#define HCS_PIPE_NAME_SIZE 249
#define HCS_PIPE_RANDOM_BYTES 16

/*
 * Writes the pipe name of stream for process id in container handle with
 * the given random part into out (HCS_PIPE_NAME_SIZE bytes). EINVAL when
 * handle or id is not valid as a handle or process id.
 */
int hcs_pipe_name(const char *handle, const char *id, enum hcs_stdio_stream stream,
                  const uint8_t random[HCS_PIPE_RANDOM_BYTES], char out[HCS_PIPE_NAME_SIZE],
                  struct err *err);

/* The three names of one process start, sharing one fresh random part. */
struct hcs_pipe_names {
    char name[3][HCS_PIPE_NAME_SIZE]; /* indexed by enum hcs_stdio_stream */
};

/* Draws a random part and writes the three names. EINVAL as above; EIO without randomness. */
int hcs_pipe_names_new(const char *handle, const char *id, struct hcs_pipe_names *out,
                       struct err *err);

#endif
