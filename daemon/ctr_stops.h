/*
 * Containers that stop on their own, as their driver tells
 * (rt_driver.set_stop_cb; hcs, where a compute system's exit comes as an
 * HCS event, not as the exit of an init the daemon could watch). The
 * driver's thread only queues the handle and wakes the loop with
 * uv_async_send; on the loop, a running container of that handle is
 * marked stopped and its processes' records are read again (the driver
 * recorded their exits). Drivers without the operation need none of this.
 */
#ifndef BERTH_DAEMON_CTR_STOPS_H
#define BERTH_DAEMON_CTR_STOPS_H

#include "common/err.h"
#include "daemon/containers.h"

/* Registers with reg's driver when it has set_stop_cb; loop thread, after the driver opened. */
int ctr_stops_open(struct containers *reg, struct err *err);
/* Stops taking stops and closes the loop's handle; loop thread, with containers_close. */
void ctr_stops_close(struct containers *reg);
/* Frees what is left; after the loop ran the close and the driver is closed. */
void ctr_stops_free(struct containers *reg);

/* Marks c, which its driver said stopped, stopped, and reads its processes' records again. */
void ctr_stops_mark(struct container *c);

#endif
