/*
 * Parsers of HCS answers and the detection verdict (props.h). Pure;
 * any thread.
 */
#include "runtime/hcs/props.h"

#include <json-c/json.h>
#include <stdio.h>
#include <string.h>

#include "jsonutil/jsonutil.h"

/* HCS's answer as a JSON object, strictly parsed; EIO when it is anything else. */
static json_object *
parse_object(const char *json, const char *what, struct err *err)
{
    json_object *o = NULL;
    if (!json || jsonutil_parse(json, strlen(json), &o, NULL) < 0 ||
        !json_object_is_type(o, json_type_object)) {
        json_object_put(o);
        err_set(err, EIO, "%s: hcs answered %.120s, not a json object", what,
                json ? json : "nothing");
        return NULL;
    }
    return o;
}

/* A number field that must be a non-negative integer; absent: *out untouched, false. */
static int
get_uint(json_object *o, const char *key, uint64_t *out, const char *what, struct err *err)
{
    json_object *v;
    if (!json_object_object_get_ex(o, key, &v))
        return 0;
    int64_t n;
    if (!jsonutil_int64_of(v, &n) || n < 0)
        return err_set(err, EIO, "%s: %s is %.60s, not a non-negative integer", what, key,
                       json_object_to_json_string(v));
    *out = (uint64_t)n;
    return 1;
}

/* The single entry of {"Properties":[{...}]}. Borrowed from root. */
static json_object *
first_property(json_object *root, const char *what, struct err *err)
{
    json_object *arr;
    if (!json_object_object_get_ex(root, "Properties", &arr) ||
        !json_object_is_type(arr, json_type_array) || json_object_array_length(arr) < 1) {
        err_set(err, EIO, "%s: no Properties array in the answer", what);
        return NULL;
    }
    json_object *p = json_object_array_get_idx(arr, 0);
    if (!json_object_is_type(p, json_type_object)) {
        err_set(err, EIO, "%s: Properties[0] is not an object", what);
        return NULL;
    }
    return p;
}

int
hcs_props_schema_minor(const char *json, int *minor, struct err *err)
{
    static const char what[] = "hcs service properties (Basic)";
    json_object *root = parse_object(json, what, err);
    if (!root)
        return -EIO;
    int r = 0;
    int best = -1;
    json_object *p = first_property(root, what, err);
    json_object *vers;
    if (!p) {
        r = -EIO;
    } else if (!json_object_object_get_ex(p, "SupportedSchemaVersions", &vers) ||
               !json_object_is_type(vers, json_type_array)) {
        r = err_set(err, EIO, "%s: no SupportedSchemaVersions array", what);
    } else {
        for (size_t i = 0; i < json_object_array_length(vers); i++) {
            json_object *v = json_object_array_get_idx(vers, i);
            uint64_t ma = 0, mi = 0;
            if (!json_object_is_type(v, json_type_object)) {
                r = err_set(err, EIO, "%s: SupportedSchemaVersions[%zu] is not an object", what, i);
                break;
            }
            int a = get_uint(v, "Major", &ma, what, err);
            int b = a < 0 ? a : get_uint(v, "Minor", &mi, what, err);
            if (a < 0 || b < 0) {
                r = -EIO;
                break;
            }
            if (a == 0)
                continue;
            if (ma == 2 && (int64_t)mi > best && mi < 1000)
                best = (int)mi;
        }
    }
    json_object_put(root);
    if (r == 0)
        *minor = best;
    return r;
}

int
hcs_props_lp_count(const char *json, uint32_t *count, struct err *err)
{
    static const char what[] = "hcs service properties (ProcessorTopology)";
    json_object *root = parse_object(json, what, err);
    if (!root)
        return -EIO;
    int r;
    uint64_t n = 0;
    json_object *p = first_property(root, what, err);
    if (!p)
        r = -EIO;
    else if ((r = get_uint(p, "LogicalProcessorCount", &n, what, err)) == 0)
        r = err_set(err, EIO, "%s: no LogicalProcessorCount", what);
    else if (r > 0 && (n == 0 || n > UINT32_MAX))
        r = err_set(err, EIO, "%s: LogicalProcessorCount %llu", what, (unsigned long long)n);
    json_object_put(root);
    if (r < 0)
        return r;
    *count = (uint32_t)n;
    return 0;
}

