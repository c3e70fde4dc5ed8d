/*
 * Fuzzes layer extraction (store/unpack.h, layer_unpack) with whole layer
 * blobs: plain, gzip or zstd tar streams, as an image layer or a volume
 * tar-in brings them. The input length picks the options: bit 0 allows
 * device nodes, bit 1 is the volume mode (no whiteouts).
 *
 * Each input is unpacked into a fresh root in a sandbox:
 *   <sandbox>/root/            the target, made before and removed after
 *   <sandbox>/lower/           the lower layer: up -> ../outside, d/f
 *   <sandbox>/outside/secret   a sentinel: "secret", mode 0600, one link
 * and after each one it checks that nothing exists outside the root: the
 * sandbox, the lower layer and the sentinel are as they were, the
 * working directory and its entries are as they were, and, where the
 * target could give itself a private /tmp, /tmp holds only the sandbox.
 * chdir and fchdir abort: the process has one working directory, shared
 * by every pool thread, so extraction must never move it (issue 8,
 * hole 1). A refusal must come with an error code and a message.
 *
 * The private /tmp is a tmpfs mounted in a mount namespace of the
 * target's own, which needs root, and TMPDIR (where libFuzzer keeps its
 * merge files), the working directory and every path argument outside
 * /tmp; scripts/fuzz.sh arranges that. Otherwise the sandbox goes under
 * $TMPDIR and /tmp is not watched.
 */
#include "fuzz/fuzz.h"

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <sched.h>
#include <stdbool.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/log.h"
#include "store/digest.h"
#include "store/unpack.h"

#define SECRET "secret"

static char sandbox[PATH_MAX];
static char root[PATH_MAX + 8];
static char lower[PATH_MAX + 8];
static char outside[PATH_MAX + 16];
static bool private_tmp;
static bool verbose; /* BERTH_FUZZ_VERBOSE: say what became of each input */
static char cwd[PATH_MAX];
static char *cwd_names; /* the working directory's entries, sorted, '\n'-separated */

/* Interposed: nothing in the process may move the working directory. */
int
chdir(const char *path)
{
    FUZZ_CHECK(0, "chdir(\"%.200s\") called: the working directory is the whole process's", path);
    return (int)syscall(SYS_chdir, path);
}

int
fchdir(int fd)
{
    FUZZ_CHECK(0, "fchdir(%d) called: the working directory is the whole process's", fd);
    return (int)syscall(SYS_fchdir, fd);
}

static int
names_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names in dir, sorted and joined with '\n' (the caller frees). */
static char *
dir_names(const char *dir)
{
    DIR *d = opendir(dir);
    FUZZ_CHECK(d, "opendir %s: %s", dir, strerror(errno));
    char **v = NULL;
    size_t n = 0, total = 1;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        v = realloc(v, (n + 1) * sizeof(*v));
        FUZZ_CHECK(v && (v[n] = strdup(de->d_name)), "out of memory");
        total += strlen(v[n++]) + 1;
    }
    closedir(d);
    if (n)
        qsort(v, n, sizeof(*v), names_cmp);
    char *out = calloc(1, total);
    FUZZ_CHECK(out, "out of memory");
    for (size_t i = 0; i < n; i++) {
        strcat(out, v[i]);
        strcat(out, "\n");
        free(v[i]);
    }
    free(v);
    return out;
}

