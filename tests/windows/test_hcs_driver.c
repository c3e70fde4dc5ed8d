/*
 * The hcs driver (runtime/hcs/driver_win.c, driver_proc_win.c) under
 * Wine, through its rt_driver operations, against the TEST DOUBLE of
 * computecore.dll (tests/doubles/computecore/): containers created,
 * started and deleted for both isolations, processes with output, exit
 * codes, signals, stdin and the output cap, utility VM sizing, commit
 * admission, a host without Hyper-V, a start that fails and is undone,
 * and re-attaching after the driver is closed and opened again (a
 * daemon restart: the double, like HCS, outlives its clients). The
 * double records every document it gets; the tests read them back.
 */
#include "runtime/hcs/driver.h"

#include <windows.h>

#include <check.h>
#include <io.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "common/strv.h"
#include "hcs_double_log.h"

#define T 10000 /* ms */

#define VOLUME "\\\\?\\Volume{baac0fd5-16b7-405b-9621-112aa8e3d973}\\"
#define BASE_LAYER "C:\\ProgramData\\berth\\snapshots\\base"
#define TOP_LAYER "C:\\ProgramData\\berth\\snapshots\\top"

static const struct rt_driver *drv = &rt_hcs_driver;
static char exe_dir[MAX_PATH];
static char dbl_path[MAX_PATH + 32];
static char work[MAX_PATH + 64];
static char rec_dir[MAX_PATH + 80];
static char state_root[MAX_PATH + 80];
static void *ctx;

/* ---- fixture ---- */

static void
rm_tree(const char *dir)
{
    char pat[MAX_PATH * 2];
    snprintf(pat, sizeof(pat), "%s\\*", dir);
    WIN32_FIND_DATAA fd;
    HANDLE f = FindFirstFileA(pat, &fd);
    if (f != INVALID_HANDLE_VALUE) {
        do {
            if (strcmp(fd.cFileName, ".") == 0 || strcmp(fd.cFileName, "..") == 0)
                continue;
            char p[MAX_PATH * 2];
            snprintf(p, sizeof(p), "%s\\%s", dir, fd.cFileName);
            if (fd.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY)
                rm_tree(p);
            else
                DeleteFileA(p);
        } while (FindNextFileA(f, &fd));
        FindClose(f);
    }
    RemoveDirectoryA(dir);
}

static void
drv_open(void)
{
    struct err err = {0};
    struct rt_config cfg = {.state_root = state_root};
    ck_assert_msg(drv->open(&cfg, &ctx, &err) == 0, "%s", err.msg);
}

static void
drv_close(void)
{
    drv->close(ctx);
    ctx = NULL;
}

/* The CRT's copy of the environment is what getenv reads; the double asks Windows's. */
static void
env_set(const char *name, const char *value)
{
    SetEnvironmentVariableA(name, value);
    char buf[MAX_PATH * 2];
    snprintf(buf, sizeof(buf), "%s=%s", name, value ? value : "");
    _putenv(buf);
}

static void
setup_env(const char *fail)
{
    static int n;
    if (!exe_dir[0]) {
        GetModuleFileNameA(NULL, exe_dir, sizeof(exe_dir));
        char *slash = strrchr(exe_dir, '\\');
        if (slash)
            *slash = '\0';
        snprintf(dbl_path, sizeof(dbl_path), "%s\\computecore.dll", exe_dir);
    }
    char tmp[MAX_PATH];
    GetTempPathA(sizeof(tmp), tmp);
    snprintf(work, sizeof(work), "%sberth-drv-%lu-%d", tmp, GetCurrentProcessId(), ++n);
    CreateDirectoryA(work, NULL);
    snprintf(rec_dir, sizeof(rec_dir), "%s\\rec", work);
    snprintf(state_root, sizeof(state_root), "%s\\state", work);
    CreateDirectoryA(rec_dir, NULL);
    SetEnvironmentVariableA("BERTH_HCS_DOUBLE_DIR", rec_dir);
    SetEnvironmentVariableA("BERTH_HCS_DOUBLE_FAIL", fail);
    SetEnvironmentVariableA("BERTH_HCS_DOUBLE_LPS", NULL);
    env_set("BERTH_TEST_HCS_DLL", dbl_path);
}

static void
setup(void)
{
    setup_env(NULL);
    drv_open();
}

static void
teardown(void)
{
    if (ctx)
        drv_close();
    rm_tree(work);
}

/* ---- what the double recorded ---- */

static json_object *
recorded(const char *fn, int nth)
{
    return hcs_log_recorded(rec_dir, fn, nth);
}

static int
called(const char *fn)
{
    return hcs_log_called(rec_dir, fn);
}

