/*
 * The commit admission ledger (admit.h). Any thread: one mutex guards the
 * entries, and the commit reader runs under it.
 */
#include "runtime/hcs/admit.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define MIB (1024ull * 1024ull)

enum entry_state {
    ENTRY_PROMISED, /* admitted, VM not started yet: counted against new admissions */
    ENTRY_RUNNING,  /* started: its commit is in CommitTotal */
};

struct entry {
    uint64_t ticket;
    uint64_t bytes;
    enum entry_state state;
};

struct hcs_admit {
    pthread_mutex_t lock;
    hcs_commit_read_fn read;
    void *arg;
    struct entry *e;
    size_t n, cap;
    uint64_t next_ticket;
};

uint32_t
hcs_admit_overhead_mb(uint32_t vm_mb)
{
    return HCS_ADMIT_OVERHEAD_BASE_MB +
           (vm_mb + HCS_ADMIT_OVERHEAD_DIVISOR - 1) / HCS_ADMIT_OVERHEAD_DIVISOR;
}

int
hcs_admit_check(const struct hcs_commit_info *ci, uint64_t promised_bytes, uint32_t vm_mb,
                struct err *err)
{
    if (ci->page_size == 0)
        return err_set(err, EINVAL, "commit admission: the host reports a page size of 0");
    uint64_t limit = ci->commit_limit * ci->page_size;
    uint64_t total = ci->commit_total * ci->page_size;
    uint64_t avail = limit > total ? limit - total : 0;
    uint32_t overhead = hcs_admit_overhead_mb(vm_mb);
    uint64_t need = ((uint64_t)vm_mb + overhead) * MIB;
    if (promised_bytes <= avail && need <= avail - promised_bytes)
        return 0;
    return err_set(err, ENOSPC,
                   "not enough memory commit for a %u MB utility vm (+ %u MB overhead): the host "
                   "has %llu MB available (CommitLimit %llu MB - CommitTotal %llu MB), %llu MB of "
                   "it promised to vms still starting",
                   vm_mb, overhead, (unsigned long long)(avail / MIB),
                   (unsigned long long)(limit / MIB), (unsigned long long)(total / MIB),
                   (unsigned long long)(promised_bytes / MIB));
}

struct hcs_admit *
hcs_admit_new(hcs_commit_read_fn read, void *arg)
{
    struct hcs_admit *a = calloc(1, sizeof(*a));
    if (!a)
        return NULL;
    if (pthread_mutex_init(&a->lock, NULL) != 0) {
        free(a);
        return NULL;
    }
    a->read = read;
    a->arg = arg;
    a->next_ticket = 1;
    return a;
}

void
hcs_admit_free(struct hcs_admit *a)
{
    if (!a)
        return;
    pthread_mutex_destroy(&a->lock);
    free(a->e);
    free(a);
}

static uint64_t
promised_locked(const struct hcs_admit *a)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < a->n; i++)
        if (a->e[i].state == ENTRY_PROMISED)
            sum += a->e[i].bytes;
    return sum;
}

int
hcs_admit_reserve(struct hcs_admit *a, uint32_t vm_mb, uint64_t *ticket, struct err *err)
{
    int r = 0;
    pthread_mutex_lock(&a->lock);
    struct hcs_commit_info ci;
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 16;
        struct entry *e = realloc(a->e, cap * sizeof(*e));
        if (!e) {
            r = err_set(err, ENOMEM, "commit admission: out of memory");
            goto out;
        }
        a->e = e;
        a->cap = cap;
    }
    if ((r = a->read(a->arg, &ci, err)) < 0) {
        err_wrap(err, "commit admission: reading the host's commit");
        goto out;
    }
    if ((r = hcs_admit_check(&ci, promised_locked(a), vm_mb, err)) < 0)
        goto out;
    struct entry *e = &a->e[a->n++];
    e->ticket = a->next_ticket++;
    e->bytes = ((uint64_t)vm_mb + hcs_admit_overhead_mb(vm_mb)) * MIB;
    e->state = ENTRY_PROMISED;
    *ticket = e->ticket;
out:
    pthread_mutex_unlock(&a->lock);
    return r;
}

static struct entry *
find_locked(struct hcs_admit *a, uint64_t ticket)
{
    for (size_t i = 0; i < a->n; i++)
        if (a->e[i].ticket == ticket)
            return &a->e[i];
    return NULL;
}

void
hcs_admit_commit(struct hcs_admit *a, uint64_t ticket)
{
    pthread_mutex_lock(&a->lock);
    struct entry *e = find_locked(a, ticket);
    if (e)
        e->state = ENTRY_RUNNING;
    pthread_mutex_unlock(&a->lock);
}

void
hcs_admit_release(struct hcs_admit *a, uint64_t ticket)
{
    pthread_mutex_lock(&a->lock);
    struct entry *e = find_locked(a, ticket);
    if (e)
        *e = a->e[--a->n];
    pthread_mutex_unlock(&a->lock);
}

uint64_t
hcs_admit_promised_bytes(struct hcs_admit *a)
{
    pthread_mutex_lock(&a->lock);
    uint64_t sum = promised_locked(a);
    pthread_mutex_unlock(&a->lock);
    return sum;
}

unsigned
hcs_admit_running(struct hcs_admit *a)
{
    unsigned n = 0;
    pthread_mutex_lock(&a->lock);
    for (size_t i = 0; i < a->n; i++)
        n += a->e[i].state == ENTRY_RUNNING;
    pthread_mutex_unlock(&a->lock);
    return n;
}
