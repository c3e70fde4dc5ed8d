/*
 * Volume TTLs: a timer on the loop that knows the earliest expiry (from a
 * sweep at start-up and from hints given when a volume is created or
 * patched) and, once it has passed, submits one job that deletes the
 * expired volumes on the pool, the same way DELETE without force does: a
 * volume still mounted or with children is kept and tried again later.
 * Whether a listed volume is still expired is decided again in its
 * delete's transaction, so a renewal (PATCH) or a new volume of the same
 * handle that commits while the sweep runs is never deleted by it.
 * Loop thread.
 */
#ifndef BERTH_DAEMON_VOLUME_TTL_H
#define BERTH_DAEMON_VOLUME_TTL_H

#include <stddef.h>
#include <stdint.h>

struct daemon;
struct store;
struct volume_expiry;

/* Starts the timer (no-op without a store); 0 or -errno. */
int volume_ttl_start(struct daemon *d);
/* A volume now expires at expires_at (unix seconds). */
void volume_ttl_hint(struct daemon *d, int64_t expires_at);
/* Stops and closes the timer; the state goes once any running sweep ended. */
void volume_ttl_stop(struct daemon *d);

/*
 * The sweep job's second step, apart so that tests can run it: deletes
 * each of the n volumes that vmeta_expired listed at now, unless it is
 * gone, was created again or had its TTL renewed or removed since (each
 * decided in the delete's own transaction: volume_delete_expired).
 * Returns when to try again for a volume it had to keep (mounted, with
 * children, an upload in progress), or 0. Blocking: a pool thread.
 */
int64_t volume_ttl_delete_listed(struct store *st, const struct volume_expiry *listed, size_t n,
                                 int64_t now);

#endif
