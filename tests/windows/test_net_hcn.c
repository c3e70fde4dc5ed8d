/*
 * daemon/net.h on Windows (daemon/net_hcn_*_windows.c) against the TEST
 * DOUBLE of computenetwork.dll (tests/doubles/computenetwork/), loaded as
 * berthd.exe loads it (BERTH_TEST_HCN_DLL): the network found or made at
 * the reconciliation, an attach that gives a container an address, its
 * ports, an endpoint and a namespace (and a record), the detach that
 * takes them away, failures injected at each HCN step that leave nothing
 * in HNS nor on disk, the reconciliation after a simulated crash, a
 * network of that name made beforehand (adopted when it is the flags',
 * refused otherwise), the disabled mode and a host without
 * computenetwork.dll. The double is not
 * HNS: these show what berth asks for and what it cleans up.
 */
#include "daemon/net.h"

#include <windows.h>

#include <computenetwork.h>

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/fsutil.h"
#include "runtime/hcs/guid.h"
#include "runtime/hcs/hcn_api.h"

static char dbl_path[MAX_PATH + 32];
static char tmp_dir[MAX_PATH + 64];
static char state_dir[MAX_PATH + 80];
static uv_loop_t loop;
static struct job_queue *jobs;

static void
env_put(const char *name, const char *value)
{
    /* _putenv: the C runtime's copy (getenv) and the process's (the double's) both. */
    char buf[MAX_PATH * 2];
    snprintf(buf, sizeof(buf), "%s=%s", name, value ? value : "");
    _putenv(buf);
}

static void
setup(void)
{
    static int n;
    char exe[MAX_PATH];
    GetModuleFileNameA(NULL, exe, sizeof(exe));
    char *slash = strrchr(exe, '\\');
    if (slash)
        *slash = '\0';
    snprintf(dbl_path, sizeof(dbl_path), "%s\\hcn-double\\computenetwork.dll", exe);
    char tmp[MAX_PATH];
    GetTempPathA(sizeof(tmp), tmp);
    snprintf(tmp_dir, sizeof(tmp_dir), "%sberth-nethcn-%lu-%d", tmp, GetCurrentProcessId(), ++n);
    CreateDirectoryA(tmp_dir, NULL);
    snprintf(state_dir, sizeof(state_dir), "%s\\network", tmp_dir);
    env_put("BERTH_TEST_HCN_DLL", dbl_path);
    env_put("BERTH_HCN_DOUBLE_DIR", tmp_dir);
    env_put("BERTH_HCN_DOUBLE_FAIL", NULL);
    ck_assert_int_eq(uv_loop_init(&loop), 0);
    jobs = job_queue_new(&loop);
    ck_assert_ptr_nonnull(jobs);
}

static void
teardown(void)
{
    job_queue_free(jobs);
    ck_assert_int_eq(uv_loop_close(&loop), 0);
    struct err err = {0};
    fs_remove_tree(tmp_dir, &err);
}

/* What the double holds now. */
static void
counts(int *nets, int *eps, int *nss)
{
    HMODULE m = GetModuleHandleA("computenetwork.dll");
    ck_assert_ptr_nonnull(m);
    void(WINAPI * f)(int *, int *, int *) =
        (void(WINAPI *)(int *, int *, int *))(void *)GetProcAddress(m, "HcnDoubleCounts");
    ck_assert_ptr_nonnull(f);
    f(nets, eps, nss);
}

/* How many times the double saw fn. */
static int
called(const char *fn)
{
    char path[MAX_PATH * 2], line[256], name[128];
    snprintf(path, sizeof(path), "%s\\calls.log", tmp_dir);
    FILE *log = fopen(path, "rb");
    int k = 0;
    while (log && fgets(line, sizeof(line), log))
        if (sscanf(line, "%*u %127s", name) == 1 && strcmp(name, fn) == 0)
            k++;
    if (log)
        fclose(log);
    return k;
}

/* The last document fn received, parsed (caller puts). */
static json_object *
last_doc(const char *fn)
{
    char path[MAX_PATH * 2], line[256], name[128];
    snprintf(path, sizeof(path), "%s\\calls.log", tmp_dir);
    FILE *log = fopen(path, "rb");
    unsigned seq = 0, s;
    while (log && fgets(line, sizeof(line), log))
        if (sscanf(line, "%u %127s", &s, name) == 2 && strcmp(name, fn) == 0)
            seq = s;
    if (log)
        fclose(log);
    ck_assert_msg(seq, "no call of %s", fn);
    snprintf(path, sizeof(path), "%s\\%04u-%s.json", tmp_dir, seq, fn);
    json_object *o = json_object_from_file(path);
    ck_assert_msg(o, "%s", path);
    return o;
}

static bool
record_exists(const char *handle)
{
    char path[MAX_PATH * 2];
    snprintf(path, sizeof(path), "%s\\hcn\\%s", state_dir, handle);
    return GetFileAttributesA(path) != INVALID_FILE_ATTRIBUTES;
}

/* ---- driving the service ---- */

struct result {
    bool done;
    const struct net_attachment *a;
    bool ready;
    struct err err;
    struct net_reconcile_stats st;
};

static void
attach_cb(void *arg, const struct net_attachment *a, const struct err *err)
{
    struct result *r = arg;
    r->done = true;
    r->a = a;
    if (err)
        r->err = *err;
}

static void
ready_cb(void *arg, const struct net_attachment *a, const struct err *err)
{
    struct result *r = arg;
    (void)a;
    (void)err;
    r->ready = true;
}

static void
done_cb(void *arg, const struct err *err)
{
    struct result *r = arg;
    r->done = true;
    if (err)
        r->err = *err;
}

static void
reconcile_cb(void *arg, const struct net_reconcile_stats *st, const struct err *err)
{
    struct result *r = arg;
    r->done = true;
    r->st = *st;
    if (err)
        r->err = *err;
}

static void
run_until(struct result *r)
{
    while (!r->done)
        uv_run(&loop, UV_RUN_ONCE);
}

