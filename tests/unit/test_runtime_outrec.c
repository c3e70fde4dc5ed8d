/*
 * The output record (runtime/outrec.h) and its reader (outrec_read.h) on
 * files written here the way berth-init writes them: both streams come
 * back in the order written, cut into lines with their times; since,
 * until and tail pick whole lines; a torn, corrupted or unbacked entry
 * costs only itself and what follows, and bytes a process wrote are never
 * taken for an entry.
 */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/outrec.h"
#include "runtime/outrec_read.h"
#include "tests/unit/testutil.h"

struct files {
    char *dir;
    int dfd;
    int wfd[2], widx; /* the writer's */
    uint64_t off[2];
    struct outrec_log log; /* the reader's */
};

static void
files_open(struct files *f)
{
    memset(f, 0, sizeof(*f));
    f->dir = tu_tmpdir("outrec");
    f->dfd = open(f->dir, O_RDONLY | O_DIRECTORY);
    ck_assert_int_ge(f->dfd, 0);
    int fl = O_WRONLY | O_CREAT | O_APPEND;
    f->wfd[0] = openat(f->dfd, "stdout", fl, 0600);
    f->wfd[1] = openat(f->dfd, "stderr", fl, 0600);
    f->widx = openat(f->dfd, OUTREC_INDEX, fl, 0600);
    f->log.data_fd[0] = openat(f->dfd, "stdout", O_RDONLY);
    f->log.data_fd[1] = openat(f->dfd, "stderr", O_RDONLY);
    f->log.index_fd = openat(f->dfd, OUTREC_INDEX, O_RDONLY);
    ck_assert(f->wfd[0] >= 0 && f->wfd[1] >= 0 && f->widx >= 0 && f->log.index_fd >= 0);
}

static void
files_close(struct files *f)
{
    close(f->wfd[0]);
    close(f->wfd[1]);
    close(f->widx);
    close(f->log.data_fd[0]);
    close(f->log.data_fd[1]);
    close(f->log.index_fd);
    close(f->dfd);
    tu_rmtree(f->dir);
    free(f->dir);
}

/* One chunk as the init writes it: its bytes, then its entry. */
static void
put(struct files *f, int s, int64_t t, const char *data)
{
    size_t len = strlen(data);
    ck_assert_int_eq(write(f->wfd[s], data, len), (ssize_t)len);
    struct outrec r = {.stream = (uint8_t)s, .time_ns = t, .offset = f->off[s], .len = len};
    ck_assert_int_eq(outrec_append(f->widx, &r), 0);
    f->off[s] += len;
}

/* Reads everything a filter gives, as "<stream><time>|piece" items, "^" at line starts. */
static char *
read_all(struct files *f, struct outrec_pos *pos, const struct outrec_filter *flt, bool final,
         enum outrec_state *last)
{
    static char buf[256];
    struct outrec_piece pieces[4]; /* few, so the piece limit is crossed */
    char *out = calloc(1, 65536);
    size_t olen = 0;
    struct err err = {0};
    for (int rounds = 0; rounds < 10000; rounds++) {
        enum outrec_state st;
        int n = outrec_log_read(&f->log, pos, flt, final, buf, sizeof(buf), pieces, 4, &st, &err);
        ck_assert_msg(n >= 0, "%s", err.msg);
        for (int i = 0; i < n; i++)
            olen += (size_t)snprintf(out + olen, 65536 - olen, "%s%c%lld|%.*s",
                                     pieces[i].line_start ? "^" : "", pieces[i].stream ? 'e' : 'o',
                                     (long long)pieces[i].time_ns, (int)pieces[i].len,
                                     buf + pieces[i].at);
        if (st != OUTREC_MORE) {
            if (last)
                *last = st;
            return out;
        }
    }
    ck_abort_msg("the read never ends");
    return NULL;
}

static const struct outrec_filter all = {.streams = 3};

