/*
 * daemon/layer_format.h on Linux: image layers are overlay lower
 * directories, whatever the runtime; --layer-format is a Windows flag
 * (config.c refuses it with any runtime but hcs). Main, before the loop.
 */
#include "daemon/layer_format.h"

int
layer_format_resolve(struct config *cfg, struct err *err)
{
    (void)err;
    cfg->layer_format_used = "overlay";
    return 0;
}
