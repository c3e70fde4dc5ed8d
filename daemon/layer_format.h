/*
 * The layer format berthd runs with, decided once at start-up from
 * --layer-format (store/cim_format.h has the rule): on Windows "auto"
 * becomes cimfs or wcifs by the host's build and whether cimfs.dll
 * loads, and an explicit cimfs that the host cannot run fails the start
 * with the reason; on Linux it is always the overlay (the flag is
 * refused there by config.c). The result is cfg->layer_format_used,
 * which /v1/health reports as store.layer_format.
 *
 * Blocking (it loads a DLL); main only, before the loop runs.
 */
#ifndef BERTH_DAEMON_LAYER_FORMAT_H
#define BERTH_DAEMON_LAYER_FORMAT_H

#include "common/err.h"
#include "daemon/config.h"

int layer_format_resolve(struct config *cfg, struct err *err);

#endif
