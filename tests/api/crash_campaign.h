/*
 * The crash campaign (tests/api/test_crash_campaign.c): what the
 * workload did, as far as the daemon acknowledged it, and what the checks
 * after each restart compare the store against.
 *
 * Each worker thread owns the objects it made (images named w<N>-..., its
 * volumes and containers), so its part of the model is touched by that
 * thread alone while the workload runs and by the main thread alone while
 * it checks; the two never overlap (the workers are joined first). An
 * object is PRESENT once the daemon answered its create (201 or 200),
 * ABSENT once it answered its delete, and MAYBE while a request about it
 * got no answer because the daemon was killed: the check after the
 * restart decides it from what is listed, and from then on it is certain
 * again. A volume's files are those of the uploads that answered 200; an
 * upload cut by the kill is kept as pending and must show whole or not at
 * all.
 *
 * Runs in the Check test process: the main thread and the worker threads.
 */
#ifndef BERTH_TESTS_API_CRASH_CAMPAIGN_H
#define BERTH_TESTS_API_CRASH_CAMPAIGN_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "tests/api/harness.h"

#define CC_WORKERS_MAX 6
#define CC_IMAGES 4 /* live image names per worker */
#define CC_VOLUMES 4
#define CC_CONTAINERS 3
#define CC_PROCS 12 /* processes remembered per container */
#define CC_FILES 24 /* distinct file paths an upload may write */
#define CC_NAME 64
#define CC_NAME_LEN 256 /* a name as listed */
#define CC_LIST_MAX 512 /* names in one listing */

enum cc_presence { CC_ABSENT = 0, CC_PRESENT, CC_MAYBE };

/* The images the workload imports (tests/fixtures/make-images.sh). */
enum cc_fixture {
    CC_FIX_BASE,   /* layout base: one layer, busybox and /etc/passwd */
    CC_FIX_CHILD,  /* layout child: base's layer, /app/hello.txt, /etc/passwd whited out */
    CC_FIX_TAR,    /* base.tar uploaded (plain, gzip or zstd): the same image as base */
    CC_FIX_DOCKER, /* docker.tar uploaded: base as a docker save archive */
    CC_FIX_COUNT
};

struct cc_image {
    char name[CC_NAME];
    int fix;
    enum cc_presence p;
};

/* A file an upload wrote: its content is cc_fill(key, size). */
struct cc_file {
    char path[32];
    uint64_t key;
    uint32_t size;
};

struct cc_files {
    struct cc_file f[CC_FILES];
    int n;
};

struct cc_volume {
    char handle[CC_NAME];
    char parent[CC_NAME]; /* "" for a plain volume */
    enum cc_presence p;
    struct cc_files files; /* acknowledged content */
    bool pending;          /* an upload that got no answer */
    struct cc_files pending_files;
};

struct cc_proc {
    char id[32];
    int code;       /* the exit code it must report */
    bool never_ran; /* its start was cut and it was recorded as never started (127) */
    enum cc_presence p;
};

struct cc_container {
    char handle[CC_NAME];
    int fix;              /* the fixture of its image */
    char volume[CC_NAME]; /* mounted read-only at /mnt/v, or "" */
    bool disk;            /* limits.disk_bytes (a loop-mounted or quota'd writable layer) */
    bool delete_cut;      /* a delete of it got no answer (its processes may have had TERM) */
    enum cc_presence p;
    struct cc_proc procs[CC_PROCS];
    int nprocs;
};

struct cc_campaign;

struct cc_worker {
    struct cc_campaign *c;
    int id;
    pthread_t thread;
    uint64_t rng;
    unsigned serial; /* for unique names, across rounds */
    struct cc_image images[CC_IMAGES];
    struct cc_volume volumes[CC_VOLUMES];
    struct cc_container containers[CC_CONTAINERS];
    _Atomic(const char *) in_flight; /* the operation under way, for the round's summary */
    int ops;                         /* requests answered in this round */
    char failure[4096];              /* the first thing that went wrong, "" if none */
};

