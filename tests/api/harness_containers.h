/*
 * Helpers for the container and process suites: a busybox root
 * filesystem and a busybox OCI image built here (busybox-static and
 * umoci), requests that create containers and start processes, and a
 * safety net that removes, at exit, the containers this process created
 * (by their handles only: runc delete --force and an unmount), so a test
 * that fails half-way leaves no container, mount or cgroup behind.
 */
#ifndef BERTH_TESTS_API_HARNESS_CONTAINERS_H
#define BERTH_TESTS_API_HARNESS_CONTAINERS_H

#include "harness.h"

/* Skips (exit 77) when runc, busybox or umoci are missing, or not root. */
void ctr_require_runtime(void);

/* A busybox rootfs directory built once per process (with /etc/berth-marker "image-etc"). */
const char *ctr_busybox_rootfs(void);
/* "raw:///..." for ctr_busybox_rootfs(). */
const char *ctr_busybox_raw(void);
/* An OCI image layout of the same rootfs built with umoci (once per process). */
const char *ctr_busybox_layout(void);
/* Imports the layout into b under name; asserts success. */
void ctr_import_busybox(const struct berthd *b, const char *name);

/* Adds the suite-level safety net (an unchecked fixture run by the parent process). */
void ctr_add_fixture(TCase *tc);

/* Remembers a container of b for the safety nets. */
void ctr_track(const struct berthd *b, const char *handle);

/* POST /v1/containers with body; tracks the handle on 201. */
void ctr_create(const struct berthd *b, const char *body, struct hresp *out);
/* Creates a raw busybox container named handle; asserts 201. */
void ctr_create_raw(const struct berthd *b, const char *handle);
/* DELETE /v1/containers/{handle}; asserts 204. */
void ctr_delete(const struct berthd *b, const char *handle);

/* POST .../processes; asserts 201. */
void proc_start(const struct berthd *b, const char *handle, const char *body);
/* GET .../wait?timeout=10; returns the exit code (asserts 200). */
int proc_wait(const struct berthd *b, const char *handle, const char *id);
/* GET .../stdout or stderr (which "stdout"/"stderr", query may be ""); caller frees. */
char *proc_output(const struct berthd *b, const char *handle, const char *id, const char *which,
                  const char *query);
/* Runs sh -c script as process id and waits; returns its exit code, *out its stdout. */
int proc_run_sh(const struct berthd *b, const char *handle, const char *id, const char *script,
                char **out);

/* Shell command status (0 on success), formatted. */
int ctr_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* First line of a shell command's output (static buffer). */
const char *ctr_sh_out(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