static struct net *
net_open(bool disabled)
{
    struct net_opts o = {
        .state_dir = state_dir, .disabled = disabled, .name = "hcnt", .pool = "10.77.0.0/24"};
    struct net *n = NULL;
    struct err err = {0};
    ck_assert_msg(net_new(&loop, jobs, &o, &n, &err) == 0, "%s", err.msg);
    return n;
}

/* net_new and the start-up reconciliation with live (NULL-terminated); its stats. */
static struct net *
net_start(bool disabled, const char *const *live, struct net_reconcile_stats *st,
          struct err *out_err)
{
    struct net *n = net_open(disabled);
    size_t k = 0;
    while (live && live[k])
        k++;
    struct result r = {0};
    struct err err = {0};
    ck_assert_msg(net_reconcile(n, live, k, reconcile_cb, &r, &err) == 0, "%s", err.msg);
    run_until(&r);
    if (st)
        *st = r.st;
    if (out_err)
        *out_err = r.err;
    else
        ck_assert_msg(r.err.code == 0, "reconcile: %s", r.err.msg);
    return n;
}

static const struct net_attachment *
attach(struct net *n, const char *handle, const struct net_port *ports, size_t nports,
       bool disabled, struct err *out)
{
    struct result r = {0};
    struct err err = {0};
    struct net_attach_req req = {.handle = handle,
                                 .disabled = disabled,
                                 .ports = ports,
                                 .nports = nports,
                                 .ready = ready_cb};
    if (net_attach(n, &req, attach_cb, &r, &err) < 0) {
        *out = err;
        return NULL;
    }
    run_until(&r);
    *out = r.err;
    if (r.a)
        ck_assert_msg(r.ready, "ready was not called before the attach's callback");
    return r.a;
}

static void
detach_ok(struct net *n, const char *handle)
{
    struct result r = {0};
    struct err err = {0};
    ck_assert_msg(net_detach(n, handle, done_cb, &r, &err) == 0, "%s", err.msg);
    run_until(&r);
    ck_assert_msg(r.err.code == 0, "detach %s: %s", handle, r.err.msg);
}

static void
close_net(struct net *n)
{
    net_shutdown(n);
    while (!net_idle(n))
        uv_run(&loop, UV_RUN_ONCE);
    net_free(n);
    uv_run(&loop, UV_RUN_DEFAULT);
}

/* ---- the tests ---- */

START_TEST(attach_gives_an_endpoint_namespace_address_and_ports_and_detach_removes_them)
{
    int nets, eps0, nss0, eps, nss;
    struct net *n = net_start(false, NULL, NULL, NULL);
    counts(&nets, &eps0, &nss0);
    ck_assert_int_ge(nets, 1);
    ck_assert_int_eq(called("HcnEnumerateNetworks"), 1);
    struct net_port ports[] = {{.host = 0, .container = 80, .proto = NET_PROTO_TCP},
                               {.host = 18081, .container = 53, .proto = NET_PROTO_UDP}};
    struct err err = {0};
    const struct net_attachment *a = attach(n, "web", ports, 2, false, &err);
    ck_assert_msg(a, "attach: %s", err.msg);
    ck_assert(!a->disabled);
    ck_assert_msg(a->netns_path && hcs_guid_valid(a->netns_path), "namespace %s", a->netns_path);
    ck_assert_str_eq(a->ip, "10.77.0.2");
    ck_assert_uint_eq(a->prefix, 24);
    ck_assert_str_eq(a->gateway, "10.77.0.1");
    /* The endpoint's id and the MAC HNS gave it (the double's: 00-15-5D and the id's bytes). */
    ck_assert_msg(a->endpoint_id && hcs_guid_valid(a->endpoint_id), "endpoint %s", a->endpoint_id);
    char mac[HCN_MAC_SIZE];
    snprintf(mac, sizeof(mac), "00-15-5D-%.2s-%.2s-%.2s", a->endpoint_id, a->endpoint_id + 2,
             a->endpoint_id + 4);
    ck_assert_int_eq(strcasecmp(a->mac, mac), 0);
    ck_assert_int_eq(called("HcnQueryEndpointProperties"), 1);
    ck_assert_uint_eq(a->nports, 2);
    ck_assert_uint_ne(a->ports[0].host, 0); /* chosen, free at the time */
    ck_assert_uint_eq(a->ports[1].host, 18081);
    ck_assert_ptr_eq(net_attachment_find(n, "web"), a);
    ck_assert(record_exists("web"));
    counts(&nets, &eps, &nss);
    ck_assert_int_eq(eps, eps0 + 1);
    ck_assert_int_eq(nss, nss0 + 1);
    ck_assert_int_eq(called("HcnCreateEndpoint"), 1);
    ck_assert_int_eq(called("HcnCreateNamespace"), 1);
    ck_assert_int_eq(called("HcnModifyNamespace"), 1);
    /* The endpoint: the address, the default route and the ports' NAT policies. */
    json_object *ep = last_doc("HcnCreateEndpoint");
    json_object *ipc = json_object_array_get_idx(json_object_object_get(ep, "IpConfigurations"), 0);
    ck_assert_str_eq(json_object_get_string(json_object_object_get(ipc, "IpAddress")), "10.77.0.2");
    json_object *pols = json_object_object_get(ep, "Policies");
    ck_assert_int_eq(json_object_array_length(pols), 2);
    json_object *p0 = json_object_array_get_idx(pols, 0);
    ck_assert_str_eq(json_object_get_string(json_object_object_get(p0, "Type")), "PortMapping");
    json_object *s0 = json_object_object_get(p0, "Settings");
    ck_assert_int_eq(json_object_get_int(json_object_object_get(s0, "InternalPort")), 80);
    ck_assert_int_eq(json_object_get_int(json_object_object_get(s0, "ExternalPort")),
                     a->ports[0].host);
    json_object_put(ep);

    /* A second container: the next address; a host port forwarded already is a conflict. */
    const struct net_attachment *b = attach(n, "db", NULL, 0, false, &err);
    ck_assert_msg(b, "attach db: %s", err.msg);
    ck_assert_str_eq(b->ip, "10.77.0.3");
    struct net_port again[] = {{.host = 18081, .container = 1, .proto = NET_PROTO_UDP}};
    ck_assert_ptr_null(attach(n, "dup", again, 1, false, &err));
    ck_assert_int_eq(err.code, ERR_CONFLICT);
    ck_assert_msg(strstr(err.msg, "18081/udp"), "%s", err.msg);
    ck_assert_ptr_null(net_attachment_find(n, "dup"));

    detach_ok(n, "web");
    ck_assert_ptr_null(net_attachment_find(n, "web"));
    ck_assert(!record_exists("web"));
    ck_assert_int_eq(called("HcnDeleteEndpoint"), 1);
    ck_assert_int_eq(called("HcnDeleteNamespace"), 1);
    detach_ok(n, "web"); /* idempotent */
    detach_ok(n, "db");
    counts(&nets, &eps, &nss);
    ck_assert_int_eq(eps, eps0);
    ck_assert_int_eq(nss, nss0);
    close_net(n);
}
END_TEST

