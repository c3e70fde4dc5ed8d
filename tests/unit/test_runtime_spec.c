/* The OCI runtime spec builder, its security defaults, and the driver registry. No runc. */
#include <check.h>
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/driver.h"
#include "runtime/oci/defaults.h"
#include "runtime/oci/spec.h"
#include "tests/unit/testutil.h"

static struct rt_container_spec
base_spec(void)
{
    struct rt_container_spec s = {
        .handle = "c1",
        .dir = "/var/lib/berth/containers/c1",
        .rootfs = "/var/lib/berth/rootfs/c1",
    };
    return s;
}

static struct json_object *
build(const struct rt_container_spec *s)
{
    struct err err = {0};
    struct json_object *j = rt_oci_spec_build(s, "/usr/lib/berth/berth-init", "berth/c1", &err);
    ck_assert_msg(j != NULL, "build: %s", err.msg);
    return j;
}

/* The JSON value at a dotted path ("linux.resources.memory.limit"), or NULL. */
static struct json_object *
at(struct json_object *j, const char *path)
{
    char *copy = strdup(path), *save = NULL;
    for (char *k = strtok_r(copy, ".", &save); k && j; k = strtok_r(NULL, ".", &save)) {
        struct json_object *next = NULL;
        j = json_object_object_get_ex(j, k, &next) ? next : NULL;
    }
    free(copy);
    return j;
}

static bool
array_has(struct json_object *a, const char *s)
{
    for (size_t i = 0; a && i < json_object_array_length(a); i++)
        if (strcmp(json_object_get_string(json_object_array_get_idx(a, i)), s) == 0)
            return true;
    return false;
}

static struct json_object *
mount_at(struct json_object *j, const char *dest)
{
    struct json_object *mounts = at(j, "mounts");
    for (size_t i = 0; mounts && i < json_object_array_length(mounts); i++) {
        struct json_object *m = json_object_array_get_idx(mounts, i);
        if (strcmp(json_object_get_string(at(m, "destination")), dest) == 0)
            return m;
    }
    return NULL;
}

START_TEST(spec_has_security_defaults)
{
    struct rt_container_spec s = base_spec();
    struct json_object *j = build(&s);

    struct json_object *bounding = at(j, "process.capabilities.bounding");
    ck_assert_ptr_nonnull(bounding);
    ck_assert_int_eq(json_object_array_length(bounding), 14);
    ck_assert(array_has(bounding, "CAP_CHOWN"));
    ck_assert(array_has(bounding, "CAP_NET_BIND_SERVICE"));
    ck_assert(!array_has(bounding, "CAP_SYS_ADMIN"));
    ck_assert(!array_has(bounding, "CAP_NET_ADMIN"));
    ck_assert(array_has(at(j, "process.capabilities.effective"), "CAP_KILL"));
    ck_assert_ptr_null(at(j, "process.capabilities.inheritable"));
    ck_assert(json_object_get_boolean(at(j, "process.noNewPrivileges")));

    struct json_object *ns = at(j, "linux.namespaces");
    ck_assert_int_eq(json_object_array_length(ns), 5);
    const char *want[] = {"pid", "ipc", "uts", "mount", "network"};
    for (size_t w = 0; w < 5; w++) {
        bool found = false;
        for (size_t i = 0; i < json_object_array_length(ns); i++)
            found |= strcmp(json_object_get_string(at(json_object_array_get_idx(ns, i), "type")),
                            want[w]) == 0;
        ck_assert_msg(found, "namespace %s missing", want[w]);
    }

    struct json_object *masked = at(j, "linux.maskedPaths");
    const char *masks[] = {"/proc/kcore",   "/proc/keys", "/proc/timer_list", "/proc/sched_debug",
                           "/sys/firmware", "/proc/scsi", "/proc/acpi"};
    for (size_t i = 0; i < sizeof(masks) / sizeof(masks[0]); i++)
        ck_assert_msg(array_has(masked, masks[i]), "%s not masked", masks[i]);
    struct json_object *ro = at(j, "linux.readonlyPaths");
    const char *ros[] = {"/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs"};
    for (size_t i = 0; i < sizeof(ros) / sizeof(ros[0]); i++)
        ck_assert_msg(array_has(ro, ros[i]), "%s not read-only", ros[i]);

    ck_assert_str_eq(json_object_get_string(at(j, "linux.seccomp.defaultAction")),
                     "SCMP_ACT_ERRNO");
    ck_assert_int_eq(json_object_get_int(at(j, "linux.seccomp.defaultErrnoRet")), 1);
    struct json_object *rules = at(j, "linux.seccomp.syscalls");
    ck_assert(array_has(at(json_object_array_get_idx(rules, 0), "names"), "read"));
    ck_assert(!array_has(at(json_object_array_get_idx(rules, 0), "names"), "mount"));
    ck_assert(!array_has(at(json_object_array_get_idx(rules, 0), "names"), "kexec_load"));

    /* Our init is the first process, read-only; its state directory is an fd, no mount. */
    ck_assert_str_eq(json_object_get_string(json_object_array_get_idx(at(j, "process.args"), 0)),
                     RT_OCI_INIT_TARGET);
    ck_assert_str_eq(json_object_get_string(json_object_array_get_idx(at(j, "process.args"), 1)),
                     "--state-fd");
    struct json_object *init = mount_at(j, RT_OCI_INIT_TARGET);
    ck_assert_ptr_nonnull(init);
    ck_assert_str_eq(json_object_get_string(at(init, "source")), "/usr/lib/berth/berth-init");
    ck_assert(array_has(at(init, "options"), "ro"));
    ck_assert_ptr_null(mount_at(j, RT_OCI_STATE_TARGET));
    ck_assert_ptr_nonnull(mount_at(j, "/dev"));
    ck_assert_str_eq(json_object_get_string(at(j, "linux.cgroupsPath")), "berth/c1");
    ck_assert_str_eq(json_object_get_string(at(j, "hostname")), "c1");
    ck_assert_str_eq(json_object_get_string(at(j, "root.path")), "/var/lib/berth/rootfs/c1");
    ck_assert_ptr_null(at(j, "linux.resources.memory"));
    json_object_put(j);
}
END_TEST

