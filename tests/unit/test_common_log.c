/*
 * The log's writer thread (common/log_writer.c): a logger never waits on
 * a stderr that does not take its bytes, records come out whole and in
 * order, drops are counted and said, and a child forked without exec
 * writes its own records.
 */
#include <check.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"

static int saved_stderr = -1;
static int pipe_fds[2];

/* stderr becomes the write end of a new pipe. */
static void
stderr_to_pipe(void)
{
    ck_assert_int_eq(pipe(pipe_fds), 0);
    saved_stderr = dup(STDERR_FILENO);
    ck_assert_int_ge(dup2(pipe_fds[1], STDERR_FILENO), 0);
}

static void
stderr_back(void)
{
    dup2(saved_stderr, STDERR_FILENO);
    close(saved_stderr);
    close(pipe_fds[1]);
}

struct drain {
    char *buf;
    size_t len, cap;
};

static void *
drain_main(void *arg)
{
    struct drain *d = arg;
    for (;;) {
        if (d->len + 65536 > d->cap) {
            d->cap = d->cap ? d->cap * 2 : 1 << 20;
            d->buf = realloc(d->buf, d->cap);
        }
        ssize_t n = read(pipe_fds[0], d->buf + d->len, d->cap - d->len - 1);
        if (n <= 0)
            break;
        d->len += (size_t)n;
    }
    d->buf[d->len] = '\0';
    return NULL;
}

static double
mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

START_TEST(log_writer_never_waits_on_a_stderr_that_takes_nothing)
{
    stderr_to_pipe();
    /* Fill the pipe: from now on a write(2) to stderr would block. */
    int fl = fcntl(pipe_fds[1], F_GETFL);
    fcntl(pipe_fds[1], F_SETFL, fl | O_NONBLOCK);
    static const char filler[4096] = {'x'};
    size_t filled = 0;
    for (ssize_t n; (n = write(pipe_fds[1], filler, sizeof(filler))) > 0;)
        filled += (size_t)n;
    fcntl(pipe_fds[1], F_SETFL, fl);
    log_setup(LOG_INFO, LOG_FORMAT_TEXT);
    ck_assert_int_eq(log_writer_start(), 0);
    char pad[201];
    memset(pad, 'p', 200);
    pad[200] = '\0';
    double t0 = mono_s();
    for (int i = 0; i < 4000; i++) /* ~1 MiB of records: over the 256 KiB ring */
        log_info("record %d %s", i, pad);
    double took = mono_s() - t0;
    ck_assert_msg(took < 2.0, "4,000 records took %.3f s against a full stderr", took);

    struct drain d = {0};
    pthread_t t;
    pthread_create(&t, NULL, drain_main, &d);
    log_writer_stop(); /* writes what is queued, as the reader makes room */
    stderr_back();
    pthread_join(t, NULL);
    ck_assert_uint_ge(d.len, filled);
    const char *out = d.buf + filled;
    ck_assert_ptr_nonnull(strstr(out, "info  record 0 ppp"));
    ck_assert_ptr_nonnull(strstr(out, "records dropped: stderr did not keep up"));
    /* Every record whole, and those kept in order. */
    int last = -1, lines = 0;
    for (const char *p = out; *p; lines++) {
        const char *nl = strchr(p, '\n');
        ck_assert_ptr_nonnull(nl);
        ck_assert_msg(p[0] == '2' && p[4] == '-', "a broken line: %.60s", p);
        const char *r = strstr(p, " record ");
        if (r && r < nl) {
            int i = atoi(r + 8);
            ck_assert_int_gt(i, last);
            last = i;
            ck_assert_int_eq((int)(nl - (r + 8)), (int)(snprintf(NULL, 0, "%d", i) + 1 + 200));
        }
        p = nl + 1;
    }
    ck_assert_int_gt(lines, 100);
    free(d.buf);
}
END_TEST

START_TEST(log_records_are_written_directly_once_the_writer_stopped)
{
    stderr_to_pipe();
    log_setup(LOG_INFO, LOG_FORMAT_TEXT);
    ck_assert_int_eq(log_writer_start(), 0);
    log_info("queued");
    log_writer_stop();
    log_info("direct");
    stderr_back();
    struct drain d = {0};
    drain_main(&d);
    ck_assert_ptr_nonnull(strstr(d.buf, "info  queued\n"));
    ck_assert_ptr_nonnull(strstr(d.buf, "info  direct\n"));
    free(d.buf);
}
END_TEST

START_TEST(log_a_child_forked_without_exec_writes_its_own_records)
{
    stderr_to_pipe();
    log_setup(LOG_INFO, LOG_FORMAT_TEXT);
    ck_assert_int_eq(log_writer_start(), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        log_info("from the child"); /* no writer thread here: written at once */
        _exit(0);
    }
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    log_writer_stop();
    stderr_back();
    struct drain d = {0};
    drain_main(&d);
    ck_assert_ptr_nonnull(strstr(d.buf, "info  from the child\n"));
    free(d.buf);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("common_log");
    TCase *tc = tcase_create("log");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, log_writer_never_waits_on_a_stderr_that_takes_nothing);
    tcase_add_test(tc, log_records_are_written_directly_once_the_writer_stopped);
    tcase_add_test(tc, log_a_child_forked_without_exec_writes_its_own_records);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