/* The integer at a dotted path of o ("VirtualMachine.ComputeTopology.Memory.SizeInMB"), or -1. */
static long long
json_int_at(json_object *o, const char *path)
{
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", path);
    for (char *save = NULL, *k = strtok_r(buf, ".", &save); k; k = strtok_r(NULL, ".", &save))
        if (!o || !json_object_object_get_ex(o, k, &o))
            return -1;
    return o ? json_object_get_int64(o) : -1;
}

static const char *
json_str_at(json_object *o, const char *path)
{
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", path);
    for (char *save = NULL, *k = strtok_r(buf, ".", &save); k; k = strtok_r(NULL, ".", &save))
        if (!o || !json_object_object_get_ex(o, k, &o))
            return NULL;
    return o ? json_object_get_string(o) : NULL;
}

/* ---- containers and processes ---- */

static char *
ctr_dir(const char *handle)
{
    static char dir[MAX_PATH * 2];
    snprintf(dir, sizeof(dir), "%s\\c-%s", work, handle);
    CreateDirectoryA(dir, NULL);
    return dir;
}

static void
touch(const char *path)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    fputs("vhdx", f);
    fclose(f);
}

/*
 * hyperv: a base layer folder with the template its import made
 * (UtilityVM\SystemTemplate.vhdx) and the scratch VHDX the daemon made,
 * real files: the driver copies the one and grants the VM both.
 */
static int
ctr_create(const char *handle, const char *isolation, uint64_t memory_bytes, struct err *err)
{
    bool hyperv = isolation && strcmp(isolation, "hyperv") == 0;
    static char base[MAX_PATH * 2], vhd[MAX_PATH * 3];
    snprintf(base, sizeof(base), "%s\\base", work);
    CreateDirectoryA(base, NULL);
    char tmpl[MAX_PATH * 3];
    snprintf(tmpl, sizeof(tmpl), "%s\\UtilityVM", base);
    CreateDirectoryA(tmpl, NULL);
    snprintf(tmpl, sizeof(tmpl), "%s\\UtilityVM\\SystemTemplate.vhdx", base);
    touch(tmpl);
    const char *dir = ctr_dir(handle);
    snprintf(vhd, sizeof(vhd), "%s\\sandbox.vhdx", dir);
    touch(vhd);
    char *layers[] = {TOP_LAYER, hyperv ? base : BASE_LAYER, NULL};
    struct rt_container_spec spec = {
        .handle = handle,
        .dir = dir,
        .rootfs = VOLUME,
        .isolation = isolation,
        .layers = layers,
        .scratch = hyperv ? vhd : VOLUME,
        .limits = {.memory_bytes = memory_bytes},
    };
    return drv->container_create(ctx, &spec, err);
}

static void
ctr_up(const char *handle)
{
    struct err err = {0};
    ck_assert_msg(ctr_create(handle, NULL, 0, &err) == 0, "%s", err.msg);
}

static int
spawn(const char *handle, const char *id, char **argv, bool in, uint64_t cap, struct err *err)
{
    struct rt_proc_spec spec = {
        .id = id, .path = argv[0], .argv = argv, .has_stdin = in, .max_output_bytes = cap};
    struct rt_proc_status st;
    int ret = drv->proc_spawn(ctx, handle, ctr_dir(handle), &spec, &st, err);
    if (ret == 0)
        ck_assert(st.started);
    return ret;
}

static struct rt_proc_status
wait_exit(const char *handle, const char *id)
{
    struct rt_proc_status st = {0};
    struct err err = {0};
    for (int i = 0; i < T / 10; i++) {
        ck_assert_msg(drv->proc_status(ctx, handle, ctr_dir(handle), id, &st, &err) == 0, "%s",
                      err.msg);
        if (st.exited)
            return st;
        Sleep(10);
    }
    ck_abort_msg("process %s in %s did not exit", id, handle);
    return st;
}

static char *
output(const char *handle, const char *id, int which)
{
    struct err err = {0};
    int fd = drv->proc_output_open(ctx, handle, ctr_dir(handle), id, which, &err);
    ck_assert_msg(fd >= 0, "%s", err.msg);
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    int n;
    while ((n = _read(fd, buf + len, (unsigned)(cap - len - 1))) > 0)
        len += (size_t)n;
    _close(fd);
    buf[len] = '\0';
    return buf;
}

/* Waits until the process's stdout holds want. */
static void
wait_output(const char *handle, const char *id, const char *want)
{
    for (int i = 0; i < T / 10; i++) {
        char *out = output(handle, id, 0);
        bool ok = strstr(out, want) != NULL;
        free(out);
        if (ok)
            return;
        Sleep(10);
    }
    ck_abort_msg("no \"%s\" on the stdout of %s", want, id);
}