START_TEST(spec_maps_limits_and_mounts)
{
    struct rt_container_spec s = base_spec();
    s.limits.memory_bytes = 64ull << 20;
    s.limits.cpu_shares = 512;
    s.limits.cpu_quota_pct = 150;
    s.limits.pids = 32;
    struct rt_mount mounts[] = {{"/srv/cache", "/cache", true}, {"/srv/out", "/out", false}};
    s.mounts = mounts;
    s.nmounts = 2;
    s.hostname = "builder";
    struct json_object *j = build(&s);
    ck_assert_int_eq(json_object_get_int64(at(j, "linux.resources.memory.limit")), 64 << 20);
    ck_assert_int_eq(json_object_get_int64(at(j, "linux.resources.cpu.shares")), 512);
    ck_assert_int_eq(json_object_get_int64(at(j, "linux.resources.cpu.quota")), 150000);
    ck_assert_int_eq(json_object_get_int64(at(j, "linux.resources.cpu.period")), 100000);
    ck_assert_int_eq(json_object_get_int64(at(j, "linux.resources.pids.limit")), 32);
    ck_assert_str_eq(json_object_get_string(at(j, "hostname")), "builder");
    struct json_object *cache = mount_at(j, "/cache");
    ck_assert_ptr_nonnull(cache);
    ck_assert_str_eq(json_object_get_string(at(cache, "source")), "/srv/cache");
    ck_assert(array_has(at(cache, "options"), "ro"));
    ck_assert(array_has(at(cache, "options"), "rbind"));
    ck_assert(!array_has(at(mount_at(j, "/out"), "options"), "ro"));
    json_object_put(j);
}
END_TEST

static void
expect_reject(const struct rt_container_spec *s, const char *needle)
{
    struct err err = {0};
    struct json_object *j = rt_oci_spec_build(s, "/init", "x", &err);
    ck_assert_ptr_null(j);
    ck_assert_int_eq(err.code, EINVAL);
    ck_assert_msg(strstr(err.msg, needle), "message %s lacks %s", err.msg, needle);
}

