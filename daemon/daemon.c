/* Small accessors of the daemon state; loop thread. */
#include "daemon/daemon.h"

double
daemon_uptime_s(const struct daemon *d)
{
    return (double)(uv_hrtime() - d->started_hr) / 1e9;
}