START_TEST(entries_round_trip_and_every_damaged_byte_is_refused)
{
    struct outrec r = {.stream = 1, .time_ns = 1700000000123456789, .offset = 42, .len = 7}, back;
    unsigned char b[OUTREC_SIZE];
    outrec_encode(&r, b);
    ck_assert_int_eq(outrec_decode(b, &back), 0);
    ck_assert_int_eq(back.stream, 1);
    ck_assert_int_eq(back.time_ns, r.time_ns);
    ck_assert_int_eq(back.offset, 42);
    ck_assert_int_eq(back.len, 7);
    for (int i = 0; i < OUTREC_SIZE; i++)
        for (int bit = 0; bit < 8; bit++) {
            unsigned char c[OUTREC_SIZE];
            memcpy(c, b, sizeof(c));
            c[i] ^= (unsigned char)(1u << bit);
            ck_assert_msg(outrec_decode(c, &back) < 0, "byte %d bit %d accepted", i, bit);
        }
    unsigned char zero[OUTREC_SIZE] = {0};
    ck_assert_int_lt(outrec_decode(zero, &back), 0);
    /* A stream past 1, or an empty chunk, is refused even with a right CRC. */
    struct outrec bad = r;
    bad.len = 0;
    outrec_encode(&bad, b);
    ck_assert_int_lt(outrec_decode(b, &back), 0);
    bad = r;
    bad.stream = 2;
    outrec_encode(&bad, b);
    ck_assert_int_lt(outrec_decode(b, &back), 0);
}
END_TEST

START_TEST(read_gives_both_streams_in_the_order_written_cut_into_lines)
{
    struct files f;
    files_open(&f);
    put(&f, 0, 10, "a1\na2\npart");
    put(&f, 1, 20, "e1\n");
    put(&f, 0, 30, "ial\n");
    put(&f, 1, 40, "e2");
    struct outrec_pos pos = {0};
    enum outrec_state st;
    char *out = read_all(&f, &pos, &all, false, &st);
    ck_assert_str_eq(out, "^o10|a1\n^o10|a2\n^o10|part^e20|e1\no10|ial\n^e40|e2");
    ck_assert_int_eq(st, OUTREC_END);
    free(out);
    /* More comes: the same position reads on from there. */
    put(&f, 1, 50, " more\nz\n");
    out = read_all(&f, &pos, &all, false, &st);
    ck_assert_str_eq(out, "e40| more\n^e50|z\n");
    free(out);
    /* One stream only. */
    struct outrec_filter err_only = {.streams = 2};
    memset(&pos, 0, sizeof(pos));
    out = read_all(&f, &pos, &err_only, false, NULL);
    ck_assert_str_eq(out, "^e20|e1\n^e40|e2e40| more\n^e50|z\n");
    free(out);
    files_close(&f);
}
END_TEST

START_TEST(output_that_looks_like_an_entry_is_only_output)
{
    struct files f;
    files_open(&f);
    /* The process writes a well-formed entry claiming 5 bytes of stderr. */
    struct outrec forged = {.stream = 1, .time_ns = 1, .offset = 0, .len = 5};
    char fake[OUTREC_SIZE + 1];
    outrec_encode(&forged, (unsigned char *)fake);
    fake[OUTREC_SIZE] = '\0';
    size_t flen = OUTREC_SIZE;
    ck_assert_int_eq(write(f.wfd[0], fake, flen), (ssize_t)flen);
    struct outrec r = {.stream = 0, .time_ns = 7, .offset = 0, .len = (uint32_t)flen};
    ck_assert_int_eq(outrec_append(f.widx, &r), 0);
    struct outrec_pos pos = {0};
    char buf[128];
    struct outrec_piece p[64];
    enum outrec_state st;
    struct err err = {0};
    int n = outrec_log_read(&f.log, &pos, &all, true, buf, sizeof(buf), p, 64, &st, &err);
    ck_assert_int_ge(n, 1);
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        ck_assert_int_eq(p[i].stream, 0);
        ck_assert_int_eq(p[i].time_ns, 7);
        ck_assert(memcmp(buf + p[i].at, fake + total, p[i].len) == 0);
        total += p[i].len;
    }
    ck_assert_int_eq(total, flen);
    ck_assert_int_eq(st, OUTREC_END);
    files_close(&f);
}
END_TEST

