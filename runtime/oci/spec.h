/*
 * Builds an OCI runtime config.json for a berth container: the image's
 * rootfs, our init as the first process, the state directory mounted for
 * the init's protocol, the limits and the security defaults of
 * defaults.h. Pure computation (json-c); any thread.
 */
#ifndef BERTH_RUNTIME_OCI_SPEC_H
#define BERTH_RUNTIME_OCI_SPEC_H

#include <json-c/json.h>

#include "common/err.h"
#include "runtime/driver.h"

/* Where the init and the state directory appear inside every container. */
#define RT_OCI_INIT_TARGET "/.berth-init"
#define RT_OCI_STATE_TARGET "/.berth"

/* CPU quota period in microseconds: quota = pct * period / 100. */
#define RT_OCI_CPU_PERIOD 100000

/*
 * Builds the config for spec, whose init binary is init_path (mounted
 * read-only at RT_OCI_INIT_TARGET), whose state directory state_dir is
 * mounted read-write at RT_OCI_STATE_TARGET, and whose cgroup is
 * cgroups_path. Validates the spec (paths absolute, limits in range).
 * Returns a new object (caller puts it) or NULL with err set.
 */
struct json_object *rt_oci_spec_build(const struct rt_container_spec *spec, const char *init_path,
                                      const char *state_dir, const char *cgroups_path,
                                      struct err *err);

/* As rt_oci_spec_build, then writes it atomically to bundle_dir/config.json. */
int rt_oci_spec_write(const char *bundle_dir, const struct rt_container_spec *spec,
                      const char *init_path, const char *state_dir, const char *cgroups_path,
                      struct err *err);

#endif
