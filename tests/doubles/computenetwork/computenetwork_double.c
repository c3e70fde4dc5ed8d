/*
 * A TEST DOUBLE of computenetwork.dll (HCN) for berth's Wine suites: it
 * is not HNS and makes no network. It exports what runtime/hcs/hcn_api_win.c
 * calls, with the signatures of mingw-w64's computenetwork.h (included,
 * so a mismatch does not compile), and keeps networks, endpoints and
 * namespaces in memory, pinned for the life of the process as the real
 * service outlives its clients. HcnDoubleCounts (the double's own export)
 * says how many of each exist. HcnQueryEndpointProperties answers an
 * endpoint's ID and its MacAddress, 00-15-5D (Hyper-V's prefix) and the
 * first three bytes of its id, as HNS assigns one from its pool, with its
 * Name, HostComputeNetwork and HostComputeNamespace (the namespace it was
 * added to, "" if none); HcnEnumerateEndpoints takes hcsshim's
 * {"VirtualNetwork": id} filter and lists that network's endpoints.
 * HcnQueryNetworkProperties answers the document the network was made
 * with and its ID, as HNS answers its settings: a test that calls
 * HcnCreateNetwork itself (another subnet, another Type, fields left out)
 * makes the network berth then finds by name.
 *
 * Controlled through the environment, read at every call:
 *
 *   BERTH_HCN_DOUBLE_DIR   a directory: calls.log gets "NNNN <Function> <id>"
 *                          per call, and every document received is written
 *                          as NNNN-<Function>.json
 *   BERTH_HCN_DOUBLE_FAIL  comma-separated calls that fail, as HNS fails:
 *     create-network   HcnCreateNetwork: E_INVALIDARG with an error record
 *     create-endpoint  HcnCreateEndpoint: HCN_E_SUBNET_NOT_FOUND (0x803B0005)
 *     create-namespace HcnCreateNamespace: E_OUTOFMEMORY
 *     modify-namespace HcnModifyNamespace: E_FAIL
 *     query-endpoint   HcnQueryEndpointProperties: E_FAIL
 *     query-network    HcnQueryNetworkProperties: E_FAIL, with an answer too
 *                      (an empty object, which berth must free and not read)
 *     query-network-long  HcnQueryNetworkProperties: an answer of 300 Ki characters
 *     query-network-utf16 HcnQueryNetworkProperties: an answer with a lone surrogate
 *     query-endpoint-long, query-endpoint-utf16  the same of HcnQueryEndpointProperties
 *
 * An endpoint or namespace that does not exist is HCN_E_ENDPOINT_NOT_FOUND
 * or ERROR_NOT_FOUND, as HNS answers; documents are checked for the
 * fields berth must send (Name, HostComputeNetwork, ResourceType...).
 */
#include <windows.h>

#include <computenetwork.h>
#include <json-c/json.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXN 64

struct object {
    bool used;
    GUID id;
    char name[128];
    GUID network;    /* endpoints */
    GUID members[8]; /* namespaces: endpoints added */
    int nmembers;
    char doc[4096]; /* networks: the document they were made with */
};

static SRWLOCK lock = SRWLOCK_INIT;
static struct object networks[MAXN], endpoints[MAXN], namespaces[MAXN];
static unsigned seq;

static void
pin(void)
{
    HMODULE m;
    GetModuleHandleExW(GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS | GET_MODULE_HANDLE_EX_FLAG_PIN,
                       (LPCWSTR)(void *)pin, &m);
}

static bool
env_get(const char *name, char *buf, DWORD size)
{
    DWORD n = GetEnvironmentVariableA(name, buf, size);
    return n > 0 && n < size;
}

static bool
failing(const char *mode)
{
    char buf[512];
    if (!env_get("BERTH_HCN_DOUBLE_FAIL", buf, sizeof(buf)))
        return false;
    for (char *t = strtok(buf, ","); t; t = strtok(NULL, ","))
        if (strcmp(t, mode) == 0)
            return true;
    return false;
}

static void
guid_text(const GUID *g, char out[40])
{
    snprintf(out, 40, "%08lx-%04x-%04x-%02x%02x-%02x%02x%02x%02x%02x%02x", (unsigned long)g->Data1,
             g->Data2, g->Data3, g->Data4[0], g->Data4[1], g->Data4[2], g->Data4[3], g->Data4[4],
             g->Data4[5], g->Data4[6], g->Data4[7]);
}

