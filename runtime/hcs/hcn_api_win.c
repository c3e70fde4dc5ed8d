/*
 * computenetwork.dll through LoadLibraryExW and GetProcAddress (hcn_api.h):
 * the network found (and checked against the flags) or created, a
 * container's endpoint and namespace made, joined and taken away.
 * Windows only; pool threads.
 */
#include "runtime/hcs/hcn_api.h"

#include <windows.h>

#include <computenetwork.h>
#include <errno.h>
#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#include "common/windll.h"
#include "common/winutil.h"
#include "runtime/hcs/hcn_props.h"
#include "runtime/hcs/hresult.h"

/* A properties query as hcsshim sends it: HNS answers in schema 2.0's field names. */
#define HCN_QUERY_V2 L"{\"SchemaVersion\":{\"Major\":2,\"Minor\":0},\"Flags\":0}"

/* HNS's own HRESULTs (Microsoft's HCN reference), absent from mingw-w64's headers. */
#define HCN_E_NETWORK_NOT_FOUND ((HRESULT)0x803B0001L)
#define HCN_E_ENDPOINT_NOT_FOUND ((HRESULT)0x803B0002L)
#define HCN_E_ENDPOINT_NOT_ATTACHED ((HRESULT)0x803B0034L)
#define HCN_WIN32_NOT_FOUND ((HRESULT)0x80070490L)

#define HCN_FUNCS(X)                                                                               \
    X(HcnEnumerateNetworks)                                                                        \
    X(HcnCreateNetwork)                                                                            \
    X(HcnDeleteNetwork)                                                                            \
    X(HcnOpenNetwork)                                                                              \
    X(HcnQueryNetworkProperties)                                                                   \
    X(HcnCloseNetwork)                                                                             \
    X(HcnEnumerateEndpoints)                                                                       \
    X(HcnOpenEndpoint)                                                                             \
    X(HcnCreateEndpoint)                                                                           \
    X(HcnDeleteEndpoint)                                                                           \
    X(HcnCloseEndpoint)                                                                            \
    X(HcnQueryEndpointProperties)                                                                  \
    X(HcnCreateNamespace)                                                                          \
    X(HcnOpenNamespace)                                                                            \
    X(HcnModifyNamespace)                                                                          \
    X(HcnDeleteNamespace)                                                                          \
    X(HcnCloseNamespace)

struct hcn_api {
    HMODULE dll;
#define HCN_FIELD(name) __typeof__(&name) name;
    HCN_FUNCS(HCN_FIELD)
#undef HCN_FIELD
};

/* ---- text ---- */

/* A string HNS allocated (CoTaskMemFree), as UTF-8 (caller frees), and freed. */
static char *
take(PWSTR w)
{
    if (!w)
        return NULL;
    char *s = NULL;
    int n = WideCharToMultiByte(CP_UTF8, 0, w, -1, NULL, 0, NULL, NULL);
    if (n > 0 && (s = malloc((size_t)n)) &&
        WideCharToMultiByte(CP_UTF8, 0, w, -1, s, n, NULL, NULL) != n) {
        free(s);
        s = NULL;
    }
    CoTaskMemFree(w);
    return s;
}

/* err from hr and HNS's error record (freed): "<what> <arg>: ...". */
static int
fail(struct err *err, HRESULT hr, PWSTR record, const char *what, const char *arg)
{
    char *rec = take(record);
    int r = hcs_err_set(err, (uint32_t)hr, NULL, rec, "%s %s", what, arg);
    free(rec);
    return r;
}

static bool
gone(HRESULT hr)
{
    return hr == HCN_E_NETWORK_NOT_FOUND || hr == HCN_E_ENDPOINT_NOT_FOUND ||
           hr == HCN_E_ENDPOINT_NOT_ATTACHED || hr == HCN_WIN32_NOT_FOUND;
}

static int
guid_of(const char *s, GUID *g, struct err *err)
{
    struct hcs_guid h;
    int r = hcs_guid_parse(s, &h, err);
    if (r < 0)
        return r;
    g->Data1 = (DWORD)h.b[0] << 24 | (DWORD)h.b[1] << 16 | (DWORD)h.b[2] << 8 | h.b[3];
    g->Data2 = (WORD)(h.b[4] << 8 | h.b[5]);
    g->Data3 = (WORD)(h.b[6] << 8 | h.b[7]);
    memcpy(g->Data4, h.b + 8, 8);
    return 0;
}