START_TEST(a_failure_at_each_hcn_step_leaves_nothing_in_hns_nor_on_disk)
{
    static const char *const steps[] = {"create-endpoint", "query-endpoint", "create-namespace",
                                        "modify-namespace"};
    struct net *n = net_start(false, NULL, NULL, NULL);
    for (size_t i = 0; i < 4; i++) {
        int nets, eps0, nss0, eps, nss;
        counts(&nets, &eps0, &nss0);
        env_put("BERTH_HCN_DOUBLE_FAIL", steps[i]);
        struct err err = {0};
        ck_assert_ptr_null(attach(n, "broken", NULL, 0, false, &err));
        ck_assert_msg(err.code != 0 && strstr(err.msg, "broken"), "%s: %s", steps[i], err.msg);
        env_put("BERTH_HCN_DOUBLE_FAIL", NULL);
        counts(&nets, &eps, &nss);
        ck_assert_msg(eps == eps0 && nss == nss0, "%s left %d endpoints, %d namespaces", steps[i],
                      eps - eps0, nss - nss0);
        ck_assert_msg(!record_exists("broken"), "%s left its record", steps[i]);
        ck_assert_ptr_null(net_attachment_find(n, "broken"));
    }
    /* And the handle can be attached afterwards. */
    struct err err = {0};
    ck_assert_msg(attach(n, "broken", NULL, 0, false, &err), "%s", err.msg);
    detach_ok(n, "broken");
    close_net(n);
}
END_TEST

START_TEST(the_reconciliation_keeps_live_networks_and_deletes_the_rest_after_a_crash)
{
    int nets, eps0, nss0, eps, nss;
    struct net *n = net_start(false, NULL, NULL, NULL);
    counts(&nets, &eps0, &nss0);
    struct err err = {0};
    const struct net_attachment *a = attach(n, "keep", NULL, 0, false, &err);
    ck_assert_msg(a, "%s", err.msg);
    char keep_ns[HCS_GUID_SIZE], keep_mac[HCN_MAC_SIZE];
    snprintf(keep_ns, sizeof(keep_ns), "%s", a->netns_path);
    snprintf(keep_mac, sizeof(keep_mac), "%s", a->mac);
    ck_assert_msg(attach(n, "gone", NULL, 0, false, &err), "%s", err.msg);
    ck_assert_msg(attach(n, "half", NULL, 0, false, &err), "%s", err.msg);
    /* A crash: the service goes without a detach; HNS keeps what it made. */
    close_net(n);
    /* "half" crashed between its record and its endpoint: the record says attaching. */
    char path[MAX_PATH * 2];
    snprintf(path, sizeof(path), "%s\\hcn\\half", state_dir);
    json_object *rec = json_object_from_file(path);
    ck_assert_ptr_nonnull(rec);
    json_object_object_add(rec, "state", json_object_new_string("attaching"));
    ck_assert_int_eq(json_object_to_file(path, rec), 0);
    json_object_put(rec);
    counts(&nets, &eps, &nss);
    ck_assert_int_eq(eps, eps0 + 3);

    static const char *const live[] = {"keep", "half", NULL};
    struct net_reconcile_stats rs = {0};
    n = net_start(false, live, &rs, NULL);
    ck_assert_uint_eq(rs.kept, 1);
    ck_assert_uint_eq(rs.released, 2);
    counts(&nets, &eps, &nss);
    ck_assert_int_eq(eps, eps0 + 1);
    ck_assert_int_eq(nss, nss0 + 1);
    ck_assert(!record_exists("gone"));
    ck_assert(!record_exists("half"));
    const struct net_attachment *k = net_attachment_find(n, "keep");
    ck_assert_ptr_nonnull(k);
    ck_assert_str_eq(k->netns_path, keep_ns);
    /* The MAC comes back from the record (a hyperv VM's adapter names it). */
    ck_assert_str_eq(k->mac, keep_mac);
    ck_assert_str_eq(k->ip, "10.77.0.2");
    /* A new container does not get the kept one's address. */
    const struct net_attachment *b = attach(n, "new", NULL, 0, false, &err);
    ck_assert_msg(b, "%s", err.msg);
    ck_assert_str_ne(b->ip, "10.77.0.2");
    detach_ok(n, "new");
    detach_ok(n, "keep");
    counts(&nets, &eps, &nss);
    ck_assert_int_eq(eps, eps0);
    ck_assert_int_eq(nss, nss0);
    close_net(n);
}
END_TEST

/* The double's export fn. */
static void *
dbl_fn(const char *fn)
{
    HMODULE m = GetModuleHandleA("computenetwork.dll");
    ck_assert_ptr_nonnull(m);
    void *f = (void *)GetProcAddress(m, fn);
    ck_assert_msg(f, "the double has no %s", fn);
    return f;
}

