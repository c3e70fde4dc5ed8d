/*
 * The crash campaign (issue 8, "Prove it"): berthd is killed with SIGKILL
 * at a random moment of a mixed workload (imports, container creates,
 * process runs, volume tar streams in and out, deletes, GCs: see
 * crash_workload.c), round after round on the same store root, and
 * after each restart everything acknowledged must be there, everything
 * listed whole and usable, and nothing leaked (crash_verify.c). Some
 * rounds also kill the restarted daemon while it starts up, on the torn
 * state the first kill left, before the restart that is checked.
 *
 * Seeded and repeatable: the seed is printed, and BERTH_CRASH_SEED=N runs
 * the same workload and kill times again (the daemon's timing still
 * varies: the same seed aims the kills at the same moments of the same
 * operations). BERTH_CRASH_ROUNDS (default 50), BERTH_CRASH_WORKERS
 * (default 3) and BERTH_CRASH_KILL_MS (the latest kill in a round, in ms
 * after its workload starts; default 1500) make a longer or harder run.
 * Each round prints what was in flight when the kill came (and with
 * BERTH_CRASH_TIMES=1 how long each of its checks took).
 *
 * Known findings, outside store/, runtime/ and common/, are counted and
 * printed instead of failing the run, unless BERTH_CRASH_STRICT=1:
 * - a container delete sends TERM to the processes (and waits out their
 *   grace time) before it writes "deleting" in the container's record
 *   (api/containers.c, daemon/svc_containers.c on the services branch),
 *   so a kill in between leaves the container listed and running after
 *   the restart, its processes killed (exit 143) by a delete that then
 *   never happens.
 */
#include <signal.h>
#include <sys/wait.h>

#include "tests/fixtures/imgfix.h"
#include "tests/api/crash_campaign.h"
#include "tests/api/harness_containers.h"

static struct cc_campaign camp;

static long
env_long(const char *name, long def, long lo, long hi)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return def;
    char *end = NULL;
    long v = strtol(s, &end, 0);
    if (*end || v < lo || v > hi) {
        fprintf(stderr, "%s=%s: want a number in [%ld, %ld]\n", name, s, lo, hi);
        exit(2);
    }
    return v;
}

static void
campaign_init(struct cc_campaign *c)
{
    const char *s = getenv("BERTH_CRASH_SEED");
    if (s && *s) {
        c->seed = strtoull(s, NULL, 0);
    } else {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ (uint64_t)getpid();
        c->seed = cc_rand(&x) % 1000000000ULL;
    }
    c->rounds = (int)env_long("BERTH_CRASH_ROUNDS", 50, 1, 100000);
    c->workers = (int)env_long("BERTH_CRASH_WORKERS", 3, 1, CC_WORKERS_MAX);
    c->kill_max_ms = (int)env_long("BERTH_CRASH_KILL_MS", 1500, 20, 600000);
    c->kill_min_ms = c->kill_max_ms < 200 ? 1 : 20;
    c->strict = env_long("BERTH_CRASH_STRICT", 0, 0, 1) == 1;
    fprintf(stderr,
            "crash campaign: seed %llu (BERTH_CRASH_SEED=%llu repeats it), %d rounds, %d "
            "workers, kills within %d ms\n",
            (unsigned long long)c->seed, (unsigned long long)c->seed, c->rounds, c->workers,
            c->kill_max_ms);
    pthread_mutex_init(&c->mu, NULL);
    snprintf(c->fixtures, sizeof(c->fixtures), "%s", fx_dir);
    c->blob[CC_FIX_TAR] = fx_read_file(fx_path("base.tar"), &c->blob_len[CC_FIX_TAR]);
    c->blob[CC_FIX_DOCKER] = fx_read_file(fx_path("docker.tar"), &c->blob_len[CC_FIX_DOCKER]);
    c->gz = fx_read_file(fx_path("base.tar.gz"), &c->gz_len);
    c->zst = fx_read_file(fx_path("base.tar.zst"), &c->zst_len);
    ck_assert(c->blob[CC_FIX_TAR] && c->blob[CC_FIX_DOCKER] && c->gz && c->zst);
    harness_mkdtemp(c->b.tmp, sizeof(c->b.tmp));
    snprintf(c->root, sizeof(c->root), "%s/root", c->b.tmp);
    /* The runtime's cgroup parent for this root (daemon/containers_open.c). */
    char digest[72];
    fx_sha256(c->root, strlen(c->root), digest);
    snprintf(c->cgroup_name, sizeof(c->cgroup_name), "berth-%.12s", digest + 7);
    for (int i = 0; i < c->workers; i++) {
        c->w[i].c = c;
        c->w[i].id = i;
    }
}