/* A document as HNS takes it: UTF-16, compact. Takes doc. */
static wchar_t *
doc_wide(json_object *doc)
{
    const char *s = json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PLAIN |
                                                            JSON_C_TO_STRING_NOSLASHESCAPE);
    wchar_t *w = s ? win_wide(s) : NULL;
    json_object_put(doc);
    return w;
}

/* ---- loading ---- */

static const struct windll_export hcn_exports[] = {
#define HCN_EXPORT(name) {#name, offsetof(struct hcn_api, name)},
    HCN_FUNCS(HCN_EXPORT)
#undef HCN_EXPORT
};

int
hcn_api_open(const char *dll_path, struct hcn_api **out, struct err *err)
{
    static const struct windll_spec spec = {
        .system_name = L"computenetwork.dll",
        .name = "computenetwork.dll",
        .test_env = "BERTH_TEST_HCN_DLL",
        .why_absent = "this Windows has no Host Compute Network service",
        .exports = hcn_exports,
        .nexports = sizeof(hcn_exports) / sizeof(hcn_exports[0]),
    };
    void *table = NULL;
    int ret = windll_table_new(&spec, dll_path, sizeof(struct hcn_api),
                               offsetof(struct hcn_api, dll), &table, err);
    if (ret < 0)
        return ret;
    struct hcn_api *api = table;
    *out = api;
    return 0;
}

void
hcn_api_free(struct hcn_api *api)
{
    windll_table_free(api, offsetof(struct hcn_api, dll));
}

/* ---- networks ---- */

/* The first id of the JSON array HcnEnumerateNetworks returned, into id; 0 if none. */
static int
first_id(const char *list, char id[HCS_GUID_SIZE], bool *found, struct err *err)
{
    *found = false;
    json_object *a = list ? json_tokener_parse(list) : NULL;
    if (list && (!a || !json_object_is_type(a, json_type_array))) {
        json_object_put(a);
        return err_set(err, EIO, "find hcn network: HNS answered %.200s, not a list of ids", list);
    }
    if (a && json_object_array_length(a) > 0) {
        const char *s = json_object_get_string(json_object_array_get_idx(a, 0));
        if (!s || !hcs_guid_valid(s)) {
            json_object_put(a);
            return err_set(err, EIO, "find hcn network: HNS answered an id that is not a GUID");
        }
        struct hcs_guid g;
        hcs_guid_parse(s, &g, err);
        hcs_guid_format(&g, id);
        *found = true;
    }
    json_object_put(a);
    return 0;
}

/* An HcnEnumerate* call (fn) with the query doc (taken): the list it answered into *out
 * (caller frees; NULL when HNS gave none). what and name are for the messages. */
static int
enumerate(__typeof__(&HcnEnumerateNetworks) fn, json_object *query, const char *what,
          const char *name, char **out, struct err *err)
{
    *out = NULL;
    if (!query)
        return -EINVAL;
    wchar_t *wq = doc_wide(query);
    if (!wq)
        return err_set(err, ENOMEM, "%s %s: out of memory", what, name);
    PWSTR list = NULL, record = NULL;
    HRESULT hr = fn(wq, &list, &record);
    free(wq);
    if (FAILED(hr))
        return fail(err, hr, record, what, name);
    *out = take(list);
    return 0;
}

/* HcnEnumerateNetworks for name: the first id into id, *found whether there was one. */
static int
network_query(struct hcn_api *api, const char *name, char id[HCS_GUID_SIZE], bool *found,
              struct err *err)
{
    char *l = NULL;
    int r = enumerate(api->HcnEnumerateNetworks, hcn_doc_query_name(name, err), "find hcn network",
                      name, &l, err);
    if (r < 0)
        return r;
    r = first_id(l, id, found, err);
    free(l);
    return r;
}

int
hcn_network_find(struct hcn_api *api, const char *name, char id[HCS_GUID_SIZE], bool *found,
                 struct err *err)
{
    return network_query(api, name, id, found, err);
}