static void
guid_parse_ok(const char *s, GUID *g)
{
    unsigned d1, d2, d3, b[8];
    ck_assert_int_eq(sscanf(s, "%8x-%4x-%4x-%2x%2x-%2x%2x%2x%2x%2x%2x", &d1, &d2, &d3, &b[0], &b[1],
                            &b[2], &b[3], &b[4], &b[5], &b[6], &b[7]),
                     11);
    g->Data1 = d1, g->Data2 = (WORD)d2, g->Data3 = (WORD)d3;
    for (int i = 0; i < 8; i++)
        g->Data4[i] = (BYTE)b[i];
}

/* Does HNS (the double) have the endpoint id? */
static bool
endpoint_exists(const char *id)
{
    HRESULT(WINAPI * open)(REFGUID, PHCN_ENDPOINT, PWSTR *) = dbl_fn("HcnOpenEndpoint");
    HRESULT(WINAPI * close)(HCN_ENDPOINT) = dbl_fn("HcnCloseEndpoint");
    GUID g;
    guid_parse_ok(id, &g);
    HCN_ENDPOINT h = NULL;
    PWSTR rec = NULL;
    HRESULT hr = open(&g, &h, &rec);
    if (SUCCEEDED(hr))
        close(h);
    if (rec)
        CoTaskMemFree(rec);
    return SUCCEEDED(hr);
}

/* An endpoint named name on the network "hcnt", made by someone else than this root. */
static void
foreign_endpoint(const char *name, const char *id)
{
    HRESULT(WINAPI * enumerate)(PCWSTR, PWSTR *, PWSTR *) = dbl_fn("HcnEnumerateNetworks");
    HRESULT(WINAPI * open)(REFGUID, PHCN_NETWORK, PWSTR *) = dbl_fn("HcnOpenNetwork");
    HRESULT(WINAPI * create)
    (HCN_NETWORK, REFGUID, PCWSTR, PHCN_ENDPOINT, PWSTR *) = dbl_fn("HcnCreateEndpoint");
    HRESULT(WINAPI * close_net_h)(HCN_NETWORK) = dbl_fn("HcnCloseNetwork");
    HRESULT(WINAPI * close_ep)(HCN_ENDPOINT) = dbl_fn("HcnCloseEndpoint");
    PWSTR list = NULL, rec = NULL;
    ck_assert(SUCCEEDED(enumerate(L"{\"Filter\":\"{\\\"Name\\\":\\\"hcnt\\\"}\"}", &list, &rec)));
    char ids[128];
    WideCharToMultiByte(CP_UTF8, 0, list, -1, ids, sizeof(ids), NULL, NULL);
    CoTaskMemFree(list);
    char netid[40] = "";
    ck_assert_int_eq(sscanf(ids, "[\"%36[0-9a-f-]", netid), 1);
    GUID ng, eg;
    guid_parse_ok(netid, &ng);
    guid_parse_ok(id, &eg);
    HCN_NETWORK nh = NULL;
    HCN_ENDPOINT eh = NULL;
    ck_assert(SUCCEEDED(open(&ng, &nh, &rec)));
    char text[512];
    wchar_t doc[512];
    snprintf(text, sizeof(text), "{\"Name\":\"%s\",\"HostComputeNetwork\":\"%s\"}", name, netid);
    MultiByteToWideChar(CP_UTF8, 0, text, -1, doc, 512);
    ck_assert(SUCCEEDED(create(nh, &eg, doc, &eh, &rec)));
    close_ep(eh);
    close_net_h(nh);
}

/*
 * A daemon that left an endpoint in HNS with no record naming it (the
 * record lost: as if the crash came between HcnCreateEndpoint and the
 * record's write): the next start-up deletes that endpoint and its
 * namespace, because its name carries this root's tag, and leaves alone
 * endpoints of other roots on the same network, untagged ones and others'.
 */
START_TEST(the_reconciliation_deletes_this_roots_endpoints_that_no_record_names)
{
    int nets, eps0, nss0, eps, nss;
    struct net *n = net_start(false, NULL, NULL, NULL);
    char path[MAX_PATH * 2], owner[16] = "";
    snprintf(path, sizeof(path), "%s\\hcn\\.owner", state_dir);
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f, "no owner tag %s", path);
    ck_assert_int_eq(fscanf(f, "%15s", owner), 1);
    fclose(f);
    ck_assert_msg(hcn_owner_valid(owner), "owner tag %s", owner);
    struct err err = {0};
    const struct net_attachment *k = attach(n, "keep", NULL, 0, false, &err);
    ck_assert_msg(k, "%s", err.msg);
    char keep_ep[HCS_GUID_SIZE], lost_ep[HCS_GUID_SIZE], name[64];
    snprintf(keep_ep, sizeof(keep_ep), "%s", k->endpoint_id);
    const struct net_attachment *l = attach(n, "lost", NULL, 0, false, &err);
    ck_assert_msg(l, "%s", err.msg);
    snprintf(lost_ep, sizeof(lost_ep), "%s", l->endpoint_id);
    json_object *doc = last_doc("HcnCreateEndpoint");
    snprintf(name, sizeof(name), "lost-ep-%s", owner);
    ck_assert_str_eq(json_object_get_string(json_object_object_get(doc, "Name")), name);
    json_object_put(doc);
    close_net(n); /* a crash: HNS keeps both */
    snprintf(path, sizeof(path), "%s\\hcn\\lost", state_dir);
    ck_assert(DeleteFileA(path));

    /* Another root's on the same network (another tag), an untagged one, and not berth's. */
    char other[16];
    snprintf(other, sizeof(other), "%s", owner);
    other[0] = other[0] == 'a' ? 'b' : 'a';
    static const char other_ep[] = "0b5e0e57-0000-4000-8000-00000000f001",
                      plain_ep[] = "0b5e0e57-0000-4000-8000-00000000f002",
                      nat_ep[] = "0b5e0e57-0000-4000-8000-00000000f003";
    snprintf(name, sizeof(name), "lost-ep-%s", other);
    foreign_endpoint(name, other_ep);
    foreign_endpoint("lost-ep", plain_ep);
    foreign_endpoint("nat-sidecar", nat_ep);
    counts(&nets, &eps0, &nss0);

    static const char *const live[] = {"keep", "lost", NULL};
    struct net_reconcile_stats rs = {0};
    n = net_start(false, live, &rs, NULL);
    ck_assert_uint_eq(rs.kept, 1);
    ck_assert_uint_eq(rs.orphans, 1);
    ck_assert_int_ge(called("HcnEnumerateEndpoints"), 1);
    ck_assert_msg(!endpoint_exists(lost_ep), "the endpoint no record names is still there");
    counts(&nets, &eps, &nss);
    ck_assert_int_eq(eps, eps0 - 1);
    ck_assert_int_eq(nss, nss0 - 1); /* its namespace went with it */
    ck_assert(endpoint_exists(keep_ep));
    ck_assert(endpoint_exists(other_ep));
    ck_assert(endpoint_exists(plain_ep));
    ck_assert(endpoint_exists(nat_ep));
    ck_assert_ptr_nonnull(net_attachment_find(n, "keep"));
    ck_assert_ptr_null(net_attachment_find(n, "lost"));
    /* The tag stays the root's across starts. */
    snprintf(path, sizeof(path), "%s\\hcn\\.owner", state_dir);
    f = fopen(path, "rb");
    char again[16] = "";
    ck_assert(f && fscanf(f, "%15s", again) == 1);
    fclose(f);
    ck_assert_str_eq(again, owner);
    detach_ok(n, "keep");
    ck_assert(!endpoint_exists(keep_ep));
    close_net(n);
}
END_TEST

