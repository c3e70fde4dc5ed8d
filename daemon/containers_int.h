/*
 * What the blocking side of containers shares between its files:
 * containers_record.c (the on-disk record), containers_ops.c (create and
 * delete) and containers_open.c (the reload at start-up). Pool threads,
 * or main before the loop runs.
 */
#ifndef BERTH_DAEMON_CONTAINERS_INT_H
#define BERTH_DAEMON_CONTAINERS_INT_H

#include "common/err.h"
#include "daemon/containers.h"

/* A container directory on its way out (container_dir_remove). */
#define REMOVING_PREFIX ".removing-"

/*
 * Writes p's record into dir, atomically, with the given state; durable:
 * fsynced with its directory, so that it survives a power loss (else it
 * survives a crash of the daemon only). Blocks.
 */
int ctr_record_write(const struct ctr_params *p, const char *dir, const char *state, bool durable,
                     struct err *err);
/* Reads a record; *state gets its state string (caller frees). Blocks. */
int ctr_record_read(const char *dir, struct ctr_params **out, char **state, struct err *err);

#endif