START_TEST(spec_rejects_invalid_requests)
{
    struct rt_container_spec s = base_spec();
    s.rootfs = "relative/rootfs";
    expect_reject(&s, "relative/rootfs");
    s = base_spec();
    s.handle = "../escape";
    expect_reject(&s, "../escape");
    s = base_spec();
    s.limits.cpu_shares = 1;
    expect_reject(&s, "cpu shares 1");
    s = base_spec();
    s.limits.memory_bytes = 1024;
    expect_reject(&s, "memory limit 1024");
    s = base_spec();
    struct rt_mount reserved = {"/srv", "/.berth/procs", false};
    s.mounts = &reserved;
    s.nmounts = 1;
    expect_reject(&s, "reserved");
    struct rt_mount climb = {"/srv", "/a/../../etc", false};
    s.mounts = &climb;
    expect_reject(&s, "/a/../../etc");
    /* Every spelling of a reserved target is that target. */
    const char *spellings[] = {
        "//.berth",           "/./.berth", "//.berth-init", "/.berth/", "/.berth-init/",
        "/.//.berth//procs/", "/dev/",     "//proc",        "/sys/.",   NULL};
    for (size_t i = 0; spellings[i]; i++) {
        struct rt_mount m = {"/srv", spellings[i], false};
        s.mounts = &m;
        expect_reject(&s, "reserved");
    }
    /* Below the runtime's own filesystems nothing can be made. */
    const char *below[] = {"/proc/x", "/sys/fs/cgroup/x", "//dev/pts/./x", "/dev/mqueue/q", NULL};
    for (size_t i = 0; below[i]; i++) {
        struct rt_mount m = {"/srv", below[i], false};
        s.mounts = &m;
        expect_reject(&s, "inside a filesystem the runtime mounts");
    }
    struct rt_mount root = {"/srv", "//./", false};
    s.mounts = &root;
    expect_reject(&s, "below /");
    /* A target inside another, in either order and any spelling: the
     * runtime would resolve it in the other mount's content. */
    struct rt_mount nested[] = {{"/srv", "/ws", false}, {"/srv2", "//ws/./cache/", false}};
    s.mounts = nested;
    s.nmounts = 2;
    expect_reject(&s, "/ws/cache: inside the mount at /ws");
    struct rt_mount inner_first[] = {{"/srv", "/dev/v/x", false}, {"/srv2", "/dev/v", false}};
    s.mounts = inner_first;
    expect_reject(&s, "/dev/v/x: inside the mount at /dev/v");
}
END_TEST

/* Side by side, and stacked on one target, mounts are fine. */
START_TEST(spec_accepts_mounts_side_by_side_and_stacked)
{
    struct rt_container_spec s = base_spec();
    struct rt_mount m[] = {
        {"/srv", "/ws", false}, {"/srv2", "/ws2", false}, {"/srv3", "/ws/", true}};
    s.mounts = m;
    s.nmounts = 3;
    struct err err = {0};
    ck_assert_msg(rt_oci_spec_validate(&s, &err) == 0, "%s", err.msg);
}
END_TEST

/* The "network" entry of linux.namespaces. */
static struct json_object *
netns_entry(struct json_object *j)
{
    struct json_object *ns = at(j, "linux.namespaces");
    for (size_t i = 0; ns && i < json_object_array_length(ns); i++) {
        struct json_object *o = json_object_array_get_idx(ns, i);
        if (strcmp(json_object_get_string(at(o, "type")), "network") == 0)
            return o;
    }
    return NULL;
}

START_TEST(spec_joins_the_network_namespace_it_is_given)
{
    struct rt_container_spec s = base_spec();
    struct json_object *j = build(&s);
    /* Without one, a new namespace (runc gives it only lo). */
    ck_assert_ptr_nonnull(netns_entry(j));
    ck_assert_ptr_null(at(netns_entry(j), "path"));
    json_object_put(j);
    s.netns_path = "/var/lib/berth/network/netns/c1";
    j = build(&s);
    ck_assert_str_eq(json_object_get_string(at(netns_entry(j), "path")),
                     "/var/lib/berth/network/netns/c1");
    json_object_put(j);
    struct err err = {0};
    s.netns_path = "netns/c1";
    ck_assert_ptr_null(rt_oci_spec_build(&s, "/i", "berth/c1", &err));
    ck_assert_msg(strstr(err.msg, "network namespace netns/c1: not an absolute path"), "%s",
                  err.msg);
}
END_TEST

