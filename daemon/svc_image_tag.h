/*
 * The image service's tag call (beside daemon/svc_images.h): gives an
 * image one more name. See daemon/svc.h for the calling convention.
 * Loop thread only.
 */
#ifndef BERTH_DAEMON_SVC_IMAGE_TAG_H
#define BERTH_DAEMON_SVC_IMAGE_TAG_H

#include "common/err.h"
#include "daemon/svc.h"
#include "store/digest.h"

struct daemon;

/* digest: the image's, which now has the name (canonical form in name). */
typedef void (*image_tag_cb)(void *arg, const struct err *err, const char *digest,
                             const char *name);
/*
 * Names the image ref resolves to (a digest, a prefix, a name, or a config
 * digest) also name, normalised by the distribution reference grammar;
 * a name another image had moves here. EINVAL at once for a bad name.
 */
int image_tag(struct daemon *d, const char *ref, const char *name, image_tag_cb cb, void *arg,
              struct svc_call **call, struct err *err);

#endif
