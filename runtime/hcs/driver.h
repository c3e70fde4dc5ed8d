/*
 * The hcs driver's table (rt_hcs_driver, registered by runtime/driver.c
 * on Windows builds) and what the daemon and the tests may ask of its
 * context beside the rt_driver operations. Windows only; any thread.
 */
#ifndef BERTH_RUNTIME_HCS_DRIVER_H
#define BERTH_RUNTIME_HCS_DRIVER_H

#include "runtime/driver.h"
#include "runtime/hcs/admit.h"
#include "runtime/hcs/props.h"

extern const struct rt_driver rt_hcs_driver;

/* What start-up detection found (health's runtime.isolations). ctx from rt_hcs_driver.open. */
void hcs_driver_caps(void *ctx, struct hcs_caps *out);

/*
 * Replaces the commit reader of admission (GetPerformanceInfo by
 * default): tests give a host of any size. Call before any create.
 */
void hcs_driver_set_commit_reader(void *ctx, hcs_commit_read_fn read, void *arg);

#endif