static char *
narrow(PCWSTR w)
{
    if (!w)
        return NULL;
    int n = WideCharToMultiByte(CP_UTF8, 0, w, -1, NULL, 0, NULL, NULL);
    char *s = malloc((size_t)n);
    WideCharToMultiByte(CP_UTF8, 0, w, -1, s, n, NULL, NULL);
    return s;
}

static PWSTR
co_wide(const char *s)
{
    int n = MultiByteToWideChar(CP_UTF8, 0, s, -1, NULL, 0);
    PWSTR w = CoTaskMemAlloc((size_t)n * sizeof(WCHAR));
    MultiByteToWideChar(CP_UTF8, 0, s, -1, w, n);
    return w;
}

/* Logs the call (and its document), under the lock. */
static void
record(const char *fn, const GUID *id, const char *doc)
{
    char dir[MAX_PATH];
    unsigned n = ++seq;
    if (!env_get("BERTH_HCN_DOUBLE_DIR", dir, sizeof(dir)))
        return;
    char path[MAX_PATH + 64], ids[40] = "-";
    if (id)
        guid_text(id, ids);
    if (doc) {
        snprintf(path, sizeof(path), "%s\\%04u-%s.json", dir, n, fn);
        FILE *f = fopen(path, "wb");
        if (f) {
            fputs(doc, f);
            fclose(f);
        }
    }
    snprintf(path, sizeof(path), "%s\\calls.log", dir);
    FILE *log = fopen(path, "ab");
    if (log) {
        fprintf(log, "%04u %s %s\n", n, fn, ids);
        fclose(log);
    }
}

static HRESULT
error(HRESULT hr, const char *message, PWSTR *rec)
{
    if (rec) {
        char buf[512];
        snprintf(buf, sizeof(buf), "{\"Error\":%ld,\"ErrorMessage\":\"%s\",\"Success\":false}",
                 (long)hr, message);
        *rec = co_wide(buf);
    }
    return hr;
}

static struct object *
find(struct object *t, const GUID *id)
{
    for (int i = 0; i < MAXN; i++)
        if (t[i].used && IsEqualGUID(&t[i].id, id))
            return &t[i];
    return NULL;
}

static struct object *
add(struct object *t, const GUID *id)
{
    for (int i = 0; i < MAXN; i++) {
        if (!t[i].used) {
            memset(&t[i], 0, sizeof(t[i]));
            t[i].used = true;
            t[i].id = *id;
            return &t[i];
        }
    }
    return NULL;
}

/* Handles are pointers to a copy of the id. */
static void *
handle(const GUID *id)
{
    GUID *h = malloc(sizeof(*h));
    *h = *id;
    return h;
}

/* The settings as JSON, with the string field key required (NULL: any object). */
static json_object *
settings_parse(PCWSTR s, const char *key, char *text_out, size_t size)
{
    char *t = narrow(s);
    json_object *o = t ? json_tokener_parse(t) : NULL;
    if (text_out)
        snprintf(text_out, size, "%s", t ? t : "");
    free(t);
    json_object *v;
    if (!o || !json_object_is_type(o, json_type_object) ||
        (key &&
         (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string)))) {
        json_object_put(o);
        return NULL;
    }
    return o;
}

/* A GUID from its text form (no braces). */
static bool
guid_parse(const char *t, GUID *g)
{
    unsigned d1, d2, d3, b[8];
    if (!t || sscanf(t, "%8x-%4x-%4x-%2x%2x-%2x%2x%2x%2x%2x%2x", &d1, &d2, &d3, &b[0], &b[1], &b[2],
                     &b[3], &b[4], &b[5], &b[6], &b[7]) != 11)
        return false;
    g->Data1 = d1, g->Data2 = (WORD)d2, g->Data3 = (WORD)d3;
    for (int i = 0; i < 8; i++)
        g->Data4[i] = (BYTE)b[i];
    return true;
}

/* The ids in t, as a JSON array, of the objects named name (NULL: any) on network net (NULL: any).
 */
