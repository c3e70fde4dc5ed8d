/*
 * What the parts of the OCI document parser share (oci.c: descriptors,
 * indexes, manifests; oci_config.c; oci_select.c; oci_docker.c). Not for
 * other modules. Pure functions; any thread.
 */
#ifndef BERTH_STORE_OCI_INT_H
#define BERTH_STORE_OCI_INT_H

#include "jsonutil/doc.h"
#include "store/oci.h"

/* Validates a digest string into out: sha256 and 64 lowercase hex digits
 * only; otherwise fails d naming field. */
int oci_doc_digest_value(const struct jsonutil_doc *d, const char *field, const char *s,
                         char out[OCI_DIGEST_MAX]);

/* The media type of a layer of that compression, or NULL for none. */
const char *oci_layer_media_type(enum oci_layer_compression c);

static inline void
oci_index_freep(struct oci_index **p)
{
    oci_index_free(*p);
}

#endif
