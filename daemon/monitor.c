/* The health probe thread: one pthread, woken every interval or on poke. */
#include "daemon/monitor.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/fsutil.h"
#include "common/osfs.h"

struct monitor {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cond;
    bool stop;
    bool poked;
    unsigned interval_ms;
    char *root;
    monitor_probe_fn runtime_probe;
    void *probe_ctx;
    monitor_probe_fn network_probe; /* guarded by mu */
    void *network_ctx;
    struct monitor_snapshot snap;  /* guarded by mu */
    unsigned rounds_since_runtime; /* monitor thread only */
    unsigned rounds_since_network; /* monitor thread only */
    bool poked_now;                /* this round was asked for by monitor_poke */
};

static void
probe_store(const char *root, struct monitor_snapshot *s)
{
    struct err err = {0};
    s->root_writable = false;
    s->root_error[0] = '\0';
    if (fs_free_bytes(root, &s->root_free_bytes, &err) < 0) {
        snprintf(s->root_error, sizeof(s->root_error), "%s", err.msg);
        return;
    }
    char path[4096];
    snprintf(path, sizeof(path), "%s/.health-probe", root);
    int fd = osfs_open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) {
        snprintf(s->root_error, sizeof(s->root_error), "store root %s is not writable: %s", root,
                 strerror(-fd));
        return;
    }
    bool ok = write(fd, "ok\n", 3) == 3;
    int e = errno;
    close(fd);
    osfs_unlink(path);
    if (!ok) {
        snprintf(s->root_error, sizeof(s->root_error), "store root %s is not writable: %s", root,
                 strerror(e));
        return;
    }
    s->root_writable = true;
}

/* The runtime probe runs a child (runc --version), the network's a few
 * (iptables): every few rounds is enough while they succeed; while one
 * fails, every round, so a fix shows at once. */
#define RUNTIME_PROBE_EVERY 10

static void
probe_network(struct monitor *m, const struct monitor_snapshot *prev, struct monitor_snapshot *s)
{
    pthread_mutex_lock(&m->mu);
    monitor_probe_fn probe = m->network_probe;
    void *ctx = m->network_ctx;
    pthread_mutex_unlock(&m->mu);
    if (!probe)
        return;
    s->network_probed = true;
    if (prev->network_probed && prev->network_usable &&
        m->rounds_since_network + 1 < RUNTIME_PROBE_EVERY && !m->poked_now) {
        s->network_usable = true;
        m->rounds_since_network++;
        return;
    }
    struct err err = {0};
    s->network_usable = probe(ctx, &err) == 0;
    if (!s->network_usable)
        snprintf(s->network_error, sizeof(s->network_error), "%s", err.msg);
    m->rounds_since_network = 0;
}

static void
probe_round(struct monitor *m)
{
    struct monitor_snapshot s = {0};
    probe_store(m->root, &s);
    pthread_mutex_lock(&m->mu);
    bool was_usable = m->snap.probed && m->snap.runtime_usable;
    struct monitor_snapshot prev = m->snap;
    pthread_mutex_unlock(&m->mu);
    probe_network(m, &prev, &s);
    if (!m->runtime_probe) {
        s.runtime_usable = true;
    } else if (was_usable && m->rounds_since_runtime + 1 < RUNTIME_PROBE_EVERY && !m->poked_now) {
        s.runtime_usable = true;
        m->rounds_since_runtime++;
    } else {
        struct err err = {0};
        s.runtime_usable = m->runtime_probe(m->probe_ctx, &err) == 0;
        if (!s.runtime_usable)
            snprintf(s.runtime_error, sizeof(s.runtime_error), "%s", err.msg);
        m->rounds_since_runtime = 0;
    }
    m->poked_now = false;
    s.probed = true;
    pthread_mutex_lock(&m->mu);
    m->snap = s;
    pthread_mutex_unlock(&m->mu);
}

static void *
monitor_main(void *arg)
{
    struct monitor *m = arg;
    pthread_mutex_lock(&m->mu);
    while (!m->stop) {
        struct timespec deadline;
        clock_gettime(CLOCK_REALTIME, &deadline);
        deadline.tv_sec += m->interval_ms / 1000;
        deadline.tv_nsec += (long)(m->interval_ms % 1000) * 1000000L;
        if (deadline.tv_nsec >= 1000000000L) {
            deadline.tv_sec++;
            deadline.tv_nsec -= 1000000000L;
        }
        while (!m->stop && !m->poked)
            if (pthread_cond_timedwait(&m->cond, &m->mu, &deadline) == ETIMEDOUT)
                break;
        if (m->stop)
            break;
        m->poked_now = m->poked;
        m->poked = false;
        pthread_mutex_unlock(&m->mu);
        probe_round(m);
        pthread_mutex_lock(&m->mu);
    }
    pthread_mutex_unlock(&m->mu);
    return NULL;
}

int
monitor_start(const char *store_root, monitor_probe_fn runtime_probe, void *probe_ctx,
              unsigned interval_ms, struct monitor **out, struct err *err)
{
    struct monitor *m = calloc(1, sizeof(*m));
    if (!m || !(m->root = strdup(store_root))) {
        free(m);
        return err_set(err, ENOMEM, "monitor: out of memory");
    }
    pthread_mutex_init(&m->mu, NULL);
    pthread_cond_init(&m->cond, NULL);
    m->interval_ms = interval_ms;
    m->runtime_probe = runtime_probe;
    m->probe_ctx = probe_ctx;
    probe_round(m);
    int rc = pthread_create(&m->thread, NULL, monitor_main, m);
    if (rc != 0) {
        free(m->root);
        free(m);
        return err_errno(err, rc, "monitor: start thread");
    }
    *out = m;
    return 0;
}

void
monitor_set_network_probe(struct monitor *m, monitor_probe_fn probe, void *ctx)
{
    pthread_mutex_lock(&m->mu);
    m->network_probe = probe;
    m->network_ctx = ctx;
    m->poked = true;
    pthread_cond_signal(&m->cond);
    pthread_mutex_unlock(&m->mu);
}

void
monitor_read(struct monitor *m, struct monitor_snapshot *out)
{
    pthread_mutex_lock(&m->mu);
    *out = m->snap;
    pthread_mutex_unlock(&m->mu);
}

void
monitor_poke(struct monitor *m)
{
    pthread_mutex_lock(&m->mu);
    m->poked = true;
    pthread_cond_signal(&m->cond);
    pthread_mutex_unlock(&m->mu);
}

void
monitor_stop(struct monitor *m)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->mu);
    m->stop = true;
    pthread_cond_signal(&m->cond);
    pthread_mutex_unlock(&m->mu);
    pthread_join(m->thread, NULL);
    pthread_mutex_destroy(&m->mu);
    pthread_cond_destroy(&m->cond);
    free(m->root);
    free(m);
}