static PWSTR
id_list(const struct object *t, const char *name, const GUID *net)
{
    json_object *list = json_object_new_array();
    for (int i = 0; i < MAXN; i++) {
        if (t[i].used && (!name || strcmp(t[i].name, name) == 0) &&
            (!net || IsEqualGUID(&t[i].network, net))) {
            char id[40];
            guid_text(&t[i].id, id);
            json_object_array_add(list, json_object_new_string(id));
        }
    }
    PWSTR w = co_wide(json_object_to_json_string_ext(list, JSON_C_TO_STRING_PLAIN));
    json_object_put(list);
    return w;
}

/* HcnOpen*: a handle on the object of t with that id, else the error HNS answers (nf, msg). */
static HRESULT
open_object(const char *fn, struct object *t, REFGUID Id, HRESULT nf, const char *msg, void **out,
            PWSTR *rec)
{
    pin();
    AcquireSRWLockExclusive(&lock);
    record(fn, Id, NULL);
    HRESULT hr = find(t, Id) ? S_OK : error(nf, msg, rec);
    if (hr == S_OK)
        *out = handle(Id);
    ReleaseSRWLockExclusive(&lock);
    return hr;
}

void WINAPI
HcnDoubleCounts(int *nets, int *eps, int *nss)
{
    AcquireSRWLockExclusive(&lock);
    *nets = *eps = *nss = 0;
    for (int i = 0; i < MAXN; i++) {
        *nets += networks[i].used;
        *eps += endpoints[i].used;
        *nss += namespaces[i].used;
    }
    ReleaseSRWLockExclusive(&lock);
}

HRESULT WINAPI
HcnEnumerateNetworks(PCWSTR Query, PWSTR *Networks, PWSTR *ErrorRecord)
{
    pin();
    static char doc[8192];
    AcquireSRWLockExclusive(&lock);
    json_object *q = settings_parse(Query, "Filter", doc, sizeof(doc));
    record("HcnEnumerateNetworks", NULL, doc);
    HRESULT hr = S_OK;
    if (!q) {
        hr = error(E_INVALIDARG, "The query is not valid JSON with a Filter", ErrorRecord);
    } else {
        json_object *f;
        json_object_object_get_ex(q, "Filter", &f);
        json_object *filter = json_tokener_parse(json_object_get_string(f));
        json_object *name = NULL;
        json_object_object_get_ex(filter, "Name", &name);
        /* No Name: nothing matches (berth always names the network). */
        *Networks = name ? id_list(networks, json_object_get_string(name), NULL) : co_wide("[]");
        json_object_put(filter);
    }
    json_object_put(q);
    ReleaseSRWLockExclusive(&lock);
    return hr;
}

HRESULT WINAPI
HcnCreateNetwork(REFGUID Id, PCWSTR Settings, PHCN_NETWORK Network, PWSTR *ErrorRecord)
{
    pin();
    static char doc[8192];
    AcquireSRWLockExclusive(&lock);
    json_object *s = settings_parse(Settings, "Name", doc, sizeof(doc));
    record("HcnCreateNetwork", Id, doc);
    HRESULT hr = S_OK;
    if (failing("create-network"))
        hr = error(E_INVALIDARG, "The parameter is incorrect.", ErrorRecord);
    else if (!s)
        hr = error(E_INVALIDARG, "Invalid JSON document: no Name", ErrorRecord);
    else if (find(networks, Id))
        hr = error(HRESULT_FROM_WIN32(ERROR_ALREADY_EXISTS), "The network exists", ErrorRecord);
    else {
        struct object *o = add(networks, Id);
        json_object *n;
        json_object_object_get_ex(s, "Name", &n);
        snprintf(o->name, sizeof(o->name), "%s", json_object_get_string(n));
        snprintf(o->doc, sizeof(o->doc), "%s", doc);
        *Network = handle(Id);
    }
    json_object_put(s);
    ReleaseSRWLockExclusive(&lock);
    return hr;
}

HRESULT WINAPI
HcnOpenNetwork(REFGUID Id, PHCN_NETWORK Network, PWSTR *ErrorRecord)
{
    return open_object("HcnOpenNetwork", networks, Id, (HRESULT)0x803B0001L, "Network not found",
                       Network, ErrorRecord);
}

/* For "<kind>-long" and "<kind>-utf16": an answer of 300 Ki characters, or one with a lone
 * surrogate, in *props; whether one was asked for. */
