/*
 * Stdio pipe names (pipename.h). Any thread.
 */
#include "runtime/hcs/pipename.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "runtime/hcs/guid.h"

/*
 * [A-Za-z0-9_.-]{1,max}, not starting with '.': the rules of
 * rt_handle_valid() and rt_id_valid() (runtime/driver.c, which the
 * Windows build does not compile yet), so any handle and id the API
 * accepted gives a valid pipe name.
 */
static bool
name_part_valid(const char *s, size_t max)
{
    size_t len = s ? strlen(s) : 0;
    if (len == 0 || len > max || s[0] == '.')
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-'))
            return false;
    }
    return true;
}

int
hcs_pipe_name(const char *handle, const char *id, enum hcs_stdio_stream stream,
              const uint8_t random[HCS_PIPE_RANDOM_BYTES], char out[HCS_PIPE_NAME_SIZE],
              struct err *err)
{
    static const char *const suffix[] = {"stdin", "stdout", "stderr"};
    if (!name_part_valid(handle, 128))
        return err_set(err, EINVAL, "pipe name: container handle %.140s is not valid",
                       handle ? handle : "(null)");
    if (!name_part_valid(id, 64))
        return err_set(err, EINVAL, "pipe name: process id %.80s is not valid", id ? id : "(null)");
    if ((unsigned)stream > HCS_STDERR)
        return err_set(err, EINVAL, "pipe name: stream %d is not stdin, stdout or stderr",
                       (int)stream);
    char hex[HCS_PIPE_RANDOM_BYTES * 2 + 1];
    for (int i = 0; i < HCS_PIPE_RANDOM_BYTES; i++)
        snprintf(hex + 2 * i, 3, "%02x", random[i]);
    snprintf(out, HCS_PIPE_NAME_SIZE, "%s%s-%s-%s-%s", HCS_PIPE_PREFIX, handle, id, hex,
             suffix[stream]);
    return 0;
}

int
hcs_pipe_names_new(const char *handle, const char *id, struct hcs_pipe_names *out, struct err *err)
{
    uint8_t random[HCS_PIPE_RANDOM_BYTES];
    int r = hcs_random_bytes(random, sizeof(random), err);
    if (r < 0)
        return err_wrap(err, "pipe names for %.128s/%.64s", handle ? handle : "(null)",
                        id ? id : "(null)");
    for (int s = HCS_STDIN; s <= HCS_STDERR; s++) {
        r = hcs_pipe_name(handle, id, (enum hcs_stdio_stream)s, random, out->name[s], err);
        if (r < 0)
            return r;
    }
    return 0;
}
