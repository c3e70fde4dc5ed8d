/*
 * A utility VM's network adapter and namespace requests (doc_nic.h).
 * Pure json-c construction; any thread.
 */
#include "runtime/hcs/doc_nic.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "runtime/hcs/doc_request.h"
#include "runtime/hcs/guid.h"

#define NIC_PATH "VirtualMachine/Devices/NetworkAdapters"

static void
add_str(json_object *o, const char *key, const char *v)
{
    json_object_object_add(o, key, json_object_new_string(v));
}

/* "00-15-5D-12-34-56" (or with colons): six hex pairs. */
static bool
mac_valid(const char *m)
{
    if (!m || strlen(m) != 17)
        return false;
    for (int i = 0; i < 17; i++) {
        bool hex = (m[i] >= '0' && m[i] <= '9') || (m[i] >= 'a' && m[i] <= 'f') ||
                   (m[i] >= 'A' && m[i] <= 'F');
        if (i % 3 == 2 ? (m[i] != '-' && m[i] != ':') : !hex)
            return false;
    }
    return true;
}

static int
nic_check(const struct hcs_nic *n, struct err *err)
{
    if (!n || !hcs_guid_valid(n->endpoint_id))
        return err_set(err, EINVAL, "network adapter: endpoint %.64s is not a GUID",
                       n && n->endpoint_id ? n->endpoint_id : "(null)");
    if (!hcs_guid_valid(n->namespace_id))
        return err_set(err, EINVAL, "network adapter %s: namespace %.64s is not a GUID",
                       n->endpoint_id, n->namespace_id ? n->namespace_id : "(null)");
    if (!mac_valid(n->mac))
        return err_set(err, EINVAL, "network adapter %s: mac %.64s is not six hex pairs",
                       n->endpoint_id, n->mac ? n->mac : "(null)");
    return 0;
}

/* A request for the guest only: {"GuestRequest": ...}. */
static json_object *
guest_only(const char *rtype, const char *type, json_object *settings)
{
    json_object *o = json_object_new_object();
    json_object_object_add(o, "GuestRequest", hcs_guest_request(rtype, type, settings));
    return o;
}

/* The HCN namespace as the guest takes it: its id, and the endpoint in it. */
static json_object *
netns_request(const struct hcs_nic *n, const char *type, struct err *err)
{
    if (nic_check(n, err) < 0)
        return NULL;
    json_object *ver = json_object_new_object();
    json_object_object_add(ver, "Major", json_object_new_int(2));
    json_object_object_add(ver, "Minor", json_object_new_int(0));
    json_object *data = json_object_new_object();
    add_str(data, "Id", n->endpoint_id);
    json_object *res = json_object_new_object();
    add_str(res, "Type", "Endpoint");
    json_object_object_add(res, "Data", data);
    json_object *resources = json_object_new_array();
    json_object_array_add(resources, res);
    json_object *ns = json_object_new_object();
    add_str(ns, "Id", n->namespace_id);
    add_str(ns, "Type", "HostDefault");
    json_object_object_add(ns, "SchemaVersion", ver);
    json_object_object_add(ns, "Resources", resources);
    return guest_only("NetworkNamespace", type, ns);
}

json_object *
hcs_req_netns_add(const struct hcs_nic *n, struct err *err)
{
    return netns_request(n, "Add", err);
}

json_object *
hcs_req_netns_remove(const struct hcs_nic *n, struct err *err)
{
    return netns_request(n, "Remove", err);
}

/* {"AdapterId": id, "RequestType": type[, "Settings": settings]}. */
static json_object *
adapter_request(const struct hcs_nic *n, const char *type, json_object *settings)
{
    json_object *s = json_object_new_object();
    add_str(s, "AdapterId", n->endpoint_id);
    add_str(s, "RequestType", type);
    if (settings)
        json_object_object_add(s, "Settings", settings);
    return s;
}

json_object *
hcs_req_nic_preadd(const struct hcs_nic *n, struct err *err)
{
    if (nic_check(n, err) < 0)
        return NULL;
    json_object *ep = json_object_new_object();
    add_str(ep, "ID", n->endpoint_id);
    add_str(ep, "MacAddress", n->mac);
    if (n->ip && n->ip[0]) {
        add_str(ep, "IPAddress", n->ip);
        json_object_object_add(ep, "PrefixLength", json_object_new_int((int)n->prefix));
    }
    if (n->gateway && n->gateway[0])
        add_str(ep, "GatewayAddress", n->gateway);
    return guest_only("Network", "Add", adapter_request(n, "PreAdd", ep));
}

static json_object *
nic_request(const struct hcs_nic *n, const char *type, struct err *err)
{
    if (nic_check(n, err) < 0)
        return NULL;
    char path[sizeof(NIC_PATH) + HCS_GUID_SIZE + 1];
    snprintf(path, sizeof(path), "%s/%s", NIC_PATH, n->endpoint_id);
    json_object *o = json_object_new_object();
    add_str(o, "ResourcePath", path);
    add_str(o, "RequestType", type);
    json_object *s = json_object_new_object();
    add_str(s, "EndpointId", n->endpoint_id);
    add_str(s, "MacAddress", n->mac);
    json_object_object_add(o, "Settings", s);
    json_object_object_add(o, "GuestRequest",
                           hcs_guest_request("Network", type, adapter_request(n, type, NULL)));
    return o;
}

json_object *
hcs_req_nic_add(const struct hcs_nic *n, struct err *err)
{
    return nic_request(n, "Add", err);
}

json_object *
hcs_req_nic_remove(const struct hcs_nic *n, struct err *err)
{
    return nic_request(n, "Remove", err);
}
