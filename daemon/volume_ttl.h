/*
 * Volume TTLs: a timer on the loop that knows the earliest expiry (from a
 * sweep at start-up and from hints given when a volume is created or
 * patched) and, once it has passed, submits one job that deletes the
 * expired volumes on the pool, the same way DELETE without force does: a
 * volume still mounted or with children is kept and tried again later.
 * Loop thread.
 */
#ifndef BERTH_DAEMON_VOLUME_TTL_H
#define BERTH_DAEMON_VOLUME_TTL_H

#include <stdint.h>

struct daemon;

/* Starts the timer (no-op without a store); 0 or -errno. */
int volume_ttl_start(struct daemon *d);
/* A volume now expires at expires_at (unix seconds). */
void volume_ttl_hint(struct daemon *d, int64_t expires_at);
/* Stops and closes the timer; the state goes once any running sweep ended. */
void volume_ttl_stop(struct daemon *d);

#endif
