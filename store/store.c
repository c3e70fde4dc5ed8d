/* Opening the store, crash clean-up, and the imports-in-flight table. */
#include "store/store.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/fsutil.h"
#include "common/log.h"

struct store_inflight {
    char digest[DIGEST_STR_LEN];
    const void *owner; /* the caller's tag, for store_inflight_try_begin's answer */
    struct store_inflight *next;
};

int
store_open(const char *root, const struct store_opts *opts, struct store **out, struct err *err)
{
    if (fs_mkdir_p(root, 0700, err) < 0)
        return err_wrap(err, "open store");
    struct store *st = calloc(1, sizeof(*st));
    if (!st || !(st->root = strdup(root))) {
        free(st);
        return err_set(err, ENOMEM, "open store: out of memory");
    }
    pthread_mutex_init(&st->inflight_mu, NULL);
    pthread_cond_init(&st->inflight_cond, NULL);
    st->allow_device_nodes = opts->allow_device_nodes;
    int rc;
    cleanup_free char *mounts = fs_path_join(root, "mounts");
    if (!mounts) {
        store_close(st);
        return err_set(err, ENOMEM, "open store: out of memory");
    }
    /* The mount journal is only opened here: it is replayed once the
     * containers are known (daemon/containers_open.c), since the mounts of
     * containers that outlived the daemon stay. */
    if ((rc = mjournal_open(mounts, &st->mounts, err)) < 0 ||
        !(st->blobs = blob_store_open(root, err)) ||
        (rc = blob_store_clean_tmp(st->blobs, err)) < 0 ||
        (rc = snapshot_store_clean(root, err)) < 0 ||
        (rc = snapshot_store_open(root, opts->max_unpacks ? opts->max_unpacks : 1, &st->snaps,
                                  err)) < 0 ||
        (rc = meta_open(root, &st->meta, err)) < 0 ||
        (rc = meta_lease_clear_all(st->meta, err)) < 0 ||
        (rc = volume_store_open(root, st->meta, &st->volumes, err)) < 0 ||
        (rc = host_caps_detect(&st->host, err)) < 0) {
        store_close(st);
        return err_wrap(err, "open store %s", root);
    }
    *out = st;
    return 0;
}

void
store_close(struct store *st)
{
    if (!st)
        return;
    volume_store_close(st->volumes); /* before meta: it may read records */
    mjournal_free(st->mounts);
    meta_close(st->meta);
    snapshot_store_free(st->snaps);
    blob_store_free(st->blobs);
    while (st->inflight) {
        struct store_inflight *n = st->inflight->next;
        free(st->inflight);
        st->inflight = n;
    }
    pthread_mutex_destroy(&st->inflight_mu);
    pthread_cond_destroy(&st->inflight_cond);
    free(st->root);
    free(st);
}

static struct store_inflight *
inflight_find(struct store *st, const char *digest)
{
    for (struct store_inflight *i = st->inflight; i; i = i->next)
        if (strcmp(i->digest, digest) == 0)
            return i;
    return NULL;
}

/* Under inflight_mu: marks digest in flight (an allocation failure only
 * loses the single flight, never the import). */
static void
inflight_add(struct store *st, const char *digest, const void *owner)
{
    struct store_inflight *i = calloc(1, sizeof(*i));
    if (i) {
        snprintf(i->digest, sizeof(i->digest), "%s", digest);
        i->owner = owner;
        i->next = st->inflight;
        st->inflight = i;
    }
}

void
store_inflight_begin(struct store *st, const char *digest)
{
    pthread_mutex_lock(&st->inflight_mu);
    while (inflight_find(st, digest))
        pthread_cond_wait(&st->inflight_cond, &st->inflight_mu);
    inflight_add(st, digest, NULL);
    pthread_mutex_unlock(&st->inflight_mu);
}

int
store_inflight_try_begin(struct store *st, const char *digest, const void *owner,
                         const void **holder)
{
    pthread_mutex_lock(&st->inflight_mu);
    struct store_inflight *busy = inflight_find(st, digest);
    if (busy) {
        if (holder)
            *holder = busy->owner;
    } else {
        inflight_add(st, digest, owner);
    }
    pthread_mutex_unlock(&st->inflight_mu);
    return busy ? -EALREADY : 0;
}

void
store_inflight_end(struct store *st, const char *digest)
{
    pthread_mutex_lock(&st->inflight_mu);
    for (struct store_inflight **p = &st->inflight; *p; p = &(*p)->next) {
        if (strcmp((*p)->digest, digest) == 0) {
            struct store_inflight *dead = *p;
            *p = dead->next;
            free(dead);
            break;
        }
    }
    pthread_cond_broadcast(&st->inflight_cond);
    pthread_mutex_unlock(&st->inflight_mu);
}

bool
image_name_valid(const char *name)
{
    size_t len = strlen(name);
    if (len == 0 || len > 255 || !isalnum((unsigned char)name[0]))
        return false;
    bool all_hex = true;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)name[i];
        if (!isalnum(c) && !strchr("._/:@-", c))
            return false;
        if (!isxdigit(c) || isupper(c))
            all_hex = false;
    }
    if (strncmp(name, "sha256:", 7) == 0)
        return false;
    if (all_hex && len >= 12)
        return false;
    return true;
}