START_TEST(driver_lookup_names_unavailable_drivers)
{
    struct err err = {0};
    const struct rt_driver *d = rt_driver_lookup("oci", &err);
    ck_assert_ptr_nonnull(d);
    ck_assert_str_eq(d->name, "oci");
    ck_assert_ptr_nonnull(d->proc_spawn);
    ck_assert_ptr_null(rt_driver_lookup("hcs", &err));
    ck_assert_int_eq(err.code, ERR_UNAVAILABLE);
    ck_assert_msg(strstr(err.msg, "Windows"), "%s", err.msg);
    ck_assert_ptr_null(rt_driver_lookup("host", &err));
    ck_assert_int_eq(err.code, ERR_UNAVAILABLE);
    ck_assert_ptr_null(rt_driver_lookup("lxc", &err));
    ck_assert_int_eq(err.code, EINVAL);
}
END_TEST

START_TEST(driver_probe_reports_missing_runtime)
{
    char *root = tu_tmpdir("rtprobe");
    struct err err = {0};
    const struct rt_driver *d = rt_driver_lookup("oci", &err);
    struct rt_config cfg = {
        .state_root = root, .oci_runtime = "no-such-runtime-xyz", .init_path = "/bin/true"};
    void *ctx = NULL;
    ck_assert_int_eq(d->open(&cfg, &ctx, &err), 0);
    ck_assert_int_lt(d->probe(ctx, &err), 0);
    ck_assert_int_eq(err.code, ERR_UNAVAILABLE);
    ck_assert_msg(strstr(err.msg, "no-such-runtime-xyz"), "%s", err.msg);
    d->close(ctx);
    tu_rmtree(root);
    free(root);
}
END_TEST

#if defined(__x86_64__)
/* What the kernel says to an x32 getpid, asked here independently of the probe. */
static bool
kernel_runs_x32(void)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0)
        _exit(syscall(0x40000000L | SYS_getpid) > 0 ? 0 : 1);
    int st = 0;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

START_TEST(seccomp_lists_the_x32_abi_only_where_the_kernel_runs_it)
{
    /* A filter without an ABI refuses its syscalls: x32 is left out where
     * the kernel would refuse them anyway, which spares runc its filter. */
    struct json_object *with = rt_oci_seccomp_profile(true),
                       *without = rt_oci_seccomp_profile(false);
    ck_assert(array_has(at(with, "architectures"), "SCMP_ARCH_X32"));
    ck_assert(array_has(at(with, "architectures"), "SCMP_ARCH_X86"));
    ck_assert(!array_has(at(without, "architectures"), "SCMP_ARCH_X32"));
    ck_assert(array_has(at(without, "architectures"), "SCMP_ARCH_X86_64"));
    ck_assert(array_has(at(without, "architectures"), "SCMP_ARCH_X86"));
    ck_assert_int_eq(json_object_array_length(at(without, "syscalls")),
                     json_object_array_length(at(with, "syscalls")));
    json_object_put(with);
    json_object_put(without);

    bool runs = kernel_runs_x32();
    ck_assert_int_eq(rt_oci_kernel_runs_x32(), runs);
    struct json_object *j = build(&(struct rt_container_spec){
        .handle = "c1", .dir = "/var/lib/berth/containers/c1", .rootfs = "/r"});
    ck_assert_int_eq(array_has(at(j, "linux.seccomp.architectures"), "SCMP_ARCH_X32"), runs);
    json_object_put(j);
}
END_TEST
#endif

int
main(void)
{
    Suite *s = suite_create("runtime_spec");
    TCase *tc = tcase_create("spec");
    tcase_add_test(tc, spec_has_security_defaults);
#if defined(__x86_64__)
    tcase_add_test(tc, seccomp_lists_the_x32_abi_only_where_the_kernel_runs_it);
#endif
    tcase_add_test(tc, spec_maps_limits_and_mounts);
    tcase_add_test(tc, spec_rejects_invalid_requests);
    tcase_add_test(tc, spec_joins_the_network_namespace_it_is_given);
    tcase_add_test(tc, spec_accepts_mounts_side_by_side_and_stacked);
    tcase_add_test(tc, driver_lookup_names_unavailable_drivers);
    tcase_add_test(tc, driver_probe_reports_missing_runtime);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
