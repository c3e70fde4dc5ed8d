/*
 * Sizes for Windows containers: the utility VM of a hyperv container, the
 * job-object memory cap of a process-isolated one, and the CPU limits of
 * either, scaled to the processors the container actually has.
 *
 * The seed PR booted a 254 MiB utility VM for a task with a 256 MB limit
 * and the task found 78 MiB free: the VM's own Windows took the rest. So a
 * memory limit here is the task's, and the VM is that plus
 * HCS_UVM_GUEST_OVERHEAD_MB for the guest OS (176 MiB measured there, with
 * room for a servercore guest's services), rounded up to the 2 MB that
 * Hyper-V allocates VM memory in. Without a limit the VM gets the
 * configured size (--hyperv-memory-mb, default 1024, the runtime defaults
 * hcsshim and containerd use) and the task whatever of it the guest
 * leaves.
 *
 * Pure; any thread.
 */
#ifndef BERTH_RUNTIME_HCS_SIZING_H
#define BERTH_RUNTIME_HCS_SIZING_H

#include <stdint.h>

#include "common/err.h"

#define HCS_UVM_DEFAULT_MEMORY_MB 1024u
#define HCS_UVM_DEFAULT_CPUS 2u
/* What the utility VM's own Windows takes of its memory (see above). */
#define HCS_UVM_GUEST_OVERHEAD_MB 256u
/* Bounds for --hyperv-memory-mb and for a VM sized from a limit. */
#define HCS_UVM_MIN_MEMORY_MB 256u
#define HCS_UVM_MAX_MEMORY_MB (1024u * 1024u) /* 1 TiB */
#define HCS_UVM_MAX_CPUS 1024u

/* The daemon's flags for utility VMs; 0 means the default. */
struct hcs_uvm_config {
    uint32_t memory_mb; /* --hyperv-memory-mb: a VM's size when the container has no limit */
    uint32_t cpus;      /* --hyperv-cpus */
    uint32_t guest_overhead_mb; /* 0: HCS_UVM_GUEST_OVERHEAD_MB */
};

struct hcs_uvm_size {
    uint32_t memory_mb;      /* ComputeTopology.Memory.SizeInMB: even */
    uint32_t processors;     /* ComputeTopology.Processor.Count */
    uint32_t task_memory_mb; /* the container's own cap inside the VM; 0: none */
};

/*
 * The utility VM for a container with memory_limit_bytes (0: none) on a
 * host with host_lps logical processors (0: unknown, no cap):
 *   - limit: task = limit in MB rounded up, VM = task + guest overhead,
 *     rounded up to even;
 *   - no limit: VM = cfg->memory_mb (default 1024) rounded up to even;
 *   - processors = cfg->cpus (default 2), at most host_lps.
 * EINVAL when cfg is out of range (memory under HCS_UVM_MIN_MEMORY_MB or
 * over HCS_UVM_MAX_MEMORY_MB, cpus over HCS_UVM_MAX_CPUS) or the limit
 * gives a VM over HCS_UVM_MAX_MEMORY_MB, naming the value.
 */
int hcs_uvm_size(const struct hcs_uvm_config *cfg, uint64_t memory_limit_bytes, uint32_t host_lps,
                 struct hcs_uvm_size *out, struct err *err);

/* Container.Memory.SizeInMB for a limit: bytes in MB, rounded up (0: 0, no cap). */
uint64_t hcs_memory_mb(uint64_t bytes);

/*
 * Container.Processor: Count, Maximum and Weight are mutually exclusive in
 * the schema, so at most one field is non-zero.
 */
struct hcs_processor {
    uint32_t count;   /* processors the container may use */
    uint32_t maximum; /* share of all its processors, in 1/10000 (10000: all of them) */
    uint32_t weight;  /* relative weight, 1..10000 (HCS's default is 100) */
};

/*
 * The Processor limits for berth's limits on a container that sees
 * `processors` processors (the host's logical processors under process
 * isolation, the utility VM's under hyperv):
 *   - cpu_quota_pct (percent of one CPU, 150 = one and a half) becomes
 *     Maximum = quota * 100 / processors, rounded up, within 1..10000: the
 *     same CPU time on a 2-processor VM as on a 16-processor host;
 *   - cpu_shares (cgroup weight, 1024 the default) becomes
 *     Weight = shares * 100 / 1024, within 1..10000, so the default weight
 *     of one is the default weight of the other.
 * Both at once cannot be said in one document: ENOTSUP. EINVAL when
 * processors is 0.
 */
int hcs_cpu_limits(uint64_t cpu_shares, uint32_t cpu_quota_pct, uint32_t processors,
                   struct hcs_processor *out, struct err *err);

#endif
