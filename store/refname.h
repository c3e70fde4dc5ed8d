/*
 * Image names by the distribution reference grammar (as docker and
 * containerd read them): "busybox" and "busybox:latest" are
 * docker.io/library/busybox:latest, "team/app" is docker.io/team/app:latest,
 * "localhost:5000/app:1" and "example.org/team/app@sha256:..." stay as
 * written. Names are stored in that canonical form; the API shows them in
 * Docker's familiar form (docker.io/library/ dropped), and looks a
 * reference up by every form it may mean, naming them all when none is
 * stored.
 *
 * A layout's ref.name that is a bare tag ("1", "latest": no '/' or ':',
 * as umoci and skopeo write it) is not a name: with ?name=REPO the image
 * is REPO:tag; without, localhost/<tag>:latest.
 *
 * Pure, except the lookups, which read the database (blocking).
 */
#ifndef BERTH_STORE_REFNAME_H
#define BERTH_STORE_REFNAME_H

#include <stdbool.h>

#include "common/err.h"
#include "store/meta.h"

/* The canonical form of a reference (caller frees); EINVAL saying why
 * it is not one (uppercase, a bad tag, a digest where a name goes...). */
int image_ref_normalize(const char *ref, char **out, struct err *err);

/* Does the reference name a tag or digest of its own? (false for "busybox", "team/app") */
bool image_ref_has_tag(const char *ref);

/* Is s a bare tag, as layouts write ref.name ("1", "latest", "v2.0")? */
bool image_ref_is_bare_tag(const char *s);

/* Docker's familiar form of a canonical name (caller frees; NULL on OOM). */
char *image_ref_familiar(const char *canonical);

/*
 * Looks an image up by a digest, a digest prefix, or a name in any of the
 * forms above. ENOENT says which names were tried. Blocking.
 */
int image_ref_lookup(struct meta *m, const char *ref, struct meta_image **out, struct err *err);

/* As image_ref_lookup, giving the stored name (or the digest) that
 * matched, for operations on one name (caller frees). Blocking. */
int image_ref_resolve(struct meta *m, const char *ref, char **stored, struct err *err);

#endif
