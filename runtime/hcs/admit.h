/*
 * Commit admission for utility VMs. A hyperv container's VM has its whole
 * memory charged to the host's commit when it starts (AllowOvercommit
 * with EnableDeferredCommit off, hcsshim's defaults and ours). When the
 * commit limit is reached the start fails deep inside HCS ("The paging
 * file is too small for this operation to complete", and the seed PR's
 * user saw only "failed to create shim task: ttrpc: closed"). berth checks
 * first: the host's available commit, (CommitLimit - CommitTotal) pages
 * times PageSize from GetPerformanceInfo, must hold the VM's memory plus
 * the host-side overhead of running it, and a create that does not fit
 * fails with ENOSPC (HTTP 507) and a message with the numbers.
 *
 * The host-side overhead (the VM worker process and its allocations) is
 * HCS_ADMIT_OVERHEAD_BASE_MB plus 1/64 of the VM: the seed PR measured
 * 1183 MB committed for a 1024 MB VM and 8414 MB for an 8192 MB one
 * (159 and 222 MB beyond the VM); this gives 176 and 288.
 *
 * VMs that were admitted but are still booting may not show in
 * CommitTotal yet, so concurrent creates are counted against them: the
 * ledger keeps each admission's bytes as promised until the VM started
 * (commit) or failed (release). Counting a booting VM both in CommitTotal
 * and as promised errs on the side of refusing.
 *
 * The ledger is thread-safe (one mutex; the commit reader runs under it,
 * so two admissions never read the same available commit). Pool threads.
 */
#ifndef BERTH_RUNTIME_HCS_ADMIT_H
#define BERTH_RUNTIME_HCS_ADMIT_H

#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"

#define HCS_ADMIT_OVERHEAD_BASE_MB 160u
#define HCS_ADMIT_OVERHEAD_DIVISOR 64u

/* What GetPerformanceInfo says, in its units. */
struct hcs_commit_info {
    uint64_t commit_limit; /* pages */
    uint64_t commit_total; /* pages */
    uint64_t page_size;    /* bytes */
};

/* The host-side commit of running a VM of vm_mb, beyond the VM's own memory. */
uint32_t hcs_admit_overhead_mb(uint32_t vm_mb);

/*
 * Does a VM of vm_mb fit in ci with promised_bytes already promised to
 * VMs still starting? 0, or ENOSPC: "not enough memory commit for a 1280
 * MB utility vm (+ 180 MB overhead): the host has 900 MB available
 * (CommitLimit 16384 MB - CommitTotal 15484 MB), 512 MB of it promised
 * to vms still starting". EINVAL when ci is inconsistent (a zero page
 * size).
 */
int hcs_admit_check(const struct hcs_commit_info *ci, uint64_t promised_bytes, uint32_t vm_mb,
                    struct err *err);

/* Reads the host's commit now (GetPerformanceInfo on Windows; a fake in tests). */
typedef int (*hcs_commit_read_fn)(void *arg, struct hcs_commit_info *out, struct err *err);

struct hcs_admit;

/* A new, empty ledger that reads commit with read(arg). NULL when out of memory. */
struct hcs_admit *hcs_admit_new(hcs_commit_read_fn read, void *arg);
void hcs_admit_free(struct hcs_admit *a);

/*
 * Admits a VM of vm_mb: reads the commit, checks it against what is
 * promised, and on success promises vm_mb + overhead until
 * hcs_admit_commit() or hcs_admit_release(). *ticket names the promise.
 * ENOSPC as hcs_admit_check(); the reader's error, wrapped.
 */
int hcs_admit_reserve(struct hcs_admit *a, uint32_t vm_mb, uint64_t *ticket, struct err *err);

/*
 * The VM of ticket started: its memory is the host's commit now (in
 * CommitTotal), so it is no longer counted as promised. The ticket stays
 * until hcs_admit_release() when the VM is gone.
 */
void hcs_admit_commit(struct hcs_admit *a, uint64_t ticket);

/* The VM of ticket failed to start or is gone: forget it. Unknown tickets are ignored. */
void hcs_admit_release(struct hcs_admit *a, uint64_t ticket);

/* Bytes promised to VMs still starting, and the number of VMs admitted and running. */
uint64_t hcs_admit_promised_bytes(struct hcs_admit *a);
unsigned hcs_admit_running(struct hcs_admit *a);

#endif