static int
rm_cb(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

static void
rm_tree(const char *path)
{
    nftw(path, rm_cb, 64, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

static void
write_file(const char *path, const char *content, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    FUZZ_CHECK(fd >= 0, "create %s: %s", path, strerror(errno));
    FUZZ_CHECK(write(fd, content, strlen(content)) == (ssize_t)strlen(content), "write %s", path);
    close(fd);
}

static bool
under_tmp(const char *path)
{
    return strncmp(path, "/tmp", 4) == 0 && (path[4] == '\0' || path[4] == '/');
}

/*
 * A tmpfs on /tmp that only this process (and its children) sees; not
 * when anything libFuzzer is to read or write is there: TMPDIR, the
 * working directory, or a path among the arguments.
 */
static bool
private_tmp_mount(int argc, char **argv)
{
    const char *t = getenv("TMPDIR");
    char here[PATH_MAX];
    if (geteuid() != 0 || !t || under_tmp(t) || !getcwd(here, sizeof(here)) || under_tmp(here))
        return false;
    for (int i = 1; i < argc; i++) {
        const char *eq = strchr(argv[i], '=');
        if (under_tmp(argv[i]) || (argv[i][0] == '-' && eq && under_tmp(eq + 1))) {
            fprintf(stderr, "fuzz_unpack: %s is under /tmp; /tmp is not watched\n", argv[i]);
            return false;
        }
    }
    if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
        mount("berth-fuzz", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "size=256m,mode=1777") < 0) {
        fprintf(stderr, "fuzz_unpack: no private /tmp (%s); /tmp is not watched\n",
                strerror(errno));
        return false;
    }
    return true;
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
    verbose = getenv("BERTH_FUZZ_VERBOSE") != NULL;
    log_setup(verbose ? LOG_DEBUG : LOG_ERROR, LOG_FORMAT_TEXT);
    private_tmp = private_tmp_mount(*argc, *argv);
    if (private_tmp) {
        snprintf(sandbox, sizeof(sandbox), "/tmp/berth-fuzz-unpack");
        FUZZ_CHECK(mkdir(sandbox, 0700) == 0, "mkdir %s: %s", sandbox, strerror(errno));
    } else {
        const char *t = getenv("TMPDIR");
        snprintf(sandbox, sizeof(sandbox), "%s/berth-fuzz-unpack.XXXXXX", t && *t ? t : "/tmp");
        FUZZ_CHECK(mkdtemp(sandbox), "mkdtemp %s: %s", sandbox, strerror(errno));
        fprintf(stderr, "fuzz_unpack: sandbox %s, /tmp not watched\n", sandbox);
    }
    snprintf(root, sizeof(root), "%s/root", sandbox);
    snprintf(lower, sizeof(lower), "%s/lower", sandbox);
    snprintf(outside, sizeof(outside), "%s/outside", sandbox);
    char p[PATH_MAX + 32];
    FUZZ_CHECK(mkdir(outside, 0755) == 0 && mkdir(lower, 0755) == 0, "mkdir in the sandbox");
    snprintf(p, sizeof(p), "%s/" SECRET, outside);
    write_file(p, "secret", 0600);
    snprintf(p, sizeof(p), "%s/up", lower);
    FUZZ_CHECK(symlink("../outside", p) == 0, "symlink %s", p);
    snprintf(p, sizeof(p), "%s/d", lower);
    FUZZ_CHECK(mkdir(p, 0755) == 0, "mkdir %s", p);
    snprintf(p, sizeof(p), "%s/d/f", lower);
    write_file(p, "lower", 0644);

    FUZZ_CHECK(getcwd(cwd, sizeof(cwd)), "getcwd: %s", strerror(errno));
    cwd_names = dir_names(".");
    return 0;
}

struct input {
    const uint8_t *data;
    size_t size, off;
};

/* Gives the blob in uneven pieces, as a socket or a pipe would. */
static ssize_t
input_read(void *ctx, void *buf, size_t len)
{
    struct input *in = ctx;
    size_t n = in->size - in->off;
    size_t piece = 1 + (in->off * 7919) % 65521;
    if (n > len)
        n = len;
    if (n > piece)
        n = piece;
    memcpy(buf, in->data + in->off, n);
    in->off += n;
    return (ssize_t)n;
}

static void
check_file(const char *path, const char *content, mode_t mode, nlink_t links)
{
    struct stat st;
    FUZZ_CHECK(lstat(path, &st) == 0, "%s is gone", path);
    FUZZ_CHECK(S_ISREG(st.st_mode) && (st.st_mode & 07777) == mode && st.st_nlink == links &&
                   st.st_uid == geteuid() && st.st_size == (off_t)strlen(content),
               "%s changed: mode %o, %lu links, uid %u, %lld bytes", path, st.st_mode,
               (unsigned long)st.st_nlink, st.st_uid, (long long)st.st_size);
    char buf[64] = {0};
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    FUZZ_CHECK(fd >= 0 && read(fd, buf, sizeof(buf) - 1) == (ssize_t)strlen(content) &&
                   strcmp(buf, content) == 0,
               "%s: content changed", path);
    close(fd);
}

static void
check_names(const char *dir, const char *want)
{
    char *have = dir_names(dir);
    FUZZ_CHECK(strcmp(have, want) == 0, "%s holds:\n%swant:\n%s", dir, have, want);
    free(have);
}

/* Nothing outside the root changed. */
static void
check_outside(void)
{
    char p[PATH_MAX + 32];
    check_names(sandbox, "lower\noutside\nroot\n");
    check_names(outside, SECRET "\n");
    snprintf(p, sizeof(p), "%s/" SECRET, outside);
    check_file(p, "secret", 0600, 1);
    check_names(lower, "d\nup\n");
    snprintf(p, sizeof(p), "%s/up", lower);
    char link[64] = {0};
    FUZZ_CHECK(readlink(p, link, sizeof(link) - 1) == 10 && strcmp(link, "../outside") == 0,
               "lower/up changed");
    snprintf(p, sizeof(p), "%s/d", lower);
    check_names(p, "f\n");
    snprintf(p, sizeof(p), "%s/d/f", lower);
    check_file(p, "lower", 0644, 1);

    char now[PATH_MAX];
    FUZZ_CHECK(getcwd(now, sizeof(now)) && strcmp(now, cwd) == 0, "the working directory moved");
    check_names(".", cwd_names);
    if (private_tmp)
        check_names("/tmp", "berth-fuzz-unpack\n");
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    FUZZ_CHECK(mkdir(root, 0755) == 0, "mkdir %s: %s", root, strerror(errno));
    const char *lowers[] = {lower, NULL};
    struct input in = {.data = data, .size = size};
    struct unpack_input uin = {.read = input_read, .ctx = &in};
    struct unpack_opts opts = {
        .target_dir = root,
        .lower_dirs = lowers,
        .allow_device_nodes = size & 1,
        .no_whiteouts = (size >> 1) & 1,
    };
    struct unpack_result res;
    memset(&res, 0x5a, sizeof(res));
    struct err err = {0};
    int r = layer_unpack(&uin, &opts, &res, &err);
    if (r == 0) {
        FUZZ_CHECK(err.code == 0, "success with an error set: %s", err.msg);
        FUZZ_CHECK(digest_valid(res.digest) && digest_valid(res.diff_id), "result digests");
        FUZZ_CHECK(res.size == size && in.off == size, "read %llu of %zu bytes",
                   (unsigned long long)res.size, size);
    } else {
        FUZZ_CHECK(r < 0 && err.code == -r && err.msg[0], "refusal %d without an error (%d %s)", r,
                   err.code, err.msg);
    }
    if (verbose)
        fprintf(stderr, "fuzz_unpack: %zu bytes: %s\n", size, r == 0 ? "unpacked" : err.msg);
    check_outside();

    rm_tree(root);
    struct stat st;
    FUZZ_CHECK(lstat(root, &st) < 0 && errno == ENOENT, "%s could not be removed", root);
    return 0;
}