/* w as UTF-8 into *out (caller frees): -EILSEQ when w is not UTF-16 (a lone surrogate), or
 * -ENOMEM. */
static int
utf8_strict(PCWSTR w, char **out)
{
    *out = NULL;
    int n = WideCharToMultiByte(CP_UTF8, WC_ERR_INVALID_CHARS, w, -1, NULL, 0, NULL, NULL);
    if (n <= 0)
        return -EILSEQ;
    if (!(*out = malloc((size_t)n)))
        return -ENOMEM;
    if (WideCharToMultiByte(CP_UTF8, WC_ERR_INVALID_CHARS, w, -1, *out, n, NULL, NULL) != n) {
        free(*out);
        *out = NULL;
        return -EILSEQ;
    }
    return 0;
}

/* HNS's properties answer w (freed) of what ("hcn network properties") as UTF-8 into *out
 * (caller frees): refused unconverted when longer than HCN_PROPS_MAX characters, and refused
 * when it is not UTF-16. */
static int
props_text(PWSTR w, const char *what, char **out, struct err *err)
{
    *out = NULL;
    if (!w)
        return err_set(err, EIO, "%s: HNS answered nothing", what);
    int r;
    if (wcsnlen(w, (size_t)HCN_PROPS_MAX + 1) > HCN_PROPS_MAX)
        r = err_set(err, EIO, "%s: HNS answered more than %d characters", what, HCN_PROPS_MAX);
    else if ((r = utf8_strict(w, out)) == -ENOMEM)
        r = err_set(err, ENOMEM, "%s: out of memory", what);
    else if (r < 0)
        r = err_set(err, EIO, "%s: HNS's answer is not valid UTF-16", what);
    CoTaskMemFree(w);
    return r;
}

/* The properties HNS has of network id, parsed (hcn_props.h). Each call's error record is
 * freed as soon as it returns, and its answer on every path. */
static int
network_props(struct hcn_api *api, const char *id, struct hcn_network_props *out, struct err *err)
{
    GUID g;
    int r = guid_of(id, &g, err);
    if (r < 0)
        return r;
    HCN_NETWORK h = NULL;
    PWSTR props = NULL, record = NULL;
    HRESULT hr = api->HcnOpenNetwork(&g, &h, &record);
    if (FAILED(hr))
        return fail(err, hr, record, "query hcn network", id);
    CoTaskMemFree(record); /* a success's record, if any, says nothing */
    record = NULL;
    hr = api->HcnQueryNetworkProperties(h, HCN_QUERY_V2, &props, &record);
    api->HcnCloseNetwork(h);
    if (FAILED(hr)) {
        CoTaskMemFree(props);
        return fail(err, hr, record, "query hcn network", id);
    }
    CoTaskMemFree(record);
    char *text = NULL;
    if ((r = props_text(props, "hcn network properties", &text, err)) == 0)
        r = hcn_network_props_parse(text, strlen(text), out, err);
    free(text);
    return r;
}

int
hcn_network_check(struct hcn_api *api, const char *id, const struct hcn_network_doc *want,
                  struct err *err)
{
    struct hcn_network_props p;
    if (network_props(api, id, &p, err) < 0)
        return err_wrap(err, "hcn network %s (%s)", want->name, id);
    return hcn_network_props_match(&p, want, err);
}

int
hcn_network_ensure(struct hcn_api *api, const struct hcn_network_doc *doc, char id[HCS_GUID_SIZE],
                   bool *created, struct err *err)
{
    json_object *settings = hcn_doc_network(doc, err);
    if (!settings)
        return -EINVAL;
    wchar_t *ws = doc_wide(settings);
    if (!ws)
        return err_set(err, ENOMEM, "hcn network %s: out of memory", doc->name);
    bool found = false;
    *created = false;
    int r = network_query(api, doc->name, id, &found, err);
    if (r == 0 && found) {
        /* Adopted only if it is the network doc would make; never deleted, it is not ours. */
        r = hcn_network_check(api, id, doc, err);
    } else if (r == 0) {
        struct hcs_guid g;
        GUID wg;
        HCN_NETWORK h = NULL;
        PWSTR record = NULL;
        if ((r = hcs_guid_random(&g, err)) == 0) {
            hcs_guid_format(&g, id);
            guid_of(id, &wg, err);
            HRESULT hr = api->HcnCreateNetwork(&wg, ws, &h, &record);
            if (FAILED(hr))
                r = fail(err, hr, record, "create hcn network", doc->name);
            else {
                api->HcnCloseNetwork(h);
                *created = true;
            }
        }
    }
    free(ws);
    if (r < 0)
        id[0] = '\0';
    return r;
}

