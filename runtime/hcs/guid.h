/*
 * GUIDs as the HCS documents spell them: 36 characters, lowercase hex,
 * "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", no braces. Layer ids, network
 * namespace ids and SCSI controller keys are GUIDs; HCS compares them as
 * GUIDs, so the case of the hex digits does not matter to it, but ours
 * are always lowercase so that documents compare equal as text.
 *
 * Pure computation (SHA-1 and the random source are OpenSSL's); any thread.
 */
#ifndef BERTH_RUNTIME_HCS_GUID_H
#define BERTH_RUNTIME_HCS_GUID_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

#define HCS_GUID_LEN 36
#define HCS_GUID_SIZE (HCS_GUID_LEN + 1)

/* A GUID in RFC 4122 byte order (the order its text is written in). */
struct hcs_guid {
    uint8_t b[16];
};

/*
 * The namespace of berth's layer ids: hcs_guid_layer() is the version 5
 * GUID of a layer's name in it. A fixed value, so a layer keeps its id
 * across containers and daemon restarts, as hcsshim's NameToGuid ids do.
 */
extern const struct hcs_guid HCS_GUID_LAYER_NS;

/* Writes g as 36 lowercase characters and a NUL into out (HCS_GUID_SIZE bytes). */
void hcs_guid_format(const struct hcs_guid *g, char out[HCS_GUID_SIZE]);

/*
 * Parses "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (either case, no braces).
 * EINVAL with the offending text otherwise.
 */
int hcs_guid_parse(const char *s, struct hcs_guid *out, struct err *err);

/* Is s a GUID as hcs_guid_parse() takes it? */
bool hcs_guid_valid(const char *s);

/*
 * The RFC 4122 version 5 (SHA-1) GUID of name in namespace ns.
 * hcs_guid_v5(ns "d422512d-2bf2-4752-809d-7b82b5fcb1b4", "0") is hcsshim's
 * first SCSI controller key, df6d0690-79e5-55b6-a5ec-c1e2f77f580a. ENOMEM when
 * OpenSSL cannot make a digest context.
 */
int hcs_guid_v5(const struct hcs_guid *ns, const void *name, size_t len, struct hcs_guid *out,
                struct err *err);

/* The id of the layer called name (its chain ID): v5 in HCS_GUID_LAYER_NS, as text. */
int hcs_guid_layer(const char *name, char out[HCS_GUID_SIZE], struct err *err);

/* A random (version 4) GUID. EIO when the random source fails. */
int hcs_guid_random(struct hcs_guid *out, struct err *err);

/* Fills buf with len cryptographically random bytes. EIO when the source fails. */
int hcs_random_bytes(void *buf, size_t len, struct err *err);

#endif