static enum rt_container_status
ctr_status(const char *handle)
{
    struct rt_container_state cs;
    struct err err = {0};
    if (drv->container_state(ctx, handle, &cs, &err) < 0)
        return RT_CONTAINER_UNKNOWN;
    return cs.status;
}

static void
ctr_delete(const char *handle)
{
    struct err err = {0};
    ck_assert_msg(drv->container_delete(ctx, handle, ctr_dir(handle), &err) == 0, "%s", err.msg);
}

static size_t
ctr_count(void)
{
    char **v = NULL;
    struct err err = {0};
    ck_assert_int_eq(drv->container_list(ctx, &v, &err), 0);
    size_t n = strv_len(v);
    strv_free(v);
    return n;
}

/* ---- the tests ---- */

START_TEST(container_runs_a_process_with_output_and_is_deleted)
{
    struct err err = {0};
    ck_assert_int_eq(drv->probe(ctx, &err), 0);
    ck_assert_int_eq(drv->isolation_usable(ctx, "process", &err), 0);
    ck_assert_int_eq(drv->isolation_usable(ctx, "hyperv", &err), 0);
    ctr_up("build-1");
    ck_assert_int_eq(ctr_status("build-1"), RT_CONTAINER_RUNNING);
    ck_assert_uint_eq(ctr_count(), 1);
    json_object *doc = recorded("HcsCreateComputeSystem", 1);
    ck_assert_ptr_nonnull(doc);
    ck_assert_str_eq(json_str_at(doc, "Owner"), "berth");
    ck_assert_int_eq(
        json_object_get_boolean(json_object_object_get(doc, "ShouldTerminateOnLastHandleClosed")),
        0);
    ck_assert_str_eq(json_str_at(doc, "Container.Storage.Path"), VOLUME);
    ck_assert_str_eq(json_str_at(doc, "Container.GuestOs.HostName"), "build-1");
    json_object_put(doc);

    char *argv[] = {"prog.exe", "out", "hello", "err", "oops", "exit", "3", NULL};
    ck_assert_msg(spawn("build-1", "task", argv, false, 0, &err) == 0, "%s", err.msg);
    struct rt_proc_status st = wait_exit("build-1", "task");
    ck_assert_int_eq(st.exit_code, 3);
    ck_assert_int_eq(st.signal, 0);
    char *out = output("build-1", "task", 0), *errs = output("build-1", "task", 1);
    ck_assert_str_eq(out, "hello");
    ck_assert_str_eq(errs, "oops");
    free(out);
    free(errs);
    doc = recorded("HcsCreateProcess", 1);
    ck_assert_str_eq(json_str_at(doc, "User"), "ContainerUser");
    ck_assert_str_eq(json_str_at(doc, "WorkingDirectory"), "C:\\");
    json_object_put(doc);

    char **ids = NULL;
    ck_assert_int_eq(drv->proc_list(ctx, "build-1", ctr_dir("build-1"), &ids, &err), 0);
    ck_assert_uint_eq(strv_len(ids), 1);
    ck_assert_str_eq(ids[0], "task");
    strv_free(ids);
    struct rt_proc_times times;
    ck_assert_int_eq(drv->proc_times(ctx, "build-1", ctr_dir("build-1"), "task", &times, &err), 0);
    ck_assert(times.started_ms > 0 && times.finished_ms >= times.started_ms);
    char *watch = drv->proc_watch_dir(ctx, "build-1", ctr_dir("build-1"), "task");
    ck_assert_ptr_nonnull(strstr(watch, "task"));
    free(watch);
    ck_assert_int_eq(drv->proc_change("stdout"), RT_PROC_CHANGE_STDOUT);
    ck_assert_int_eq(drv->proc_change("exit"), RT_PROC_CHANGE_STATUS);
    /* An id in use is a conflict; an exited one can be removed, then reused. */
    ck_assert_int_eq(spawn("build-1", "task", argv, false, 0, &err), -ERR_CONFLICT);
    ck_assert_int_eq(drv->proc_remove(ctx, "build-1", ctr_dir("build-1"), "task", &err), 0);
    ck_assert_int_eq(drv->proc_remove(ctx, "build-1", ctr_dir("build-1"), "task", &err), -ENOENT);
    ck_assert_msg(spawn("build-1", "task", argv, false, 0, &err) == 0, "%s", err.msg);
    wait_exit("build-1", "task");

    ctr_delete("build-1");
    ck_assert_int_eq(ctr_status("build-1"), RT_CONTAINER_UNKNOWN);
    ck_assert_uint_eq(ctr_count(), 0);
    ck_assert_int_eq(called("HcsShutDownComputeSystem"), 1);
    ck_assert_int_eq(called("HcsCloseComputeSystem"), 1);
    /* Deleting what is gone is success. */
    ctr_delete("build-1");
}
END_TEST

