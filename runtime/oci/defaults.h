/*
 * The security defaults of every oci container, kept apart from the spec
 * builder so they can be read (and reviewed) in one place: Docker's
 * default capability set, the /proc and /sys paths masked or made
 * read-only, and a default seccomp profile. Static data and builders; any
 * thread.
 */
#ifndef BERTH_RUNTIME_OCI_DEFAULTS_H
#define BERTH_RUNTIME_OCI_DEFAULTS_H

#include <json-c/json.h>
#include <stdbool.h>

/* NULL-terminated lists of static strings. */
extern const char *const rt_oci_default_caps[];           /* "CAP_CHOWN", ... */
extern const char *const rt_oci_default_masked_paths[];   /* "/proc/kcore", ... */
extern const char *const rt_oci_default_readonly_paths[]; /* "/proc/sys", ... */

/*
 * Builds the `linux.seccomp` object of the default profile: an allowlist
 * with SCMP_ACT_ERRNO (EPERM) as the default action, for the x32 ABI too
 * when this kernel runs it. New object owned by the caller, or NULL on
 * out of memory. The first call forks a child for the probe and waits
 * for it (rt_oci_kernel_runs_x32).
 */
struct json_object *rt_oci_default_seccomp(void);

/* The same profile, with or without the x32 ABI (x86_64 only). */
struct json_object *rt_oci_seccomp_profile(bool x32);

/* Whether this kernel runs x32 syscalls; probed once, in a child (blocks briefly). */
bool rt_oci_kernel_runs_x32(void);

#endif