struct cc_campaign {
    struct berthd b;
    char root[PATH_MAX];
    char fixtures[PATH_MAX]; /* tests/fixtures/make-images.sh output */
    char cgroup_name[32];    /* berth-<12 hex of sha256(root)>: the runtime's cgroup parent */
    uint64_t seed;
    int round, rounds, workers;
    int kill_min_ms, kill_max_ms;
    atomic_bool killed; /* set before the SIGKILL: unanswered requests after it are MAYBE */
    pthread_mutex_t mu; /* fixture digests, learned from the first import of each */
    char digest[CC_FIX_COUNT][72];
    char *blob[CC_FIX_COUNT]; /* each fixture's tar stream, read once */
    size_t blob_len[CC_FIX_COUNT];
    char *gz, *zst; /* base.tar compressed */
    size_t gz_len, zst_len;
    struct cc_worker w[CC_WORKERS_MAX];
    /* Known findings in api/ or daemon/ (see crash_verify.c) are counted
     * and printed, and fail the run only when strict (BERTH_CRASH_STRICT=1). */
    bool strict;
    int known_term_before_delete;
    /* Figures for the summary. */
    int listed_images, listed_volumes, listed_containers; /* at the last check */
    int kills_in_flight, rounds_done, storms;
    long in_flight_by_kind[16];
};

/* ---- shared helpers (crash_workload.c) ------------------------------------------------------ */

/* splitmix64: the campaign's only source of randomness. */
uint64_t cc_rand(uint64_t *state);
/* A number in [lo, hi]. */
int cc_between(uint64_t *state, int lo, int hi);
/* The content of a file written by an upload: size bytes derived from key. */
void cc_fill(uint64_t key, char *out, size_t size);
/* Merges src into dst (a path already there takes src's key and size). */
void cc_files_merge(struct cc_files *dst, const struct cc_files *src);

/* One raw request: method, path, a body (NULL: none) sent in chunks of
 * chunk bytes with delay_us between them, an optional Content-Type and
 * Accept. Fills out as http_do does. */
void cc_request(const struct berthd *b, const char *method, const char *path, const char *ctype,
                const char *accept, const char *body, size_t len, size_t chunk, long delay_us,
                long timeout_ms, struct hresp *out);

/* The worker thread: runs operations until the daemon is killed. */
void *cc_worker_main(void *arg);
/* The names the operation kinds are counted under in the summary. */
extern const char *const cc_op_names[];
int cc_op_index(const char *name);

/* ---- looking from outside (crash_leaks.c) ---------------------------------------------------- */

/* A set of names (handles, digests, directory entries). */
struct cc_names {
    char v[CC_LIST_MAX][CC_NAME_LEN];
    int n;
};
bool cc_names_has(const struct cc_names *s, const char *name);
void cc_names_add(struct cc_names *s, const char *name);
void cc_names_remove(struct cc_names *s, const char *name);
/* The entries of dir (not . and ..) starting with prefix (NULL: all). */
void cc_dir_names(const char *dir, const char *prefix, struct cc_names *out);

/* Whether a volume's tar stream holds exactly the files of want (and
 * the directories they are in); false with the difference in why. */
bool cc_tar_matches(const char *tar, size_t len, const struct cc_files *want, char *why,
                    size_t why_len);

/*
 * Nothing under the root, on the host's mounts, loop devices and cgroups
 * or among its processes that the listed containers and volumes do not
 * explain (see crash_leaks.c); false with what was found in why.
 */
bool cc_check_leaks(const struct cc_campaign *c, const struct cc_names *containers,
                    const struct cc_names *volumes, const char *when, char *why, size_t len);

/* After the daemon's clean shutdown with nothing listed: no cgroup of this
 * root's parent is left in any hierarchy, the parent included (berthd
 * removes it); false with the first one found in why. */
bool cc_check_cgroups_gone(const struct cc_campaign *c, char *why, size_t len);

/* ---- checks after a restart (crash_verify.c) ------------------------------------------------ */

/*
 * Everything listed is whole and usable, everything acknowledged is
 * listed, nothing is leaked; the MAYBE objects are decided. Deletes some
 * of the containers (seeded) so they do not pile up. Returns false with
 * the reason in why.
 */
bool cc_verify(struct cc_campaign *c, char *why, size_t len);

/* Deletes everything and checks that the root holds nothing any more. */
bool cc_verify_empty(struct cc_campaign *c, char *why, size_t len);

#endif