START_TEST(without_computenetwork_dll_networks_fail_and_loopback_only_containers_work)
{
    char missing[MAX_PATH * 2];
    snprintf(missing, sizeof(missing), "%s\\none\\computenetwork.dll", tmp_dir);
    env_put("BERTH_TEST_HCN_DLL", missing);
    struct err rerr = {0};
    struct net *n = net_start(false, NULL, NULL, &rerr);
    ck_assert_msg(rerr.code != 0 && strstr(rerr.msg, "computenetwork.dll"), "%s", rerr.msg);
    ck_assert_ptr_nonnull(net_setup_error(n));
    struct err err = {0};
    ck_assert_ptr_null(attach(n, "c1", NULL, 0, false, &err));
    ck_assert_int_eq(err.code, ERR_UNAVAILABLE);
    ck_assert_msg(strstr(err.msg, "computenetwork.dll"), "%s", err.msg);
    ck_assert(!record_exists("c1"));
    const struct net_attachment *a = attach(n, "lo", NULL, 0, true, &err);
    ck_assert_msg(a, "%s", err.msg);
    ck_assert(a->disabled);
    ck_assert_ptr_null(a->netns_path);
    ck_assert_str_eq(a->ip, "");
    struct net_probe *p = net_probe_new(n);
    struct net_health h;
    net_probe_run(p, &h);
    ck_assert(!h.usable && !h.disabled);
    ck_assert_msg(strstr(h.reason, "computenetwork.dll"), "%s", h.reason);
    net_probe_free(p);
    detach_ok(n, "lo");
    close_net(n);
}
END_TEST

START_TEST(network_none_attaches_loopback_only_and_the_probe_says_disabled)
{
    int nets0, eps0, nss0, nets, eps, nss;
    counts(&nets0, &eps0, &nss0);
    struct net *n = net_start(true, NULL, NULL, NULL);
    struct err err = {0};
    struct net_port ports[] = {{.host = 0, .container = 80, .proto = NET_PROTO_TCP}};
    const struct net_attachment *a = attach(n, "c", ports, 1, false, &err);
    ck_assert_msg(a, "%s", err.msg);
    ck_assert(a->disabled);
    ck_assert_uint_eq(a->nports, 0);
    counts(&nets, &eps, &nss);
    ck_assert_int_eq(eps, eps0);
    struct net_probe *p = net_probe_new(n);
    struct net_health h;
    net_probe_run(p, &h);
    ck_assert(h.disabled && !h.usable);
    net_probe_free(p);
    /* Its record brings it back after a restart. */
    close_net(n);
    static const char *const live[] = {"c", NULL};
    struct net_reconcile_stats rs = {0};
    n = net_start(true, live, &rs, NULL);
    ck_assert_uint_eq(rs.kept, 1);
    ck_assert_ptr_nonnull(net_attachment_find(n, "c"));
    detach_ok(n, "c");
    ck_assert(!record_exists("c"));
    close_net(n);
}
END_TEST

START_TEST(the_probe_reports_the_network_usable_then_missing)
{
    struct net *n = net_start(false, NULL, NULL, NULL);
    struct net_probe *p = net_probe_new(n);
    struct net_health h;
    net_probe_run(p, &h);
    ck_assert_msg(h.usable, "%s", h.reason);
    struct result r = {0};
    struct err err = {0};
    ck_assert_int_eq(net_teardown(n, done_cb, &r, &err), 0);
    run_until(&r);
    ck_assert_msg(r.err.code == 0, "%s", r.err.msg);
    net_probe_run(p, &h);
    ck_assert(!h.usable);
    ck_assert_msg(strstr(h.reason, "hcnt") && strstr(h.reason, "missing"), "%s", h.reason);
    net_probe_free(p);
    close_net(n);
}
END_TEST

/* The value at path (NULL-terminated keys; a number indexes an array) in o, or NULL. */
static const char *
doc_str(json_object *o, const char *const *path)
{
    for (size_t i = 0; o && path[i]; i++) {
        if (json_object_is_type(o, json_type_array))
            o = json_object_array_get_idx(o, (size_t)atoi(path[i]));
        else if (!json_object_object_get_ex(o, path[i], &o))
            o = NULL;
    }
    return o ? json_object_get_string(o) : NULL;
}