START_TEST(a_process_that_cannot_start_leaves_no_record)
{
    struct err err = {0};
    ctr_up("nostart");
    char *argv[] = {"prog.exe", "wait", NULL};
    char *bad_env[] = {"=oops", NULL};
    struct rt_proc_spec spec = {.id = "p", .path = argv[0], .argv = argv, .env = bad_env};
    struct rt_proc_status st;
    ck_assert_int_eq(drv->proc_spawn(ctx, "nostart", ctr_dir("nostart"), &spec, &st, &err),
                     -EINVAL);
    spec.env = NULL;
    spec.dir = "/a/../b";
    ck_assert_int_eq(drv->proc_spawn(ctx, "nostart", ctr_dir("nostart"), &spec, &st, &err),
                     -EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, ".."));
    ck_assert_int_eq(drv->proc_status(ctx, "nostart", ctr_dir("nostart"), "p", &st, &err), -ENOENT);
    ck_assert_int_eq(called("HcsCreateProcess"), 0);
    ck_assert_int_eq(spawn("nosuch", "p", argv, false, 0, &err), -ERR_UNAVAILABLE);
    ck_assert_int_eq(spawn("nostart", "..", argv, false, 0, &err), -EINVAL);
    ctr_delete("nostart");
    ck_assert_int_eq(spawn("nostart", "p", argv, false, 0, &err), -ERR_UNAVAILABLE);
}
END_TEST

START_TEST(a_container_that_dies_is_reported_stopped)
{
    struct err err = {0};
    /* Long enough for the spawn below to come first even on a loaded machine. */
    SetEnvironmentVariableA("BERTH_HCS_DOUBLE_FAIL", "die-after-ms=1000");
    ctr_up("dies");
    char *argv[] = {"prog.exe", "wait", NULL};
    ck_assert_int_eq(spawn("dies", "w", argv, false, 0, &err), 0);
    struct rt_proc_status st = wait_exit("dies", "w");
    ck_assert(st.exited);
    for (int i = 0; i < 500 && ctr_status("dies") != RT_CONTAINER_STOPPED; i++)
        Sleep(10);
    ck_assert_int_eq(ctr_status("dies"), RT_CONTAINER_STOPPED);
    ck_assert_int_eq(spawn("dies", "late", argv, false, 0, &err), -ERR_UNAVAILABLE);
    ck_assert_ptr_nonnull(strstr(err.msg, "not running"));
    ctr_delete("dies");
}
END_TEST

START_TEST(signals_end_processes_with_posix_codes)
{
    struct err err = {0};
    ctr_up("sig");
    char *waits[] = {"prog.exe", "wait", NULL};
    char *stubborn[] = {"prog.exe", "ignore-signals", "wait", NULL};
    ck_assert_int_eq(spawn("sig", "term", waits, false, 0, &err), 0);
    ck_assert_int_eq(spawn("sig", "kill", stubborn, false, 0, &err), 0);
    ck_assert_msg(drv->proc_signal(ctx, "sig", ctr_dir("sig"), "term", 15, &err) == 0, "%s",
                  err.msg);
    struct rt_proc_status st = wait_exit("sig", "term");
    ck_assert_int_eq(st.exit_code, 128 + 15);
    ck_assert_int_eq(st.signal, 15);
    /* A running process cannot be removed. */
    ck_assert_int_eq(drv->proc_remove(ctx, "sig", ctr_dir("sig"), "kill", &err), -ERR_CONFLICT);
    /* TERM is acknowledged and ignored; KILL is HcsTerminateProcess. */
    ck_assert_int_eq(drv->proc_signal(ctx, "sig", ctr_dir("sig"), "kill", 15, &err), 0);
    ck_assert_int_eq(drv->proc_signal(ctx, "sig", ctr_dir("sig"), "kill", 9, &err), 0);
    st = wait_exit("sig", "kill");
    ck_assert_int_eq(st.exit_code, 137);
    ck_assert_int_eq(st.signal, 9);
    ck_assert_int_eq(drv->proc_signal(ctx, "sig", ctr_dir("sig"), "kill", 9, &err), -ESRCH);
    ck_assert_int_eq(drv->proc_signal(ctx, "sig", ctr_dir("sig"), "none", 9, &err), -ENOENT);
    /* A signal Windows has no counterpart of. */
    ck_assert_int_eq(drv->proc_signal(ctx, "sig", ctr_dir("sig"), "term", 10, &err), -ENOTSUP);
    ctr_delete("sig");
}
END_TEST