int
hcn_network_delete(struct hcn_api *api, const char *id, struct err *err)
{
    GUID g;
    int r = guid_of(id, &g, err);
    if (r < 0)
        return r;
    PWSTR record = NULL;
    HRESULT hr = api->HcnDeleteNetwork(&g, &record);
    if (FAILED(hr) && !gone(hr))
        return fail(err, hr, record, "delete hcn network", id);
    if (record)
        CoTaskMemFree(record);
    return 0;
}

/* ---- a container's endpoint and namespace ---- */

static int
endpoint_delete(struct hcn_api *api, const char *id, struct err *err)
{
    GUID g;
    int r = guid_of(id, &g, err);
    if (r < 0)
        return r;
    PWSTR record = NULL;
    HRESULT hr = api->HcnDeleteEndpoint(&g, &record);
    if (FAILED(hr) && !gone(hr))
        return fail(err, hr, record, "delete hcn endpoint", id);
    if (record)
        CoTaskMemFree(record);
    return 0;
}

static int
namespace_delete(struct hcn_api *api, const char *id, struct err *err)
{
    GUID g;
    int r = guid_of(id, &g, err);
    if (r < 0)
        return r;
    PWSTR record = NULL;
    HRESULT hr = api->HcnDeleteNamespace(&g, &record);
    if (FAILED(hr) && !gone(hr))
        return fail(err, hr, record, "delete hcn namespace", id);
    if (record)
        CoTaskMemFree(record);
    return 0;
}

/* Adds (add true) or removes the endpoint a->endpoint_id of namespace a->namespace_id. */
static int
namespace_modify(struct hcn_api *api, const struct hcn_attachment *a, bool add, struct err *err)
{
    GUID g;
    int r = guid_of(a->namespace_id, &g, err);
    if (r < 0)
        return r;
    json_object *doc = hcn_doc_namespace_endpoint(add ? "Add" : "Remove", a->endpoint_id, err);
    if (!doc)
        return -EINVAL;
    wchar_t *w = doc_wide(doc);
    if (!w)
        return err_set(err, ENOMEM, "hcn namespace %s: out of memory", a->namespace_id);
    HCN_NAMESPACE ns = NULL;
    PWSTR record = NULL;
    HRESULT hr = api->HcnOpenNamespace(&g, &ns, &record);
    if (SUCCEEDED(hr)) {
        hr = api->HcnModifyNamespace(ns, w, &record);
        api->HcnCloseNamespace(ns);
    }
    free(w);
    if (FAILED(hr) && !(gone(hr) && !add))
        return fail(err, hr, record,
                    add ? "add endpoint to hcn namespace" : "remove endpoint from hcn namespace",
                    a->namespace_id);
    if (record)
        CoTaskMemFree(record);
    return 0;
}

/* The MacAddress HNS gave the endpoint eh (a hyperv utility VM's adapter needs it). */
static int
endpoint_mac(struct hcn_api *api, HCN_ENDPOINT eh, const char *container, char mac[HCN_MAC_SIZE],
             struct err *err)
{
    PWSTR props = NULL, record = NULL;
    HRESULT hr = api->HcnQueryEndpointProperties(eh, L"{}", &props, &record);
    if (FAILED(hr)) {
        CoTaskMemFree(props);
        return fail(err, hr, record, "query the hcn endpoint of container", container);
    }
    CoTaskMemFree(record);
    char *text = NULL;
    int r = props_text(props, "hcn endpoint properties", &text, err);
    if (r < 0)
        return err_wrap(err, "hcn endpoint of container %s", container);
    json_object *o = json_tokener_parse(text), *v;
    free(text);
    const char *m = o && json_object_object_get_ex(o, "MacAddress", &v) &&
                            json_object_is_type(v, json_type_string)
                        ? json_object_get_string(v)
                        : NULL;
    if (!m || strlen(m) != HCN_MAC_SIZE - 1)
        r = err_set(err, EIO, "hcn endpoint of container %s: no MacAddress in its properties",
                    container);
    else
        memcpy(mac, m, HCN_MAC_SIZE);
    json_object_put(o);
    return r;
}

