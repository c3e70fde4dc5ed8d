/*
 * A container's create once the service checked it and registered the
 * container as "creating" (daemon/svc_containers.c): the prepare job, the
 * network's attach and the runtime's job, overlapped where their order
 * allows (daemon/ctr_create.c says how). Loop thread only.
 */
#ifndef BERTH_DAEMON_CTR_CREATE_H
#define BERTH_DAEMON_CTR_CREATE_H

#include "common/err.h"
#include "daemon/containers.h"
#include "daemon/svc.h"
#include "daemon/svc_containers.h"

struct daemon;

/*
 * Starts the create of c (registered, "creating") with copy (the jobs'
 * parameters, taken also on error). On success the callback runs later,
 * exactly once, with c running or the error (c is then gone from the
 * registry). A failure at once (the network refused a port, say) returns
 * a negative errno with err set; the callback never runs and the caller
 * removes c.
 */
int ctr_create_start(struct daemon *d, struct container *c, struct ctr_params *copy,
                     container_create_cb cb, void *arg, struct svc_call **call, struct err *err);

#endif