START_TEST(stdin_reaches_the_process_and_closes)
{
    struct err err = {0};
    ctr_up("in");
    char *argv[] = {"prog.exe", "echo", NULL};
    ck_assert_int_eq(spawn("in", "cat", argv, true, 0, &err), 0);
    int fd = drv->proc_stdin_open(ctx, "in", ctr_dir("in"), "cat", &err);
    ck_assert_msg(fd >= 0, "%s", err.msg);
    ck_assert_int_eq(_write(fd, "ping\n", 5), 5);
    _close(fd);
    wait_output("in", "cat", "ping\n");
    ck_assert_int_eq(drv->proc_stdin_close(ctx, "in", ctr_dir("in"), "cat", &err), 0);
    struct rt_proc_status st = wait_exit("in", "cat");
    ck_assert_int_eq(st.exit_code, 0);
    /* Without "stdin", there is none to open. */
    char *quiet[] = {"prog.exe", "exit", "0", NULL};
    ck_assert_int_eq(spawn("in", "q", quiet, false, 0, &err), 0);
    ck_assert_int_eq(drv->proc_stdin_open(ctx, "in", ctr_dir("in"), "q", &err), -ENOENT);
    ctr_delete("in");
}
END_TEST

START_TEST(output_past_the_cap_kills_and_keeps_the_first_bytes)
{
    struct err err = {0};
    ctr_up("cap");
    char *argv[] = {"prog.exe", "outn", "5000", "wait", NULL};
    ck_assert_int_eq(spawn("cap", "loud", argv, false, 1000, &err), 0);
    struct rt_proc_status st = wait_exit("cap", "loud");
    ck_assert_int_eq(st.exit_code, 137);
    ck_assert(st.output_truncated);
    char *out = output("cap", "loud", 0);
    ck_assert_uint_eq(strlen(out), 1000);
    free(out);
    ctr_delete("cap");
}
END_TEST

START_TEST(two_tasks_named_task_run_at_once)
{
    struct err err = {0};
    ctr_up("a");
    ctr_up("b");
    char *one[] = {"prog.exe", "out", "from a", "sleep", "50", NULL};
    char *two[] = {"prog.exe", "out", "from b", "sleep", "50", NULL};
    ck_assert_int_eq(spawn("a", "task", one, true, 0, &err), 0);
    ck_assert_int_eq(spawn("b", "task", two, true, 0, &err), 0);
    wait_exit("a", "task");
    wait_exit("b", "task");
    char *oa = output("a", "task", 0), *ob = output("b", "task", 0);
    ck_assert_str_eq(oa, "from a");
    ck_assert_str_eq(ob, "from b");
    free(oa);
    free(ob);
    ctr_delete("a");
    ctr_delete("b");
}
END_TEST

/* ---- hyperv ---- */

static uint64_t fake_avail_mb;

static int
fake_commit(void *arg, struct hcs_commit_info *out, struct err *err)
{
    (void)arg;
    (void)err;
    out->page_size = 4096;
    out->commit_limit = (16384ull << 20) / 4096;
    out->commit_total = out->commit_limit - (fake_avail_mb << 20) / 4096;
    return 0;
}

START_TEST(hyperv_container_boots_a_vm_sized_from_its_limit)
{
    struct err err = {0};
    fake_avail_mb = 8192;
    hcs_driver_set_commit_reader(ctx, fake_commit, NULL);
    ck_assert_msg(ctr_create("hv", "hyperv", 256ull << 20, &err) == 0, "%s", err.msg);
    /* The VM first: the task's 256 MB plus the guest's 256, two processors. */
    json_object *vm = recorded("HcsCreateComputeSystem", 1);
    ck_assert_int_eq(json_int_at(vm, "VirtualMachine.ComputeTopology.Memory.SizeInMB"), 512);
    ck_assert_int_eq(json_int_at(vm, "VirtualMachine.ComputeTopology.Processor.Count"), 2);
    json_object_put(vm);
    json_object *ctr = recorded("HcsCreateComputeSystem", 2);
    ck_assert_ptr_nonnull(json_str_at(ctr, "HostingSystemId"));
    ck_assert_ptr_nonnull(strstr(json_str_at(ctr, "HostingSystemId"), "-vm"));
    ck_assert_int_eq(json_int_at(ctr, "HostedSystem.Container.Memory.SizeInMB"), 256);
    json_object_put(ctr);
    /* Two layers as VSMB shares, the scratch disk, their union. */
    ck_assert_int_eq(called("HcsModifyComputeSystem"), 4);
    /* The VM's scratch is the template's copy, and the VM may open both disks. */
    char copy[MAX_PATH * 3];
    snprintf(copy, sizeof(copy), "%s\\c-hv\\vm\\sandbox.vhdx", work);
    ck_assert(GetFileAttributesA(copy) != INVALID_FILE_ATTRIBUTES);
    ck_assert_int_eq(called("HcsGrantVmAccess"), 2);
    json_object *g = recorded("HcsGrantVmAccess", 1);
    ck_assert_str_eq(json_str_at(g, "FilePath"), copy);
    ck_assert_ptr_nonnull(strstr(json_str_at(g, "VmId"), "-vm"));
    json_object_put(g);
    g = recorded("HcsGrantVmAccess", 2);
    snprintf(copy, sizeof(copy), "%s\\c-hv\\sandbox.vhdx", work);
    ck_assert_str_eq(json_str_at(g, "FilePath"), copy);
    json_object_put(g);
    char *argv[] = {"prog.exe", "out", "in a vm", NULL};
    ck_assert_int_eq(spawn("hv", "task", argv, false, 0, &err), 0);
    wait_exit("hv", "task");
    char *out = output("hv", "task", 0);
    ck_assert_str_eq(out, "in a vm");
    free(out);
    ctr_delete("hv");
    ck_assert_int_eq(called("HcsTerminateComputeSystem"), 2);
}
END_TEST