int
hcn_container_attach(struct hcn_api *api, const struct hcn_endpoint_doc *ep,
                     struct hcn_attachment *out, struct err *err)
{
    json_object *doc = hcn_doc_endpoint(ep, err);
    if (!doc)
        return -EINVAL;
    wchar_t *wep = doc_wide(doc), *wns = doc_wide(hcn_doc_namespace());
    struct hcn_attachment a = *out;
    struct hcs_guid g1, g2;
    GUID net, eg, ng;
    int r = (!wep || !wns) ? err_set(err, ENOMEM, "hcn endpoint: out of memory") : 0;
    bool given = a.endpoint_id[0] && a.namespace_id[0];
    if (r == 0 && !given && (r = hcs_guid_random(&g1, err)) == 0 &&
        (r = hcs_guid_random(&g2, err)) == 0) {
        hcs_guid_format(&g1, a.endpoint_id);
        hcs_guid_format(&g2, a.namespace_id);
    }
    if (r == 0)
        r = guid_of(ep->network_id, &net, err);
    if (r == 0 && (r = guid_of(a.endpoint_id, &eg, err)) == 0)
        r = guid_of(a.namespace_id, &ng, err);
    bool have_ep = false, have_ns = false;
    PWSTR record = NULL;
    if (r == 0) {
        HCN_NETWORK nh = NULL;
        HCN_ENDPOINT eh = NULL;
        HRESULT hr = api->HcnOpenNetwork(&net, &nh, &record);
        if (SUCCEEDED(hr)) {
            hr = api->HcnCreateEndpoint(nh, &eg, wep, &eh, &record);
            api->HcnCloseNetwork(nh);
        }
        if (FAILED(hr))
            r = fail(err, hr, record, "create the hcn endpoint of container", ep->container);
        else {
            have_ep = true;
            r = endpoint_mac(api, eh, ep->container, a.mac, err);
            api->HcnCloseEndpoint(eh);
        }
    }
    if (r == 0) {
        HCN_NAMESPACE nsh = NULL;
        record = NULL;
        HRESULT hr = api->HcnCreateNamespace(&ng, wns, &nsh, &record);
        if (FAILED(hr))
            r = fail(err, hr, record, "create the hcn namespace of container", ep->container);
        else {
            api->HcnCloseNamespace(nsh);
            have_ns = true;
        }
    }
    if (r == 0)
        r = namespace_modify(api, &a, true, err);
    free(wep);
    free(wns);
    if (r < 0) {
        /* Nothing of a failed create stays in HNS; the first error is the one reported. */
        struct err cerr = {0};
        if (have_ns)
            namespace_delete(api, a.namespace_id, &cerr);
        if (have_ep)
            endpoint_delete(api, a.endpoint_id, &cerr);
        return r;
    }
    *out = a;
    return 0;
}

int
hcn_container_detach(struct hcn_api *api, const struct hcn_attachment *a, struct err *err)
{
    int r = namespace_modify(api, a, false, err);
    if (r == 0)
        r = namespace_delete(api, a->namespace_id, err);
    if (r == 0)
        r = endpoint_delete(api, a->endpoint_id, err);
    return r;
}

/* ---- the endpoints on a network (the start-up's sweep) ---- */

/* The string field k of o as a GUID in canonical form into out ("" when absent); false if bad. */
static bool
guid_field(json_object *o, const char *k, char out[HCS_GUID_SIZE])
{
    json_object *v;
    out[0] = '\0';
    if (!json_object_object_get_ex(o, k, &v) || json_object_is_type(v, json_type_null))
        return true;
    struct hcs_guid g;
    struct err e = {0};
    const char *t = json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
    if (!t || !t[0])
        return t != NULL;
    if (!hcs_guid_valid(t) || hcs_guid_parse(t, &g, &e) < 0)
        return false;
    hcs_guid_format(&g, out);
    return true;
}

