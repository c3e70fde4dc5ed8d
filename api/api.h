/*
 * The HTTP API: owns the HTTP server, the routing table, the metrics and
 * every request in flight, and drives the orderly shutdown of all of
 * them. Loop thread only.
 */
#ifndef BERTH_API_API_H
#define BERTH_API_API_H

#include <stddef.h>

#include "api/router.h"
#include "common/err.h"

struct daemon;
struct api;
struct metrics;

/* Starts serving on the daemon's configured address. */
int api_start(struct daemon *d, struct api **out, struct err *err);

/* The port bound (the configured one, or the one picked for port 0). */
unsigned api_port(const struct api *api);

struct daemon *api_daemon(const struct api *api);
struct metrics *api_metrics(const struct api *api);
unsigned api_connections(const struct api *api);
/* The server's hijacked connections (api/hijack.h); NULL if it has none. */
struct hijack_set *api_hijacks(const struct api *api);

/*
 * First step of shutdown: stop accepting connections, and call the
 * on_shutdown hook of every suspended request so streams they wait on
 * are aborted. Jobs keep running; their completions still answer.
 */
void api_begin_shutdown(struct api *api);

/*
 * Last step, once no job is outstanding: answer every request still
 * suspended with 503, let MHD send those answers, stop MHD, close the
 * handles and free api; done runs when all of it is closed.
 */
void api_finish_shutdown(struct api *api, void (*done)(void *arg), void *arg);

/* The routing table (api/routes.c). */
extern const struct route api_routes[];
extern const size_t api_routes_count;

#endif