START_TEST(hyperv_past_the_hosts_commit_is_507_with_the_numbers)
{
    struct err err = {0};
    fake_avail_mb = 900;
    hcs_driver_set_commit_reader(ctx, fake_commit, NULL);
    ck_assert_int_eq(ctr_create("big", "hyperv", 1024ull << 20, &err), -ENOSPC);
    /* The task's 1024 MB + 256 for the guest, 160 + 1280/64 for the host's side. */
    ck_assert_str_eq(err.msg, "not enough memory commit for a 1280 MB utility vm (+ 180 MB "
                              "overhead): the host has 900 MB available (CommitLimit 16384 MB - "
                              "CommitTotal 15484 MB), 0 MB of it promised to vms still starting");
    /* Nothing was made, nothing is kept. */
    ck_assert_int_eq(called("HcsCreateComputeSystem"), 0);
    ck_assert_uint_eq(ctr_count(), 0);
    /* A process-isolated container does not need the commit. */
    ctr_up("small");
    ctr_delete("small");
}
END_TEST

START_TEST(hyperv_on_a_host_without_it_is_a_conflict)
{
    drv_close();
    SetEnvironmentVariableA("BERTH_HCS_DOUBLE_FAIL", "no-hyperv");
    drv_open();
    struct err err = {0};
    ck_assert_int_eq(drv->probe(ctx, &err), 0); /* process isolation works */
    struct hcs_caps caps;
    hcs_driver_caps(ctx, &caps);
    ck_assert(caps.process_usable);
    ck_assert(!caps.hyperv_usable);
    ck_assert_int_eq(drv->isolation_usable(ctx, "process", &err), 0);
    ck_assert_int_eq(drv->isolation_usable(ctx, "hyperv", &err), -ERR_CONFLICT);
    ck_assert_ptr_nonnull(strstr(err.msg, "Hyper-V is not available on this host ("));
    ck_assert_int_eq(ctr_create("hv", "hyperv", 0, &err), -ERR_CONFLICT);
    ck_assert_msg(strstr(err.msg, "Hyper-V is not available on this host (") &&
                      strstr(err.msg, "catastrophic failure"),
                  "%s", err.msg);
    ck_assert_int_eq(called("HcsCreateComputeSystem"), 0);
    ctr_up("argon");
    ctr_delete("argon");
}
END_TEST

START_TEST(a_start_that_fails_is_undone)
{
    struct err err = {0};
    fake_avail_mb = 8192;
    hcs_driver_set_commit_reader(ctx, fake_commit, NULL);
    /* HCS itself refuses the VM's memory (the commit moved since admission). */
    SetEnvironmentVariableA("BERTH_HCS_DOUBLE_FAIL", "commit-limit");
    ck_assert_int_eq(ctr_create("hv", "hyperv", 0, &err), -ENOSPC);
    ck_assert_msg(strstr(err.msg, "paging file is too small"), "%s", err.msg);
    ck_assert_int_eq(called("HcsTerminateComputeSystem"), 1);
    ck_assert_int_eq(called("HcsCloseComputeSystem"), 1);
    ck_assert_uint_eq(ctr_count(), 0);
    SetEnvironmentVariableA("BERTH_HCS_DOUBLE_FAIL", NULL);
    /* The promise was released: a VM of the whole remaining commit fits. */
    fake_avail_mb = 1024 + 176 + 1;
    ck_assert_msg(ctr_create("hv", "hyperv", 0, &err) == 0, "%s", err.msg);
    ctr_delete("hv");
    /* A document the builder refuses (no scratch volume) makes nothing either. */
    char *layers[] = {BASE_LAYER, NULL};
    struct rt_container_spec spec = {
        .handle = "bad", .dir = ctr_dir("bad"), .layers = layers, .scratch = "C:\\not-a-volume"};
    ck_assert_int_eq(drv->container_create(ctx, &spec, &err), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "not-a-volume"));
    spec.layers = NULL;
    ck_assert_int_eq(drv->container_create(ctx, &spec, &err), -EINVAL);
    spec.scratch = NULL;
    ck_assert_int_eq(drv->container_create(ctx, &spec, &err), -EINVAL);
    ck_assert_msg(strstr(err.msg, "none given"), "%s", err.msg);
    ck_assert_uint_eq(ctr_count(), 0);
}
END_TEST