/* The last lines of a log file, to stderr. */
static void
print_tail(const char *title, const char *path, int lines)
{
    size_t len = 0;
    char *log = fx_read_file(path, &len);
    if (!log)
        return;
    const char *p = log + len;
    for (int n = 0; p > log && n <= lines; p--)
        n += p[-1] == '\n';
    fprintf(stderr, "---- %s (%s), last %d lines ----\n%s\n", title, path, lines, p);
    free(log);
}

/* The killed daemon's log, as previous.log and (kept with BERTH_TEST_KEEP=1) round-N.log. */
static void
save_log(struct cc_campaign *c)
{
    char prev[PATH_MAX + 32], keep[PATH_MAX + 32];
    snprintf(prev, sizeof(prev), "%s/previous.log", c->b.tmp);
    snprintf(keep, sizeof(keep), "%s/round-%03d.log", c->b.tmp, c->round);
    rename(c->b.log_path, prev);
    if (link(prev, keep) < 0) {
        /* Only for a look afterwards. */
    }
}

/* What the root and the host look like now, for the report of a failure. */
static void
diagnose(const struct cc_campaign *c)
{
    char cmd[4 * PATH_MAX];
    snprintf(cmd, sizeof(cmd),
             "r='%s'; exec >&2; echo '---- state at the failure ----'; "
             "echo \"containers: $(ls $r/containers | tr '\\n' ' ')\"; "
             "echo \"runc state: $(ls $r/runtime/runc 2>/dev/null | tr '\\n' ' ')\"; "
             "echo \"volumes: $(ls $r/volumes | tr '\\n' ' ')\"; "
             "echo 'mounts:'; grep \" $r/\" /proc/self/mountinfo | cut -d' ' -f5,9; "
             "echo 'loop devices:'; losetup -a | grep \"$r/\"; "
             "echo 'cgroups:'; for d in $(find /sys/fs/cgroup -maxdepth 4 -type d -name '%s' "
             "2>/dev/null); do for g in $d/*/; do [ -d \"$g\" ] && echo \"$g: procs $(cat "
             "$g/cgroup.procs 2>/dev/null | tr '\\n' ' ')\"; done; done; "
             "echo 'processes naming the root:'; ps -eo pid,ppid,etimes,args | grep -F \"$r/\" "
             "| grep -v grep; true",
             c->root, c->cgroup_name);
    if (system(cmd) != 0) {
        /* Only a report. */
    }
}

__attribute__((noreturn)) static void
campaign_fail(struct cc_campaign *c, const char *stage, const char *why)
{
    diagnose(c);
    char prev[PATH_MAX + 32];
    snprintf(prev, sizeof(prev), "%s/previous.log", c->b.tmp);
    print_tail("the killed daemon's log", prev, 40);
    print_tail("the restarted daemon's log", c->b.log_path, 60);
    fprintf(stderr, "crash campaign: seed %llu, round %d, %s: %s\n", (unsigned long long)c->seed,
            c->round, stage, why);
    ck_abort_msg("seed %llu (BERTH_CRASH_SEED), round %d, %s: %.3000s", (unsigned long long)c->seed,
                 c->round, stage, why);
}

/* A daemon started on the torn root and killed while it starts up. */
static void
storm(struct cc_campaign *c, uint64_t *rng)
{
    struct berthd_opts o = {.root = c->root, .no_wait = true};
    berthd_start(&c->b, &o);
    sleep_ms(cc_between(rng, 0, 150));
    berthd_kill(&c->b);
    c->storms++;
}

