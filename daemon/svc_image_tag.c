/* The image service's tag call (daemon/svc_image_tag.h). Loop thread, except tag_work. */
#include "daemon/svc_image_tag.h"

#include <stdlib.h>
#include <string.h>

#include "daemon/daemon.h"
#include "store/refname.h"
#include "store/store.h"

struct tag_job {
    struct svc_call call;
    image_tag_cb cb;
    void *arg;
    struct store *st;
    char *ref, *name; /* name: canonical */
    char digest[DIGEST_STR_LEN];
    int rc;
    struct err err;
};

static void
tag_work(void *ctx)
{
    struct tag_job *j = ctx;
    struct meta_image *img = NULL;
    /* Resolved as every lookup is (names in every form they may mean). */
    j->rc = image_ref_lookup(j->st->meta, j->ref, &img, &j->err);
    if (j->rc == 0)
        j->rc = meta_image_tag(j->st->meta, img->digest, j->name, j->digest, &j->err);
    meta_image_free(img);
}

static void
tag_done(void *ctx, bool cancelled)
{
    struct tag_job *j = ctx;
    if (cancelled && j->rc == 0)
        j->rc = err_set(&j->err, ECANCELED, "tag image %s: the daemon is shutting down", j->ref);
    if (!j->call.detached)
        j->cb(j->arg, j->rc < 0 ? &j->err : NULL, j->digest, j->name);
    free(j->ref);
    free(j->name);
    free(j);
}

int
image_tag(struct daemon *d, const char *ref, const char *name, image_tag_cb cb, void *arg,
          struct svc_call **call, struct err *err)
{
    if (!d->store)
        return err_set(err, ERR_UNAVAILABLE, "the store is not available: %s", d->store_error);
    char *canonical = NULL;
    int ret = image_ref_normalize(name, &canonical, err);
    if (ret < 0)
        return ret;
    if (strchr(canonical, '@')) {
        free(canonical);
        return err_set(err, EINVAL, "name %.200s: a tag, not a digest, names an image here", name);
    }
    struct tag_job *j = calloc(1, sizeof(*j));
    if (!j || !(j->ref = strdup(ref))) {
        free(j);
        free(canonical);
        return err_set(err, ENOMEM, "tag image: out of memory");
    }
    j->name = canonical;
    j->cb = cb;
    j->arg = arg;
    j->st = d->store;
    if ((ret = job_submit(d->jobs, "image.tag", tag_work, tag_done, j)) < 0) {
        free(j->ref);
        free(j->name);
        free(j);
        return err_set(err, ECANCELED, "tag image: cannot start the job: %s", strerror(-ret));
    }
    svc_call_give(&j->call, call);
    return 0;
}