static bool
bad_answer(const char *kind, PWSTR *props)
{
    char mode[64];
    snprintf(mode, sizeof(mode), "%s-long", kind);
    if (failing(mode)) {
        size_t n = 300 * 1024;
        PWSTR w = CoTaskMemAlloc((n + 1) * sizeof(WCHAR));
        for (size_t i = 0; i < n; i++)
            w[i] = L' ';
        w[n] = 0;
        *props = w;
        return true;
    }
    snprintf(mode, sizeof(mode), "%s-utf16", kind);
    if (failing(mode)) {
        PWSTR w = CoTaskMemAlloc(4 * sizeof(WCHAR));
        w[0] = L'{';
        w[1] = 0xD800;
        w[2] = L'}';
        w[3] = 0;
        *props = w;
        return true;
    }
    return false;
}

/* The network's settings as it was made, with its ID, as HNS answers them. */
HRESULT WINAPI
HcnQueryNetworkProperties(HCN_NETWORK Network, PCWSTR Query, PWSTR *Properties, PWSTR *ErrorRecord)
{
    pin();
    static char doc[8192];
    AcquireSRWLockExclusive(&lock);
    json_object *q = settings_parse(Query, NULL, doc, sizeof(doc));
    const GUID *id = Network;
    record("HcnQueryNetworkProperties", id, doc);
    struct object *o = id ? find(networks, id) : NULL;
    json_object *props = o ? json_tokener_parse(o->doc) : NULL;
    HRESULT hr = S_OK;
    if (failing("query-network")) {
        hr = error(E_FAIL, "The network's properties cannot be read", ErrorRecord);
        *Properties = co_wide("{}");
    } else if (bad_answer("query-network", Properties)) {
    } else if (!q)
        hr = error(E_INVALIDARG, "Invalid JSON document", ErrorRecord);
    else if (!o)
        hr = error((HRESULT)0x803B0001L, "Network not found", ErrorRecord);
    else if (!props)
        hr = error(E_FAIL, "The network's settings are not JSON", ErrorRecord);
    else {
        char ids[40];
        guid_text(id, ids);
        json_object_object_add(props, "ID", json_object_new_string(ids));
        *Properties = co_wide(json_object_to_json_string_ext(props, JSON_C_TO_STRING_PLAIN));
    }
    json_object_put(props);
    json_object_put(q);
    ReleaseSRWLockExclusive(&lock);
    return hr;
}

HRESULT WINAPI
HcnDeleteNetwork(REFGUID Id, PWSTR *ErrorRecord)
{
    pin();
    AcquireSRWLockExclusive(&lock);
    record("HcnDeleteNetwork", Id, NULL);
    struct object *o = find(networks, Id);
    HRESULT hr = o ? S_OK : error((HRESULT)0x803B0001L, "Network not found", ErrorRecord);
    if (o)
        o->used = false;
    ReleaseSRWLockExclusive(&lock);
    return hr;
}

HRESULT WINAPI
HcnCloseNetwork(HCN_NETWORK Network)
{
    free(Network);
    return S_OK;
}

HRESULT WINAPI
HcnCreateEndpoint(HCN_NETWORK Network, REFGUID Id, PCWSTR Settings, PHCN_ENDPOINT Endpoint,
                  PWSTR *ErrorRecord)
{
    pin();
    static char doc[8192];
    AcquireSRWLockExclusive(&lock);
    json_object *s = settings_parse(Settings, "HostComputeNetwork", doc, sizeof(doc));
    record("HcnCreateEndpoint", Id, doc);
    HRESULT hr = S_OK;
    if (failing("create-endpoint"))
        hr = error((HRESULT)0x803B0005L, "The network does not have a subnet for this endpoint",
                   ErrorRecord);
    else if (!s || !Network || !find(networks, Network))
        hr = error(E_INVALIDARG, "No HostComputeNetwork, or not the network's", ErrorRecord);
    else if (find(endpoints, Id))
        hr = error(HRESULT_FROM_WIN32(ERROR_ALREADY_EXISTS), "The endpoint exists", ErrorRecord);
    else {
        struct object *o = add(endpoints, Id);
        o->network = *(GUID *)Network;
        json_object *n;
        if (json_object_object_get_ex(s, "Name", &n))
            snprintf(o->name, sizeof(o->name), "%s", json_object_get_string(n));
        *Endpoint = handle(Id);
    }
    json_object_put(s);
    ReleaseSRWLockExclusive(&lock);
    return hr;
}

