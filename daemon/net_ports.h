/*
 * What both networks (Linux's CNI one, Windows's HCN one) do alike with
 * an attach request before any job runs: the request's checks (handle,
 * hostname, ports) and the host ports forwarded, a port 0 replaced by
 * one that is free on the host at the time. Loop thread (socket and bind
 * do not block); no state of its own.
 */
#ifndef BERTH_DAEMON_NET_PORTS_H
#define BERTH_DAEMON_NET_PORTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "daemon/net_conf.h"

/*
 * EINVAL naming the field: a handle that is not [A-Za-z0-9_.-]{1,128}, a
 * hostname (NULL: none) that is not 1-63 of [A-Za-z0-9_.-], more than
 * NET_PORTS_MAX ports, a container port 0, a protocol that is not tcp or
 * udp, or a host port given twice for one protocol.
 */
int net_req_check(const char *handle, const char *hostname, const struct net_port *ports,
                  size_t nports, struct err *err);

/* Is the host port forwarded already (by the caller's own count)? */
typedef bool (*net_port_taken_fn)(void *ctx, uint16_t port, enum net_proto proto);

/*
 * Fills out (room for nreq) from req: a given host port must be free
 * (ERR_CONFLICT: forwarded already by taken, or bound on the host), a
 * host port 0 is replaced by one the system picks and taken does not
 * claim. *nout counts what was filled in, also on failure.
 */
int net_ports_choose(const struct net_port *req, size_t nreq, net_port_taken_fn taken, void *ctx,
                     struct net_port *out, size_t *nout, struct err *err);

#endif
