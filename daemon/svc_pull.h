/*
 * Registry pulls, the image service's fourth source (daemon/svc_images.h:
 * image_import with source.registry): the shared registry client, the
 * table of pulls in progress, and for each pull the plan of store/pull.h
 * driven as pool jobs. Internal to the image service and main; front ends
 * call image_import. Loop thread only.
 *
 * A pull is one job for pull_plan_new (an image already stored is
 * committed in that same job, so it answers after one manifest request),
 * then one job per layer, at most --pull-parallel in flight, lowest index
 * first, then one job for the commit and the plan's end. No job ever
 * waits for another: callers that ask for the same image join one pull
 * here, on the loop, before any job runs (the same reference, platform
 * and credentials: they share its answer), and a pull that meets another
 * pull of the same manifest in the store (two tags of one image) waits on
 * the loop for that one to end, then tries again, finding it stored.
 *
 * A caller that goes away only drops its interest. A pull nobody waits
 * for any more goes on for PULL_GRACE_MS (a client that retries joins it
 * and loses nothing), then is cancelled and leaves nothing behind.
 */
#ifndef BERTH_DAEMON_SVC_PULL_H
#define BERTH_DAEMON_SVC_PULL_H

#include <stdbool.h>

#include "common/err.h"
#include "daemon/svc_images.h"
#include "store/import.h"

struct bpipe;
struct daemon;
struct image_pulls;
struct pull_waiter;

/* How long a pull nobody waits for goes on before it is cancelled. */
#define PULL_GRACE_MS 30000

/*
 * Makes the registry client from the configuration (reading
 * --registry-auth now) and the empty table of pulls. Before the loop
 * runs. *out: image_pulls_free.
 */
int image_pulls_new(struct daemon *d, struct image_pulls **out, struct err *err);

/* Shutdown: cancels every pull and refuses new ones; each ends (and
 * answers its callers ECANCELED) as its running job returns. */
void image_pulls_shutdown(struct image_pulls *ps);

/* After the loop ended (every pull is over). NULL is a no-op. */
void image_pulls_free(struct image_pulls *ps);

/*
 * Joins the pull of o->registry (o->platform, o->creds; o->name must be
 * NULL: a pulled image is named by its reference), starting it if none
 * runs. done and o->progress run on the loop as image_import says. *out
 * is the caller's interest, valid until pull_waiter_detach, which the
 * caller calls once, after done ran or to stop waiting (then done never
 * runs).
 */
int pull_join(struct daemon *d, const struct image_source *o, image_loaded_cb done, void *arg,
              struct pull_waiter **out, struct err *err);
void pull_waiter_detach(struct pull_waiter *w);

/* Shared by the image service's two files (svc_images.c). */
/* --store-max-bytes after an image was stored (nothing when !created), while
 * the lease that stored img still holds it; pool thread. */
void images_size_policy(struct daemon *d, const struct meta_image *img, bool created);
/* The plain copy of a store event; any thread. */
void image_progress_set(struct image_progress *rec, const struct import_event *ev);
/* Moves the whole records waiting in p (a job's progress pipe) to fn; a
 * record read in part waits in *pending until the rest comes. Loop thread. */
void image_progress_drain(struct bpipe *p, struct image_progress *pending, size_t *pending_len,
                          void (*fn)(void *ctx, const struct image_progress *rec), void *ctx);

#endif
