/*
 * Reading what the TEST DOUBLE of computecore.dll (tests/doubles/computecore/)
 * logged in its directory (BERTH_HCS_DOUBLE_DIR): calls.log, one line per
 * call ("<seq> <function> ..."), and each call's document as
 * "<seq>-<function>.json". For the suites that drive the double directly
 * (test_hcs_api.c) or through the driver (test_hcs_driver.c). Header-only
 * (static functions): each suite is one executable. Windows only; the
 * suite's thread.
 */
#ifndef BERTH_TESTS_WINDOWS_HCS_DOUBLE_LOG_H
#define BERTH_TESTS_WINDOWS_HCS_DOUBLE_LOG_H

#include <windows.h>

#include <stdio.h>
#include <string.h>

#include <json-c/json.h>

/* Reads dir's calls.log: how many calls of fn it has, and the sequence
 * number of the nth (1-based; 0: none wanted) in *seq (-1 when missing). */
static inline int
hcs_log_scan(const char *dir, const char *fn, int nth, long *seq)
{
    char path[MAX_PATH * 2];
    snprintf(path, sizeof(path), "%s\\calls.log", dir);
    if (seq)
        *seq = -1;
    FILE *log = fopen(path, "rb");
    if (!log)
        return 0;
    char line[512];
    int seen = 0;
    while (fgets(line, sizeof(line), log)) {
        char name[128];
        long s;
        if (sscanf(line, "%ld %127s", &s, name) != 2 || strcmp(name, fn) != 0)
            continue;
        if (++seen == nth && seq)
            *seq = s;
    }
    fclose(log);
    return seen;
}

/* The document of the nth (1-based) call of fn the double recorded, or NULL. */
static inline json_object *
hcs_log_recorded(const char *dir, const char *fn, int nth)
{
    long seq;
    hcs_log_scan(dir, fn, nth, &seq);
    if (seq < 0)
        return NULL;
    char path[MAX_PATH * 2];
    snprintf(path, sizeof(path), "%s\\%04ld-%s.json", dir, seq, fn);
    return json_object_from_file(path);
}

/* How many calls of fn the double logged. */
static inline int
hcs_log_called(const char *dir, const char *fn)
{
    return hcs_log_scan(dir, fn, 0, NULL);
}

#endif