HRESULT WINAPI
HcnQueryEndpointProperties(HCN_ENDPOINT Endpoint, PCWSTR Query, PWSTR *Properties,
                           PWSTR *ErrorRecord)
{
    pin();
    (void)Query;
    AcquireSRWLockExclusive(&lock);
    const GUID *id = Endpoint;
    record("HcnQueryEndpointProperties", id, NULL);
    HRESULT hr = S_OK;
    if (failing("query-endpoint"))
        hr = error(E_FAIL, "The endpoint's properties cannot be read", ErrorRecord);
    else if (!id || !find(endpoints, id))
        hr = error((HRESULT)0x803B0002L, "Endpoint not found", ErrorRecord);
    else if (bad_answer("query-endpoint", Properties)) {
    } else {
        struct object *o = find(endpoints, id);
        char ids[40], net[40], ns[40] = "", buf[512];
        guid_text(id, ids);
        guid_text(&o->network, net);
        for (int i = 0; i < MAXN && !ns[0]; i++)
            for (int k = 0; namespaces[i].used && k < namespaces[i].nmembers; k++)
                if (IsEqualGUID(&namespaces[i].members[k], id))
                    guid_text(&namespaces[i].id, ns);
        snprintf(buf, sizeof(buf),
                 "{\"ID\":\"%s\",\"Name\":\"%s\",\"HostComputeNetwork\":\"%s\","
                 "\"HostComputeNamespace\":\"%s\",\"MacAddress\":\"00-15-5D-%02X-%02X-%02X\"}",
                 ids, o->name, net, ns, (unsigned)(id->Data1 >> 24) & 0xff,
                 (unsigned)(id->Data1 >> 16) & 0xff, (unsigned)(id->Data1 >> 8) & 0xff);
        *Properties = co_wide(buf);
    }
    ReleaseSRWLockExclusive(&lock);
    return hr;
}

/* The ids of the endpoints on the network the filter's VirtualNetwork names (hcsshim's query). */
HRESULT WINAPI
HcnEnumerateEndpoints(PCWSTR Query, PWSTR *Endpoints, PWSTR *ErrorRecord)
{
    pin();
    static char doc[8192];
    AcquireSRWLockExclusive(&lock);
    json_object *q = settings_parse(Query, "Filter", doc, sizeof(doc));
    record("HcnEnumerateEndpoints", NULL, doc);
    HRESULT hr = S_OK;
    json_object *filter = NULL, *f, *vn = NULL;
    if (q && json_object_object_get_ex(q, "Filter", &f))
        filter = json_tokener_parse(json_object_get_string(f));
    GUID net;
    if (!filter || !json_object_object_get_ex(filter, "VirtualNetwork", &vn) ||
        !guid_parse(json_object_get_string(vn), &net))
        hr = error(E_INVALIDARG, "The query has no VirtualNetwork filter", ErrorRecord);
    else
        *Endpoints = id_list(endpoints, NULL, &net);
    json_object_put(filter);
    json_object_put(q);
    ReleaseSRWLockExclusive(&lock);
    return hr;
}

HRESULT WINAPI
HcnOpenEndpoint(REFGUID Id, PHCN_ENDPOINT Endpoint, PWSTR *ErrorRecord)
{
    return open_object("HcnOpenEndpoint", endpoints, Id, (HRESULT)0x803B0002L, "Endpoint not found",
                       Endpoint, ErrorRecord);
}

HRESULT WINAPI
HcnDeleteEndpoint(REFGUID Id, PWSTR *ErrorRecord)
{
    pin();
    AcquireSRWLockExclusive(&lock);
    record("HcnDeleteEndpoint", Id, NULL);
    struct object *o = find(endpoints, Id);
    HRESULT hr = o ? S_OK : error((HRESULT)0x803B0002L, "Endpoint not found", ErrorRecord);
    for (int i = 0; o && i < MAXN; i++) {
        for (int k = 0; namespaces[i].used && k < namespaces[i].nmembers; k++)
            if (IsEqualGUID(&namespaces[i].members[k], Id))
                hr = error(HRESULT_FROM_WIN32(ERROR_BUSY), "The endpoint is in a namespace",
                           ErrorRecord);
    }
    if (o && hr == S_OK)
        o->used = false;
    ReleaseSRWLockExclusive(&lock);
    return hr;
}

