/*
 * computenetwork.dll (HCN), loaded at run time as computecore.dll is
 * (hcs_api.h: an .exe that imported it would not start where it is
 * absent, Wine included), and the three things berth does with it:
 * find its NAT network by name (checked against the flags) or create
 * it, give a container an endpoint in a namespace of its own, and take
 * them away again. The documents are doc_network.h's; HNS's answers
 * about a network are read by hcn_props.h.
 *
 * Ids: berth makes every endpoint's and namespace's GUID itself
 * (hcs_guid_random) and passes it to HcnCreate*, so it knows them
 * without a property query and can delete them after a crash from its
 * own records. A failure's HRESULT and HNS's error record come back in
 * err (hresult.h), its code mapped to an errno. Every call blocks until
 * HNS answers: pool threads only.
 *
 * Test builds (BERTH_TEST_HOOKS) can load the TEST DOUBLE in
 * tests/doubles/computenetwork/: hcn_api_open() with a path, or with NULL
 * and BERTH_TEST_HCN_DLL set to one. Other builds load only
 * %SystemRoot%\System32\computenetwork.dll and refuse a path. The
 * implementation, hcn_api_win.c, is built only for Windows.
 */
#ifndef BERTH_RUNTIME_HCS_HCN_API_H
#define BERTH_RUNTIME_HCS_HCN_API_H

#include <stdbool.h>

#include "common/err.h"
#include "runtime/hcs/doc_network.h"
#include "runtime/hcs/guid.h"

struct hcn_api;

/* ERR_UNAVAILABLE naming what is missing when the DLL or an export is absent. */
int hcn_api_open(const char *dll_path, struct hcn_api **out, struct err *err);
void hcn_api_free(struct hcn_api *api);

/* The id of the network named name, as HcnEnumerateNetworks finds it (*found says whether). */
int hcn_network_find(struct hcn_api *api, const char *name, char id[HCS_GUID_SIZE], bool *found,
                     struct err *err);

/*
 * The properties of the network id match want (hcn_props.h): a NAT
 * network of want->pool with want->gateway as its next hop. 0; EEXIST
 * naming what it is and what want asks for when not; EIO naming the field
 * when HNS's answer is not a network's; HNS's error when it has no such
 * network.
 */
int hcn_network_check(struct hcn_api *api, const char *id, const struct hcn_network_doc *want,
                      struct err *err);

/*
 * The id of the network named doc->name: the one HcnEnumerateNetworks
 * finds by that name if hcn_network_check says it is doc's (else its
 * EEXIST, and the network is left as it is: it is not berth's to
 * delete), or a new one made from doc (*created says which).
 */
int hcn_network_ensure(struct hcn_api *api, const struct hcn_network_doc *doc,
                       char id[HCS_GUID_SIZE], bool *created, struct err *err);

/* Deletes the network id; one already gone is success. */
int hcn_network_delete(struct hcn_api *api, const char *id, struct err *err);

#define HCN_MAC_SIZE 18 /* "00-15-5D-12-34-56" and a NUL */

/* What a container has of the network. */
struct hcn_attachment {
    char endpoint_id[HCS_GUID_SIZE];
    char namespace_id[HCS_GUID_SIZE]; /* Networking.Namespace of its compute system */
    char mac[HCN_MAC_SIZE];           /* the endpoint's, as HNS assigned it ("00-15-5D-..") */
};

/*
 * Creates the container's endpoint on ep->network_id and a host
 * namespace, and adds the endpoint to it. The ids are out's when both are
 * set on the way in (the daemon chooses them first and records them
 * before anything exists, so that it can delete them after a crash), else
 * made here; out->mac is what HNS assigned (a properties query). When a
 * step fails, what the earlier ones made is deleted before the error
 * comes back, so a failed create leaves nothing in HNS.
 */
int hcn_container_attach(struct hcn_api *api, const struct hcn_endpoint_doc *ep,
                         struct hcn_attachment *out, struct err *err);

/*
 * Removes the endpoint from the namespace and deletes both. Idempotent:
 * what is already gone is success (a delete after a crash, or twice).
 */
int hcn_container_detach(struct hcn_api *api, const struct hcn_attachment *a, struct err *err);

/* An endpoint HNS has, as its properties say. */
struct hcn_endpoint_info {
    char id[HCS_GUID_SIZE];
    char name[192];
    char namespace_id[HCS_GUID_SIZE]; /* HostComputeNamespace, "" when in none */
};

/*
 * The endpoints on network_id (HcnEnumerateEndpoints, then each one's
 * properties, as hcsshim's ListEndpointsOfNetwork). One that went away
 * in between is left out. Caller frees *out.
 */
int hcn_network_endpoints(struct hcn_api *api, const char *network_id,
                          struct hcn_endpoint_info **out, size_t *n, struct err *err);

/* Deletes ep and the namespace it is in (removed from it first); what is gone is success. */
int hcn_endpoint_release(struct hcn_api *api, const struct hcn_endpoint_info *ep, struct err *err);

#endif