static void
run_round(struct cc_campaign *c, uint64_t *rng)
{
    char why[8192];
    double t0 = now_ms();
    if (!cc_verify(c, why, sizeof(why)))
        campaign_fail(c, "after the restart", why);
    double t_verify = now_ms() - t0;
    if (c->round > c->rounds)
        return; /* the last check, after the last kill */

    atomic_store(&c->killed, false);
    for (int i = 0; i < c->workers; i++) {
        struct cc_worker *w = &c->w[i];
        w->rng = c->seed ^ (0x9e3779b97f4a7c15ULL * (uint64_t)(c->round * 64 + i + 1));
        w->failure[0] = '\0';
        atomic_store(&w->in_flight, NULL);
        ck_assert_int_eq(pthread_create(&w->thread, NULL, cc_worker_main, w), 0);
    }
    int kill_ms = cc_between(rng, c->kill_min_ms, c->kill_max_ms);
    double start = now_ms();
    bool early = false;
    while (now_ms() - start < kill_ms && !early) {
        sleep_ms(5);
        for (int i = 0; i < c->workers; i++)
            early |= c->w[i].failure[0] != '\0';
    }
    bool alive = berthd_alive(&c->b);
    char flight[256] = "";
    int n = 0, busy = 0;
    for (int i = 0; i < c->workers; i++) {
        const char *op = atomic_load(&c->w[i].in_flight);
        n += snprintf(flight + n, sizeof(flight) - (size_t)n, "%s%s", i ? ", " : "",
                      op ? op : "idle");
        if (op) {
            busy++;
            int k = cc_op_index(op);
            if (k >= 0)
                c->in_flight_by_kind[k]++;
        }
    }
    atomic_store(&c->killed, true);
    berthd_kill(&c->b);
    int ops = 0;
    for (int i = 0; i < c->workers; i++) {
        pthread_join(c->w[i].thread, NULL);
        ops += c->w[i].ops;
    }
    for (int i = 0; i < c->workers; i++)
        if (c->w[i].failure[0])
            campaign_fail(c, "during the workload", c->w[i].failure);
    if (!alive)
        campaign_fail(c, "during the workload", "berthd exited before it was killed");
    c->kills_in_flight += busy > 0;
    save_log(c);
    bool storms = cc_between(rng, 0, 5) == 0;
    if (storms)
        storm(c, rng);
    /* Printed before the restart, so that a daemon that does not come
     * back is known by its round. */
    fprintf(stderr,
            "round %d/%d: %d images, %d volumes, %d containers checked in %.0f ms; %d requests, "
            "killed at %d ms during [%s]%s\n",
            c->round, c->rounds, c->listed_images, c->listed_volumes, c->listed_containers,
            t_verify, ops, kill_ms, flight, storms ? ", and again while starting" : "");
    berthd_start(&c->b, &(struct berthd_opts){.root = c->root});
    c->rounds_done++;
}

START_TEST(kill9_at_random_moments_of_a_mixed_workload_loses_nothing_acknowledged_and_leaks_nothing)
{
    struct cc_campaign *c = &camp;
    campaign_init(c);
    uint64_t rng = c->seed;
    double t0 = now_ms();
    berthd_start(&c->b, &(struct berthd_opts){.root = c->root});
    for (c->round = 1; c->round <= c->rounds + 1; c->round++)
        run_round(c, &rng);
    char why[8192];
    if (!cc_verify_empty(c, why, sizeof(why)))
        campaign_fail(c, "deleting everything at the end", why);
    fprintf(stderr,
            "crash campaign: seed %llu, %d rounds in %.1f s, %d kills with requests in "
            "flight, %d start-up kills; in flight at the kills:",
            (unsigned long long)c->seed, c->rounds_done, (now_ms() - t0) / 1000, c->kills_in_flight,
            c->storms);
    for (int k = 0; cc_op_names[k]; k++)
        fprintf(stderr, " %s %ld", cc_op_names[k], c->in_flight_by_kind[k]);
    fprintf(stderr, "; known findings seen: %d processes TERMed by a delete the kill cut\n",
            c->known_term_before_delete);
    /* The kills must have hit work, or the campaign proves nothing. */
    ck_assert_msg(c->kills_in_flight * 2 >= c->rounds_done,
                  "only %d of %d kills found a request in flight", c->kills_in_flight,
                  c->rounds_done);
    /* Looked at before the harness's cleanup, which removes what is left. */
    berthd_stop(&c->b);
    if (!cc_check_cgroups_gone(c, why, sizeof(why)))
        campaign_fail(c, "the last shutdown", why);
    berthd_cleanup(&c->b);
}
END_TEST

int
main(void)
{
    ctr_require_runtime();
    if (!fx_build(false)) {
        fx_cleanup();
        return 1;
    }
    long rounds = env_long("BERTH_CRASH_ROUNDS", 50, 1, 100000);
    long kill_ms = env_long("BERTH_CRASH_KILL_MS", 1500, 20, 600000);
    Suite *s = suite_create("api_crash_campaign");
    TCase *tc = tcase_create("campaign");
    /* A round takes a few seconds here; give slow (sanitized, loaded) runs room. */
    tcase_set_timeout(tc, (double)(120 + rounds * (20 + kill_ms / 1000)));
    ctr_add_fixture(tc);
    tcase_add_test(
        tc,
        kill9_at_random_moments_of_a_mixed_workload_loses_nothing_acknowledged_and_leaks_nothing);
    suite_add_tcase(s, tc);
    int rc = harness_run_suite(s);
    fx_cleanup();
    return rc;
}