START_TEST(net_ipam_get_reports_the_pool_and_gateway_the_network_was_made_with)
{
    struct net_opts o = {
        .state_dir = state_dir, .name = "hcnt", .pool = "10.77.0.0/24", .gateway = "10.77.0.254"};
    struct net *n = NULL;
    struct err err = {0};
    ck_assert_msg(net_new(&loop, jobs, &o, &n, &err) == 0, "%s", err.msg);
    struct result r = {0};
    ck_assert_msg(net_reconcile(n, NULL, 0, reconcile_cb, &r, &err) == 0, "%s", err.msg);
    run_until(&r);
    ck_assert_msg(r.err.code == 0, "reconcile: %s", r.err.msg);
    struct net_ipam ipam;
    net_ipam_get(n, &ipam);
    ck_assert_str_eq(ipam.name, "hcnt");
    ck_assert_uint_eq(ipam.npools, 1);
    ck_assert_str_eq(ipam.pools[0].subnet, "10.77.0.0/24");
    ck_assert_str_eq(ipam.pools[0].gateway, "10.77.0.254");
    /* What HNS was given, and what a container gets. */
    json_object *doc = last_doc("HcnCreateNetwork");
    ck_assert_str_eq(
        doc_str(doc, (const char *[]){"Ipams", "0", "Subnets", "0", "IpAddressPrefix", NULL}),
        ipam.pools[0].subnet);
    ck_assert_str_eq(doc_str(doc, (const char *[]){"Ipams", "0", "Subnets", "0", "Routes", "0",
                                                   "NextHop", NULL}),
                     ipam.pools[0].gateway);
    json_object_put(doc);
    const struct net_attachment *a = attach(n, "web", NULL, 0, false, &err);
    ck_assert_msg(a, "attach: %s", err.msg);
    ck_assert_str_eq(a->gateway, ipam.pools[0].gateway);
    detach_ok(n, "web");
    /* The next tests' hcnt has the default gateway: this one would be refused. */
    r = (struct result){0};
    ck_assert_int_eq(net_teardown(n, done_cb, &r, &err), 0);
    run_until(&r);
    ck_assert_msg(r.err.code == 0, "teardown: %s", r.err.msg);
    close_net(n);
}
END_TEST

/* ---- a network of that name made beforehand ---- */

/* A network made by someone else than berth, from document (its Name in it), with id. */
static void
foreign_network(const char *id, const char *document)
{
    HRESULT(WINAPI * create)(REFGUID, PCWSTR, PHCN_NETWORK, PWSTR *) = dbl_fn("HcnCreateNetwork");
    HRESULT(WINAPI * close_net_h)(HCN_NETWORK) = dbl_fn("HcnCloseNetwork");
    GUID g;
    guid_parse_ok(id, &g);
    wchar_t doc[1024];
    ck_assert(MultiByteToWideChar(CP_UTF8, 0, document, -1, doc, 1024) > 0);
    HCN_NETWORK h = NULL;
    PWSTR rec = NULL;
    ck_assert(SUCCEEDED(create(&g, doc, &h, &rec)));
    close_net_h(h);
}

/* Does HNS (the double) still have the network id? Deletes it when delete is set. */
static bool
network_exists(const char *id, bool delete)
{
    HRESULT(WINAPI * open)(REFGUID, PHCN_NETWORK, PWSTR *) = dbl_fn("HcnOpenNetwork");
    HRESULT(WINAPI * close_net_h)(HCN_NETWORK) = dbl_fn("HcnCloseNetwork");
    HRESULT(WINAPI * del)(REFGUID, PWSTR *) = dbl_fn("HcnDeleteNetwork");
    GUID g;
    guid_parse_ok(id, &g);
    HCN_NETWORK h = NULL;
    PWSTR rec = NULL;
    HRESULT hr = open(&g, &h, &rec);
    if (SUCCEEDED(hr))
        close_net_h(h);
    if (rec)
        CoTaskMemFree(rec);
    if (SUCCEEDED(hr) && delete)
        ck_assert(SUCCEEDED(del(&g, &rec)));
    return SUCCEEDED(hr);
}

/* A NAT network's document as HNS keeps one: name, type (as written), subnet and next hop. */
static void
network_doc(char *out, size_t size, const char *name, const char *type, const char *subnet,
            const char *next_hop)
{
    snprintf(out, size,
             "{\"SchemaVersion\":{\"Major\":2,\"Minor\":0},\"Name\":\"%s\",\"Type\":\"%s\","
             "\"Flags\":0,\"Ipams\":[{\"Type\":\"Static\",\"Subnets\":[{\"IpAddressPrefix\":"
             "\"%s\",\"Routes\":[{\"NextHop\":\"%s\",\"DestinationPrefix\":\"0.0.0.0/0\"}]}]}]}",
             name, type, subnet, next_hop);
}

/* net_new for the network name on 10.77.0.0/24 (gateway 10.77.0.1), and its start-up. */
static struct net *
net_start_named(const char *name, struct err *out_err)
{
    struct net_opts o = {.state_dir = state_dir, .name = name, .pool = "10.77.0.0/24"};
    struct net *n = NULL;
    struct err err = {0};
    ck_assert_msg(net_new(&loop, jobs, &o, &n, &err) == 0, "%s", err.msg);
    struct result r = {0};
    ck_assert_msg(net_reconcile(n, NULL, 0, reconcile_cb, &r, &err) == 0, "%s", err.msg);
    run_until(&r);
    *out_err = r.err;
    return n;
}

