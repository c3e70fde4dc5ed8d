/*
 * Utility VM sizes and CPU limits (sizing.h). Pure; any thread.
 */
#include "runtime/hcs/sizing.h"

#include <string.h>

#define MIB (1024ull * 1024ull)

uint64_t
hcs_memory_mb(uint64_t bytes)
{
    return bytes / MIB + (bytes % MIB != 0);
}

static uint64_t
round_even(uint64_t mb)
{
    return mb + (mb & 1);
}

int
hcs_uvm_size(const struct hcs_uvm_config *cfg, uint64_t memory_limit_bytes, uint32_t host_lps,
             struct hcs_uvm_size *out, struct err *err)
{
    uint32_t base_mb = cfg && cfg->memory_mb ? cfg->memory_mb : HCS_UVM_DEFAULT_MEMORY_MB;
    uint32_t cpus = cfg && cfg->cpus ? cfg->cpus : HCS_UVM_DEFAULT_CPUS;
    uint32_t overhead =
        cfg && cfg->guest_overhead_mb ? cfg->guest_overhead_mb : HCS_UVM_GUEST_OVERHEAD_MB;
    if (base_mb < HCS_UVM_MIN_MEMORY_MB || base_mb > HCS_UVM_MAX_MEMORY_MB)
        return err_set(err, EINVAL, "utility vm memory %u MB: out of range %u..%u", base_mb,
                       HCS_UVM_MIN_MEMORY_MB, HCS_UVM_MAX_MEMORY_MB);
    if (cpus > HCS_UVM_MAX_CPUS)
        return err_set(err, EINVAL, "utility vm processors %u: more than %u", cpus,
                       HCS_UVM_MAX_CPUS);
    if (overhead > HCS_UVM_MAX_MEMORY_MB)
        return err_set(err, EINVAL, "utility vm guest overhead %u MB: more than %u", overhead,
                       HCS_UVM_MAX_MEMORY_MB);

    struct hcs_uvm_size s = {0};
    if (memory_limit_bytes) {
        uint64_t task = hcs_memory_mb(memory_limit_bytes);
        uint64_t vm = round_even(task + overhead);
        if (vm > HCS_UVM_MAX_MEMORY_MB)
            return err_set(err, EINVAL,
                           "memory limit %llu: its utility vm (%llu MB with %u MB for the guest) "
                           "would be larger than %u MB",
                           (unsigned long long)memory_limit_bytes, (unsigned long long)vm, overhead,
                           HCS_UVM_MAX_MEMORY_MB);
        s.memory_mb = (uint32_t)vm;
        s.task_memory_mb = (uint32_t)task;
    } else {
        s.memory_mb = (uint32_t)round_even(base_mb);
    }
    s.processors = host_lps && cpus > host_lps ? host_lps : cpus;
    *out = s;
    return 0;
}

int
hcs_cpu_limits(uint64_t cpu_shares, uint32_t cpu_quota_pct, uint32_t processors,
               struct hcs_processor *out, struct err *err)
{
    if (processors == 0)
        return err_set(err, EINVAL, "cpu limits: the container has no processors");
    if (cpu_shares && cpu_quota_pct)
        return err_set(err, ENOTSUP,
                       "cpu limits: cpu shares (%llu) and a cpu quota (%u%%) cannot both apply "
                       "to a windows container: HCS takes a weight or a maximum, not both",
                       (unsigned long long)cpu_shares, cpu_quota_pct);
    struct hcs_processor p;
    memset(&p, 0, sizeof(p));
    if (cpu_quota_pct) {
        uint64_t m = ((uint64_t)cpu_quota_pct * 100 + processors - 1) / processors;
        p.maximum = m < 1 ? 1 : m > 10000 ? 10000 : (uint32_t)m;
    } else if (cpu_shares) {
        uint64_t w = cpu_shares > 1024u * 10000u ? 10000 : (cpu_shares * 100 + 512) / 1024;
        p.weight = w < 1 ? 1 : w > 10000 ? 10000 : (uint32_t)w;
    }
    *out = p;
    return 0;
}