START_TEST(a_raw_rootfs_is_the_containers_one_layer)
{
    struct err err = {0};
    /* What the daemon hands on for "rootfs": "raw:///C%3A%5C...": the normal form. */
    char norm[256];
    ck_assert_int_eq(
        drv->rootfs_normalise("/c:/ProgramData/berth/snapshots/base/", norm, sizeof(norm), &err),
        0);
    ck_assert_str_eq(norm, BASE_LAYER);
    ck_assert_int_eq(drv->rootfs_normalise("/tmp/rootfs", norm, sizeof(norm), &err), -EINVAL);
    struct rt_container_spec spec = {
        .handle = "raw", .dir = ctr_dir("raw"), .rootfs = BASE_LAYER, .scratch = VOLUME};
    ck_assert_msg(drv->container_create(ctx, &spec, &err) == 0, "%s", err.msg);
    json_object *doc = recorded("HcsCreateComputeSystem", 1);
    json_object *layers = json_object_object_get(
        json_object_object_get(json_object_object_get(doc, "Container"), "Storage"), "Layers");
    ck_assert_int_eq(json_object_array_length(layers), 1);
    ck_assert_str_eq(json_object_get_string(
                         json_object_object_get(json_object_array_get_idx(layers, 0), "Path")),
                     BASE_LAYER);
    json_object_put(doc);
    ctr_delete("raw");
    /* Without the scratch the daemon mounts, it is refused by name. */
    spec.scratch = NULL;
    ck_assert_int_eq(drv->container_create(ctx, &spec, &err), -ENOTSUP);
    ck_assert_msg(strstr(err.msg, "a mounted scratch volume") &&
                      strstr(err.msg, "no writable layer"),
                  "%s", err.msg);
    spec.isolation = "hyperv";
    ck_assert_int_eq(drv->container_create(ctx, &spec, &err), -ENOTSUP);
    ck_assert_msg(strstr(err.msg, "a scratch .vhdx"), "%s", err.msg);
    ck_assert_int_eq(called("HcsCreateComputeSystem"), 1);
    ck_assert_uint_eq(ctr_count(), 0);
}
END_TEST

/* The daemon's layer ids (store/wcstorage.h: of the chain IDs) are the document's. */
START_TEST(the_daemons_layer_ids_name_the_layers)
{
    struct err err = {0};
    char *layers[] = {TOP_LAYER, BASE_LAYER, NULL};
    char *ids[] = {"aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee", "11111111-2222-4333-8444-555555555555",
                   NULL};
    struct rt_container_spec spec = {.handle = "ids",
                                     .dir = ctr_dir("ids"),
                                     .rootfs = VOLUME,
                                     .layers = layers,
                                     .layer_ids = ids,
                                     .scratch = VOLUME};
    ck_assert_msg(drv->container_create(ctx, &spec, &err) == 0, "%s", err.msg);
    json_object *doc = recorded("HcsCreateComputeSystem", 1);
    json_object *l = json_object_object_get(
        json_object_object_get(json_object_object_get(doc, "Container"), "Storage"), "Layers");
    ck_assert_int_eq(json_object_array_length(l), 2);
    for (int i = 0; i < 2; i++)
        ck_assert_str_eq(
            json_object_get_string(json_object_object_get(json_object_array_get_idx(l, i), "Id")),
            ids[i]);
    json_object_put(doc);
    ctr_delete("ids");
}
END_TEST

/* ---- restart ---- */