HRESULT WINAPI
HcnCloseEndpoint(HCN_ENDPOINT Endpoint)
{
    free(Endpoint);
    return S_OK;
}

HRESULT WINAPI
HcnCreateNamespace(REFGUID Id, PCWSTR Settings, PHCN_NAMESPACE Namespace, PWSTR *ErrorRecord)
{
    pin();
    static char doc[8192];
    AcquireSRWLockExclusive(&lock);
    json_object *s = settings_parse(Settings, NULL, doc, sizeof(doc));
    record("HcnCreateNamespace", Id, doc);
    HRESULT hr = S_OK;
    if (failing("create-namespace"))
        hr = error(E_OUTOFMEMORY, "Not enough memory resources are available", ErrorRecord);
    else if (!s)
        hr = error(E_INVALIDARG, "Invalid JSON document", ErrorRecord);
    else if (find(namespaces, Id))
        hr = error(HRESULT_FROM_WIN32(ERROR_ALREADY_EXISTS), "The namespace exists", ErrorRecord);
    else {
        add(namespaces, Id);
        *Namespace = handle(Id);
    }
    json_object_put(s);
    ReleaseSRWLockExclusive(&lock);
    return hr;
}

HRESULT WINAPI
HcnOpenNamespace(REFGUID Id, PHCN_NAMESPACE Namespace, PWSTR *ErrorRecord)
{
    return open_object("HcnOpenNamespace", namespaces, Id, HRESULT_FROM_WIN32(ERROR_NOT_FOUND),
                       "Element not found.", Namespace, ErrorRecord);
}

HRESULT WINAPI
HcnModifyNamespace(HCN_NAMESPACE Namespace, PCWSTR Settings, PWSTR *ErrorRecord)
{
    pin();
    static char doc[8192];
    AcquireSRWLockExclusive(&lock);
    json_object *s = settings_parse(Settings, "RequestType", doc, sizeof(doc));
    struct object *ns = Namespace ? find(namespaces, Namespace) : NULL;
    record("HcnModifyNamespace", Namespace, doc);
    HRESULT hr = S_OK;
    json_object *st, *epv, *rt;
    GUID ep;
    if (failing("modify-namespace"))
        hr = error(E_FAIL, "Unspecified error", ErrorRecord);
    else if (!ns)
        hr = error(HRESULT_FROM_WIN32(ERROR_NOT_FOUND), "Element not found.", ErrorRecord);
    else if (!s || !json_object_object_get_ex(s, "Settings", &st) ||
             !json_object_object_get_ex(st, "EndpointId", &epv) ||
             !json_object_object_get_ex(s, "RequestType", &rt))
        hr = error(E_INVALIDARG, "Invalid JSON document", ErrorRecord);
    else {
        if (!guid_parse(json_object_get_string(epv), &ep))
            hr = error(E_INVALIDARG, "EndpointId is not a GUID", ErrorRecord);
        else {
            int at = -1;
            for (int k = 0; k < ns->nmembers; k++)
                if (IsEqualGUID(&ns->members[k], &ep))
                    at = k;
            if (strcmp(json_object_get_string(rt), "Add") == 0) {
                if (!find(endpoints, &ep))
                    hr = error((HRESULT)0x803B0002L, "Endpoint not found", ErrorRecord);
                else if (at < 0 && ns->nmembers < 8)
                    ns->members[ns->nmembers++] = ep;
            } else if (at < 0) {
                hr = error((HRESULT)0x803B0034L, "The endpoint is not attached", ErrorRecord);
            } else {
                ns->members[at] = ns->members[--ns->nmembers];
            }
        }
    }
    json_object_put(s);
    ReleaseSRWLockExclusive(&lock);
    return hr;
}

HRESULT WINAPI
HcnDeleteNamespace(REFGUID Id, PWSTR *ErrorRecord)
{
    pin();
    AcquireSRWLockExclusive(&lock);
    record("HcnDeleteNamespace", Id, NULL);
    struct object *o = find(namespaces, Id);
    HRESULT hr =
        o ? S_OK : error(HRESULT_FROM_WIN32(ERROR_NOT_FOUND), "Element not found.", ErrorRecord);
    if (o)
        o->used = false;
    ReleaseSRWLockExclusive(&lock);
    return hr;
}

HRESULT WINAPI
HcnCloseNamespace(HCN_NAMESPACE Namespace)
{
    free(Namespace);
    return S_OK;
}