/* The setup refused the network: its error is why, attaches get it, health says it. */
static void
assert_refused(struct net *n, const struct err *setup, const char *why)
{
    ck_assert_msg(setup->code != 0 && strstr(setup->msg, why), "setup: %s", setup->msg);
    const struct err *kept = net_setup_error(n);
    ck_assert_ptr_nonnull(kept);
    ck_assert_msg(strstr(kept->msg, why), "kept: %s", kept->msg);
    struct err err = {0};
    ck_assert_ptr_null(attach(n, "c1", NULL, 0, false, &err));
    ck_assert_int_eq(err.code, ERR_UNAVAILABLE);
    ck_assert_msg(strstr(err.msg, why), "attach: %s", err.msg);
    ck_assert(!record_exists("c1"));
    struct net_probe *p = net_probe_new(n);
    struct net_health h;
    net_probe_run(p, &h);
    ck_assert(!h.usable);
    ck_assert_msg(strstr(h.reason, why), "health: %s", h.reason);
    net_probe_free(p);
    /* Nothing was made on it, nor was it deleted: it is not berth's. */
    ck_assert_int_eq(called("HcnCreateNetwork"), 1); /* the test's own */
    ck_assert_int_eq(called("HcnCreateEndpoint"), 0);
    ck_assert_int_eq(called("HcnDeleteNetwork"), 0);
}

START_TEST(a_network_of_that_name_with_another_subnet_fails_the_setup_naming_both)
{
    static const char id[] = "0b5e0e57-0000-4000-8000-00000000a001";
    char doc[1024];
    network_doc(doc, sizeof(doc), "hcnsub", "NAT", "10.9.0.0/24", "10.9.0.1");
    foreign_network(id, doc);
    struct err setup = {0};
    struct net *n = net_start_named("hcnsub", &setup);
    assert_refused(n, &setup,
                   "hcn network hcnsub has the subnet 10.9.0.0/24 and gateway 10.9.0.1, not "
                   "--network-pool 10.77.0.0/24 --network-gateway 10.77.0.1 (remove it, or choose "
                   "another --network-name, --network-pool or --network-gateway)");
    ck_assert_int_eq(setup.code, EEXIST);
    /* Asked as hcsshim asks, in schema 2.0. */
    json_object *q = last_doc("HcnQueryNetworkProperties");
    ck_assert_int_eq(json_object_get_int(json_object_object_get(
                         json_object_object_get(q, "SchemaVersion"), "Major")),
                     2);
    json_object_put(q);
    /* A teardown leaves it too: the setup never made it berth's. */
    struct result r = {0};
    struct err err = {0};
    ck_assert_int_eq(net_teardown(n, done_cb, &r, &err), 0);
    run_until(&r);
    close_net(n);
    ck_assert(network_exists(id, true));
}
END_TEST

START_TEST(a_network_of_that_name_and_another_type_is_refused)
{
    static const char id[] = "0b5e0e57-0000-4000-8000-00000000a002";
    char doc[1024];
    network_doc(doc, sizeof(doc), "hcntype", "Transparent", "10.77.0.0/24", "10.77.0.1");
    foreign_network(id, doc);
    struct err setup = {0};
    struct net *n = net_start_named("hcntype", &setup);
    assert_refused(n, &setup, "hcn network hcntype is a Transparent network, not NAT");
    close_net(n);
    ck_assert(network_exists(id, true));
}
END_TEST

START_TEST(a_network_of_that_name_whose_properties_lack_a_field_is_refused_naming_it)
{
    static const char id[] = "0b5e0e57-0000-4000-8000-00000000a003";
    foreign_network(id, "{\"Name\":\"hcnbad\",\"Type\":\"NAT\",\"Ipams\":[{\"Type\":\"Static\"}]}");
    struct err setup = {0};
    struct net *n = net_start_named("hcnbad", &setup);
    assert_refused(n, &setup, "field \"Ipams[0].Subnets\": required");
    ck_assert_int_eq(setup.code, EIO);
    close_net(n);
    ck_assert(network_exists(id, true));
}
END_TEST

START_TEST(a_nat_network_of_the_pool_and_gateway_made_beforehand_is_adopted)
{
    /* Made by someone else, as HNS may write it ("nat"). */
    static const char id[] = "0b5e0e57-0000-4000-8000-00000000a004";
    char doc[1024];
    network_doc(doc, sizeof(doc), "hcnsame", "nat", "10.77.0.0/24", "10.77.0.1");
    foreign_network(id, doc);
    struct err setup = {0};
    struct net *n = net_start_named("hcnsame", &setup);
    ck_assert_msg(setup.code == 0, "setup: %s", setup.msg);
    ck_assert_int_eq(called("HcnCreateNetwork"), 1); /* the test's own */
    ck_assert_int_ge(called("HcnQueryNetworkProperties"), 1);
    struct err err = {0};
    const struct net_attachment *a = attach(n, "web", NULL, 0, false, &err);
    ck_assert_msg(a, "attach: %s", err.msg);
    json_object *ep = last_doc("HcnCreateEndpoint");
    ck_assert_str_eq(json_object_get_string(json_object_object_get(ep, "HostComputeNetwork")), id);
    json_object_put(ep);
    detach_ok(n, "web");
    close_net(n);
    ck_assert(network_exists(id, true));

    /* Made by an earlier berth run: the next start finds the same one. */
    n = net_start_named("hcnrun", &setup);
    ck_assert_msg(setup.code == 0, "first run: %s", setup.msg);
    close_net(n);
    ck_assert_int_eq(called("HcnCreateNetwork"), 2);
    int queried = called("HcnQueryNetworkProperties");
    n = net_start_named("hcnrun", &setup);
    ck_assert_msg(setup.code == 0, "second run: %s", setup.msg);
    ck_assert_int_eq(called("HcnCreateNetwork"), 2);
    ck_assert_int_gt(called("HcnQueryNetworkProperties"), queried);
    struct result r = {0};
    ck_assert_int_eq(net_teardown(n, done_cb, &r, &err), 0);
    run_until(&r);
    ck_assert_msg(r.err.code == 0, "teardown: %s", r.err.msg);
    close_net(n);
}
END_TEST

/* A reconciliation whose callback begins a setup: that setup is not the
 * one that just ended, and its caller hears of its own end. */
