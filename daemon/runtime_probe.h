/*
 * Is the configured runtime usable? For --runtime oci: the OCI runtime
 * binary exists and answers `--version`; for hcs: only on Windows; host
 * is always usable. Runs on the monitor thread (it spawns a child).
 */
#ifndef BERTH_DAEMON_RUNTIME_PROBE_H
#define BERTH_DAEMON_RUNTIME_PROBE_H

#include "common/err.h"
#include "daemon/config.h"

struct runtime_probe;

struct runtime_probe *runtime_probe_new(const struct config *cfg);
void runtime_probe_free(struct runtime_probe *p);
struct rt_driver;
/* Probes through the runtime driver (its own probe) instead of the binary alone. */
void runtime_probe_set_driver(struct runtime_probe *p, const struct rt_driver *drv, void *ctx);
/* A monitor_probe_fn: 0 when usable, else err says why. */
int runtime_probe_run(void *probe, struct err *err);

/* Finds an executable named name on PATH (or takes a path as is).
 * Returns a new string or NULL. */
char *runtime_find_binary(const char *name);

#endif