/* The properties of endpoint id into info; *gone when HNS no longer has it. */
static int
endpoint_info(struct hcn_api *api, const char *id, struct hcn_endpoint_info *info, bool *gone_out,
              struct err *err)
{
    GUID g;
    *gone_out = false;
    int r = guid_of(id, &g, err);
    if (r < 0)
        return r;
    HCN_ENDPOINT eh = NULL;
    PWSTR props = NULL, record = NULL;
    HRESULT hr = api->HcnOpenEndpoint(&g, &eh, &record);
    if (SUCCEEDED(hr)) {
        CoTaskMemFree(record); /* a success's record, if any, says nothing */
        record = NULL;
        hr = api->HcnQueryEndpointProperties(eh, L"{}", &props, &record);
        api->HcnCloseEndpoint(eh);
    }
    if (FAILED(hr)) {
        CoTaskMemFree(props);
        if (!gone(hr))
            return fail(err, hr, record, "query hcn endpoint", id);
        *gone_out = true;
        CoTaskMemFree(record);
        return 0;
    }
    CoTaskMemFree(record);
    char *text = NULL;
    if ((r = props_text(props, "hcn endpoint properties", &text, err)) < 0)
        return err_wrap(err, "hcn endpoint %s", id);
    json_object *o = json_tokener_parse(text), *v;
    free(text);
    memset(info, 0, sizeof(*info));
    snprintf(info->id, sizeof(info->id), "%s", id);
    if (o && json_object_object_get_ex(o, "Name", &v) && json_object_is_type(v, json_type_string))
        snprintf(info->name, sizeof(info->name), "%s", json_object_get_string(v));
    r = o && guid_field(o, "HostComputeNamespace", info->namespace_id)
            ? 0
            : err_set(err, EIO, "hcn endpoint %s: its properties are not an endpoint's", id);
    json_object_put(o);
    return r;
}

int
hcn_network_endpoints(struct hcn_api *api, const char *network_id, struct hcn_endpoint_info **out,
                      size_t *n, struct err *err)
{
    *out = NULL;
    *n = 0;
    char *l = NULL;
    int r = enumerate(api->HcnEnumerateEndpoints, hcn_doc_query_network_endpoints(network_id, err),
                      "list the hcn endpoints of network", network_id, &l, err);
    if (r < 0)
        return r;
    json_object *a = l ? json_tokener_parse(l) : NULL;
    if (l && (!a || !json_object_is_type(a, json_type_array)))
        r = err_set(err, EIO, "hcn endpoints of %s: HNS answered %.200s, not a list of ids",
                    network_id, l);
    free(l);
    size_t len = r == 0 && a ? json_object_array_length(a) : 0;
    struct hcn_endpoint_info *v = len ? calloc(len, sizeof(*v)) : NULL;
    if (len && !v)
        r = err_set(err, ENOMEM, "hcn endpoints of %s: out of memory", network_id);
    for (size_t i = 0; r == 0 && i < len; i++) {
        const char *id = json_object_get_string(json_object_array_get_idx(a, i));
        struct hcs_guid g;
        char canon[HCS_GUID_SIZE];
        if (!id || !hcs_guid_valid(id) || hcs_guid_parse(id, &g, err) < 0) {
            r = err_set(err, EIO, "hcn endpoints of %s: HNS answered an id that is not a GUID",
                        network_id);
            break;
        }
        hcs_guid_format(&g, canon);
        bool went = false;
        r = endpoint_info(api, canon, &v[*n], &went, err);
        if (r == 0 && !went)
            (*n)++;
    }
    json_object_put(a);
    if (r < 0) {
        free(v);
        *n = 0;
        return r;
    }
    *out = v;
    return 0;
}

int
hcn_endpoint_release(struct hcn_api *api, const struct hcn_endpoint_info *ep, struct err *err)
{
    if (!ep->namespace_id[0])
        return endpoint_delete(api, ep->id, err);
    struct hcn_attachment a = {0};
    snprintf(a.endpoint_id, sizeof(a.endpoint_id), "%s", ep->id);
    snprintf(a.namespace_id, sizeof(a.namespace_id), "%s", ep->namespace_id);
    return hcn_container_detach(api, &a, err);
}
