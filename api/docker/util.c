/*
 * What the Docker API's handlers share: the engine's readings of query
 * booleans, numbers and filters, label matching, and its time and list
 * renderings. Loop thread (pure but for the request lookups).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/docker/docker.h"
#include "api/request.h"
#include "common/clock.h"
#include "jsonutil/jsonutil.h"

bool
docker_query_bool(const struct api_req *req, const char *name, bool dflt)
{
    const char *v = api_req_query(req, name);
    if (!v)
        return dflt;
    /* The engine's reading (httputils.BoolValue): these are false, anything else true. */
    while (*v == ' ' || *v == '\t')
        v++;
    size_t n = strlen(v);
    while (n && (v[n - 1] == ' ' || v[n - 1] == '\t'))
        n--;
    static const char *const falses[] = {"", "0", "no", "false", "none", NULL};
    for (const char *const *f = falses; *f; f++)
        if (strlen(*f) == n && strncasecmp(v, *f, n) == 0)
            return false;
    return true;
}

int
docker_query_int(const struct api_req *req, const char *name, int64_t min, int64_t max,
                 int64_t *out, struct err *err)
{
    const char *v = api_req_query(req, name);
    if (!v || !*v)
        return 0;
    char *end = NULL;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (end == v || *end || errno || x < min || x > max)
        return err_set(err, EINVAL,
                       "invalid value for %s: %.40s (expected a whole number from "
                       "%lld to %lld)",
                       name, v, (long long)min, (long long)max);
    *out = x;
    return 1;
}

json_object *
docker_filters(struct api_req *req, const char *const *known)
{
    const char *text = api_req_query(req, "filters");
    json_object *out = json_object_new_object();
    if (!text || !*text)
        return out;
    json_object *in = NULL;
    struct err err = {0};
    if (jsonutil_parse_object(text, strlen(text), false, &in, &err) < 0) {
        json_object_put(out);
        api_reply_fail(req, EINVAL, "invalid filter: %s", err.msg);
        return NULL;
    }
    json_object_object_foreach(in, key, val)
    {
        bool ok = false;
        for (const char *const *k = known; *k && !ok; k++)
            ok = strcmp(*k, key) == 0;
        if (!ok) {
            api_reply_fail(req, EINVAL, "invalid filter '%.64s'", key);
            goto fail;
        }
        json_object *arr = json_object_new_array();
        json_object_object_add(out, key, arr);
        if (json_object_is_type(val, json_type_array)) {
            for (size_t i = 0; i < json_object_array_length(val); i++) {
                json_object *v = json_object_array_get_idx(val, i);
                if (!json_object_is_type(v, json_type_string)) {
                    api_reply_fail(req, EINVAL, "invalid filter '%.64s': values are strings", key);
                    goto fail;
                }
                json_object_array_add(arr, json_object_get(v));
            }
        } else if (json_object_is_type(val, json_type_object)) {
            /* The older form: {"value": true}. */
            json_object_object_foreach(val, k2, v2)
            {
                if (json_object_get_boolean(v2))
                    json_object_array_add(arr, json_object_new_string(k2));
            }
        } else {
            api_reply_fail(req, EINVAL, "invalid filter '%.64s': expected a list of values", key);
            goto fail;
        }
    }
    json_object_put(in);
    return out;
fail:
    json_object_put(in);
    json_object_put(out);
    return NULL;
}

json_object *
docker_filter_values(json_object *filters, const char *key)
{
    json_object *v = NULL;
    if (!filters || !json_object_object_get_ex(filters, key, &v) ||
        json_object_array_length(v) == 0)
        return NULL;
    return v;
}

bool
docker_labels_match(json_object *want, char *const *keys, char *const *values, size_t n)
{
    for (size_t i = 0; want && i < json_object_array_length(want); i++) {
        const char *w = json_object_get_string(json_object_array_get_idx(want, i));
        const char *eq = strchr(w, '=');
        size_t klen = eq ? (size_t)(eq - w) : strlen(w);
        bool found = false;
        for (size_t k = 0; k < n && !found; k++)
            found = strlen(keys[k]) == klen && strncmp(keys[k], w, klen) == 0 &&
                    (!eq || strcmp(values[k], eq + 1) == 0);
        if (!found)
            return false;
    }
    return true;
}

json_object *
docker_time_ms(int64_t unix_ms)
{
    if (unix_ms <= 0)
        return json_object_new_string("0001-01-01T00:00:00Z");
    char buf[64];
    time_t t = (time_t)(unix_ms / 1000);
    struct tm tm;
    gmtime_r(&t, &tm);
    size_t n = strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf + n, sizeof(buf) - n, ".%09lldZ", (long long)(unix_ms % 1000) * 1000000);
    return json_object_new_string(buf);
}

json_object *
docker_strv(char *const *v, bool null_if_null)
{
    if (!v && null_if_null)
        return NULL;
    json_object *a = json_object_new_array();
    for (size_t i = 0; v && v[i]; i++)
        json_object_array_add(a, json_object_new_string(v[i]));
    return a;
}

/* s with the first from replaced by to (same length), in place. */
static void
replace_same(char *s, const char *from, const char *to)
{
    char *at = strstr(s, from);
    if (at)
        memcpy(at, to, strlen(to));
}

void
docker_start_failure(const char *m, char *out, size_t n)
{
    const char *prog = strstr(m, ": exec ");
    const char *reason = NULL;
    for (const char *p = prog ? strstr(prog + 7, ": ") : NULL; p; p = strstr(p + 2, ": "))
        reason = p;
    if (prog && reason) {
        prog += 7;
        int len = (int)(reason - prog);
        reason += 2;
        if (strcmp(reason, "No such file or directory") == 0 && !memchr(prog, '/', (size_t)len))
            snprintf(out, n, "exec: \"%.*s\": executable file not found in $PATH", len, prog);
        else if (strcmp(reason, "No such file or directory") == 0)
            snprintf(out, n, "exec: \"%.*s\": stat %.*s: no such file or directory", len, prog, len,
                     prog);
        else
            snprintf(out, n, "exec: \"%.*s\": %s", len, prog, reason);
    } else {
        snprintf(out, n, "%s", m);
    }
    replace_same(out, "No such file or directory", "no such file or directory");
    replace_same(out, "Permission denied", "permission denied");
    replace_same(out, "Not a directory", "not a directory");
    replace_same(out, "Is a directory", "is a directory");
}

void
docker_start_message(const char *msg, char *out, size_t n)
{
    char why[ERR_MSG_MAX];
    docker_start_failure(msg, why, sizeof(why));
    snprintf(out, n, "failed to create task for container: unable to start container process: %s",
             why);
}
