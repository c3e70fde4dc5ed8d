/*
 * Helpers for the Docker API suites: a berthd with its Docker API on a
 * unix socket (or loopback TCP), the real clients found on this machine
 * (the docker CLIs in $BERTH_DOCKER_CLIENTS, which scripts/deps.sh's
 * berth_docker_clients fills: the one on PATH and Debian's 20.10 client
 * taken out of docker.io; the Python interpreters that have docker-py),
 * runs of them against that berthd, and the images they load: a docker
 * save archive (busybox:latest) and an OCI archive (ocibox:1) of a
 * busybox with every applet, built here with umoci and skopeo.
 */
#ifndef BERTH_TESTS_API_HARNESS_DOCKER_H
#define BERTH_TESTS_API_HARNESS_DOCKER_H

#include "harness.h"

#define DK_MAX_CLIENTS 4

/* A real client: a docker CLI binary, or a Python interpreter with docker-py. */
struct dk_client {
    char path[PATH_MAX];
    char version[64]; /* "28.2.2", "20.10.24+dfsg1"; docker-py's "5.0.3" */
};

/* The docker CLIs here (at least one, else the suite skips: exit 77). */
size_t dk_clis(struct dk_client out[DK_MAX_CLIENTS]);
/* The Python interpreters with docker-py (none: the suite skips). */
size_t dk_pythons(struct dk_client out[DK_MAX_CLIENTS]);

/* Starts berthd with the Docker API on a unix socket in its temporary
 * directory, or with tcp on a free loopback port; extra: more flags. */
void dk_start(struct berthd *b, bool tcp, const char *const *extra);
/* DOCKER_HOST for b (static buffer). */
const char *dk_host(const struct berthd *b);

/*
 * Runs the shell command cmd (formatted; "$D" is the client, DOCKER_HOST
 * is b's) with a time limit of 60 s; *out gets stdout and stderr together
 * (caller frees). Returns the exit status (124 on timeout).
 */
int dk_run(const struct berthd *b, const struct dk_client *cl, char **out, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* As dk_run, asserting exit status want; returns the output's first line (caller frees). */
char *dk_ok(const struct berthd *b, const struct dk_client *cl, int want, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* The archives (built once per process). */
const char *dk_busybox_archive(void);
const char *dk_oci_archive(void);
/* Loads busybox:latest into b through the Docker API (POST /images/load). */
void dk_load_busybox(const struct berthd *b);

/* Tracks every container b has for the safety net (harness_containers.h). */
void dk_track_all(const struct berthd *b);

/* Whether s (may be NULL) has sub in it. */
bool dk_contains(const char *s, const char *sub);

/* A connected socket to b's Docker API (unix or TCP), or -1. */
int dk_connect(const struct berthd *b);

#endif
