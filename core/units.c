/* units.c: byte counts and bandwidths with the unit that reads well (core/units.h). */
#include "core/units.h"

#include <math.h>
#include <stdio.h>

char *units_bytes(double bytes, char *buf, size_t n)
{
    static const char *const u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int i = 0;
    double v = bytes;
    while (fabs(v) >= 1024 && i < 4) {
        v /= 1024;
        i++;
    }
    snprintf(buf, n, i == 0 ? "%.0f %s" : "%.2f %s", v, u[i]);
    return buf;
}

char *units_gbit(double bytes_per_s, char *buf, size_t n)
{
    snprintf(buf, n, "%.3g Gbit/s", bytes_per_s * 8 / 1e9);
    return buf;
}