START_TEST(a_torn_last_entry_costs_only_itself)
{
    struct files f;
    files_open(&f);
    put(&f, 0, 10, "one\n");
    put(&f, 1, 20, "two\n");
    /* A crash mid-write: the bytes are there, their entry half written. */
    ck_assert_int_eq(write(f.wfd[0], "three\n", 6), 6);
    struct outrec r = {.stream = 0, .time_ns = 30, .offset = 4, .len = 6};
    unsigned char b[OUTREC_SIZE];
    outrec_encode(&r, b);
    ck_assert_int_eq(write(f.widx, b, 20), 20);
    struct outrec_pos pos = {0};
    char *out = read_all(&f, &pos, &all, false, NULL);
    ck_assert_str_eq(out, "^o10|one\n^e20|two\n");
    free(out);
    /* Once the writer is done, the unindexed rest comes with the last time. */
    out = read_all(&f, &pos, &all, true, NULL);
    ck_assert_str_eq(out, "^o20|three\n");
    free(out);
    files_close(&f);
}
END_TEST

START_TEST(a_corrupted_or_unbacked_entry_ends_the_index_there)
{
    struct files f;
    files_open(&f);
    put(&f, 0, 10, "a\n");
    put(&f, 1, 20, "b\n");
    put(&f, 0, 30, "c\n");
    put(&f, 1, 40, "d\n");
    /* Entry 2's CRC no longer matches. */
    unsigned char x = 0xff;
    int rw = openat(f.dfd, OUTREC_INDEX, O_WRONLY); /* pwrite ignores offsets with O_APPEND */
    ck_assert_int_eq(pwrite(rw, &x, 1, 2 * OUTREC_SIZE + 9), 1);
    close(rw);
    struct outrec_pos pos = {0};
    char *out = read_all(&f, &pos, &all, false, NULL);
    ck_assert_str_eq(out, "^o10|a\n^e20|b\n");
    free(out);
    /* Final: the rest of each file, stdout's then stderr's. */
    out = read_all(&f, &pos, &all, true, NULL);
    ck_assert_str_eq(out, "^o20|c\n^e20|d\n");
    free(out);
    files_close(&f);

    /* An entry that names bytes the file does not have, or that skips some. */
    files_open(&f);
    put(&f, 0, 10, "a\n");
    struct outrec r = {.stream = 0, .time_ns = 20, .offset = 2, .len = 50};
    ck_assert_int_eq(outrec_append(f.widx, &r), 0);
    memset(&pos, 0, sizeof(pos));
    out = read_all(&f, &pos, &all, false, NULL);
    ck_assert_str_eq(out, "^o10|a\n");
    free(out);
    files_close(&f);
    files_open(&f);
    ck_assert_int_eq(write(f.wfd[0], "xxyy", 4), 4);
    r = (struct outrec){.stream = 0, .time_ns = 20, .offset = 2, .len = 2};
    ck_assert_int_eq(outrec_append(f.widx, &r), 0);
    memset(&pos, 0, sizeof(pos));
    out = read_all(&f, &pos, &all, false, NULL);
    ck_assert_str_eq(out, "");
    free(out);
    files_close(&f);
}
END_TEST

START_TEST(since_and_until_pick_whole_lines_by_when_they_began)
{
    struct files f;
    files_open(&f);
    put(&f, 0, 10, "old\nspan");
    put(&f, 0, 20, "s\n");
    put(&f, 1, 30, "new\n");
    put(&f, 0, 40, "later\n");
    put(&f, 0, 50, "last\n");
    struct outrec_filter flt = {.streams = 3, .since_ns = 15};
    struct outrec_pos pos = {0};
    char *out = read_all(&f, &pos, &flt, false, NULL);
    /* "spans" began at 10: left out whole, its second half too. */
    ck_assert_str_eq(out, "^e30|new\n^o40|later\n^o50|last\n");
    free(out);
    flt = (struct outrec_filter){.streams = 3, .until_ns = 30};
    memset(&pos, 0, sizeof(pos));
    enum outrec_state st;
    out = read_all(&f, &pos, &flt, false, &st);
    ck_assert_str_eq(out, "^o10|old\n^o10|spano10|s\n^e30|new\n");
    ck_assert_int_eq(st, OUTREC_UNTIL);
    free(out);
    files_close(&f);
}
END_TEST

