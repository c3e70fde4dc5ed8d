/*
 * Builds an OCI runtime config.json for a berth container: the image's
 * rootfs, our init as the first process (given its state directory as fd
 * RT_OCI_STATE_FD, never mounted where the container could reach it), the
 * limits and the security defaults of defaults.h. Pure computation
 * (json-c); any thread.
 */
#ifndef BERTH_RUNTIME_OCI_SPEC_H
#define BERTH_RUNTIME_OCI_SPEC_H

#include <json-c/json.h>

#include "common/err.h"
#include "runtime/driver.h"

/*
 * Where the init appears inside every container. The state directory was
 * once mounted at RT_OCI_STATE_TARGET; the name stays reserved. The init
 * finds it as fd RT_OCI_STATE_FD (the runtime's first preserved fd).
 */
#define RT_OCI_INIT_TARGET "/.berth-init"
#define RT_OCI_STATE_TARGET "/.berth"
#define RT_OCI_STATE_FD 3
#define RT_OCI_STATE_FD_STR "3"

/* CPU quota period in microseconds: quota = pct * period / 100. */
#define RT_OCI_CPU_PERIOD 100000

/* What the mount target t (normal form) is reserved for, or NULL when it is not. */
const char *rt_oci_target_reserved(const char *t);

/*
 * Checks spec: paths absolute without "..", limits in range, no mount
 * target that is reserved (compared in normal form, so "//.berth" is
 * "/.berth"). EINVAL with a message naming the value.
 */
int rt_oci_spec_validate(const struct rt_container_spec *spec, struct err *err);

/*
 * Builds the config for spec, whose init binary is init_path (mounted
 * read-only at RT_OCI_INIT_TARGET) and whose cgroup is cgroups_path.
 * Validates the spec first. Mount targets go in their normal form.
 * Returns a new object (caller puts it) or NULL with err set.
 */
struct json_object *rt_oci_spec_build(const struct rt_container_spec *spec, const char *init_path,
                                      const char *cgroups_path, struct err *err);

/* As rt_oci_spec_build, then writes it atomically to bundle_dir/config.json. */
int rt_oci_spec_write(const char *bundle_dir, const struct rt_container_spec *spec,
                      const char *init_path, const char *cgroups_path, struct err *err);

#endif
