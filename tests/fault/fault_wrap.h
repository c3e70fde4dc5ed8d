/*
 * What the two halves of berthd-fault's fault injection share: the kinds
 * and their counters (fault_wrap.c, which also wraps the system calls and
 * runs the control socket) and the SQLite VFS (fault_vfs.c). Any thread.
 */
#ifndef BERTH_TESTS_FAULT_FAULT_WRAP_H
#define BERTH_TESTS_FAULT_FAULT_WRAP_H

#include <stdbool.h>

enum fault_kind {
    FAULT_FSYNC,
    FAULT_RENAME,
    FAULT_WRITE,
    FAULT_MOUNT,
    FAULT_UMOUNT,
    FAULT_UNLINK,
    FAULT_MKDIR,
    FAULT_SQLWRITE,
    FAULT_SQLSYNC,
    FAULT_SQLREAD,
    FAULT_SQLLOCK,
    FAULT_KINDS
};

/* errno values that mean "write half and return it" and "die here". */
#define FAULT_SHORT (-1)
#define FAULT_KILL (-2)

/* Counts one call of kind k; true (with the errno to give) when it is to fail. */
bool fault_hit(enum fault_kind k, int *e);

/* Logs the fault that fires (one line and a backtrace on stderr) and keeps
 * it for "counts"; with FAULT_KILL, SIGKILLs the daemon instead of returning. */
void fault_report(enum fault_kind k, int e, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Registers the fault VFS as SQLite's default; 0 or -1. Before the first open. */
int fault_vfs_install(void);

#endif