struct setup_in_cb {
    struct result r, again;
    struct net *n;
};

static void
reconcile_then_setup_cb(void *arg, const struct net_reconcile_stats *st, const struct err *err)
{
    struct setup_in_cb *s = arg;
    reconcile_cb(&s->r, st, err);
    struct err e = {0};
    ck_assert_msg(net_setup(s->n, done_cb, &s->again, &e) == 0, "%s", e.msg);
}

START_TEST(a_setup_begun_from_the_last_ones_callback_ends_for_its_own_caller)
{
    struct setup_in_cb s = {.n = net_open(false)};
    struct err err = {0};
    ck_assert_msg(net_reconcile(s.n, NULL, 0, reconcile_then_setup_cb, &s, &err) == 0, "%s",
                  err.msg);
    run_until(&s.r);
    bool given_the_first = s.again.done;
    run_until(&s.again);
    close_net(s.n); /* waits for the second setup, whoever heard of it */
    ck_assert_msg(s.r.err.code == 0, "reconcile: %s", s.r.err.msg);
    ck_assert_msg(!given_the_first, "the second setup's caller was given the first one's end");
    ck_assert_msg(s.again.err.code == 0, "setup: %s", s.again.err.msg);
}
END_TEST

/* A setup whose caller begins another, which fails: an attach that waited
 * for the first goes on with the first one's success, not the second's end. */
static void
setup_then_failing_setup_cb(void *arg, const struct err *err)
{
    struct setup_in_cb *s = arg;
    done_cb(&s->r, err);
    env_put("BERTH_HCN_DOUBLE_FAIL", "query-network,create-network");
    struct err e = {0};
    ck_assert_msg(net_setup(s->n, done_cb, &s->again, &e) == 0, "%s", e.msg);
}

START_TEST(a_waiter_of_a_setup_that_succeeded_attaches_though_the_next_one_fails)
{
    struct setup_in_cb s = {.n = net_open(false)};
    struct err err = {0};
    ck_assert_msg(net_setup(s.n, setup_then_failing_setup_cb, &s, &err) == 0, "%s", err.msg);
    struct result a = {0};
    struct net_attach_req req = {.handle = "web"};
    ck_assert_msg(net_attach(s.n, &req, attach_cb, &a, &err) == 0, "%s", err.msg);
    run_until(&s.r);
    run_until(&s.again);
    run_until(&a);
    ck_assert_msg(s.r.err.code == 0, "setup: %s", s.r.err.msg);
    ck_assert_msg(s.again.err.code != 0, "the second setup did not fail");
    ck_assert_msg(a.a, "attach: %s", a.err.msg);
    ck_assert_str_eq(a.a->ip, "10.77.0.2");
    env_put("BERTH_HCN_DOUBLE_FAIL", NULL);
    detach_ok(s.n, "web");
    close_net(s.n);
}
END_TEST

START_TEST(bad_requests_and_options_are_refused_with_the_value)
{
    struct net *n = net_start(false, NULL, NULL, NULL);
    struct err err = {0};
    struct net_port zero[] = {{.host = 1, .container = 0, .proto = NET_PROTO_TCP}};
    struct result r = {0};
    struct net_attach_req req = {.handle = "x", .ports = zero, .nports = 1};
    ck_assert_int_eq(net_attach(n, &req, attach_cb, &r, &err), -EINVAL);
    ck_assert_msg(strstr(err.msg, "ports[0].container"), "%s", err.msg);
    req = (struct net_attach_req){.handle = "bad/handle"};
    ck_assert_int_eq(net_attach(n, &req, attach_cb, &r, &err), -EINVAL);
    close_net(n);
    struct net_opts o = {.state_dir = state_dir, .pool = "10.0.0.0/7"};
    struct net *m = NULL;
    ck_assert_int_eq(net_new(&loop, jobs, &o, &m, &err), -EINVAL);
    ck_assert_msg(strstr(err.msg, "prefix"), "%s", err.msg);
    o = (struct net_opts){.state_dir = state_dir, .cni_config_dir = "C:\\cni"};
    ck_assert_int_eq(net_new(&loop, jobs, &o, &m, &err), -EINVAL);
    ck_assert_msg(strstr(err.msg, "Linux only"), "%s", err.msg);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("net_hcn");
    TCase *tc = tcase_create("hcn");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc,
                   attach_gives_an_endpoint_namespace_address_and_ports_and_detach_removes_them);
    tcase_add_test(tc, a_failure_at_each_hcn_step_leaves_nothing_in_hns_nor_on_disk);
    tcase_add_test(tc, the_reconciliation_keeps_live_networks_and_deletes_the_rest_after_a_crash);
    tcase_add_test(tc, the_reconciliation_deletes_this_roots_endpoints_that_no_record_names);
    tcase_add_test(tc, without_computenetwork_dll_networks_fail_and_loopback_only_containers_work);
    tcase_add_test(tc, network_none_attaches_loopback_only_and_the_probe_says_disabled);
    tcase_add_test(tc, the_probe_reports_the_network_usable_then_missing);
    tcase_add_test(tc, net_ipam_get_reports_the_pool_and_gateway_the_network_was_made_with);
    tcase_add_test(tc, a_network_of_that_name_with_another_subnet_fails_the_setup_naming_both);
    tcase_add_test(tc, a_network_of_that_name_and_another_type_is_refused);
    tcase_add_test(tc, a_network_of_that_name_whose_properties_lack_a_field_is_refused_naming_it);
    tcase_add_test(tc, a_nat_network_of_the_pool_and_gateway_made_beforehand_is_adopted);
    tcase_add_test(tc, a_setup_begun_from_the_last_ones_callback_ends_for_its_own_caller);
    tcase_add_test(tc, a_waiter_of_a_setup_that_succeeded_attaches_though_the_next_one_fails);
    tcase_add_test(tc, bad_requests_and_options_are_refused_with_the_value);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