int
hcs_props_statistics(const char *json, struct hcs_stats *out, struct err *err)
{
    static const char what[] = "compute system statistics";
    json_object *root = parse_object(json, what, err);
    if (!root)
        return -EIO;
    struct hcs_stats s = {0};
    int r = 0;
    json_object *st, *sub;
    if (!json_object_object_get_ex(root, "Statistics", &st) ||
        !json_object_is_type(st, json_type_object)) {
        r = err_set(err, EIO, "%s: no Statistics object", what);
        goto out;
    }
    uint64_t t100 = 0;
    if (json_object_object_get_ex(st, "Processor", &sub) &&
        json_object_is_type(sub, json_type_object) &&
        (r = get_uint(sub, "TotalRuntime100ns", &t100, what, err)) < 0)
        goto out;
    s.cpu_ns = t100 * 100;
    if (json_object_object_get_ex(st, "Memory", &sub) &&
        json_object_is_type(sub, json_type_object) &&
        ((r = get_uint(sub, "MemoryUsageCommitBytes", &s.memory_commit_bytes, what, err)) < 0 ||
         (r = get_uint(sub, "MemoryUsagePrivateWorkingSetBytes", &s.memory_private_ws_bytes, what,
                       err)) < 0))
        goto out;
    r = 0;
    *out = s;
out:
    json_object_put(root);
    return r;
}

/* An int field holding an HRESULT or exit code: HCS writes them signed or unsigned. */
static int
get_u32(json_object *o, const char *key, uint32_t *out, const char *what, struct err *err)
{
    json_object *v;
    if (!json_object_object_get_ex(o, key, &v))
        return 0;
    int64_t n;
    if (!jsonutil_int64_of(v, &n))
        return err_set(err, EIO, "%s: %s is not an integer", what, key);
    if (n < INT32_MIN || n > (int64_t)UINT32_MAX)
        return err_set(err, EIO, "%s: %s %lld is out of range", what, key, (long long)n);
    *out = (uint32_t)n;
    return 1;
}

int
hcs_event_system_exit(const char *json, struct hcs_system_exit *out, struct err *err)
{
    static const char what[] = "system exit event";
    json_object *root = parse_object(json, what, err);
    if (!root)
        return -EIO;
    struct hcs_system_exit e = {0};
    int r = get_u32(root, "Status", &e.status, what, err);
    json_object *v;
    if (r >= 0 && json_object_object_get_ex(root, "ExitType", &v) &&
        json_object_is_type(v, json_type_string))
        snprintf(e.exit_type, sizeof(e.exit_type), "%s", json_object_get_string(v));
    json_object_put(root);
    if (r < 0)
        return r;
    *out = e;
    return 0;
}

int
hcs_event_process_exit(const char *json, struct hcs_process_exit *out, struct err *err)
{
    static const char what[] = "process exit event";
    json_object *root = parse_object(json, what, err);
    if (!root)
        return -EIO;
    struct hcs_process_exit e = {0};
    int r;
    json_object *v;
    if ((r = get_u32(root, "ProcessId", &e.pid, what, err)) < 0 ||
        (r = get_u32(root, "ExitCode", &e.exit_code, what, err)) < 0 ||
        (r = get_u32(root, "LastWaitResult", &e.last_wait_result, what, err)) < 0)
        goto out;
    if (json_object_object_get_ex(root, "Exited", &v)) {
        if (!json_object_is_type(v, json_type_boolean)) {
            r = err_set(err, EIO, "%s: Exited is not a boolean", what);
            goto out;
        }
        e.exited = json_object_get_boolean(v);
    }
    r = 0;
    *out = e;
out:
    json_object_put(root);
    return r;
}

void
hcs_caps_evaluate(const struct hcs_probe_answer *basic, const struct hcs_probe_answer *topo,
                  struct hcs_caps *out)
{
    memset(out, 0, sizeof(*out));
    out->schema_minor = -1;
    struct err e = {0};

    if (basic->rc < 0) {
        snprintf(out->process_reason, sizeof(out->process_reason),
                 "the Host Compute Service is not usable (%s)", basic->err.msg);
    } else if (hcs_props_schema_minor(basic->json, &out->schema_minor, &e) < 0) {
        snprintf(out->process_reason, sizeof(out->process_reason),
                 "the Host Compute Service answered its properties query oddly (%s)", e.msg);
    } else if (out->schema_minor < 1) {
        snprintf(out->process_reason, sizeof(out->process_reason),
                 "the Host Compute Service supports %s; berth needs schema 2.1 or later "
                 "(Windows Server 2019, build 17763, or newer)",
                 out->schema_minor < 0 ? "no schema 2.x" : "schema 2.0 at most");
    } else {
        out->process_usable = true;
    }

    if (!out->process_usable) {
        snprintf(out->hyperv_reason, sizeof(out->hyperv_reason),
                 "Hyper-V is not available on this host (%s)", out->process_reason);
        return;
    }
    if (topo->rc < 0) {
        snprintf(out->hyperv_reason, sizeof(out->hyperv_reason),
                 "Hyper-V is not available on this host (%s)", topo->err.msg);
        return;
    }
    memset(&e, 0, sizeof(e));
    if (hcs_props_lp_count(topo->json, &out->lp_count, &e) < 0) {
        snprintf(out->hyperv_reason, sizeof(out->hyperv_reason),
                 "Hyper-V is not available on this host (%s)", e.msg);
        return;
    }
    out->hyperv_usable = true;
}
