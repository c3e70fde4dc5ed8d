/*
 * The security defaults of every oci container, kept apart from the spec
 * builder so they can be read (and reviewed) in one place: Docker's
 * default capability set, the /proc and /sys paths masked or made
 * read-only, and a default seccomp profile. Static data; any thread.
 */
#ifndef BERTH_RUNTIME_OCI_DEFAULTS_H
#define BERTH_RUNTIME_OCI_DEFAULTS_H

#include <json-c/json.h>

/* NULL-terminated lists of static strings. */
extern const char *const rt_oci_default_caps[];           /* "CAP_CHOWN", ... */
extern const char *const rt_oci_default_masked_paths[];   /* "/proc/kcore", ... */
extern const char *const rt_oci_default_readonly_paths[]; /* "/proc/sys", ... */

/*
 * Builds the `linux.seccomp` object of the default profile: an allowlist
 * with SCMP_ACT_ERRNO (EPERM) as the default action. New object owned by
 * the caller, or NULL on out of memory.
 */
struct json_object *rt_oci_default_seccomp(void);

#endif
