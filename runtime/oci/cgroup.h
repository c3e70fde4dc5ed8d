/*
 * Reading a container's resource usage from its cgroup, on cgroup v1
 * (memory.usage_in_bytes, cpuacct.usage) and v2 (memory.current,
 * cpu.stat usage_usec), and hybrid hosts (v1 controllers win when they
 * are mounted); and removing the per-daemon parent of the containers'
 * cgroups. Blocks on /proc and /sys: pool threads, or the daemon's
 * shutdown once the loop has stopped.
 */
#ifndef BERTH_RUNTIME_OCI_CGROUP_H
#define BERTH_RUNTIME_OCI_CGROUP_H

#include <stdint.h>
#include <sys/types.h>

#include "common/err.h"
#include "runtime/driver.h"

/*
 * Finds the directory of pid's cgroup for controller ("memory", "cpuacct",
 * or NULL for the v2 unified hierarchy) on this host. Caller frees *out.
 * ENOENT when the controller is not mounted or pid is gone.
 */
int rt_cgroup_dir(pid_t pid, const char *controller, char **out, struct err *err);

/*
 * Removes the directory parent (a relative cgroupsPath's first part, which
 * runc makes under its own, so this process's, cgroup in each hierarchy)
 * from every hierarchy this process is in (v1 and v2), with every cgroup
 * below it that holds no process: those of containers that stopped and
 * were never deleted, or whose delete a crash cut short. A running
 * container's cgroup stays, and so does parent: the kernel refuses
 * (EBUSY), and that is not an error. 0, or the first other failure.
 */
int rt_cgroup_parent_remove(const char *parent, struct err *err);

/* How many times the OOM killer killed in pid's memory cgroup: v1's
 * memory.oom_control "oom_kill" (v1 wins on a hybrid host, as in stats),
 * else v2's memory.events "oom_kill". */
int rt_cgroup_oom_kills(pid_t pid, uint64_t *out, struct err *err);

/* Memory and CPU usage of the cgroup that pid is in. */
int rt_cgroup_stats(pid_t pid, struct rt_stats *out, struct err *err);

#endif