START_TEST(tail_gives_the_last_lines_of_the_streams_asked_for)
{
    struct files f;
    files_open(&f);
    put(&f, 0, 10, "o1\no2\no");
    put(&f, 1, 20, "e1\ne2\n");
    put(&f, 0, 30, "3\no4\n");
    put(&f, 1, 40, "e3");
    struct outrec_pos pos;
    struct err err = {0};
    ck_assert_int_eq(outrec_log_tail(&f.log, &all, 3, &pos, &err), 0);
    /* Lines are ordered by where they begin: o1 o2 o3 (chunk 1), e1 e2,
     * o4, e3. The last three are e2, o4, e3; o3's second half, which
     * came after e2, belongs to a line left out. */
    char *out = read_all(&f, &pos, &all, false, NULL);
    ck_assert_str_eq(out, "^e20|e2\n^o30|o4\n^e40|e3");
    free(out);
    ck_assert_int_eq(outrec_log_tail(&f.log, &all, 5, &pos, &err), 0);
    out = read_all(&f, &pos, &all, false, NULL);
    ck_assert_str_eq(out, "^o10|o^e20|e1\n^e20|e2\no10|3\n^o30|o4\n^e40|e3");
    free(out);
    struct outrec_filter err_only = {.streams = 2};
    ck_assert_int_eq(outrec_log_tail(&f.log, &err_only, 2, &pos, &err), 0);
    out = read_all(&f, &pos, &err_only, false, NULL);
    ck_assert_str_eq(out, "^e20|e2\n^e40|e3");
    free(out);
    /* More than there are: all of them; 0: none, then what comes. */
    ck_assert_int_eq(outrec_log_tail(&f.log, &all, 100, &pos, &err), 0);
    out = read_all(&f, &pos, &all, false, NULL);
    ck_assert(strncmp(out, "^o10|o1\n", 8) == 0);
    free(out);
    ck_assert_int_eq(outrec_log_tail(&f.log, &all, 0, &pos, &err), 0);
    out = read_all(&f, &pos, &all, false, NULL);
    ck_assert_str_eq(out, "");
    free(out);
    put(&f, 1, 50, "x\nnext\n");
    out = read_all(&f, &pos, &all, false, NULL);
    /* "e3x" began before the tail's position: left out. */
    ck_assert_str_eq(out, "^e50|next\n");
    free(out);
    files_close(&f);
}
END_TEST

START_TEST(the_init_s_writer_for_a_failed_spawn_indexes_its_message)
{
    struct files f;
    files_open(&f);
    put(&f, 1, 10, "before\n");
    ck_assert_int_eq(outrec_write_output(f.dfd, 1, "failed\n", 7), 0);
    struct outrec_pos pos = {0};
    char *out = read_all(&f, &pos, &all, false, NULL);
    ck_assert_msg(strncmp(out, "^e10|before\n^e", 14) == 0 && strstr(out, "|failed\n"), "%s", out);
    free(out);
    files_close(&f);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("runtime_outrec");
    TCase *tc = tcase_create("outrec");
    tcase_add_test(tc, entries_round_trip_and_every_damaged_byte_is_refused);
    tcase_add_test(tc, read_gives_both_streams_in_the_order_written_cut_into_lines);
    tcase_add_test(tc, output_that_looks_like_an_entry_is_only_output);
    tcase_add_test(tc, a_torn_last_entry_costs_only_itself);
    tcase_add_test(tc, a_corrupted_or_unbacked_entry_ends_the_index_there);
    tcase_add_test(tc, since_and_until_pick_whole_lines_by_when_they_began);
    tcase_add_test(tc, tail_gives_the_last_lines_of_the_streams_asked_for);
    tcase_add_test(tc, the_init_s_writer_for_a_failed_spawn_indexes_its_message);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