static void
record_plant(const char *handle, const char *sys_id)
{
    char path[MAX_PATH * 2], text[MAX_PATH * 3];
    snprintf(path, sizeof(path), "%s\\hcs\\%s", state_root, handle);
    snprintf(text, sizeof(text), "%s\n-\nprocess\n%s\n", sys_id, ctr_dir(handle));
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

START_TEST(a_restarted_driver_reattaches_its_containers_and_processes)
{
    struct err err = {0};
    ctr_up("keep");
    char *waits[] = {"prog.exe", "out", "before", "wait", NULL};
    char *slow[] = {"prog.exe", "sleep", "100", "out", "late", "exit", "4", NULL};
    ck_assert_int_eq(spawn("keep", "w", waits, false, 0, &err), 0);
    ck_assert_int_eq(spawn("keep", "s", slow, false, 0, &err), 0);
    wait_output("keep", "w", "before");
    /* The daemon goes away; its systems and processes stay. */
    drv_close();
    Sleep(300); /* "s" exits meanwhile, its output still in the pipe */
    record_plant("ghost", "berth-ghost-00000000");
    /* A spawn a dead daemon left half-done: its directory, no pid record. */
    char half[MAX_PATH * 2];
    snprintf(half, sizeof(half), "%s\\hcs-procs\\half", ctr_dir("keep"));
    ck_assert(CreateDirectoryA(half, NULL));
    drv_open();
    ck_assert_int_eq(called("HcsOpenComputeSystem"), 2);
    ck_assert_int_eq(ctr_status("keep"), RT_CONTAINER_RUNNING);
    ck_assert_int_eq(ctr_status("ghost"), RT_CONTAINER_STOPPED);
    ck_assert_uint_eq(ctr_count(), 2);
    struct rt_proc_status st;
    ck_assert_int_eq(drv->proc_status(ctx, "keep", ctr_dir("keep"), "w", &st, &err), 0);
    ck_assert(st.started && !st.exited);
    /* The one that ended while we were away: its output, and no invented exit code. */
    st = wait_exit("keep", "s");
    char *late = output("keep", "s", 0);
    ck_assert_str_eq(late, "late");
    free(late);
    ck_assert(st.exit_code == 4 || st.exit_code == 255);
    if (st.exit_code == 255)
        ck_assert_ptr_nonnull(strstr(st.error, "exit code is lost"));
    st = wait_exit("keep", "half");
    ck_assert_int_eq(st.exit_code, 127);
    ck_assert(!st.started);
    ck_assert_ptr_nonnull(strstr(st.error, "spawn was cut short"));
    /* The re-attached one is followed as before. */
    ck_assert_int_eq(drv->proc_signal(ctx, "keep", ctr_dir("keep"), "w", 9, &err), 0);
    st = wait_exit("keep", "w");
    ck_assert_int_eq(st.exit_code, 137);
    char *out = output("keep", "w", 0);
    ck_assert_str_eq(out, "before");
    free(out);
    /* What the daemon does not know any more is deleted through the list. */
    ctr_delete("ghost");
    ctr_delete("keep");
    ck_assert_uint_eq(ctr_count(), 0);
}
END_TEST

START_TEST(a_missing_computecore_makes_the_driver_unusable_not_absent)
{
    drv_close();
    env_set("BERTH_TEST_HCS_DLL", "C:\\nowhere\\computecore.dll");
    drv_open();
    struct err err = {0};
    ck_assert_int_eq(drv->probe(ctx, &err), -ERR_UNAVAILABLE);
    ck_assert_msg(strstr(err.msg, "computecore.dll"), "%s", err.msg);
    ck_assert_int_eq(ctr_create("x", NULL, 0, &err), -ERR_UNAVAILABLE);
}
END_TEST

static Suite *
driver_suite(void)
{
    Suite *s = suite_create("hcs_driver");
    TCase *run = tcase_create("process isolation");
    tcase_set_timeout(run, 120);
    tcase_add_checked_fixture(run, setup, teardown);
    tcase_add_test(run, container_runs_a_process_with_output_and_is_deleted);
    tcase_add_test(run, a_process_that_cannot_start_leaves_no_record);
    tcase_add_test(run, a_container_that_dies_is_reported_stopped);
    tcase_add_test(run, signals_end_processes_with_posix_codes);
    tcase_add_test(run, stdin_reaches_the_process_and_closes);
    tcase_add_test(run, output_past_the_cap_kills_and_keeps_the_first_bytes);
    tcase_add_test(run, two_tasks_named_task_run_at_once);
    tcase_add_test(run, a_raw_rootfs_is_the_containers_one_layer);
    tcase_add_test(run, the_daemons_layer_ids_name_the_layers);
    suite_add_tcase(s, run);
    TCase *hv = tcase_create("hyperv");
    tcase_set_timeout(hv, 120);
    tcase_add_checked_fixture(hv, setup, teardown);
    tcase_add_test(hv, hyperv_container_boots_a_vm_sized_from_its_limit);
    tcase_add_test(hv, hyperv_past_the_hosts_commit_is_507_with_the_numbers);
    tcase_add_test(hv, hyperv_on_a_host_without_it_is_a_conflict);
    tcase_add_test(hv, a_start_that_fails_is_undone);
    suite_add_tcase(s, hv);
    TCase *rs = tcase_create("restart");
    tcase_set_timeout(rs, 120);
    tcase_add_checked_fixture(rs, setup, teardown);
    tcase_add_test(rs, a_restarted_driver_reattaches_its_containers_and_processes);
    tcase_add_test(rs, a_missing_computecore_makes_the_driver_unusable_not_absent);
    suite_add_tcase(s, rs);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(driver_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
